//! `--trace FILE`: every rank records a timeline of its phases (see
//! `crate::timeline`), and rank 0 gathers them after the run and writes one
//! merged Chrome Trace Event file (see [`chrome`]) on one epoch, aligned
//! from clock offsets exchanged at the start (see [`clock`]); [`rank`] is
//! the form a rank's timeline travels in.
//!
//! A session starts before the solver (a barrier, the offsets, a barrier
//! recorded on every rank) and finishes after it (a closing barrier
//! recorded, the ranks' headers gathered, then each rank's events sent to
//! rank 0 in turn, which writes them as they come, [`file`]); both are
//! collective. What a rank records is bounded ([`Bound::of`]) and counted
//! by the memory preflight ([`Bound::footprint`]) before the run.

pub mod chrome;
pub mod clock;
pub mod file;
pub mod rank;

use crate::comm::Comm;
use crate::config::{BackendKind, RunConfig, RunLength};
use crate::error::{Error, Result};
use crate::files::{self, Written};
use crate::machine::memory::Footprint;
use crate::signals::StopFlag;
use crate::timeline::{self, Bound, CHUNK_EVENTS, Event, Part, Recorder, What};
use rank::RankHeader;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default `--trace-keep`: runs up to twice this many iterations are
/// traced whole.
pub const DEFAULT_KEEP: u64 = 500;

/// Checks, before any work, that the trace file can be written (rank 0
/// writes it under a new name and renames it into place, [`file`]): a
/// regular file or nothing at the name, and a folder that takes a new
/// file ([`files::check_output`]). Nothing is left behind.
pub fn check_writable(path: &Path) -> Result<()> {
    files::check_output(path, Written::Replaced).map_err(|e| {
        Error::usage(format!(
            "cannot write the trace {}: {e}; choose a writable --trace FILE",
            path.display()
        ))
    })
}

/// Records a barrier on this thread's timeline.
fn recorded_barrier(comm: &dyn Comm) {
    let start = Instant::now();
    comm.barrier();
    timeline::record(What::Barrier, start, Instant::now());
}

/// Events a session records outside the iterations: its barriers, with
/// room to spare.
const SETUP_EVENTS: usize = 8;

/// Seconds the gather and write of a trace are expected to take at most
/// beyond their events' share (the collectives, opening and syncing the
/// file), for the stop watchdog.
const WRITE_BASE_S: f64 = 5.0;

/// Seconds per event written that the stop watchdog allows: about 150
/// bytes of JSON each, so a disk writing 7.5 MB/s still finishes.
const WRITE_PER_EVENT_S: f64 = 20e-6;

/// The most events a rank records in one round of `depth` sweeps: two
/// compute laps and the allreduce; five per halo step (a pack and its
/// transfer, the wait, an unpack and its transfer), one step per
/// dimension; one span per sweep thread; and on a GPU rank, up to two
/// sweep spans per sweep and four per halo step on its streams.
pub fn events_per_round(threads: usize, gpu: bool, depth: usize) -> usize {
    let host = 3 + 5 * 3 + threads;
    if gpu { host + 2 * depth + 4 * 3 } else { host }
}

impl Bound {
    /// What a rank records at most in the run `cfg` keeping `keep`
    /// iterations at each end, with rounds of up to `depth` sweeps: every
    /// round of the rehearsal, then of the first and last `keep` timed
    /// iterations (of all of them for a shorter run), at
    /// [`events_per_round`] each.
    pub fn of(cfg: &RunConfig, keep: u64, depth: usize) -> Bound {
        let per = events_per_round(cfg.threads, cfg.backend == BackendKind::Gpu, depth) as u128;
        let keep = keep.max(1) as u128;
        let timed = match cfg.length {
            RunLength::Iterations(n) => n as u128,
            RunLength::Seconds(_) => 2 * keep,
        };
        let head_rounds = cfg.warmup as u128 + timed.min(keep);
        let tail_rounds = timed.saturating_sub(keep).min(keep);
        let events = |rounds: u128| usize::try_from(rounds * per).unwrap_or(usize::MAX);
        Bound {
            head: events(head_rounds).saturating_add(SETUP_EVENTS),
            tail: events(tail_rounds),
        }
    }

