//! The GPU backend's entry points in `cuda` builds: whether a GPU is
//! usable, and creating a rank's backend collectively.

use super::compile;
use super::device_backend::{GpuBackend, Kernels, Opened};
use super::driver::{self, Device, cuda_err};
use super::launch::{self, SweepPlan};
use super::memcheck::{self, Report};
use super::options::GpuOptions;
use crate::backend::api::Backend;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, Face};

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

/// Creates the GPU backend of this rank. Collective, in three steps that
/// every rank goes through together: open the device and load the kernels,
/// check that each GPU has the memory of all the ranks that share it, then
/// allocate. After each step every rank learns whether all succeeded, so
/// that no rank waits forever for one that failed. A failure every rank
/// shares is returned as it is (rank 0 prints it once); a failure of some
/// ranks only is a runtime error that the failing ranks print and that
/// aborts the job.
pub fn create(
    cfg: &GpuOptions,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    let (opened, plan) = agree(open(cfg, block, comm), comm)?;
    // Every rank has opened its device and loaded its kernels (the step
    // above is collective), and none has allocated yet.
    let (free, _total) = agree(opened.dev.memory(), comm)?;
    let dims = block.local_dims();
    let faces: Vec<Face> = block.halo_faces().map(|(f, _)| f).collect();
    let mine = Report {
        host: comm.host(),
        device: opened.dev.identity.clone(),
        description: opened.dev.description.clone(),
        need: launch::device_bytes(dims, plan.partials, &faces),
        free,
    };
    memcheck::check(&mine, comm)?;
    let gpu = agree(GpuBackend::new(opened, plan, grid, block, cfg), comm)?;
    Ok(Box::new(gpu))
}

/// Every rank's outcome of one step: `mine` when every rank succeeded,
/// else an error on every rank (see [`create`]).
fn agree<T>(mine: Result<T>, comm: &dyn Comm) -> Result<T> {
    let mut failed = [f64::from(u8::from(mine.is_err()))];
    comm.sum(&mut failed);
    let failed = failed[0].round() as usize;
    match mine {
        Ok(v) if failed == 0 => Ok(v),
        Ok(_) => Err(Error::runtime(format!(
            "{failed} other rank(s) could not start their GPU; see their messages"
        ))),
        Err(e) if failed == comm.size() => Err(e),
        Err(Error::Usage(m)) => Err(Error::Runtime(m)),
        Err(e) => Err(e),
    }
}

/// Opens this rank's device, plans its launches, and compiles and loads
/// the kernels (ranks of one process compile once).
fn open(cfg: &GpuOptions, block: &Block, comm: &dyn Comm) -> Result<(Opened, SweepPlan)> {
    let probe = driver::probe().map_err(Error::usage)?;
    let count = probe.devices;
    let ordinal = driver::choose(cfg.device, comm.node_rank(), count)?;
    // Said once per node (by its first rank without a GPU of its own):
    // in-process ranks on one GPU share it by design.
    if cfg.device.is_none() && comm.node_rank() == count {
        tracing::warn!(
            ranks = comm.node_size(),
            devices = count,
            "more ranks than GPUs on this node: ranks share GPUs (node-local rank modulo {count})"
        );
    }
    let plan = SweepPlan::of(block)?;
    // Said before the device is opened, so that the log tells even when
    // opening it fails.
    if let Some(emu) = driver::emulator() {
        tracing::info!(
            rank = comm.rank(),
            emulator = %emu,
            "the CUDA driver is an emulator: its times are not GPU performance"
        );
    }
    let dev = Device::open(ordinal)?;
    tracing::info!(
        rank = comm.rank(),
        host = %comm.host(),
        device = %dev.description,
        software = %probe.describe(),
        "GPU chosen"
    );
    let compiled = compile::compile(probe.nvrtc, dev.cc, cfg.occupancy)?;
    let module = dev.ctx.load_module(compiled.ptx.clone()).map_err(|e| {
        let newer = probe.nvrtc.version.0 > probe.driver.0;
        Error::runtime(format!(
            "CUDA error while loading the compiled kernels: {e:?}{}",
            if newer {
                format!(
                    " (NVRTC {} is newer than the driver's CUDA {}.{}: set HIMENO_NVRTC_LIB \
                         to an NVRTC of CUDA {} or older)",
                    probe.nvrtc.version_string(),
                    probe.driver.0,
                    probe.driver.1,
                    probe.driver.0
                )
            } else {
                String::new()
            }
        ))
    })?;
    let kernels = Kernels::load(&module)?;
    dev.ctx
        .bind_to_thread()
        .map_err(cuda_err("binding the context"))?;
    Ok((
        Opened {
            probe,
            dev,
            compiled,
            kernels,
        },
        plan,
    ))
}
