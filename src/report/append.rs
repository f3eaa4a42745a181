//! Appending records to a results file that many jobs may write at once.
//!
//! Each record is one line written with a single `write_all` of the whole
//! line on a file opened for appending, under an exclusive advisory lock:
//! concurrent writers never interleave. A writer killed mid-write (or a
//! full disk) can still leave a torn last line; the next writer sees that
//! the file does not end in a newline and starts with one, so the torn line
//! stays a line of its own that readers reject, and never glues onto a good
//! record.
//!
//! Nothing here waits without end or without listening: files are opened
//! without blocking (a FIFO that no process reads is refused, not waited
//! on), the lock is polled, and a pipe that takes no more is retried, each
//! for at most [`WAIT`] and each abandoned at a stop signal that arrives
//! meanwhile, with a message saying which.

use crate::error::{Error, Result};
use crate::files::{self, Links, Written};
use crate::signals::StopFlag;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest wait for another writer's lock, or for a pipe to take the line.
pub const WAIT: Duration = Duration::from_secs(60);

/// Appends `line` (one record, without its newline) to `path`, creating the
/// file; waits at most [`WAIT`] for the lock and gives up at a stop signal
/// that comes while it waits.
pub fn append_line(path: &Path, line: &str, stop: &StopFlag) -> Result<()> {
    append_within(path, line, stop, WAIT)
}

/// [`append_line`] with the longest wait given.
fn append_within(path: &Path, line: &str, stop: &StopFlag, wait: Duration) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::runtime(format!(
            "cannot {what} results file {}: {}",
            path.display(),
            files::unread_fifo(e)
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
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail("open", e))?;
    let waiter = Waiter::new(path, stop, wait);
    lock(&file, &waiter).map_err(|e| e.unwrap_or_else(|e| fail("lock", e)))?;
    let mut buf = String::with_capacity(line.len() + 2);
    if ends_torn(path) {
        buf.push('\n');
    }
    buf.push_str(line);
    buf.push('\n');
    write_all(&mut file, buf.as_bytes(), &waiter)
        .map_err(|e| e.unwrap_or_else(|e| fail("write to", e)))?;
    sync(&file).map_err(|e| fail("write to", e))?;
    file.unlock().map_err(|e| fail("unlock", e))
}

/// What a wait must stop at: its start, its bound, and the signal count at
/// its start (a signal that came before the wait, e.g. the one that ended
/// the run, does not end it).
struct Waiter<'a> {
    path: &'a Path,
    stop: &'a StopFlag,
    signals: usize,
    start: Instant,
    bound: Duration,
}

impl Waiter<'_> {
    fn new<'a>(path: &'a Path, stop: &'a StopFlag, bound: Duration) -> Waiter<'a> {
        Waiter {
            path,
            stop,
            signals: stop.count(),
            start: Instant::now(),
            bound,
        }
    }

    /// Sleeps a little (`round` from 0: 1 ms, doubling up to 50 ms), or the
    /// error that ends the wait for `what`.
    fn pause(&self, round: u32, what: &str) -> std::result::Result<(), Error> {
        if self.stop.count() != self.signals {
            return Err(Error::runtime(format!(
                "stopped by a signal while waiting for {what} of results file {}",
                self.path.display()
            )));
        }
        if self.start.elapsed() >= self.bound {
            return Err(Error::runtime(format!(
                "gave up after waiting {} s for {what} of results file {}",
                self.bound.as_secs_f64(),
                self.path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis((1u64 << round.min(6)).min(50)));
        Ok(())
    }
}

/// Takes the exclusive lock on `file`, polling while another writer holds
/// it. The outer error ends the wait; the inner one is the system's.
fn lock(
    file: &File,
    waiter: &Waiter,
) -> std::result::Result<(), std::result::Result<Error, std::io::Error>> {
    let mut round = 0;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {
                if round == 0 {
                    tracing::info!(path = %waiter.path.display(), "waiting for the results-file lock");
                }
                waiter
                    .pause(round, "the lock another process holds")
                    .map_err(Ok)?;
                round += 1;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Err(e)),
        }
    }
}

/// Writes all of `bytes`, retrying while a non-blocking pipe is full.
fn write_all(
    file: &mut File,
    mut bytes: &[u8],
    waiter: &Waiter,
) -> std::result::Result<(), std::result::Result<Error, std::io::Error>> {
    let mut round = 0;
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(0) => return Err(Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                bytes = &bytes[n..];
                round = 0;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                waiter.pause(round, "a reader").map_err(Ok)?;
                round += 1;
            }
            Err(e) => return Err(Err(e)),
        }
    }
    Ok(())
}

/// Whether the regular file at `path` is non-empty and does not end in a
/// newline (a torn last line). Read through a second handle because the
/// appending one is write-only, opened as every user's file is
/// ([`files::open_regular`]: a FIFO or device has no last line to mend);
/// the caller holds the lock, so the end is stable.
fn ends_torn(path: &Path) -> bool {
    let Ok(f) = files::open_regular(path, u64::MAX, Links::Follow) else {
        return false;
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return false;
    };
    let mut last = [0u8; 1];
    len > 0 && f.read_exact_at(&mut last, len - 1).is_ok() && last[0] != b'\n'
}

