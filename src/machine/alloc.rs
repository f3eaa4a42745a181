//! Fallible allocation of large zeroed buffers, and what this process may
//! still map.
//!
//! Rust's `vec![0; n]` aborts the process when the allocator refuses
//! (`memory allocation of N bytes failed`, exit 134 with a backtrace, on
//! every rank of an MPI job). Every buffer whose size comes from the input
//! (fields, staging, stream arrays, message buffers) is taken from
//! [`zeroed`] instead, so that a refusal is an error naming what and how
//! much, which the driver turns into exit 2. The memory preflight
//! (`crate::preflight`) checks first, with [`process_room`] for the
//! process's own limits, so that a refusal is rarely reached at all.

use super::memory::{GIB, status_bytes};
use crate::error::{Error, Result};
use std::alloc::Layout;

/// Types whose all-zero bit pattern is a valid value, so that memory from
/// `alloc_zeroed` holds valid values without being written.
///
/// # Safety
/// Implement only for types for which all-zero bytes are a valid value.
pub unsafe trait Zeroable: Copy {}

// SAFETY: all-zero bits are 0 for every integer and +0.0 for every float.
unsafe impl Zeroable for f32 {}
// SAFETY: as above.
unsafe impl Zeroable for f64 {}
// SAFETY: as above.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}

/// `len` zeros of `T`, or an error naming `what` and the bytes it needed.
///
/// The memory comes from `alloc_zeroed`, as `vec![0; len]`'s does: large
/// blocks are fresh pages that are not touched here, so the thread that
/// first writes a page still decides its NUMA node.
pub fn zeroed<T: Zeroable>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = (len as u128) * size_of::<T>() as u128;
    let refused = || refused(bytes, what);
    if len == 0 || size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let layout = Layout::array::<T>(len).map_err(|_| refused())?;
    // SAFETY: the layout has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of
    // `len` values of `T` (so capacity `len`), and all-zero bytes are valid
    // values of `T` (`Zeroable`), so all `len` are initialised.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// The error for `bytes` refused for `what`.
pub fn refused(bytes: u128, what: &str) -> Error {
    Error::runtime(format!(
        "cannot allocate {bytes} bytes ({:.2} GiB) for {what}: not enough memory for this \
         process (see `ulimit -v` and the node's free memory); use a smaller problem or more \
         nodes",
        bytes as f64 / GIB
    ))
}

/// `len` copies of `value`: [`zeroed`], then filled (which touches every
/// page, from the calling thread).
pub fn filled<T: Zeroable>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = zeroed(len, what)?;
    v.fill(value);
    Ok(v)
}

/// A copy of `src` in a fallibly allocated vector.
pub fn copied<T: Zeroable>(src: &[T], what: &str) -> Result<Vec<T>> {
    let mut v = zeroed(src.len(), what)?;
    v.copy_from_slice(src);
    Ok(v)
}

/// How many more bytes this process may map under its own limits, and
/// which limit that is: `RLIMIT_AS` (`ulimit -v`) less the address space
/// already mapped, and `RLIMIT_DATA` (`ulimit -d`) less the data already
/// mapped, whichever leaves less. `None` when neither is set.
pub fn process_room() -> Option<(u128, String)> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let candidates = [
        (
            libc::RLIMIT_AS,
            "VmSize:",
            "the address-space limit (ulimit -v)",
        ),
        (
            libc::RLIMIT_DATA,
            "VmData:",
            "the data-size limit (ulimit -d)",
        ),
    ];
    candidates
        .into_iter()
        .filter_map(|(resource, field, name)| {
            let limit = soft_limit(resource)?;
            let used = status_bytes(&status, field).unwrap_or(0);
            Some((
                limit.saturating_sub(used),
                format!(
                    "{name}: {:.2} GiB, of which {:.2} GiB is mapped already",
                    limit as f64 / GIB,
                    used as f64 / GIB
                ),
            ))
        })
        .min_by_key(|(room, _)| *room)
}

/// The soft limit on `resource`, or `None` when unlimited or unreadable.
fn soft_limit(resource: libc::__rlimit_resource_t) -> Option<u128> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct, which `lim` is.
    if unsafe { libc::getrlimit(resource, &mut lim) } != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(u128::from(lim.rlim_cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_zeros_and_refusals_are_errors() {
        let v: Vec<f32> = zeroed(1000, "a test").unwrap();
        assert!(v.len() == 1000 && v.iter().all(|&x| x == 0.0));
        assert!(zeroed::<f64>(0, "nothing").unwrap().is_empty());
        // More than any address space: refused, never an abort.
        let err = zeroed::<f64>(usize::MAX / 4, "a huge test").unwrap_err();
        assert!(
            matches!(&err, Error::Runtime(m) if m.contains("a huge test") && m.contains("GiB")),
            "{err}"
        );
        assert_eq!(filled(3, 7u8, "x").unwrap(), [7, 7, 7]);
        assert_eq!(copied(&[1.5f32, 2.5], "x").unwrap(), [1.5, 2.5]);
    }

    #[test]
    fn status_fields_are_read_in_kibibytes() {
        let s = "Name:\thimeno\nVmSize:\t  2048 kB\nVmData:\t 10 kB\n";
        assert_eq!(status_bytes(s, "VmSize:"), Some(2048 * 1024));
        assert_eq!(status_bytes(s, "VmData:"), Some(10 * 1024));
        assert_eq!(status_bytes(s, "VmRSS:"), None);
    }
}
