//! Checkpoints and restart, as the checkpoint/restart tools of this field
//! do them (SCR, VeloC, himeno-cr): one plain file per rank and checkpoint
//! (N-N, nothing shared to lock), each synced and checksummed; a manifest
//! that rank 0 writes last, once every rank's file is on the disk, as the
//! commit marker; a restart only on the same grid, process grid, rank
//! count, temporal depth and build; the last K committed checkpoints of
//! the same problem kept. One run owns the folder for its lifetime (a
//! lock, see [`lock`]), and never removes what it did not write.
//!
//! The checkpoints are a side job: one that cannot be written (a full
//! disk) or an old one that cannot be removed is a warning in the record,
//! and the run goes on from its last good checkpoint.
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
//! - [`lock`]: the folder's owner;
//! - [`manifest`]: the manifest, the segments, and the restart's origin;
//! - [`rankfile`]: one rank's file;
//! - [`store`]: the folder of checkpoints.

pub mod lock;
pub mod manifest;
pub mod rankfile;
pub mod store;

pub use manifest::{RestartedFrom, Segment};

use crate::backend::Backend;
use crate::comm::{self, Comm};
use crate::config::{CheckpointConfig, Restart, RunConfig, RunLength};
use crate::error::{Error, Result, print_line};
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::signals::StopFlag;
use crate::timing::{Lap, PhaseTimes};
use crate::verify::{self, Answer};
use manifest::{COEFFICIENTS, FORMAT, Identity, MANIFEST, Manifest, RankFile};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The version checkpoints are written by and restarted with.
pub const VERSION: &str = crate::build::VERSION;

/// The failed side writes (checkpoints, removals) told one by one in the
/// record; more are counted on one last line.
const MAX_WARNINGS: usize = 3;

/// The slowest write speed a checkpoint's time is estimated with, bytes
/// per second, before one was timed (for the stop watchdog).
const SLOW_WRITE_BYTES_PER_S: f64 = 10e6;

/// Seconds a checkpoint is allowed beyond its estimate (a sync of the
/// folders, a slow metadata server).
const SAVE_SLACK_S: f64 = 10.0;

