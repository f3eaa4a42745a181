//! The GPU backend's entry points in `cuda` builds: whether a GPU is
//! usable, and creating a rank's backend collectively.

use super::compile;
use super::device_backend::{GpuBackend, Kernels, Opened};
use super::driver::{self, Device, cuda_err};
use super::launch::{self, SweepPlan};
use super::layout::FieldLayout;
use super::memcheck::{self, Report};
use super::options::GpuOptions;
use crate::backend::api::Backend;
use crate::comm::{self, Comm};
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face};

/// Whether a usable GPU is present: the CUDA driver and NVRTC load, the
/// driver initialises and sees a device. Never panics.
pub fn available() -> bool {
    match driver::probe() {
        Ok(_) => true,
        Err(why) => {
            tracing::info!("no usable GPU: {why}");
            false
        }
    }
}

/// Creates the GPU backend of this rank. Collective, in three steps that
/// every rank goes through together: open the device and load the kernels,
/// check that each GPU has the memory of all the ranks that share it, then
/// allocate. After each step every rank learns whether all succeeded, so
/// that no rank waits forever for one that failed; a failure, of every rank
/// or of some, is then one error on every rank that rank 0 prints (with the
/// failing rank's number and message) and that ends every rank with exit
/// 2, without an abort.
pub fn create(
    cfg: &GpuOptions,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    let (opened, plan) = same_outcome_everywhere(open(cfg, block, comm), comm)?;
    // Every rank has opened its device and loaded its kernels (the step
    // above is collective), and none has allocated yet.
    let (free, _total) = same_outcome_everywhere(opened.dev.memory(), comm)?;
    let dims = block.local_dims();
    let faces: Vec<Face> = block.halo_faces().map(|(f, _)| f).collect();
    let layout = FieldLayout::of(cfg.layout, dims);
    let mine = Report {
        host: comm.host(),
        device: opened.dev.identity.clone(),
        description: opened.dev.description.clone(),
        // The device paths receive into face buffers of their own.
        need: launch::device_bytes(&layout, plan.partials, &faces)
            + if cfg.halo.device_direct() {
                launch::device_bytes(&layout, 0, &faces) - launch::device_bytes(&layout, 0, &[])
            } else {
                0
            },
        free,
        pid: std::process::id(),
        mps: super::mps::active(),
    };
    memcheck::check(&mine, comm)?;
    let gpu = same_outcome_everywhere(GpuBackend::new(opened, plan, grid, block, cfg, comm), comm)?;
    Ok(Box::new(gpu))
}

/// Every rank's outcome of one step: `mine` when every rank succeeded,
/// else the same failure on every rank, decided together (see
/// [`create`]): rank 0 returns the first failing rank's message, naming
/// the rank when not every rank failed, so that one line tells the user and
/// every rank ends without an abort (an abort may cut the launcher's
/// forwarding of the lines already written).
fn same_outcome_everywhere<T>(mine: Result<T>, comm: &dyn Comm) -> Result<T> {
    // Each rank's view: its failure's message, or none.
    let failure = mine.as_ref().err().map(|e| e.message().to_string());
    comm::decide(comm, "the GPU start", &failure, |all| first_failure(&all))?;
    mine
}

/// The one error for the failures among every rank's `all` (`None`: that
/// rank succeeded), or `Ok` when none failed.
fn first_failure(all: &[Option<String>]) -> Result<()> {
    let mut failing = all
        .iter()
        .enumerate()
        .filter_map(|(r, m)| m.as_ref().map(|m| (r, m)));
    let Some((rank, first)) = failing.next() else {
        return Ok(());
    };
    let others = failing.count();
    Err(Error::usage(if others + 1 == all.len() {
        first.clone()
    } else if others == 0 {
        format!("rank {rank}: {first}")
    } else {
        format!("rank {rank}: {first} (and {others} more rank(s) could not start their GPU)")
    }))
}

/// Opens this rank's device, plans its launches, and compiles and loads
/// the kernels (ranks of one process compile once).
fn open(cfg: &GpuOptions, block: &Block, comm: &dyn Comm) -> Result<(Opened, SweepPlan)> {
    let probe = driver::probe().map_err(Error::usage)?;
    super::nvtx::init();
    let count = probe.devices;
    let ordinal = driver::choose(cfg.device, comm.node_rank(), count)?;
    // Said once per node (by its first rank without a GPU of its own):
    // in-process ranks on one GPU share it by design.
    if cfg.device.is_none() && comm.node_rank() == count {
        tracing::warn!(
            ranks = comm.node_size(),
            devices = count,
            "more ranks than GPUs on this node: ranks share GPUs (node-local rank modulo {count})"
        );
    }
    let plan = SweepPlan::of(block)?;
    // Said before the device is opened, so that the log tells even when
    // opening it fails.
    if let Some(emu) = driver::emulator() {
        tracing::info!(
            rank = comm.rank(),
            emulator = %emu,
            "the CUDA driver is an emulator: its times are not GPU performance"
        );
    }
    let dev = Device::open(ordinal)?;
    tracing::info!(
        rank = comm.rank(),
        host = %comm.host(),
        device = %dev.description,
        software = %probe.describe(),
        "GPU chosen"
    );
    let compiled = compile::compile(probe.nvrtc, dev.cc, cfg.occupancy, cfg.sweep)?;
    let module = dev.ctx.load_module(compiled.ptx.clone()).map_err(|e| {
        let newer = probe.nvrtc.version.0 > probe.driver.0;
        Error::runtime(format!(
            "CUDA error while loading the compiled kernels: {e:?}{}",
            if newer {
                format!(
                    " (NVRTC {} is newer than the driver's CUDA {}.{}: set HIMENO_NVRTC_LIB \
                         to an NVRTC of CUDA {} or older)",
                    probe.nvrtc.version_string(),
                    probe.driver.0,
                    probe.driver.1,
                    probe.driver.0
                )
            } else {
                String::new()
            }
        ))
    })?;
    let kernels = Kernels::load(&module, cfg.sweep)?;
    dev.ctx
        .bind_to_thread()
        .map_err(cuda_err("binding the context"))?;
    Ok((
        Opened {
            probe,
            dev,
            compiled,
            kernels,
        },
        plan,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_error_names_the_first_failing_rank_unless_all_failed() {
        let no = |s: &str| Some(s.to_string());
        assert!(first_failure(&[None, None]).is_ok());
        let e = first_failure(&[None, no("no device"), None]).unwrap_err();
        assert_eq!(e, Error::usage("rank 1: no device"));
        let e = first_failure(&[None, no("a"), no("b")]).unwrap_err();
        assert!(e.message().contains("and 1 more rank(s)"), "{e}");
        let e = first_failure(&[no("x"), no("y")]).unwrap_err();
        assert_eq!(e, Error::usage("x"));
    }
}
