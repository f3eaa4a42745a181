//! The owner of a checkpoint folder: one run holds it for its lifetime.
//!
//! Rank 0 creates the folder if needed and takes an exclusive `flock` on
//! the file [`LOCK`] in it, then writes there who holds it (host, process,
//! start time) and a token of its own. A second run that finds the lock
//! taken is refused before any work, naming the holder. The kernel drops
//! the lock when its process ends, however it ends, so a run that died
//! leaves no lock behind (its holder line stays, and is overwritten by the
//! next owner). The file stays while checkpoints are in the folder: a run
//! that leaves nothing else in it removes it at its end, and the folder
//! too when it created it, so that a run with no checkpoint due leaves
//! the folder as it found it.
//!
//! Every rank then reads the token back from the folder: a rank that does
//! not see it (a `--checkpoint-dir` local to each node, under multi-host
//! MPI) could not write its part of a checkpoint into the folder rank 0
//! commits, and the run is refused before it starts.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock file's name inside the checkpoint folder.
pub const LOCK: &str = ".himeno-lock";

/// Longest holder description read back (a hand-edited lock file may be
/// anything).
const MAX_HOLDER_BYTES: u64 = 4096;

/// The held lock of a checkpoint folder (rank 0's); dropping it, or the
/// process ending, releases it.
#[derive(Debug)]
pub struct FolderLock {
    file: File,
    /// The folder.
    dir: std::path::PathBuf,
    /// Whether this run created it (see the `Drop`).
    created: bool,
    /// Why the lock could not be enforced, when the file system has no
    /// locks (a Lustre mounted `noflock`): the run goes on, saying so.
    pub unenforced: Option<String>,
}

impl Drop for FolderLock {
    /// Leaves a folder that got no checkpoint as it was found: the lock
    /// file goes when it is all the folder holds, and the folder too when
    /// this run created it (a study's `rmdir` of an unused folder works).
    fn drop(&mut self) {
        let only_lock = std::fs::read_dir(&self.dir)
            .is_ok_and(|mut entries| entries.all(|e| e.is_ok_and(|e| e.file_name() == LOCK)));
        if only_lock {
            let _ = std::fs::remove_file(self.dir.join(LOCK));
            if self.created {
                let _ = std::fs::remove_dir(&self.dir);
            }
        }
    }
}

/// Who holds a folder: this process's description, with `token`.
fn holder(token: &str) -> String {
    format!(
        "host {}, pid {}, since {} (token {token})",
        crate::comm::hostname(),
        std::process::id(),
        crate::build::utc_now()
    )
}

/// A token that tells this run's lock from any other: the host, the
/// process and the clock's nanoseconds.
pub fn new_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{}-{nanos:x}",
        crate::comm::hostname(),
        std::process::id()
    )
}

/// Opens the lock file of `dir` without following a link and without
/// blocking on a FIFO planted in its place.
fn open_lock(dir: &Path, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(LOCK))?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// The holder line of an open lock file (bounded, lossy).
fn read_holder(file: &mut File) -> String {
    let mut text = Vec::new();
    let _ = file.rewind();
    let _ = file.take(MAX_HOLDER_BYTES).read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        "a run that has not yet said who it is".to_string()
    } else {
        line.chars().filter(|c| !c.is_control()).collect()
    }
}

/// Whether `e` says the file system does not lock at all (rather than
/// that the lock is taken, or the file cannot be used).
fn no_locks_here(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::ENOLCK | libc::EOPNOTSUPP | libc::EINVAL)
    )
}

