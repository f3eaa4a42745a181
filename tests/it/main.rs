//! The fast tier of the integration tests, what a plain `cargo test` runs:
//! one module per behaviour, each running the real `himeno` binary on tiny
//! grids, with in-process ranks (`--local-ranks`), and nothing outside the
//! target folder: no `mpirun`, no daemons or namespaces, no compilers, no
//! downloads. What needs real components or long runs is the system tier
//! (`tests/system`, `cargo test --test system`); the tests of `tests/both`
//! are compiled into both and run on each tier's launcher.

/// This binary is the fast tier (see `common::launchers`).
const SYSTEM_TIER: bool = false;

mod append;
mod bad_input;
#[path = "../both/mod.rs"]
mod both;
mod checkpoint;
#[path = "../common/mod.rs"]
mod common;
mod compare;
mod docs;
mod energy;
mod environment;
mod failures;
mod fuzz;
mod gpu;
mod gpu_check;
mod gpu_emu;
mod gpu_model;
mod halo_path;
mod inputs;
mod layers;
mod original;
mod outputs;
mod ranks;
mod records;
mod rehearsal;
mod report_formats;
mod resources;
mod run;
mod signals;
mod slurm_energy;
mod stopping;
mod stream;
mod study;
mod temporal;
mod trace;
