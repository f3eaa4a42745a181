//! How many sweeps a run makes per halo exchange: `--temporal auto`'s
//! choice, and the warning for an explicit `--temporal T` that cannot fit
//! the cache.
//!
//! Temporal blocking pays only when the wavefront saves memory traffic and
//! its cached sweeps are faster than a sweep fed from memory. The first is
//! a matter of sizes: fields that the last-level cache holds (at most half
//! of it, [`LastLevel::holds`]) are read from it every sweep anyway (a gain
//! remains where several threads or ranks meet once per sweep, which
//! blocking makes once per T sweeps: those runs time the candidates), and a
//! wavefront whose tiles of
//! [`MIN_TILE_ROWS`] rows do not fit a thread's share of that cache falls
//! out of it (shorter tiles cut level 1's memory runs short: 8-row tiles
//! ran at 0.93x of the classic sweep, notes/cpu-perf.md). Those cases the
//! model settles with T = 1. The second depends on how fast a core runs
//! the row kernel from the cache against what the memory gives it (on a
//! Zen 1 with two threads T = 8 lost 17 %, on a Zen 4 T = 4 gained 1.5x),
//! which no sysfs file tells: then the run times one block of each
//! candidate T, interleaved over a few rounds, before the rehearsal, and
//! takes the fastest, T = 1 unless another is clearly faster. Every rank
//! takes the same T: the model's candidates are the ones every rank's
//! model allows, the times are the slowest rank's.
//!
//! A candidate is timed only when the run could afford it: its buffers
//! must not outweigh the classic sweep's memory (`outweighs`) and must
//! fit every node and process (`crate::preflight::fits`), and its blocks
//! must fit the time the calibrations may take, a share of the run
//! ([`Budget`]).

use crate::backend::{self, Backend};
use crate::comm::{self, Comm};
use crate::config::{RunConfig, RunLength};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use crate::halo::Halo;
use crate::machine::cache::{LastLevel, PerCore};
use crate::machine::memory::{Footprint, GIB};
use crate::signals::StopFlag;
use crate::solver::Solver;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The sweeps per exchange `--temporal auto` tries beside the classic one.
pub const AUTO_CANDIDATES: [usize; 3] = [2, 4, 8];
pub use crate::backend::cpu::wavefront::MIN_TILE_ROWS;
/// How much faster per sweep a candidate must calibrate than the starting
/// one (the classic sweep, the starting kernel) to be taken: more than the
/// spread of two timings of the same block on a quiet machine, so that
/// noise does not pick a choice that does not pay.
pub const MARGIN: f64 = 0.03;
/// How long `--temporal auto` times its candidates: at most three rounds
/// (one block of each candidate per round), two once 1.5 s have passed.
const ROUNDS: Rounds = Rounds {
    min: 2,
    max: 3,
    seconds: 1.5,
    alternate: false,
};

/// The sweeps per exchange of a run and why, as the record states it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TemporalChoice {
    /// What was asked: `auto` or the number given.
    pub asked: Asked,
    /// Sweeps per halo exchange the run made.
    pub sweeps: usize,
    /// Why, in one sentence (for an explicit T, the warning that its
    /// working set does not fit).
    pub reason: String,
    /// The calibration's seconds per sweep of each candidate (the slowest
    /// rank's best round); empty when the model decided.
    #[serde(default)]
    pub trials: Vec<Trial>,
}

/// What `--temporal` asked for; in the record the text `auto` or the
/// number, as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `--temporal auto`.
    Auto,
    /// `--temporal T`.
    Fixed(usize),
}

impl Serialize for Asked {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Asked::Auto => s.serialize_str("auto"),
            Asked::Fixed(t) => s.serialize_str(&t.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Asked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Asked, D::Error> {
        let text = String::deserialize(d)?;
        if text == "auto" {
            return Ok(Asked::Auto);
        }
        text.parse().map(Asked::Fixed).map_err(|_| {
            serde::de::Error::custom(format!(
                "temporal asked '{text}' is neither auto nor a number"
            ))
        })
    }
}

/// One candidate's calibration.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Trial {
    /// Sweeps per exchange.
    pub sweeps: usize,
    /// Seconds per sweep: the best round's, on the slowest rank.
    pub sweep_s: f64,
}

