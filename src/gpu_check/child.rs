//! The runs of `himeno gpu-check` as child processes: each with a time
//! limit and killed at a stop signal, its command line, stdout and stderr
//! kept as files for the details archive.
//!
//! Each child leads a process group of its own, and the group is what is
//! ended: SIGTERM, a moment to stop, then SIGKILL, before the child is
//! reaped (so its group id cannot be reused meanwhile). A wrapper script's
//! processes end with it instead of living on, reparented to init, with a
//! GPU context open. A child's own group does not get the terminal's
//! Ctrl-C, so the check's stop signals (SIGTERM, SIGINT, SIGUSR1 and
//! SIGHUP alike, [`stop_signals`]) are what end it.

use crate::files;
use crate::signals::StopFlag;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a child's group has between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// The signals that stop a check: the run's stop signals and SIGHUP (a
/// closed terminal or session), each raising the returned flag.
///
/// Unlike a benchmark run's (`StopFlag::install`), a second SIGINT does
/// not end the check at once and there is no watchdog: the check itself
/// never blocks, and ending it then would leave its child's group on the
/// device. The run going is ended within a poll and [`TERM_GRACE`].
pub fn stop_signals() -> StopFlag {
    let stop = StopFlag::never();
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGHUP,
    ] {
        let flag = stop.clone();
        // SAFETY: the action only updates atomics (`StopFlag::raise`),
        // which is async-signal-safe.
        let _ = unsafe { signal_hook::low_level::register(sig, move || flag.raise()) };
    }
    stop
}

/// How a child process ended, with what it printed.
#[derive(Debug)]
pub struct Ran {
    /// Its exit code; `None` when it did not start, was killed or died of
    /// a signal.
    pub code: Option<i32>,
    /// Whether it was killed at the time limit.
    pub timed_out: bool,
    /// Whether a stop signal ended it (or kept it from starting).
    pub stopped: bool,
    /// Why it could not be started, if so.
    pub spawn_error: Option<String>,
    /// Whether its output files were created (by this run: they are its).
    pub files_made: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ran {
    /// Whether it ran to the end with exit code 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// One line on why it failed: the first error line it printed, else
    /// its last line, with how it ended.
    pub fn why(&self, limit: Duration) -> String {
        if let Some(e) = &self.spawn_error {
            return format!("cannot be started: {e}");
        }
        if self.timed_out {
            return format!("no result after {} s", limit.as_secs());
        }
        if self.stopped {
            return "stopped by a signal".into();
        }
        let said = self
            .stderr
            .lines()
            .find(|l| l.contains("error"))
            .or_else(|| self.stderr.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("(nothing on stderr)")
            .trim();
        match self.code {
            Some(c) => format!("exit {c}: {said}"),
            None => format!("killed by a signal: {said}"),
        }
    }
}

/// Runs `cmd` with its output into the new files `out` and `err`, for at
/// most `limit` and until `stop` is raised: a child still running then is
/// ended with its process group, and so is what is left of its group when
/// it ends by itself.
pub fn run_limited(
    mut cmd: Command,
    limit: Duration,
    stop: &StopFlag,
    out: &Path,
    err: &Path,
) -> Ran {
    if stop.raised() {
        return Ran::failed(None, true);
    }
    let files = files::create_new(out).and_then(|o| Ok((o, files::create_new(err)?)));
    let files_made = files.is_ok();
    let spawned = files.and_then(|(o, e)| {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(o))
            .stderr(Stdio::from(e))
            .process_group(0)
            .spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                files_made,
                ..Ran::failed(Some(e.to_string()), false)
            };
        }
    };
    let start = Instant::now();
    // Short polls first: most runs of the check end within milliseconds
    // (a stub) or seconds, and a fixed long poll would add up over ~50.
    let mut nap = Duration::from_millis(1);
    let (code, timed_out, stopped) = loop {
        match has_exited(&child) {
            Ok(true) => {
                let status = end_group(&mut child, Duration::ZERO);
                break (status.and_then(|s| s.code()), false, false);
            }
            Ok(false) if start.elapsed() >= limit || stop.raised() => {
                end_group(&mut child, TERM_GRACE);
                break (None, !stop.raised(), stop.raised());
            }
            Ok(false) => {
                std::thread::sleep(nap.min(limit.saturating_sub(start.elapsed())));
                nap = (nap * 2).min(Duration::from_millis(50));
            }
            Err(e) => {
                end_group(&mut child, Duration::ZERO);
                return Ran {
                    files_made,
                    stdout: read(out),
                    stderr: read(err),
                    ..Ran::failed(Some(format!("cannot wait for it: {e}")), false)
                };
            }
        }
    };
    Ran {
        code,
        timed_out,
        stopped,
        spawn_error: None,
        files_made,
        stdout: read(out),
        stderr: read(err),
    }
}

