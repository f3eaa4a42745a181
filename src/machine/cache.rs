//! The node's caches, read from Linux sysfs: the last level, for sizing
//! `bench stream`'s arrays beyond it and deciding whether a rank's fields
//! can stay in it between sweeps, and one core's own caches, for sizing the
//! tiles of the temporal wavefront.

use crate::environment;
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Size of one last-level cache assumed when sysfs does not describe the
/// caches (a server-class L3 of one chiplet or one small socket).
pub const ASSUMED_BYTES: usize = 32 << 20;

/// The highest cache level of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastLevel {
    /// Bytes of one instance (the largest, if they differ).
    pub instance_bytes: usize,
    /// Bytes of all instances together (CPUs sharing one instance list
    /// the same `shared_cpu_list`).
    pub node_bytes: usize,
}

impl LastLevel {
    /// This node's last-level cache, or [`ASSUMED_BYTES`] as a single
    /// instance when sysfs does not tell. An instance of the size
    /// [`environment::LLC_BYTES`] states replaces sysfs's, as many times
    /// as sysfs counts instances.
    pub fn detect() -> LastLevel {
        let found = from_sysfs(Path::new("/sys/devices/system/cpu"));
        let found = found.unwrap_or(LastLevel {
            instance_bytes: ASSUMED_BYTES,
            node_bytes: ASSUMED_BYTES,
        });
        match stated() {
            Ok(Some(bytes)) => {
                let instances = (found.node_bytes / found.instance_bytes.max(1)).max(1);
                LastLevel {
                    instance_bytes: bytes,
                    node_bytes: bytes.saturating_mul(instances),
                }
            }
            _ => found,
        }
    }

    /// Whether fields of `bytes` on this node stay in the cache from one
    /// sweep to the next: at most half of it. Fuller, the sweep runs at
    /// its rate from memory: on a Zen 3 guest's 32 MiB L3 (a victim cache,
    /// shared with other guests) size S's 28 MiB swept at 0.72-0.78x
    /// without prefetch and 1.4-1.6x faster with temporal blocking, as
    /// beyond the cache (notes/cpu-perf.md).
    pub fn holds(&self, bytes: usize) -> bool {
        bytes <= self.node_bytes / 2
    }
}

/// Private cache assumed per core when sysfs does not tell (a common L2).
pub const ASSUMED_PRIVATE_BYTES: usize = 1 << 20;

/// The caches one core works in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerCore {
    /// The largest cache private to the core (L2 on most).
    pub private_bytes: usize,
    /// One instance of the last level.
    pub shared_bytes: usize,
    /// CPUs that share that instance.
    pub sharing: usize,
}

impl PerCore {
    /// The caches of CPU 0, or assumed ones when sysfs does not tell; the
    /// shared instance is [`environment::LLC_BYTES`]'s when that is set.
    pub fn detect() -> PerCore {
        let found = per_core_from_sysfs(Path::new("/sys/devices/system/cpu/cpu0"));
        let found = found.unwrap_or(PerCore {
            private_bytes: ASSUMED_PRIVATE_BYTES,
            shared_bytes: ASSUMED_BYTES,
            sharing: 8,
        });
        match stated() {
            Ok(Some(bytes)) => PerCore {
                shared_bytes: bytes,
                ..found
            },
            _ => found,
        }
    }

    /// Whether fields of `bytes`, swept by one thread on this core, stay
    /// in its private cache from one sweep to the next: at most half of it
    /// (the sweep writes a new field beside the one it reads, and the
    /// coefficients stream past both). Beyond it they come from the last
    /// level at best, which on a Xeon guest swept 26x34x97 (4.8 MB, a
    /// 2 MiB L2) at 0.4x the rate of 10x18x98 (1 MB) from the L2, however
    /// large its L3 (notes/cpu-perf.md).
    pub fn holds(&self, bytes: usize) -> bool {
        bytes <= self.private_bytes / 2
    }

    /// Bytes one thread's cache-blocked working set should stay within:
    /// its share of the last level (the core's own caches hold too little
    /// to keep a useful tile without cutting its memory runs short).
    pub fn budget_bytes(&self) -> usize {
        (self.shared_bytes / self.sharing.max(1)).max(self.private_bytes)
    }
}

/// [`PerCore::detect`] over the sysfs folder `cpu` of one CPU.
fn per_core_from_sysfs(cpu: &Path) -> Option<PerCore> {
    // (level, CPUs sharing it, bytes) of every data or unified cache.
    let mut caches = Vec::new();
    for index in fs::read_dir(cpu.join("cache")).ok()?.flatten() {
        let read = |f: &str| fs::read_to_string(index.path().join(f)).ok();
        if read("type").is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let level = read("level").and_then(|l| l.trim().parse::<u32>().ok());
        let bytes = read("size").and_then(|s| parse_size(&s));
        let sharing = read("shared_cpu_list").and_then(|s| cpu_count(&s));
        if let (Some(level), Some(bytes), Some(sharing)) = (level, bytes, sharing) {
            caches.push((level, sharing, bytes));
        }
    }
    let top = caches.iter().max_by_key(|c| c.0)?;
    let private = caches
        .iter()
        .filter(|c| c.1 == 1)
        .max_by_key(|c| c.0)
        .map_or(ASSUMED_PRIVATE_BYTES, |c| c.2);
    Some(PerCore {
        private_bytes: private,
        shared_bytes: top.2,
        sharing: top.1,
    })
}