/// What one rank's model allows.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct View {
    /// Sweeps per exchange worth timing, 1 first.
    candidates: Vec<usize>,
    /// Why the others are left out (empty when none is).
    reason: String,
}

/// Bytes of the wavefront's working set per thread for `sweeps` sweeps of
/// tiles of `rows` rows of `nk` values: the coefficients' and `p`'s rows
/// of the `sweeps` planes in flight (as `wavefront::tile_rows` counts).
fn working_set(nk: usize, sweeps: usize, rows: usize) -> usize {
    rows.saturating_mul(nk * 4 * 13 * sweeps)
}

/// MiB, for messages.
fn mib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// This rank's caches and block, as the model sees them.
struct Machine {
    /// Values per row of the block's arrays.
    nk: usize,
    /// One thread's share of the cache (`PerCore::budget_bytes`).
    budget: usize,
    /// Rows per tile asked for (`--tile-rows`), else [`MIN_TILE_ROWS`].
    rows: usize,
    /// Whether `rows` came from `--tile-rows`.
    given: bool,
}

impl Machine {
    fn of(cfg: &RunConfig, block: &Block) -> Machine {
        Machine {
            nk: block.local_dims()[2],
            budget: PerCore::detect().budget_bytes(),
            rows: cfg.tile_rows.unwrap_or(MIN_TILE_ROWS),
            given: cfg.tile_rows.is_some(),
        }
    }

    /// Whether `sweeps` sweeps' tiles fit one thread's cache share.
    fn fits(&self, sweeps: usize) -> bool {
        working_set(self.nk, sweeps, self.rows) <= self.budget
    }

    /// The one-line warning for an explicit `sweeps` that does not fit.
    fn warning(&self, sweeps: usize, allowed: usize) -> Option<String> {
        if sweeps < 2 || self.fits(sweeps) {
            return None;
        }
        let largest = (1..sweeps).rev().find(|&t| t <= allowed && self.fits(t));
        Some(format!(
            "--temporal {sweeps}: the wavefront's tiles of {} rows need {:.1} MiB of cache per \
             thread, more than a thread's {:.1} MiB share of this machine's cache, so its \
             sweeps come from memory and it may run slower than --temporal 1; {}",
            self.rows,
            mib(working_set(self.nk, sweeps, self.rows)),
            mib(self.budget),
            match largest {
                _ if self.given => "give fewer --tile-rows, or use --temporal auto".to_string(),
                Some(t) if t > 1 => format!("--temporal {t} fits, or use --temporal auto"),
                _ => "use --temporal 1 or --temporal auto".to_string(),
            }
        ))
    }
}

/// Why the node's `fields` (bytes) are swept classically without timing
/// anything, if they are: in the cache `llc` blocking saves no memory
/// traffic, but a run of several threads or ranks also meets once per
/// sweep (the threads' hand-off, the halo exchange) and once per T sweeps
/// when blocked: on a 2-vCPU guest a 10x18x98 grid ran 2.3x faster on two
/// threads with T = 8 (notes/cpu-perf.md). So only a `lone` thread of one
/// rank is settled, and only when the cache holds the fields from sweep to
/// sweep ([`LastLevel::holds`]): size S, 28 MiB in a 32 MiB L3, ran 1.4-1.6x
/// faster with T = 8 on one thread.
fn classic_in_cache(llc: &LastLevel, fields: usize, lone: bool) -> Option<String> {
    (lone && llc.holds(fields)).then(|| {
        format!(
            "the node's fields ({:.1} MiB) take at most half its last-level cache ({:.1} MiB), so \
             every sweep already reads them from the cache, and one thread of one rank has \
             no hand-off or exchange per sweep to save",
            mib(fields),
            mib(llc.node_bytes)
        )
    })
}

/// Memory a blocked candidate may hold beyond the classic sweep's when
/// that is more than the classic sweep holds itself: the wavefront's
/// buffers of a small grid on many threads (a few MiB per thread at
/// T = 8) are worth timing however small its fields.
const EXTRA_MEMORY_FLOOR: u128 = 64 << 20;

