//! Evaluation tools that run beside the stencil benchmark
//! (`himeno bench ...`).

pub mod transfer;

use crate::cli::BenchCommand;
use std::process::ExitCode;

/// Runs the benchmark tool `cmd` and maps its outcome to the exit code
/// (0 success, 2 usage or runtime error).
pub fn run(cmd: &BenchCommand) -> ExitCode {
    let outcome = match cmd {
        BenchCommand::Transfer(args) => transfer::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("himeno: {e}");
            e.to_exit_code()
        }
    }
}
