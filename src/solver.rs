//! The iteration loop: the only place that calls the sweep, the halo
//! exchange and the global reduction, and times them.
//!
//! The loop runs in rounds: the sweeps between two halo exchanges (a
//! `Block` is a rank's part of the grid, never a round). One sweep
//! each for the classic iteration, up to the block's halo depth `T` with
//! temporal blocking (`--temporal T`). A round sweeps, exchanges the new
//! field's ghost layers (all `T` of them, once), then reduces the gosa of
//! every sweep of the round and the stop flag in one allreduce. The NaN
//! check and the stop decision are therefore made once per round: a stop
//! signal ends the run after the round it arrives in. An iteration count
//! that is not a multiple of `T` ends with a shorter round. Redundant
//! updates of ghost layers count as compute, the exchange as comm.
//!
//! A backend that [defers gosa](crate::backend::Backend::defers_gosa) (the
//! GPU's) hands back each sweep's gosa one round late, so that its host
//! queues the next sweep before waiting for the last one: a round then
//! reduces the previous round's gosa with its own stop flag (the stop
//! decision stays the round's own), and the last pending gosa is read
//! before any value is used as final: at the end of the rehearsal and of
//! the timed loop, on a stop and before a checkpoint. So every gosa the
//! run reports, checks or saves is the one of its own iteration; only the
//! NaN check of a round's gosa comes a round later.

use crate::backend::{Backend, BackendInfo};
use crate::checkpoint::{Checkpointer, RestartedFrom, Segment, Written};
use crate::comm::Comm;
use crate::config::RunLength;
use crate::error::{Error, Result};
use crate::fault::{Fault, Stage};
use crate::grid::Grid;
use crate::grid::decomp::{Block, MAX_DEPTH};
use crate::halo::Halo;
use crate::machine::memory;
use crate::progress::Progress;
use crate::signals::StopFlag;
use crate::timeline::{self, Part};
use crate::timing::{self, Lap, Phase, PhaseTimes};
use crate::verify::{self, Answer};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

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
    /// Halo messages this rank sends per exchange.
    #[serde(default)]
    pub halo_messages: usize,
    /// Halo bytes this rank sends per exchange.
    #[serde(default)]
    pub halo_bytes: usize,
    /// CPU seconds this rank's process used in the timed loop (all its
    /// threads): well below `loop_s` times its threads means that other
    /// processes ran on its CPUs.
    #[serde(default)]
    pub cpu_s: f64,
    /// Fraction of the process's memory on huge pages at the end of the
    /// run, where Linux tells.
    #[serde(default)]
    pub huge_pages: Option<f64>,
    /// This rank's memory: the preflight's estimate beside what its
    /// process measured.
    #[serde(default)]
    pub memory: MemoryUse,
}

/// A rank's memory, estimated and measured. In-process ranks
/// (`--local-ranks`) share one process, so they share its baseline and
/// peak: that peak is then near the baseline plus all their estimates.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoryUse {
    /// Resident bytes the preflight counted for this rank's buffers.
    pub estimated_bytes: u64,
    /// The process's resident bytes when the estimate was made, before the
    /// buffers were allocated, where Linux tells.
    pub baseline_bytes: Option<u64>,
    /// The process's peak resident bytes at the end of the run, where
    /// Linux tells.
    pub peak_bytes: Option<u64>,
}

/// The result of the timed run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Iterations completed in the timed loop.
    pub iterations: u64,
    /// Iterations that were planned.
    pub planned: u64,
    /// For a blocked `--seconds` run, the iterations first planned from
    /// the calibration, before the loop checked its own pace
    /// ([`PACE_CHECK_EIGHTHS`]); `None` for other runs.
    pub estimated: Option<u64>,
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
    /// Sweeps per halo exchange (the block's halo depth).
    pub temporal: usize,
    /// Per-rank summaries, on rank 0 (empty elsewhere).
    pub ranks: Vec<RankSummary>,
    /// Where a restart took up the work (`None`: the initial state); the
    /// timed loop ran the iterations after it.
    pub restarted_from: Option<RestartedFrom>,
    /// The segments timed so far, this job's last (empty without
    /// checkpoints).
    pub segments: Vec<Segment>,
    /// The checkpoints this job wrote, when it had a checkpoint folder.
    pub checkpoints: Option<Written>,
}