/// Why a wavefront of `sweeps` sweeps, whose rank needs `blocked` against
/// `classic` for the classic sweep, is not worth timing, if it is not: its
/// own buffers (the deeper ghost layers, each thread's levels and edge
/// rows) would hold more than the classic sweep's whole need, and more
/// than [`EXTRA_MEMORY_FLOOR`]. Such buffers cannot stay in any cache, so
/// the wavefront would move more memory than it saves, and allocating
/// them only to time them cost 11.5 GB and 16 s before a 1 s run of a
/// 100000x3x3 grid, whose 100000 planes each have an edge buffer.
fn outweighs(sweeps: usize, classic: Footprint, blocked: Footprint) -> Option<String> {
    let extra = blocked.resident.saturating_sub(classic.resident);
    (extra > classic.resident.max(EXTRA_MEMORY_FLOOR)).then(|| {
        let gib = |b: u128| b as f64 / GIB;
        format!(
            "the wavefront of {sweeps} sweeps would hold {:.2} GiB on a rank against {:.2} GiB \
             for the classic sweep: its buffers outweigh the fields whose memory traffic it \
             saves",
            gib(blocked.resident),
            gib(classic.resident)
        )
    })
}

/// The model's view on this rank for `--temporal auto` (see the module's
/// doc): the candidates up to `allowed` sweeps (what the process grid
/// permits) worth timing, for this rank of `comm` (whose node's ranks share
/// its cache), whose memory `need` states for a block of each depth.
fn model(
    cfg: &RunConfig,
    block: &Block,
    comm: &dyn Comm,
    allowed: usize,
    need: &dyn Fn(&Block) -> Footprint,
) -> View {
    let only_classic = |reason: String| View {
        candidates: vec![1],
        reason,
    };
    if !backend::Capabilities::of(cfg.backend).keeps(AUTO_CANDIDATES[0]) {
        return only_classic(backend::Capabilities::stated(cfg.backend));
    }
    let m = Machine::of(cfg, block);
    let fields = block
        .local_dims()
        .iter()
        .product::<usize>()
        .saturating_mul(FIELDS * 4)
        .saturating_mul(comm.node_size());
    let lone = cfg.threads == 1 && comm.size() == 1;
    if let Some(reason) = classic_in_cache(&LastLevel::detect(), fields, lone) {
        return only_classic(reason);
    }
    let mut candidates = vec![1];
    candidates.extend(
        AUTO_CANDIDATES
            .iter()
            .copied()
            .filter(|&t| t <= allowed && m.fits(t)),
    );
    // Each candidate's memory is worked out only for those the cache
    // allows: the classic block's need, then each deeper one's.
    let mut heavy = None;
    if candidates.len() > 1 {
        let classic = need(&block.with_depth(1));
        candidates.retain(|&t| {
            let why = (t > 1)
                .then(|| outweighs(t, classic, need(&block.with_depth(t))))
                .flatten();
            if let Some(why) = why {
                heavy.get_or_insert(why);
                return false;
            }
            true
        });
    }
    let reason = match candidates.len() {
        1 if allowed < AUTO_CANDIDATES[0] => {
            "the process grid leaves blocks one point thick along a split dimension".into()
        }
        1 if heavy.is_some() => heavy.unwrap_or_default(),
        1 => format!(
            "the wavefront of {} sweeps needs {:.1} MiB of cache per thread for tiles of {} \
             rows, more than a thread's {:.1} MiB share",
            AUTO_CANDIDATES[0],
            mib(working_set(m.nk, AUTO_CANDIDATES[0], m.rows)),
            m.rows,
            mib(m.budget)
        ),
        _ => String::new(),
    };
    View { candidates, reason }
}

/// How a run will settle its sweeps per exchange, decided collectively
/// before its block is made ([`Plan::of`]) and completed once the backend
/// exists ([`Plan::settle`]).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Sweeps per exchange to time (1 first); one entry when decided.
    candidates: Vec<usize>,
    /// The choice when already made (the model's, or a fixed T's warning).
    decided: Option<TemporalChoice>,
}

