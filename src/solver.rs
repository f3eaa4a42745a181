//! The iteration loop: the only place that calls the sweep, the halo
//! exchange and the global reduction, and times them.

use crate::backend::{Backend, BackendInfo};
use crate::comm::Comm;
use crate::config::{RunConfig, RunLength};
use crate::error::{Error, Result};
use crate::fault::{Fault, Stage};
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::signals::StopFlag;
use crate::timing::{Lap, Phase, PhaseTimes};
use crate::verify::{self, Answer};
use serde::{Deserialize, Serialize};

/// What one rank did, gathered on rank 0 for the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankSummary {
    /// Rank number.
    pub rank: usize,
    /// Host the rank ran on.
    pub host: String,
    /// Rank number within its node.
    pub node_rank: usize,
    /// Process coordinates.
    pub coords: [usize; 3],
    /// Owned interior points per dimension.
    pub points: [usize; 3],
    /// Seconds per phase in the timed loop.
    pub times: PhaseTimes,
    /// Seconds of this rank's timed loop.
    pub loop_s: f64,
    /// Backend and placement.
    pub backend: BackendInfo,
    /// This rank's part of the field fingerprint.
    pub fingerprint: u64,
}

/// The result of the timed run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Iterations completed in the timed loop.
    pub iterations: u64,
    /// Iterations that were planned.
    pub planned: u64,
    /// Gosa of the last completed iteration.
    pub gosa: f64,
    /// Slowest rank's loop time in seconds.
    pub wall_s: f64,
    /// Slowest rank's rehearsal time in seconds.
    pub warmup_s: f64,
    /// False when a stop signal ended the loop early (`iterations` is then
    /// 0 when the signal came during the rehearsal).
    pub complete: bool,
    /// Field fingerprint (sum of the ranks' parts), on rank 0.
    pub fingerprint: u64,
    /// Per-rank summaries, on rank 0 (empty elsewhere).
    pub ranks: Vec<RankSummary>,
}

/// Everything the loop works on.
pub struct Solver<'a> {
    /// The job's communicator.
    pub comm: &'a dyn Comm,
    /// This rank's backend.
    pub backend: &'a mut dyn Backend,
    /// This rank's halo exchange.
    pub halo: &'a mut Halo,
    /// Global grid.
    pub grid: Grid,
    /// This rank's block.
    pub block: Block,
    /// Raised by scheduler signals.
    pub stop: StopFlag,
    /// A failure to inject (robustness tests only; see `crate::fault`).
    pub fault: Option<Fault>,
    /// Told `(done, planned)` after each timed iteration (progress display).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Given the rehearsal's answer (gosa and, on rank 0, the field's
    /// fingerprint; 0 elsewhere) on every rank when the rehearsal ran to
    /// its end, before the fields are reset: an error (a wrong answer)
    /// ends the run before the timed loop. Called collectively.
    pub check_rehearsal: Option<&'a mut dyn FnMut(Answer) -> Result<()>>,
}

