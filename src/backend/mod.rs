//! Compute backends. A backend owns one rank's fields and does only local
//! work: the Jacobi sweep, packing a face of the new field into a host
//! buffer, and unpacking a received face into its ghost layer. The halo
//! schedule, reductions and timing live in the one driver (`solver`).

pub mod cache;
pub mod cpu;
pub mod huge;
pub mod kernel;
pub mod lines;
pub mod threads;

#[cfg(feature = "cuda")]
#[path = "gpu/mod.rs"]
pub mod gpu;

#[cfg(not(feature = "cuda"))]
#[path = "gpu_disabled.rs"]
pub mod gpu;

use crate::comm::Comm;
use crate::config::{BackendKind, RunConfig};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use ndarray::{Array3, ArrayView3, ArrayViewMut3, Axis};
use serde::{Deserialize, Serialize};

/// One face of a block: dimension `dim` (0 = i, 1 = j, 2 = k) and `side`
/// (0 = towards lower indices, 1 = towards higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Face {
    /// Dimension normal to the face.
    pub dim: usize,
    /// 0 for the low side, 1 for the high side.
    pub side: usize,
}

impl Face {
    /// Number of values in this face of a block with local extents `dims`
    /// (the full extents of the other two dimensions, ghosts included, so
    /// that exchanging dimension by dimension fills edge ghosts).
    pub fn len(&self, dims: [usize; 3]) -> usize {
        (0..3).filter(|&d| d != self.dim).map(|d| dims[d]).product()
    }

    /// Local index of the owned plane sent through this face.
    pub fn send_plane(&self, dims: [usize; 3]) -> usize {
        if self.side == 0 {
            1
        } else {
            dims[self.dim] - 2
        }
    }

    /// Local index of the ghost plane this face's message is written to.
    pub fn ghost_plane(&self, dims: [usize; 3]) -> usize {
        if self.side == 0 {
            0
        } else {
            dims[self.dim] - 1
        }
    }
}

/// Copies the owned plane of `field` behind `face` into `buf`, in the
/// order every backend and the host buffers use (the other two dimensions,
/// in increasing index order, the later one fastest).
pub fn pack_plane(field: ArrayView3<f32>, face: Face, buf: &mut [f32]) {
    let dims = [field.dim().0, field.dim().1, field.dim().2];
    let plane = field.index_axis_move(Axis(face.dim), face.send_plane(dims));
    for (b, v) in buf.iter_mut().zip(plane.iter()) {
        *b = *v;
    }
}

/// Writes `buf` into the ghost plane of `field` behind `face` (the reverse
/// of [`pack_plane`]).
pub fn unpack_plane(field: ArrayViewMut3<f32>, face: Face, buf: &[f32]) {
    let dims = [field.dim().0, field.dim().1, field.dim().2];
    let mut plane = field.index_axis_move(Axis(face.dim), face.ghost_plane(dims));
    for (v, b) in plane.iter_mut().zip(buf) {
        *v = *b;
    }
}

/// A host buffer that halo messages are staged in. Backends may hand out
/// page-locked memory; the CPU backend uses a plain `Vec`.
pub trait HostBuffer: Send {
    /// The buffer's contents.
    fn as_slice(&self) -> &[f32];
    /// The buffer's contents, writable.
    fn as_mut_slice(&mut self) -> &mut [f32];
}

impl HostBuffer for Vec<f32> {
    fn as_slice(&self) -> &[f32] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        self
    }
}

/// What a backend reports about where it runs, for the report's provenance.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BackendInfo {
    /// `cpu` or `gpu`.
    pub kind: String,
    /// Worker threads used for the sweep.
    pub threads: usize,
    /// Device description (GPU backends), e.g. name and bus id.
    pub device: Option<String>,
    /// Thread placement or staging details worth recording.
    pub detail: Option<String>,
}

/// Local work of one rank. Calls block until their work is complete, so the
/// driver's host clock measures them.
pub trait Backend {
    /// Where and how this backend runs.
    fn info(&self) -> BackendInfo;
    /// Resets every field to its initial value.
    fn reset(&mut self) -> Result<()>;
    /// Starts a sweep that reads `p` and writes the owned points of `next`.
    /// When it returns, the owned planes next to every face of `next` are
    /// final, so they may be packed while the rest of the sweep runs.
    fn sweep_start(&mut self) -> Result<()>;
    /// Completes the sweep and returns this rank's sum of squared residuals.
    fn sweep_finish(&mut self) -> Result<f64>;
    /// Copies the owned plane of `next` behind `face` into `buf`. Returns the
    /// seconds spent in host<->device transfer within the call (0 on CPU).
    fn pack(&mut self, face: Face, buf: &mut dyn HostBuffer) -> Result<f64>;
    /// Writes `buf` into the ghost plane of `next` behind `face`. Returns the
    /// seconds spent in host<->device transfer within the call.
    fn unpack(&mut self, face: Face, buf: &dyn HostBuffer) -> Result<f64>;
    /// Makes `next` the current field (after the halo exchange).
    fn swap(&mut self);
    /// A host buffer of `len` values for staging halo messages.
    fn staging(&mut self, len: usize) -> Result<Box<dyn HostBuffer>> {
        Ok(Box::new(vec![0.0f32; len]))
    }
    /// The current field `p` with the block's local extents, on the host.
    fn field(&mut self) -> Result<Array3<f32>>;
}

/// Creates the backend the configuration asks for, for `block` of `grid`.
pub fn create(
    cfg: &RunConfig,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    let cpu = || -> Result<Box<dyn Backend>> {
        let node_ranks = comm.node_size();
        Ok(Box::new(cpu::CpuBackend::new(
            grid, block, cfg, node_ranks,
        )?))
    };
    match cfg.backend {
        BackendKind::Cpu => cpu(),
        BackendKind::Gpu => gpu::create(cfg, grid, block, comm),
        BackendKind::Auto => {
            // Decided together: ranks on nodes with and without GPUs must
            // not pick different backends (gpu::create is collective).
            let mut usable = [f64::from(u8::from(gpu::available()))];
            comm.sum(&mut usable);
            if usable[0] as usize == comm.size() {
                gpu::create(cfg, grid, block, comm)
            } else {
                tracing::info!("no usable GPU on every rank: using the CPU backend");
                cpu()
            }
        }
    }
}
