//! What every backend provides: the [`Backend`] trait (one rank's local
//! work), the host buffers halo messages are staged in, and what a backend
//! says about where it ran. The halo schedule, the reductions and the
//! timing are the driver's (`crate::halo`, `crate::solver`), never a
//! backend's.

use super::kernel_variant::KernelVariant;
use crate::comm::Comm;
use crate::config::BackendKind;
use crate::error::{Error, Result};
use crate::grid::decomp::{Face, MAX_DEPTH};
use crate::machine::threads::ThreadCpus;
use ndarray::{Array3, ArrayView3, ArrayViewMut3, Axis};
use serde::{Deserialize, Serialize};

/// Copies the owned planes of `field` behind `face` into `buf`, as many as
/// `buf` holds layers of the face (the halo depth), in the order every
/// backend and the host buffers use: planes in increasing index order, and
/// within a plane the other two dimensions in increasing index order, the
/// later one fastest.
pub fn pack_plane(field: ArrayView3<f32>, face: Face, buf: &mut [f32]) {
    let dims = [field.dim().0, field.dim().1, field.dim().2];
    let depth = layers(dims, face, buf.len());
    let slab = field.slice_axis_move(Axis(face.dim), face.send_planes(dims, depth).into());
    let planes = slab.axis_iter(Axis(face.dim));
    for (b, v) in buf.iter_mut().zip(planes.flat_map(|p| p.into_iter())) {
        *b = *v;
    }
}

/// Writes `buf` into the ghost planes of `field` behind `face` (the reverse
/// of [`pack_plane`]; as many planes as `buf` holds layers).
pub fn unpack_plane(field: ArrayViewMut3<f32>, face: Face, buf: &[f32]) {
    let dims = [field.dim().0, field.dim().1, field.dim().2];
    let depth = layers(dims, face, buf.len());
    let mut slab = field.slice_axis_move(Axis(face.dim), face.ghost_planes(dims, depth).into());
    let planes = slab.axis_iter_mut(Axis(face.dim));
    for (v, b) in planes.flat_map(|p| p.into_iter()).zip(buf) {
        *v = *b;
    }
}

/// How many layers of `face` a message of `len` values holds.
fn layers(dims: [usize; 3], face: Face, len: usize) -> usize {
    let layer = face.len(dims);
    assert!(
        len > 0 && len.is_multiple_of(layer),
        "a halo message of {len} values is not whole layers of {layer}"
    );
    len / layer
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
    pub kind: BackendKind,
    /// Worker threads used for the sweep.
    pub threads: usize,
    /// Device description (GPU backends), e.g. name and bus id.
    pub device: Option<String>,
    /// Kernel, stores, staging and other details worth recording.
    pub detail: Option<String>,
    /// Where the sweep threads ran (CPU backends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<ThreadCpus>,
    /// The GPU software a GPU backend ran with (absent for CPU backends and
    /// in records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_software: Option<GpuSoftware>,
    /// The emulator's own description when the GPU is emulated (a
    /// stand-in CUDA driver running the kernels on the host CPU): its
    /// times are then not GPU performance. Absent for real devices and
    /// CPU backends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
    /// The GPU sweep kernel's variant (`--gpu-sweep`); absent for CPU
    /// backends and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_sweep: Option<String>,
    /// What an emulated device counted of the timed loop's host traffic
    /// per steady-state iteration; absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_traffic: Option<HostTraffic>,
    /// The GPU field layout (`--gpu-layout`); absent for CPU backends
    /// and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_layout: Option<String>,
}

/// Host traffic of one iteration: the host's waits for the device and the
/// bytes copied between them (an emulated device counts both; a real
/// driver has no such counter).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostTraffic {
    /// Stream, event and context synchronisations and blocking copies.
    pub waits: u64,
    /// Host->device and device->host bytes.
    pub bytes: u64,
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
    /// The device allocator used, `cuMemAllocAsync` or `cuMemAlloc`
    /// (absent in records written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
}