    /// The host memory a rank's recorder of this bound and its part of the
    /// transfer take: the head in its chunks and the ring, and on rank 0
    /// (`root`) what the transfer holds at once. The ranks send in turn, one
    /// message each time rank 0 asks, so the job has one message in flight
    /// (the sender's, and rank 0's copy of it), never one per rank: it is
    /// counted once, on rank 0, with the chunk of events it decodes and the
    /// file's buffer. (A sender's own message, at most 4 MiB while its turn
    /// lasts, is within its process's margin.)
    pub fn footprint(&self, root: bool) -> Footprint {
        let full = self.head / CHUNK_EVENTS;
        let part = self.head % CHUNK_EVENTS;
        let head =
            Footprint::vec::<Event>(CHUNK_EVENTS).times(full) + Footprint::vec::<Event>(part);
        let recorder = head + Footprint::vec::<Event>(self.tail);
        if !root {
            return recorder;
        }
        let most = self.head.saturating_add(self.tail).min(rank::CHUNK_EVENTS);
        recorder
            + Footprint::vec::<u8>(most * rank::EVENT_BYTES).times(2)
            + Footprint::vec::<Event>(most).times(2)
            + Footprint::vec::<u8>(WRITE_BUFFER)
    }
}

/// Bytes of the trace file's write buffer.
const WRITE_BUFFER: usize = 1 << 20;

/// A trace being recorded.
pub struct Session {
    path: PathBuf,
    origin_ns: u64,
    offsets: Vec<clock::Offset>,
}

/// The messages of rank `i`'s events, `n` of them: their sizes in bytes.
fn chunks(n: u64) -> impl Iterator<Item = usize> {
    let per = rank::CHUNK_EVENTS as u64;
    (0..n.div_ceil(per)).map(move |c| ((n - c * per).min(per)) as usize * rank::EVENT_BYTES)
}

impl Session {
    /// Starts recording a trace for `path`, keeping `keep` timed
    /// iterations at each end and at most `bound` events (collective): the
    /// clock offsets, then a recorded barrier.
    pub fn start(path: &Path, keep: u64, bound: Bound, comm: &dyn Comm) -> Session {
        let path = path.to_path_buf();
        comm.barrier();
        let offsets = clock::estimate(comm);
        let origin = Instant::now();
        let origin_ns = timeline::monotonic_ns();
        timeline::install(Recorder::new(origin, keep, bound));
        recorded_barrier(comm);
        Session {
            path,
            origin_ns,
            offsets,
        }
    }

