//! Device memory with whichever allocator the driver honours.
//!
//! cudarc allocates with the stream-ordered `cuMemAllocAsync` (and frees
//! with `cuMemFreeAsync`) whenever a device reports memory pools. Some
//! drivers report pools but refuse those calls: CUDA inside a sandbox
//! (gVisor), some vGPU set-ups, an emulated device in `broken` pools mode.
//! Each device is therefore tried once when opened ([`Allocator::probe`]):
//! when the stream-ordered allocator is refused, every buffer is allocated
//! with `cuMemAlloc` and freed with `cuMemFree` ([`DeviceBuf`]) instead of
//! failing the run. One line per process and device says which allocator
//! was chosen, and the record carries it (`provenance.gpu_software`).

use crate::error::{Error, Result};
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits, result, sys,
};
use std::collections::BTreeSet;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

/// Maps a driver error to a runtime error saying what was being done (as
/// `driver::cuda_err`, which this module cannot import: `driver` uses it).
fn cuda_err(what: &str) -> impl Fn(result::DriverError) -> Error + '_ {
    move |e| Error::runtime(format!("CUDA error while {what}: {e:?}"))
}

/// How a device's memory is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// The stream-ordered allocator (`cuMemAllocAsync`, memory pools).
    StreamOrdered,
    /// `cuMemAlloc`, because the device reports no memory pools (cudarc
    /// then uses it by itself).
    NoPools,
    /// `cuMemAlloc`, because the driver reports memory pools but refuses
    /// `cuMemAllocAsync`: buffers bypass cudarc's allocation and release.
    Refused,
    /// `cuMemAlloc`, because MPI reads and writes the buffers itself
    /// (`--halo mpi-device`): pool memory cannot go through CUDA IPC.
    /// Released as under `Refused`.
    Shareable,
}

impl Allocator {
    /// Tries the allocator cudarc would use on `ctx`'s device (whose
    /// `MEMORY_POOLS_SUPPORTED` is `pools`): a small stream-ordered
    /// allocation and its release.
    pub fn probe(ctx: &Arc<CudaContext>, pools: bool) -> Allocator {
        if !pools {
            return Allocator::NoPools;
        }
        let stream = ctx.default_stream();
        // SAFETY: a 256-byte allocation on the context's default stream,
        // released on the same stream and waited for before returning.
        let tried = unsafe {
            result::malloc_async(stream.cu_stream(), 256).and_then(|p| {
                result::free_async(p, stream.cu_stream())?;
                result::stream::synchronize(stream.cu_stream())
            })
        };
        match tried {
            Ok(()) => Allocator::StreamOrdered,
            Err(_) => Allocator::Refused,
        }
    }

    /// The allocator's name in the record.
    pub fn name(self) -> &'static str {
        match self {
            Allocator::StreamOrdered => "cuMemAllocAsync",
            Allocator::NoPools | Allocator::Refused | Allocator::Shareable => "cuMemAlloc",
        }
    }

    /// The one line that says which allocator device `device` uses, and
    /// why when it is not the stream-ordered one.
    pub fn line(self, device: &str) -> String {
        match self {
            Allocator::StreamOrdered => format!(
                "{device}: device memory from the stream-ordered allocator (cuMemAllocAsync)"
            ),
            Allocator::NoPools => format!(
                "{device}: device memory from cuMemAlloc (the device reports no memory pools)"
            ),
            Allocator::Refused => format!(
                "{device}: device memory from cuMemAlloc: the driver reports memory pools but \
                 refuses cuMemAllocAsync (a sandboxed or virtual GPU?); the run goes on with \
                 the plain allocator"
            ),
            Allocator::Shareable => format!(
                "{device}: device memory from cuMemAlloc, which a CUDA-aware MPI can share \
                 (--halo mpi-device)"
            ),
        }
    }

    /// Says [`Allocator::line`] once per process and device ordinal: as a
    /// warning for a refused allocator, else at the info level.
    pub fn say_once(self, ordinal: usize, device: &str) {
        static SAID: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());
        let first = SAID
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ordinal);
        if !first {
            return;
        }
        let line = self.line(device);
        match self {
            Allocator::Refused => tracing::warn!(allocator = self.name(), "{line}"),
            _ => tracing::info!(allocator = self.name(), "{line}"),
        }
    }
}

