//! Runs that are stopped by a signal: start a run, wait for a line on its
//! stderr, signal it, and read what it left (the signals, hostile, study,
//! temporal, GPU-check and cluster tests all do).

use super::{KillOnPanic, wait_or_kill_reading};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What a signalled run left behind.
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// A started run whose stderr is watched for a log line.
pub struct Running {
    pub child: Child,
    _guard: KillOnPanic,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Running {
    pub fn start(mut cmd: Command) -> Running {
        // A fault the caller set on purpose stays; an inherited one goes.
        if !cmd.get_envs().any(|(k, _)| k == "HIMENO_FAULT") {
            cmd.env_remove("HIMENO_FAULT");
        }
        cmd.env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("the command starts");
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Running {
            _guard: KillOnPanic(child.id()),
            child,
            lines,
            stderr,
            stdout,
        }
    }

    /// Waits (at most a minute) for a stderr line containing `what`.
    pub fn wait_for(&self, what: &str) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l.contains(what) => return,
                Ok(_) => {}
                Err(e) => panic!("no '{what}' on stderr: {e}"),
            }
        }
    }

    /// Waits for the end (at most a minute: a hang fails the test).
    pub fn finish(self) -> Ended {
        let Running {
            _guard,
            mut child,
            stderr,
            stdout,
            ..
        } = self;
        let (status, stderr) = wait_or_kill_reading(
            &mut child,
            Duration::from_secs(60),
            &"the signalled run",
            stderr,
        );
        Ended {
            status,
            stdout: stdout.join().unwrap(),
            stderr,
        }
    }
}

/// Starts `cmd`, sends it `sig` once a line containing `after` is on its
/// stderr, and waits for the end.
pub fn stop_after(cmd: Command, after: &str, sig: &str) -> Ended {
    let run = Running::start(cmd);
    run.wait_for(after);
    kill(sig, run.child.id());
    run.finish()
}

/// Sends `sig` (e.g. "TERM") to process `pid`.
pub fn kill(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -{sig} {pid} failed");
}