/// Number of CPUs in a sysfs CPU list such as `0-3,8,10-11`.
fn cpu_count(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    (n > 0).then_some(n)
}

/// [`LastLevel::detect`] over a sysfs tree rooted at `cpus`.
fn from_sysfs(cpus: &Path) -> Option<LastLevel> {
    // (level, shared_cpu_list, bytes) of every data or unified cache.
    let mut caches = Vec::new();
    for cpu in fs::read_dir(cpus).ok()?.flatten() {
        let name = cpu.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("cpu") || !name[3..].bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(indices) = fs::read_dir(cpu.path().join("cache")) else {
            continue;
        };
        for index in indices.flatten() {
            let read = |f: &str| fs::read_to_string(index.path().join(f)).ok();
            if read("type").is_some_and(|t| t.trim() == "Instruction") {
                continue;
            }
            let level = read("level").and_then(|l| l.trim().parse::<u32>().ok());
            let bytes = read("size").and_then(|s| parse_size(&s));
            let shared = read("shared_cpu_list").unwrap_or_default();
            if let (Some(level), Some(bytes)) = (level, bytes) {
                caches.push((level, shared.trim().to_string(), bytes));
            }
        }
    }
    let top = caches.iter().map(|c| c.0).max()?;
    let instances: BTreeSet<(String, usize)> = caches
        .into_iter()
        .filter(|c| c.0 == top)
        .map(|c| (c.1, c.2))
        .collect();
    Some(LastLevel {
        instance_bytes: instances.iter().map(|i| i.1).max()?,
        node_bytes: instances.iter().map(|i| i.1).sum(),
    })
}

/// Smallest and largest last-level cache [`stated`] accepts: 64 KiB to
/// 64 GiB, the span of real caches.
const STATED_RANGE: std::ops::RangeInclusive<usize> = (64 << 10)..=(64 << 30);

/// The size of one last-level cache instance that [`environment::LLC_BYTES`]
/// states instead of sysfs's, if set: a virtual machine sees its host's
/// whole cache (a 2-vCPU guest was told of a 480 MiB L3, of which it has a
/// small share), and sizing from that makes `bench stream`'s arrays
/// gigabytes and takes size M for cache-resident. Bytes, or with a `K`,
/// `M` or `G` suffix (binary units, as sysfs writes them). A value that is
/// not a size in [`STATED_RANGE`] is refused: the run and `bench stream`
/// call this in their validation, before anything is sized from it.
pub fn stated() -> Result<Option<usize>> {
    let Some(text) = environment::get_os(environment::LLC_BYTES) else {
        return Ok(None);
    };
    let text = text.to_string_lossy();
    match parse_size(&text) {
        Some(bytes) if STATED_RANGE.contains(&bytes) => Ok(Some(bytes)),
        _ => Err(Error::usage(format!(
            "{}={text:?} is not a cache size from 64K to 64G (bytes, or with a K, M or G \
             suffix, e.g. 32M)",
            environment::LLC_BYTES
        ))),
    }
}

/// Parses a sysfs cache size such as `32768K`, `1M` or `512`.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    /// Two L3 instances of 16 MiB shared by two CPUs each, private L2s and
    /// L1 instruction caches: the last level totals 32 MiB.
    #[test]
    fn last_level_counts_each_shared_instance_once() {
        let root = std::env::temp_dir().join(format!("himeno-cache-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for cpu in 0..4 {
            let caches = [
                (1, "Instruction", "32K", cpu.to_string()),
                (2, "Unified", "1024K", cpu.to_string()),
                (
                    3,
                    "Unified",
                    "16384K",
                    if cpu < 2 { "0-1" } else { "2-3" }.into(),
                ),
            ];
            for (n, (level, kind, size, shared)) in caches.iter().enumerate() {
                let d = root.join(format!("cpu{cpu}/cache/index{n}"));
                fs::create_dir_all(&d).unwrap();
                fs::write(d.join("level"), format!("{level}\n")).unwrap();
                fs::write(d.join("type"), format!("{kind}\n")).unwrap();
                fs::write(d.join("size"), format!("{size}\n")).unwrap();
                fs::write(d.join("shared_cpu_list"), format!("{shared}\n")).unwrap();
            }
        }
        fs::create_dir_all(root.join("cpufreq")).unwrap();
        let want = LastLevel {
            instance_bytes: 16 << 20,
            node_bytes: 32 << 20,
        };
        assert_eq!(from_sysfs(&root), Some(want));
        assert_eq!(from_sysfs(&root.join("nowhere")), None);
        let core = PerCore {
            private_bytes: 1 << 20,
            shared_bytes: 16 << 20,
            sharing: 2,
        };
        assert_eq!(per_core_from_sysfs(&root.join("cpu3")), Some(core));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn cpu_lists_count_their_cpus() {
        assert_eq!(cpu_count("0\n"), Some(1));
        assert_eq!(cpu_count("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_count(""), None);
        assert_eq!(cpu_count("3-1"), None);
    }

    #[test]
    fn this_machine_has_a_plausible_last_level() {
        let l = LastLevel::detect();
        assert!((64 << 10..=64 << 30).contains(&l.instance_bytes), "{l:?}");
        assert!(l.node_bytes >= l.instance_bytes, "{l:?}");
    }
}
