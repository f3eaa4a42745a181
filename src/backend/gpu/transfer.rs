//! Measuring host<->device and device-to-device copies for
//! `himeno bench transfer` (which summarises and prints the samples).
//!
//! Every host<->device copy is issued and waited for on its own and timed
//! with the host clock, so the numbers are what a halo exchange sees,
//! including the driver's call overhead (that is the latency at small
//! sizes). Device-to-device copies run back to back with one wait at the
//! end: that is the sustained bandwidth of device memory.

use super::alloc::DeviceBuf;
use super::driver::{self, Device, cuda_err};
use super::staging::PinnedBuffer;
use super::transfer_samples::{Measured, SERIES, Sample};
use crate::backend::api::HostBuffer;
use crate::error::{Error, Result};
use crate::machine::memory::GIB;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, result};
use std::sync::Arc;
use std::time::Instant;

/// Bytes moved per size when choosing how many copies to time.
const BYTES_PER_SIZE: usize = 1 << 30;
/// Fewest and most copies timed per size.
const COPIES: (usize, usize) = (5, 200);
/// Measures copies of every size in `sizes` (bytes) on device `device`.
/// Too large a size is a usage error (exit 2) before anything is
/// allocated: two device buffers and a pinned and a pageable host buffer
/// of the largest size. The caller checks the host's available memory.
pub fn measure_transfers(device: usize, sizes: &[usize]) -> Result<Measured> {
    let count = driver::probe().map_err(Error::usage)?.devices;
    let ordinal = driver::choose(Some(device), 0, count)?;
    let dev = Device::open(ordinal)?;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let (free, _total) = dev.memory()?;
    if free < 2 * max as u64 {
        return Err(Error::usage(format!(
            "bench transfer --max-bytes {max} needs {:.2} GiB of device memory (two buffers) \
             but {} has {:.2} GiB free: use a smaller --max-bytes",
            2.0 * max as f64 / GIB,
            dev.description,
            free as f64 / GIB
        )));
    }
    let st = dev
        .ctx
        .new_stream()
        .map_err(cuda_err("creating a stream"))?;
    let a = DeviceBuf::<u8>::zeros(&st, max, dev.allocator)?;
    let b = DeviceBuf::<u8>::zeros(&st, max, dev.allocator)?;
    let mut pinned = PinnedBuffer::new(&dev.ctx, max.div_ceil(4))?;
    // Touched so that its pages exist before timing.
    let mut pageable = crate::machine::alloc::filled(max, 1u8, "the pageable host buffer")?;
    let (pa, pb) = (addr(&a, &st), addr(&b, &st));

    let mut samples = Vec::new();
    for &bytes in sizes {
        let copies = (BYTES_PER_SIZE / bytes).clamp(COPIES.0, COPIES.1);
        for (dir, mem) in SERIES {
            let mut copy = |wait: bool| -> Result<()> {
                match (dir, mem) {
                    ("h2d", "pinned") => h2d(&st, pa, &as_bytes(pinned.as_mut_slice())[..bytes]),
                    ("h2d", _) => h2d(&st, pa, &pageable[..bytes]),
                    ("d2h", "pinned") => {
                        d2h(&st, &mut as_bytes(pinned.as_mut_slice())[..bytes], pa)
                    }
                    ("d2h", _) => d2h(&st, &mut pageable[..bytes], pa),
                    _ => d2d(&st, pb, pa, bytes, wait),
                }
            };
            // Two untimed copies: first-use costs stay out of the numbers.
            copy(true)?;
            copy(true)?;
            let start = Instant::now();
            for _ in 0..copies {
                copy(false)?;
            }
            st.synchronize().map_err(cuda_err("copying"))?;
            let t = start.elapsed().as_secs_f64() / copies as f64;
            let moved = if dir == "d2d" { 2 * bytes } else { bytes };
            samples.push(Sample {
                direction: dir.into(),
                memory: mem.into(),
                bytes,
                copies: copies as u32,
                seconds_per_copy: t,
                gbytes_per_s: moved as f64 / t / 1e9,
            });
        }
    }
    Ok(Measured {
        device: dev.description.clone(),
        samples,
        emulator: driver::emulator(),
    })
}

/// Views page-locked `f32`s as bytes.
fn as_bytes(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: any bit pattern is a valid u8 and the length covers exactly
    // the same memory.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Raw device address of `s`.
fn addr(s: &CudaSlice<u8>, st: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(st);
    p
}

/// One host-to-device copy, waited for.
fn h2d(st: &Arc<CudaStream>, dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: `dst` has room for `src.len()` bytes; waited for below.
    unsafe { result::memcpy_htod_async(dst, src, st.cu_stream()) }
        .map_err(cuda_err("copying to the device"))?;
    st.synchronize().map_err(cuda_err("copying to the device"))
}

/// One device-to-host copy, waited for.
fn d2h(st: &Arc<CudaStream>, dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: `src` holds at least `dst.len()` bytes; waited for below.
    unsafe { result::memcpy_dtoh_async(dst, src, st.cu_stream()) }
        .map_err(cuda_err("copying to the host"))?;
    st.synchronize().map_err(cuda_err("copying to the host"))
}

/// One device-to-device copy of `bytes`, waited for when `wait` is set.
/// Timed copies run back to back (one wait at the end): this is the
/// sustained device memory bandwidth the sweep is compared with.
fn d2d(st: &Arc<CudaStream>, dst: u64, src: u64, bytes: usize, wait: bool) -> Result<()> {
    // SAFETY: both buffers hold at least `bytes` bytes and stay allocated
    // until the stream is synchronised.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, st.cu_stream()) }
        .map_err(cuda_err("copying on the device"))?;
    if wait {
        st.synchronize()
            .map_err(cuda_err("copying on the device"))?;
    }
    Ok(())
}