impl Plan {
    /// The plan of the run `cfg` (its backend decided): a fixed T as given (with
    /// its warning when its working set does not fit), `auto` from every
    /// rank's model, less the candidates whose memory (`need` of this
    /// rank's block as deep as each) does not fit a node or a process
    /// (`crate::preflight::fits`): a candidate is timed only when the run
    /// could hold it. Collective.
    pub fn of(
        cfg: &RunConfig,
        grid: &Grid,
        comm: &dyn Comm,
        need: &dyn Fn(&Block) -> Footprint,
    ) -> Result<Plan> {
        let block = Block::of(grid, &cfg.procs(), comm.rank());
        if !cfg.temporal_auto {
            if cfg.temporal == 1 {
                return Ok(Plan {
                    candidates: vec![1],
                    decided: None,
                });
            }
            let mine = Machine::of(cfg, &block).warning(cfg.temporal, cfg.temporal);
            // Rank 0's words, said once; any rank's warning counts.
            let warning = comm::decide(comm, "the temporal warning", &mine, |all| {
                Ok(all.into_iter().flatten().next())
            })?;
            return Ok(Plan {
                candidates: vec![cfg.temporal],
                decided: warning.map(|reason| TemporalChoice {
                    asked: Asked::Fixed(cfg.temporal),
                    sweeps: cfg.temporal,
                    reason,
                    trials: Vec::new(),
                }),
            });
        }
        let mine = model(cfg, &block, comm, cfg.temporal, need);
        let (mut candidates, reason) =
            comm::decide(comm, "the temporal candidates", &mine, |all| {
                let reason = all
                    .iter()
                    .find(|v| !v.reason.is_empty())
                    .map(|v| v.reason.clone());
                let candidates: Vec<usize> = all[0]
                    .candidates
                    .iter()
                    .copied()
                    .filter(|t| all.iter().all(|v| v.candidates.contains(t)))
                    .collect();
                Ok((candidates, reason))
            })?;
        // Every rank holds the same candidates: each check is collective.
        let mut refused = None;
        for t in candidates.clone().into_iter().filter(|&t| t > 1) {
            if !crate::preflight::fits(need(&block.with_depth(t)), comm)? {
                candidates.retain(|&c| c != t);
                refused.get_or_insert(t);
            }
        }
        let reason = match refused {
            Some(t) if candidates.len() == 1 => Some(format!(
                "the wavefront of {t} sweeps would need more memory than a node or a \
                 process has"
            )),
            _ => reason,
        };
        let decided = (candidates.len() == 1).then(|| TemporalChoice {
            asked: Asked::Auto,
            sweeps: 1,
            reason: format!(
                "T=1 from the model: {}",
                reason.unwrap_or_else(|| "no blocked candidate fits every rank".into())
            ),
            trials: Vec::new(),
        });
        Ok(Plan {
            candidates,
            decided,
        })
    }

    /// Ghost layers the block is made with: the most sweeps a candidate
    /// takes.
    pub fn depth(&self) -> usize {
        self.candidates.iter().copied().max().unwrap_or(1)
    }

