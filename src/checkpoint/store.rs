//! The checkpoint folder: one sub-folder per checkpoint (`ckpt-` and the
//! iteration), committed when it holds a manifest. Finding the newest
//! committed one, removing the old ones, and checking before a run that
//! the folder can be written.

use crate::error::{Error, Result};
use crate::files::{self, Links};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The manifest's file name inside a checkpoint's folder (see
/// `super::manifest`).
pub const MANIFEST: &str = "manifest.json";

/// The name the manifest is written to before it is renamed into place.
pub const MANIFEST_TMP: &str = "manifest.json.tmp";

/// The file name of `rank`'s part of a checkpoint.
pub fn rank_file_name(rank: usize) -> String {
    format!("rank-{rank:06}.bin")
}

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
/// exist yet). Only real folders count: a `ckpt-*` entry that is a
/// symbolic link, a file, a FIFO or anything else was not made by himeno,
/// and nothing here follows or touches it. A checkpoint is committed when
/// its folder holds an entry named [`MANIFEST`], whatever that entry is:
/// one that is not a readable manifest is refused when read, never taken
/// for a write cut short (and removed).
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
        // The entry's own type: `file_type` does not follow a link.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let committed = std::fs::symlink_metadata(path.join(MANIFEST)).is_ok();
        found.push(Found {
            iteration,
            path,
            committed,
        });
    }
    found.sort_by_key(|f| f.iteration);
    Ok(found)
}

/// Opens `path` for reading when it is a regular file and not a link (a
/// FIFO or a device named by mistake would block or never end, a link may
/// lead out of the checkpoint folder), without a check-then-open race:
/// [`files::open_regular`] with [`Links::Refuse`].
pub fn open_regular(path: &Path, what: &str) -> Result<File> {
    files::open_regular(path, u64::MAX, Links::Refuse).map_err(|e| refused(path, what, &e))
}

/// The whole of the file `path` (the `what` of a checkpoint), of at most
/// `max` bytes, opened as [`open_regular`] opens it
/// ([`files::read_capped`]).
pub fn read_whole(path: &Path, what: &str, max: u64) -> Result<Vec<u8>> {
    files::read_capped(path, max, Links::Refuse).map_err(|e| refused(path, what, &e))
}

/// Why the `what` of a checkpoint at `path` could not be read (exit 2).
fn refused(path: &Path, what: &str, e: &std::io::Error) -> Error {
    let shown = path.display();
    match e.raw_os_error() {
        Some(libc::ELOOP) => Error::usage(format!(
            "the {what} {shown} is a symbolic link, which a checkpoint never holds"
        )),
        _ => Error::usage(format!("cannot read the {what} {shown}: {e}")),
    }
}

/// Syncs the folder `dir` itself, so that the names created or renamed in
/// it are on the disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::runtime(format!("cannot sync the folder {}: {e}", dir.display())))
}

/// Bytes the write probe writes: a block of the disk, which a full file
/// system refuses where an empty file would still be created.
const PROBE_BYTES: usize = 4096;

/// Checks that this rank can write a file of `bytes` (its part of one
/// checkpoint) in the checkpoint folder `dir`, or, when it does not exist
/// yet, in the nearest folder above it that does (the run creates it): a
/// file is made, written, synced and removed, and the file system must
/// have `bytes` free, so that a read-only, missing or full mount is found
/// before the run, not at its first checkpoint, and a refused run leaves
/// nothing behind ([`files::probe_dir`], whose fresh names keep the probes
/// of concurrent ranks apart). A `dir` (or a folder above it) that is a
/// symbolic link to nothing is refused: the run could not create the
/// folder it names.
pub fn check_writable(dir: &Path, bytes: u64) -> Result<()> {
    let refuse = |why: String| {
        Error::usage(format!(
            "the checkpoint folder {} cannot be written ({why}): give a writable \
             --checkpoint-dir",
            dir.display()
        ))
    };
    let mut at = dir;
    while !at.exists() {
        if std::fs::symlink_metadata(at).is_ok() {
            return Err(refuse(format!(
                "{} is a symbolic link to nothing",
                at.display()
            )));
        }
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
    }
    if !at.is_dir() {
        return Err(refuse(format!("{} is not a folder", at.display())));
    }
    if let Some(free) = free_bytes(at)
        && free < bytes
    {
        return Err(refuse(format!(
            "{} has {free} bytes free, and one checkpoint of this rank takes {bytes}",
            at.display()
        )));
    }
    files::probe_dir(at, PROBE_BYTES).map_err(|e| refuse(e.to_string()))
}

