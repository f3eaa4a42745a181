//! The one halo schedule: ghost layers of the new field are exchanged one
//! dimension after another (k, then j, then i). Each face spans the full
//! extent of the other two dimensions, ghosts included, so a later step
//! forwards the ghosts an earlier step received: that fills the edge ghosts
//! the 19-point stencil's cross terms read, with face messages only.
//! A backend packs, and later unpacks, the faces of one step in one call,
//! so that a GPU waits for its device once per step and direction.
//!
//! With temporal blocking (`--temporal T`) the same schedule carries faces
//! `T` layers deep, once every `T` iterations: forwarding full-extent slabs
//! dimension by dimension fills the edges and corners of the whole
//! dependency cone of `T` sweeps, at any depth. The solver decides when to
//! exchange; this module only moves the layers.
//!
//! How a step's faces travel is the backend's: through host staging
//! buffers and the communicator (the default, `--halo staged`), or device
//! to device when the backend has a [`DeviceHalo`] (`--halo peer`, `nccl`,
//! `mpi-device`), which queues pack, transfer and unpack on the device
//! without host waits. Either way the steps run here, in this order.

use crate::backend::{Backend, DeviceHalo, HaloStep, HostBuffer};
use crate::comm::{Comm, HaloSwap};
use crate::error::Result;
use crate::grid::decomp::{Block, Face};
use crate::timeline;
use crate::timing::{Lap, Phase, PhaseTimes};
use std::ops::Range;

/// Send and receive buffers of one dimension, sized once.
struct Step {
    dim: usize,
    peers: [Option<usize>; 2],
    /// Host buffers of the staged path (empty on the device paths).
    send: [Box<dyn HostBuffer>; 2],
    recv: [Box<dyn HostBuffer>; 2],
    /// Bytes this rank sends in the step, whatever the path.
    bytes: usize,
}

impl Step {
    /// The sides with a neighbour, as a range of the two: a step exists
    /// only for a dimension with at least one.
    fn sides(&self) -> Range<usize> {
        match self.peers {
            [Some(_), Some(_)] => 0..2,
            [Some(_), None] => 0..1,
            [None, _] => 1..2,
        }
    }
}

/// The halo exchange of one rank, with its staging buffers.
pub struct Halo {
    steps: Vec<Step>,
}

impl Halo {
    /// Prepares the exchange for `block` (faces `block.depth` layers deep),
    /// taking staging buffers from the backend (page-locked on GPUs when
    /// asked; none when the backend moves faces device to device).
    pub fn new(block: &Block, backend: &mut dyn Backend) -> Result<Halo> {
        let dims = block.local_dims();
        let staged = backend.device_halo().is_none();
        let layers = |face: Face| {
            if staged {
                face.len(dims) * block.depth
            } else {
                0
            }
        };
        let mut steps: Vec<Step> = Vec::new();
        for (face, peer) in block.halo_faces() {
            if steps.last().is_none_or(|s| s.dim != face.dim) {
                steps.push(Step {
                    dim: face.dim,
                    peers: [None, None],
                    send: [backend.staging(0)?, backend.staging(0)?],
                    recv: [backend.staging(0)?, backend.staging(0)?],
                    bytes: 0,
                });
            }
            let step = steps.last_mut().expect("pushed above");
            step.peers[face.side] = Some(peer);
            step.bytes += face.len(dims) * block.depth * 4;
            step.send[face.side] = backend.staging(layers(face))?;
            step.recv[face.side] = backend.staging(layers(face))?;
        }
        Ok(Halo { steps })
    }

    /// Bytes sent per exchange by this rank.
    pub fn bytes_per_exchange(&self) -> usize {
        self.steps.iter().map(|s| s.bytes).sum()
    }

    /// Messages sent per exchange by this rank (one per face with a
    /// neighbour).
    pub fn messages_per_exchange(&self) -> usize {
        self.steps
            .iter()
            .map(|s| s.peers.iter().flatten().count())
            .sum()
    }

    /// Exchanges the ghost layers of the backend's new field with the
    /// neighbours, adding the time of each part to `times`.
    pub fn exchange(
        &mut self,
        backend: &mut dyn Backend,
        comm: &dyn Comm,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        if let Some(device) = backend.device_halo() {
            return self.exchange_on_device(device, comm, times);
        }
        let mut clock = Lap::start();
        for step in &mut self.steps {
            let sides = step.sides();
            let face = |side| Face {
                dim: step.dim,
                side,
            };
            {
                let [s0, s1] = &mut step.send;
                let mut send: [(Face, &mut dyn HostBuffer); 2] =
                    [(face(0), s0.as_mut()), (face(1), s1.as_mut())];
                let transfer = backend.pack(&mut send[sides.clone()])?;
                timeline::lap_split(&mut clock, Phase::Pack, Phase::Transfer, transfer, times);
            }
            let [s0, s1] = &step.send;
            let [r0, r1] = &mut step.recv;
            {
                let _nvtx = crate::backend::gpu::nvtx::range(Phase::Comm.name());
                comm.exchange(HaloSwap {
                    peers: step.peers,
                    send: [s0.as_slice(), s1.as_slice()],
                    recv: [r0.as_mut_slice(), r1.as_mut_slice()],
                    tag: step.dim as i32,
                })?;
            }
            timeline::lap(&mut clock, Phase::Comm, times);
            let [r0, r1] = &step.recv;
            let recv: [(Face, &dyn HostBuffer); 2] =
                [(face(0), r0.as_ref()), (face(1), r1.as_ref())];
            let transfer = backend.unpack(&recv[sides])?;
            timeline::lap_split(&mut clock, Phase::Unpack, Phase::Transfer, transfer, times);
        }
        Ok(())
    }

    /// The same steps, in the same order, moved device to device by
    /// `device`: the host queues each part and goes on, so the times are
    /// those of queuing, the transfer's (`comm`) of the handshake with the
    /// neighbours too.
    fn exchange_on_device(
        &self,
        device: &mut dyn DeviceHalo,
        comm: &dyn Comm,
        times: &mut PhaseTimes,
    ) -> Result<()> {
        let mut clock = Lap::start();
        for step in &self.steps {
            let step = HaloStep {
                dim: step.dim,
                peers: step.peers,
            };
            device.pack_step(step)?;
            timeline::lap(&mut clock, Phase::Pack, times);
            {
                let _nvtx = crate::backend::gpu::nvtx::range(Phase::Comm.name());
                device.transfer_step(step, comm)?;
            }
            timeline::lap(&mut clock, Phase::Comm, times);
            device.unpack_step(step)?;
            timeline::lap(&mut clock, Phase::Unpack, times);
        }
        Ok(())
    }
}
