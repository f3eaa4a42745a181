//! A checkpoint's manifest: what the checkpoint is of (grid, process grid,
//! ranks, temporal depth, the binary's build), whose it is (the run that
//! held the folder), where it stands (the iteration, the last gosa, the
//! fingerprint of `p`, the segments timed so far) and each rank's file
//! with its checksum. Rank 0 writes it last, after every rank's file is on
//! the disk: its presence is what commits a checkpoint.
//!
//! A manifest is read as untrusted input: bounded in size, opened without
//! blocking or following a link, and every number and file name checked
//! before use, so that a hand-edited one is refused with one line.

pub use super::store::{MANIFEST, MANIFEST_TMP};
use crate::config::MAX_ITERATIONS;
use crate::error::{Error, Result};
use crate::timing::LONGEST_S;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The `format` every manifest of this layout carries.
pub const FORMAT: &str = "himeno-checkpoint-1";

/// What the manifest says about the coefficient arrays, which it does not
/// hold.
pub const COEFFICIENTS: &str = "not stored: a0..a3, b0..b2, c0..c2, bnd and wrk1 are never \
                                changed by the solver, so a restart re-creates them from \
                                the initial state";

/// Largest manifest read (a manifest of the most ranks a run may have is
/// far smaller).
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// A stretch of timed iterations run by one job (one segment of a run
/// that was stopped and restarted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Iterations done when the segment began.
    pub from: u64,
    /// Iterations done when it ended.
    pub to: u64,
    /// Seconds of its timed loop (slowest rank), checkpoint writes not
    /// counted.
    pub wall_s: f64,
}

/// Where a restarted run took up the work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartedFrom {
    /// Iterations done at the checkpoint.
    pub iteration: u64,
    /// The checkpoint's manifest (empty when a record read lacks it: the
    /// studies need only the iteration).
    #[serde(default)]
    pub manifest: String,
}

/// One rank's file in a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFile {
    /// The rank.
    pub rank: usize,
    /// File name inside the checkpoint's folder.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// CRC-32 of the whole file but its last four bytes (which hold it).
    pub crc32: u32,
}

/// What a checkpoint must match to be restarted from by a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Global grid.
    pub grid: [usize; 3],
    /// Process grid.
    pub procs: [usize; 3],
    /// Ranks.
    pub ranks: usize,
    /// Sweeps per halo exchange.
    pub temporal: usize,
    /// The version of the binary.
    pub version: String,
    /// The git commit it was built from (as the record's provenance says).
    pub commit: String,
    /// The Cargo features compiled in.
    pub features: Vec<String>,
}

impl Identity {
    /// The build as messages name it.
    fn build(&self) -> String {
        format!(
            "{} (commit {}, features [{}])",
            self.version,
            self.commit,
            self.features.join(",")
        )
    }
}

/// The manifest of one checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// Version of the himeno binary that wrote it.
    pub version: String,
    /// Git commit that binary was built from.
    #[serde(default)]
    pub git_commit: String,
    /// Cargo features compiled into it.
    #[serde(default)]
    pub features: Vec<String>,
    /// The run that held the checkpoint folder when it was written (see
    /// `super::lock`).
    #[serde(default)]
    pub owner: String,
    /// Global grid `[NI, NJ, NK]`.
    pub grid: [usize; 3],
    /// Process grid `[PI, PJ, PK]`.
    pub procs: [usize; 3],
    /// Number of ranks (one file each).
    pub ranks: usize,
    /// Sweeps per halo exchange; the checkpoint falls on a block's end.
    pub temporal: usize,
    /// Timed iterations done.
    pub iteration: u64,
    /// Iterations the run that wrote it planned.
    pub planned: u64,
    /// Gosa of the last iteration done.
    pub gosa: f64,
    /// Fingerprint of the checkpointed `p` (`crate::verify::fingerprint`,
    /// hexadecimal), which a restart recomputes from the rank files and
    /// checks against a known answer or the reference.
    #[serde(default)]
    pub p_fingerprint: String,
    /// [`COEFFICIENTS`].
    pub coefficients: String,
    /// The segments timed up to this checkpoint, oldest first.
    pub segments: Vec<Segment>,
    /// The rank files, in rank order.
    pub files: Vec<RankFile>,
}

impl Manifest {
    /// What this checkpoint is of.
    pub fn identity(&self) -> Identity {
        Identity {
            grid: self.grid,
            procs: self.procs,
            ranks: self.ranks,
            temporal: self.temporal,
            version: self.version.clone(),
            commit: self.git_commit.clone(),
            features: self.features.clone(),
        }
    }

