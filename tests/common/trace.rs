//! Reading a Chrome trace (`--trace FILE`) and checking it as Perfetto
//! reads it and against the report's phase table (the trace, cluster and
//! emulated-GPU tests all do).

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The first GPU stream's track (`himeno::timeline::GPU_COMPUTE_TRACK`).
pub const GPU_TRACKS: u64 = himeno::timeline::GPU_COMPUTE_TRACK as u64;

/// Reads and parses a trace file.
pub fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the trace was written");
    serde_json::from_str(&text).expect("the trace is one JSON document")
}

/// The complete events of a trace.
pub fn complete(t: &Value) -> Vec<&Value> {
    t["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect()
}

/// Asserts what Perfetto needs: one named, sorted process per rank, no
/// tid 0, no two complete events overlapping on one track.
pub fn assert_perfetto_shape(t: &Value, np: usize) {
    let events = t["traceEvents"].as_array().unwrap();
    for e in events {
        assert!(e["tid"].as_u64().unwrap() > 0, "tid 0: {e}");
        assert!(e["pid"].as_u64().unwrap() < np as u64, "{e}");
    }
    let meta = |name: &str, key: &str| -> BTreeMap<u64, Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name)
            .map(|e| (e["pid"].as_u64().unwrap(), e["args"][key].clone()))
            .collect()
    };
    let names = meta("process_name", "name");
    let sort = meta("process_sort_index", "sort_index");
    assert_eq!(names.len(), np);
    for r in 0..np as u64 {
        assert_eq!(names[&r], format!("rank {r}"));
        assert_eq!(sort[&r], r);
    }
    let mut tracks: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for e in complete(t) {
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        assert!(ts >= 0.0 && dur >= 0.0, "{e}");
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        tracks.entry(key).or_default().push((ts, ts + dur));
    }
    for r in 0..np as u64 {
        assert!(tracks.contains_key(&(r, 1)), "rank {r} has no phase track");
    }
    // Beside the phases (tid 1) only the sweep threads' shares (tid 2..)
    // and a GPU rank's streams' work (from GPU_TRACKS on, named "gpu ..."),
    // each track named in the metadata.
    for e in complete(t) {
        let tid = e["tid"].as_u64().unwrap();
        let name = e["name"].as_str().unwrap();
        if tid >= GPU_TRACKS {
            assert!(name.starts_with("gpu "), "{e}");
        } else {
            assert_eq!(tid > 1, name == "sweep", "{e}");
        }
    }
    let named: std::collections::BTreeSet<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    for track in tracks.keys() {
        assert!(named.contains(track), "track {track:?} has no thread_name");
    }
    for (track, spans) in &mut tracks {
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            // A thousandth of a microsecond: the rounding of ts + dur.
            assert!(w[1].0 >= w[0].1 - 1e-3, "overlap on {track:?}: {w:?}");
        }
    }
}

/// Asserts that every rank's timed events add up to its row of the
/// report's phase table, within 1 %.
pub fn assert_sums_match(report: &Value, t: &Value) {
    let mut sums: BTreeMap<(u64, String), f64> = BTreeMap::new();
    for e in complete(t).into_iter().filter(|e| e["cat"] == "timed") {
        let key = (
            e["pid"].as_u64().unwrap(),
            e["name"].as_str().unwrap().to_string(),
        );
        *sums.entry(key).or_default() += e["dur"].as_f64().unwrap() * 1e-6;
    }
    let per_rank = report["per_rank"].as_array().unwrap();
    for row in per_rank {
        let rank = row["rank"].as_u64().unwrap();
        for (phase, want) in row["phases_s"].as_object().unwrap() {
            let want = want.as_f64().unwrap();
            let got = sums.get(&(rank, phase.clone())).copied().unwrap_or(0.0);
            // 1 %, and a microsecond for phases that took none.
            assert!(
                (got - want).abs() <= 0.01 * want + 1e-6,
                "rank {rank} {phase}: trace {got} s, report {want} s"
            );
        }
    }
    assert!(sums.keys().any(|(_, p)| p == "compute"));
    // A sweep thread works within its rank's compute time: no thread's
    // shares add up to more.
    let mut threads: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for e in complete(t)
        .into_iter()
        .filter(|e| e["name"] == "sweep" && e["cat"] == "timed")
    {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        *threads.entry(key).or_default() += e["dur"].as_f64().unwrap() * 1e-6;
    }
    for ((rank, tid), s) in threads {
        let compute = sums[&(rank, "compute".to_string())];
        assert!(
            s <= compute * 1.01 + 1e-6,
            "rank {rank} thread {tid}: {s} s in {compute} s"
        );
    }
}