/// Creates the checkpoint folder `dir` if needed and takes its lock for
/// this run, writing the holder with `token` into it; refused (exit 2)
/// when another run holds it, naming that run.
pub fn acquire(dir: &Path, token: &str) -> Result<FolderLock> {
    let shown = dir.display();
    let created = std::fs::symlink_metadata(dir).is_err();
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::usage(format!(
            "cannot create the checkpoint folder {shown}: {e}: give a writable --checkpoint-dir"
        ))
    })?;
    let cannot = |e: std::io::Error| {
        Error::usage(format!(
            "cannot lock the checkpoint folder {shown} ({}/{LOCK}: {e}): give a \
             --checkpoint-dir of its own to this run",
            shown
        ))
    };
    let mut file = open_lock(dir, true).map_err(cannot)?;
    let mut unenforced = None;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::usage(format!(
                "the checkpoint folder {shown} is in use by another run ({}): wait for it \
                 to end, or give this run another --checkpoint-dir",
                read_holder(&mut file)
            )));
        }
        Err(std::fs::TryLockError::Error(e)) if !no_locks_here(&e) => return Err(cannot(e)),
        Err(std::fs::TryLockError::Error(e)) => {
            unenforced = Some(format!(
                "the file system of the checkpoint folder {shown} has no locks ({e}): no other \
                 run is kept out of it, give each run a folder of its own"
            ));
        }
    }
    // From here the lock is held: an error below drops it, which removes
    // a folder made for it.
    let mut held = FolderLock {
        file,
        dir: dir.to_path_buf(),
        created,
        unenforced,
    };
    let line = format!("{}\n", holder(token));
    let file = &mut held.file;
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(line.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(cannot)?;
    super::store::sync_dir(dir)?;
    Ok(held)
}

/// Whether this rank sees rank 0's lock of `dir`, holding `token`: the
/// error says what it sees instead (a folder local to another node).
pub fn check_seen(dir: &Path, token: &str) -> Result<()> {
    let not_seen = |what: String| {
        Error::usage(format!(
            "host {} does not see the checkpoint folder {} that rank 0 locked ({what}): a \
             --checkpoint-dir local to each node cannot hold the checkpoints of a run over \
             several hosts; give a folder every host shares",
            crate::comm::hostname(),
            dir.display()
        ))
    };
    let mut file = open_lock(dir, false).map_err(|e| not_seen(format!("{LOCK}: {e}")))?;
    let seen = read_holder(&mut file);
    if seen.contains(&format!("(token {token})")) {
        Ok(())
    } else {
        Err(not_seen(format!("its lock names {seen}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_folder_is_refused_naming_its_holder_and_freed_on_release() {
        let dir = std::env::temp_dir().join(format!("himeno-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = acquire(&dir, "one").unwrap();
        check_seen(&dir, "one").unwrap();
        assert!(check_seen(&dir, "two").is_err());
        let e = acquire(&dir, "two").unwrap_err();
        assert!(e.message().contains("in use by another run"), "{e}");
        assert!(e.message().contains("token one"), "{e}");
        drop(first);
        assert!(!dir.exists(), "a folder made for nothing is removed");
        std::fs::create_dir_all(dir.join("ckpt-0000000001")).unwrap();
        let second = acquire(&dir, "two").unwrap();
        check_seen(&dir, "two").unwrap();
        drop(second);
        assert!(
            dir.join(LOCK).exists(),
            "a folder with checkpoints keeps its lock"
        );
        std::fs::remove_dir(dir.join("ckpt-0000000001")).unwrap();
        drop(acquire(&dir, "three").unwrap());
        assert!(dir.is_dir(), "a folder it did not make is left");
        assert!(!dir.join(LOCK).exists(), "as it was found");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_file_that_is_a_link_or_a_fifo_is_refused() {
        let dir = std::env::temp_dir().join(format!("himeno-lock-odd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("elsewhere");
        std::os::unix::fs::symlink(&target, dir.join(LOCK)).unwrap();
        assert!(acquire(&dir, "x").is_err());
        assert!(!target.exists(), "the link is not followed");
        std::fs::remove_file(dir.join(LOCK)).unwrap();
        let c = std::ffi::CString::new(dir.join(LOCK).to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            acquire(&dir, "x").is_err(),
            "a FIFO does not block the open"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
