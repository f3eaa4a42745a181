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
//!
//! A huge page is faulted in whole at its first write, so a buffer of a few
//! KiB on one would take 2 MiB (and the 14 fields of a tiny in-process rank
//! 28 MiB): buffers smaller than a huge page stay on base pages, aligned
//! the same way to a 4 KiB boundary. [`HugeBuffer::footprint`] states what
//! a buffer will occupy, so the memory preflight counts exactly this.
//!
//! Each buffer on huge pages is an anonymous mapping of its own (`mmap`),
//! not a block from `malloc`: glibc raises its mmap threshold to the size
//! of the largest mapped block freed (up to 32 MiB), so after `--stream
//! quick` freed its 31 MiB Sum13 arrays the size M fields (22 MiB each)
//! came from the brk heap instead, partly cleared by the allocator before
//! the huge-page advice, with fewer of their pages huge (0.91-0.93 against
//! 0.94; notes/cpu-perf.md, sixth session). A mapping of its own is fresh,
//! untouched and zero whatever the allocator did before.

#[cfg(unix)]
use super::alloc::refused;
use super::alloc::{Zeroable, zeroed};
use super::memory::{Footprint, PAGE};
use crate::error::{Error, Result};
use std::ops::{Deref, DerefMut};

/// Size of a transparent huge page (x86-64 and most Linux configurations).
const HUGE: usize = 2 << 20;

/// A zeroed buffer of `len` values whose data starts `shift` bytes after a
/// page boundary: a 2 MiB one, with huge pages requested (Linux `madvise`,
/// a hint the kernel may ignore), when the data fills at least one huge
/// page, else a 4 KiB one. The pages are not touched here: the thread that
/// first writes a page decides its NUMA node. Dereferences to the data.
pub struct HugeBuffer<T> {
    buf: Memory<T>,
    off: usize,
    len: usize,
}

impl<T: Zeroable> HugeBuffer<T> {
    /// `len` zeros, or an error naming `what` when the memory is refused;
    /// `shift` (bytes, a multiple of `T`'s size, below 2 MiB) staggers
    /// buffers against each other within the page. The zeros are fresh,
    /// untouched pages.
    pub fn zeroed(len: usize, shift: usize, what: &str) -> Result<HugeBuffer<T>> {
        Self::zeroed_advised(len, shift, what, true)
    }

    /// As [`HugeBuffer::zeroed`], but huge pages are asked for only when
    /// `huge` is set: without, the memory gets the pages the system gives
    /// memory nobody advised (as a C program's static arrays get them:
    /// 4 KiB ones under the common `madvise` setting of transparent huge
    /// pages).
    pub fn zeroed_advised(
        len: usize,
        shift: usize,
        what: &str,
        huge: bool,
    ) -> Result<HugeBuffer<T>> {
        let size = size_of::<T>();
        assert!(
            shift.is_multiple_of(size) && shift < HUGE,
            "shift {shift} is not a multiple of {size} below 2 MiB"
        );
        let unit = unit(len.saturating_mul(size));
        // Up to a page to reach the boundary, the shift, a page of slack.
        let total = len
            .checked_add((2 * unit + shift) / size)
            .ok_or_else(|| Error::runtime(format!("{what}: {len} values do not fit in memory")))?;
        let buf = if unit == HUGE {
            Memory::Mapped(Pages::<T>::zeroed(total, what)?)
        } else {
            Memory::Heap(zeroed(total, what)?)
        };
        let addr = buf.as_ptr() as usize;
        let to_boundary = (unit - addr % unit) % unit;
        if unit == HUGE && huge {
            advise(addr + to_boundary, buf.len() * size - to_boundary);
        }
        Ok(HugeBuffer {
            off: (to_boundary + shift) / size,
            len,
            buf,
        })
    }
}

impl<T> HugeBuffer<T> {
    /// The memory [`HugeBuffer::zeroed`]`(len, shift, ..)` maps, and
    /// occupies once every value has been written: the whole pages from
    /// the one holding the first value to the one holding the last.
    pub fn footprint(len: usize, shift: usize) -> Footprint {
        let bytes = (len as u128) * size_of::<T>() as u128;
        let unit = unit(usize::try_from(bytes).unwrap_or(usize::MAX)) as u128;
        let shift = shift as u128;
        let first = shift / unit * unit;
        Footprint {
            resident: if bytes == 0 {
                0
            } else {
                (shift + bytes).next_multiple_of(unit) - first
            },
            mapped: bytes + 2 * unit + shift,
        }
    }
}

/// The page size a buffer of `bytes` is aligned to and backed by: huge
/// pages only for a buffer that fills one.
fn unit(bytes: usize) -> usize {
    if bytes >= HUGE { HUGE } else { PAGE }
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

/// Where a buffer's values live: a mapping of its own for one on huge
/// pages (see the module's doc), the allocator's memory for a smaller one,
/// which takes base pages (a few KiB each, mostly from the arenas the
/// allocator keeps anyway) as any vector does.
enum Memory<T> {
    Mapped(Pages<T>),
    Heap(Vec<T>),
}

impl<T> Deref for Memory<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Memory::Mapped(p) => p,
            Memory::Heap(v) => v,
        }
    }
}

