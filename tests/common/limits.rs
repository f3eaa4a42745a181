//! Memory limits a test puts on a run: an address-space limit (`ulimit -v`)
//! and a memory cgroup (as a batch system sets one).

use super::BIN;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A command whose process (and so every child: mpirun's ranks) gets an
/// address-space limit of `bytes`, as `ulimit -v` sets it.
pub fn with_address_limit(mut cmd: Command, bytes: u64) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the
    // child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

/// A fresh memory cgroup of `limit` bytes below this process's own (cgroup
/// v1 or v2), removed on drop; `None` (with the reason) where this process
/// may not make one.
pub struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    pub fn new(name: &str, limit: u64) -> Result<MemoryCgroup, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let (base, file) = own
            .lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let path = path.trim_start_matches('/');
                if controllers.split(',').any(|c| c == "memory") {
                    Some((
                        Path::new("/sys/fs/cgroup/memory").join(path),
                        "memory.limit_in_bytes",
                    ))
                } else if controllers.is_empty() {
                    Some((Path::new("/sys/fs/cgroup").join(path), "memory.max"))
                } else {
                    None
                }
            })
            .ok_or("no memory cgroup in /proc/self/cgroup")?;
        let dir = base.join(format!("himeno-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let cg = MemoryCgroup { dir };
        std::fs::write(cg.dir.join(file), limit.to_string())
            .map_err(|e| format!("cannot limit {}: {e}", cg.dir.display()))?;
        Ok(cg)
    }

    /// `himeno ARGS` started inside the cgroup.
    pub fn himeno(&self, args: &[&str]) -> Command {
        let procs = self.dir.join("cgroup.procs");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(BIN)
            .args(args)
            .env_remove("HIMENO_FAULT");
        cmd
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The kernel may still be releasing the last process's charge for
        // a moment after it was reaped (EBUSY).
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove the test cgroup {}", self.dir.display());
    }
}