    /// Stops recording after a recorded closing barrier, gathers every
    /// rank's timeline and, on rank 0, writes the merged trace with
    /// `about` (the run's description) in it, rank by rank as the events
    /// arrive. Collective. The stop watchdog is told how long this should
    /// take before it starts, so that a stopped run's grace covers it.
    ///
    /// A trace that cannot be written costs only the trace: rank 0 still
    /// takes every rank's events (so that none waits for ever), leaves any
    /// earlier file at `path` as it was, and returns the failure as a
    /// warning for the run's record. `Ok(None)` on the other ranks.
    pub fn finish(
        self,
        comm: &dyn Comm,
        about: serde_json::Value,
        stop: &StopFlag,
    ) -> Result<Option<String>> {
        timeline::mark(Part::Setup, 0);
        recorded_barrier(comm);
        let rec =
            timeline::take().ok_or_else(|| Error::runtime("the timeline recorder went missing"))?;
        let mine = RankHeader {
            rank: comm.rank(),
            host: comm.host(),
            origin_ns: self.origin_ns,
            keep: rec.keep(),
            dropped: rec.dropped(),
            events: rec.len() as u64,
        };
        let headers = comm.gather(&rank::encode_header(&mine)?);
        let headers = headers
            .map(|all| {
                all.iter()
                    .map(|b| rank::decode_header(b))
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;
        let total = headers
            .as_ref()
            .map_or(0, |h| h.iter().map(|r| r.events).sum::<u64>());
        let expected = WRITE_BASE_S + comm.broadcast(total) as f64 * WRITE_PER_EVENT_S;
        stop.busy_for(Duration::try_from_secs_f64(expected).unwrap_or(Duration::MAX));
        let outcome = match headers {
            Some(headers) => self.write(comm, headers, &rec, about),
            None => {
                send_events(comm, &rec);
                Ok(None)
            }
        };
        // The grace counts from here again.
        stop.busy_for(Duration::ZERO);
        outcome
    }

    /// Rank 0's part of [`Session::finish`]: writes the trace to a fresh
    /// file beside `path` and renames it into place, taking every rank's
    /// events whether or not the writing goes well. `Ok(Some(warning))`
    /// when the file could not be written.
    fn write(
        &self,
        comm: &dyn Comm,
        headers: Vec<RankHeader>,
        own: &Recorder,
        about: serde_json::Value,
    ) -> Result<Option<String>> {
        let counts: Vec<u64> = headers.iter().map(|h| h.events).collect();
        let staged = file::Staged::create(&self.path);
        // The first failure of the file; the events are still taken.
        let mut failed: Option<std::io::Error> = None;
        let mut writer = match staged.as_ref().map(|f| f.file().try_clone()) {
            Ok(Ok(f)) => {
                let out = BufWriter::with_capacity(WRITE_BUFFER, f);
                chrome::Writer::begin(out, headers, self.offsets.clone())
                    .map_err(|e| failed = Some(e))
                    .ok()
            }
            Ok(Err(e)) => {
                failed = Some(e);
                None
            }
            Err(_) => None,
        };
        let mut step =
            |writer: &mut Option<chrome::Writer<_>>,
             f: &mut dyn FnMut(&mut chrome::Writer<_>) -> std::io::Result<()>| {
                if let Some(w) = writer.as_mut()
                    && let Err(e) = f(w)
                {
                    failed = Some(e);
                    *writer = None;
                }
            };
        let mut bytes = Vec::new();
        for (i, &n) in counts.iter().enumerate() {
            step(&mut writer, &mut |w| w.begin_rank(i));
            if i == 0 {
                in_chunks(own, |events| {
                    step(&mut writer, &mut |w| w.events(i, events))
                });
            } else {
                let mut events = Vec::new();
                for size in chunks(n) {
                    // The rank sends each message when asked, so that one
                    // at most is in flight.
                    comm.send(i, &[1]);
                    bytes.resize(size, 0);
                    comm.recv(i, &mut bytes);
                    rank::decode_events(&bytes, &mut events)?;
                    step(&mut writer, &mut |w| w.events(i, &events));
                }
            }
            step(&mut writer, &mut |w| w.end_rank(i));
        }
        let finished = match writer {
            Some(w) => w
                .finish(about)
                .and_then(|out| out.into_inner().map_err(|e| e.into_error()).map(drop)),
            None => Err(failed.unwrap_or_else(|| std::io::Error::other("not opened"))),
        };
        let written = staged.and_then(|s| finished.and_then(|()| s.commit()));
        Ok(match written {
            Ok(()) => {
                tracing::info!(events = counts.iter().sum::<u64>(), "trace written");
                None
            }
            Err(e) => Some(format!(
                "the trace {} was not written ({e}); any earlier file there is as it was",
                self.path.display()
            )),
        })
    }
}

/// Calls `f` on the events of `rec` in order, at most
/// [`rank::CHUNK_EVENTS`] at a time, from one buffer.
fn in_chunks(rec: &Recorder, mut f: impl FnMut(&[Event])) {
    let mut chunk = Vec::with_capacity(rec.len().min(rank::CHUNK_EVENTS));
    for e in rec.events() {
        chunk.push(*e);
        if chunk.len() == rank::CHUNK_EVENTS {
            f(&chunk);
            chunk.clear();
        }
    }
    if !chunk.is_empty() {
        f(&chunk);
    }
}

/// Another rank's part of [`Session::finish`]: sends its events to rank 0
/// one message at a time, each encoded only when rank 0 asks for it (so
/// that the ranks waiting their turn hold nothing beyond their recorder).
fn send_events(comm: &dyn Comm, rec: &Recorder) {
    let mut events = rec.events();
    let mut go = [0u8; 1];
    for size in chunks(rec.len() as u64) {
        comm.recv(0, &mut go);
        let mut bytes = Vec::with_capacity(size);
        rank::encode_events(events.by_ref().take(size / rank::EVENT_BYTES), &mut bytes);
        comm.send(0, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
