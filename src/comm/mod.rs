//! Communication between ranks: the [`Comm`] trait, a single-rank
//! implementation, and an MPI implementation behind the `mpi` feature.
//!
//! The driver talks only to `dyn Comm`; whether MPI is compiled in is decided
//! once, in [`init`], so no other module needs `#[cfg]`. [`with_comm`] runs
//! a job on the communicator and makes sure a failing rank never leaves the
//! others waiting.

pub mod agree;
pub mod api;
pub mod launcher;
#[cfg(feature = "mpi")]
mod mpi_comm;
#[cfg(not(feature = "mpi"))]
mod no_mpi;
mod single;

pub use agree::{Terms, agree};
pub use api::Comm;
pub use launcher::{hostname, launcher_rank, launcher_size};
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

/// Starts communication, runs `job`, and turns its outcome into the exit
/// code. An error every rank finds alike (bad input, a wrong answer) is
/// printed by rank 0 alone; any other may be local to this rank, which
/// prints it and aborts the whole job, so that no rank is left waiting.
pub fn with_comm(job: impl FnOnce(&dyn Comm) -> Result<ExitCode>) -> ExitCode {
    let comm = match init() {
        Ok(c) => c,
        // Every rank a launcher started fails alike: let one speak.
        Err(e) => return crate::error::exit(Err(e), launcher_rank().unwrap_or(0) == 0),
    };
    match job(comm.as_ref()) {
        Err(e @ (Error::Usage(_) | Error::Verification(_))) => {
            crate::error::exit(Err(e), comm.rank() == 0)
        }
        Err(e) => {
            crate::error::tell(&format!("himeno: rank {}: {e}", comm.rank()));
            if comm.size() > 1 {
                comm.abort(i32::from(e.exit_code()));
            }
            e.to_exit_code()
        }
        ok => crate::error::exit(ok, false),
    }
}
