//! The merged trace in the Chrome Trace Event format (JSON object form),
//! which ui.perfetto.dev and chrome://tracing open: one process per rank
//! (`pid` = rank, named "rank N", sorted by rank), one thread per track
//! (`tid` 1 the driver's phases, 2 on each sweep thread's share, and on
//! GPU ranks one per stream, timed by device events), complete (`"X"`)
//! events that never overlap on a track,
//! all on one epoch. Perfetto's JSON importer takes no clock information,
//! so the ranks' times are aligned here, before writing.

use super::clock::Offset;
use super::rank::RankTimeline;
use crate::timeline::{Dropped, FIRST_THREAD_TRACK, GPU_COMPUTE_TRACK, GPU_HALO_TRACK, MAIN_TRACK};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// A complete event.
#[derive(Serialize)]
struct Complete {
    name: &'static str,
    cat: &'static str,
    ph: &'static str,
    pid: usize,
    tid: u32,
    ts: f64,
    dur: f64,
    args: Args,
}

/// What a complete event carries beside its span.
#[derive(Serialize)]
struct Args {
    iteration: u64,
}

/// A metadata event.
#[derive(Serialize)]
struct Meta {
    name: &'static str,
    ph: &'static str,
    pid: usize,
    tid: u32,
    args: Value,
}

/// The offset subtracted from a rank's clock: none on rank 0's host (one
/// kernel clock for all its processes), the estimate elsewhere.
fn applied_ns(rank: &RankTimeline, first_host: &str, offset: Offset) -> i64 {
    if rank.host == first_host {
        0
    } else {
        offset.estimate_ns
    }
}

/// Microseconds, as the format counts, from nanoseconds.
fn us(ns: i128) -> f64 {
    ns as f64 / 1000.0
}

/// What the file says it kept: every iteration, or which were dropped.
pub fn kept_text(keep: u64, dropped: Dropped) -> String {
    match dropped.iterations {
        None => "every iteration".to_string(),
        Some((first, last)) => format!(
            "the rehearsal and the first and last {keep} timed iterations; events of timed \
             iterations {first} to {last} were dropped to bound the trace"
        ),
    }
}