/// Which sweeps' gosa a round hands back (see [`Solver::round`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    /// Its own sweeps', all of them.
    Own,
    /// The previous round's one sweep (a late read), in `gosa[0]`.
    Previous,
    /// None: the first round of a late read.
    Nothing,
}

/// The global gosa a round made known: those of the iterations after
/// `before`, in order.
struct Known {
    /// The iteration before the first value's.
    before: u64,
    /// How many values there are.
    n: usize,
    /// The values, `vals[..n]`.
    vals: [f64; MAX_DEPTH + 1],
}

impl Known {
    /// The values.
    fn values(&self) -> &[f64] {
        &self.vals[..self.n]
    }
}

/// Fails on the first sweep of a round whose gosa is not finite; the round
/// starts after iteration `before`.
fn check_round(gosa: &[f64], before: u64) -> Result<()> {
    for (n, &g) in gosa.iter().enumerate() {
        verify::check_finite(g, before + 1 + n as u64)?;
    }
    Ok(())
}

/// The seconds of one calibration round on the slowest rank
/// ([`Solver::timed_round`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// What the round would have taken over the whole block: its compute
    /// scaled where the backend swept a sample.
    pub whole: f64,
    /// What it took.
    pub took: f64,
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
    /// What the benchmark's own run adds to the loop; none for a
    /// calibration's rounds (`Extras::default()`).
    pub extras: Extras<'a>,
}

/// What the benchmark's rehearsal and timed loop carry besides the sweep:
/// each optional, none for a calibration.
#[derive(Default)]
pub struct Extras<'a> {
    /// A failure to inject (robustness tests only; see `crate::fault`).
    pub fault: Option<Fault>,
    /// Told `(done, planned)` after each timed round (rank 0's display).
    pub progress: Option<&'a mut Progress>,
    /// This rank's memory as the preflight estimated it (the peak is
    /// added at the end).
    pub memory: MemoryUse,
    /// Checkpoints and restart (`--checkpoint-dir`), if asked for.
    pub checkpoint: Option<&'a mut Checkpointer>,
}

/// What the rehearsal leaves for the verdict and the timed loop.
#[derive(Debug, Clone)]
pub struct Rehearsal {
    /// Iterations rehearsed: the warm-up, fewer when a stop came.
    pub iterations: u64,
    /// Slowest rank's seconds for them.
    pub warmup_s: f64,
    /// Whether a stop signal ended it: then nothing is timed.
    pub stopped: bool,
    /// Its answer, when it was asked for and the whole warm-up ran from
    /// the initial state: gosa on every rank, the field's fingerprint on
    /// rank 0 (0 elsewhere).
    pub answer: Option<Answer>,
    /// Seconds per sweep of its last round, for the watchdog of the
    /// first timed round (see `Solver::watched_round`).
    per_sweep: Option<f64>,
}

/// How many times the last round's time per sweep the watchdog allows a
/// round in flight: room for a slower round (a busier node, a page fault
/// storm) without letting a hung one run on for long.
const ROUND_MARGIN: f64 = 3.0;

