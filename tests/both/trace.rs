//! The merged trace of four ranks, on this tier's launcher, and the traced
//! runs and clock checks the trace tests of both tiers share.

use crate::common::trace::*;
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::Duration;

#[test]
fn four_ranks_write_one_merged_trace() {
    for launcher in launchers() {
        let (report, t) = traced(launcher, 4, "50", &[]);
        assert_perfetto_shape(&t, 4);
        assert_sums_match(&report, &t);
        assert_one_host_clock(&t, 4);
        assert_shifted_rank_breaks_the_order(&t);
        assert_eq!(t["otherData"]["kept"], "every iteration", "{launcher:?}");
        let timed: std::collections::BTreeSet<u64> = complete(&t)
            .into_iter()
            .filter(|e| e["cat"] == "timed")
            .map(|e| e["args"]["iteration"].as_u64().unwrap())
            .collect();
        assert_eq!(timed, (1..=50).collect(), "{launcher:?}");
        assert!(
            complete(&t).iter().any(|e| e["cat"] == "rehearsal"),
            "the rehearsal is on the timeline apart from the timed loop"
        );
        assert!(
            complete(&t).iter().any(|e| e["name"] == "sweep"),
            "the CPU ranks' sweep threads are on the timeline"
        );
    }
}

/// Runs `np` ranks of size S for `iterations` with a trace; returns the
/// JSON report and the trace.
pub(crate) fn traced(
    launcher: Launcher,
    np: usize,
    iterations: &str,
    extra: &[&str],
) -> (Value, Value) {
    let (report, t, _) = traced_at(launcher, np, iterations, extra);
    (report, t)
}

/// [`traced`], with the trace's path.
pub(crate) fn traced_at(
    launcher: Launcher,
    np: usize,
    iterations: &str,
    extra: &[&str],
) -> (Value, Value, std::path::PathBuf) {
    let path = temp_file("trace", &format!("{launcher:?}-{np}-{iterations}.json"));
    let p = path.to_str().unwrap();
    let mut args = vec![
        "--size",
        "S",
        "--iterations",
        iterations,
        "--format",
        "json",
        "--trace",
        p,
    ];
    args.extend_from_slice(extra);
    let report = json_ok(&run(ranks(launcher, np, &args)));
    let t = load(&path);
    (report, t, path)
}

/// Asserts the clock alignment of ranks of one host: every estimated
/// offset is within half its round trip of zero (the shared kernel clock
/// is the truth there), none is applied, and the recorded barriers keep
/// their order across ranks: no rank leaves one before every rank has
/// entered it.
pub(crate) fn assert_one_host_clock(t: &Value, np: usize) {
    let clock = t["otherData"]["clock"].as_array().unwrap();
    assert_eq!(clock.len(), np);
    for c in clock {
        let est = c["offset_estimate_ns"].as_i64().unwrap();
        let rtt = c["rtt_ns"].as_i64().unwrap();
        assert!(
            est.abs() <= rtt / 2 + 1,
            "offset outside its round trip: {c}"
        );
        assert_eq!(c["applied_offset_ns"], 0, "{c}");
    }
    assert_barriers_in_order(t, np);
}

/// Asserts that the barrier order check sees a rank whose times are all
/// 250 ms early or late (a rank on its own clock is off by its start-up,
/// which is of that order; a descheduled rank reads its clock a few ms
/// late at most on the test machine).
pub(crate) fn assert_shifted_rank_breaks_the_order(t: &Value) {
    for shift in [-250_000.0, 250_000.0] {
        let mut moved = t.clone();
        for e in moved["traceEvents"].as_array_mut().unwrap() {
            if e["pid"] == 1 && e["ph"] == "X" {
                e["ts"] = (e["ts"].as_f64().unwrap() + shift).into();
            }
        }
        let broken = std::panic::catch_unwind(|| assert_barriers_in_order(&moved, 4));
        assert!(broken.is_err(), "rank 1 moved by {shift} us went unseen");
    }
}

/// Asserts that on the trace's common clock every rank leaves each
/// recorded barrier after the last rank entered it. On one clock this
/// holds however the ranks are scheduled: a rank descheduled around the
/// barrier reads its clock earlier before it and later after it, never
/// the other way. A rank whose times were shifted (its own start as
/// zero, a wrong offset) breaks it by more than the barrier's wait. (The
/// ends' spread, 1-40 us on a quiet machine, is not checked: with four
/// ranks on two cores a rank that has left may wait a time slice, 4 ms
/// in one CI run, before it reads the clock.)
pub(crate) fn assert_barriers_in_order(t: &Value, np: usize) {
    let mut spans: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for e in complete(t).into_iter().filter(|e| e["name"] == "barrier") {
        let start = e["ts"].as_f64().unwrap();
        let end = start + e["dur"].as_f64().unwrap();
        spans
            .entry(e["pid"].as_u64().unwrap())
            .or_default()
            .push((start, end));
    }
    assert_eq!(spans.len(), np);
    let count = spans.values().map(Vec::len).min().unwrap();
    assert!(count >= 2, "fewer than 2 barriers recorded: {spans:?}");
    for which in 0..count {
        let last_in = spans.values().map(|v| v[which].0).fold(f64::MIN, f64::max);
        let first_out = spans.values().map(|v| v[which].1).fold(f64::MAX, f64::min);
        // The times are written in microseconds to the nanosecond.
        assert!(
            first_out >= last_in - 0.002,
            "barrier {which}: a rank left at {first_out} us before the last entered at \
             {last_in} us: {:?}",
            spans.values().map(|v| v[which]).collect::<Vec<_>>()
        );
    }
}

/// 64 in-process ranks of one small grid for `iterations`, one thread
/// each: many ranks' events at once.
pub(crate) fn many_ranks(iterations: &str) -> Vec<String> {
    [
        "--local-ranks",
        "64",
        "--grid",
        "34x34x34",
        "--threads",
        "1",
        "--iterations",
        iterations,
        "--format",
        "json",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `cmd` with at most `limit`, as the tests' deadline.
pub(crate) fn bounded(cmd: Command) -> Output {
    run_with_limit(cmd, Duration::from_secs(120))
}