    /// Completes the choice: with several candidates, times them on
    /// `backend` and `halo` (made for `block`, [`Plan::depth`] deep) and,
    /// when a shallower T wins, makes all three again for it; the fields
    /// are left in their initial state. Returns them with what the record
    /// says of the choice. Collective.
    pub fn settle(self, run: Run<'_>, mut built: Built) -> Result<(Built, Option<TemporalChoice>)> {
        if self.candidates.len() < 2 {
            return Ok((built, self.decided));
        }
        let best = calibrate(&mut built.solver(run), &self.candidates, run.budget)?;
        // Candidates the budget left untimed are no trials.
        let trials: Vec<Trial> = self
            .candidates
            .iter()
            .zip(best.iter().flatten())
            .filter(|(_, s)| s.is_finite())
            .map(|(&sweeps, &sweep_s)| Trial { sweeps, sweep_s })
            .collect();
        let (chosen, reason) = match best {
            // The run ends in its rehearsal; no time goes into a rebuild.
            None => (
                built.block.depth,
                "a stop signal came during the calibration".to_string(),
            ),
            Some(best) if !any_other_timed(&best) => {
                (1, untimed(run.budget, &self.candidates, &best))
            }
            Some(best) => choose(&self.candidates, &best),
        };
        if chosen == built.block.depth {
            built.backend.reset()?;
        } else {
            let block = built.block.with_depth(chosen);
            // The deeper buffers go before the new ones are made.
            drop(built);
            let mut backend = backend::create(run.cfg, run.grid, &block, run.comm)?;
            let halo = Halo::new(&block, backend.as_mut())?;
            built = Built {
                block,
                backend,
                halo,
            };
        }
        tracing::info!(chosen, ?trials, "temporal auto");
        Ok((
            built,
            Some(TemporalChoice {
                asked: Asked::Auto,
                sweeps: chosen,
                reason,
                trials,
            }),
        ))
    }
}

/// What [`Plan::settle`] works with, besides what it rebuilds.
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
/// a round of four kernels of size M on a slow guest.
pub const CALIBRATION_FLOOR_S: f64 = 1.0;
/// How much slower per sweep than the first candidate a candidate not
/// yet timed is assumed to run when its first turn is weighed against the
/// budget (a wavefront over thin planes measured 3.7x slower per sweep).
const UNTIMED_SLOWDOWN: f64 = 4.0;

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
        Budget {
            started: Instant::now(),
            length: cfg.length,
            warmup: cfg.warmup,
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
    /// no fault injection, progress, rehearsal check or checkpoints.
    pub fn solver<'a>(&'a mut self, run: Run<'a>) -> Solver<'a> {
        Solver {
            comm: run.comm,
            backend: self.backend.as_mut(),
            halo: &mut self.halo,
            grid: *run.grid,
            block: self.block,
            stop: run.stop.clone(),
            fault: None,
            progress: None,
            check_rehearsal: None,
            memory: Default::default(),
            checkpoint: None,
        }
    }
}

/// The fastest of `candidates` (1 first) by their seconds per sweep
/// `best`: T=1 unless a blocked one is more than [`MARGIN`] faster; with
/// the reason in words.
fn choose(candidates: &[usize], best: &[f64]) -> (usize, String) {
    let classic = best[0];
    let (other, taken) = clear_winner(best);
    let (sweeps, fastest) = (candidates[other], best[other]);
    let ms = |s: f64| s * 1e3;
    if taken {
        let why = format!(
            "T={sweeps} calibrated fastest: {:.3} ms per sweep against {:.3} for the classic \
             sweep ({:.2}x)",
            ms(fastest),
            ms(classic),
            classic / fastest
        );
        (sweeps, why)
    } else {
        let why = format!(
            "T=1 calibrated: the fastest blocked candidate, T={sweeps}, took {:.3} ms per sweep \
             against {:.3} for the classic sweep, not {:.0}% less",
            ms(fastest),
            ms(classic),
            MARGIN * 100.0
        );
        (1, why)
    }
}

/// Why T=1 was taken when the budget left no blocked candidate to time:
/// with `best`, the classic sweep's time, the first of `candidates`.
fn untimed(budget: &Budget, candidates: &[usize], best: &[f64]) -> String {
    format!(
        "T=1 untimed: a block of T={} would take longer than the calibration may (at most {:.2} s: \
         {:.0}% of the run's estimated time, or {CALIBRATION_FLOOR_S} s), the classic sweep \
         taking {:.3} ms",
        candidates[1],
        budget.seconds(best[0]),
        CALIBRATION_SHARE * 100.0,
        best[0] * 1e3
    )
}

/// Times one block of each of `candidates` sweeps per round within
/// `budget` (see [`best_per_sweep`]).
fn calibrate(
    solver: &mut Solver<'_>,
    candidates: &[usize],
    budget: &Budget,
) -> Result<Option<Vec<f64>>> {
    best_per_sweep(solver, candidates, ROUNDS, budget, |_, _| Ok(()))
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
}

