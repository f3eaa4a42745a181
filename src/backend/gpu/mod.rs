//! The GPU backend (feature `cuda`): each rank sweeps its block on one
//! NVIDIA GPU through cudarc, with kernels compiled at start by NVRTC.
//! Without the feature, [`disabled`] has the same functions, which explain
//! how to get GPU support, so callers need no `#[cfg]`.
//!
//! - `enabled`: whether a GPU is usable, and creating a rank's backend;
//! - `driver`: probing the libraries (cudarc panics without them), device
//!   choice by node-local rank, the device description, memory preflight;
//! - `compile`: NVRTC compilation of `kernels.cu` for the device's own
//!   architecture, without FMA contraction;
//! - `regions`: the boxes one sweep launch covers (boundary slabs first
//!   under `--overlap`);
//! - `staging`: page-locked host buffers;
//! - `device_backend`: the `Backend` itself;
//! - `transfer`: host<->device copy measurements, returned as [`sample`]s.

pub mod sample;

#[cfg(feature = "cuda")]
pub mod compile;
#[cfg(feature = "cuda")]
pub mod device_backend;
#[cfg(feature = "cuda")]
pub mod driver;
#[cfg(feature = "cuda")]
mod enabled;
#[cfg(feature = "cuda")]
pub mod regions;
#[cfg(feature = "cuda")]
pub mod staging;
#[cfg(feature = "cuda")]
pub mod transfer;

#[cfg(feature = "cuda")]
pub use enabled::{available, create};
#[cfg(feature = "cuda")]
pub use transfer::measure_transfers;

#[cfg(not(feature = "cuda"))]
pub mod disabled;
#[cfg(not(feature = "cuda"))]
pub use disabled::{available, create, measure_transfers};
