//! The trace file written under a fresh name beside its destination and
//! renamed into place once whole: a trace cut short (a full disk, a
//! stopped run) never replaces an earlier good one, and a failed write
//! leaves nothing behind.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A file being written for `dest`.
#[derive(Debug)]
pub struct Staged {
    file: File,
    temp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl Staged {
    /// Creates a fresh file in `dest`'s folder (never an existing one, and
    /// never through a link), named after `dest` and this process.
    pub fn create(dest: &Path) -> io::Result<Staged> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::other("it names no file"))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".{}.tmp", std::process::id()));
        let temp = dest.with_file_name(temp_name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        Ok(Staged {
            file,
            temp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    /// The file to write into.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Makes the written file the destination: synced, then renamed over
    /// whatever was there.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        std::fs::rename(&self.temp, &self.dest)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            // Nothing half written is left behind.
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_a_committed_file_replaces_the_destination() {
        let dir = std::env::temp_dir().join(format!("himeno-staged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("t.json");
        std::fs::write(&dest, "good").unwrap();
        let s = Staged::create(&dest).unwrap();
        s.file().write_all(b"cut").unwrap();
        drop(s);
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "good");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "a leftover");
        let s = Staged::create(&dest).unwrap();
        s.file().write_all(b"new").unwrap();
        s.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
