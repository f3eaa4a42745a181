//! What a run takes of the machine: sizes beyond memory refused before
//! allocating, in-process ranks that wait without spinning and fit in
//! little memory, and a rank whose thread is refused ending the job at
//! once.

use crate::common::hostile::*;
use crate::common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn stream_and_pingpong_sizes_beyond_memory_are_refused() {
    for args in [
        &["bench", "stream", "--elements", "100000000000"][..],
        &["bench", "stream", "--elements", "18446744073709551615"],
    ] {
        let o = run_with_limit(himeno(args), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["elements"]);
    }
}

/// `himeno ARGS` under `ulimit -u n` (processes and threads of its user).
/// Root is not bound by that limit, so as root the run is user nobody's.
fn with_thread_limit(n: usize, args: &[&str]) -> Command {
    let script = format!("ulimit -u {n} && exec \"$0\" \"$@\"");
    // SAFETY: geteuid only reads the process's credentials.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    cmd.args(["-c", &script, BIN]).args(args);
    cmd
}

#[test]
fn a_rank_whose_thread_is_refused_ends_the_job_at_once() {
    const RANKS: [&str; 4] = ["--local-ranks", "16", "--threads", "1"];
    let tiny = ["--grid", "22x22x22", "--iterations", "2"];
    let commands: [&[&str]; 4] = [
        &tiny,
        &["selftest", "--grid", "22x22x22"],
        &["bench", "stream", "--elements", "1000"],
        &["bench", "pingpong", "--max-bytes", "8"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        // The rank options belong to the subcommand, after its name.
        args.extend(if command == tiny {
            &RANKS[..]
        } else {
            &RANKS[..2]
        });
        let started = std::time::Instant::now();
        let e = run_out(with_thread_limit(8, &args), Out::File("/dev/null"), LIMIT);
        assert_told(&e, 2, &["start"]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn many_in_process_ranks_wake_only_for_what_they_wait_for() {
    // 63 pairs measured one after the other: with one condition variable
    // for all, every message woke all 64 ranks, and this took 30 s.
    let started = std::time::Instant::now();
    let o = run_with_limit(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "64",
            "--max-bytes",
            "8",
        ]),
        LIMIT,
    );
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(took < Duration::from_secs(12), "took {took:?}");
    // The most it takes runs to its end (pairs hand each other the turn
    // instead of a barrier of every rank); one more is refused, naming the
    // limit.
    let o = run_with_limit(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "256",
            "--max-bytes",
            "8",
            "--pairs",
            "adjacent",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = run_out(
        himeno(&[
            "bench",
            "pingpong",
            "--local-ranks",
            "257",
            "--max-bytes",
            "8",
        ]),
        Out::File("/dev/null"),
        LIMIT,
    );
    assert_told(&e, 2, &["at most 256 in-process ranks"]);
}

#[test]
fn a_thousand_tiny_in_process_ranks_run_in_little_memory() {
    // Each rank's fourteen fields once took a 2 MiB huge page each: 1000
    // ranks of a 12^3 grid took 21 GiB and 96 s.
    let o = run_with_limit(
        himeno(&[
            "--local-ranks",
            "1000",
            "--grid",
            "12x12x12",
            "--iterations",
            "2",
            "--threads",
            "1",
            "--format",
            "json",
        ]),
        LIMIT,
    );
    let r = json_ok(&o);
    let peak = r["per_rank"][0]["memory"]["peak_bytes"].as_f64().unwrap();
    assert!(peak < 1024.0 * MIB, "peak {:.0} MiB", peak / MIB);
}
