//! The integration tests: one binary, one module per area. Every test runs
//! the real `himeno` binary; multi-rank tests run it under a real `mpirun`.

mod common;
mod known_answers;
mod mpi;
mod run;
mod stream;
