//! One energy counter of a node: where it is, how it is read, and the
//! energy between two of its readings (its wrap-around or a step back
//! included).

use crate::files::{self, Links};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most a counter file holds: sysfs files state a size of one page.
const MAX_FILE: u64 = 4096;

/// How a counter's energy enters its node's sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The whole node (Cray's `energy`): summed alone when read, the
    /// other counters being inside it.
    Whole,
    /// A part of the node that no other counter contains (a RAPL package
    /// or DRAM zone, a Cray CPU, memory or accelerator counter, a GPU):
    /// summed with the other parts when no whole-node counter was read.
    Part,
    /// Inside a counter already summed (RAPL's core, uncore and platform
    /// zones, the MMIO copy of a package zone): listed, never summed.
    Inside,
}

/// How a counter file states its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Powercap's `energy_uj`: microjoules, an integer alone.
    Microjoules,
    /// Cray's `pm_counters`: `<joules> J <timestamp> us`.
    CrayJoules,
}

/// One counter file found on the node.
#[derive(Debug, Clone)]
pub struct FileCounter {
    /// Its name in the report (`RAPL package-0`, `Cray energy`).
    pub name: String,
    /// How it enters the node's sum.
    pub role: Role,
    /// The file read at the start and the end of the timed loop.
    pub path: PathBuf,
    /// How the file states its value.
    pub format: Format,
    /// The value after which the counter starts again from 0, in
    /// microjoules (RAPL's `max_energy_range_uj`), when known.
    pub wrap_uj: Option<u64>,
}

impl FileCounter {
    /// The counter's value now, in microjoules, or why it cannot be read.
    pub fn read(&self) -> Result<u64, String> {
        let text = read_file(&self.path)?;
        parse(&text, self.format).ok_or_else(|| {
            format!(
                "{} holds `{}`, not a counter value",
                self.path.display(),
                text.trim().chars().take(40).collect::<String>()
            )
        })
    }
}

/// The text of a small counter or attribute file, or why it cannot be
/// read: a permission refused says that RAPL is root-only since Linux 5.10.
pub fn read_file(path: &Path) -> Result<String, String> {
    match files::read_capped(path, MAX_FILE, Links::Follow) {
        Ok(bytes) => {
            String::from_utf8(bytes).map_err(|_| format!("{} is not text", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{} is missing", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(format!(
            "{} is unreadable: permission denied (RAPL counters are readable by root only \
             since Linux 5.10)",
            path.display()
        )),
        Err(e) => Err(format!("{} is unreadable: {e}", path.display())),
    }
}

/// A counter file's value in microjoules.
pub fn parse(text: &str, format: Format) -> Option<u64> {
    match format {
        Format::Microjoules => text.trim().parse().ok(),
        Format::CrayJoules => {
            let mut words = text.split_whitespace();
            let joules: u64 = words.next()?.parse().ok()?;
            (words.next() == Some("J")).then_some(())?;
            joules.checked_mul(1_000_000)
        }
    }
}

/// What became of a counter between its two readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// It advanced by this many microjoules.
    Advanced(u64),
    /// It passed its wrap value once and advanced by this many.
    Wrapped(u64),
    /// It stepped back (a reset, a counter with no known wrap value).
    Backwards,
}

/// The energy between the readings `start` and `end` of a counter that
/// wraps after `wrap_uj` (if known): RAPL's counters start again from 0
/// after `max_energy_range_uj`, so an end below the start is one wrap,
/// `wrap - start + end` (as the kernel's own `perf` and the powercap
/// tools count it); without a wrap value it is a step back.
pub fn delta(start: u64, end: u64, wrap_uj: Option<u64>) -> Delta {
    if end >= start {
        return Delta::Advanced(end - start);
    }
    match wrap_uj {
        Some(w) if w >= start => Delta::Wrapped(w - start + end),
        _ => Delta::Backwards,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_in_microjoules() {
        assert_eq!(parse("123456\n", Format::Microjoules), Some(123_456));
        assert_eq!(
            parse("12 J 1700000000000000 us\n", Format::CrayJoules),
            Some(12_000_000)
        );
        assert_eq!(parse("12 W 17 us", Format::CrayJoules), None);
        assert_eq!(parse("x", Format::Microjoules), None);
        assert_eq!(parse("", Format::CrayJoules), None);
    }

    #[test]
    fn a_counter_below_its_start_wrapped_or_went_back() {
        assert_eq!(delta(10, 25, None), Delta::Advanced(15));
        assert_eq!(delta(900, 100, Some(1000)), Delta::Wrapped(200));
        assert_eq!(delta(900, 100, None), Delta::Backwards);
        // A start beyond the wrap value cannot have wrapped.
        assert_eq!(delta(2000, 100, Some(1000)), Delta::Backwards);
    }
}