/// The merged trace of `ranks` (in rank order) with rank 0's `offsets`,
/// `about` describing the run; time zero is the earliest rank's origin.
pub fn render(
    ranks: &[RankTimeline],
    offsets: &[Offset],
    about: Value,
) -> serde_json::Result<String> {
    let first_host = ranks.first().map_or("", |r| r.host.as_str());
    let applied: Vec<i64> = ranks
        .iter()
        .map(|r| {
            applied_ns(
                r,
                first_host,
                offsets.get(r.rank).copied().unwrap_or_default(),
            )
        })
        .collect();
    let origin = |i: usize| ranks[i].origin_ns as i128 - applied[i] as i128;
    let epoch = (0..ranks.len()).map(origin).min().unwrap_or(0);
    let mut events: Vec<Value> = Vec::new();
    let mut complete: Vec<Complete> = Vec::new();
    for (i, r) in ranks.iter().enumerate() {
        let meta = |name, tid, args| Meta {
            name,
            ph: "M",
            pid: r.rank,
            tid,
            args,
        };
        for m in [
            meta(
                "process_name",
                MAIN_TRACK,
                json!({ "name": format!("rank {}", r.rank) }),
            ),
            meta(
                "process_sort_index",
                MAIN_TRACK,
                json!({ "sort_index": r.rank }),
            ),
            meta("process_labels", MAIN_TRACK, json!({ "labels": r.host })),
        ] {
            events.push(serde_json::to_value(m)?);
        }
        let tracks: BTreeSet<u32> = std::iter::once(MAIN_TRACK)
            .chain(r.events.iter().map(|e| e.track))
            .collect();
        for track in tracks {
            let name = if track == MAIN_TRACK {
                "phases".to_string()
            } else if track == GPU_COMPUTE_TRACK {
                "gpu compute stream (device events)".to_string()
            } else if track == GPU_HALO_TRACK {
                "gpu halo stream (device events)".to_string()
            } else {
                format!("sweep thread {}", track.saturating_sub(FIRST_THREAD_TRACK))
            };
            for m in [
                meta("thread_name", track, json!({ "name": name })),
                meta("thread_sort_index", track, json!({ "sort_index": track })),
            ] {
                events.push(serde_json::to_value(m)?);
            }
        }
        let base = origin(i) - epoch;
        complete.extend(r.events.iter().map(|e| Complete {
            name: e.what.name(),
            cat: e.part.name(),
            ph: "X",
            pid: r.rank,
            tid: e.track,
            ts: us(base + e.start_ns as i128),
            dur: us(e.dur_ns as i128),
            args: Args {
                iteration: e.iteration,
            },
        }));
    }
    for c in complete {
        events.push(serde_json::to_value(c)?);
    }
    let (keep, dropped) = ranks
        .first()
        .map_or((0, Dropped::default()), |r| (r.keep, r.dropped));
    let clock: Vec<Value> = ranks
        .iter()
        .zip(&applied)
        .map(|(r, a)| {
            let o = offsets.get(r.rank).copied().unwrap_or_default();
            json!({
                "rank": r.rank,
                "host": r.host,
                "offset_estimate_ns": o.estimate_ns,
                "rtt_ns": o.rtt_ns,
                "applied_offset_ns": a,
            })
        })
        .collect();
    let dropped_per_rank: Vec<Value> = ranks
        .iter()
        .map(|r| {
            json!({
                "rank": r.rank,
                "events": r.dropped.events,
                "iterations": r.dropped.iterations,
            })
        })
        .collect();
    serde_json::to_string(&json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "format": "himeno-trace-1",
            "version": env!("CARGO_PKG_VERSION"),
            "ranks": ranks.len(),
            "time_zero": "the earliest rank's start of recording, after the clock alignment",
            "kept": kept_text(keep, dropped),
            "keep_iterations": keep,
            "dropped": dropped_per_rank,
            "clock": clock,
            "run": about,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Event, Part, What};
    use crate::timing::Phase;

    fn rank(rank: usize, host: &str, origin_ns: u64) -> RankTimeline {
        RankTimeline {
            rank,
            host: host.into(),
            origin_ns,
            keep: 10,
            dropped: Dropped::default(),
            events: vec![Event {
                what: What::Phase(Phase::Compute),
                part: Part::Timed,
                iteration: 1,
                track: MAIN_TRACK,
                start_ns: 1000,
                dur_ns: 2500,
            }],
        }
    }

    #[test]
    fn ranks_are_processes_on_one_epoch() {
        // Rank 1 is on another host whose clock runs 1 ms ahead.
        let ranks = [rank(0, "a", 5_000_000), rank(1, "b", 6_000_500)];
        let offsets = [
            Offset::default(),
            Offset {
                estimate_ns: 1_000_000,
                rtt_ns: 40,
            },
        ];
        let v: Value = serde_json::from_str(&render(&ranks, &offsets, json!({})).unwrap()).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["rank 0", "rank 1"]);
        assert!(ev.iter().all(|e| e["tid"].as_u64().unwrap() > 0));
        let x: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(
            (x[0]["ts"].as_f64(), x[0]["dur"].as_f64()),
            (Some(1.0), Some(2.5))
        );
        // 500 ns later once its 1 ms offset is taken off.
        assert_eq!(x[1]["ts"].as_f64(), Some(1.5));
        assert_eq!(v["otherData"]["clock"][1]["applied_offset_ns"], 1_000_000);
        assert_eq!(v["otherData"]["kept"], "every iteration");
    }

    #[test]
    fn gpu_streams_are_named_tracks() {
        let mut r = rank(0, "a", 0);
        for (track, what) in [
            (
                GPU_COMPUTE_TRACK,
                What::Gpu(crate::timeline::GpuWork::Sweep),
            ),
            (GPU_HALO_TRACK, What::Gpu(crate::timeline::GpuWork::ToHost)),
        ] {
            r.events.push(Event {
                what,
                track,
                ..r.events[0]
            });
        }
        let v: Value =
            serde_json::from_str(&render(&[r], &[Offset::default()], json!({})).unwrap()).unwrap();
        let ev = v["traceEvents"].as_array().unwrap();
        let name = |tid: u32| {
            ev.iter()
                .find(|e| e["name"] == "thread_name" && e["tid"] == tid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        };
        assert_eq!(name(MAIN_TRACK).as_deref(), Some("phases"));
        assert_eq!(
            name(GPU_COMPUTE_TRACK).as_deref(),
            Some("gpu compute stream (device events)")
        );
        assert_eq!(
            name(GPU_HALO_TRACK).as_deref(),
            Some("gpu halo stream (device events)")
        );
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["compute", "gpu sweep", "gpu copy to host"]);
    }

    #[test]
    fn ranks_on_the_first_host_keep_their_clock() {
        let ranks = [rank(0, "a", 5_000), rank(1, "a", 4_000)];
        let offsets = [
            Offset::default(),
            Offset {
                estimate_ns: 300,
                rtt_ns: 900,
            },
        ];
        let v: Value = serde_json::from_str(&render(&ranks, &offsets, json!({})).unwrap()).unwrap();
        let x: Vec<f64> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| e["ts"].as_f64().unwrap())
            .collect();
        // Rank 1 started first: it is time zero.
        assert_eq!(x, [2.0, 1.0]);
    }
}
