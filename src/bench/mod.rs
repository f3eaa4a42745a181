//! Benchmarks beside the solver that evaluators run on a machine: MPI
//! point-to-point (`pingpong`). Each subcommand lives in its own module.

pub mod pingpong;

use clap::{Args, Subcommand};

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
    /// MPI latency and bandwidth between rank pairs (run under mpirun/srun).
    Pingpong(pingpong::PingpongArgs),
}