    /// Reads and parses the manifest at `path`.
    pub fn read(path: &Path) -> Result<Manifest> {
        let shown = path.display();
        let text = super::store::read_whole(path, "checkpoint manifest", MAX_MANIFEST_BYTES)?;
        let m: Manifest = serde_json::from_slice(&text).map_err(|e| {
            Error::usage(format!(
                "the checkpoint manifest {shown} is not one this build reads ({e})"
            ))
        })?;
        if m.format != FORMAT {
            return Err(Error::usage(format!(
                "the checkpoint manifest {shown} is of format '{}', this build reads '{FORMAT}'",
                m.format
            )));
        }
        if m.files.len() != m.ranks || m.files.iter().enumerate().any(|(r, f)| f.rank != r) {
            return Err(Error::usage(format!(
                "the checkpoint manifest {shown} does not list one file per rank"
            )));
        }
        if let Err(why) = m.check_values() {
            return Err(Error::usage(format!(
                "the checkpoint manifest {shown} is not one himeno wrote: {why}"
            )));
        }
        Ok(m)
    }

    /// Checks what a hand edit could break that the types do not: file
    /// names that stay inside the checkpoint's folder (exactly the names
    /// himeno gives), counts in range, times finite and not negative, and
    /// segments that tile the iterations done.
    fn check_values(&self) -> std::result::Result<(), String> {
        if let Some(f) = self
            .files
            .iter()
            .find(|f| f.file != super::store::rank_file_name(f.rank))
        {
            return Err(format!(
                "rank {}'s file is named '{}', not '{}'",
                f.rank,
                f.file.escape_debug(),
                super::store::rank_file_name(f.rank)
            ));
        }
        if self.iteration == 0 || self.iteration > self.planned || self.planned > MAX_ITERATIONS {
            return Err(format!(
                "iteration {} of {} planned is out of range (1 to the planned count, at most \
                 {MAX_ITERATIONS})",
                self.iteration, self.planned
            ));
        }
        if !(self.gosa.is_finite() && self.gosa >= 0.0) {
            return Err(format!(
                "its gosa {} is not a finite sum of squares",
                self.gosa
            ));
        }
        let mut at = 0;
        for s in &self.segments {
            if s.from != at || s.to <= s.from || s.to > self.iteration {
                return Err(format!(
                    "its segment {}..{} does not follow on from iteration {at}",
                    s.from, s.to
                ));
            }
            if !(s.wall_s.is_finite() && (0.0..=LONGEST_S).contains(&s.wall_s)) {
                return Err(format!(
                    "its segment {}..{} took {} s, not a time from 0 to {LONGEST_S:e} s",
                    s.from, s.to, s.wall_s
                ));
            }
            at = s.to;
        }
        if at != self.iteration {
            return Err(format!(
                "its segments end at iteration {at}, not at its iteration {}",
                self.iteration
            ));
        }
        if !self.p_fingerprint.is_empty() && u64::from_str_radix(&self.p_fingerprint, 16).is_err() {
            return Err(format!(
                "its p fingerprint '{}' is not hexadecimal",
                self.p_fingerprint.escape_debug()
            ));
        }
        Ok(())
    }

    /// Refuses a checkpoint that is not of the run `want`: every term
    /// must match, since a restart on another decomposition, depth or
    /// build would not continue the same computation bit for bit.
    pub fn check_fits(&self, want: &Identity, path: &Path) -> Result<()> {
        let have = self.identity();
        let show = |v: [usize; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
        let differs: Option<(&str, String, String)> = if have.grid != want.grid {
            Some(("grid", show(have.grid), show(want.grid)))
        } else if have.ranks != want.ranks {
            Some(("rank count", have.ranks.to_string(), want.ranks.to_string()))
        } else if have.procs != want.procs {
            Some(("process grid", show(have.procs), show(want.procs)))
        } else if have.temporal != want.temporal {
            Some((
                "--temporal",
                have.temporal.to_string(),
                want.temporal.to_string(),
            ))
        } else if have.version != want.version {
            Some(("himeno version", have.version, want.version.clone()))
        } else if have.commit != want.commit || have.features != want.features {
            Some(("himeno build", have.build(), want.build()))
        } else {
            None
        };
        match differs {
            Some((what, theirs, ours)) => Err(Error::usage(format!(
                "the checkpoint {} is of {what} {theirs}, and this run's is {ours}: restart \
                 with the options and the build of the run that wrote it, or give another --restart",
                path.display()
            ))),
            None => Ok(()),
        }
    }

    /// Writes the manifest into the checkpoint folder `dir`: to a
    /// temporary name, synced, then renamed over [`MANIFEST`] and the
    /// folder synced, so that the manifest appears whole or not at all.
    pub fn commit(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST);
        let fail = |e: std::io::Error| {
            Error::runtime(format!(
                "cannot write the checkpoint manifest {}: {e}",
                path.display()
            ))
        };
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::runtime(format!("cannot encode a checkpoint manifest: {e}")))?;
        let tmp = dir.join(MANIFEST_TMP);
        let mut f = std::fs::File::create(&tmp).map_err(fail)?;
        f.write_all(&text).map_err(fail)?;
        f.write_all(b"\n").map_err(fail)?;
        f.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, &path).map_err(fail)?;
        super::store::sync_dir(dir)
    }
}
