//! The `peer` halo transport (`--halo peer`): in-process ranks
//! (`--local-ranks`) pull their neighbours' packed faces device to device,
//! `cuMemcpyPeerAsync` between two GPUs (peer access enabled where the
//! devices allow it), a device copy when both ranks share one GPU.
//!
//! Each step, on the rank's halo stream (see [`super::transport`]):
//! 1. the packs were queued before; this rank records `packed[dim]` and
//!    tells each neighbour where its face is and that event (a message of
//!    the in-process communicator: no device wait);
//! 2. for each neighbour's answer, the stream waits for the neighbour's
//!    `packed[dim]` (an event of the neighbour's context), then copies the
//!    neighbour's face into this rank's receive buffer, and records
//!    `copied[dim]`, which it tells the neighbours;
//! 3. the stream waits for each neighbour's `copied[dim]`, so that the work
//!    queued after the step (the unpacks, the next sweep) never overwrites
//!    what a neighbour is still copying.
//!
//! Events are re-recorded once per step of their dimension; a neighbour
//! has queued its wait for the previous record before it sends the message
//! this rank waits for before recording again (its step-3 answer of the
//! previous iteration comes after its step-2 wait), so no wait is ever
//! handed a later record than the one meant.

use super::driver::cuda_err;
use super::transport::{DeviceFace, DeviceStep, FaceTransport, wait_raw};
use crate::comm::{Comm, Launch};
use crate::config::HaloPath;
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaEvent, result, sys};
use std::sync::Arc;

/// What a rank tells a neighbour about the face it sends it: the face's
/// device address and length, the context and device it lives on and the
/// event recorded after its pack (raw handles: the ranks are threads of
/// one process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Offer {
    addr: u64,
    len: u64,
    ctx: u64,
    device: u64,
    packed: u64,
}

impl Offer {
    const BYTES: usize = 40;

    fn encode(self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        let words = [self.addr, self.len, self.ctx, self.device, self.packed];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    fn decode(b: &[u8; Self::BYTES]) -> Offer {
        let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Offer {
            addr: w(0),
            len: w(1),
            ctx: w(2),
            device: w(3),
            packed: w(4),
        }
    }
}

/// The peer transport of one rank.
pub struct PeerTransport {
    ctx: Arc<CudaContext>,
    /// Recorded after the packs of each dimension's step.
    packed: [CudaEvent; 3],
    /// Recorded after the copies of each dimension's step.
    copied: [CudaEvent; 3],
    /// The neighbours' contexts whose peer access was asked for already.
    asked: Vec<u64>,
}

impl PeerTransport {
    /// The transport of a rank on `ctx`; refused unless the ranks are
    /// threads of this process (the handles it passes mean nothing in
    /// another one).
    pub fn new(ctx: &Arc<CudaContext>, comm: &dyn Comm) -> Result<PeerTransport> {
        if comm.size() > 1 && comm.launch() != Launch::Threads {
            return Err(Error::usage(
                "--halo peer copies faces between the GPUs of in-process ranks: run the ranks \
                 with --local-ranks N, or use --halo staged",
            ));
        }
        let event = || {
            ctx.new_event(None)
                .map_err(cuda_err("creating a halo event"))
        };
        Ok(PeerTransport {
            ctx: ctx.clone(),
            packed: [event()?, event()?, event()?],
            copied: [event()?, event()?, event()?],
            asked: Vec::new(),
        })
    }

