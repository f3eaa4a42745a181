//! The calibration engine: time a few alternatives of one run in turn,
//! over interleaved rounds, within a share of the run's time, and keep
//! the starting one unless another is clearly faster. Its two users are
//! `--temporal auto` (`crate::temporal`: how many sweeps per exchange) and
//! `--prefetch`/`--stores auto` (`crate::kernel_choice`: which kernel).
//!
//! The alternatives run on the job's own buffers ([`Built`]) through the
//! solver's round, so what is timed is what the run will do (on a sample
//! of each block where the fields are far beyond the cache, its time
//! scaled to the whole: [`Backend::sample`]); every rank sees the slowest
//! rank's times, so every rank decides alike.

use crate::backend::Backend;
use crate::comm::Comm;
use crate::config::{RunConfig, RunLength};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::signals::StopFlag;
use crate::solver::Solver;
use std::time::Instant;

/// How much faster per sweep a candidate must calibrate than the starting
/// one (the classic sweep, the starting kernel) to be taken: more than the
/// spread of two timings of the same block on a quiet machine, so that
/// noise does not pick a choice that does not pay.
pub const MARGIN: f64 = 0.03;

/// What a calibration works with (`crate::temporal::Plan::settle`,
/// `crate::kernel_choice::settle`), besides the buffers it times.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The run's configuration.
    pub cfg: &'a RunConfig,
    /// The global grid.
    pub grid: &'a Grid,
    /// The job's communicator.
    pub comm: &'a dyn Comm,
    /// Raised by scheduler signals.
    pub stop: &'a StopFlag,
    /// The time the calibrations may take together.
    pub budget: &'a Budget,
}

/// The share of a run's estimated time the calibrations before its
/// rehearsal may take together ([`Budget`]).
pub const CALIBRATION_SHARE: f64 = 0.1;
/// Seconds the calibrations may take however short the run: enough for
/// two rounds of `--temporal auto`'s candidates T = 1..8 at size L on two
/// threads of a 2-vCPU guest (a round of one block each is 24 sweeps,
/// 0.6-1 s there; with 1 s a `--seconds 0.5` run of L timed each T once at
/// most, and the deeper ones not at all).
pub const CALIBRATION_FLOOR_S: f64 = 2.0;
/// How much slower per sweep than the classic sweep (the first candidate)
/// a blocked candidate not yet timed is assumed to run when its first turn
/// is weighed against the budget (a wavefront over thin planes measured
/// 3.7x slower per sweep): `--temporal auto`'s [`Rounds::untimed`].
pub const UNTIMED_SLOWDOWN: f64 = 4.0;
/// How much slower per sweep than the slowest other candidate already
/// timed a candidate not yet timed is assumed to run, when that is less
/// than [`Rounds::untimed`] says: a deeper wavefront sweeps at about its
/// shallower ones' rate, and assumed 4x slower than the classic sweep, a
/// block of T = 6 or 8 of size L never fitted a 1 s budget.
const UNTIMED_AFTER_OTHERS: f64 = 1.5;

/// The time the calibrations before the rehearsal may take, together:
/// [`CALIBRATION_SHARE`] of the run as the first candidate's seconds per
/// sweep estimate it, at least [`CALIBRATION_FLOOR_S`]. A turn whose cost
/// would pass it is not started, so a candidate that cannot be timed
/// within it is not tried: a 1 s run spent 16 s timing wavefronts before
/// it.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    started: Instant,
    length: RunLength,
    warmup: u64,
}

impl Budget {
    /// The budget of the run `cfg`, counted from now.
    pub fn start(cfg: &RunConfig) -> Budget {
        Budget::since(Instant::now(), cfg.length, cfg.warmup)
    }

    /// The budget of a run of `length` after `warmup` rehearsal
    /// iterations, counted from `started`.
    pub fn since(started: Instant, length: RunLength, warmup: u64) -> Budget {
        Budget {
            started,
            length,
            warmup,
        }
    }

    /// Seconds the calibrations may take for a run whose sweeps take
    /// `sweep_s` each.
    pub fn seconds(&self, sweep_s: f64) -> f64 {
        let warmup = self.warmup as f64 * sweep_s;
        let run = match self.length {
            RunLength::Iterations(n) => n as f64 * sweep_s + warmup,
            RunLength::Seconds(s) => s + warmup,
        };
        (CALIBRATION_SHARE * run).max(CALIBRATION_FLOOR_S)
    }

