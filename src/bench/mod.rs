//! `himeno bench`: micro-benchmarks that measure what bounds the solver
//! (memory bandwidth, and on other branches messaging and host<->device
//! transfer), run with the solver's own setup so the numbers compare.

pub mod stream;

use crate::comm::Comm;
use crate::error::Result;
use clap::Subcommand;
use std::process::ExitCode;

/// The benchmarks of `himeno bench`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// STREAM Copy/Scale/Add/Triad with the solver's threads, pinning and
    /// first-touch placement; per rank and aggregated under MPI.
    Stream(stream::StreamArgs),
}

/// Runs the benchmark `cmd` on every rank of `comm`.
pub fn run(cmd: &BenchCommand, comm: &dyn Comm) -> Result<ExitCode> {
    match cmd {
        BenchCommand::Stream(args) => stream::run(args, comm),
    }
}