/// A device buffer of `len` values of `T`, usable as the `CudaSlice` it
/// wraps; under [`Allocator::Refused`] (and `Shareable`) it was allocated with `cuMemAlloc`
/// and is released with `cuMemFree` (cudarc would call the refused
/// `cuMemFreeAsync`).
pub struct DeviceBuf<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    plain: bool,
}

impl<T: DeviceRepr + ValidAsZeroBits> DeviceBuf<T> {
    /// `len` zeroed values on `stream`'s device, by `allocator`.
    pub fn zeros(stream: &Arc<CudaStream>, len: usize, allocator: Allocator) -> Result<Self> {
        if !matches!(allocator, Allocator::Refused | Allocator::Shareable) {
            let slice = stream
                .alloc_zeros::<T>(len)
                .map_err(cuda_err("allocating device memory"))?;
            return Ok(DeviceBuf {
                slice: ManuallyDrop::new(slice),
                plain: false,
            });
        }
        let bytes = len * std::mem::size_of::<T>();
        // SAFETY: a fresh allocation of `bytes` bytes on the current
        // context (the stream's: bound first), set to zero before it is
        // wrapped, and owned by the wrapper from then on.
        let slice = unsafe {
            stream
                .context()
                .bind_to_thread()
                .map_err(cuda_err("binding the context"))?;
            let ptr = result::malloc_sync(bytes).map_err(cuda_err("allocating device memory"))?;
            if let Err(e) = result::memset_d8_sync(ptr, 0, bytes) {
                let _ = result::free_sync(ptr);
                return Err(cuda_err("clearing device memory")(e));
            }
            stream.upgrade_device_ptr::<T>(ptr, len)
        };
        Ok(DeviceBuf {
            slice: ManuallyDrop::new(slice),
            plain: true,
        })
    }

    /// A copy of `values` on `stream`'s device, by `allocator`.
    pub fn from_host(stream: &Arc<CudaStream>, values: &[T], allocator: Allocator) -> Result<Self> {
        let mut buf = Self::zeros(stream, values.len(), allocator)?;
        stream
            .memcpy_htod(values, &mut *buf.slice)
            .map_err(cuda_err("copying initial values"))?;
        Ok(buf)
    }
}

impl<T> Deref for DeviceBuf<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> DerefMut for DeviceBuf<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }
}

impl<T> Drop for DeviceBuf<T> {
    fn drop(&mut self) {
        // SAFETY: the slice is taken once, here, and never used again.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        if !self.plain {
            drop(slice);
            return;
        }
        let stream: Arc<CudaStream> = slice.stream().clone();
        let ctx = stream.context().clone();
        // Work on the buffer may be pending: it ends before the memory
        // goes back (cudarc does the same before its own cuMemFree).
        ctx.record_err(stream.synchronize());
        let ptr: sys::CUdeviceptr = slice.leak();
        // SAFETY: `ptr` came from `cuMemAlloc` in `zeros`, nothing uses it
        // any more (the stream is idle) and it is freed once.
        ctx.record_err(unsafe { result::free_sync(ptr) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_allocator_has_one_line_naming_it() {
        for a in [
            Allocator::StreamOrdered,
            Allocator::NoPools,
            Allocator::Refused,
            Allocator::Shareable,
        ] {
            let line = a.line("GPU 0 (X)");
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains(a.name()) && line.starts_with("GPU 0 (X)"),
                "{line}"
            );
        }
        assert!(
            Allocator::Refused
                .line("g")
                .contains("refuses cuMemAllocAsync")
        );
    }
}