/// The state a restart takes up, read and checked before the run.
struct Resume {
    from: RestartedFrom,
    gosa: f64,
    /// The checkpoint's fingerprint of `p` as its manifest holds it (empty
    /// when the manifest has none).
    p_fingerprint: String,
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
    /// Rank 0's hold on the folder (see [`lock`]); `None` on other ranks.
    _lock: Option<lock::FolderLock>,
    /// Who holds the folder, as the manifests record it.
    owner: String,
    /// The checkpointed state a restart took up, as this run recomputed it
    /// from the rank files (rank 0's; `None` elsewhere or without a
    /// restart).
    resumed: Option<Answer>,
    /// The side writes that failed (rank 0's), first ones only.
    warnings: Vec<String>,
    /// How many side writes failed in all.
    failures: usize,
    /// The stop flag, whose watchdog is told how long a checkpoint takes.
    stop: StopFlag,
    /// Seconds the last checkpoint took this rank.
    last_save_s: Option<f64>,
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
    ///
    /// Before anything is read, rank 0 takes the folder's lock (another
    /// run holding it refuses this one, naming it), and every rank checks
    /// that it sees that lock (a folder local to each node is refused).
    /// `stop` is told how long each checkpoint should take.
    pub fn prepare(
        cfg: &RunConfig,
        block: &Block,
        comm: &dyn Comm,
        stop: &StopFlag,
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
            commit: crate::build::GIT_COMMIT.to_string(),
            features: crate::build::features(),
        };
        let (folder_lock, owner) = own_folder(&settings.dir, comm)?;
        if let Some(why) = folder_lock.as_ref().and_then(|l| l.unenforced.as_ref()) {
            print_line(&format!("himeno: {why}"));
        }
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
        let grid = cfg.grid();
        let resumed = match &resume {
            Some(r) => resumed_answer(r, &grid, block, comm)?,
            None => None,
        };
        if comm.rank() == 0 {
            for n in notes {
                print_line(&format!("himeno: {n}"));
            }
        }
        Ok(Some(Checkpointer {
            _lock: folder_lock,
            owner,
            resumed,
            warnings: Vec::new(),
            failures: 0,
            stop: stop.clone(),
            last_save_s: None,
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

    /// The iteration of the checkpoint a restart took up and the answer
    /// its state gives (its gosa, and the fingerprint of `p` recomputed
    /// from the rank files), for the verdict to check (rank 0's; `None`
    /// elsewhere and without a restart).
    pub fn resumed(&self) -> Option<(u64, Answer)> {
        let from = self.resume.as_ref()?.from.iteration;
        self.resumed.map(|a| (from, a))
    }

    /// The side writes that failed, one line each (rank 0's; empty
    /// elsewhere): the record's warnings.
    pub fn warnings(&self) -> Vec<String> {
        let mut all = self.warnings.clone();
        if self.failures > all.len() {
            all.push(format!(
                "{} more checkpoint write(s) or removal(s) failed",
                self.failures - all.len()
            ));
        }
        all
    }

    /// Keeps `why` among the warnings (rank 0).
    fn warn(&mut self, why: String) {
        tracing::warn!("{why}");
        self.failures += 1;
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(why);
        }
    }

    /// How long a checkpoint of this rank should take at most: three times
    /// the last one, or its bytes at a slow disk's speed before one was
    /// timed, and some slack.
    fn expected_save(&self) -> Duration {
        let bytes = rankfile::file_bytes(&self.block) as f64;
        let s = match self.last_save_s {
            Some(s) => 3.0 * s,
            None => bytes / SLOW_WRITE_BYTES_PER_S,
        };
        Duration::try_from_secs_f64(s + SAVE_SLACK_S).unwrap_or(Duration::MAX)
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
    /// Returns the seconds it took this rank. Collective.
    ///
    /// A checkpoint that cannot be written on some rank (a full disk) is
    /// not committed: rank 0 removes what was written of it and keeps a
    /// warning, and the run goes on, its last committed checkpoint still
    /// the one to restart from. An old checkpoint that cannot be removed
    /// is a warning too. Only an error of the backend ends the run. The
    /// stop watchdog is told how long the write should take, so that a
    /// checkpoint written after a stop signal is not cut short.
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
        self.stop.busy_for(self.expected_save());
        let wall_s = comm.max(loop_s);
        let folder = self.settings.dir.join(store::folder_name(done));
        let made = if self.rank == 0 {
            make_folder(&folder, &self.settings.dir).map_err(|e| e.message().to_string())
        } else {
            Ok(())
        };
        let made = comm::decide(comm, "the checkpoint's folder", &made, |mut all| {
            Ok(all.swap_remove(0))
        })?;
        let committed = match made {
            Ok(()) => {
                let segment = Segment {
                    from,
                    to: done,
                    wall_s,
                };
                self.write_and_commit(&folder, gosa, segment, backend, comm)?
            }
            Err(why) => Err(why),
        };
        if self.rank == 0 {
            match &committed {
                Ok(()) => self.prune(),
                Err(why) => {
                    // What was written of it would only fill the disk more.
                    let _ = store::remove_checkpoint(&folder);
                    let last = match &self.last {
                        Some(m) => format!("the last committed is {}", m.display()),
                        None => "this run has committed none".to_string(),
                    };
                    self.warn(format!(
                        "the checkpoint at iteration {done} was not written ({why}); the run \
                         went on, and {last}"
                    ));
                }
            }
        }
        comm.barrier();
        if committed.is_ok() {
            self.written += 1;
            self.last = Some(folder.join(MANIFEST));
        }
        let spent = clock.lap();
        self.last_save_s = Some(spent);
        self.spent_s += spent;
        // The write is over: a stop's grace counts from here.
        self.stop.busy_for(Duration::ZERO);
        tracing::info!(
            iteration = done,
            seconds = spent,
            ok = committed.is_ok(),
            "checkpoint"
        );
        Ok(spent)
    }

    /// Every rank writes its file into `folder`; rank 0 commits the
    /// manifest when all did. Every rank learns whether the checkpoint was
    /// committed, or why not. Collective; the outer error is the
    /// backend's.
    fn write_and_commit(
        &self,
        folder: &Path,
        gosa: f64,
        segment: Segment,
        backend: &mut dyn Backend,
        comm: &dyn Comm,
    ) -> Result<std::result::Result<(), String>> {
        let done = segment.to;
        let grid = Grid {
            n: self.identity.grid,
        };
        let field = backend.field()?;
        let fingerprint = verify::fingerprint(&grid, &self.block, &field);
        let crc = rankfile::write(
            &folder.join(store::rank_file_name(self.rank)),
            self.rank,
            done,
            &self.block,
            &field,
        );
        drop(field);
        let bytes = rankfile::file_bytes(&self.block);
        let mine = crc
            .map(|crc32| Part {
                crc32,
                bytes,
                fingerprint,
            })
            .map_err(|e| e.message().to_string());
        comm::decide(comm, "the checkpoint", &mine, |all| {
            Ok(self.commit(folder, gosa, segment, all))
        })
    }

    /// Rank 0's commit of the checkpoint that ends `segment` from every
    /// rank's part (or why it failed).
    fn commit(
        &self,
        folder: &Path,
        gosa: f64,
        segment: Segment,
        parts: Vec<std::result::Result<Part, String>>,
    ) -> std::result::Result<(), String> {
        if let Some(why) = first_failure(&parts) {
            return Err(why);
        }
        let parts: Vec<Part> = parts.into_iter().flatten().collect();
        let fingerprint = parts
            .iter()
            .fold(0u64, |acc, p| acc.wrapping_add(p.fingerprint));
        let done = segment.to;
        let mut segments = self.earlier.clone();
        segments.push(segment);
        Manifest {
            format: FORMAT.to_string(),
            version: self.identity.version.clone(),
            git_commit: self.identity.commit.clone(),
            features: self.identity.features.clone(),
            owner: self.owner.clone(),
            grid: self.identity.grid,
            procs: self.identity.procs,
            ranks: self.identity.ranks,
            temporal: self.identity.temporal,
            iteration: done,
            planned: self.planned,
            gosa,
            p_fingerprint: verify::fingerprint_hex(fingerprint),
            coefficients: COEFFICIENTS.to_string(),
            segments,
            files: parts
                .iter()
                .enumerate()
                .map(|(rank, p)| RankFile {
                    rank,
                    file: store::rank_file_name(rank),
                    bytes: p.bytes,
                    crc32: p.crc32,
                })
                .collect(),
        }
        .commit(folder)
        .map_err(|e| e.message().to_string())
    }

    /// Removes the checkpoints of this problem the newest made useless
    /// (rank 0); one that cannot be removed is a warning.
    fn prune(&mut self) {
        let identity = self.identity.clone();
        let ours = |m: &Path| Manifest::read(m).is_ok_and(|m| m.identity() == identity);
        match store::prune(&self.settings.dir, self.settings.keep, ours) {
            Ok(gone) => {
                for old in gone {
                    tracing::info!(removed = %old.display(), "old checkpoint removed");
                }
            }
            Err(e) => self.warn(format!(
                "an old checkpoint was not removed ({}); the run went on",
                e.message()
            )),
        }
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

/// Takes the checkpoint folder `dir` for this run, collectively: rank 0
/// creates it if needed and locks it (refused when another run holds it),
/// then every rank checks that it sees rank 0's lock there (refused, naming
/// the first host that does not, when the folder is local to each node).
/// Returns rank 0's lock (`None` on other ranks) and the holder's token.
fn own_folder(dir: &Path, comm: &dyn Comm) -> Result<(Option<lock::FolderLock>, String)> {
    let token = lock::new_token();
    let (held, mine) = if comm.rank() == 0 {
        match lock::acquire(dir, &token) {
            Ok(l) => (Some(l), Some(Ok(token))),
            Err(e) => (None, Some(Err(e))),
        }
    } else {
        (None, None)
    };
    let token = comm::decide(comm, "the checkpoint folder's lock", &mine, |mut all| {
        all.swap_remove(0)
            .unwrap_or_else(|| Err(Error::runtime("rank 0 did not lock the checkpoint folder")))
    })?;
    together(comm, lock::check_seen(dir, &token))?;
    Ok((held, token))
}

/// Makes the folder of a new checkpoint (rank 0): a folder of this
/// iteration without a manifest is what an interrupted write left, and is
/// replaced (a committed one was refused before the run, see
/// `find_resume`); anything else of that name that himeno did not write
/// is left, and the checkpoint is not written.
fn make_folder(folder: &Path, dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(folder).is_ok() {
        store::remove_checkpoint(folder).map_err(|e| {
            Error::runtime(format!(
                "cannot replace the uncommitted checkpoint: {}",
                e.message()
            ))
        })?;
    }
    std::fs::create_dir(folder).map_err(|e| {
        Error::runtime(format!(
            "cannot create the checkpoint folder {}: {e}",
            folder.display()
        ))
    })?;
    store::sync_dir(dir)
}

/// The answer the checkpoint `r` holds, on rank 0: its gosa and the
/// fingerprint of `p` summed over every rank's values as read. A
/// fingerprint that differs from the one the manifest holds refuses the
/// restart (the files are not those the manifest was written with).
/// Collective.
fn resumed_answer(
    r: &Resume,
    grid: &Grid,
    block: &Block,
    comm: &dyn Comm,
) -> Result<Option<Answer>> {
    let part = verify::fingerprint_of_values(grid, block, &r.values);
    let mine = part;
    comm::decide(comm, "the checkpoint's fingerprint", &mine, |all| {
        let sum = all.iter().fold(0u64, |acc, p| acc.wrapping_add(*p));
        let got = verify::fingerprint_hex(sum);
        if !r.p_fingerprint.is_empty() && r.p_fingerprint != got {
            return Err(Error::usage(format!(
                "the checkpoint {} holds p with fingerprint {got}, and its manifest says {}: \
                 its files are not those it was written with; restart from another \
                 checkpoint",
                r.from.manifest, r.p_fingerprint
            )));
        }
        Ok(Some(Answer {
            gosa: r.gosa,
            p_fingerprint: sum,
        }))
    })
    .map(|a| if comm.rank() == 0 { a } else { None })
}

/// A rank's part of a checkpoint, as it tells rank 0 once its file is
/// written and synced.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Part {
    /// The CRC-32 of its file.
    crc32: u32,
    /// The file's size.
    bytes: u64,
    /// Its share of the fingerprint of `p` (`verify::fingerprint`).
    fingerprint: u64,
}

/// Goes on when every rank's `local` is fine; otherwise every rank stops
/// with a usage error whose message names the first rank that failed and
/// why (the reason alone when the job has one rank). Collective: rank 0
/// decides ([`comm::decide`]).
fn together(comm: &dyn Comm, local: Result<()>) -> Result<()> {
    let mine = local.as_ref().map_err(|e| e.message().to_string()).copied();
    comm::decide(comm, "the checkpoint's files", &mine, |all| {
        let lone = match all.as_slice() {
            [only] => only.clone().err(),
            _ => first_failure(&all),
        };
        lone.map_or(Ok(()), |why| Err(Error::usage(why)))
    })?;
    local
}

/// The first of `parts` (one a rank, in rank order) that failed, as
/// `rank R: why`, with how many others failed too; `None` when none did.
fn first_failure<T>(parts: &[std::result::Result<T, String>]) -> Option<String> {
    let mut failed = parts
        .iter()
        .enumerate()
        .filter_map(|(r, p)| p.as_ref().err().map(|e| (r, e)));
    let (r, why) = failed.next()?;
    Some(match failed.count() {
        0 => format!("rank {r}: {why}"),
        n => format!("rank {r}: {why} ({n} other rank(s) failed too)"),
    })
}

/// This rank's part of [`Checkpointer::prepare`]: the checkpoint to take
/// up (its manifest checked, this rank's file named but not yet read) and
/// the notes rank 0 tells, or why the run is refused.
///
/// Every committed checkpoint in the folder is read first: a manifest that
/// is not one himeno wrote (a FIFO, a device, a hand edit) refuses the run,
/// rather than being taken for a write cut short. `--restart latest` takes
/// the newest committed checkpoint of this problem (the same identity);
/// with none of it there, the newest of another is refused, saying how it
/// differs.
fn find_resume(
    settings: &CheckpointConfig,
    identity: &Identity,
    planned: u64,
    rank: usize,
) -> Result<(Option<Resume>, Vec<String>)> {
    let dir = &settings.dir;
    let found = store::list(dir)?;
    let mut committed: Vec<(&store::Found, Manifest)> = Vec::new();
    for f in found.iter().filter(|f| f.committed) {
        committed.push((f, Manifest::read(&f.path.join(MANIFEST))?));
    }
    let is_ours = |m: &Manifest| m.identity() == *identity;
    let newest_ours = committed.iter().rev().find(|(_, m)| is_ours(m));
    let mut notes = Vec::new();
    let manifest_path: Option<PathBuf> = match &settings.restart {
        None => None,
        Some(Restart::Latest) => {
            let newest = newest_ours.or(committed.last());
            for f in found.iter().filter(|f| !f.committed) {
                if newest.is_none_or(|(c, _)| f.iteration > c.iteration) {
                    notes.push(format!(
                        "the checkpoint {} has no manifest (its write was cut short): ignored, {}",
                        f.path.display(),
                        match newest {
                            Some((c, _)) => format!("restarting from {}", c.path.display()),
                            None => "no committed checkpoint is older".to_string(),
                        }
                    ));
                }
            }
            match newest {
                Some((c, _)) => Some(c.path.join(MANIFEST)),
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
                && std::fs::symlink_metadata(&path).is_err()
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
                p_fingerprint: m.p_fingerprint,
                segments: m.segments,
                values: Vec::new(),
            })
        }
        None => None,
    };
    // The run writes checkpoints after its start only: one already there
    // would be overwritten, or, of another problem, stand among this
    // run's.
    let from = start.as_ref().map_or(0, |r| r.from.iteration);
    if let Some((c, m)) = committed.iter().rev().find(|(c, _)| c.iteration > from) {
        let whose = match m.check_fits(identity, &c.path) {
            Ok(()) => "that this run would overwrite: restart from it (--restart latest), or give \
                       another --checkpoint-dir"
                .to_string(),
            Err(e) => format!(
                "of another run ({}): give this run another --checkpoint-dir",
                e.message()
                    .split_once(": restart")
                    .map_or(e.message(), |(why, _)| why)
            ),
        };
        return Err(Error::usage(format!(
            "the checkpoint folder {} holds a committed checkpoint at iteration {} {whose}",
            dir.display(),
            c.iteration
        )));
    }
    Ok((start, notes))
}
