//! Linux powercap's RAPL zones (`class/powercap/*` under the sysfs root):
//! each zone folder has a `name` (`package-0`, `dram`, `core`, `psys`),
//! an `energy_uj` counter and the `max_energy_range_uj` it wraps after.
//! The package and DRAM zones are summed; the core and uncore zones lie
//! inside their package, `psys` covers the platform around them, and the
//! `intel-rapl-mmio` zones are a second interface to the package counters
//! already read: those are listed, never summed.

use super::counters::{FileCounter, Format, Role, read_file};
use std::path::Path;

/// What the powercap folder under `sys` offers: its counters, the zones
/// that have none (named with why), or why none applies at all.
pub fn find(sys: &Path) -> Found {
    let dir = sys.join("class/powercap");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Found::none(format!("RAPL: {} is missing", dir.display()));
        }
        Err(e) => return Found::none(format!("RAPL: {} is unreadable: {e}", dir.display())),
    };
    let mut zones: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("name").exists())
        .collect();
    zones.sort();
    let mut found = Found::default();
    for zone in zones {
        let folder = zone
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match read_file(&zone.join("name")) {
            Ok(n) => n.trim().to_string(),
            Err(why) => {
                found
                    .broken
                    .push((format!("RAPL {folder}"), Role::Part, why));
                continue;
            }
        };
        let role = if folder.contains("mmio") {
            Role::Inside
        } else if name.starts_with("package") || name == "dram" {
            Role::Part
        } else {
            Role::Inside
        };
        let label = if folder.contains("mmio") {
            format!("RAPL {name} (mmio)")
        } else {
            format!("RAPL {name}")
        };
        let path = zone.join("energy_uj");
        if !path.exists() {
            found
                .broken
                .push((label, role, format!("{} is missing", path.display())));
            continue;
        }
        let wrap_uj = read_file(&zone.join("max_energy_range_uj"))
            .ok()
            .and_then(|t| t.trim().parse().ok());
        found.counters.push(FileCounter {
            name: label,
            role,
            path,
            format: Format::Microjoules,
            wrap_uj,
        });
    }
    if found.counters.is_empty() && found.broken.is_empty() {
        found.absent = Some(format!("RAPL: {} has no zones", dir.display()));
    }
    found
}

/// The counters a source offers.
#[derive(Debug, Default)]
pub struct Found {
    /// Counters to read.
    pub counters: Vec<FileCounter>,
    /// Counters the source names but that cannot be read: name, role, why.
    pub broken: Vec<(String, super::counters::Role, String)>,
    /// Why the source does not apply on this node at all.
    pub absent: Option<String>,
}

impl Found {
    /// A source that does not apply, and why.
    pub fn none(why: String) -> Found {
        Found {
            absent: Some(why),
            ..Found::default()
        }
    }
}