    /// Enables this context's access to the neighbour's (`offer`) memory
    /// once, where the devices allow it; the copies work either way (the
    /// driver stages them otherwise).
    fn enable_peer_access(&mut self, offer: &Offer) -> Result<()> {
        let mine = self.ctx.cu_ctx() as u64;
        if offer.ctx == mine || self.asked.contains(&offer.ctx) {
            return Ok(());
        }
        self.asked.push(offer.ctx);
        let mut can = 0;
        // SAFETY: both device ordinals are the driver's own (this rank's
        // context and the one the neighbour opened); `can` is written.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), offer.device as i32) }
            .result()
            .map_err(cuda_err("asking for peer access"))?;
        if can == 0 {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        // SAFETY: `offer.ctx` is the neighbour's live primary context
        // (its rank holds it for the whole run).
        let r = unsafe { sys::cuCtxEnablePeerAccess(offer.ctx as sys::CUcontext, 0) };
        match r {
            sys::cudaError_enum::CUDA_SUCCESS
            | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            e => Err(Error::runtime(format!(
                "CUDA error while enabling peer access: {e:?}"
            ))),
        }
    }

    /// Queues the copy of the neighbour's face `from` into `to`.
    fn copy(&self, step: &DeviceStep<'_>, from: &Offer, to: DeviceFace) -> Result<()> {
        let bytes = to.len * 4;
        let st = step.stream.cu_stream();
        let mine = self.ctx.cu_ctx();
        // SAFETY: `from` is the neighbour's face of `to.len` values (the
        // length was checked) in its live context, `to` this rank's
        // receive buffer of that length; the stream waited for the
        // neighbour's pack, and the neighbour's later writes wait for
        // `copied`.
        unsafe {
            if from.ctx == mine as u64 {
                result::memcpy_dtod_async(to.addr, from.addr, bytes, st)
            } else {
                result::memcpy_peer_async(
                    mine,
                    to.addr,
                    from.ctx as sys::CUcontext,
                    from.addr,
                    bytes,
                    st,
                )
            }
        }
        .map_err(cuda_err("copying a face from a neighbour's device"))
    }
}

impl FaceTransport for PeerTransport {
    fn path(&self) -> HaloPath {
        HaloPath::Peer
    }

    fn exchange(&mut self, step: &DeviceStep<'_>, comm: &dyn Comm) -> Result<()> {
        let d = step.dim;
        self.packed[d]
            .record(step.stream)
            .map_err(cuda_err("recording a halo event"))?;
        let sides = || (0..2).filter_map(|s| step.peers[s].map(|p| (s, p)));
        for (side, peer) in sides() {
            let face = step.send[side].ok_or_else(|| {
                Error::runtime(format!(
                    "no device face to send for dimension {d} side {side}"
                ))
            })?;
            let offer = Offer {
                addr: face.addr,
                len: face.len as u64,
                ctx: self.ctx.cu_ctx() as u64,
                device: self.ctx.cu_device() as u64,
                packed: self.packed[d].cu_event() as u64,
            };
            comm.send(peer, &offer.encode());
        }
        for (side, peer) in sides() {
            let mut b = [0u8; Offer::BYTES];
            comm.recv(peer, &mut b);
            let offer = Offer::decode(&b);
            let to = step.recv[side].ok_or_else(|| {
                Error::runtime(format!(
                    "no device face to receive for dimension {d} side {side}"
                ))
            })?;
            if offer.len != to.len as u64 {
                return Err(Error::runtime(format!(
                    "rank {peer} offers a face of {} values for one of {} (dimension {d})",
                    offer.len, to.len
                )));
            }
            self.enable_peer_access(&offer)?;
            // SAFETY: the neighbour's event lives as long as its backend,
            // which outlives the run's exchanges.
            unsafe { wait_raw(step.stream, offer.packed as sys::CUevent) }?;
            self.copy(step, &offer, to)?;
        }
        self.copied[d]
            .record(step.stream)
            .map_err(cuda_err("recording a halo event"))?;
        let copied = (self.copied[d].cu_event() as u64).to_le_bytes();
        for (_, peer) in sides() {
            comm.send(peer, &copied);
        }
        for (_, peer) in sides() {
            let mut b = [0u8; 8];
            comm.recv(peer, &mut b);
            // SAFETY: as above, the neighbour's event outlives the run.
            unsafe { wait_raw(step.stream, u64::from_le_bytes(b) as sys::CUevent) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_reads_back_as_written() {
        let o = Offer {
            addr: 0x4000_0000_1234_5678,
            len: 17,
            ctx: u64::MAX - 3,
            device: 2,
            packed: 0xdead_beef,
        };
        assert_eq!(Offer::decode(&o.encode()), o);
    }
}