impl Solver<'_> {
    /// [`Solver::round`], with the watchdog told how long it should take.
    /// A round looks at the stop flag only when it ends; with `--temporal
    /// 32` on a large grid it can take longer than the stop grace, and the
    /// watchdog would end a healthy run with no record. From the second
    /// round on the watchdog allows [`ROUND_MARGIN`] times the last
    /// round's time per sweep for it. `per_sweep` carries that time.
    fn watched_round(
        &mut self,
        gosa: &mut [f64],
        late: bool,
        times: &mut PhaseTimes,
        per_sweep: &mut Option<f64>,
    ) -> Result<(bool, Got)> {
        let sweeps = gosa.len() as f64;
        if let Some(s) = *per_sweep {
            let expected = s * sweeps * ROUND_MARGIN;
            self.stop
                .busy_for(Duration::try_from_secs_f64(expected).unwrap_or(Duration::ZERO));
        }
        let started = Instant::now();
        let round = self.round(gosa, late, times)?;
        *per_sweep = Some(started.elapsed().as_secs_f64() / sweeps);
        Ok(round)
    }

    /// Whether the rounds read gosa one round late: the backend can, and
    /// every round is one sweep.
    fn late(&self) -> bool {
        self.backend.defers_gosa() && self.block.depth == 1
    }

    /// One round of `gosa.len()` sweeps: sweep into `next`, exchange its
    /// ghosts (overlapping the rest of the sweeps where the backend can),
    /// swap, sum the gosa of every sweep. Writes the global gosa of each
    /// sweep into `gosa` and returns whether any rank was asked to stop,
    /// and [`Got::Own`]. With `late` (one sweep), the gosa summed and
    /// written to `gosa[0]` is the previous round's ([`Got::Previous`]),
    /// or none ([`Got::Nothing`]).
    fn round(
        &mut self,
        gosa: &mut [f64],
        late: bool,
        times: &mut PhaseTimes,
    ) -> Result<(bool, Got)> {
        let sweeps = gosa.len();
        let mut clock = Lap::start();
        self.backend.sweeps_start(sweeps)?;
        timeline::lap(&mut clock, Phase::Compute, times);
        self.halo.exchange(self.backend, self.comm, times)?;
        clock.lap();
        let got = if late {
            match self.backend.sweeps_finish_late()? {
                Some(g) => {
                    gosa[0] = g;
                    Got::Previous
                }
                None => Got::Nothing,
            }
        } else {
            self.backend.sweeps_finish(gosa)?;
            Got::Own
        };
        self.backend.swap();
        timeline::lap(&mut clock, Phase::Compute, times);
        let n = match got {
            Got::Own => sweeps,
            Got::Previous => 1,
            Got::Nothing => 0,
        };
        // The stop request travels with gosa so that every rank leaves the
        // loop after the same round (a signal may reach ranks at different
        // times). One allreduce for the whole round; every rank has the
        // same `n`.
        let mut red = [0.0; MAX_DEPTH + 1];
        red[..n].copy_from_slice(&gosa[..n]);
        red[n] = f64::from(u8::from(self.stop.raised()));
        {
            let _nvtx = crate::backend::gpu::nvtx::range(Phase::Allreduce.name());
            self.comm.sum(&mut red[..=n]);
        }
        gosa[..n].copy_from_slice(&red[..n]);
        timeline::lap(&mut clock, Phase::Allreduce, times);
        Ok((red[n] > 0.0, got))
    }

    /// The global gosa that a round handed back (`got`, `gosa`) made
    /// known, `done` iterations being done after it; with `flush`, also
    /// the last pending one (read and summed: collective when one is
    /// pending, which is so on every rank alike).
    fn known(
        &mut self,
        got: Got,
        gosa: &[f64],
        done: u64,
        flush: bool,
        times: &mut PhaseTimes,
    ) -> Result<Known> {
        let mut k = Known {
            before: 0,
            n: 0,
            vals: [0.0; MAX_DEPTH + 1],
        };
        match got {
            Got::Own => {
                k.before = done - gosa.len() as u64;
                k.n = gosa.len();
                k.vals[..k.n].copy_from_slice(gosa);
            }
            Got::Previous => {
                k.before = done - 2;
                k.n = 1;
                k.vals[0] = gosa[0];
            }
            Got::Nothing => k.before = done - 1,
        }
        if flush && let Some(g) = self.flush(times)? {
            k.vals[k.n] = g;
            k.n += 1;
        }
        Ok(k)
    }

    /// The global gosa of the last sweep whose gosa is still pending on
    /// the backend (a late read), or `None`. Collective when one is
    /// pending.
    fn flush(&mut self, times: &mut PhaseTimes) -> Result<Option<f64>> {
        let mut clock = Lap::start();
        let Some(mine) = self.backend.gosa_pending()? else {
            return Ok(None);
        };
        timeline::lap(&mut clock, Phase::Compute, times);
        let mut red = [mine];
        self.comm.sum(&mut red);
        timeline::lap(&mut clock, Phase::Allreduce, times);
        Ok(Some(red[0]))
    }

    /// One round of `gosa.len()` sweeps outside the timed loop, as the run
    /// makes it: the slowest rank's seconds for it, and whether a rank was
    /// asked to stop. Where the backend sweeps a sample of the block
    /// ([`Backend::sample`]) the round's compute is scaled to the whole
    /// block ([`Backend::sample_scale`]) and its exchange, of whole faces,
    /// counted as it was. Collective (the calibrations).
    ///
    /// [`Backend::sample`]: crate::backend::Backend::sample
    /// [`Backend::sample_scale`]: crate::backend::Backend::sample_scale
    pub fn timed_round(&mut self, gosa: &mut [f64]) -> Result<(Round, bool)> {
        let mut times = PhaseTimes::default();
        let started = Instant::now();
        let (stop, _) = self.round(gosa, false, &mut times)?;
        let took = started.elapsed().as_secs_f64();
        let compute = times.get(Phase::Compute).min(took);
        let scale = self.backend.sample_scale(gosa.len());
        let whole = took + compute * (scale - 1.0);
        let round = Round {
            whole: self.comm.max(whole),
            took: self.comm.max(took),
        };
        Ok((round, stop))
    }

    /// Applies the injected fault, if any, meant for the `sweeps` iterations
    /// after `done` of `stage`: one meant for an iteration inside the round
    /// strikes before the round, since nothing runs between its sweeps.
    fn inject_fault(&mut self, stage: Stage, done: u64, sweeps: usize) -> Result<()> {
        if let Some(f) = &self.extras.fault {
            for it in done + 1..=done + sweeps as u64 {
                f.before_iteration(self.comm.rank(), stage, it, self.backend)?;
            }
        }
        Ok(())
    }

    /// Sweeps in the next round when `done` of `planned` iterations are
    /// done: the halo depth, or fewer to end on `planned`.
    fn sweeps(&self, done: u64, planned: u64) -> usize {
        let depth = self.block.depth.min(MAX_DEPTH) as u64;
        depth.min(planned - done) as usize
    }

    /// Runs the rehearsal: `warmup` iterations from the initial state,
    /// untimed, fewer when a stop signal comes. With `answer`, a rehearsal
    /// that ran to its end states its answer (for the verdict, which the
    /// caller decides). Collective: a barrier, one allreduce per round, the
    /// max of its time and, with `answer` and a whole rehearsal, the
    /// gather of the field's fingerprint.
    pub fn rehearse(&mut self, warmup: u64, answer: bool) -> Result<Rehearsal> {
        let mut scratch = PhaseTimes::default();
        let mut gosa = [0.0; MAX_DEPTH];
        self.comm.barrier();
        let mut clock = Lap::start();
        let mut stopped = false;
        let mut last_gosa = f64::NAN;
        let mut rehearsed = 0;
        // Seconds per sweep of the last round, for the watchdog (see
        // `Solver::timed_round`); none before the first.
        let mut per_sweep = None;
        let late = self.late();
        while rehearsed < warmup {
            let sweeps = self.sweeps(rehearsed, warmup);
            self.inject_fault(Stage::Rehearsal, rehearsed, sweeps)?;
            timeline::mark(Part::Rehearsal, rehearsed + 1);
            let (stop, got) =
                self.watched_round(&mut gosa[..sweeps], late, &mut scratch, &mut per_sweep)?;
            rehearsed += sweeps as u64;
            // The rehearsal's last gosa is its answer's: read it now.
            let flush = stop || rehearsed >= warmup;
            let known = self.known(got, &gosa[..sweeps], rehearsed, flush, &mut scratch)?;
            check_round(known.values(), known.before)?;
            if let Some(&g) = known.values().last() {
                last_gosa = g;
            }
            // A signal during the rehearsal ends the run before anything is
            // timed (the decision is collective, like any stop).
            if stop {
                tracing::warn!(done = rehearsed, "stop signal during the rehearsal");
                stopped = true;
                break;
            }
        }
        let warmup_s = self.comm.max(clock.lap());
        // The rehearsal ran exactly `warmup` iterations from the initial
        // state: its answer can be checked (outside the timed loop, before
        // the reset erases it).
        let answer = if answer && !stopped && warmup > 0 {
            let part = verify::fingerprint(&self.grid, &self.block, &self.backend.field()?);
            let fingerprint = self.comm.gather(&part.to_le_bytes()).map_or(0, |all| {
                all.iter().fold(0u64, |acc, b| acc.wrapping_add(le_u64(b)))
            });
            Some(Answer {
                gosa: last_gosa,
                p_fingerprint: fingerprint,
            })
        } else {
            None
        };
        Ok(Rehearsal {
            iterations: rehearsed,
            warmup_s,
            stopped,
            answer,
            per_sweep,
        })
    }

    /// Sizes the run from `length` and the `rehearsal` (or `calibrated`,
    /// see [`planned_iterations`]), resets the fields (or takes up a
    /// restart's checkpoint) and runs the timed loop (barrier, loop,
    /// barrier), then gathers the summaries. After a rehearsal a stop
    /// ended, nothing is timed (0 iterations) but the closing collectives
    /// still run. Collective: the restore's, a barrier, one allreduce per
    /// round and each checkpoint's, a barrier, two maxima and the gather
    /// of the rank summaries.
    pub fn timed(
        &mut self,
        length: RunLength,
        rehearsal: &Rehearsal,
        calibrated: Option<f64>,
    ) -> Result<Outcome> {
        let Rehearsal {
            iterations: rehearsed,
            warmup_s,
            stopped: stopped_in_rehearsal,
            mut per_sweep,
            ..
        } = *rehearsal;
        let mut gosa = [0.0; MAX_DEPTH];
        let calibrated = calibrated.filter(|_| self.block.depth > 1);
        let mut planned = match length {
            _ if stopped_in_rehearsal => 0,
            RunLength::Iterations(n) => n,
            RunLength::Seconds(target) => {
                planned_iterations(target, warmup_s / rehearsed as f64, calibrated)
            }
        };
        // A blocked run sized from its calibration checks its own pace
        // (a restart's loop, timed in segments, keeps its plan).
        let mut checks = PACE_CHECK_EIGHTHS.iter().copied().peekable();
        let pace_check = match length {
            RunLength::Seconds(target)
                if calibrated.is_some() && planned > 0 && self.extras.checkpoint.is_none() =>
            {
                Some(target)
            }
            _ => None,
        };
        let estimated = pace_check.map(|_| planned);
        tracing::info!(warmup_s, planned, "rehearsal done");
        self.backend.reset()?;
        // A restart takes up the work where its checkpoint left it, on the
        // round boundary the uninterrupted run had there.
        let (start, mut last_gosa) = match self.extras.checkpoint.as_mut() {
            Some(c) if !stopped_in_rehearsal => c.restore(self.backend, self.halo, self.comm)?,
            _ => (0, f64::NAN),
        };

        let mut times = PhaseTimes::default();
        let mut done = start;
        // Seconds of this rank's checkpoint writes, left out of its loop.
        let mut saving_s = 0.0;
        let mut complete = !stopped_in_rehearsal;
        self.comm.barrier();
        let cpu_start = timing::process_cpu_s();
        let late = self.late();
        let mut clock = Lap::start();
        while done < planned {
            let sweeps = self.sweeps(done, planned);
            self.inject_fault(Stage::Timed, done, sweeps)?;
            timeline::mark(Part::Timed, done + 1);
            let (stop, got) =
                self.watched_round(&mut gosa[..sweeps], late, &mut times, &mut per_sweep)?;
            done += sweeps as u64;
            if let Some(target) = pace_check
                && let Some(&eighths) = checks.peek()
                && done * 8 >= planned * eighths
            {
                // Every rank reaches this round and takes the slowest
                // rank's time, so all plan alike.
                checks.next();
                let so_far = self.comm.max(clock.elapsed());
                planned = planned_iterations(target, so_far / done as f64, None).max(done);
            }
            // A gosa still pending is read before the loop ends (the run's
            // final gosa, inside the timed loop) and before a checkpoint
            // saves it.
            let flush = stop
                || done >= planned
                || self
                    .extras
                    .checkpoint
                    .as_ref()
                    .is_some_and(|c| c.due(done, stop));
            let known = self.known(got, &gosa[..sweeps], done, flush, &mut times)?;
            for (n, g) in known.values().iter().enumerate() {
                tracing::debug!(iteration = known.before + 1 + n as u64, gosa = g, "gosa");
            }
            check_round(known.values(), known.before)?;
            if let Some(&g) = known.values().last() {
                last_gosa = g;
            }
            if let Some(progress) = self.extras.progress.as_mut() {
                progress.update(done, planned);
            }
            if let Some(c) = self.extras.checkpoint.as_mut()
                && c.due(done, stop)
            {
                let so_far = clock.elapsed() - saving_s;
                saving_s += c.save(done, last_gosa, start, so_far, self.backend, self.comm)?;
            }
            if stop && done < planned {
                tracing::warn!(done, planned, "stop signal: ending the run early");
                complete = false;
                break;
            }
        }
        let loop_s = clock.lap() - saving_s;
        // The rounds are over: a stop's grace counts from here.
        self.stop.busy_for(Duration::ZERO);
        let cpu_s = timing::process_cpu_s() - cpu_start;
        self.comm.barrier();
        let wall_s = self.comm.max(loop_s);
        let saving_s = self.comm.max(saving_s);

        let field = self.backend.field()?;
        let part = verify::fingerprint(&self.grid, &self.block, &field);
        let reading = memory::process_reading();
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
            halo_messages: self.halo.messages_per_exchange(),
            halo_bytes: self.halo.bytes_per_exchange(),
            cpu_s,
            huge_pages: reading.huge_fraction,
            memory: MemoryUse {
                peak_bytes: reading.peak.map(|b| b.min(u64::MAX.into()) as u64),
                ..self.extras.memory
            },
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
            estimated,
            gosa: last_gosa,
            wall_s,
            warmup_s,
            complete,
            fingerprint,
            temporal: self.block.depth,
            ranks,
            restarted_from: self
                .extras
                .checkpoint
                .as_ref()
                .and_then(|c| c.restarted_from()),
            segments: self.extras.checkpoint.as_ref().map_or_else(Vec::new, |c| {
                let mut all = c.earlier_segments().to_vec();
                all.push(Segment {
                    from: start,
                    to: done,
                    wall_s,
                });
                all
            }),
            checkpoints: self.extras.checkpoint.as_ref().map(|c| c.written(saving_s)),
        })
    }
}

