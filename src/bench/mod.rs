//! Evaluation tools that run beside the stencil benchmark
//! (`himeno bench ...`): memory bandwidth (`stream`, with the solver's own
//! threads and placement), MPI point-to-point (`pingpong`), host<->device
//! transfers (`transfer`) and the cost of recording a `--trace` event
//! (`trace`). Each tool lives in its own module.

pub mod pingpong;
pub mod stream;
pub mod trace;
pub mod transfer;

use crate::comm::with_comm;
use crate::error;
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// Options of `himeno bench`.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    /// Which benchmark to run.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand, Clone)]
pub enum BenchCommand {
    /// STREAM Copy/Scale/Add/Triad with the solver's threads, pinning and
    /// first-touch placement; per rank and aggregated under MPI.
    Stream(stream::StreamArgs),
    /// MPI latency and bandwidth between rank pairs (run under mpirun/srun).
    Pingpong(pingpong::PingpongArgs),
    /// Host<->device copy bandwidth and latency, pinned vs pageable host
    /// memory, and the device-to-device copy bandwidth (GPU builds).
    Transfer(transfer::TransferArgs),
    /// The cost of recording one `--trace` event (a tight loop of the
    /// solver's phase lap with and without a recorder), for the bound on
    /// the trace's overhead.
    Trace(trace::TraceBenchArgs),
}

/// Runs the benchmark `args` asks for and maps its outcome to the exit code
/// (0 success, 2 usage or runtime error).
pub fn run(args: &BenchArgs) -> ExitCode {
    match &args.command {
        BenchCommand::Stream(a) => with_comm(a.launch.local_ranks, |comm| stream::run(a, comm)),
        BenchCommand::Pingpong(a) => with_comm(a.launch.local_ranks, |comm| pingpong::run(a, comm)),
        // It measures one device from one process: once per job.
        BenchCommand::Transfer(_) if !crate::comm::is_first_rank() => ExitCode::SUCCESS,
        // It does not communicate, so no agreement checks its standard
        // output (see `comm::agree`).
        BenchCommand::Transfer(a) => error::exit(
            crate::output::check_stdout_open().and_then(|()| transfer::run(a)),
            true,
        ),
        // One process measures its own thread.
        BenchCommand::Trace(a) => error::exit(
            crate::output::check_stdout_open().and_then(|()| trace::run(a)),
            true,
        ),
    }
}