/// Whether `child` has ended, without reaping it: while it is a zombie,
/// its pid, and so its process group's id, stays taken.
fn has_exited(child: &Child) -> std::io::Result<bool> {
    // SAFETY: waitid writes only the siginfo it is given; WNOWAIT leaves
    // the child to be reaped by `Child::wait`.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id(),
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid filled the siginfo (si_pid 0: no child has ended).
    Ok(unsafe { info.si_pid() } != 0)
}

/// Ends the process group that `child` leads: SIGTERM and up to `grace`
/// for the child to end (none when it has), then SIGKILL for all that is
/// left of the group; then reaps the child. Its exit status, if known.
fn end_group(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    let group = -(child.id() as libc::pid_t);
    if !grace.is_zero() {
        // SAFETY: kill only sends a signal; the group is the child's own,
        // whose id the unreaped child holds.
        unsafe { libc::kill(group, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < grace && !has_exited(child).unwrap_or(true) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // SAFETY: as above; a group with no process left is ESRCH, ignored.
    unsafe { libc::kill(group, libc::SIGKILL) };
    child.wait().ok()
}

impl Ran {
    /// A child that did not run to the end and printed nothing.
    fn failed(spawn_error: Option<String>, stopped: bool) -> Ran {
        Ran {
            code: None,
            timed_out: false,
            stopped,
            spawn_error,
            files_made: false,
            stdout: String::new(),
            stderr: String::new(),
        }
    }
}

/// A file's text, lossily, or empty.
fn read(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Runs the himeno binary under test: every run with the same time limit
/// and environment changes, its files named after its label in `runs`.
pub struct Runner {
    /// The binary.
    pub bin: PathBuf,
    /// The folder of the runs' files.
    runs: PathBuf,
    /// Time limit of one run.
    pub limit: Duration,
    /// Raised by a stop signal: the run going is killed, none starts.
    pub stop: StopFlag,
    /// Variables set for every run (after the first probe).
    env: Vec<(OsString, OsString)>,
}

impl Runner {
    /// A runner of `bin` whose files go to `runs`.
    pub fn new(bin: PathBuf, runs: PathBuf, limit: Duration, stop: StopFlag) -> Runner {
        Runner {
            bin,
            runs,
            limit,
            stop,
            env: Vec::new(),
        }
    }

    /// Sets `key` to `value` for every later run.
    pub fn set_env(&mut self, key: &str, value: OsString) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value));
    }

    /// Runs another program, `program` with `args` (a tool such as
    /// `cuobjdump` or `ncu`), as run `name`, with the same environment,
    /// limit and files as the binary's runs.
    pub fn run_tool(&self, name: &str, program: &Path, args: &[String]) -> Ran {
        self.launch(name, program, args, &[])
    }

    /// Runs the binary with `args` as run `name`, without the variables in
    /// `unset`: writes `name.cmd` (the command line, as a shell would take
    /// it), `name.out` and `name.err`.
    pub fn run(&self, name: &str, args: &[String], unset: &[&str]) -> Ran {
        self.launch(name, &self.bin, args, unset)
    }

    /// Runs `program` with `args` as run `name`, with the runner's
    /// variables and without those in `unset`, under the runner's limit;
    /// its command line goes to `name.cmd`, its output to `name.out` and
    /// `name.err`.
    fn launch(&self, name: &str, program: &Path, args: &[String], unset: &[&str]) -> Ran {
        let mut cmd = Command::new(program);
        cmd.args(args);
        for k in unset {
            cmd.env_remove(k);
        }
        let mut line: Vec<String> = unset.iter().map(|k| format!("-u {k}")).collect();
        if !line.is_empty() {
            line.insert(0, "env".into());
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
            line.push(format!(
                "{}={}",
                k.to_string_lossy(),
                quote(&v.to_string_lossy())
            ));
        }
        line.push(quote(&program.to_string_lossy()));
        line.extend(args.iter().map(|a| quote(a)));
        let _ = files::create_new(&self.runs.join(format!("{name}.cmd")))
            .and_then(|mut f| f.write_all((line.join(" ") + "\n").as_bytes()));
        run_limited(
            cmd,
            self.limit,
            &self.stop,
            &self.runs.join(format!("{name}.out")),
            &self.runs.join(format!("{name}.err")),
        )
    }
}

/// `s` quoted for a POSIX shell when it needs it.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=,+@%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("himeno-child-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_child_past_its_limit_is_killed_and_says_so() {
        let d = scratch("limit");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30"]);
        let t = Instant::now();
        let limit = Duration::from_millis(300);
        let r = run_limited(cmd, limit, &StopFlag::never(), &d.join("o"), &d.join("e"));
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(r.timed_out && !r.ok());
        assert_eq!(r.stdout, "started\n");
        assert_eq!(r.why(Duration::from_secs(7)), "no result after 7 s");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_failure_names_its_error_line_and_code() {
        let d = scratch("fail");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo note >&2; echo 'himeno: error: bad' >&2; exit 2"]);
        let never = StopFlag::never();
        let r = run_limited(
            cmd,
            Duration::from_secs(30),
            &never,
            &d.join("o"),
            &d.join("e"),
        );
        assert_eq!(r.why(Duration::ZERO), "exit 2: himeno: error: bad");
        let r = run_limited(
            Command::new(d.join("missing")),
            Duration::from_secs(1),
            &never,
            &d.join("o2"),
            &d.join("e2"),
        );
        assert!(r.why(Duration::ZERO).starts_with("cannot be started"));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_stop_kills_the_child_and_starts_no_other() {
        let d = scratch("stop");
        let stop = StopFlag::never();
        let raiser = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            raiser.raise();
        });
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exec sleep 30"]);
        let r = run_limited(
            cmd,
            Duration::from_secs(60),
            &stop,
            &d.join("o"),
            &d.join("e"),
        );
        t.join().unwrap();
        assert!(r.stopped && !r.timed_out, "{r:?}");
        assert_eq!(r.why(Duration::ZERO), "stopped by a signal");
        let r = run_limited(
            Command::new("true"),
            Duration::from_secs(9),
            &stop,
            &d.join("o2"),
            &d.join("e2"),
        );
        assert!(r.stopped && r.code.is_none(), "{r:?}");
        let _ = std::fs::remove_dir_all(d);
    }

    /// Whether process `pid` is still alive 5 s from now (a zombie is
    /// not): a killed process takes a moment to go.
    fn survives(pid: &str) -> bool {
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|st| st.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
        };
        let t = Instant::now();
        while alive() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        alive()
    }

    #[test]
    fn a_child_past_its_limit_is_ended_with_its_whole_group() {
        let d = scratch("group");
        // A wrapper that ignores SIGTERM, with a grandchild that does too.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "trap '' TERM; sh -c \"trap '' TERM; sleep 60 & echo \\$!; wait\" & wait",
        ]);
        let r = run_limited(
            cmd,
            Duration::from_millis(300),
            &StopFlag::never(),
            &d.join("o"),
            &d.join("e"),
        );
        assert!(r.timed_out, "{r:?}");
        let grandchild = r.stdout.trim().to_string();
        assert!(!grandchild.is_empty(), "{r:?}");
        assert!(
            !survives(&grandchild),
            "grandchild {grandchild} outlived the limit"
        );
        // A child that ends by itself leaves no process behind either.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 60 & echo $!"]);
        let never = StopFlag::never();
        let r = run_limited(
            cmd,
            Duration::from_secs(30),
            &never,
            &d.join("o2"),
            &d.join("e2"),
        );
        assert!(r.ok(), "{r:?}");
        let left = r.stdout.trim().to_string();
        assert!(!survives(&left), "{left} outlived its parent");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn a_planted_link_is_never_written_through() {
        let d = scratch("link");
        std::fs::write(d.join("victim"), "kept").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("o")).unwrap();
        let r = run_limited(
            Command::new("true"),
            Duration::from_secs(9),
            &StopFlag::never(),
            &d.join("o"),
            &d.join("e"),
        );
        assert!(r.spawn_error.is_some(), "{r:?}");
        assert_eq!(std::fs::read_to_string(d.join("victim")).unwrap(), "kept");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn quoting_leaves_plain_words_alone() {
        assert_eq!(quote("--grid"), "--grid");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