impl Solver<'_> {
    /// One iteration: sweep into `next`, exchange its ghosts (overlapping
    /// the rest of the sweep where the backend can), swap, sum gosa. Returns
    /// the global gosa and whether any rank was asked to stop.
    fn iterate(&mut self, times: &mut PhaseTimes) -> Result<(f64, bool)> {
        let mut clock = Lap::start();
        self.backend.sweep_start()?;
        times.add(Phase::Compute, clock.lap());
        self.halo.exchange(self.backend, self.comm, times)?;
        clock.lap();
        let local = self.backend.sweep_finish()?;
        self.backend.swap();
        times.add(Phase::Compute, clock.lap());
        // The stop request travels with gosa so that every rank leaves the
        // loop after the same iteration (a signal may reach ranks at
        // different times).
        let mut red = [local, f64::from(u8::from(self.stop.raised()))];
        self.comm.sum(&mut red);
        times.add(Phase::Allreduce, clock.lap());
        Ok((red[0], red[1] > 0.0))
    }

    /// Runs the rehearsal, sizes the run, resets the fields and runs the
    /// timed loop (barrier, loop, barrier), then gathers the summaries.
    pub fn run(&mut self, cfg: &RunConfig) -> Result<Outcome> {
        let mut scratch = PhaseTimes::default();
        self.comm.barrier();
        let mut clock = Lap::start();
        let mut stopped_in_rehearsal = false;
        let mut rehearsal_gosa = f64::NAN;
        for it in 0..cfg.warmup {
            if let Some(f) = &self.fault {
                f.before_iteration(self.comm.rank(), Stage::Rehearsal, it + 1, self.backend)?;
            }
            let (gosa, stop) = self.iterate(&mut scratch)?;
            rehearsal_gosa = gosa;
            verify::check_finite(gosa, it + 1)?;
            // A signal during the rehearsal ends the run before anything is
            // timed (the decision is collective, like any stop).
            if stop {
                tracing::warn!(done = it + 1, "stop signal during the rehearsal");
                stopped_in_rehearsal = true;
                break;
            }
        }
        let warmup_s = self.comm.max(clock.lap());
        let planned = match cfg.length {
            _ if stopped_in_rehearsal => 0,
            RunLength::Iterations(n) => n,
            RunLength::Seconds(target) => {
                // As the original: n = target / (time per rehearsal iteration).
                let per = warmup_s / cfg.warmup as f64;
                let n = (target / per.max(1e-9)).floor();
                n.clamp(1.0, 1e9) as u64
            }
        };
        tracing::info!(warmup_s, planned, "rehearsal done");
        // The rehearsal ran exactly `warmup` iterations from the initial
        // state: its answer can be checked (outside the timed loop, before
        // the reset erases it).
        if !stopped_in_rehearsal
            && cfg.warmup > 0
            && let Some(check) = self.check_rehearsal.as_mut()
        {
            let part = verify::fingerprint(&self.grid, &self.block, &self.backend.field()?);
            let fingerprint = self.comm.gather(&part.to_le_bytes()).map_or(0, |all| {
                all.iter().fold(0u64, |acc, b| acc.wrapping_add(le_u64(b)))
            });
            check(Answer {
                gosa: rehearsal_gosa,
                p_fingerprint: fingerprint,
            })?;
        }
        self.backend.reset()?;

        let mut times = PhaseTimes::default();
        let mut gosa = f64::NAN;
        let mut done = 0;
        let mut complete = !stopped_in_rehearsal;
        self.comm.barrier();
        let mut clock = Lap::start();
        while done < planned {
            if let Some(f) = &self.fault {
                f.before_iteration(self.comm.rank(), Stage::Timed, done + 1, self.backend)?;
            }
            let (g, stop) = self.iterate(&mut times)?;
            done += 1;
            gosa = g;
            if let Some(tell) = self.progress.as_mut() {
                tell(done, planned);
            }
            verify::check_finite(gosa, done)?;
            if stop && done < planned {
                tracing::warn!(done, planned, "stop signal: ending the run early");
                complete = false;
                break;
            }
        }
        let loop_s = clock.lap();
        self.comm.barrier();
        let wall_s = self.comm.max(loop_s);

        let field = self.backend.field()?;
        let part = verify::fingerprint(&self.grid, &self.block, &field);
        let mine = RankSummary {
            rank: self.comm.rank(),
            host: self.comm.host(),
            node_rank: self.comm.node_rank(),
            coords: self.block.coords,
            points: self.block.n,
            times,
            loop_s,
            backend: self.backend.info(),
            fingerprint: part,
        };
        let bytes = serde_json::to_vec(&mine)
            .map_err(|e| Error::runtime(format!("cannot encode the rank summary: {e}")))?;
        let ranks = match self.comm.gather(&bytes) {
            Some(all) => all
                .iter()
                .map(|b| serde_json::from_slice(b))
                .collect::<std::result::Result<Vec<RankSummary>, _>>()
                .map_err(|e| Error::runtime(format!("bad rank summary: {e}")))?,
            None => Vec::new(),
        };
        let fingerprint = ranks
            .iter()
            .fold(0u64, |acc, r| acc.wrapping_add(r.fingerprint));
        Ok(Outcome {
            iterations: done,
            planned,
            gosa,
            wall_s,
            warmup_s,
            complete,
            fingerprint,
            ranks,
        })
    }
}

/// The `u64` of 8 little-endian bytes (0 for anything else: a part that
/// did not arrive whole cannot match a stored fingerprint anyway).
fn le_u64(b: &[u8]) -> u64 {
    b.try_into().map_or(0, u64::from_le_bytes)
}
