//! The GPU backend (feature `cuda`): each rank sweeps its block on one
//! NVIDIA GPU through cudarc, with kernels compiled at start by NVRTC.
//! Without the feature, [`disabled`] has the same functions, which explain
//! how to get GPU support, so callers need no `#[cfg]`.
//!
//! In every build:
//! - `env`: the environment variables the backend reads;
//! - `launch`: the launch constants, the sweep's launch plan, the face
//!   copies' geometry and every kernel's argument list (plain arithmetic,
//!   whose coverage the `gpu_emu_*` tests check on the host);
//! - `layout`: where the fields lie in device memory (`--gpu-layout`:
//!   exact, or rows padded to a 128-byte-aligned pitch);
//! - `regions`: the boxes one sweep launch covers (boundary slabs first
//!   under `--overlap`);
//! - `sample`: what a transfer measurement returns;
//! - `options`: what the backend is asked for ([`GpuOptions`]);
//! - `connections`: the hardware queues (`CUDA_DEVICE_MAX_CONNECTIONS`)
//!   that in-process GPU ranks share.
//!
//! With `cuda`:
//! - `enabled`: whether a GPU is usable, and creating a rank's backend;
//! - `locate`, `nvrtc`: finding and loading NVRTC 12 or 13 (and the
//!   driver) on machines with either CUDA;
//! - `driver`: probing the libraries (cudarc panics without them), device
//!   choice by node-local rank, the device description;
//! - `compile`: NVRTC compilation of `kernels.cu` for the device's own
//!   architecture, without FMA contraction, with line info;
//! - `disk_cache`: NVRTC's output shared by processes through a folder;
//! - `memcheck`: the device memory check of all ranks sharing a GPU;
//! - `mps`: whether MPS serves the GPUs, and the warning for processes
//!   that time-slice one without it;
//! - `alloc`: device buffers from the stream-ordered allocator, or from
//!   `cuMemAlloc` where a driver refuses it;
//! - `nccl`, `nccl_transport`: NCCL loaded at run time, and the
//!   `--halo nccl` transport on it;
//! - `mpi_device`: the `--halo mpi-device` transport (device buffers to a
//!   CUDA-aware MPI);
//! - `staging`: page-locked host buffers;
//! - `device_backend`: the `Backend` itself;
//! - `transport`: the seam of the device-direct halo paths (`--halo`),
//!   `halo_path`, which opens the path's transport, and `peer`, the
//!   in-process ranks' peer copies;
//! - `host_counts`: the emulated driver's counts of host waits and bytes;
//! - `device_trace`: the streams' device events behind `--trace`;
//! - `transfer`: host<->device copy measurements, returned as [`sample`]s;
//! - `nvtx`: NVTX ranges named after the trace's phases, for `nsys`
//!   (a no-op module in builds without `cuda`, so the solver and the halo
//!   exchange open them unconditionally).

pub mod connections;
pub mod env;
pub mod launch;
pub mod layout;
pub mod regions;
pub mod transfer_samples;

pub mod options;

pub use options::GpuOptions;

#[cfg(feature = "cuda")]
pub mod alloc;
#[cfg(feature = "cuda")]
pub mod compile;
#[cfg(feature = "cuda")]
pub mod device_backend;
#[cfg(feature = "cuda")]
pub mod device_trace;
#[cfg(feature = "cuda")]
pub mod disk_cache;
#[cfg(feature = "cuda")]
pub mod driver;
#[cfg(feature = "cuda")]
mod enabled;
#[cfg(feature = "cuda")]
pub mod halo_path;
#[cfg(feature = "cuda")]
pub mod host_counts;
#[cfg(feature = "cuda")]
pub mod locate;
#[cfg(feature = "cuda")]
pub mod memcheck;
#[cfg(feature = "cuda")]
pub mod mpi_device;
#[cfg(feature = "cuda")]
pub mod mps;
#[cfg(feature = "cuda")]
pub mod nccl;
#[cfg(feature = "cuda")]
pub mod nccl_transport;
#[cfg(feature = "cuda")]
pub mod nvrtc;
#[cfg(feature = "cuda")]
pub mod nvtx;
#[cfg(feature = "cuda")]
pub mod peer;
#[cfg(feature = "cuda")]
pub mod staging;
#[cfg(feature = "cuda")]
pub mod transfer;
#[cfg(feature = "cuda")]
pub mod transport;

#[cfg(feature = "cuda")]
pub use enabled::{available, create};
#[cfg(feature = "cuda")]
pub use transfer::measure_transfers;

#[cfg(not(feature = "cuda"))]
pub mod disabled;
#[cfg(not(feature = "cuda"))]
pub use disabled::{available, create, measure_transfers, nvtx};
