//! `--trace FILE`: every rank records a timeline of its phases (see
//! `crate::timeline`), and rank 0 gathers them after the run and writes one
//! merged Chrome Trace Event file (see [`chrome`]) on one epoch, aligned
//! from clock offsets exchanged at the start (see [`clock`]); [`rank`] is
//! the form a rank's timeline travels in.
//!
//! A session starts before the solver (a barrier, the offsets, a barrier
//! recorded on every rank) and finishes after it (a closing barrier
//! recorded, the gather, rank 0 writes); both are collective.

pub mod chrome;
pub mod clock;
pub mod rank;

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::timeline::{self, Part, Recorder, What};
use rank::RankTimeline;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Default `--trace-keep`: runs up to twice this many iterations are
/// traced whole.
pub const DEFAULT_KEEP: u64 = 500;

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
    /// Starts recording a trace for `path`, keeping `keep` timed
    /// iterations at each end (collective): the clock offsets, then a
    /// recorded barrier.
    pub fn start(path: &Path, keep: u64, comm: &dyn Comm) -> Session {
        let path = path.to_path_buf();
        comm.barrier();
        let offsets = clock::estimate(comm);
        let origin = Instant::now();
        let origin_ns = timeline::monotonic_ns();
        timeline::install(Recorder::new(origin, keep));
        recorded_barrier(comm);
        Session {
            path,
            origin_ns,
            offsets,
        }
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
        let Some(all) = comm.gather(&rank::encode(&mine)?) else {
            return Ok(0);
        };
        drop(mine);
        let ranks = all
            .iter()
            .map(|b| rank::decode(b))
            .collect::<Result<Vec<_>>>()?;
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
