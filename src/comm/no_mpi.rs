//! Stand-in for the MPI communicator in builds without the `mpi` feature:
//! runs one rank, and refuses to be one of many copies started by a launcher.

use super::api::Comm;
use super::single::SingleComm;
use crate::error::{Error, Result};

/// Returns the single-rank communicator, or an error when a launcher started
/// this process as one of several ranks (which would otherwise run N
/// independent copies of the benchmark).
pub fn init() -> Result<Box<dyn Comm>> {
    match super::launcher::launcher_size() {
        Some(n) if n > 1 => Err(Error::usage(format!(
            "this build has no MPI support but was started as one of {n} ranks: \
             rebuild with `cargo build --release --features mpi`, or run one rank"
        ))),
        _ => {
            super::local::install_exit_hook();
            Ok(Box::new(SingleComm))
        }
    }
}
