//! The options of `himeno gpu-check` as typed, and their validation into
//! its [`Settings`].

use crate::args::whole;
use crate::config::MAX_ITERATIONS;
use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// What `himeno gpu-check` was asked to do, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The binary to check.
    pub himeno: PathBuf,
    /// The results folder the user named; `None`: a fresh private one.
    pub out: Option<PathBuf>,
    /// Iterations of each correctness run.
    pub iterations: u64,
    /// Iterations of each XL timing run.
    pub xl_iterations: u64,
    /// Iterations of each L phase-split run.
    pub l_iterations: u64,
    /// Time limit of each run.
    pub run_limit: Duration,
    /// Small grids for every step (the timing ones included).
    pub quick: bool,
    /// The whole check's time: no run starts once it is spent, and a run
    /// going then is stopped.
    pub budget: Duration,
    /// Prefix of the system folders searched for NVRTC (`/`; a fake tree
    /// in tests).
    pub search_root: PathBuf,
}

/// Options of `himeno gpu-check`.
#[derive(Debug, Args, Clone)]
pub struct GpuCheckArgs {
    /// The himeno binary to check (default: this one).
    #[arg(long, value_name = "PATH")]
    pub himeno: Option<PathBuf>,
    /// Results folder: gpu-check.txt (the report), results.jsonl (every
    /// run's record with its "check" label), transfer.json, details.tar.gz
    /// (each run's command line, stdout and stderr). Created if missing
    /// (not its parents), else it must be empty: nothing in it is replaced.
    /// Default: a fresh private folder $TMPDIR/himeno-gpu-check.XXXXXX.
    #[arg(long, value_name = "DIR", env = crate::environment::GPU_CHECK_DIR)]
    pub out: Option<PathBuf>,
    /// Iterations of each correctness run [default: 20, --quick 4].
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub iterations: Option<u64>,
    /// Iterations of each XL timing run.
    #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub xl_iterations: u64,
    /// Iterations of each L phase-split run.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub l_iterations: u64,
    /// Seconds one run may take; a run still going then is killed and its
    /// part fails.
    #[arg(long, value_name = "SECONDS", default_value_t = 180, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub run_limit: u64,
    /// Every step on small grids with few iterations (the timing tables
    /// on grids standing in for XL and L) and a small transfer benchmark:
    /// for CI on an emulated device.
    #[arg(long)]
    pub quick: bool,
    /// Seconds the whole check may take: the steps run in order of value,
    /// no run starts once the budget is spent (a run going then is
    /// stopped), and the report says which steps were skipped.
    #[arg(long, value_name = "SECONDS", default_value_t = 480, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub budget: u64,
    /// Prefix of the system folders searched for NVRTC (a fake tree, for
    /// tests).
    #[arg(long, hide = true, value_name = "DIR", default_value = "/")]
    pub search_root: PathBuf,
}

/// Longest accepted `--run-limit`: a day.
const MAX_RUN_LIMIT_S: u64 = 24 * 3600;

impl GpuCheckArgs {
    /// Validates the options; the binary defaults to the running one.
    pub fn settings(&self) -> Result<Settings> {
        let iterations = self.iterations.unwrap_or(if self.quick { 4 } else { 20 });
        for (name, n) in [
            ("--iterations", iterations),
            ("--xl-iterations", self.xl_iterations),
            ("--l-iterations", self.l_iterations),
        ] {
            if !(1..=MAX_ITERATIONS).contains(&n) {
                return Err(Error::usage(format!(
                    "{name} {n} must be from 1 to {MAX_ITERATIONS}"
                )));
            }
        }
        for (name, s) in [("--run-limit", self.run_limit), ("--budget", self.budget)] {
            if !(1..=MAX_RUN_LIMIT_S).contains(&s) {
                return Err(Error::usage(format!(
                    "{name} {s} must be from 1 to {MAX_RUN_LIMIT_S} seconds"
                )));
            }
        }
        let himeno = match &self.himeno {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| {
                Error::runtime(format!(
                    "cannot tell which binary is running ({e}): give --himeno PATH"
                ))
            })?,
        };
        Ok(Settings {
            himeno,
            out: self.out.clone(),
            iterations,
            xl_iterations: self.xl_iterations,
            l_iterations: self.l_iterations,
            run_limit: Duration::from_secs(self.run_limit),
            quick: self.quick,
            budget: Duration::from_secs(self.budget),
            search_root: self.search_root.clone(),
        })
    }
}
