//! Checkpoints and restart, as the checkpoint/restart tools of this field
//! do them (SCR, VeloC, himeno-cr): one plain file per rank and checkpoint
//! (N-N, nothing shared to lock), each synced and checksummed; a manifest
//! that rank 0 writes last, once every rank's file is on the disk, as the
//! commit marker; a restart only on the same grid, process grid, rank
//! count, temporal depth and version; the last K committed checkpoints
//! kept.
//!
//! A checkpoint holds what the loop carries from block to block: the owned
//! points of `p`, the iteration count and the last gosa (the answer when
//! nothing is left to run is never asked for: a restart needs work left).
//! The coefficient arrays are the initial state and are re-created. It is
//! taken at the end of a block, so that a restart's blocks fall where the
//! uninterrupted run's did, and the restart's final `p` and gosa are
//! bitwise the uninterrupted run's. The rehearsal (`--warmup`) runs from
//! the initial state as always, before the checkpoint is loaded.
//!
//! - [`manifest`]: the manifest, the segments, and the restart's origin;
//! - [`rankfile`]: one rank's file;
//! - [`store`]: the folder of checkpoints.

pub mod manifest;
pub mod rankfile;
pub mod store;

pub use manifest::{RestartedFrom, Segment};

use crate::backend::Backend;
use crate::comm::{self, Comm};
use crate::config::{CheckpointConfig, Restart, RunConfig, RunLength};
use crate::error::{Error, Result, print_line};
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::timing::{Lap, PhaseTimes};
use manifest::{COEFFICIENTS, FORMAT, Identity, MANIFEST, Manifest, RankFile};
use std::path::{Path, PathBuf};

/// The version checkpoints are written by and restarted with.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The file name of `rank`'s part of a checkpoint.
fn rank_file_name(rank: usize) -> String {
    format!("rank-{rank:06}.bin")
}

/// The state a restart takes up, read and checked before the run.
struct Resume {
    from: RestartedFrom,
    gosa: f64,
    segments: Vec<Segment>,
    /// This rank's file and the checksum the manifest holds for it.
    file: PathBuf,
    crc32: u32,
    /// This rank's owned points of `p`, once read.
    values: Vec<f32>,
}

/// What the solver's checkpoints need, for one rank of one run.
pub struct Checkpointer {
    settings: CheckpointConfig,
    identity: Identity,
    planned: u64,
    rank: usize,
    block: Block,
    resume: Option<Resume>,
    /// Segments before this job's (from the restart's manifest).
    earlier: Vec<Segment>,
    written: u64,
    last: Option<PathBuf>,
    spent_s: f64,
}

/// What the record says about the checkpoints a run wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Written {
    /// The checkpoint folder.
    pub dir: String,
    /// Checkpoints this job committed.
    pub written: u64,
    /// The manifest of the last one, if any.
    pub last: Option<String>,
    /// Seconds spent writing them (slowest rank), not counted in the
    /// timed loop.
    pub seconds: f64,
}

