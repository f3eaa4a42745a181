//! The system tier: the integration tests that need real components or
//! long runs, which a plain `cargo test` leaves out (this target is
//! declared with `test = false`; `cargo test --test system` runs it, and
//! `scripts/test.sh` does for every build). Here are runs under a real
//! `mpirun` (Open MPI or MPICH, `HIMENO_MPIRUN`), the virtual Slurm cluster
//! (only with `HIMENO_CLUSTER=1`), ReFrame, the emulated GPU and the stub
//! CUDA driver (compiled here with a C/C++ compiler), the C peers, memory
//! limits and cgroups, and the runs whose time limits assume an optimised
//! build. The tests of `tests/both` are compiled in here too, and run on
//! this tier's launcher (`mpirun`).

/// This binary is the system tier (see `common::launchers`).
const SYSTEM_TIER: bool = true;

mod append;
#[path = "../both/mod.rs"]
mod both;
mod c_peer;
mod checkpoint;
mod cluster;
#[path = "../common/mod.rs"]
mod common;
mod emulated_gpu;
mod energy;
mod gpu;
mod gpu_emu;
mod gpu_emu_driver;
mod gpu_emu_layout;
mod gpu_emu_variants;
mod gpu_first_run;
mod gpu_halo;
mod gpu_nccl;
mod html_browser;
mod inputs;
mod known_answers;
mod launch;
mod prefetch;
mod ranks;
mod reframe;
mod rehearsal;
mod resources;
mod signals;
mod stopping;
mod stream;
mod temporal;
mod trace;
