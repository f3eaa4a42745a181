//! Jobs under a real launcher: ranks that disagree or refuse stop together
//! with one line, a failed MPI start is exit 2 with a `himeno:` line, and
//! the tools print once under `mpirun`.

use crate::common::hostile::*;
use crate::common::*;
use std::process::Command;

/// `mpirun` with one rank per argument list (an MPMD launch).
fn mpmd(per_rank: &[&[&str]]) -> Command {
    let mut c = mpirun(1, per_rank[0]);
    for args in &per_rank[1..] {
        c.args([":", "-np", "1", BIN]).args(*args);
    }
    c
}

#[test]
fn ranks_that_disagree_or_refuse_stop_together_with_one_line() {
    if !MPI {
        return;
    }
    let dir = scratch("disagree");
    let file = dir.join("r.jsonl");
    let f = file.to_str().unwrap();
    let base = ["--grid", "9x9x9", "--output", f, "--iterations"];
    let with = |n: &'static str| -> Vec<&str> {
        let mut v = base.to_vec();
        v.push(n);
        v
    };
    let (five, zero, seven, abc) = (with("5"), with("0"), with("7"), with("abc"));
    let mut labelled = five.clone();
    labelled.extend(["--label", "x"]);
    let selftest = ["selftest", "--grid", "9x9x9"];
    let lines: [(&[&[&str]], &str); 6] = [
        (
            &[&five, &zero],
            "rank 1 of 2: --iterations must be at least 1",
        ),
        (
            &[&zero, &five],
            "rank 0 of 2: --iterations must be at least 1",
        ),
        (&[&five, &seven], "rank 1 resolved a different run length"),
        (&[&five, &abc], "rank 1 of 2: invalid value 'abc'"),
        (&[&five, &selftest], "rank 1 resolved a different command"),
        (
            &[&five, &five, &labelled],
            "rank 2 resolved a different label",
        ),
    ];
    for (ranks, want) in lines {
        let o = run_with_limit(mpmd(ranks), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[want]);
        assert!(o.stdout.is_empty(), "{}", stdout(&o));
    }
    assert!(!file.exists(), "no rank ran, nothing is recorded");
    // Threads may differ from rank to rank (nodes of different sizes).
    let one = [
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--threads",
        "1",
        "--format",
        "json",
    ];
    let two = [
        "--grid",
        "9x9x9",
        "--iterations",
        "2",
        "--threads",
        "2",
        "--format",
        "json",
    ];
    json_ok(&run_with_limit(mpmd(&[&one, &two]), LIMIT));
}

#[test]
fn a_failed_mpi_start_is_exit_2_with_a_himeno_line() {
    if !MPI {
        return;
    }
    // A start that fails in either MPI library: Open MPI cannot find the
    // named messaging component, MPICH cannot reach its process manager
    // (each library ignores the other's setting).
    let broken = |args: &[&str]| {
        let mut cmd = himeno(args);
        cmd.env("OMPI_MCA_pml", "doesnotexist")
            .env("PMI_PORT", "127.0.0.1:1");
        cmd
    };
    let alone = broken(&["--grid", "5x5x5", "--iterations", "2"]);
    let stream = broken(&["bench", "stream", "--elements", "1000"]);
    // (Under mpirun, Open MPI's launcher exits 1 for a failed start of its
    // ranks whatever their own exit codes: that one is not ours to set.)
    for cmd in [alone, stream] {
        let o = run_with_limit(cmd, LIMIT);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("himeno:")).collect();
        assert_eq!(ours.len(), 1, "{err}");
        assert!(ours[0].contains("MPI could not start"), "{err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn tools_under_mpirun_print_once() {
    if !MPI {
        return;
    }
    let dir = scratch("tools-mpirun");
    let file = dir.join("r.jsonl");
    std::fs::write(&file, real_record(&dir, "m", "1x1x1", 1) + "\n").unwrap();
    let report = stdout_ok(&run(mpirun(3, &["report", file.to_str().unwrap()])));
    assert_eq!(report.matches("== strong scaling").count(), 1, "{report}");
    let model = stdout_ok(&run(mpirun(
        3,
        &["model", "--grid", "12x12x12", "--rate-mflops", "100"],
    )));
    assert_eq!(model.matches("model: grid").count(), 1, "{model}");
}
