//! The tests compiled into both test binaries: each runs once per launcher
//! of its tier (`common::launchers`), in-process ranks in the fast tier and
//! `mpirun` in the system tier, so one body checks both launchers without
//! running twice anywhere. The helpers of these areas that the fast and
//! system tests share live here beside them.

#![allow(dead_code)]

pub mod bad_input;
pub mod checkpoint;
pub mod energy;
pub mod failures;
pub mod gpu;
pub mod gpu_emu;
pub mod ranks;
pub mod signals;
pub mod stream;
pub mod study;
pub mod temporal;
pub mod trace;
