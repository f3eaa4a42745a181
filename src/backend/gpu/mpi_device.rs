//! The `mpi-device` halo transport (`--halo mpi-device`): the step's
//! device faces handed to a CUDA-aware MPI (`crate::comm::cuda_aware`
//! decided the library takes them, or the user insisted). MPI reads and
//! writes device memory outside stream order, so the halo stream is
//! synchronised first (the packs have run), and MPI's exchange has
//! returned (the faces have arrived) before the unpacks are queued.
//!
//! The faces handed to MPI come from `cuMemAlloc` (the backend's
//! allocator is [`super::alloc::Allocator::Shareable`] on this path):
//! pool memory from `cuMemAllocAsync` cannot be registered for CUDA IPC,
//! which a CUDA-aware MPI uses between processes of one node.

use super::driver::cuda_err;
use super::transport::{DeviceStep, FaceTransport};
use crate::comm::{Comm, HaloSwap};
use crate::config::HaloPath;
use crate::error::Result;

/// The mpi-device transport of one rank (no state: the library's).
pub struct MpiDeviceTransport;

impl MpiDeviceTransport {
    /// The transport, once the ranks agree the MPI library takes device
    /// buffers (collective; refused with one line, exit 2).
    pub fn new(comm: &dyn Comm) -> Result<MpiDeviceTransport> {
        let how = crate::comm::cuda_aware::require(comm)?;
        tracing::info!("--halo mpi-device: the MPI library takes device buffers ({how})");
        Ok(MpiDeviceTransport)
    }
}

impl FaceTransport for MpiDeviceTransport {
    fn path(&self) -> HaloPath {
        HaloPath::MpiDevice
    }

    fn exchange(&mut self, step: &DeviceStep<'_>, comm: &dyn Comm) -> Result<()> {
        // MPI reads the send faces now: the packs must have run.
        step.stream
            .synchronize()
            .map_err(cuda_err("waiting for the packs before MPI reads them"))?;
        let face = |f: Option<super::transport::DeviceFace>| f.map_or((0, 0), |f| (f.addr, f.len));
        let (s0, s1) = (face(step.send[0]), face(step.send[1]));
        let (r0, r1) = (face(step.recv[0]), face(step.recv[1]));
        // SAFETY: each slice names a device buffer of this rank's backend
        // (live for the run) that only the CUDA-aware MPI dereferences;
        // Rust never reads or writes through them. A side without a peer
        // has an empty slice, which the exchange skips.
        let (send, recv) = unsafe { ([slice(s0), slice(s1)], [slice_mut(r0), slice_mut(r1)]) };
        comm.exchange(HaloSwap {
            peers: step.peers,
            send,
            recv,
            tag: step.dim as i32,
        })
    }
}

/// The device face at `addr` of `len` values as MPI is handed it.
///
/// # Safety
/// Only MPI may dereference it (see the caller).
unsafe fn slice<'a>((addr, len): (u64, usize)) -> &'a [f32] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(addr as *const f32, len) }
}

/// As [`slice`], written by MPI.
///
/// # Safety
/// As [`slice`].
unsafe fn slice_mut<'a>((addr, len): (u64, usize)) -> &'a mut [f32] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(addr as *mut f32, len) }
}