    /// Seconds spent since the budget started, on the slowest rank.
    /// Collective.
    fn spent(&self, comm: &dyn Comm) -> f64 {
        comm.max(self.started.elapsed().as_secs_f64())
    }
}

/// A rank's block with the backend and halo exchange made for it.
pub struct Built {
    /// The block, as deep as its sweeps per exchange.
    pub block: Block,
    /// Its backend.
    pub backend: Box<dyn Backend>,
    /// Its halo exchange.
    pub halo: Halo,
}

impl Built {
    /// A solver over these for calibration rounds before the rehearsal:
    /// no fault injection, progress or checkpoints.
    pub fn solver<'a>(&'a mut self, run: Run<'a>) -> Solver<'a> {
        Solver {
            comm: run.comm,
            backend: self.backend.as_mut(),
            halo: &mut self.halo,
            grid: *run.grid,
            block: self.block,
            stop: run.stop.clone(),
            extras: Default::default(),
        }
    }
}

/// Whether a candidate besides the first was timed (`best` finite).
pub fn any_other_timed(best: &[f64]) -> bool {
    best.iter().skip(1).any(|b| b.is_finite())
}

/// The fastest of the candidates after the first by their seconds per
/// sweep `best` (at least one of them timed), and whether it is more than
/// [`MARGIN`] faster than the first (and so taken).
pub fn clear_winner(best: &[f64]) -> (usize, bool) {
    let (other, time) = best
        .iter()
        .copied()
        .enumerate()
        .skip(1)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a candidate besides the first");
    (other, time < best[0] * (1.0 - MARGIN))
}

/// Least time one candidate's turn in a calibration round takes: its
/// block is run again until it has passed. A sweep of a small grid takes
/// a tenth of a millisecond, of the order of the threads' hand-off and of
/// what other guests take from a shared machine: timed one block at a
/// time, size XS on two threads calibrated T = 4 faster than T = 1 and then
/// ran at 0.59-0.77x of it (notes/cpu-perf.md).
pub const MIN_TURN_SECONDS: f64 = 0.01;

/// How long a calibration times its candidates.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    /// Rounds before the time limit may end it.
    pub min: usize,
    /// Most rounds.
    pub max: usize,
    /// Seconds after which it stops once it has `min` rounds.
    pub seconds: f64,
    /// Whether every other round runs the candidates in reverse order, so
    /// that none always runs right after another.
    pub alternate: bool,
    /// From the third round on, a candidate besides the first whose best
    /// turn is more than this many times the fastest candidate's is not
    /// timed again, leaving the budget to the close ones
    /// (`f64::INFINITY`: every candidate every round). Two turns each
    /// first, as one turn may have met a neighbour's burst.
    pub keep_within: f64,
    /// How much slower per sweep than the first candidate a candidate not
    /// yet timed is assumed to run when its first turn is weighed against
    /// the budget.
    pub untimed: f64,
}

/// Each candidate's best of its `turns` ([`best_of`]), infinite for a
/// candidate not timed.
pub fn bests(turns: &[Vec<f64>]) -> Vec<f64> {
    turns.iter().map(|c| best_of(c)).collect()
}

