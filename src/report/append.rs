//! Appending records to a results file that many jobs may write at once.
//!
//! Each record is one line written with a single `write` call on a file
//! opened for appending, under an exclusive advisory lock: concurrent
//! writers never interleave, and a killed writer cannot leave half a line
//! behind another writer's record.

use crate::error::{Error, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

/// Appends `line` (without its newline) to `path`, creating the file.
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::runtime(format!(
            "cannot {what} results file {}: {e}",
            path.display()
        ))
    };
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| fail("open", e))?;
    file.lock().map_err(|e| fail("lock", e))?;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    file.write_all(buf.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| fail("write to", e))?;
    file.unlock().map_err(|e| fail("unlock", e))
}

/// Checks, before any work, that `path` can be appended to. An existing
/// file is opened for appending; a missing one is created and removed again,
/// so a failed run leaves no empty results file behind.
pub fn check_writable(path: &Path) -> Result<()> {
    let usage = |e: std::io::Error| {
        Error::usage(format!(
            "cannot write results file {}: {e}; choose a writable --output path",
            path.display()
        ))
    };
    if path.exists() {
        return OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(usage);
    }
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)
        .map_err(usage)?;
    std::fs::remove_file(path).map_err(usage)
}
