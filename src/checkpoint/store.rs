//! The checkpoint folder: one sub-folder per checkpoint (`ckpt-` and the
//! iteration), committed when it holds a manifest. Finding the newest
//! committed one, removing the old ones, and checking before a run that
//! the folder can be written.

use crate::error::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The manifest's file name inside a checkpoint's folder (see
/// `super::manifest`).
pub const MANIFEST: &str = "manifest.json";

/// Prefix of a checkpoint's folder name.
const PREFIX: &str = "ckpt-";

/// One checkpoint folder found in the checkpoint folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Iterations done at the checkpoint.
    pub iteration: u64,
    /// Its folder.
    pub path: PathBuf,
    /// Whether it holds a manifest (its write was completed).
    pub committed: bool,
}

/// The folder name of the checkpoint at `iteration` (zero-padded, so that
/// a listing sorts by iteration).
pub fn folder_name(iteration: u64) -> String {
    format!("{PREFIX}{iteration:010}")
}

/// The checkpoints in `dir`, oldest first (none when `dir` does not
/// exist yet).
pub fn list(dir: &Path) -> Result<Vec<Found>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::usage(format!(
                "cannot list the checkpoint folder {}: {e}",
                dir.display()
            )));
        }
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(iteration) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let committed = path.join(MANIFEST).is_file();
        found.push(Found {
            iteration,
            path,
            committed,
        });
    }
    found.sort_by_key(|f| f.iteration);
    Ok(found)
}

/// Opens `path` for reading when it is a regular file (a FIFO or a device
/// named by mistake would block or never end).
pub fn open_regular(path: &Path, what: &str) -> Result<File> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => File::open(path)
            .map_err(|e| Error::usage(format!("cannot read the {what} {shown}: {e}"))),
        Ok(_) => Err(Error::usage(format!(
            "the {what} {shown} is not a regular file"
        ))),
        Err(e) => Err(Error::usage(format!("cannot read the {what} {shown}: {e}"))),
    }
}

/// Syncs the folder `dir` itself, so that the names created or renamed in
/// it are on the disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::runtime(format!("cannot sync the folder {}: {e}", dir.display())))
}

/// Checks that this rank can create files in the checkpoint folder `dir`,
/// or, when it does not exist yet, in the nearest folder above it that
/// does (the first checkpoint creates it): a file is made, synced and
/// removed, so that a read-only or missing mount is found before the run,
/// not at its first checkpoint, and a refused run leaves nothing behind.
/// `rank` keeps the probes of concurrent ranks apart.
pub fn check_writable(dir: &Path, rank: usize) -> Result<()> {
    let refuse = |why: String| {
        Error::usage(format!(
            "the checkpoint folder {} cannot be written ({why}): give a writable \
             --checkpoint-dir",
            dir.display()
        ))
    };
    let mut at = dir;
    while !at.exists() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    if !at.is_dir() {
        return Err(refuse(format!("{} is not a folder", at.display())));
    }
    let probe = at.join(format!(
        ".himeno-probe-{}-{}-{rank}",
        crate::comm::hostname(),
        std::process::id()
    ));
    let made = File::create(&probe).and_then(|f| f.sync_all());
    let _ = std::fs::remove_file(&probe);
    made.map_err(|e| refuse(e.to_string()))
}

/// Removes what a newer committed checkpoint made useless: committed ones
/// beyond the newest `keep`, and uncommitted ones older than the newest
/// committed (left by a write that was interrupted). Returns the folders
/// removed.
pub fn prune(dir: &Path, keep: usize) -> Result<Vec<PathBuf>> {
    let found = list(dir)?;
    let committed: Vec<&Found> = found.iter().filter(|f| f.committed).collect();
    let Some(newest) = committed.last().map(|f| f.iteration) else {
        return Ok(Vec::new());
    };
    let old_committed = committed.len().saturating_sub(keep);
    let doomed: Vec<PathBuf> = committed[..old_committed]
        .iter()
        .map(|f| f.path.clone())
        .chain(
            found
                .iter()
                .filter(|f| !f.committed && f.iteration < newest)
                .map(|f| f.path.clone()),
        )
        .collect();
    for d in &doomed {
        // The manifest goes first: a removal cut short leaves an
        // uncommitted folder, never a committed one with missing files.
        let _ = std::fs::remove_file(d.join(MANIFEST));
        std::fs::remove_dir_all(d).map_err(|e| {
            Error::runtime(format!(
                "cannot remove the old checkpoint {}: {e}",
                d.display()
            ))
        })?;
    }
    Ok(doomed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_sorts_and_pruning_keeps_the_newest() {
        let dir = std::env::temp_dir().join(format!("himeno-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (it, committed) in [(30, true), (10, true), (20, true), (25, false), (40, false)] {
            let d = dir.join(folder_name(it));
            std::fs::create_dir_all(&d).unwrap();
            if committed {
                std::fs::write(d.join(MANIFEST), "{}").unwrap();
            }
        }
        std::fs::write(dir.join("ckpt-notanumber"), "").unwrap();
        let found = list(&dir).unwrap();
        let its: Vec<(u64, bool)> = found.iter().map(|f| (f.iteration, f.committed)).collect();
        assert_eq!(
            its,
            [(10, true), (20, true), (25, false), (30, true), (40, false)]
        );
        let gone = prune(&dir, 2).unwrap();
        assert_eq!(gone.len(), 2, "{gone:?}");
        let its: Vec<u64> = list(&dir).unwrap().iter().map(|f| f.iteration).collect();
        assert_eq!(
            its,
            [20, 30, 40],
            "the newer uncommitted one may still be written"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(list(&dir).unwrap().is_empty());
    }
}
