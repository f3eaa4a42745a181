//! Page-locked host memory for halo messages, the per-iteration gosa
//! read-back and the transfer benchmarks.
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

/// `len` page-locked values of a plain numeric type, zeroed.
pub struct Pinned<T: Copy> {
    ptr: *mut T,
    len: usize,
    ctx: Arc<CudaContext>,
}

/// Page-locked `f32`s: halo staging buffers.
pub type PinnedBuffer = Pinned<f32>;

// SAFETY: the buffer is plain host memory owned by this value alone.
unsafe impl<T: Copy> Send for Pinned<T> {}

impl<T: Copy> Pinned<T> {
    /// Allocates `len` values in `ctx`. `T` must be a plain numeric type,
    /// for which all-zero bytes are a valid value.
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Pinned<T>> {
        ctx.bind_to_thread()
            .map_err(cuda_err("binding the context"))?;
        // One value at least: a zero-byte request may return no pointer.
        let bytes = len.max(1) * std::mem::size_of::<T>();
        // SAFETY: flags 0 asks for ordinary page-locked memory; it is
        // zeroed below before anyone reads it.
        let raw = unsafe { result::malloc_host(bytes, 0) }
            .map_err(cuda_err("allocating page-locked host memory"))?;
        let ptr = raw.cast::<T>();
        // SAFETY: `ptr` points to `bytes` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
        Ok(Pinned {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    /// The values.
    pub fn values(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised values owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The values, writable.
    pub fn values_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl HostBuffer for Pinned<f32> {
    fn as_slice(&self) -> &[f32] {
        self.values()
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        self.values_mut()
    }
}

impl<T: Copy> Drop for Pinned<T> {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from `malloc_host` and is freed once.
        if let Err(e) = unsafe { result::free_host(self.ptr.cast()) } {
            tracing::warn!("freeing page-locked memory failed: {e:?}");
        }
    }
}

/// Says, once per process, that page-locked staging of `bytes` bytes was
/// refused (`why`) and that the halo is staged in pageable memory
/// instead: slower copies, the same results.
pub fn pinned_refused(bytes: usize, why: &crate::error::Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!(
            "page-locked staging refused ({bytes} bytes: {}): the halo is staged in pageable \
             memory instead (as --staging pageable)",
            why.message()
        );
    });
}
