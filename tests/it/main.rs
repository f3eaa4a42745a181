//! The integration tests: one binary, one module per area. Every test runs
//! the real `himeno` binary; multi-rank tests run it under a real `mpirun`.

mod append;
mod bad_input;
mod c_peer;
mod common;
mod failures;
mod fuzz;
mod gpu;
mod known_answers;
mod layers;
mod mpi;
mod run;
mod signals;
mod stream;
mod study;
mod temporal;
