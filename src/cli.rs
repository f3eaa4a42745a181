//! The command line's grammar, nothing else: the commands and where each
//! one's options are defined (a run's and the self-test's in
//! `crate::run::args`, each tool's in its module), and the one line a
//! usage error becomes. What the options mean is checked by the command
//! that takes them.

use crate::bench::BenchArgs;
use crate::gpu_check::GpuCheckArgs;
use crate::run::args::{RunArgs, SelftestArgs};
use crate::study::plan::PlanArgs;
use crate::study::{ModelArgs, ReportArgs};
use clap::{Parser, Subcommand};

/// The Himeno benchmark (RIKEN's 19-point Jacobi kernel) as a distributed
/// solver: MPI ranks on a 3D process grid, CPU threads or a GPU per rank.
#[derive(Debug, Parser)]
#[command(
    name = "himeno",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// A tool other than the benchmark run.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the benchmark run (when no subcommand is given).
    #[command(flatten)]
    pub run: RunArgs,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// Tools beside the benchmark run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the benchmark (the default when no subcommand is given).
    Run(RunArgs),
    /// Check the halo exchange: fill points with a function of their global
    /// index, exchange, and check every ghost (faces, edges, corners).
    Selftest(SelftestArgs),
    /// Tables and plots of scaling studies from results files.
    Report(ReportArgs),
    /// Predict time per iteration and the compute/communication split.
    Model(ModelArgs),
    /// List the runs of scaling-study definitions (what scripts/sweep.sh
    /// and the job templates run).
    Plan(PlanArgs),
    /// Evaluation benchmarks beside the solver (memory bandwidth, MPI
    /// ping-pong, host<->device transfers).
    Bench(BenchArgs),
    /// Check a GPU machine in one call: correctness of the GPU backend
    /// against the CPU on 1, 2 and 4 in-process ranks with every staging,
    /// overlap and occupancy variant, then transfer and solver timing.
    /// Exit 0 PASS, 1 FAIL, 2 setup error, 3 PARTIAL.
    GpuCheck(GpuCheckArgs),
}

/// Condenses a clap error into the one line every usage error gets: the
/// problem (and clap's tip or possible values), then where to look, without
/// the usage block.
pub fn one_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
        // clap does not say which argument.
        return "an argument is not valid UTF-8 text: only file names (--output, --plot, \
                results and ping-pong files) and --label may hold other bytes; see \
                `himeno --help`"
            .to_string();
    }
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    format!("{}; see `himeno --help`", parts.join(" "))
}
