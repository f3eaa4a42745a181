//! Communication between ranks: the [`Comm`] trait, a single-rank
//! implementation, in-process ranks over shared memory (`--local-ranks`),
//! and an MPI implementation behind the `mpi` feature; `cuda_aware` asks
//! the MPI library whether it takes device buffers (`--halo mpi-device`).
//!
//! The driver talks only to `dyn Comm`; whether MPI is compiled in is decided
//! once, in [`init`], so no other module needs `#[cfg]`. [`with_comm`] runs
//! a job on the communicator and makes sure a failing rank never leaves the
//! others waiting.

pub mod agree;
pub mod api;
pub mod cuda_aware;
pub mod decide;
pub mod launcher;
pub mod local;
#[cfg(feature = "mpi")]
mod mpi_comm;
#[cfg(not(feature = "mpi"))]
mod no_mpi;
mod single;

pub use agree::{Terms, agree};
pub use api::{Comm, HaloSwap, Launch};
pub use decide::decide;
pub use launcher::{hostname, is_first_rank, launcher_rank, launcher_size};
pub use single::SingleComm;

#[cfg(feature = "mpi")]
use mpi_comm as mpi_impl;
#[cfg(not(feature = "mpi"))]
use no_mpi as mpi_impl;

use crate::error::{Error, Result};
use std::process::ExitCode;

/// Starts communication for this process: MPI when the `mpi` feature is
/// built in, otherwise a single rank (refusing to run as one of several
/// ranks started by a launcher).
pub fn init() -> Result<Box<dyn Comm>> {
    mpi_impl::init()
}

/// Whether this build can run multi-rank jobs.
pub const MPI_ENABLED: bool = cfg!(feature = "mpi");

/// Starts the job's ranks: `local_ranks` threads of this process when it
/// is given (`--local-ranks N`), otherwise MPI or a single rank, runs `job` on each,
/// and turns the outcome into the exit code. An error every rank finds
/// alike (bad input, a wrong answer) is printed by rank 0 alone; any other
/// may be local to one rank, which prints it and aborts the whole job, so
/// that no rank is left waiting.
pub fn with_comm(
    local_ranks: Option<usize>,
    job: impl Fn(&dyn Comm) -> Result<ExitCode> + Sync,
) -> ExitCode {
    let speaker = is_first_rank();
    // One process's standard output serves all its ranks: refused here,
    // before any rank starts, with one line. Under a launcher each process
    // has its own, and the agreement refuses the job for rank 0's.
    if launcher_size().unwrap_or(1) <= 1
        && let Err(e) = crate::output::check_stdout_open()
    {
        return crate::error::exit(Err(e), speaker);
    }
    match local_ranks {
        Some(n) => match check_local(n) {
            Ok(()) => local::run(n, &job, finish),
            // Every rank a launcher started fails alike: let one speak.
            Err(e) => crate::error::exit(Err(e), speaker),
        },
        None => match init() {
            Ok(comm) => finish(comm.as_ref(), job(comm.as_ref())),
            Err(e) => crate::error::exit(Err(e), speaker),
        },
    }
}

/// Checks `--local-ranks N`: a sane count, and not inside a job of several
/// MPI ranks (each would start its own N threads and run alone).
fn check_local(n: usize) -> Result<()> {
    if n == 0 || n > local::MAX_LOCAL_RANKS {
        return Err(Error::usage(format!(
            "--local-ranks {n} must be between 1 and {}",
            local::MAX_LOCAL_RANKS
        )));
    }
    match launcher_size() {
        Some(m) if m > 1 => Err(Error::usage(format!(
            "--local-ranks runs ranks as threads of one process and cannot be combined with \
             the {m} ranks a launcher started: use either mpirun/srun or --local-ranks"
        ))),
        _ => Ok(()),
    }
}

/// One rank's exit code for `outcome`; see [`with_comm`].
fn finish(comm: &dyn Comm, outcome: Result<ExitCode>) -> ExitCode {
    match outcome {
        Err(e @ (Error::Usage(_) | Error::Verification(_))) => {
            crate::error::exit(Err(e), comm.rank() == 0)
        }
        Err(e) => {
            let line = format!("himeno: rank {}: {e}", comm.rank());
            if comm.size() > 1 {
                comm.fail(&line, i32::from(e.exit_code()));
            }
            crate::error::print_line(&line);
            e.to_exit_code()
        }
        ok => crate::error::exit(ok, false),
    }
}
