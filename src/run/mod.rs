//! The benchmark run and the halo self-test, next to their options:
//!
//! - [`args`]: their grammar (clap), which `crate::cli` includes;
//! - `validate`: the options into a [`crate::config::RunConfig`] (and the
//!   self-test's problem), after the job decides where its ranks sweep;
//! - `job`: the benchmark job (backend, solver, verdict, report);
//! - `outputs`: the run's files and checkpoint folder, distinct;
//! - `selftest`: the halo self-test job.

pub mod args;
mod job;
mod outputs;
mod selftest;
mod validate;

pub use job::benchmark;
pub use selftest::selftest;
