//! The GPU backend's entry points in `cuda` builds: whether a GPU is
//! usable, and creating a rank's backend collectively.

use super::compile;
use super::device_backend::GpuBackend;
use super::driver::{self, Device};
use crate::backend::api::Backend;
use crate::comm::Comm;
use crate::config::RunConfig;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::Block;
/// Whether a usable GPU is present: the CUDA driver and NVRTC load, the
/// driver initialises and sees a device. Never panics.
pub fn available() -> bool {
    match driver::probe() {
        Ok(_) => true,
        Err(why) => {
            tracing::info!("no usable GPU: {why}");
            false
        }
    }
}

/// Creates the GPU backend of this rank. Collective: every rank learns
/// whether all ranks started their GPU, so that no rank waits forever for
/// one that failed. A failure every rank shares is returned as it is (rank
/// 0 prints it once); a failure of some ranks only is a runtime error that
/// the failing ranks print and that aborts the job.
pub fn create(
    cfg: &RunConfig,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    let mine = open(cfg, grid, block, comm);
    let mut failed = [f64::from(u8::from(mine.is_err()))];
    comm.sum(&mut failed);
    let failed = failed[0].round() as usize;
    match mine {
        Ok(gpu) if failed == 0 => Ok(Box::new(gpu)),
        Ok(_) => Err(Error::runtime(format!(
            "{failed} other rank(s) could not start their GPU; see their messages"
        ))),
        Err(e) if failed == comm.size() => Err(e),
        Err(Error::Usage(m)) => Err(Error::Runtime(m)),
        Err(e) => Err(e),
    }
}

/// Opens this rank's device, compiles the kernels and builds the backend.
fn open(cfg: &RunConfig, grid: &Grid, block: &Block, comm: &dyn Comm) -> Result<GpuBackend> {
    let count = driver::probe().map_err(Error::usage)?;
    let ordinal = driver::choose(cfg.device, comm.node_rank(), count)?;
    if cfg.device.is_none() && comm.node_rank() >= count {
        tracing::warn!(
            node_rank = comm.node_rank(),
            devices = count,
            "more ranks than GPUs on this node: ranks share GPU {ordinal}"
        );
    }
    let dev = Device::open(ordinal)?;
    tracing::info!(rank = comm.rank(), host = %comm.host(), device = %dev.description, "GPU chosen");
    let compiled = compile::compile(dev.cc)?;
    GpuBackend::new(dev, compiled, grid, block, cfg)
}
