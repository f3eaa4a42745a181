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

use crate::backend::{self, Backend};
use crate::comm::{self, Comm};
use crate::config::{BackendKind, RunConfig};
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use crate::halo::Halo;
use crate::machine::cache::{LastLevel, PerCore};
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

/// The model's view on this rank for `--temporal auto` (see the module's
/// doc): the candidates up to `allowed` sweeps (what the process grid
/// permits) worth timing, for this rank of `comm` (whose node's ranks share
/// its cache).
fn model(cfg: &RunConfig, block: &Block, comm: &dyn Comm, allowed: usize) -> View {
    let only_classic = |reason: String| View {
        candidates: vec![1],
        reason,
    };
    if cfg.backend == BackendKind::Gpu {
        return only_classic("GPU ranks keep one ghost layer".into());
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
    let reason = match candidates.len() {
        1 if allowed < AUTO_CANDIDATES[0] => {
            "the process grid leaves blocks one point thick along a split dimension".into()
        }
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
    /// rank's model. Collective.
    pub fn of(cfg: &RunConfig, grid: &Grid, comm: &dyn Comm) -> Result<Plan> {
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
        let mine = model(cfg, &block, comm, cfg.temporal);
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
            let decided = (candidates.len() == 1).then(|| TemporalChoice {
                asked: Asked::Auto,
                sweeps: 1,
                reason: format!(
                    "T=1 from the model: {}",
                    reason.unwrap_or_else(|| "no blocked candidate fits every rank".into())
                ),
                trials: Vec::new(),
            });
            Ok((candidates, decided))
        })
        .map(|(candidates, decided)| Plan {
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
        let best = calibrate(&mut built.solver(run), &self.candidates)?;
        let trials: Vec<Trial> = self
            .candidates
            .iter()
            .zip(best.iter().flatten())
            .map(|(&sweeps, &sweep_s)| Trial { sweeps, sweep_s })
            .collect();
        let (chosen, reason) = match best {
            // The run ends in its rehearsal; no time goes into a rebuild.
            None => (
                built.block.depth,
                "a stop signal came during the calibration".to_string(),
            ),
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

/// Times one block of each of `candidates` sweeps per round (see
/// [`best_per_sweep`]).
fn calibrate(solver: &mut Solver<'_>, candidates: &[usize]) -> Result<Option<Vec<f64>>> {
    best_per_sweep(solver, candidates.len(), ROUNDS, |_, c| Ok(candidates[c]))
}

/// The fastest of the candidates after the first by their seconds per
/// sweep `best`, and whether it is more than [`MARGIN`] faster than the
/// first (and so taken).
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

/// Times one turn of each of `candidates` candidates per calibration
/// round (its block, repeated to last [`MIN_TURN_SECONDS`]), the rounds
/// interleaved, and returns each one's best seconds per sweep on the
/// slowest rank; `None` when a stop request came (the
/// rehearsal then sees it). `ready(solver, c)` readies candidate `c` and
/// returns its sweeps per round. Collective.
pub fn best_per_sweep(
    solver: &mut Solver<'_>,
    candidates: usize,
    rounds: Rounds,
    mut ready: impl FnMut(&mut Solver<'_>, usize) -> Result<usize>,
) -> Result<Option<Vec<f64>>> {
    let mut best = vec![f64::INFINITY; candidates];
    let started = Instant::now();
    let mut gosa = [0.0; crate::grid::decomp::MAX_DEPTH];
    for round in 0..rounds.max {
        for turn in 0..candidates {
            let c = if rounds.alternate && round % 2 == 1 {
                candidates - 1 - turn
            } else {
                turn
            };
            let sweeps = ready(solver, c)?;
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
