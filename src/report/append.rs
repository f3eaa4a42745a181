//! Appending records to a results file that many jobs may write at once.
//!
//! Each record is one line written with a single `write_all` of the whole
//! line on a file opened for appending, under an exclusive advisory lock:
//! concurrent writers never interleave. A writer killed mid-write (or a
//! full disk) can still leave a torn last line; the next writer sees that
//! the file does not end in a newline and starts with one, so the torn line
//! stays a line of its own that readers reject, and never glues onto a good
//! record.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Appends `line` (one record, without its newline) to `path`, creating the
/// file.
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::runtime(format!(
            "cannot {what} results file {}: {e}",
            path.display()
        ))
    };
    if line.contains('\n') {
        return Err(Error::runtime(format!(
            "refusing to append a record with a line break to {}",
            path.display()
        )));
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| fail("open", e))?;
    file.lock().map_err(|e| fail("lock", e))?;
    let mut buf = String::with_capacity(line.len() + 2);
    if ends_torn(path) {
        buf.push('\n');
    }
    buf.push_str(line);
    buf.push('\n');
    file.write_all(buf.as_bytes())
        .map_err(|e| fail("write to", e))?;
    sync(&file).map_err(|e| fail("write to", e))?;
    file.unlock().map_err(|e| fail("unlock", e))
}

/// Whether the regular file at `path` is non-empty and does not end in a
/// newline (a torn last line). Read through a second handle because the
/// appending one is write-only; the caller holds the lock, so the end is
/// stable.
fn ends_torn(path: &Path) -> bool {
    let Ok(f) = File::open(path) else {
        return false;
    };
    let len = match f.metadata() {
        Ok(m) if m.is_file() => m.len(),
        _ => return false,
    };
    let mut last = [0u8; 1];
    len > 0 && f.read_exact_at(&mut last, len - 1).is_ok() && last[0] != b'\n'
}

/// Flushes the record to the device. Files that cannot be synced (a pipe,
/// `/dev/stdout`) are not an error: there is nothing more to flush.
fn sync(file: &File) -> std::io::Result<()> {
    match file.sync_data() {
        Err(e) if e.raw_os_error() == Some(22) => Ok(()), // EINVAL
        other => other,
    }
}

/// Checks, before any work, that `path` can be appended to. An existing
/// file is opened for appending. For a missing one, a uniquely named probe
/// file is created and removed in its directory: the results file itself is
/// never created and removed here, because another job may append its
/// first record to it in between, and removing it would lose that record.
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
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "results".into(), |n| n.to_string_lossy().into_owned());
    let probe = dir.join(format!(".{name}.himeno-probe-{}", std::process::id()));
    OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&probe)
        .map_err(usage)?;
    std::fs::remove_file(&probe).map_err(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("himeno-append-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn a_torn_last_line_is_left_on_its_own_line() {
        let p = temp("torn.jsonl");
        std::fs::write(&p, "{\"good\":1}\n{\"torn\":").unwrap();
        append_line(&p, "{\"next\":2}").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "{\"good\":1}\n{\"torn\":\n{\"next\":2}\n");
        append_line(&p, "{\"last\":3}").unwrap();
        assert!(
            std::fs::read_to_string(&p)
                .unwrap()
                .ends_with("2}\n{\"last\":3}\n")
        );
    }

    #[test]
    fn checking_a_missing_file_creates_nothing_there() {
        let p = temp("checked.jsonl");
        check_writable(&p).unwrap();
        assert!(!p.exists());
        let dir = p.parent().unwrap();
        assert!(check_writable(&dir.join("no-such-dir").join("r.jsonl")).is_err());
        assert!(
            check_writable(dir).is_err(),
            "a directory is not a results file"
        );
    }

    #[test]
    fn line_breaks_inside_a_record_are_refused() {
        let p = temp("multi.jsonl");
        assert!(append_line(&p, "a\nb").is_err());
        assert!(!p.exists());
    }

    #[test]
    fn a_full_disk_is_an_error() {
        let err = append_line(Path::new("/dev/full"), "{}").unwrap_err();
        assert!(
            matches!(&err, Error::Runtime(m) if m.contains("/dev/full")),
            "{err}"
        );
    }

    #[test]
    fn threads_appending_at_once_lose_nothing() {
        let p = temp("threads.jsonl");
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..25 {
                        let pad = "x".repeat(100 * (i % 7));
                        append_line(p, &format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{pad}\"}}"))
                            .unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&p).unwrap();
        let mut seen: Vec<(u64, u64)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("whole line");
                (v["t"].as_u64().unwrap(), v["i"].as_u64().unwrap())
            })
            .collect();
        seen.sort_unstable();
        let want: Vec<(u64, u64)> = (0..8).flat_map(|t| (0..25).map(move |i| (t, i))).collect();
        assert_eq!(seen, want);
    }
}