/// Eighths of a blocked `--seconds` run's planned iterations after which
/// its loop plans again from its own pace (the slowest rank's loop time so
/// far): the calibration's turns are short and these guests' rate moves
/// by 15-25 % within a run, so sized from the calibration alone (its best
/// turn, then its median) `--seconds 20` runs with `--temporal auto` on a
/// 2-vCPU Xeon guest took 18.6-21.3 s. The loop's rate from then on is
/// what the rest of the run sees; checked again half way, as the first
/// eighth's pace alone (a few blocks of T = 8) sized `--seconds 5` runs of
/// size L on two threads of a Zen 4 guest to 5.26-5.34 s.
pub const PACE_CHECK_EIGHTHS: [u64; 2] = [1, 4];

/// Iterations of a run of `target` seconds: as the original, `target`
/// over the seconds per iteration of the rehearsal (`rehearsed`), unless
/// the sweeps the run times were `calibrated` (seconds per sweep; given
/// for a block deeper than one layer, whose T the calibration chose or
/// whose tiles it timed). A rehearsal of three iterations on a block of
/// T = 4 or 8 runs one round of three sweeps, not the rounds of T the
/// loop runs, and the wavefront's rate depends on its rounds: at 3/8 of
/// them it reads the fields from memory more than twice as often, and a
/// `--seconds 20` run sized from it ended after 16-17 s (issue 42). The
/// calibration timed the loop's own rounds on the same buffers, every
/// rank the slowest rank's time, so every rank plans alike.
pub fn planned_iterations(target: f64, rehearsed: f64, calibrated: Option<f64>) -> u64 {
    let per = calibrated.unwrap_or(rehearsed);
    let n = (target / per.max(1e-9)).floor();
    n.clamp(1.0, 1e9) as u64
}

/// The `u64` of 8 little-endian bytes (0 for anything else: a part that
/// did not arrive whole cannot match a stored fingerprint anyway).
fn le_u64(b: &[u8]) -> u64 {
    b.try_into().map_or(0, u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::planned_iterations;

    /// A run is sized from the calibrated seconds per sweep when there is
    /// one, else from the rehearsal's; at least one iteration.
    #[test]
    fn a_timed_run_is_sized_from_the_calibration_when_there_is_one() {
        assert_eq!(planned_iterations(20.0, 0.01, None), 2000);
        assert_eq!(planned_iterations(20.0, 0.01, Some(0.008)), 2500);
        assert_eq!(planned_iterations(0.001, 0.01, None), 1);
    }
}