/// What a kind of backend can do, stated before one is built, as
/// `backend::host_footprint` states its memory: the options' validation,
/// `--backend auto` and the `--temporal auto` model read it, and a backend
/// refuses work beyond it, so that the limit is written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The deepest halo it keeps, in ghost layers: the most sweeps it runs
    /// between two exchanges (above one, temporal blocking).
    pub max_depth: usize,
}

impl Capabilities {
    /// A backend without temporal blocking: one ghost layer, one sweep
    /// between two exchanges.
    pub const ONE_LAYER: Capabilities = Capabilities { max_depth: 1 };

    /// What the backends of `kind` can do.
    pub fn of(kind: BackendKind) -> Capabilities {
        match kind {
            BackendKind::Cpu => Capabilities {
                max_depth: MAX_DEPTH,
            },
            // Its kernels sweep once between exchanges: no wavefront yet.
            BackendKind::Gpu => Capabilities::ONE_LAYER,
        }
    }

    /// Whether it keeps a halo `depth` layers deep.
    pub fn keeps(self, depth: usize) -> bool {
        depth <= self.max_depth
    }

    /// The ghost layers it keeps, in words (`one ghost layer`).
    fn layers(self) -> String {
        match self.max_depth {
            1 => "one ghost layer".to_string(),
            n => format!("{n} ghost layers"),
        }
    }

    /// What ranks of `kind` keep, in words, for a message or a reason
    /// (`GPU ranks keep one ghost layer`).
    pub fn stated(kind: BackendKind) -> String {
        format!(
            "{} ranks keep {}",
            kind.name().to_uppercase(),
            Capabilities::of(kind).layers()
        )
    }

    /// Refuses (exit 2) `--temporal depth` on ranks of `kind` when they
    /// keep fewer ghost layers than that.
    pub fn check_temporal(kind: BackendKind, depth: usize) -> Result<()> {
        let can = Capabilities::of(kind);
        if can.keeps(depth) {
            return Ok(());
        }
        Err(Error::usage(format!(
            "{}, and --temporal {depth} needs {depth}: a deeper halo runs on the CPU backend \
             only; use --temporal {} with --backend {}, or --backend cpu",
            Capabilities::stated(kind),
            can.max_depth,
            kind.name()
        )))
    }

    /// What a backend answers when asked for `sweeps` sweeps between two
    /// exchanges: fine up to its depth, an error beyond.
    pub fn check_sweeps(self, sweeps: usize) -> Result<()> {
        if self.keeps(sweeps) {
            return Ok(());
        }
        Err(Error::usage(format!(
            "{sweeps} sweeps between halo exchanges need {sweeps} ghost layers, and this \
             backend keeps {}: use --temporal {}",
            self.layers(),
            self.max_depth
        )))
    }
}

/// One dimension step of the halo schedule (`crate::halo`), as a backend
/// that moves the faces itself ([`DeviceHalo`]) is handed it: the
/// dimension and the neighbour below and above, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaloStep {
    /// The dimension normal to the step's faces (0 = i, 1 = j, 2 = k).
    pub dim: usize,
    /// The neighbour on each side (below, above); `None`: no face there.
    pub peers: [Option<usize>; 2],
}

/// A backend that moves halo faces device to device (`--halo peer`,
/// `nccl`, `mpi-device`) instead of through host staging buffers.
///
/// The seam: `crate::halo` keeps the one schedule (dimensions k, j, i in
/// order, full-extent faces that forward the edges) and calls the three
/// parts of each step in order; the backend queues them on its device's
/// streams, ordered by stream order and events, so that none needs a host
/// wait. Packing and unpacking are the backend's kernels; the transfer is
/// its transport (peer copies, NCCL send/recv, or a CUDA-aware MPI), the
/// one part that differs between the paths. Unlike [`Backend::pack`],
/// these calls may return before the device has done the work: the next
/// sweep and the gosa copy are ordered after it on the device.
pub trait DeviceHalo {
    /// Queues the packing of the step's faces into the device buffers
    /// they are sent from, after the sweep and the earlier steps' unpacks.
    fn pack_step(&mut self, step: HaloStep) -> Result<()>;
    /// Moves the packed faces to the neighbours and the neighbours' faces
    /// into this rank's receive buffers; collective with the step's
    /// neighbours, which make the same call. Work queued after it sees
    /// the received faces, and may overwrite what was sent.
    fn transfer_step(&mut self, step: HaloStep, comm: &dyn Comm) -> Result<()>;
    /// Queues the writing of the received faces into the ghost planes of
    /// `next`, after the transfer.
    fn unpack_step(&mut self, step: HaloStep) -> Result<()>;
}