impl Checkpointer {
    /// Prepares the checkpoints of the run `cfg` on this rank's `block`,
    /// collectively and before the backend allocates: finds the checkpoint
    /// to restart from, checks that it is of this run and that it is whole
    /// (every rank reads and checks its own file), and refuses a folder
    /// whose committed checkpoints this run would overwrite. Either every
    /// rank goes on or every rank stops with exit 2 and one line from rank
    /// 0. `None` when the run has no checkpoint folder.
    pub fn prepare(
        cfg: &RunConfig,
        block: &Block,
        comm: &dyn Comm,
    ) -> Result<Option<Checkpointer>> {
        let Some(settings) = cfg.checkpoint.clone() else {
            return Ok(None);
        };
        let RunLength::Iterations(planned) = cfg.length else {
            return Err(Error::usage("checkpoints need a fixed --iterations count"));
        };
        let identity = Identity {
            grid: cfg.grid().n,
            procs: cfg.procs().p,
            ranks: comm.size(),
            temporal: cfg.temporal,
            version: VERSION.to_string(),
        };
        let local = find_resume(&settings, &identity, planned, comm.rank());
        let (resume, notes) = comm::agree(comm, local, |(r, _)| {
            vec![(
                "restart",
                format!("{:?}", r.as_ref().map(|r| (&r.from, r.gosa.to_bits()))),
            )]
        })?;
        // Every rank reads and checks its own file; one that fails stops
        // them all, and rank 0 names it.
        let mut resume = resume;
        let read = match resume.as_mut() {
            Some(r) => rankfile::read(&r.file, comm.rank(), r.from.iteration, block, r.crc32)
                .map(|v| r.values = v),
            None => Ok(()),
        };
        together(comm, read)?;
        if comm.rank() == 0 {
            for n in notes {
                print_line(&format!("himeno: {n}"));
            }
        }
        Ok(Some(Checkpointer {
            earlier: resume
                .as_ref()
                .map(|r| r.segments.clone())
                .unwrap_or_default(),
            settings,
            identity,
            planned,
            rank: comm.rank(),
            block: *block,
            resume,
            written: 0,
            last: None,
            spent_s: 0.0,
        }))
    }

    /// Where the restart took up the work, if it is one.
    pub fn restarted_from(&self) -> Option<RestartedFrom> {
        self.resume.as_ref().map(|r| r.from.clone())
    }

    /// Loads the checkpoint into the backend's `p` (after the reset to the
    /// initial state, which re-created the coefficients), fills its ghost
    /// layers with one exchange through `halo`, and returns the iterations
    /// done and the last gosa; `(0, NaN)` for a run from the initial state.
    /// Collective. Nothing here is timed.
    pub fn restore(
        &mut self,
        backend: &mut dyn Backend,
        halo: &mut Halo,
        comm: &dyn Comm,
    ) -> Result<(u64, f64)> {
        let Some(resume) = self.resume.as_mut() else {
            return Ok((0, f64::NAN));
        };
        let mut field = backend.field()?;
        rankfile::place(&resume.values, &self.block, &mut field);
        resume.values = Vec::new();
        backend.load_next(&field)?;
        halo.exchange(backend, comm, &mut PhaseTimes::default())?;
        backend.swap();
        tracing::info!(
            iteration = resume.from.iteration,
            "restarted from a checkpoint"
        );
        Ok((resume.from.iteration, resume.gosa))
    }

    /// Whether a checkpoint is due after `done` iterations: there is work
    /// left, and the interval has passed or a stop was decided.
    pub fn due(&self, done: u64, stopping: bool) -> bool {
        done < self.planned
            && (stopping || self.settings.every.is_some_and(|n| done.is_multiple_of(n)))
    }

