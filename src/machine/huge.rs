//! Large host buffers on transparent huge pages, shared by the CPU sweep's
//! fields and `himeno bench stream`'s arrays so that their bandwidths
//! compare.
//!
//! Huge pages keep the hardware prefetchers streaming across what would be
//! 4 KiB page boundaries, and save TLB misses (dear in a virtual machine,
//! where each one walks two page tables). A 2 MiB page can only back a
//! 2 MiB-aligned range that lies wholly inside the allocation, so the data
//! of a [`HugeBuffer`] starts just after a 2 MiB boundary and is followed by
//! 2 MiB of slack: every 2 MiB page it touches can be a huge one. Left to
//! the allocator's alignment, the partial pages at both ends of the size M
//! fields held 18% of them on 4 KiB pages.

use super::alloc::{Zeroable, zeroed};
use crate::error::{Error, Result};
use std::ops::{Deref, DerefMut};

/// Size of a transparent huge page (x86-64 and most Linux configurations).
const HUGE: usize = 2 << 20;

/// Bytes a [`HugeBuffer`] maps beyond its data and shift: up to 2 MiB to
/// reach a boundary and 2 MiB of slack after the data.
pub const SLACK_BYTES: usize = 2 * HUGE;

/// A zeroed buffer of `len` values whose data starts `shift` bytes after a
/// 2 MiB boundary, with huge pages requested (Linux `madvise`, a hint the
/// kernel may ignore). The pages are not touched here: the thread that
/// first writes a page decides its NUMA node. Dereferences to the data.
pub struct HugeBuffer<T> {
    buf: Vec<T>,
    off: usize,
    len: usize,
}

impl<T: Zeroable> HugeBuffer<T> {
    /// `len` zeros, or an error naming `what` when the memory is refused;
    /// `shift` (bytes, a multiple of `T`'s size, below 2 MiB) staggers
    /// buffers against each other within the page. The zeros are fresh,
    /// untouched pages.
    pub fn zeroed(len: usize, shift: usize, what: &str) -> Result<HugeBuffer<T>> {
        let size = size_of::<T>();
        assert!(
            shift.is_multiple_of(size) && shift < HUGE,
            "shift {shift} is not a multiple of {size} below 2 MiB"
        );
        // Up to 2 MiB to reach the boundary, the shift, 2 MiB of slack.
        let total = len
            .checked_add((SLACK_BYTES + shift) / size)
            .ok_or_else(|| Error::runtime(format!("{what}: {len} values do not fit in memory")))?;
        let buf: Vec<T> = zeroed(total, what)?;
        let addr = buf.as_ptr() as usize;
        let to_boundary = (HUGE - addr % HUGE) % HUGE;
        advise(addr + to_boundary, buf.len() * size - to_boundary);
        Ok(HugeBuffer {
            off: (to_boundary + shift) / size,
            len,
            buf,
        })
    }
}

impl<T> Deref for HugeBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl<T> DerefMut for HugeBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Asks for transparent huge pages on the whole 2 MiB pages of the `len`
/// bytes at `addr` (a 2 MiB boundary); failure only costs speed, so it is
/// ignored.
#[cfg(target_os = "linux")]
fn advise(addr: usize, len: usize) {
    let len = len / HUGE * HUGE;
    if len > 0 {
        // SAFETY: the range lies inside one live allocation; MADV_HUGEPAGE
        // changes no contents.
        unsafe {
            libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}

/// The fraction of this process's anonymous memory on transparent huge
/// pages (`AnonHugePages` over `Anonymous` in `/proc/self/smaps_rollup`),
/// or `None` where Linux does not tell. A rank whose fields did not get
/// huge pages (the kernel found no free 2 MiB blocks) sweeps markedly
/// slower, which only this shows.
pub fn anon_huge_fraction() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kb = |key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    let (huge, anon) = (kb("AnonHugePages:")?, kb("Anonymous:")?);
    (anon > 0.0).then(|| huge / anon)
}

/// No huge-page hint off Linux.
#[cfg(not(target_os = "linux"))]
fn advise(_addr: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_starts_at_the_shift_after_a_boundary_and_is_zero() {
        for (len, shift) in [(0, 0), (1, 4), (1000, 256), (3 << 20, 1024 + 60)] {
            let mut b = HugeBuffer::<f32>::zeroed(len, shift, "a test").unwrap();
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0.0));
            assert_eq!(b.as_ptr() as usize % HUGE, shift);
            // The 2 MiB page holding the last value lies inside the buffer.
            let end = b.as_ptr() as usize + 4 * len;
            let alloc_end = b.buf.as_ptr() as usize + 4 * b.buf.len();
            assert!(end.next_multiple_of(HUGE) <= alloc_end);
            if let Some(last) = b.last_mut() {
                *last = 1.0;
            }
        }
        let d = HugeBuffer::<f64>::zeroed(10, 512, "a test").unwrap();
        assert_eq!(d.as_ptr() as usize % HUGE, 512);
    }

    #[test]
    fn huge_page_coverage_is_a_fraction() {
        let b = HugeBuffer::<f32>::zeroed(3 << 20, 0, "a test buffer").unwrap();
        let _touched: f32 = b.iter().step_by(1024).sum();
        if let Some(f) = anon_huge_fraction() {
            assert!((0.0..=1.0).contains(&f), "{f}");
        }
    }

    #[test]
    #[should_panic(expected = "not a multiple")]
    fn a_shift_that_splits_a_value_is_refused() {
        let _ = HugeBuffer::<f64>::zeroed(4, 4, "a test");
    }

    #[test]
    fn a_refused_buffer_is_an_error() {
        let err = HugeBuffer::<f64>::zeroed(usize::MAX / 16, 0, "huge arrays");
        assert!(err.is_err_and(|e| e.to_string().contains("huge arrays")));
    }
}
