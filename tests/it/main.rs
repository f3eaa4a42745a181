//! The integration tests: one binary, one module per area. Every test runs
//! the real `himeno` binary; multi-rank tests run it under a real `mpirun`.

mod append;
mod bad_input;
mod c_peer;
mod checkpoint;
mod cluster;
mod common;
mod compare;
mod docs;
mod emulated_gpu;
mod environment;
mod failures;
mod fuzz;
mod gpu;
mod gpu_check;
mod gpu_emu;
mod gpu_emu_driver;
mod hostile;
mod known_answers;
mod layers;
mod prefetch;
mod ranks;
mod records;
mod reframe;
mod rehearsal;
mod run;
mod signals;
mod stream;
mod study;
mod temporal;
mod trace;