/// Bytes an unprivileged writer may still use on the file system of `at`
/// (`None` when it cannot be asked).
fn free_bytes(at: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(at.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct statvfs of our own.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

/// Whether `name` is one a checkpoint's folder holds when himeno wrote it:
/// the manifest, its temporary name, or a rank file.
fn made_by_himeno(name: &str) -> bool {
    name == MANIFEST
        || name == MANIFEST_TMP
        || name
            .strip_prefix("rank-")
            .and_then(|n| n.strip_suffix(".bin"))
            .is_some_and(|n| n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the folder `folder` holds only what himeno puts in a
/// checkpoint's folder, each a plain file.
fn holds_only_ours(folder: &Path) -> bool {
    std::fs::read_dir(folder).is_ok_and(|mut entries| {
        entries.all(|e| {
            e.is_ok_and(|e| {
                e.file_name().to_str().is_some_and(made_by_himeno)
                    && e.file_type().is_ok_and(|t| t.is_file())
            })
        })
    })
}

/// Removes the checkpoint folder `folder`, touching only what himeno puts
/// there: the manifest first (a removal cut short leaves an uncommitted
/// folder, never a committed one with missing files), then the rank files
/// and the manifest's temporary, each only when it is a plain file, then
/// the folder itself. A folder that is a link, or that holds anything
/// else, is left untouched (an error says so): what himeno did not write
/// is never removed.
pub fn remove_checkpoint(folder: &Path) -> Result<()> {
    let fail = |e: std::io::Error| {
        Error::runtime(format!(
            "cannot remove the checkpoint {}: {e}",
            folder.display()
        ))
    };
    let meta = std::fs::symlink_metadata(folder).map_err(fail)?;
    if !meta.is_dir() || !holds_only_ours(folder) {
        return Err(Error::runtime(format!(
            "{} is not a folder himeno made, or holds what himeno did not write: left as it is",
            folder.display()
        )));
    }
    let plain = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let manifest = folder.join(MANIFEST);
    if plain(&manifest) {
        std::fs::remove_file(&manifest).map_err(fail)?;
    }
    for entry in std::fs::read_dir(folder).map_err(fail)?.flatten() {
        let path = entry.path();
        if entry.file_name().to_str().is_some_and(made_by_himeno) && plain(&path) {
            std::fs::remove_file(&path).map_err(fail)?;
        }
    }
    std::fs::remove_dir(folder).map_err(|e| {
        Error::runtime(format!(
            "cannot remove the checkpoint {} ({e}): it holds what himeno did not write, \
             left as it is",
            folder.display()
        ))
    })
}

/// Removes what a newer committed checkpoint made useless: committed ones
/// of this run (`ours` says which: the same problem, by their manifests)
/// beyond the newest `keep`, and uncommitted ones older than the newest
/// committed of this run (left by a write that was interrupted).
/// Checkpoints of other runs, manifests that cannot be read, and folders
/// holding anything himeno does not write are never touched. Returns the
/// folders removed, or the first that could not be.
pub fn prune(dir: &Path, keep: usize, ours: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let found = list(dir)?;
    let committed: Vec<&Found> = found
        .iter()
        .filter(|f| f.committed && ours(&f.path.join(MANIFEST)))
        .collect();
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
        .filter(|d| holds_only_ours(d))
        .collect();
    for d in &doomed {
        remove_checkpoint(d)?;
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
        let gone = prune(&dir, 2, |_| true).unwrap();
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

    #[test]
    fn only_real_folders_count_and_foreign_ones_are_left_whole() {
        let dir = std::env::temp_dir().join(format!("himeno-store-odd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let real = dir.join(folder_name(2));
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("rank-000000.bin"), "x").unwrap();
        std::os::unix::fs::symlink(&real, dir.join(folder_name(4))).unwrap();
        std::fs::write(dir.join(folder_name(6)), "").unwrap();
        let foreign = dir.join(folder_name(8));
        std::fs::create_dir_all(&foreign).unwrap();
        std::fs::write(foreign.join("rank-000000.bin"), "x").unwrap();
        std::fs::write(foreign.join("notes"), "mine").unwrap();
        let its: Vec<u64> = list(&dir).unwrap().iter().map(|f| f.iteration).collect();
        assert_eq!(its, [2, 8], "the link and the file are not checkpoints");
        assert!(remove_checkpoint(&dir.join(folder_name(4))).is_err());
        assert!(
            real.join("rank-000000.bin").exists(),
            "the link is not followed"
        );
        assert!(remove_checkpoint(&foreign).is_err());
        assert!(
            foreign.join("rank-000000.bin").exists(),
            "nothing of it removed"
        );
        remove_checkpoint(&real).unwrap();
        assert!(!real.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