impl<T> DerefMut for Memory<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Memory::Mapped(p) => p,
            Memory::Heap(v) => v,
        }
    }
}

/// `len` zeroed values in an anonymous mapping of their own (see the
/// module's doc), unmapped when dropped.
#[cfg(unix)]
struct Pages<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

// SAFETY: `Pages` owns its mapping as a `Vec` owns its memory.
#[cfg(unix)]
unsafe impl<T: Send> Send for Pages<T> {}
// SAFETY: shared access only reads, as for a `Vec`.
#[cfg(unix)]
unsafe impl<T: Sync> Sync for Pages<T> {}

#[cfg(unix)]
impl<T: Zeroable> Pages<T> {
    /// Maps `len` values (at least one page), or an error naming `what`.
    fn zeroed(len: usize, what: &str) -> Result<Pages<T>> {
        let bytes = len
            .checked_mul(size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| Error::runtime(format!("{what}: {len} values do not fit in memory")))?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. Its pages read as zeros, a valid `T` (`Zeroable`).
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(refused(bytes as u128, what));
        }
        Ok(Pages {
            ptr: std::ptr::NonNull::new(addr.cast::<T>()).expect("mmap returned a mapping"),
            len,
        })
    }
}

#[cfg(unix)]
impl<T> Drop for Pages<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `zeroed`, of this length, unmapped once.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), (self.len * size_of::<T>()).max(1));
        }
    }
}

#[cfg(unix)]
impl<T> Deref for Pages<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values (zeros or written since) in a
        // live mapping this value owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(unix)]
impl<T> DerefMut for Pages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Off Unix, the allocator's zeroed memory.
#[cfg(not(unix))]
type Pages<T> = ZeroedVec<T>;

/// A `Vec` from [`zeroed`] (off Unix).
#[cfg(not(unix))]
struct ZeroedVec<T>(Vec<T>);

#[cfg(not(unix))]
impl<T: Zeroable> ZeroedVec<T> {
    fn zeroed(len: usize, what: &str) -> Result<ZeroedVec<T>> {
        zeroed(len, what).map(ZeroedVec)
    }
}

#[cfg(not(unix))]
impl<T> Deref for ZeroedVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

#[cfg(not(unix))]
impl<T> DerefMut for ZeroedVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
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
            let unit = unit(4 * len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0.0));
            assert_eq!(b.as_ptr() as usize % unit, shift);
            // The page holding the last value lies inside the buffer.
            let end = b.as_ptr() as usize + 4 * len;
            let alloc_end = b.buf.as_ptr() as usize + 4 * b.buf.len();
            assert!(end.next_multiple_of(unit) <= alloc_end);
            if let Some(last) = b.last_mut() {
                *last = 1.0;
            }
        }
        let d = HugeBuffer::<f64>::zeroed(10, 512, "a test").unwrap();
        assert_eq!(d.as_ptr() as usize % PAGE, 512);
    }

    #[test]
    fn only_buffers_that_fill_a_huge_page_are_on_huge_pages() {
        assert_eq!(unit(HUGE - 1), PAGE);
        assert_eq!(unit(HUGE), HUGE);
        // A few KiB take a base page or two, not 2 MiB.
        assert_eq!(HugeBuffer::<f32>::footprint(960, 256).resident, 4096);
        assert_eq!(HugeBuffer::<f32>::footprint(1024, 256).resident, 8192);
        assert_eq!(HugeBuffer::<f32>::footprint(1024, 8448).resident, 8192);
        // 2 MiB of data shifted off the boundary touch two huge pages.
        assert_eq!(
            HugeBuffer::<f32>::footprint(HUGE / 4, 60).resident,
            2 * HUGE as u128
        );
        assert_eq!(
            HugeBuffer::<f32>::footprint(HUGE / 4, 0).resident,
            HUGE as u128
        );
        assert_eq!(HugeBuffer::<f32>::footprint(0, 0).resident, 0);
        // What is mapped covers what is touched.
        for (len, shift) in [(1, 4), (5000, 8448), (HUGE, 1 << 20)] {
            let f = HugeBuffer::<f32>::footprint(len, shift);
            assert!(f.mapped >= f.resident, "{f:?}");
        }
    }

    /// The VmFlags of the mapping holding `addr` in /proc/self/smaps.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_string();
            }
        }
        panic!("no mapping holds {addr:#x}")
    }

    /// Huge pages are asked for (`hg` in the mapping's flags) only where
    /// wanted: `bench stream`'s arrays go without, as STREAM's do.
    #[test]
    #[cfg(target_os = "linux")]
    fn huge_pages_are_advised_only_when_asked() {
        let len = 3 * HUGE / 8;
        let advised = HugeBuffer::<f64>::zeroed(len, 256, "a test").unwrap();
        let plain = HugeBuffer::<f64>::zeroed_advised(len, 256, "a test", false).unwrap();
        let flags = |b: &HugeBuffer<f64>| vm_flags(b.as_ptr() as usize + HUGE);
        assert!(
            flags(&advised).split(' ').any(|f| f == "hg"),
            "{}",
            flags(&advised)
        );
        assert!(
            !flags(&plain).split(' ').any(|f| f == "hg"),
            "{}",
            flags(&plain)
        );
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
