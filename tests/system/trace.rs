//! Traces under `mpirun` and memory limits: ranks that disagree on tracing
//! stop together, a run of 64 ranks stopped while its trace is written
//! keeps its record, and a trace of many ranks fits in a few times the run's
//! memory or is refused before the run.

use crate::both::trace::{bounded, many_ranks};
use crate::common::limits::MemoryCgroup;
use crate::common::trace::*;
use crate::common::*;
use serde_json::Value;
use std::time::Duration;

#[test]
fn ranks_that_disagree_on_tracing_stop_together() {
    if !mpi_or_skip("ranks_that_disagree_on_tracing_stop_together") {
        return;
    }
    let path = temp_file("trace", "mpmd.json");
    let run_args = ["--grid", "9x9x9", "--iterations", "2"];
    let mut traced = run_args.to_vec();
    traced.extend(["--trace", path.to_str().unwrap()]);
    // An MPMD launch: rank 0 traces, rank 1 does not.
    let mut c = mpirun(1, &traced);
    c.args([":", "-np", "1", BIN]).args(run_args);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rank 1 resolved a different trace"),
        "{}",
        stderr(&o)
    );
    assert!(!path.exists(), "no rank ran, no trace is written");
}

#[test]
fn a_trace_of_many_ranks_fits_in_a_few_times_the_memory_of_the_run() {
    // Without a trace the run takes about 20 MiB; its trace's events were
    // held as JSON values (4 GiB and an abort). Six times the run.
    const MIB: u64 = 1 << 20;
    let cg = match MemoryCgroup::new("trace-fits", 128 * MIB) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("skipping: {why}");
            return;
        }
    };
    let path = temp_file("trace", "many-ranks.json");
    let mut args = many_ranks("1000");
    args.extend(["--trace".into(), path.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = bounded(cg.himeno(&args));
    let report = json_ok(&o);
    assert_eq!(report["iterations"], 1000);
    let t = load(&path);
    assert_eq!(t["otherData"]["ranks"], 64);
    let timed = complete(&t)
        .into_iter()
        .filter(|e| e["cat"] == "timed" && e["args"]["iteration"] == 1000)
        .count();
    assert!(timed >= 64, "{timed} events of the last iteration");
}

#[test]
fn a_trace_that_would_not_fit_is_refused_before_the_run() {
    // Every rank keeps a million iterations at each end: terabytes.
    let mut args = many_ranks("2000000");
    args[1] = "1024".into();
    let path = temp_file("trace", "too-big.json");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "1000000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let o = bounded(himeno(&args));
    assert_clean_error(&o, &["with its --trace"]);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "not refused up front"
    );
    assert!(!path.exists());
    // Under a memory limit, a trace that fits without one no longer does.
    const MIB: u64 = 1 << 20;
    let Ok(cg) = MemoryCgroup::new("trace-refused", 128 * MIB) else {
        return;
    };
    let mut args = many_ranks("100000");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "50000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = bounded(cg.himeno(&args));
    assert_clean_error(&o, &["with its --trace"]);
}

#[test]
fn a_stopped_run_keeps_its_record_while_its_trace_is_written() {
    // The stop comes at iteration 1500; writing the trace of 64 ranks'
    // 1500 iterations takes far longer than the grace, which then counts
    // from the end of the write.
    let path = temp_file("trace", "stopped.json");
    let mut args = many_ranks("1000000");
    args.extend(["--trace", path.to_str().unwrap(), "--trace-keep", "1000"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = himeno(&args);
    cmd.env("HIMENO_FAULT", "0:1500:term")
        .env("HIMENO_STOP_GRACE", "0.2");
    let o = bounded(cmd);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("still running"), "{err}");
    let report: Value = serde_json::from_str(&stdout(&o)).expect("the record on stdout");
    assert_eq!(report["complete"], false);
    let t = load(&path);
    assert_eq!(t["otherData"]["run"]["iterations"], report["iterations"]);
}
