//! Compute backends. A backend owns one rank's fields and does only local
//! work: the Jacobi sweep, packing the faces of the new field that one
//! dimension step of the exchange sends into host buffers, and unpacking
//! the received faces into their ghost layers. The halo
//! schedule lives in `crate::halo`; the iteration loop, reductions and
//! timing in `crate::solver`.
//!
//! - [`api`]: the [`Backend`] trait and what backends share;
//! - [`cpu`]: CPU threads (always built);
//! - [`kernel_variant`]: the typed name of a kernel variant a backend
//!   offers;
//! - [`gpu`]: one NVIDIA GPU per rank (feature `cuda`; without it, a module
//!   of the same functions that explain how to get one).
//!
//! This module only chooses and builds a backend; its children never
//! import from it.

pub mod api;
pub mod cpu;
pub mod gpu;
pub mod kernel_variant;

pub use api::{
    Backend, BackendInfo, Capabilities, DeviceHalo, GpuSoftware, HaloStep, HostBuffer, HostTraffic,
    pack_plane, unpack_plane,
};

use crate::comm::{Comm, decide};
use crate::config::{BackendKind, RunConfig};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::machine::memory::Footprint;

/// Decides, collectively, where `--backend auto` sweeps: a GPU only when
/// every rank has a usable one (ranks on nodes with and without GPUs must
/// not pick different backends, since creating a GPU backend is
/// collective). Every rank gets the same answer.
pub fn auto(comm: &dyn Comm) -> Result<BackendKind> {
    decide(comm, "--backend auto", &gpu::available(), |usable| {
        Ok(if usable.iter().all(|&u| u) {
            BackendKind::Gpu
        } else {
            tracing::info!("no usable GPU on every rank: using the CPU backend");
            BackendKind::Cpu
        })
    })
}

/// What the CPU backend is asked for in the run `cfg`.
fn cpu_options(cfg: &RunConfig) -> cpu::CpuOptions {
    cpu::CpuOptions {
        threads: cfg.threads,
        bind: cfg.bind,
        stores: cfg.stores,
        prefetch: cfg.prefetch,
        tile_rows: cfg.tile_rows,
    }
}

/// What the GPU backend is asked for in the run `cfg`.
fn gpu_options(cfg: &RunConfig) -> gpu::GpuOptions {
    gpu::GpuOptions {
        device: cfg.device,
        staging: cfg.staging,
        overlap: cfg.overlap,
        occupancy: cfg.gpu_occupancy,
        sweep: cfg.gpu_sweep,
        halo: cfg.halo,
        layout: cfg.gpu_layout,
    }
}

/// The host memory the backend of the run `cfg` states it will allocate
/// for `block` (a GPU backend keeps its fields on the device; its host
/// staging is the halo's, counted there).
pub fn host_footprint(cfg: &RunConfig, block: &Block) -> Footprint {
    match cfg.backend {
        BackendKind::Cpu => cpu::footprint(block, &cpu_options(cfg)),
        BackendKind::Gpu => Footprint::default(),
    }
}

/// Creates the backend of the run `cfg` for `block` of `grid`.
pub fn create(
    cfg: &RunConfig,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    match cfg.backend {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new(
            grid,
            block,
            &cpu_options(cfg),
            [comm.node_rank(), comm.node_size()],
        )?)),
        // A block deeper than the GPU keeps never gets here: validation
        // reads its `Capabilities` (refusing --backend gpu, resolving auto
        // to cpu), and its sweeps refuse more layers.
        BackendKind::Gpu => gpu::create(&gpu_options(cfg), grid, block, comm),
    }
}
