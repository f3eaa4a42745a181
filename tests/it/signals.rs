//! Scheduler signals. A run is started long enough to be interrupted; once
//! its timed loop has begun (the `rehearsal done` log line of `-v`), it is
//! sent a stop signal. Every rank must stop after the current iteration,
//! rank 0 must print the report of the iterations done marked incomplete
//! (and append it to the results file), and the exit status must be
//! nonzero. Under Open MPI's `mpirun`, SIGUSR1 to `mpirun` is forwarded to
//! the ranks, and SIGTERM to every rank is what Slurm does at a time limit;
//! both are tested. (SIGTERM to `mpirun` itself makes Open MPI 4 kill the
//! ranks about a second later, so a slow iteration loses its report.)

use crate::common::*;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A run that would take many minutes unless stopped.
const LONG: [&str; 8] = [
    "--size",
    "S",
    "--iterations",
    "1000000",
    "--threads",
    "1",
    "-v",
    "--warmup",
];

/// What a signalled run left behind.
pub(crate) struct Ended {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A started run whose stderr is watched for a log line.
pub(crate) struct Running {
    pub(crate) child: Child,
    _guard: KillOnPanic,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Running {
    pub(crate) fn start(mut cmd: Command) -> Running {
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
    pub(crate) fn wait_for(&self, what: &str) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(l) if l.contains(what) => return,
                Ok(_) => {}
                Err(e) => panic!("no '{what}' on stderr: {e}"),
            }
        }
    }

    /// Waits for the end (at most a minute: a hang fails the test).
    pub(crate) fn finish(self) -> Ended {
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
pub(crate) fn stop_after(cmd: Command, after: &str, sig: &str) -> Ended {
    let run = Running::start(cmd);
    run.wait_for(after);
    kill(sig, run.child.id());
    run.finish()
}

/// Sends `sig` (e.g. "TERM") to process `pid`.
pub(crate) fn kill(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -{sig} {pid} failed");
}

/// The himeno processes below `launcher`: its children under Open MPI's
/// mpirun, its grandchildren under MPICH's mpiexec (a proxy in between).
fn ranks_of(launcher: u32) -> Vec<u32> {
    let mut ranks = Vec::new();
    let mut level = vec![launcher];
    while !level.is_empty() && ranks.is_empty() {
        level = level.into_iter().flat_map(children).collect();
        ranks = level
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e == std::path::Path::new(BIN))
            })
            .collect();
    }
    ranks
}

/// Checks an incomplete JSON report and the matching results-file line.
fn assert_incomplete_json(e: &Ended, file: &PathBuf) {
    assert_eq!(e.status.code(), Some(2), "stderr:\n{}", e.stderr);
    let r: serde_json::Value =
        serde_json::from_str(&e.stdout).unwrap_or_else(|err| panic!("{err}:\n{}", e.stdout));
    assert_eq!(r["complete"], false, "{r}");
    let done = r["iterations"].as_u64().unwrap();
    assert!(
        done >= 1 && done < r["planned_iterations"].as_u64().unwrap(),
        "{r}"
    );
    assert_eq!(
        r["verified"],
        serde_json::Value::Null,
        "an incomplete run is not verified"
    );
    assert!(
        e.stderr.contains("stopped by a signal after"),
        "{}",
        e.stderr
    );
    let text = std::fs::read_to_string(file).expect("the results file is written");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let rec: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(rec["complete"], false);
    assert_eq!(rec["iterations"], done);
}

#[test]
fn sigterm_twice_stops_a_single_rank_with_an_incomplete_report() {
    let file = temp_file("sig", "term.jsonl");
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let run = Running::start(himeno(&args));
    run.wait_for("rehearsal done");
    // Batch systems may deliver the signal twice (scheduler and launcher):
    // the second must not cost the report.
    kill("TERM", run.child.id());
    kill("TERM", run.child.id());
    assert_incomplete_json(&run.finish(), &file);
}

