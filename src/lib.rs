//! himeno: the Himeno benchmark (RIKEN's 19-point Jacobi kernel for a 3D
//! Poisson problem) as a distributed solver. MPI ranks on a Cartesian
//! process grid each sweep their block on CPU threads or a GPU, exchange the
//! halo of `p` dimension by dimension, and report MFLOPS, gosa and the
//! compute/communication split.
//!
//! [`main_entry`] is the whole program; `main.rs` only calls it.

// The layers, lowest first: a module (with all its submodules) imports
// only from its own layer or those below. This is the one copy of the map;
// `tests/it/layers.rs` reads it (one `N. module, module;` line per layer)
// and keeps every file of `src/` to it. This entry point is above them all.
// 1. error, environment, hash, timing, timeline, signals, progress, output, files, build;
// 2. machine, grid, comm;
// 3. problem, verify;
// 4. config;
// 5. backend;
// 6. halo, checkpoint, solver, calibrate, temporal, kernel_choice, preflight, selftest, fault, trace, energy;
// 7. args, report, bench, study, gpu_check;
// 8. run;
// 9. cli;
pub mod args;
pub mod backend;
pub mod bench;
pub mod build;
pub mod calibrate;
pub mod checkpoint;
pub mod cli;
pub mod comm;
pub mod config;
pub mod energy;
pub mod environment;
pub mod error;
pub mod fault;
pub mod files;
pub mod gpu_check;
pub mod grid;
pub mod halo;
pub mod hash;
pub mod kernel_choice;
pub mod machine;
pub mod output;
pub mod preflight;
pub mod problem;
pub mod progress;
pub mod report;
pub mod run;
pub mod selftest;
pub mod signals;
pub mod solver;
pub mod study;
pub mod temporal;
pub mod timeline;
pub mod timing;
pub mod trace;
pub mod verify;

use clap::Parser;
use cli::{Cli, Command};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Parses the command line, runs what it asks and maps the outcome to the
/// process exit code (0 success, 1 verification failed, 2 error; see
/// [`error::Outcome::code`]).
pub fn main_entry() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // One rank of many refused its arguments: the others may have
            // accepted theirs and be waiting in their first collective, so
            // this rank joins the agreement they start with, and every
            // rank stops with exit 2 and one line from rank 0.
            if e.use_stderr() && comm::MPI_ENABLED && comm::launcher_size().is_some_and(|n| n > 1) {
                let line = cli::one_line(&e);
                let refused =
                    error::Error::usage(line.strip_prefix("error: ").unwrap_or(&line).to_string());
                return comm::with_comm(None, |comm| {
                    comm::agree::<()>(comm, Err(refused.clone()), |_| Vec::new())
                        .map(|()| error::Outcome::BadInput.exit_code())
                });
            }
            if !comm::is_first_rank() {
                return if e.use_stderr() {
                    error::Outcome::BadInput
                } else {
                    error::Outcome::Done
                }
                .exit_code();
            }
            if e.use_stderr() {
                error::print_line(&format!("himeno: {}", cli::one_line(&e)));
                return error::Outcome::BadInput.exit_code();
            }
            // --help and --version: the text is the output, and a standard
            // output that cannot take it is an error like any report's.
            return error::exit(
                output::check_stdout_open()
                    .and_then(|()| output::print_report(&e.render().to_string()))
                    .map(|()| error::Outcome::Done.exit_code()),
                true,
            );
        }
    };
    init_logging(cli.verbose);
    match cli.command {
        None => run::benchmark(&cli.run),
        Some(Command::Run(args)) => run::benchmark(&args),
        Some(Command::Selftest(args)) => run::selftest(&args),
        // The tools that do not communicate do their work once: under a
        // launcher, the other ranks neither print a second copy nor write
        // the same plot files at the same time.
        Some(Command::Report(_) | Command::Model(_) | Command::Plan(_))
            if !comm::is_first_rank() =>
        {
            error::Outcome::Done.exit_code()
        }
        // These do not communicate, so no agreement checks standard output
        // for them (see `comm::agree`).
        Some(Command::Report(args)) => once(|| study::report(&args)),
        Some(Command::Model(args)) => once(|| study::model(&args)),
        Some(Command::Plan(args)) => once(|| study::plan::plan(&args)),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::GpuCheck(args)) => {
            error::exit(args.settings().and_then(|s| gpu_check::run(&s)), true)
        }
    }
}

/// Runs a tool that does not communicate, once it is known that its
/// report has a standard output to go to.
fn once(tool: impl FnOnce() -> error::Result<ExitCode>) -> ExitCode {
    error::exit(output::check_stdout_open().and_then(|()| tool()), true)
}

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug;
/// `RUST_LOG` overrides.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = environment::get(environment::RUST_LOG)
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(level));
    // Colour codes only for a terminal: batch logs must stay plain text.
    // A log line that cannot be written (`2>/dev/full`) is dropped: the
    // subscriber's own report of it would go through `eprintln!`, which
    // panics on such a stderr and turns the run's verdict into an abort.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .log_internal_errors(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
