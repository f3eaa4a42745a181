//! `--trace FILE`: every rank records a timeline of its phases (see
//! `crate::timeline`), and rank 0 gathers them after the run and writes one
//! merged Chrome Trace Event file (see [`chrome`]) on one epoch, aligned
//! from clock offsets exchanged at the start (see [`clock`]).
//!
//! A session starts before the solver (a barrier, the offsets, a barrier
//! recorded on every rank) and finishes after it (a closing barrier
//! recorded, the gather, rank 0 writes); both are collective.

pub mod chrome;
pub mod clock;

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::timeline::{self, Dropped, Event, Part, Recorder, What};
use crate::timing::Phase;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Default `--trace-keep`: runs up to twice this many iterations are
/// traced whole.
pub const DEFAULT_KEEP: u64 = 500;

/// Options of `--trace`.
#[derive(Debug, Args, Clone, Default)]
pub struct TraceArgs {
    /// Write a timeline of every rank's phases to FILE, merged into one
    /// Chrome Trace Event JSON (open it in ui.perfetto.dev; `himeno report
    /// --timeline FILE --plot DIR` draws it).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Timed iterations a trace keeps at each end of the run: runs of up
    /// to twice N are traced whole, longer ones keep the first and last N
    /// (the file says which were dropped).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP, requires = "trace",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub trace_keep: u64,
}

/// Checks, before any work, that the trace file can be written (rank 0
/// writes it); a missing file is not left behind.
pub fn check_writable(path: &Path) -> Result<()> {
    let refuse = |why: String| {
        Error::usage(format!(
            "cannot write the trace {}: {why}; choose a writable --trace FILE",
            path.display()
        ))
    };
    if path.is_dir() || path.file_name().is_none() {
        return Err(refuse("it names a directory, not a file".into()));
    }
    if path.exists() && !path.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| refuse(e.to_string()))?;
    if !existed {
        std::fs::remove_file(path).map_err(|e| refuse(e.to_string()))?;
    }
    Ok(())
}

/// One rank's timeline as rank 0 gathers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankTimeline {
    /// Rank number.
    pub rank: usize,
    /// Host the rank ran on.
    pub host: String,
    /// The rank's recording origin on its host's monotonic clock, in ns.
    pub origin_ns: u64,
    /// Iterations kept at each end of the timed loop.
    pub keep: u64,
    /// What the rank's recorder dropped.
    pub dropped: Dropped,
    /// The kept events, their times relative to `origin_ns`.
    #[serde(skip)]
    pub events: Vec<Event>,
}

/// Bytes of one encoded event.
const EVENT_BYTES: usize = 1 + 1 + 4 + 8 + 8 + 8;

/// Code of an event's kind in the encoding: the phase's place in
/// [`Phase::ALL`], then the barrier.
fn what_code(w: What) -> u8 {
    match w {
        What::Phase(p) => Phase::ALL.iter().position(|&q| q == p).unwrap_or(0) as u8,
        What::Barrier => Phase::ALL.len() as u8,
    }
}

/// Encodes `t` for the gather: its header as one JSON line, then every
/// event in fixed-size little-endian fields (a JSON array of a million
/// events would be several times larger).
fn encode(t: &RankTimeline) -> Result<Vec<u8>> {
    let mut out = serde_json::to_vec(t)
        .map_err(|e| Error::runtime(format!("cannot encode the timeline: {e}")))?;
    out.push(b'\n');
    out.reserve(t.events.len() * EVENT_BYTES);
    for e in &t.events {
        out.push(what_code(e.what));
        out.push(e.part as u8);
        out.extend_from_slice(&e.track.to_le_bytes());
        out.extend_from_slice(&e.iteration.to_le_bytes());
        out.extend_from_slice(&e.start_ns.to_le_bytes());
        out.extend_from_slice(&e.dur_ns.to_le_bytes());
    }
    Ok(out)
}

