//! The device-side halo transports behind `--halo peer|nccl|mpi-device`:
//! what moves a dimension step's packed faces from this rank's device to
//! its neighbours' without host staging.
//!
//! The seam: `crate::halo` runs the one schedule and calls the backend's
//! [`DeviceHalo`](crate::backend::DeviceHalo) for each step; the GPU
//! backend packs the step's faces into device send buffers on its halo
//! stream, hands the transport a [`DeviceStep`] (the device address of each
//! face to send and to receive into, and that stream), then unpacks from
//! the receive buffers on the same stream. A transport must queue its work
//! so that, by stream order and events, (1) nothing reads a send buffer
//! before the pack queued before the call has run (for the first step's
//! faces, the sweep that stored them, queued on the same stream), (2) work queued on the
//! stream after the call sees the received faces, and (3) that work may
//! overwrite the send buffers (the neighbours are done reading them). It
//! should not wait for the device on the host: that is the point of the
//! device paths.
//!
//! [`super::halo_path::open`] gives a rank the transport of its
//! `--halo` path (or refuses it with one line):
//! - `peer` ([`super::peer`]): in-process ranks pull their neighbours'
//!   faces with `cuMemcpyPeerAsync` (a device copy when both share one
//!   GPU), after waiting on the stream for the neighbour's pack event.
//! - `nccl`: one `ncclGroupStart`/`ncclGroupEnd` of `ncclSend` and
//!   `ncclRecv` per step on the stream (the group keeps the step's two
//!   directions together; stream order keeps the steps, hence the edge
//!   forwarding, in order).
//! - `mpi-device`: the stream synchronised (MPI reads device memory
//!   outside stream order), then the communicator's exchange with device
//!   pointers of a CUDA-aware MPI.

use super::driver::cuda_err;
use crate::comm::Comm;
use crate::config::HaloPath;
use crate::error::Result;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// One face on the device: its address and its values (f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFace {
    /// Device address of the face's first value.
    pub addr: u64,
    /// Values in the face.
    pub len: usize,
}

/// A dimension step as a transport sees it.
pub struct DeviceStep<'a> {
    /// The dimension normal to the faces.
    pub dim: usize,
    /// The neighbour on each side (below, above).
    pub peers: [Option<usize>; 2],
    /// The packed face to send to each side's neighbour.
    pub send: [Option<DeviceFace>; 2],
    /// Where the face received from each side's neighbour goes.
    pub recv: [Option<DeviceFace>; 2],
    /// The stream the packs were queued on and the unpacks will be.
    pub stream: &'a Arc<CudaStream>,
}

/// Moves the faces of one step between devices (see the module's seam).
pub trait FaceTransport {
    /// The path it implements.
    fn path(&self) -> HaloPath;
    /// Queues the step's transfers on `step.stream`; collective with the
    /// step's neighbours, which make the same call for the same step.
    fn exchange(&mut self, step: &DeviceStep<'_>, comm: &dyn Comm) -> Result<()>;
}

/// Queues on `stream` a wait for the last record of `event`, which may
/// belong to another context (another device): CUDA orders the stream after
/// it without the host waiting.
///
/// # Safety
/// `event` must be a live event handle (its owner keeps it alive until
/// the stream no longer needs it).
pub unsafe fn wait_raw(stream: &CudaStream, event: cudarc::driver::sys::CUevent) -> Result<()> {
    // SAFETY: as the caller promises; the stream is live (borrowed).
    unsafe {
        cudarc::driver::result::stream::wait_event(
            stream.cu_stream(),
            event,
            cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
    .map_err(cuda_err("ordering a stream after a neighbour's event"))
}