/// The least of `turns`, infinite when there are none.
pub fn best_of(turns: &[f64]) -> f64 {
    turns.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The median of `turns` ([`crate::timing::median`]), infinite when there
/// are none, as an untimed candidate's best is.
pub fn median_of(turns: &[f64]) -> f64 {
    crate::timing::median(turns).unwrap_or(f64::INFINITY)
}

/// Times one turn of each candidate per calibration round (its block of
/// `sweeps[c]` sweeps, repeated to last [`MIN_TURN_SECONDS`]), the rounds
/// interleaved, after one untimed block of the first, and returns every
/// turn's seconds per sweep of each candidate on the slowest rank, in the
/// order timed (none for a candidate not timed; [`bests`] gives each
/// one's best); `None` when a stop request came (the rehearsal then sees
/// it). The first
/// candidate is always timed, in every round; no other turn, and no
/// further round, starts whose cost (estimated from the times so far)
/// would pass `budget`, so a candidate that would take too long is never
/// tried, and a candidate [`Rounds::keep_within`] leaves behind is not
/// timed again. With [`Rounds::alternate`] every other round runs them in
/// reverse order. `ready(solver, c)` readies candidate `c`. Collective.
pub fn turns_per_sweep(
    solver: &mut Solver<'_>,
    sweeps: &[usize],
    rounds: Rounds,
    budget: &Budget,
    ready: impl FnMut(&mut Solver<'_>, usize) -> Result<()>,
) -> Result<Option<Timed>> {
    turns_per_sweep_pruned(solver, sweeps, rounds, budget, ready, |_, _| false)
}

/// What a calibration timed ([`turns_per_sweep`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// Each candidate's seconds per sweep of the whole block, turn by turn
    /// (none for a candidate not timed).
    pub turns: Vec<Vec<f64>>,
    /// Each candidate's sample scale on the rank that sweeps the most of
    /// its block ([`Backend::sample_scale`]): 1 where the whole block was
    /// swept, or the candidate not timed.
    ///
    /// [`Backend::sample_scale`]: crate::backend::Backend::sample_scale
    pub scales: Vec<f64>,
}

impl Timed {
    /// The candidates timed, in order: each one's index, turns, and sample
    /// scale where it swept a sample (`None` for the whole block).
    pub fn timed(&self) -> impl Iterator<Item = (usize, &[f64], Option<f64>)> {
        self.turns
            .iter()
            .zip(&self.scales)
            .enumerate()
            .filter(|(_, (t, _))| !t.is_empty())
            .map(|(c, (t, &scale))| (c, t.as_slice(), (scale > 1.0).then_some(scale)))
    }
}

/// [`turns_per_sweep`], leaving out of the first round (and so of every
/// round) each candidate `c` besides the first for which `skip(turns, c)`
/// holds, given the turns timed before its own: the budget then goes to
/// the others. `skip` must decide alike on every rank from the same
/// (slowest-rank) times. A backend that samples its block
/// ([`Backend::sample`]) sweeps its sample, each turn's time scaled to the
/// whole block ([`Solver::timed_round`]), and the whole block again
/// afterwards. Collective.
///
/// [`Backend::sample`]: crate::backend::Backend::sample
pub fn turns_per_sweep_pruned(
    solver: &mut Solver<'_>,
    sweeps: &[usize],
    rounds: Rounds,
    budget: &Budget,
    ready: impl FnMut(&mut Solver<'_>, usize) -> Result<()>,
    skip: impl Fn(&[Vec<f64>], usize) -> bool,
) -> Result<Option<Timed>> {
    solver.backend.sample(true);
    let timed = timed_turns(solver, sweeps, rounds, budget, ready, skip);
    solver.backend.sample(false);
    timed
}

/// [`turns_per_sweep_pruned`] on the block as the backend now sweeps it.
fn timed_turns(
    solver: &mut Solver<'_>,
    sweeps: &[usize],
    rounds: Rounds,
    budget: &Budget,
    mut ready: impl FnMut(&mut Solver<'_>, usize) -> Result<()>,
    skip: impl Fn(&[Vec<f64>], usize) -> bool,
) -> Result<Option<Timed>> {
    let candidates = sweeps.len();
    // How many times a turn over the whole block each candidate's turn
    // over the sample is, the least of any rank (so that every rank
    // weighs a turn's cost alike); known once it is readied, and until
    // then taken as the least of those known (a sample's share depends on
    // its tiles), as the whole block before any.
    let mut scales: Vec<Option<f64>> = vec![None; candidates];
    let mut turns: Vec<Vec<f64>> = vec![Vec::new(); candidates];
    let mut dropped = vec![false; candidates];
    let started = Instant::now();
    let mut gosa = [0.0; crate::grid::decomp::MAX_DEPTH];
    // What a turn of candidate `c` is expected to take, from its own best
    // time or, not yet timed, the others'.
    let cost = |turns: &[Vec<f64>], scales: &[Option<f64>], c: usize| {
        let least = scales
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let scale = scales[c].unwrap_or(if least.is_finite() { least } else { 1.0 });
        let best: Vec<f64> = turns.iter().map(|t| best_of(t)).collect();
        let per_sweep = if best[c].is_finite() {
            best[c]
        } else {
            let slowest_other = best[1..]
                .iter()
                .copied()
                .filter(|b| b.is_finite())
                .fold(0.0, f64::max);
            let from_first = best[0] * rounds.untimed;
            if slowest_other > 0.0 {
                from_first.min(slowest_other * UNTIMED_AFTER_OTHERS)
            } else {
                from_first
            }
        };
        (per_sweep * sweeps[c] as f64 / scale).max(MIN_TURN_SECONDS)
    };
    // One untimed block of the first candidate: the first sweeps after
    // the fields were made pay their page faults (a block of 3x1250x3
    // points took 0.25 s, then 1.3 ms), which would make every other
    // candidate look too costly to try.
    ready(solver, 0)?;
    if solver.timed_round(&mut gosa[..sweeps[0]])?.1 {
        return Ok(None);
    }
    for round in 0..rounds.max {
        if round >= 2 {
            let fastest = turns
                .iter()
                .map(|t| best_of(t))
                .fold(f64::INFINITY, f64::min);
            for c in 1..candidates {
                dropped[c] |= best_of(&turns[c]) > fastest * rounds.keep_within;
            }
        }
        // With none but the first timed, further rounds would time only
        // it: nothing left to compare.
        if round > 0 && turns[1..].iter().all(Vec::is_empty) {
            break;
        }
        if round > 0 {
            let next: f64 = (0..candidates)
                .filter(|&c| !turns[c].is_empty() && !dropped[c])
                .map(|c| cost(&turns, &scales, c))
                .sum();
            let limit = budget.seconds(best_of(&turns[0]));
            if budget.spent(solver.comm) + next > limit {
                break;
            }
        }
        for turn in 0..candidates {
            let c = if rounds.alternate && round % 2 == 1 {
                candidates - 1 - turn
            } else {
                turn
            };
            if dropped[c] {
                continue;
            }
            if round == 0 && c > 0 {
                // Every rank has the same times, so all decide alike.
                let limit = budget.seconds(best_of(&turns[0]));
                if skip(&turns, c) || budget.spent(solver.comm) + cost(&turns, &scales, c) > limit {
                    continue;
                }
            } else if turns[c].is_empty() && c > 0 {
                continue;
            }
            ready(solver, c)?;
            scales[c] = Some(-solver.comm.max(-solver.backend.sample_scale(sweeps[c])));
            let sweeps = sweeps[c];
            // Blocks again until the turn lasts MIN_TURN_SECONDS (every rank
            // sees the same slowest-rank times, so all run as many).
            let (mut whole, mut took, mut swept) = (0.0, 0.0, 0);
            while swept == 0 || took < MIN_TURN_SECONDS {
                let (round, stop) = solver.timed_round(&mut gosa[..sweeps])?;
                if stop {
                    return Ok(None);
                }
                whole += round.whole;
                took += round.took;
                swept += sweeps;
            }
            turns[c].push(whole / swept as f64);
        }
        if round + 1 >= rounds.min
            && solver.comm.max(started.elapsed().as_secs_f64()) > rounds.seconds
        {
            break;
        }
    }
    // A candidate is readied (its scale known) only to be timed.
    let scales = scales.iter().map(|s| s.unwrap_or(1.0)).collect();
    Ok(Some(Timed { turns, scales }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Each candidate's best turn from [`turns_per_sweep`] ([`bests`]).
    fn best_per_sweep(
        solver: &mut Solver<'_>,
        sweeps: &[usize],
        rounds: Rounds,
        budget: &Budget,
        ready: impl FnMut(&mut Solver<'_>, usize) -> Result<()>,
    ) -> Result<Option<Vec<f64>>> {
        let timed = turns_per_sweep(solver, sweeps, rounds, budget, ready)?;
        Ok(timed.map(|t| bests(&t.turns)))
    }

    /// The winner is the fastest after the first, taken only beyond the
    /// margin; an untimed alternative (infinite) is never the winner.
    #[test]
    fn a_winner_must_be_clearly_faster_than_the_first() {
        assert_eq!(clear_winner(&[1.0, 0.9, 0.8]), (2, true));
        assert_eq!(clear_winner(&[1.0, 0.98, f64::INFINITY]), (1, false));
        assert_eq!(clear_winner(&[1.0, 1.5, 1.2]), (2, false));
        assert!(!any_other_timed(&[1.0, f64::INFINITY]));
        assert!(any_other_timed(&[1.0, f64::INFINITY, 2.0]));
    }

    /// The calibrations may take a tenth of the run as its sweeps
    /// estimate it, rehearsal included, and at least the floor.
    #[test]
    fn the_calibration_budget_is_a_share_of_the_run() {
        let budget = |length, warmup| Budget::since(Instant::now(), length, warmup);
        let long = budget(RunLength::Iterations(1000), 0);
        assert!((long.seconds(0.1) - 10.0).abs() < 1e-9);
        let short = budget(RunLength::Iterations(3), 3);
        assert_eq!(short.seconds(0.1), CALIBRATION_FLOOR_S);
        let timed = budget(RunLength::Seconds(60.0), 10);
        assert!((timed.seconds(2.0) - 8.0).abs() < 1e-9);
        assert_eq!(
            budget(RunLength::Seconds(1.0), 3).seconds(1e-4),
            CALIBRATION_FLOOR_S
        );
    }

    /// A block 9x9x9 points, `depth` layers deep, on one CPU thread, with
    /// its halo: what a calibration times.
    pub(crate) fn built(depth: usize) -> (Grid, Block, crate::backend::cpu::CpuBackend, Halo) {
        use crate::backend::cpu::{CpuBackend, CpuOptions};
        use crate::config::{Prefetch, Stores};
        use crate::grid::decomp::ProcGrid;
        let grid = Grid::new([9, 9, 9]).unwrap();
        let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0).with_depth(depth);
        let opts = CpuOptions {
            threads: 1,
            bind: crate::machine::threads::Bind::None,
            stores: Stores::Cached,
            prefetch: Prefetch::Off,
            tile_rows: None,
        };
        let mut cpu = CpuBackend::new(&grid, &block, &opts, [0, 1]).unwrap();
        let halo = Halo::new(&block, &mut cpu).unwrap();
        (grid, block, cpu, halo)
    }

    /// A calibration's solver over `built`'s block, backend and halo, on
    /// one process, never stopped.
    pub(crate) fn solver<'a>(
        (grid, block): (Grid, Block),
        cpu: &'a mut crate::backend::cpu::CpuBackend,
        halo: &'a mut Halo,
    ) -> Solver<'a> {
        Solver {
            comm: &crate::comm::SingleComm,
            backend: cpu,
            halo,
            grid,
            block,
            stop: StopFlag::never(),
            extras: Default::default(),
        }
    }

    /// Within its budget every candidate is timed; once the budget is
    /// spent only the first is (after its untimed block), and the others
    /// are never readied, so nothing of theirs is made or run.
    #[test]
    fn a_spent_budget_times_only_the_first_candidate() {
        let (grid, block, mut cpu, mut halo) = built(4);
        let mut solver = solver((grid, block), &mut cpu, &mut halo);
        let budget = |ago: u64| {
            let started = Instant::now() - std::time::Duration::from_secs(ago);
            Budget::since(started, RunLength::Iterations(10), 1)
        };
        let rounds = Rounds {
            min: 1,
            max: 1,
            seconds: 1.0,
            alternate: false,
            keep_within: f64::INFINITY,
            untimed: UNTIMED_SLOWDOWN,
        };
        let mut readied = Vec::new();
        let best = best_per_sweep(&mut solver, &[1, 2, 4], rounds, &budget(0), |_, c| {
            readied.push(c);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert!(best.iter().all(|b| b.is_finite() && *b > 0.0), "{best:?}");
        assert!(any_other_timed(&best));
        let mut readied = Vec::new();
        let spent = budget(10 * CALIBRATION_FLOOR_S as u64);
        let best = best_per_sweep(&mut solver, &[1, 2, 4], rounds, &spent, |_, c| {
            readied.push(c);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert!(best[0].is_finite() && !any_other_timed(&best), "{best:?}");
        assert!(readied.iter().all(|&c| c == 0), "{readied:?}");
        // Nor does it time the first again and again for nothing: one
        // round, after its untimed block.
        let mut readied = Vec::new();
        let many = Rounds {
            min: 5,
            max: 5,
            ..rounds
        };
        best_per_sweep(&mut solver, &[1, 2, 4], many, &spent, |_, c| {
            readied.push(c);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(readied, [0, 0], "{readied:?}");
    }

    /// Alternating, every other round runs the candidates in reverse order
    /// (after the first's untimed block); a candidate far behind the
    /// fastest after two rounds is not timed again, the first always is.
    #[test]
    fn alternate_rounds_reverse_the_order_and_the_far_behind_drop_out() {
        let (grid, block, mut cpu, mut halo) = built(4);
        let mut solver = solver((grid, block), &mut cpu, &mut halo);
        let budget = Budget::since(Instant::now(), RunLength::Iterations(1_000_000), 1);
        let rounds = Rounds {
            min: 4,
            max: 4,
            seconds: 60.0,
            alternate: true,
            keep_within: f64::INFINITY,
            untimed: UNTIMED_SLOWDOWN,
        };
        let mut readied = Vec::new();
        let turns = turns_per_sweep(&mut solver, &[1, 2, 4], rounds, &budget, |_, c| {
            readied.push(c);
            Ok(())
        })
        .unwrap()
        .unwrap()
        .turns;
        assert_eq!(
            readied,
            [0, 0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0],
            "{turns:?}"
        );
        assert!(turns.iter().all(|t| t.len() == 4), "{turns:?}");
        // Kept within no margin at all, every candidate but the first is
        // behind after its two turns.
        let rounds = Rounds {
            keep_within: 0.0,
            ..rounds
        };
        let turns = turns_per_sweep(&mut solver, &[1, 2, 4], rounds, &budget, |_, _| Ok(()))
            .unwrap()
            .unwrap()
            .turns;
        let counts: Vec<usize> = turns.iter().map(Vec::len).collect();
        assert_eq!(counts, [4, 2, 2], "the first is always timed");
        // A candidate skipped given the turns before it is never timed;
        // `skip` sees the first's turn, and is never asked of the first.
        let rounds = Rounds {
            keep_within: f64::INFINITY,
            ..rounds
        };
        let asked = std::cell::RefCell::new(Vec::new());
        let turns = turns_per_sweep_pruned(
            &mut solver,
            &[1, 2, 4],
            rounds,
            &budget,
            |_, _| Ok(()),
            |turns, c| {
                asked.borrow_mut().push(c);
                assert_eq!(turns[0].len(), 1);
                c == 1
            },
        )
        .unwrap()
        .unwrap()
        .turns;
        let counts: Vec<usize> = turns.iter().map(Vec::len).collect();
        assert_eq!(counts, [4, 0, 4]);
        assert_eq!(asked.into_inner(), [1, 2]);
    }

    /// Whether a candidate not yet timed gets its first turn within what
    /// is left of the budget depends on how much slower than the first it
    /// is assumed to be ([`Rounds::untimed`]).
    #[test]
    fn an_untimed_candidate_is_weighed_by_the_slowdown_assumed() {
        let (grid, block, mut cpu, mut halo) = built(4);
        let mut solver = solver((grid, block), &mut cpu, &mut halo);
        let rounds = |untimed: f64| Rounds {
            min: 1,
            max: 1,
            seconds: 1.0,
            alternate: false,
            keep_within: f64::INFINITY,
            untimed,
        };
        for (untimed, timed) in [(1.0, true), (1e9, false)] {
            // A second of the floor left: a turn of a tiny grid's blocks
            // (MIN_TURN_SECONDS) fits it, a billion times its sweep not.
            let ago = std::time::Duration::from_secs_f64(CALIBRATION_FLOOR_S - 1.0);
            let budget = Budget::since(Instant::now() - ago, RunLength::Iterations(10), 1);
            let best = best_per_sweep(
                &mut solver,
                &[1, 4],
                rounds(untimed),
                &budget,
                |_, _| Ok(()),
            )
            .unwrap()
            .unwrap();
            assert_eq!(best[1].is_finite(), timed, "{untimed}: {best:?}");
        }
    }

    #[test]
    fn medians_and_bests_of_turns() {
        assert_eq!(median_of(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_of(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median_of(&[]), f64::INFINITY);
        assert_eq!(best_of(&[3.0, 1.0]), 1.0);
        assert_eq!(best_of(&[]), f64::INFINITY);
    }
}