/// Local work of one rank. Calls block until their work is complete, so the
/// driver's host clock measures them.
pub trait Backend {
    /// Where and how this backend runs.
    fn info(&self) -> BackendInfo;
    /// Resets every field to its initial value.
    fn reset(&mut self) -> Result<()>;
    /// Starts `sweeps` successive sweeps (1 to the block's ghost depth):
    /// the first reads `p`, each later one the previous one's field, and
    /// `next` then holds the last one's owned points. When it returns, the
    /// owned planes next to every face of `next` are final, so they may be
    /// packed while the rest of the sweeps runs. A backend without
    /// temporal blocking refuses more than one
    /// ([`Capabilities::check_sweeps`]).
    fn sweeps_start(&mut self, sweeps: usize) -> Result<()>;
    /// Completes the sweeps begun by [`Backend::sweeps_start`] and writes
    /// this rank's sum of squared residuals of each, in order, to `gosa`
    /// (one value per sweep).
    fn sweeps_finish(&mut self, gosa: &mut [f64]) -> Result<()>;
    /// Whether this backend can hand back a sweep's gosa one round late
    /// ([`Backend::sweeps_finish_late`]), so that the host need not wait
    /// for the sweep it just queued. False (the default): the driver
    /// calls [`Backend::sweeps_finish`].
    fn defers_gosa(&self) -> bool {
        false
    }
    /// For a backend that [defers gosa](Backend::defers_gosa), in place of
    /// [`Backend::sweeps_finish`] after one sweep: completes the sweep's
    /// work on `next` as far as the driver needs it (the exchange is
    /// over), queues its gosa, and returns this rank's gosa of the
    /// previous sweep, or `None` when none is pending (the first sweep
    /// after a reset or after [`Backend::gosa_pending`]).
    fn sweeps_finish_late(&mut self) -> Result<Option<f64>> {
        Err(Error::runtime(
            "this backend hands back gosa when its sweep ends, not one round late",
        ))
    }
    /// This rank's gosa of the last sweep still pending (after
    /// [`Backend::sweeps_finish_late`]), waited for; `None` when none is.
    fn gosa_pending(&mut self) -> Result<Option<f64>> {
        Ok(None)
    }
    /// Copies the owned planes of `next` behind each face of `faces` into
    /// its buffer (as many as the buffer holds layers: the block's ghost
    /// depth). The halo schedule hands over the faces of one dimension
    /// step at once (one or two), so that a GPU backend waits for the
    /// device once per step. Returns the seconds spent in host<->device
    /// transfer within the call (0 on CPU).
    fn pack(&mut self, faces: &mut [(Face, &mut dyn HostBuffer)]) -> Result<f64>;
    /// Writes each buffer of `faces` into the ghost planes of `next` behind
    /// its face (as many as the buffer holds layers); like
    /// [`Backend::pack`], the faces of one dimension step at once. Returns
    /// the seconds spent in host<->device transfer within the call.
    fn unpack(&mut self, faces: &[(Face, &dyn HostBuffer)]) -> Result<f64>;
    /// The device-side halo transport, when this backend moves faces device
    /// to device (`--halo` other than `staged`); `None` (the default): the
    /// exchange stages faces through host buffers ([`Backend::pack`],
    /// [`Backend::unpack`]).
    fn device_halo(&mut self) -> Option<&mut dyn DeviceHalo> {
        None
    }
    /// Makes `next` the current field (after the halo exchange).
    fn swap(&mut self);
    /// Replaces `next` with `field` (the block's local extents, ghosts
    /// included), as the halo self-test loads its pattern before running
    /// the exchange through this backend.
    fn load_next(&mut self, field: &Array3<f32>) -> Result<()>;
    /// A host buffer of `len` values for staging halo messages.
    fn staging(&mut self, len: usize) -> Result<Box<dyn HostBuffer>> {
        Ok(Box::new(crate::machine::alloc::zeroed::<f32>(
            len,
            "a halo staging buffer",
        )?))
    }
    /// The current field `p` with the block's local extents, on the host.
    fn field(&mut self) -> Result<Array3<f32>>;
    /// The kernels this backend's sweep may run with, by name, for the
    /// driver to time against each other before the rehearsal
    /// (`crate::kernel_choice`); the one it runs until told otherwise
    /// first. Empty (the default) when it has no choice to offer. Every
    /// kernel gives bitwise the same fields.
    fn kernel_variants(&self) -> Vec<KernelVariant> {
        Vec::new()
    }
    /// Sweeps with kernel `index` of [`Backend::kernel_variants`] from now
    /// on.
    fn use_kernel_variant(&mut self, index: usize) -> Result<()> {
        Err(crate::error::Error::runtime(format!(
            "kernel variant {index} asked of a backend that offers none"
        )))
    }
    /// The tile heights a blocked sweep of `sweeps` sweeps may start with,
    /// one per cache its tiles may live in (the CPU wavefront: the core's
    /// private cache and the thread's share of the last level), for
    /// `--temporal auto` to time each T with each. The same number on every
    /// rank, whatever its block; empty (the default) when the backend's
    /// blocked sweep has no tiles, or their height is given.
    fn tile_starts(&self, sweeps: usize) -> Vec<usize> {
        let _ = sweeps;
        Vec::new()
    }
    /// Sweeps blocks with entry `index` of [`Backend::tile_starts`] from
    /// now on, and offers the heights around it as kernel variants
    /// ([`Backend::kernel_variants`]); nothing where there is none.
    fn start_tiles(&mut self, sweeps: usize, index: usize) -> Result<()> {
        let _ = (sweeps, index);
        Ok(())
    }
    /// From now on (`on`) sweeps only a sample of the block, for the
    /// calibrations: a share of it that is swept as the whole is, so that
    /// its time scaled by [`Backend::sample_scale`] is the whole block's;
    /// the whole block again when not `on`. The fields a sampled sweep
    /// leaves are not the run's (the driver resets them). Returns whether
    /// the backend samples: the CPU backend where the node's fields are
    /// far beyond the last-level cache; the default sweeps the whole
    /// block.
    fn sample(&mut self, on: bool) -> bool {
        let _ = on;
        false
    }
    /// The updates of a round of `sweeps` sweeps of the whole block over
    /// those of the sample it sweeps while sampling ([`Backend::sample`],
    /// with the tiles now in use): what a sampled round's compute time is
    /// scaled by; 1 for the whole block.
    fn sample_scale(&self, sweeps: usize) -> f64 {
        let _ = sweeps;
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_states_the_halo_it_keeps_and_refuses_deeper() {
        assert!(Capabilities::of(BackendKind::Cpu).keeps(MAX_DEPTH));
        let gpu = Capabilities::of(BackendKind::Gpu);
        assert!(gpu.keeps(1) && !gpu.keeps(2));
        assert_eq!(
            Capabilities::stated(BackendKind::Gpu),
            "GPU ranks keep one ghost layer"
        );
        Capabilities::check_temporal(BackendKind::Gpu, 1).unwrap();
        Capabilities::check_temporal(BackendKind::Cpu, 8).unwrap();
        let e = Capabilities::check_temporal(BackendKind::Gpu, 4).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().contains("GPU ranks keep one ghost layer")
                && e.message().contains("the CPU backend only")
                && e.message().contains("--temporal 1 with --backend gpu"),
            "{e}"
        );
        gpu.check_sweeps(1).unwrap();
        let e = gpu.check_sweeps(3).unwrap_err();
        assert!(e.message().contains("use --temporal 1"), "{e}");
    }
}
