//! The `nccl` halo transport (`--halo nccl`): each dimension step's faces
//! go to and come from the neighbours as one NCCL group of sends and
//! receives, queued on the halo stream between the step's packs and its
//! unpacks (see [`super::transport`]). Stream order alone keeps the steps
//! in order, so the edges a later step forwards are the ones an earlier
//! step received; the host never waits for the device in the exchange.
//!
//! The communicator is made once per run: every rank loads NCCL (a rank
//! that cannot refuses the run for all, one line, exit 2), rank 0 makes the
//! unique id, the job's communicator carries it to the others (MPI, or the
//! in-process mailbox for `--local-ranks`), and each rank joins with its
//! device's context current. In-process ranks join the same way as
//! processes rather than through one `ncclCommInitAll`: each rank is a
//! thread that owns its device's context, so each makes its own rank.

use super::driver::cuda_err;
use super::nccl::{self, Nccl, Transfer, UniqueId};
use super::transport::{DeviceStep, FaceTransport};
use crate::comm::{Comm, decide};
use crate::config::HaloPath;
use crate::error::{Error, Result};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// The NCCL transport of one rank.
pub struct NcclTransport {
    comm: nccl::Comm,
}

impl NcclTransport {
    /// Joins the job's NCCL communicator on `ctx`'s device (collective).
    pub fn new(ctx: &Arc<CudaContext>, comm: &dyn Comm) -> Result<NcclTransport> {
        let mine = Nccl::get().err();
        let lib = decide(comm, "the NCCL library", &mine, |views| {
            match views
                .into_iter()
                .enumerate()
                .find_map(|(r, e)| e.map(|e| (r, e)))
            {
                Some((rank, e)) => Err(Error::usage(if rank == 0 {
                    e
                } else {
                    format!("rank {rank}: {e}")
                })),
                None => Ok(()),
            }
        });
        lib?;
        let nccl = Nccl::get().map_err(Error::usage)?;
        let made = if comm.rank() == 0 {
            nccl.unique_id().map(|id| id.0.to_vec())
        } else {
            Ok(Vec::new())
        };
        let id = decide(comm, "the NCCL unique id", &made, |mut views| {
            views.swap_remove(0).map_err(Error::runtime)
        })?;
        let id = UniqueId::from_bytes(&id).map_err(Error::runtime)?;
        ctx.bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        let comm =
            nccl::Comm::init_rank(nccl, comm.size(), &id, comm.rank()).map_err(Error::runtime)?;
        Ok(NcclTransport { comm })
    }
}

impl FaceTransport for NcclTransport {
    fn path(&self) -> HaloPath {
        HaloPath::Nccl
    }

    fn exchange(&mut self, step: &DeviceStep<'_>, _comm: &dyn Comm) -> Result<()> {
        let mut transfers = Vec::with_capacity(4);
        for side in 0..2 {
            let (Some(peer), Some(send), Some(recv)) =
                (step.peers[side], step.send[side], step.recv[side])
            else {
                continue;
            };
            transfers.push(Transfer::Send {
                ptr: send.addr,
                bytes: send.len * 4,
                peer,
            });
            transfers.push(Transfer::Recv {
                ptr: recv.addr,
                bytes: recv.len * 4,
                peer,
            });
        }
        if transfers.is_empty() {
            return Ok(());
        }
        // SAFETY: the faces are device buffers of this rank's backend,
        // live for the run; the packs before and the unpacks after are on
        // the same stream.
        unsafe { self.comm.exchange(&transfers, step.stream.cu_stream()) }
            .map_err(|e| Error::runtime(format!("NCCL exchange of dimension {}: {e}", step.dim)))
    }
}
