//! The merged trace in the Chrome Trace Event format (JSON object form),
//! which ui.perfetto.dev and chrome://tracing open: one process per rank
//! (`pid` = rank, named "rank N", sorted by rank), one thread per track
//! (`tid` 1 the driver's phases, 2 on each sweep thread's share, and on
//! GPU ranks one per stream, timed by device events), complete (`"X"`)
//! events that never overlap on a track,
//! all on one epoch. Perfetto's JSON importer takes no clock information,
//! so the ranks' times are aligned here, before writing. The document is
//! written as the events come ([`Writer`]), never built whole in memory.

use super::clock::Offset;
use super::rank::RankHeader;
use crate::timeline::{
    Dropped, Event, FIRST_THREAD_TRACK, GPU_COMPUTE_TRACK, GPU_HALO_TRACK, MAIN_TRACK,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::{self, Write};

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
fn applied_ns(rank: &RankHeader, first_host: &str, offset: Offset) -> i64 {
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

/// The name of a rank's track `track`.
fn track_name(track: u32) -> String {
    if track == MAIN_TRACK {
        "phases".to_string()
    } else if track == GPU_COMPUTE_TRACK {
        "gpu compute stream (device events)".to_string()
    } else if track == GPU_HALO_TRACK {
        "gpu halo stream (device events)".to_string()
    } else {
        format!("sweep thread {}", track.saturating_sub(FIRST_THREAD_TRACK))
    }
}

/// Writes the merged trace of the ranks whose `headers` it is given (in
/// rank order, with rank 0's `offsets`) to `out` as their events come, one
/// rank after the other and in chunks: nothing but the headers and the
/// current rank's tracks is held, never the document. Time zero is the
/// earliest rank's origin.
pub struct Writer<W: Write> {
    out: W,
    headers: Vec<RankHeader>,
    offsets: Vec<Offset>,
    applied: Vec<i64>,
    epoch: i128,
    /// Whether an event was written (the next one needs a comma).
    written: bool,
    /// The tracks of the rank being written.
    tracks: BTreeSet<u32>,
}

impl<W: Write> Writer<W> {
    /// Starts the document on `out`.
    pub fn begin(mut out: W, headers: Vec<RankHeader>, offsets: Vec<Offset>) -> io::Result<Self> {
        let first_host = headers.first().map_or("", |r| r.host.as_str());
        let applied: Vec<i64> = headers
            .iter()
            .map(|r| {
                applied_ns(
                    r,
                    first_host,
                    offsets.get(r.rank).copied().unwrap_or_default(),
                )
            })
            .collect();
        let epoch = headers
            .iter()
            .zip(&applied)
            .map(|(r, &a)| r.origin_ns as i128 - a as i128)
            .min()
            .unwrap_or(0);
        out.write_all(b"{\"traceEvents\":[")?;
        Ok(Writer {
            out,
            headers,
            offsets,
            applied,
            epoch,
            written: false,
            tracks: BTreeSet::new(),
        })
    }

    /// The ranks' headers, in rank order.
    pub fn headers(&self) -> &[RankHeader] {
        &self.headers
    }

    /// Writes one event of the array.
    fn event(&mut self, e: &impl Serialize) -> io::Result<()> {
        if self.written {
            self.out.write_all(b",")?;
        }
        self.written = true;
        serde_json::to_writer(&mut self.out, e).map_err(io::Error::from)
    }

    /// Writes a metadata event of rank `pid`.
    fn meta(&mut self, name: &'static str, pid: usize, tid: u32, args: Value) -> io::Result<()> {
        self.event(&Meta {
            name,
            ph: "M",
            pid,
            tid,
            args,
        })
    }

    /// Starts the `i`-th rank: its process's metadata.
    pub fn begin_rank(&mut self, i: usize) -> io::Result<()> {
        let (rank, host) = (self.headers[i].rank, self.headers[i].host.clone());
        self.tracks = BTreeSet::from([MAIN_TRACK]);
        self.meta(
            "process_name",
            rank,
            MAIN_TRACK,
            json!({ "name": format!("rank {rank}") }),
        )?;
        self.meta(
            "process_sort_index",
            rank,
            MAIN_TRACK,
            json!({ "sort_index": rank }),
        )?;
        self.meta(
            "process_labels",
            rank,
            MAIN_TRACK,
            json!({ "labels": host }),
        )
    }

    /// Writes `events`, the next of the `i`-th rank's.
    pub fn events(&mut self, i: usize, events: &[Event]) -> io::Result<()> {
        let h = &self.headers[i];
        let (pid, base) = (
            h.rank,
            h.origin_ns as i128 - self.applied[i] as i128 - self.epoch,
        );
        for e in events {
            self.tracks.insert(e.track);
            self.event(&Complete {
                name: e.what.name(),
                cat: e.part.name(),
                ph: "X",
                pid,
                tid: e.track,
                ts: us(base + e.start_ns as i128),
                dur: us(e.dur_ns as i128),
                args: Args {
                    iteration: e.iteration,
                },
            })?;
        }
        Ok(())
    }

    /// Ends the `i`-th rank: its tracks' metadata.
    pub fn end_rank(&mut self, i: usize) -> io::Result<()> {
        let rank = self.headers[i].rank;
        for track in std::mem::take(&mut self.tracks) {
            self.meta(
                "thread_name",
                rank,
                track,
                json!({ "name": track_name(track) }),
            )?;
            self.meta(
                "thread_sort_index",
                rank,
                track,
                json!({ "sort_index": track }),
            )?;
        }
        Ok(())
    }

    /// Ends the document with what it says about itself and `about` (the
    /// run's description), and hands the output back.
    pub fn finish(mut self, about: Value) -> io::Result<W> {
        let (keep, dropped) = self
            .headers
            .first()
            .map_or((0, Dropped::default()), |r| (r.keep, r.dropped));
        let clock: Vec<Value> = self
            .headers
            .iter()
            .zip(&self.applied)
            .map(|(r, a)| {
                let o = self.offsets.get(r.rank).copied().unwrap_or_default();
                json!({
                    "rank": r.rank,
                    "host": r.host,
                    "offset_estimate_ns": o.estimate_ns,
                    "rtt_ns": o.rtt_ns,
                    "applied_offset_ns": a,
                })
            })
            .collect();
        let dropped_per_rank: Vec<Value> = self
            .headers
            .iter()
            .map(|r| {
                json!({
                    "rank": r.rank,
                    "events": r.dropped.events,
                    "iterations": r.dropped.iterations,
                })
            })
            .collect();
        let other = json!({
            "format": "himeno-trace-1",
            "version": crate::build::VERSION,
            "ranks": self.headers.len(),
            "time_zero": "the earliest rank's start of recording, after the clock alignment",
            "kept": kept_text(keep, dropped),
            "keep_iterations": keep,
            "dropped": dropped_per_rank,
            "clock": clock,
            "run": about,
        });
        self.out
            .write_all(b"],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut self.out, &other).map_err(io::Error::from)?;
        self.out.write_all(b"}")?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Event, Part, What};
    use crate::timing::Phase;

    type Timeline = (RankHeader, Vec<Event>);

    fn rank(rank: usize, host: &str, origin_ns: u64) -> Timeline {
        let h = RankHeader {
            rank,
            host: host.into(),
            origin_ns,
            keep: 10,
            dropped: Dropped::default(),
            events: 1,
        };
        let e = Event {
            what: What::Phase(Phase::Compute),
            part: Part::Timed,
            iteration: 1,
            track: MAIN_TRACK,
            start_ns: 1000,
            dur_ns: 2500,
        };
        (h, vec![e])
    }

    /// The document [`Writer`] makes of `ranks`, each rank's events in
    /// chunks of one.
    fn render(ranks: &[Timeline], offsets: &[Offset], about: Value) -> String {
        let headers = ranks.iter().map(|r| r.0.clone()).collect();
        let mut w = Writer::begin(Vec::new(), headers, offsets.to_vec()).unwrap();
        for (i, (_, events)) in ranks.iter().enumerate() {
            w.begin_rank(i).unwrap();
            for e in events {
                w.events(i, std::slice::from_ref(e)).unwrap();
            }
            w.end_rank(i).unwrap();
        }
        String::from_utf8(w.finish(about).unwrap()).unwrap()
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
        let v: Value = serde_json::from_str(&render(&ranks, &offsets, json!({}))).unwrap();
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
        let (h, mut events) = rank(0, "a", 0);
        for (track, what) in [
            (
                GPU_COMPUTE_TRACK,
                What::Gpu(crate::timeline::GpuWork::Sweep),
            ),
            (GPU_HALO_TRACK, What::Gpu(crate::timeline::GpuWork::ToHost)),
        ] {
            events.push(Event {
                what,
                track,
                ..events[0]
            });
        }
        let v: Value =
            serde_json::from_str(&render(&[(h, events)], &[Offset::default()], json!({}))).unwrap();
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
        let v: Value = serde_json::from_str(&render(&ranks, &offsets, json!({}))).unwrap();
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
