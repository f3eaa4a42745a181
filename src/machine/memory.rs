//! Memory as the operating system counts it: what a buffer will occupy
//! (a [`Footprint`]), how much this node or cgroup still offers, and what
//! this process holds now and at its peak.
//!
//! The memory preflight (`crate::preflight`) adds the footprints that each
//! allocating module states for itself and compares them with these
//! figures; the results record holds the estimate beside the measured peak.

use std::iter::Sum;
use std::ops::Add;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bytes in a GiB, for messages.
pub const GIB: f64 = (1u64 << 30) as f64;

/// Size of a base page (x86-64, aarch64 with 4 KiB pages).
pub const PAGE: usize = 4096;

/// Address space a spawned thread maps for its stack (Rust's default
/// 2 MiB, and a guard page).
pub const THREAD_STACK_MAPPED: u128 = (2 << 20) + PAGE as u128;

/// Resident memory a sweep thread's stack and thread-local state come to
/// (measured: about 16 KiB each).
pub const THREAD_RESIDENT: u128 = 32 << 10;

/// Resident memory the thread that runs a rank's driver (the whole job:
/// agreement, preflight, loop, report) comes to, its deeper stack and its
/// share of the allocator's arenas (measured: about 90 KiB per in-process
/// rank; a launcher's rank is its process's main thread, already resident
/// before the estimate, which this then counts twice).
pub const RANK_THREAD_RESIDENT: u128 = 96 << 10;

/// What a buffer (or a set of them) takes: `resident`, the memory it
/// occupies once every value has been written, which the node must have;
/// `mapped`, the address space it takes, which the process's own limits
/// (`ulimit -v`) must allow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes of memory once written (whole pages).
    pub resident: u128,
    /// Bytes of address space.
    pub mapped: u128,
}

impl Footprint {
    /// A plain vector of `len` values of `T` from the allocator, written
    /// whole: its pages, and a page of the allocator's own.
    pub fn vec<T>(len: usize) -> Footprint {
        let bytes = (len as u128) * size_of::<T>() as u128;
        if bytes == 0 {
            return Footprint::default();
        }
        Footprint {
            resident: bytes.next_multiple_of(PAGE as u128),
            mapped: bytes.next_multiple_of(PAGE as u128) + PAGE as u128,
        }
    }

    /// `threads` spawned threads' stacks.
    pub fn threads(threads: usize) -> Footprint {
        Footprint {
            resident: threads as u128 * THREAD_RESIDENT,
            mapped: threads as u128 * THREAD_STACK_MAPPED,
        }
    }

    /// The thread that runs one rank's driver.
    pub fn rank_thread() -> Footprint {
        Footprint {
            resident: RANK_THREAD_RESIDENT,
            mapped: THREAD_STACK_MAPPED,
        }
    }

    /// `n` times this footprint.
    pub fn times(self, n: usize) -> Footprint {
        Footprint {
            resident: self.resident.saturating_mul(n as u128),
            mapped: self.mapped.saturating_mul(n as u128),
        }
    }
}

impl Add for Footprint {
    type Output = Footprint;
    fn add(self, o: Footprint) -> Footprint {
        Footprint {
            resident: self.resident.saturating_add(o.resident),
            mapped: self.mapped.saturating_add(o.mapped),
        }
    }
}

impl Sum for Footprint {
    fn sum<I: Iterator<Item = Footprint>>(iter: I) -> Footprint {
        iter.fold(Footprint::default(), Add::add)
    }
}

/// Memory this process may still use, in bytes, and where that figure came
/// from: the smaller of `MemAvailable` and the cgroup's limit less its
/// usage. `None` when neither can be read (then nothing is refused).
pub fn available() -> Option<(u128, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_available(&s))
        .map(|b| (b, "MemAvailable in /proc/meminfo"));
    let cgroup = cgroup_available().map(|b| (b, "the cgroup memory limit"));
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
pub fn meminfo_available(text: &str) -> Option<u128> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u128 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(value * 1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The cgroup limit less current usage, in bytes, for this process's cgroup
/// (v2 `memory.max`, or v1 `memory.limit_in_bytes`); `None` if unlimited or
/// unreadable.
fn cgroup_available() -> Option<u128> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            candidates.push(cgroup_pair(
                Path::new("/sys/fs/cgroup").join(path),
                "memory.max",
                "memory.current",
            ));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(cgroup_pair(
                Path::new("/sys/fs/cgroup/memory").join(path),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ));
        }
    }
    candidates.push(cgroup_pair(
        "/sys/fs/cgroup".into(),
        "memory.max",
        "memory.current",
    ));
    candidates.into_iter().flatten().min()
}

