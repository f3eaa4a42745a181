//! Page-locked host buffers for halo messages and transfer benchmarks.
//!
//! Allocated with plain `cuMemHostAlloc` flags 0: cacheable, page-locked
//! memory that the device reads and writes by DMA and the CPU (and MPI)
//! reads at full speed. cudarc's `alloc_pinned` is deliberately not used: it
//! asks for write-combined memory, which CPUs read very slowly.

use super::driver::cuda_err;
use crate::backend::api::HostBuffer;
use crate::error::Result;
use cudarc::driver::{CudaContext, result};
use std::sync::Arc;

/// `len` page-locked `f32` values, zeroed.
pub struct PinnedBuffer {
    ptr: *mut f32,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer is plain host memory owned by this value alone.
unsafe impl Send for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` values in `ctx`.
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedBuffer> {
        ctx.bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        // One value at least: a zero-byte request may return no pointer.
        let bytes = len.max(1) * std::mem::size_of::<f32>();
        // SAFETY: flags 0 asks for ordinary page-locked memory; it is
        // zeroed below before anyone reads it.
        let raw = unsafe { result::malloc_host(bytes, 0) }
            .map_err(cuda_err("allocating page-locked host memory"))?;
        let ptr = raw.cast::<f32>();
        // SAFETY: `ptr` points to `bytes` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr, 0, len.max(1)) };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }
}

impl HostBuffer for PinnedBuffer {
    fn as_slice(&self) -> &[f32] {
        // SAFETY: `ptr` holds `len` initialised values owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from `malloc_host` and is freed once.
        if let Err(e) = unsafe { result::free_host(self.ptr.cast()) } {
            tracing::warn!("freeing page-locked memory failed: {e:?}");
        }
    }
}
