//! The crate's error type and its mapping to process exit codes.
//!
//! Exit codes are part of the product's contract with batch scripts:
//! 0 success, 1 verification failed (the numbers are wrong), 2 usage or
//! runtime error (the run could not be done as asked).

use std::fmt;
use std::process::ExitCode;

/// Everything that can stop a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bad input detected identically on every rank (sizes, grids, options).
    /// Every rank returns it; only rank 0 prints it.
    Usage(String),
    /// Something failed at run time (I/O, device, MPI); may be rank-local.
    Runtime(String),
    /// The computed answer is wrong (known answer, reference or NaN guard).
    Verification(String),
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Shorthand for a usage error.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// Shorthand for a runtime error.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Runtime(msg.into())
    }

    /// The exit code this error maps to (1 for verification, 2 otherwise).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Verification(_) => 1,
            Error::Usage(_) | Error::Runtime(_) => 2,
        }
    }

    /// The process exit code for this error.
    pub fn to_exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit_code())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) => write!(f, "error: {m}"),
            Error::Runtime(m) => write!(f, "error: {m}"),
            Error::Verification(m) => write!(f, "verification FAILED: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Runtime(e.to_string())
    }
}
