//! What every backend provides: the [`Backend`] trait (one rank's local
//! work), the host buffers halo messages are staged in, and what a backend
//! says about where it ran. The halo schedule, the reductions and the
//! timing are the driver's (`crate::halo`, `crate::solver`), never a
//! backend's.

use crate::error::Result;
use crate::grid::decomp::Face;
use ndarray::{Array3, ArrayView3, ArrayViewMut3, Axis};
use serde::{Deserialize, Serialize};

/// Where a rank's sweep runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// CPU threads.
    #[default]
    Cpu,
    /// One GPU.
    Gpu,
}

impl Kind {
    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Gpu => "gpu",
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
    /// CPU or GPU.
    pub kind: Kind,
    /// Worker threads used for the sweep.
    pub threads: usize,
    /// Device description (GPU backends), e.g. name and bus id.
    pub device: Option<String>,
    /// Thread placement or staging details worth recording.
    pub detail: Option<String>,
    /// The GPU software a GPU backend ran with (absent for CPU backends and
    /// in records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_software: Option<GpuSoftware>,
}

/// Versions of the GPU software a rank ran with, for the record.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuSoftware {
    /// CUDA version the driver supports, `major.minor` (e.g. `13.0`).
    pub cuda_driver: String,
    /// NVRTC version, `major.minor`.
    pub nvrtc: String,
    /// The NVRTC library file loaded.
    pub nvrtc_library: String,
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
        Ok(Box::new(crate::machine::alloc::zeroed::<f32>(
            len,
            "a halo staging buffer",
        )?))
    }
    /// The current field `p` with the block's local extents, on the host.
    fn field(&mut self) -> Result<Array3<f32>>;
}