#[test]
fn sigusr1_and_sigint_mark_the_text_and_csv_reports_incomplete() {
    for (sig, format) in [("USR1", "text"), ("INT", "csv")] {
        let mut args = LONG.to_vec();
        args.extend(["3", "--format", format]);
        let e = stop_after(himeno(&args), "rehearsal done", sig);
        assert_eq!(e.status.code(), Some(2), "{sig}: {}", e.stderr);
        if format == "text" {
            assert!(
                e.stdout.contains("(INCOMPLETE: stopped by a signal"),
                "{}",
                e.stdout
            );
        } else {
            let rows: Vec<Vec<&str>> = e.stdout.lines().map(|l| l.split(',').collect()).collect();
            let col = rows[0]
                .iter()
                .position(|h| *h == "complete")
                .expect("complete column");
            assert_eq!(rows[1][col], "false", "{}", e.stdout);
        }
        assert!(
            !e.stdout.contains("VALID"),
            "{sig}: {}",
            e.stdout.replace("NOT CHECKED", "")
        );
    }
}

#[test]
fn a_signal_during_the_rehearsal_ends_cleanly_without_a_report() {
    let file = temp_file("sig", "rehearsal.jsonl");
    let mut args = LONG.to_vec();
    // A thousand rehearsal iterations take long enough to be interrupted.
    args.extend([
        "1000",
        "--format",
        "json",
        "--output",
        file.to_str().unwrap(),
    ]);
    let e = stop_after(himeno(&args), "memory preflight passed", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    assert!(e.stdout.is_empty(), "{}", e.stdout);
    assert!(e.stderr.contains("during the rehearsal"), "{}", e.stderr);
    assert!(!file.exists(), "nothing was measured, nothing is recorded");
}

#[test]
fn a_run_stopped_early_skips_the_quick_stream() {
    let mut args = LONG.to_vec();
    args.extend(["3", "--stream", "quick", "--format", "json"]);
    let e = stop_after(himeno(&args), "rehearsal done", "TERM");
    assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
    let r: serde_json::Value =
        serde_json::from_str(&e.stdout).unwrap_or_else(|err| panic!("{err}:\n{}", e.stdout));
    assert_eq!(r["complete"], false, "{r}");
    // The measurement would come after the loop: a stopped run leaves it
    // out rather than spend its grace on it.
    assert!(r["stream_triad_gbytes_per_s"].is_null(), "{r}");
    assert!(!e.stderr.contains("quick stream"), "{}", e.stderr);
}

/// Starts a long run on 4 ranks of `launcher` appending to a results file,
/// sends `sig` to the launching process once the rehearsal is done, and
/// checks that every rank stopped and the record says so.
fn four_ranks_stop_on(launcher: Launcher, sig: &str) {
    let file = temp_file("sig", &format!("{launcher:?}-{sig}.jsonl"));
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let e = stop_after(ranks(launcher, 4, &args), "rehearsal done", sig);
    assert_incomplete_json(&e, &file);
    assert_eq!(
        e.stderr
            .matches("stop signal: ending the run early")
            .count(),
        4
    );
}

#[test]
fn sigterm_stops_every_in_process_rank() {
    four_ranks_stop_on(Launcher::Local, "TERM");
}

#[test]
fn sigusr1_to_mpirun_stops_every_rank() {
    if mpi_or_skip("sigusr1_to_mpirun_stops_every_rank") {
        four_ranks_stop_on(Launcher::Mpirun, "USR1");
    }
}

#[test]
fn sigterm_to_every_rank_stops_the_job_as_under_slurm() {
    if !mpi_or_skip("sigterm_to_every_rank_stops_the_job_as_under_slurm") {
        return;
    }
    let file = temp_file("sig", "mpirun-term.jsonl");
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let run = Running::start(mpirun(4, &args));
    run.wait_for("rehearsal done");
    let ranks = ranks_of(run.child.id());
    assert_eq!(ranks.len(), 4, "mpirun's ranks: {ranks:?}");
    for pid in ranks {
        kill("TERM", pid);
    }
    assert_incomplete_json(&run.finish(), &file);
}