/// Flushes the record to the device. Files that cannot be synced (a pipe,
/// `/dev/stdout`) are not an error: there is nothing more to flush.
fn sync(file: &File) -> std::io::Result<()> {
    match file.sync_data() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        other => other,
    }
}

/// Checks, before any work and without blocking, that `path` can be
/// appended to ([`files::check_output`]): the results file itself is never
/// created or removed here.
pub fn check_writable(path: &Path) -> Result<()> {
    files::check_output(path, Written::Appended).map_err(|e| {
        Error::usage(format!(
            "cannot write results file {}: {e}; choose a writable --output path",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of one test, removed with everything in it when dropped.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A fresh path `name` in a folder of its own, and the folder's guard.
    fn temp(name: &str) -> (Scratch, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("himeno-append-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        (Scratch(dir), p)
    }

    #[test]
    fn a_torn_last_line_is_left_on_its_own_line() {
        let (_scratch, p) = temp("torn.jsonl");
        std::fs::write(&p, "{\"good\":1}\n{\"torn\":").unwrap();
        append_line(&p, "{\"next\":2}", &StopFlag::never()).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "{\"good\":1}\n{\"torn\":\n{\"next\":2}\n");
        append_line(&p, "{\"last\":3}", &StopFlag::never()).unwrap();
        assert!(
            std::fs::read_to_string(&p)
                .unwrap()
                .ends_with("2}\n{\"last\":3}\n")
        );
    }

    #[test]
    fn checking_a_missing_file_creates_nothing_there() {
        let (_scratch, p) = temp("checked.jsonl");
        check_writable(&p).unwrap();
        assert!(!p.exists());
        let dir = p.parent().unwrap();
        assert!(check_writable(&dir.join("no-such-dir").join("r.jsonl")).is_err());
        assert!(
            check_writable(dir).is_err(),
            "a directory is not a results file"
        );
        for name in ["missing/", "missing/.", "missing/..", "."] {
            let err = check_writable(&dir.join(name)).unwrap_err();
            assert!(err.to_string().contains("directory"), "{name}: {err}");
        }
    }

    #[test]
    fn line_breaks_inside_a_record_are_refused() {
        let (_scratch, p) = temp("multi.jsonl");
        assert!(append_line(&p, "a\nb", &StopFlag::never()).is_err());
        assert!(!p.exists());
    }

    #[test]
    fn a_full_disk_is_an_error() {
        let err = append_line(Path::new("/dev/full"), "{}", &StopFlag::never()).unwrap_err();
        assert!(
            matches!(&err, Error::Runtime(m) if m.contains("/dev/full")),
            "{err}"
        );
    }

    #[test]
    fn threads_appending_at_once_lose_nothing() {
        let (_scratch, p) = temp("threads.jsonl");
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..25 {
                        let pad = "x".repeat(100 * (i % 7));
                        append_line(
                            p,
                            &format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{pad}\"}}"),
                            &StopFlag::never(),
                        )
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

    #[test]
    fn a_held_lock_is_waited_for_within_bounds_and_a_signal_ends_the_wait() {
        let (_scratch, p) = temp("locked.jsonl");
        std::fs::write(&p, "").unwrap();
        let holder = File::open(&p).unwrap();
        holder.lock().unwrap();
        let stop = StopFlag::never();
        let err = append_within(&p, "{}", &stop, Duration::from_millis(200)).unwrap_err();
        assert!(err.to_string().contains("gave up after waiting"), "{err}");
        // A signal that came before the wait does not end it; one that
        // comes during it does.
        stop.raise();
        std::thread::scope(|s| {
            let signaller = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.raise();
            });
            let err = append_within(&p, "{}", &stop, Duration::from_secs(60)).unwrap_err();
            assert!(err.to_string().contains("stopped by a signal"), "{err}");
            signaller.join().unwrap();
        });
        holder.unlock().unwrap();
        append_within(&p, "{}", &stop, Duration::from_millis(200)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}\n");
    }

    #[test]
    fn a_fifo_without_a_reader_is_refused_not_waited_on() {
        let (_scratch, p) = temp("fifo");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = check_writable(&p).unwrap_err();
        assert!(err.to_string().contains("no process is reading"), "{err}");
        let err = append_line(&p, "{}", &StopFlag::never()).unwrap_err();
        assert!(err.to_string().contains("no process is reading"), "{err}");
    }

    #[test]
    fn probes_fit_any_valid_name_and_pass_over_stale_ones() {
        let (_scratch, dir) = temp("probes");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.as_path();
        check_writable(&dir.join("r".repeat(250))).unwrap();
        let stale = dir.join(format!(
            ".{}.himeno-probe-{}",
            "r".repeat(20),
            std::process::id()
        ));
        std::fs::write(&stale, "").unwrap();
        check_writable(&dir.join("x.jsonl")).unwrap();
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("probe"))
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "only the stale one: {left:?}");
    }
}
