//! Running the halo self-test (`himeno selftest`): the problem agreed by
//! every rank, the memory check, then the exchange checked on host
//! patterns or on each rank's GPU.

use super::args::SelftestArgs;
use super::validate;
use crate::backend;
use crate::comm;
use crate::config::{BackendKind, GpuLayout, Occupancy, Staging, SweepVariant};
use crate::error::Outcome;
use crate::grid::decomp::Block;
use crate::output;
use crate::preflight;
use crate::selftest;
use std::process::ExitCode;

/// Runs the halo self-test described by `args`.
pub fn selftest(args: &SelftestArgs) -> ExitCode {
    comm::with_comm(args.launch.local_ranks, |comm| {
        let problem = comm::agree(comm, args.resolve(comm.size()), |p| {
            vec![
                ("command", "selftest".into()),
                ("grid", p.grid.to_string()),
                ("process grid", p.procs.to_string()),
                ("temporal", args.temporal.to_string()),
            ]
        })?;
        let block = Block::of(&problem.grid, &problem.procs, comm.rank()).with_depth(args.temporal);
        preflight::check_need(
            &format!("grid {}", problem.grid),
            preflight::driver_footprint(&block, None) + selftest::footprint(&block),
            comm,
        )?;
        let checked = match validate::resolve_backend(args.backend, args.temporal, comm)? {
            BackendKind::Cpu => selftest::halo_self_test(comm, &problem, args.temporal, None)?,
            BackendKind::Gpu => {
                let opts = backend::gpu::GpuOptions {
                    device: args.device,
                    staging: args.staging.unwrap_or(Staging::Pinned),
                    overlap: false,
                    occupancy: Occupancy::Auto,
                    sweep: SweepVariant::Classic,
                    halo: crate::config::HaloPath::Staged,
                    layout: GpuLayout::Exact,
                };
                let mut gpu = backend::gpu::create(&opts, &problem.grid, &block, comm)?;
                selftest::halo_self_test(comm, &problem, args.temporal, Some(gpu.as_mut()))?
            }
        };
        let mut total = [checked as f64];
        comm.sum(&mut total);
        if comm.rank() == 0 {
            output::print_report(&format!(
                "halo self-test passed: grid {}, process grid {}, {} ghost values checked\n",
                problem.grid, problem.procs, total[0]
            ))?;
        }
        Ok(Outcome::Done.exit_code())
    })
}