/// Times one turn of each candidate per calibration round (its block of
/// `sweeps[c]` sweeps, repeated to last [`MIN_TURN_SECONDS`]), the rounds
/// interleaved, after one untimed block of the first, and returns each one's best seconds per sweep on the
/// slowest rank, infinite for a candidate not timed; `None` when a stop
/// request came (the rehearsal then sees it). The first candidate is
/// always timed; no other turn, and no further round, starts whose cost
/// (estimated from the times so far) would pass `budget`, so a candidate
/// that would take too long is never tried. `ready(solver, c)` readies
/// candidate `c`. Collective.
pub fn best_per_sweep(
    solver: &mut Solver<'_>,
    sweeps: &[usize],
    rounds: Rounds,
    budget: &Budget,
    mut ready: impl FnMut(&mut Solver<'_>, usize) -> Result<()>,
) -> Result<Option<Vec<f64>>> {
    let candidates = sweeps.len();
    let mut best = vec![f64::INFINITY; candidates];
    let started = Instant::now();
    let mut gosa = [0.0; crate::grid::decomp::MAX_DEPTH];
    // What a turn of candidate `c` is expected to take, from its own best
    // time or, not yet timed, the first candidate's.
    let cost = |best: &[f64], c: usize| {
        let per_sweep = if best[c].is_finite() {
            best[c]
        } else {
            best[0] * UNTIMED_SLOWDOWN
        };
        (per_sweep * sweeps[c] as f64).max(MIN_TURN_SECONDS)
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
        if round > 0 {
            let next: f64 = (0..candidates)
                .filter(|&c| best[c].is_finite())
                .map(|c| cost(&best, c))
                .sum();
            let limit = budget.seconds(best[0]);
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
            if round == 0 && c > 0 {
                // Every rank has the same times, so all decide alike.
                let limit = budget.seconds(best[0]);
                if budget.spent(solver.comm) + cost(&best, c) > limit {
                    continue;
                }
            } else if !best[c].is_finite() && c > 0 {
                continue;
            }
            ready(solver, c)?;
            let sweeps = sweeps[c];
            // Blocks again until the turn lasts MIN_TURN_SECONDS (every rank
            // sees the same slowest-rank times, so all run as many).
            let (mut seconds, mut swept) = (0.0, 0);
            while swept == 0 || seconds < MIN_TURN_SECONDS {
                let (s, stop) = solver.timed_round(&mut gosa[..sweeps])?;
                if stop {
                    return Ok(None);
                }
                seconds += s;
                swept += sweeps;
            }
            best[c] = best[c].min(seconds / swept as f64);
        }
        if round + 1 >= rounds.min
            && solver.comm.max(started.elapsed().as_secs_f64()) > rounds.seconds
        {
            break;
        }
    }
    Ok(Some(best))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(nk: usize, budget: usize, rows: usize) -> Machine {
        Machine {
            nk,
            budget,
            rows,
            given: false,
        }
    }

    #[test]
    fn a_wavefront_fits_while_its_tiles_do() {
        // Size M rows (258 values), tiles of 16 rows: 215 KB per level.
        let m = machine(258, 1 << 20, MIN_TILE_ROWS);
        assert!(m.fits(4));
        assert!(!m.fits(5));
        assert_eq!(m.warning(4, 32), None);
        assert_eq!(m.warning(1, 32), None);
        let w = m.warning(8, 32).expect("8 sweeps do not fit 1 MiB");
        assert!(w.contains("--temporal 4 fits"), "{w}");
        assert!(!w.contains('\n'), "{w}");
        // Nothing above 1 fits: the advice is T=1 or auto.
        let tiny = machine(258, 100 << 10, MIN_TILE_ROWS);
        let w = tiny.warning(2, 32).unwrap();
        assert!(w.contains("use --temporal 1 or --temporal auto"), "{w}");
        let given = Machine {
            given: true,
            ..machine(258, 1 << 20, 64)
        };
        assert!(given.warning(2, 32).unwrap().contains("fewer --tile-rows"));
    }

    /// One thread of one rank sweeps fields in half the cache classically
    /// without timing; fuller (size S in a 32 MiB L3), or with company, the
    /// candidates are timed.
    #[test]
    fn only_a_lone_thread_in_half_the_cache_is_settled() {
        let llc = LastLevel {
            instance_bytes: 32 << 20,
            node_bytes: 32 << 20,
        };
        let why = classic_in_cache(&llc, 16 << 20, true).expect("half the cache");
        assert!(
            why.contains("16.0 MiB") && why.contains("32.0 MiB"),
            "{why}"
        );
        // Size S: 64x64x128 points of 14 fields.
        let s = 64 * 64 * 128 * FIELDS * 4;
        assert_eq!(classic_in_cache(&llc, s, true), None);
        assert_eq!(classic_in_cache(&llc, 1 << 20, false), None);
    }

    /// A wavefront whose own buffers would hold more than the classic
    /// sweep's whole need (and more than the floor a small grid on many
    /// threads may take) is not timed; one that adds less is.
    #[test]
    fn a_wavefront_heavier_than_the_classic_sweep_is_not_timed() {
        let mib = |m: u128| Footprint {
            resident: m << 20,
            mapped: m << 20,
        };
        // 100000x3x3 on two threads, T=2: 1.8 GiB against 0.26.
        let why = outweighs(2, mib(266), mib(1843)).expect("7x the classic sweep");
        assert!(
            why.contains("1.80 GiB") && why.contains("0.26 GiB"),
            "{why}"
        );
        assert!(!why.contains('\n'), "{why}");
        // Size M's deeper ghost layers and levels add a few percent.
        assert_eq!(outweighs(8, mib(470), mib(520)), None);
        // Twice the classic sweep is the most a large one may take...
        assert_eq!(outweighs(4, mib(400), mib(800)), None);
        assert!(outweighs(4, mib(400), mib(801)).is_some());
        // ...and a small one may add the floor whatever its fields.
        assert_eq!(outweighs(8, mib(4), mib(68)), None);
        assert!(outweighs(8, mib(4), mib(69)).is_some());
    }

    /// The calibrations may take a tenth of the run as its sweeps
    /// estimate it, rehearsal included, and at least the floor.
    #[test]
    fn the_calibration_budget_is_a_share_of_the_run() {
        let budget = |length, warmup| Budget {
            started: Instant::now(),
            length,
            warmup,
        };
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
    fn built(depth: usize) -> (Grid, Block, crate::backend::cpu::CpuBackend, Halo) {
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

    /// Within its budget every candidate is timed; once the budget is
    /// spent only the first is (after its untimed block), and the others
    /// are never readied, so nothing of theirs is made or run.
    #[test]
    fn a_spent_budget_times_only_the_first_candidate() {
        let (grid, block, mut cpu, mut halo) = built(4);
        let comm = crate::comm::SingleComm;
        let mut solver = Solver {
            comm: &comm,
            backend: &mut cpu,
            halo: &mut halo,
            grid,
            block,
            stop: StopFlag::never(),
            fault: None,
            progress: None,
            check_rehearsal: None,
            memory: Default::default(),
            checkpoint: None,
        };
        let budget = |ago: u64| Budget {
            started: Instant::now() - std::time::Duration::from_secs(ago),
            length: RunLength::Iterations(10),
            warmup: 1,
        };
        let rounds = Rounds {
            min: 1,
            max: 1,
            seconds: 1.0,
            alternate: false,
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
        let why = untimed(&spent, &[1, 2, 4], &best);
        assert!(why.starts_with("T=1 untimed: a block of T=2"), "{why}");
    }

    #[test]
    fn a_blocked_candidate_must_be_clearly_faster() {
        let c = [1, 2, 4, 8];
        assert_eq!(choose(&c, &[1.0, 0.9, 0.7, 0.8]).0, 4);
        // 2 % faster is within the margin: the classic sweep.
        let (t, why) = choose(&c, &[1.0, 0.99, 0.98, 1.2]);
        assert_eq!(t, 1);
        assert!(why.contains("T=4"), "{why}");
        assert_eq!(choose(&c, &[1.0, 1.1, 1.2, 1.3]).0, 1);
    }
}
