//! Opening the device-side halo transport that `--halo` names (the trait
//! and its contract: [`super::transport`]).

use super::transport::FaceTransport;
use crate::comm::Comm;
use crate::config::HaloPath;
use crate::error::Result;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// The transport of `path` for a rank whose device context is `ctx`;
/// `None` for the staged path (the host buffers of `crate::halo`). A path
/// this machine cannot run is refused with one line (exit 2).
pub fn open(
    path: HaloPath,
    ctx: &Arc<CudaContext>,
    comm: &dyn Comm,
) -> Result<Option<Box<dyn FaceTransport>>> {
    match path {
        HaloPath::Staged => Ok(None),
        HaloPath::Peer => Ok(Some(Box::new(super::peer::PeerTransport::new(ctx, comm)?))),
        HaloPath::Nccl => Ok(Some(Box::new(super::nccl_transport::NcclTransport::new(
            ctx, comm,
        )?))),
        HaloPath::MpiDevice => Ok(Some(Box::new(super::mpi_device::MpiDeviceTransport::new(
            comm,
        )?))),
    }
}