    /// Writes the checkpoint after `done` iterations whose last gosa was
    /// `gosa`, this job's segment (from `from`) having taken `loop_s` so
    /// far on this rank: every rank writes and syncs its file, rank 0 then
    /// commits the manifest and removes the old checkpoints, and a barrier
    /// ends it, so that the time it took falls on no rank's timed phases.
    /// Returns the seconds it took this rank. Collective; a rank that
    /// fails ends the job (see `crate::comm::with_comm`).
    pub fn save(
        &mut self,
        done: u64,
        gosa: f64,
        from: u64,
        loop_s: f64,
        backend: &mut dyn Backend,
        comm: &dyn Comm,
    ) -> Result<f64> {
        let mut clock = Lap::start();
        let wall_s = comm.max(loop_s);
        let folder = self.settings.dir.join(store::folder_name(done));
        if self.rank == 0 {
            // A folder of this iteration without a manifest is what an
            // interrupted write left; a committed one was refused before
            // the run (see `find_resume`).
            if folder.exists() {
                std::fs::remove_dir_all(&folder).map_err(|e| {
                    Error::runtime(format!(
                        "cannot replace the uncommitted checkpoint {}: {e}",
                        folder.display()
                    ))
                })?;
            }
            std::fs::create_dir_all(&folder).map_err(|e| {
                Error::runtime(format!(
                    "cannot create the checkpoint folder {}: {e}",
                    folder.display()
                ))
            })?;
            store::sync_dir(&self.settings.dir)?;
        }
        comm.barrier();
        let field = backend.field()?;
        let name = rank_file_name(self.rank);
        let crc = rankfile::write(&folder.join(&name), self.rank, done, &self.block, &field)?;
        drop(field);
        let bytes = rankfile::file_bytes(&self.block);
        let mine = format!("{crc}\t{bytes}");
        if let Some(all) = comm.gather(mine.as_bytes()) {
            let files = all
                .iter()
                .enumerate()
                .map(|(rank, b)| {
                    let text = String::from_utf8_lossy(b);
                    let (crc, bytes) = text.split_once('\t').unwrap_or_default();
                    Ok(RankFile {
                        rank,
                        file: rank_file_name(rank),
                        bytes: bytes.parse().map_err(|_| bad_part(rank))?,
                        crc32: crc.parse().map_err(|_| bad_part(rank))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let mut segments = self.earlier.clone();
            segments.push(Segment {
                from,
                to: done,
                wall_s,
            });
            Manifest {
                format: FORMAT.to_string(),
                version: self.identity.version.clone(),
                grid: self.identity.grid,
                procs: self.identity.procs,
                ranks: self.identity.ranks,
                temporal: self.identity.temporal,
                iteration: done,
                planned: self.planned,
                gosa,
                coefficients: COEFFICIENTS.to_string(),
                segments,
                files,
            }
            .commit(&folder)?;
            for old in store::prune(&self.settings.dir, self.settings.keep)? {
                tracing::info!(removed = %old.display(), "old checkpoint removed");
            }
        }
        comm.barrier();
        self.written += 1;
        self.last = Some(folder.join(MANIFEST));
        let spent = clock.lap();
        self.spent_s += spent;
        tracing::info!(iteration = done, seconds = spent, "checkpoint committed");
        Ok(spent)
    }

    /// The segments timed before this job's, oldest first.
    pub fn earlier_segments(&self) -> &[Segment] {
        &self.earlier
    }

    /// What this job wrote, with the slowest rank's seconds `spent_s`.
    pub fn written(&self, spent_s: f64) -> Written {
        Written {
            dir: self.settings.dir.display().to_string(),
            written: self.written,
            last: self.last.as_ref().map(|p| p.display().to_string()),
            seconds: spent_s,
        }
    }

    /// Seconds this rank spent writing checkpoints.
    pub fn spent_s(&self) -> f64 {
        self.spent_s
    }
}

/// Goes on when every rank's `local` is fine; otherwise every rank stops
/// with a usage error whose message, on rank 0, names the first rank that
/// failed and why. Collective.
fn together(comm: &dyn Comm, local: Result<()>) -> Result<()> {
    // Never an empty part: MPI refuses a gather of nothing at all.
    let mine = match &local {
        Ok(()) => "O".to_string(),
        Err(e) => format!("E{}", e.message()),
    };
    let verdict = match comm.gather(mine.as_bytes()) {
        Some(all) => {
            let failed: Vec<(usize, String)> = all
                .iter()
                .enumerate()
                .filter(|(_, b)| !b.starts_with(b"O"))
                .map(|(r, b)| {
                    (
                        r,
                        String::from_utf8_lossy(b.get(1..).unwrap_or_default()).into_owned(),
                    )
                })
                .collect();
            match failed.first() {
                Some((_, why)) if all.len() == 1 => Err(Error::usage(why.clone())),
                Some((r, why)) => Err(Error::usage(format!(
                    "rank {r}: {why}{}",
                    match failed.len() {
                        1 => String::new(),
                        n => format!(" ({} other rank(s) failed too)", n - 1),
                    }
                ))),
                None => Ok(()),
            }
        }
        None => Ok(()),
    };
    if comm.broadcast(u64::from(verdict.is_err())) != 0 {
        return Err(verdict.err().unwrap_or_else(|| {
            Error::usage("a rank's checkpoint file was refused (see rank 0's message)")
        }));
    }
    local
}

/// The error for a rank whose part of the manifest did not arrive whole.
fn bad_part(rank: usize) -> Error {
    Error::runtime(format!(
        "rank {rank}'s checksum for the manifest did not arrive whole"
    ))
}

/// This rank's part of [`Checkpointer::prepare`]: the checkpoint to take
/// up (its manifest checked, this rank's file named but not yet read) and
/// the notes rank 0 tells, or why the run is refused.
fn find_resume(
    settings: &CheckpointConfig,
    identity: &Identity,
    planned: u64,
    rank: usize,
) -> Result<(Option<Resume>, Vec<String>)> {
    let dir = &settings.dir;
    let found = store::list(dir)?;
    let newest_committed = found.iter().rev().find(|f| f.committed);
    let mut notes = Vec::new();
    let manifest_path: Option<PathBuf> = match &settings.restart {
        None => None,
        Some(Restart::Latest) => {
            for f in found.iter().filter(|f| !f.committed) {
                if newest_committed.is_none_or(|c| f.iteration > c.iteration) {
                    notes.push(format!(
                        "the checkpoint {} has no manifest (its write was cut short): ignored, {}",
                        f.path.display(),
                        match newest_committed {
                            Some(c) => format!("restarting from {}", c.path.display()),
                            None => "no committed checkpoint is older".to_string(),
                        }
                    ));
                }
            }
            match newest_committed {
                Some(c) => Some(c.path.join(MANIFEST)),
                None => {
                    notes.push(format!(
                        "--restart latest: no committed checkpoint in {}, starting from the \
                         initial state",
                        dir.display()
                    ));
                    None
                }
            }
        }
        Some(Restart::Manifest(p)) => {
            let path = if p.is_dir() {
                p.join(MANIFEST)
            } else {
                p.clone()
            };
            // A checkpoint's folder without its manifest: a write cut short.
            let folder = path.parent().filter(|d| {
                d.is_dir()
                    && d.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("ckpt-"))
            });
            if let Some(folder) = folder
                && !path.exists()
            {
                return Err(Error::usage(format!(
                    "the checkpoint {} has no manifest: it was never committed (its write \
                     was cut short); restart from another one (--restart latest takes the \
                     newest committed)",
                    folder.display()
                )));
            }
            Some(path)
        }
    };
    let start = match &manifest_path {
        Some(path) => {
            let m = Manifest::read(path)?;
            m.check_fits(identity, path)?;
            if m.iteration >= planned {
                return Err(Error::usage(format!(
                    "the checkpoint {} is at iteration {}, and this run plans {planned}: \
                     nothing is left to run (give a larger --iterations)",
                    path.display(),
                    m.iteration
                )));
            }
            let folder = path.parent().unwrap_or(Path::new("."));
            let file = &m.files[rank];
            Some(Resume {
                file: folder.join(&file.file),
                crc32: file.crc32,
                from: RestartedFrom {
                    iteration: m.iteration,
                    manifest: path.display().to_string(),
                },
                gosa: m.gosa,
                segments: m.segments,
                values: Vec::new(),
            })
        }
        None => None,
    };
    // The run writes checkpoints after its start only: one already there
    // would be overwritten.
    let from = start.as_ref().map_or(0, |r| r.from.iteration);
    if let Some(c) = found
        .iter()
        .rev()
        .find(|f| f.committed && f.iteration > from)
    {
        return Err(Error::usage(format!(
            "the checkpoint folder {} holds a committed checkpoint at iteration {} that this \
             run would overwrite: restart from it (--restart latest), or give another \
             --checkpoint-dir",
            dir.display(),
            c.iteration
        )));
    }
    Ok((start, notes))
}
