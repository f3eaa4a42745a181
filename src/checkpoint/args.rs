//! The checkpoint options as typed, and their validation into a
//! [`CheckpointConfig`].

use crate::config::{CheckpointConfig, MAX_ITERATIONS, Restart, RunLength};
use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;

/// Committed checkpoints kept when `--checkpoint-keep` is not given.
pub const DEFAULT_KEEP: usize = 2;

/// Most committed checkpoints a run may keep.
const MAX_KEEP: usize = 1000;

/// Checkpoint and restart options of a benchmark run.
#[derive(Debug, Args, Clone, Default)]
pub struct CheckpointArgs {
    /// Write a checkpoint every N timed iterations (rounded up to whole
    /// blocks with --temporal), into --checkpoint-dir. Without it a
    /// checkpoint is written only when a stop signal (SIGTERM, SIGUSR1)
    /// ends the run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_ITERATIONS))]
    pub checkpoint_every: Option<u64>,
    /// Folder of this run's checkpoints: one sub-folder per checkpoint, a
    /// file per rank and a manifest written last. Give each run its own.
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Committed checkpoints to keep (older ones are removed once a newer
    /// one is committed) [default: 2].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=MAX_KEEP as u64))]
    pub checkpoint_keep: Option<u64>,
    /// Continue from a checkpoint: `latest` (the newest committed one in
    /// --checkpoint-dir; the initial state if there is none) or the path of
    /// one checkpoint's manifest. The final answer is bitwise the one of
    /// the uninterrupted run.
    #[arg(long, value_name = "latest|PATH")]
    pub restart: Option<PathBuf>,
}

impl CheckpointArgs {
    /// The validated settings of a run of `length` with `temporal` sweeps
    /// per exchange, or `None` when no checkpoint option was given.
    pub fn validate(&self, length: RunLength, temporal: usize) -> Result<Option<CheckpointConfig>> {
        let Some(dir) = &self.checkpoint_dir else {
            let given = [
                self.checkpoint_every.map(|_| "--checkpoint-every"),
                self.checkpoint_keep.map(|_| "--checkpoint-keep"),
                self.restart.as_ref().map(|_| "--restart"),
            ];
            return match given.into_iter().flatten().next() {
                Some(name) => Err(Error::usage(format!(
                    "{name} needs --checkpoint-dir DIR, the folder of the run's checkpoints"
                ))),
                None => Ok(None),
            };
        };
        if dir.as_os_str().is_empty() {
            return Err(Error::usage("--checkpoint-dir is empty: give a folder"));
        }
        let RunLength::Iterations(planned) = length else {
            // A --seconds run sizes its length from the rehearsal's time,
            // which a restart cannot repeat: its answer would not be the
            // uninterrupted run's.
            return Err(Error::usage(
                "--checkpoint-dir needs a fixed --iterations N: a --seconds run's length \
                 depends on its timing, so a restart could not reproduce it",
            ));
        };
        // A checkpoint falls on the end of a block of `temporal` sweeps.
        let depth = temporal.max(1) as u64;
        let every = self.checkpoint_every.map(|n| n.div_ceil(depth) * depth);
        if let (Some(n), Some(asked)) = (every, self.checkpoint_every)
            && n != asked
        {
            tracing::info!(
                asked,
                every = n,
                "checkpoint interval rounded up to whole blocks"
            );
        }
        if every.is_some_and(|n| n >= planned) {
            tracing::info!(
                planned,
                "the checkpoint interval is not shorter than the run"
            );
        }
        let restart = self.restart.as_ref().map(|r| match r.to_str() {
            Some("latest") => Restart::Latest,
            _ => Restart::Manifest(r.clone()),
        });
        if let Some(Restart::Manifest(p)) = &restart
            && p.as_os_str().is_empty()
        {
            return Err(Error::usage(
                "--restart is empty: give `latest` or a checkpoint's manifest",
            ));
        }
        Ok(Some(CheckpointConfig {
            dir: dir.clone(),
            every,
            keep: self.checkpoint_keep.map_or(DEFAULT_KEEP, |k| k as usize),
            restart,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(every: Option<u64>, restart: Option<&str>) -> CheckpointArgs {
        CheckpointArgs {
            checkpoint_every: every,
            checkpoint_dir: Some("ck".into()),
            checkpoint_keep: None,
            restart: restart.map(PathBuf::from),
        }
    }

    #[test]
    fn the_interval_is_whole_blocks() {
        let c = args(Some(5), None)
            .validate(RunLength::Iterations(20), 3)
            .unwrap()
            .unwrap();
        assert_eq!((c.every, c.keep), (Some(6), DEFAULT_KEEP));
        let c = args(Some(5), None)
            .validate(RunLength::Iterations(20), 1)
            .unwrap()
            .unwrap();
        assert_eq!(c.every, Some(5));
    }

    #[test]
    fn restart_names_latest_or_a_manifest() {
        let l = args(None, Some("latest"))
            .validate(RunLength::Iterations(9), 1)
            .unwrap()
            .unwrap();
        assert_eq!(l.restart, Some(Restart::Latest));
        let m = args(None, Some("ck/x/manifest.json"))
            .validate(RunLength::Iterations(9), 1)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.restart,
            Some(Restart::Manifest("ck/x/manifest.json".into()))
        );
    }

    #[test]
    fn refused_without_a_folder_or_a_fixed_count() {
        let mut a = args(Some(2), None);
        assert!(a.validate(RunLength::Seconds(5.0), 1).is_err());
        a.checkpoint_dir = None;
        let e = a.validate(RunLength::Iterations(9), 1).unwrap_err();
        assert!(
            e.message()
                .contains("--checkpoint-every needs --checkpoint-dir")
        );
        assert_eq!(
            CheckpointArgs::default()
                .validate(RunLength::Seconds(5.0), 1)
                .unwrap(),
            None
        );
    }
}