/// Limit less usage from the files `limit` and `usage` in `dir`.
fn cgroup_pair(dir: std::path::PathBuf, limit: &str, usage: &str) -> Option<u128> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let limit: u128 = read(limit)?.trim().parse().ok()?; // "max" -> None
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    if limit >= 1 << 60 {
        return None;
    }
    let used: u128 = read(usage).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    Some(limit.saturating_sub(used))
}

/// This process's resident memory now (`VmRSS`), in bytes, where Linux
/// tells.
pub fn resident_now() -> Option<u128> {
    status_field("VmRSS:")
}

/// This process's peak resident memory so far (`VmHWM`), in bytes, where
/// Linux tells.
pub fn resident_peak() -> Option<u128> {
    status_field("VmHWM:")
}

/// A `Name:   123 kB` field of `/proc/self/status`, in bytes.
pub fn status_field(field: &str) -> Option<u128> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_bytes(&status, field)
}

/// A `Name:   123 kB` field of the text of a `/proc/*/status`, in bytes.
pub fn status_bytes(status: &str, field: &str) -> Option<u128> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let mut words = line[field.len()..].split_whitespace();
    let value: u128 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(value * 1024),
        _ => None,
    }
}

/// What this process holds, read at the end of a run: its peak resident
/// memory and the fraction of its anonymous memory on huge pages.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessReading {
    /// Peak resident bytes (`VmHWM`).
    pub peak: Option<u128>,
    /// `AnonHugePages` over `Anonymous` in `/proc/self/smaps_rollup`.
    pub huge_fraction: Option<f64>,
}

/// How long a reading stands for the whole process.
const READING_FRESH: Duration = Duration::from_secs(1);

/// The process's [`ProcessReading`], shared by the in-process ranks that
/// ask within a second of each other: `smaps_rollup` walks every page
/// table of the process, so 1024 in-process ranks reading it one after
/// another spent 7 s in the kernel, and the figures are the process's
/// anyway.
pub fn process_reading() -> ProcessReading {
    static LAST: Mutex<Option<(Instant, ProcessReading)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, r)) = *last
        && at.elapsed() < READING_FRESH
    {
        return r;
    }
    let r = ProcessReading {
        peak: resident_peak(),
        huge_fraction: anon_huge_fraction(),
    };
    *last = Some((Instant::now(), r));
    r
}

/// The fraction of this process's anonymous memory on transparent huge
/// pages, or `None` where Linux does not tell. A rank whose fields did not
/// get huge pages (the kernel found no free 2 MiB blocks) sweeps markedly
/// slower, which only this shows.
fn anon_huge_fraction() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let kb = |key: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    let (huge, anon) = (kb("AnonHugePages:")?, kb("Anonymous:")?);
    (anon > 0.0).then(|| huge / anon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprints_add_and_round_to_pages() {
        let v = Footprint::vec::<f32>(1000);
        assert_eq!(v.resident, 4096);
        assert_eq!(Footprint::vec::<u8>(0), Footprint::default());
        let two = v + v;
        assert_eq!(two, v.times(2));
        assert_eq!([v, v].into_iter().sum::<Footprint>(), two);
        assert!(Footprint::threads(3).mapped > 3 * (2 << 20));
    }

    #[test]
    fn meminfo_is_read_in_kibibytes() {
        let text = "MemTotal:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(meminfo_available(text), Some(2048 * 1024));
        assert_eq!(meminfo_available("MemFree: 1 kB\n"), None);
        assert!(available().is_some(), "this Linux host reports its memory");
    }

    #[test]
    fn this_process_reports_its_resident_memory() {
        let (now, peak) = (resident_now().unwrap(), resident_peak().unwrap());
        assert!(now > 0 && peak >= now, "{now} {peak}");
        assert_eq!(status_bytes("VmHWM:\t  12 kB\n", "VmHWM:"), Some(12 * 1024));
        let r = process_reading();
        assert!(r.peak.is_some_and(|p| p > 0));
        if let Some(f) = r.huge_fraction {
            assert!((0.0..=1.0).contains(&f), "{f}");
        }
    }
}