/// Decodes what [`encode`] made.
fn decode(bytes: &[u8]) -> Result<RankTimeline> {
    let bad = |why: &str| Error::runtime(format!("bad timeline from a rank: {why}"));
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("no header"))?;
    let mut t: RankTimeline =
        serde_json::from_slice(&bytes[..nl]).map_err(|e| bad(&e.to_string()))?;
    let body = &bytes[nl + 1..];
    if !body.len().is_multiple_of(EVENT_BYTES) {
        return Err(bad("a partial event"));
    }
    let u64_at =
        |c: &[u8], at: usize| u64::from_le_bytes(c[at..at + 8].try_into().expect("8 bytes"));
    for c in body.chunks_exact(EVENT_BYTES) {
        let what = match c[0] as usize {
            i if i < Phase::ALL.len() => What::Phase(Phase::ALL[i]),
            _ => What::Barrier,
        };
        let part = match c[1] {
            0 => Part::Setup,
            1 => Part::Rehearsal,
            _ => Part::Timed,
        };
        t.events.push(Event {
            what,
            part,
            track: u32::from_le_bytes(c[2..6].try_into().expect("4 bytes")),
            iteration: u64_at(c, 6),
            start_ns: u64_at(c, 14),
            dur_ns: u64_at(c, 22),
        });
    }
    Ok(t)
}

/// Records a barrier on this thread's timeline.
fn recorded_barrier(comm: &dyn Comm) {
    let start = Instant::now();
    comm.barrier();
    timeline::record(What::Barrier, start, Instant::now());
}

/// A trace being recorded.
pub struct Session {
    path: PathBuf,
    origin_ns: u64,
    offsets: Vec<clock::Offset>,
}

impl Session {
    /// Starts recording when `args` ask for a trace (collective): the
    /// clock offsets, then a recorded barrier.
    pub fn start(args: &TraceArgs, comm: &dyn Comm) -> Option<Session> {
        let path = args.trace.clone()?;
        comm.barrier();
        let offsets = clock::estimate(comm);
        let origin = Instant::now();
        let origin_ns = timeline::monotonic_ns();
        timeline::install(Recorder::new(origin, args.trace_keep));
        recorded_barrier(comm);
        Some(Session {
            path,
            origin_ns,
            offsets,
        })
    }

    /// Stops recording after a recorded closing barrier, gathers every
    /// rank's timeline and, on rank 0, writes the merged trace with
    /// `about` (the run's description) in it. Collective. Returns the
    /// number of events written (0 on other ranks).
    pub fn finish(self, comm: &dyn Comm, about: serde_json::Value) -> Result<usize> {
        timeline::mark(Part::Setup, 0);
        recorded_barrier(comm);
        let rec =
            timeline::take().ok_or_else(|| Error::runtime("the timeline recorder went missing"))?;
        let mine = RankTimeline {
            rank: comm.rank(),
            host: comm.host(),
            origin_ns: self.origin_ns,
            keep: rec.keep(),
            dropped: rec.dropped(),
            events: rec.events(),
        };
        let Some(all) = comm.gather(&encode(&mine)?) else {
            return Ok(0);
        };
        drop(mine);
        let ranks = all.iter().map(|b| decode(b)).collect::<Result<Vec<_>>>()?;
        let text = chrome::render(&ranks, &self.offsets, about)
            .map_err(|e| Error::runtime(format!("cannot encode the trace: {e}")))?;
        std::fs::write(&self.path, text).map_err(|e| {
            Error::runtime(format!(
                "cannot write the trace {}: {e}",
                self.path.display()
            ))
        })?;
        Ok(ranks.iter().map(|r| r.events.len()).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timelines_survive_the_gather_encoding() {
        let t = RankTimeline {
            rank: 3,
            host: "node7".into(),
            origin_ns: 123_456_789,
            keep: 5,
            dropped: Dropped {
                events: 4,
                iterations: Some((6, 9)),
            },
            events: vec![
                Event {
                    what: What::Phase(Phase::Unpack),
                    part: Part::Timed,
                    iteration: 12,
                    track: 1,
                    start_ns: 99,
                    dur_ns: 7,
                },
                Event {
                    what: What::Barrier,
                    part: Part::Setup,
                    iteration: 0,
                    track: 2,
                    start_ns: u64::MAX - 1,
                    dur_ns: 0,
                },
            ],
        };
        assert_eq!(decode(&encode(&t).unwrap()).unwrap(), t);
        assert!(decode(&encode(&t).unwrap()[..40]).is_err());
    }

    #[test]
    fn an_unwritable_trace_is_a_usage_error() {
        let dir = std::env::temp_dir();
        let err = check_writable(&dir).unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err}");
        let missing = dir.join("no-such-dir-himeno-trace/t.json");
        assert!(check_writable(&missing).is_err());
        let fresh = dir.join(format!("himeno-trace-probe-{}.json", std::process::id()));
        check_writable(&fresh).unwrap();
        assert!(!fresh.exists(), "the probe left the file behind");
    }
}
