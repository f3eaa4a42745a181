//! HPE Cray EX's node counters (`cray/pm_counters` under the sysfs root):
//! `energy` for the whole node, `cpu_energy`, `memory_energy` and
//! `accelN_energy` for its parts, each `<joules> J <timestamp> us`. The
//! whole node's counter is summed when read; the parts are summed only
//! without it, since they lie inside it.

use super::counters::{FileCounter, Format, Role};
use super::powercap::Found;
use std::path::Path;

/// What the pm_counters folder under `sys` offers.
pub fn find(sys: &Path) -> Found {
    let dir = sys.join("cray/pm_counters");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Found::none(format!("Cray pm_counters: {} is missing", dir.display()));
        }
        Err(e) => {
            return Found::none(format!(
                "Cray pm_counters: {} is unreadable: {e}",
                dir.display()
            ));
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == "energy" || n.ends_with("_energy"))
        .collect();
    names.sort();
    let mut found = Found::default();
    for file in names {
        let role = match file.as_str() {
            "energy" => Role::Whole,
            "cpu_energy" | "memory_energy" => Role::Part,
            a if a.starts_with("accel") => Role::Part,
            _ => Role::Inside,
        };
        found.counters.push(FileCounter {
            name: format!("Cray {file}"),
            role,
            path: dir.join(&file),
            format: Format::CrayJoules,
            wrap_uj: None,
        });
    }
    if found.counters.is_empty() {
        found.absent = Some(format!(
            "Cray pm_counters: {} has no energy counters",
            dir.display()
        ));
    }
    found
}
