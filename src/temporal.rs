//! How many sweeps a run makes per halo exchange: `--temporal auto`'s
//! choice, and the warning for an explicit `--temporal T` that cannot fit
//! the cache.
//!
//! Temporal blocking pays only when the wavefront saves traffic to a
//! slower level of the memory and its cached sweeps are faster than a
//! sweep fed from there. The first is a matter of sizes: fields that a
//! core's private cache holds (at most half of it, [`PerCore::holds`]) are
//! read from it every sweep anyway (a gain remains where several threads
//! or ranks meet once per sweep, which blocking makes once per T sweeps:
//! those runs time the candidates), and a wavefront whose tiles of
//! [`least_tile_rows`] rows do not fit a thread's share of the cache falls
//! out of it (shorter tiles cut level 1's memory runs short: 8-row tiles
//! ran at 0.93x of the classic sweep, notes/cpu-perf.md). Those cases the
//! model settles with T = 1. Fields that only the last-level cache holds
//! are not settled: on a Xeon guest a sweep of 26x34x97 (4.8 MB, beyond
//! its 2 MiB L2, inside its L3) ran at 0.4x of one from the L2, and T = 8
//! 1.9x faster than T = 1, while on a Zen 3 guest the same grid ran
//! T = 2..8 at 0.8x. The second depends on how fast a core runs the row
//! kernel from its cache against what the next level gives it (on a Zen 1
//! with two threads T = 8 lost 17 %, on a Zen 4 T = 4 gained 1.5x), which
//! no sysfs file tells: then the run times a block of each candidate T
//! (2, 3, 4, 6, 8, 12 and 16 where their tiles fit), each with the tile
//! heights it may start with, one per cache its tiles may live in
//! (`Backend::tile_starts`: timed all with the deepest one's tiles, T = 16's
//! 32-row tiles won the calibration at size M on a Xeon guest and then ran
//! at 0.64x of T = 4 with its own; timed with the private cache's heights
//! alone, T = 4 won at M on a Zen 4 guest and ran at 0.71x of T = 8 with
//! the last level's), in
//! rounds whose order is reversed every other round, the far slower
//! dropped after two turns, before the rehearsal, and takes the fastest
//! by its best turn, T = 1 unless another is clearly faster by its best
//! turn and faster by its median. Every rank takes the same T: the
//! model's candidates are the ones every rank's model allows, the times
//! are the slowest rank's. The heights around the winner's are timed
//! next, for the T taken (`crate::kernel_choice`).
//!
//! A candidate is timed only when the run could afford it: its buffers
//! must not outweigh the classic sweep's memory (`outweighs`) and must
//! fit every node and process (`crate::preflight::fits`), and its blocks
//! must fit the time the calibrations may take, a share of the run
//! ([`Budget`], `crate::calibrate`). Blocks far beyond the last-level
//! cache are timed on samples, scaled to the whole (`Backend::sample`),
//! so that a short run of size L reaches T = 16 within that share.

use crate::backend;
use crate::calibrate::{
    Budget, Built, CALIBRATION_FLOOR_S, CALIBRATION_SHARE, MARGIN, Rounds, Run, Timed,
    UNTIMED_SLOWDOWN, any_other_timed, best_of, bests, clear_winner, median_of,
    turns_per_sweep_pruned,
};
use crate::comm::{self, Comm};
use crate::config::RunConfig;
use crate::error::Result;
use crate::grid::Grid;
use crate::grid::decomp::Block;
use crate::grid::fields::FIELDS;
use crate::halo::Halo;
use crate::machine::cache::PerCore;
use crate::machine::memory::{Footprint, GIB};
use crate::solver::Solver;
use serde::{Deserialize, Serialize};

/// The sweeps per exchange `--temporal auto` tries beside the classic one
/// (each where its tiles fit, timed with its own tile height).
pub const AUTO_CANDIDATES: [usize; 7] = [2, 3, 4, 6, 8, 12, 16];
use crate::backend::cpu::wavefront::{bytes_per_tile_row, least_tile_rows};
/// How long `--temporal auto` times its candidates: 3 to 10 rounds of one
/// turn each, the order reversed every other round (none always runs
/// after another, or first), ending after 1.5 s once it has 3; from the
/// third round on, a candidate whose best turn is more than 1.5x the
/// fastest's is not timed again (these guests' noise slows a turn by
/// 15-25 %, and a shared guest's by up to 2x: at 1.25x a loaded guest
/// dropped T = 8 after two turns and took T = 4).
pub(crate) const ROUNDS: Rounds = Rounds {
    min: 3,
    max: 10,
    seconds: 1.5,
    alternate: true,
    keep_within: 1.5,
    untimed: UNTIMED_SLOWDOWN,
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
    /// The tile height the calibration's winner was timed with (its
    /// trial's `tile_rows`), where it timed several per T.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile_rows: Option<usize>,
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
    /// The median of its turns' seconds per sweep (absent in records
    /// written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_s: Option<f64>,
    /// How many turns it was timed in (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<usize>,
    /// The rows per wavefront tile it was timed with on the rank that
    /// wrote the record, where the calibration timed each T with several
    /// heights (absent otherwise, and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile_rows: Option<usize>,
    /// Where the calibration swept a sample of each block, how many times
    /// the sample's updates the whole block's are, on the rank whose
    /// sample is the largest share (`Backend::sample_scale`): its times
    /// are the sample's scaled to the whole block. Absent where the whole
    /// block was swept, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_scale: Option<f64>,
}

/// What one rank's model allows.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct View {
    /// Sweeps per exchange worth timing, 1 first.
    candidates: Vec<usize>,
    /// Why the others are left out (empty when none is).
    reason: String,
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
    /// Rows per tile asked for (`--tile-rows`), if any.
    given: Option<usize>,
}

impl Machine {
    fn of(cfg: &RunConfig, block: &Block, core: &PerCore) -> Machine {
        Machine {
            nk: block.local_dims()[2],
            budget: core.budget_bytes(),
            given: cfg.tile_rows,
        }
    }

    /// Rows per tile of `sweeps` sweeps the model weighs: those asked
    /// for, else the fewest the tiles may have ([`least_tile_rows`]).
    fn rows(&self, sweeps: usize) -> usize {
        self.given.unwrap_or_else(|| least_tile_rows(sweeps))
    }

    /// Bytes of the wavefront's working set per thread for `sweeps`
    /// sweeps: the coefficients' and `p`'s rows of the `sweeps` planes in
    /// flight of a tile (as `wavefront::tile_rows` counts).
    fn need(&self, sweeps: usize) -> usize {
        self.rows(sweeps)
            .saturating_mul(bytes_per_tile_row(self.nk, sweeps))
    }

    /// Whether `sweeps` sweeps' tiles fit one thread's cache share.
    fn fits(&self, sweeps: usize) -> bool {
        self.need(sweeps) <= self.budget
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
            self.rows(sweeps),
            mib(self.need(sweeps)),
            mib(self.budget),
            match largest {
                _ if self.given.is_some() =>
                    "give fewer --tile-rows, or use --temporal auto".to_string(),
                Some(t) if t > 1 => format!("--temporal {t} fits, or use --temporal auto"),
                _ => "use --temporal 1 or --temporal auto".to_string(),
            }
        ))
    }
}

/// Why the node's `fields` (bytes) are swept classically without timing
/// anything, if they are: in the private cache of the `core` that sweeps
/// them blocking saves no traffic, but a run of several threads or ranks
/// also meets once per sweep (the threads' hand-off, the halo exchange)
/// and once per T sweeps when blocked: on a 2-vCPU guest a 10x18x98 grid
/// ran 2.3x faster on two threads with T = 8 (notes/cpu-perf.md). So only
/// a `lone` thread of one rank is settled, and only when its own cache
/// holds the fields from sweep to sweep ([`PerCore::holds`]). Fields that
/// only the last-level cache holds are timed: on a Xeon guest 26x34x97
/// (4.8 MB, a 2 MiB L2, the L3 far larger) ran 1.9x faster with T = 8 on
/// one thread, and size S, 28 MiB in a Zen 3's 32 MiB L3, 1.4-1.6x.
fn classic_in_cache(core: &PerCore, fields: usize, lone: bool) -> Option<String> {
    (lone && core.holds(fields)).then(|| {
        format!(
            "the node's fields ({:.1} MiB) take at most half a core's private cache ({:.1} MiB), \
             so every sweep already reads them from it, and one thread of one rank has no \
             hand-off or exchange per sweep to save",
            mib(fields),
            mib(core.private_bytes)
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
/// own buffers (the deeper ghost layers, each thread's rings, the edge
/// rows) would hold more than the classic sweep's whole need, and more
/// than [`EXTRA_MEMORY_FLOOR`]. Such buffers cannot stay in any cache, so
/// the wavefront would move more memory than it saves: allocating them
/// only to time them cost 11.5 GB and 16 s before a 1 s run of a
/// 100000x3x3 grid when each thread had edge rows of every plane (the
/// threads now share them, so this is a safeguard).
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
    let core = PerCore::detect();
    let m = Machine::of(cfg, block, &core);
    let fields = block
        .local_dims()
        .iter()
        .product::<usize>()
        .saturating_mul(FIELDS * 4)
        .saturating_mul(comm.node_size());
    let lone = cfg.threads == 1 && comm.size() == 1;
    if let Some(reason) = classic_in_cache(&core, fields, lone) {
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
            mib(m.need(AUTO_CANDIDATES[0])),
            m.rows(AUTO_CANDIDATES[0]),
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
            let mine =
                Machine::of(cfg, &block, &PerCore::detect()).warning(cfg.temporal, cfg.temporal);
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
                    tile_rows: None,
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
            tile_rows: None,
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

    /// Completes the choice: with several candidates, times each on
    /// `backend` and `halo` (made for `block`, [`Plan::depth`] deep) with
    /// each tile height it may start with ([`Backend::tile_starts`]) and,
    /// when a shallower T wins, makes all three again for it; the winner's
    /// tiles are left in use, the fields in their initial state. Returns
    /// them with what the record says of the choice. Collective.
    ///
    /// [`Backend::tile_starts`]: crate::backend::Backend::tile_starts
    pub fn settle(self, run: Run<'_>, mut built: Built) -> Result<(Built, Option<TemporalChoice>)> {
        if self.candidates.len() < 2 {
            return Ok((built, self.decided));
        }
        let timed = Candidate::list(&self.candidates, |t| built.backend.tile_starts(t), run.comm);
        let calibrated = calibrate(&mut built.solver(run), &timed, run.budget)?;
        // Candidates the budget left untimed are no trials.
        let trials: Vec<Trial> = calibrated
            .iter()
            .flat_map(Timed::timed)
            .map(|(c, t, sample_scale)| Trial {
                sweeps: timed[c].sweeps,
                sweep_s: best_of(t),
                median_s: Some(median_of(t)),
                turns: Some(t.len()),
                tile_rows: timed[c].rows,
                sample_scale,
            })
            .collect();
        let turns = calibrated.map(|c| c.turns);
        let best = turns.as_deref().map(bests);
        let median = turns
            .as_ref()
            .map(|t| t.iter().map(|c| median_of(c)).collect::<Vec<f64>>())
            .unwrap_or_default();
        let deepest = timed.iter().position(|c| c.sweeps == built.block.depth);
        let (chosen, reason) = match best {
            // The run ends in its rehearsal; no time goes into a rebuild.
            None => (
                deepest.unwrap_or(0),
                "a stop signal came during the calibration".to_string(),
            ),
            Some(best) if !any_other_timed(&best) => (0, untimed(run.budget, &timed, &best)),
            Some(best) => choose(&timed, &best, &median),
        };
        let winner = timed[chosen];
        if winner.sweeps == built.block.depth {
            built.backend.reset()?;
        } else {
            let block = built.block.with_depth(winner.sweeps);
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
        // Tiles change no field: the fields stay in their initial state.
        if let Some(start) = winner.start {
            built.backend.start_tiles(winner.sweeps, start)?;
        }
        tracing::info!(chosen = winner.sweeps, ?trials, "temporal auto");
        Ok((
            built,
            Some(TemporalChoice {
                asked: Asked::Auto,
                sweeps: winner.sweeps,
                reason,
                trials,
                tile_rows: winner.rows,
            }),
        ))
    }
}

/// One block the calibration times: a T, and the tile height it starts
/// with where the backend offers several.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    /// Sweeps per exchange.
    sweeps: usize,
    /// Which of the backend's [`Backend::tile_starts`] it sweeps with
    /// (`None`: the backend's own tiles, or none).
    ///
    /// [`Backend::tile_starts`]: crate::backend::Backend::tile_starts
    start: Option<usize>,
    /// That height, on this rank.
    rows: Option<usize>,
}

impl Candidate {
    /// The blocks to time for `sweeps` (1 first): each T with each tile
    /// height it may start with (`starts(T)`, the backend's
    /// [`Backend::tile_starts`]), the same list on every rank of `comm` (a
    /// second height is timed where any rank's differs from its first).
    /// Collective.
    ///
    /// [`Backend::tile_starts`]: crate::backend::Backend::tile_starts
    fn list(
        sweeps: &[usize],
        starts: impl Fn(usize) -> Vec<usize>,
        comm: &dyn Comm,
    ) -> Vec<Candidate> {
        let mut out = Vec::new();
        for &t in sweeps {
            let starts = starts(t);
            let differ = starts.len() > 1 && starts[1..].iter().any(|&r| r != starts[0]);
            let all = if comm.max(f64::from(u8::from(differ))) > 0.0 {
                starts.len()
            } else {
                starts.len().min(1)
            };
            if all == 0 {
                out.push(Candidate {
                    sweeps: t,
                    start: None,
                    rows: None,
                });
            }
            out.extend((0..all).map(|i| Candidate {
                sweeps: t,
                start: Some(i),
                rows: Some(starts[i]),
            }));
        }
        out
    }

    /// Whether candidate `c` of `list` is left out, given the `turns` timed
    /// so far: its starting height (by index) ran more than [`OUTCLASSED`]
    /// times slower than another of the same T at each of the two
    /// shallower T's where both were timed last. Which cache a tile should
    /// live in does not change from T to T (on a Zen 4 guest the last
    /// level's heights won at size L from T = 3 on, by 1.2-1.6x, and a
    /// calibration within a 60 s run's budget timed T = 8 but not deeper
    /// while it still timed the private cache's), so the budget goes to
    /// deeper T's instead.
    fn outclassed(list: &[Candidate], turns: &[Vec<f64>], c: usize) -> bool {
        let Some(start) = list[c].start else {
            return false;
        };
        let best = |i: usize| best_of(&turns[i]);
        // Per shallower T, deepest first: whether this start lost.
        let mut shallower: Vec<usize> = list[..c]
            .iter()
            .map(|o| o.sweeps)
            .filter(|&t| t < list[c].sweeps)
            .collect();
        shallower.dedup();
        let lost: Vec<bool> = shallower
            .iter()
            .rev()
            .filter_map(|&t| {
                let of_t = |want: bool| {
                    (0..c).filter(move |&i| {
                        list[i].sweeps == t && (list[i].start == Some(start)) == want
                    })
                };
                let mine = of_t(true).map(best).fold(f64::INFINITY, f64::min);
                let others = of_t(false).map(best).fold(f64::INFINITY, f64::min);
                (mine.is_finite() && others.is_finite()).then_some(mine > others * OUTCLASSED)
            })
            .take(2)
            .collect();
        lost.len() == 2 && lost.iter().all(|&l| l)
    }
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.rows {
            Some(rows) => write!(f, "T={} with tiles of {rows} rows", self.sweeps),
            None => write!(f, "T={}", self.sweeps),
        }
    }
}

/// The fastest of `candidates` (T=1 first) by their best seconds per sweep
/// `best`, as an index: T=1 unless a blocked one's best is more than
/// [`MARGIN`] faster and its `median` turn faster too (a best turn alone
/// may be the one a neighbour left quiet); with the reason in words.
fn choose(candidates: &[Candidate], best: &[f64], median: &[f64]) -> (usize, String) {
    let classic = best[0];
    let (other, clear) = clear_winner(best);
    let (fastest, which) = (best[other], candidates[other]);
    let ms = |s: f64| s * 1e3;
    let steady = median[other] < median[0];
    if clear && !steady {
        let why = format!(
            "T=1 calibrated: {which}'s best turn took {:.3} ms per sweep against {:.3} for the \
             classic sweep, but its median turn {:.3} against {:.3}",
            ms(fastest),
            ms(classic),
            ms(median[other]),
            ms(median[0])
        );
        return (0, why);
    }
    if clear {
        let why = format!(
            "{which} calibrated fastest: {:.3} ms per sweep against {:.3} for the classic \
             sweep ({:.2}x)",
            ms(fastest),
            ms(classic),
            classic / fastest
        );
        (other, why)
    } else {
        let why = format!(
            "T=1 calibrated: the fastest blocked candidate, {which}, took {:.3} ms per sweep \
             against {:.3} for the classic sweep, not {:.0}% less",
            ms(fastest),
            ms(classic),
            MARGIN * 100.0
        );
        (0, why)
    }
}

/// Why T=1 was taken when the budget left no blocked candidate to time:
/// with `best`, the classic sweep's time, the first of `candidates`.
fn untimed(budget: &Budget, candidates: &[Candidate], best: &[f64]) -> String {
    format!(
        "T=1 untimed: a block of {} would take longer than the calibration may (at most {:.2} s: \
         {:.0}% of the run's estimated time, or {CALIBRATION_FLOOR_S} s), the classic sweep \
         taking {:.3} ms",
        candidates[1],
        budget.seconds(best[0]),
        CALIBRATION_SHARE * 100.0,
        best[0] * 1e3
    )
}

/// Times turns of each of `candidates` per round within `budget` (see
/// [`turns_per_sweep`]), each with its tiles: each one's seconds per
/// sweep, turn by turn, and the sample swept.
fn calibrate(
    solver: &mut Solver<'_>,
    candidates: &[Candidate],
    budget: &Budget,
) -> Result<Option<Timed>> {
    let sweeps: Vec<usize> = candidates.iter().map(|c| c.sweeps).collect();
    turns_per_sweep_pruned(
        solver,
        &sweeps,
        ROUNDS,
        budget,
        |s, c| match candidates[c].start {
            Some(start) => s.backend.start_tiles(candidates[c].sweeps, start),
            None => Ok(()),
        },
        |turns, c| Candidate::outclassed(candidates, turns, c),
    )
}

/// How much slower than the other starting height of the same T a height
/// must be, at each of the two shallower T's timed last, to be left out
/// of the deeper ones.
const OUTCLASSED: f64 = 1.1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunLength;
    use std::time::Instant;

    fn machine(nk: usize, budget: usize) -> Machine {
        Machine {
            nk,
            budget,
            given: None,
        }
    }

    #[test]
    fn a_wavefront_fits_while_its_tiles_do() {
        // Size M rows (258 values): T = 12's tiles of six rows take 966
        // KB, T = 13's of seven 1220 KB.
        let m = machine(258, 1 << 20);
        assert!(m.fits(12));
        assert!(!m.fits(13));
        assert_eq!(m.warning(12, 32), None);
        assert_eq!(m.warning(1, 32), None);
        let w = m.warning(16, 32).expect("16 sweeps do not fit 1 MiB");
        assert!(w.contains("tiles of 8 rows"), "{w}");
        assert!(w.contains("--temporal 12 fits"), "{w}");
        assert!(!w.contains('\n'), "{w}");
        // Nothing above 1 fits: the advice is T=1 or auto.
        let tiny = machine(258, 100 << 10);
        let w = tiny.warning(2, 32).unwrap();
        assert!(w.contains("use --temporal 1 or --temporal auto"), "{w}");
        // Tiles asked for: the model weighs them, and the advice is fewer.
        let given = Machine {
            given: Some(16),
            ..machine(258, 1 << 20)
        };
        assert!(given.fits(4) && !given.fits(5));
        let given = Machine {
            given: Some(64),
            ..machine(258, 1 << 20)
        };
        assert!(given.warning(2, 32).unwrap().contains("fewer --tile-rows"));
    }

    /// One thread of one rank sweeps fields in half its core's private
    /// cache classically without timing; fuller, though well inside the
    /// last level (26x34x97 in a 2 MiB L2 and a 480 MiB L3, size S in a
    /// 32 MiB one), or with company, the candidates are timed.
    #[test]
    fn only_a_lone_thread_in_half_its_private_cache_is_settled() {
        let core = PerCore {
            private_bytes: 2 << 20,
            shared_bytes: 480 << 20,
            sharing: 2,
        };
        let points = |d: [usize; 3]| d.iter().product::<usize>() * FIELDS * 4;
        let why = classic_in_cache(&core, points([10, 18, 98]), true).expect("half the L2");
        assert!(why.contains("0.9 MiB") && why.contains("2.0 MiB"), "{why}");
        assert!(why.contains("private cache"), "{why}");
        assert_eq!(classic_in_cache(&core, points([26, 34, 97]), true), None);
        assert_eq!(classic_in_cache(&core, points([64, 64, 128]), true), None);
        assert!(classic_in_cache(&core, 1 << 20, true).is_some());
        assert_eq!(classic_in_cache(&core, (1 << 20) + 1, true), None);
        assert_eq!(classic_in_cache(&core, 1 << 10, false), None);
    }

    /// Every candidate whose shortest tiles fit the thread's share is
    /// offered, however deep: each is timed with its own tiles.
    #[test]
    fn deep_candidates_are_offered_while_their_shortest_tiles_fit() {
        // Size M rows, a 240 MiB share: every depth.
        let big = machine(258, 240 << 20);
        assert!(AUTO_CANDIDATES.iter().all(|&t| big.fits(t)));
        // A 1 MiB share: T = 8's four rows take 429 KB, T = 12's six 966,
        // T = 16's eight 1717.
        let share = machine(258, 1 << 20);
        assert!(share.fits(8) && share.fits(12) && !share.fits(16));
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

    /// Candidates of `sweeps` without tile heights of their own.
    fn plain(sweeps: &[usize]) -> Vec<Candidate> {
        sweeps
            .iter()
            .map(|&sweeps| Candidate {
                sweeps,
                start: None,
                rows: None,
            })
            .collect()
    }

    /// Each T is timed with each height it may start with, once where
    /// they are the same; T=1, and a backend without tiles, without one.
    #[test]
    fn each_t_is_timed_with_each_of_its_starting_heights() {
        let single = crate::comm::SingleComm;
        let two = |t: usize| if t < 2 { vec![] } else { vec![4, 32 / t] };
        let list = Candidate::list(&[1, 2, 8, 16], two, &single);
        let got: Vec<(usize, Option<usize>, Option<usize>)> =
            list.iter().map(|c| (c.sweeps, c.start, c.rows)).collect();
        assert_eq!(
            got,
            [
                (1, None, None),
                (2, Some(0), Some(4)),
                (2, Some(1), Some(16)),
                (8, Some(0), Some(4)),
                (16, Some(0), Some(4)),
                (16, Some(1), Some(2)),
            ]
        );
        assert_eq!(list[2].to_string(), "T=2 with tiles of 16 rows");
        assert_eq!(list[0].to_string(), "T=1");
        let none = Candidate::list(&[1, 4], |_| Vec::new(), &single);
        assert_eq!(none, plain(&[1, 4]));
    }

    /// A starting height that lost by more than a tenth at the two
    /// shallower T's timed last is left out of the deeper ones; one that
    /// lost once, or by less, or a T with one height, is not.
    #[test]
    fn a_height_that_lost_twice_is_left_out_of_deeper_ts() {
        let single = crate::comm::SingleComm;
        let two = |t: usize| if t < 2 { vec![] } else { vec![4, 32] };
        let list = Candidate::list(&[1, 2, 3, 4, 6], two, &single);
        // [1, 2a, 2b, 3a, 3b, 4a, 4b, 6a, 6b]
        let turns = |ms: &[f64]| -> Vec<Vec<f64>> { ms.iter().map(|&t| vec![t]).collect() };
        let t = turns(&[10.0, 8.0, 8.5, 7.0, 6.0, 6.6, 5.0]);
        // 4a and 6a: height a lost at T = 3 (1.17x) and T = 4 (1.32x).
        assert!(
            !Candidate::outclassed(&list, &t, 5),
            "only T=3 before it lost"
        );
        assert!(Candidate::outclassed(&list, &t, 7));
        assert!(!Candidate::outclassed(&list, &t, 8), "b won");
        // Lost at T = 4 by 1.32x but at T = 3 by 1.05x: kept.
        let close = turns(&[10.0, 8.0, 8.5, 6.3, 6.0, 6.6, 5.0]);
        assert!(!Candidate::outclassed(&list, &close, 7));
        // A shallower T whose height was not timed (no turns) does not
        // count: the two last timed with both heights decide, here T = 4
        // (lost) and T = 2 (lost by 1.07x, then by 1.29x).
        let gap = |two_a: f64| {
            vec![
                vec![10.0],
                vec![two_a],
                vec![7.0],
                vec![],
                vec![6.0],
                vec![6.6],
                vec![5.0],
            ]
        };
        assert!(!Candidate::outclassed(&list, &gap(7.5), 7));
        assert!(Candidate::outclassed(&list, &gap(9.0), 7));
        let one = Candidate::list(&[1, 2, 3, 4], |t| vec![4; usize::from(t > 1)], &single);
        assert!(!Candidate::outclassed(&one, &turns(&[1.0, 9.0, 9.0]), 3));
        assert!(!Candidate::outclassed(&list, &t, 0));
    }

    /// With the budget spent, T=1 is taken untimed, saying why.
    #[test]
    fn an_untimed_choice_says_the_budget_was_spent() {
        let ago = std::time::Duration::from_secs(10 * CALIBRATION_FLOOR_S as u64);
        let spent = Budget::since(Instant::now() - ago, RunLength::Iterations(10), 1);
        let why = untimed(
            &spent,
            &plain(&[1, 2, 4]),
            &[1e-4, f64::INFINITY, f64::INFINITY],
        );
        assert!(why.starts_with("T=1 untimed: a block of T=2"), "{why}");
    }

    /// A blocked candidate is taken only when its best turn is more than
    /// the margin faster than the classic sweep's and its median turn is
    /// faster too; else T=1, never a candidate not clearly faster.
    #[test]
    fn a_blocked_candidate_must_be_clearly_faster() {
        let sweeps = [1, 2, 4, 8];
        let c = plain(&sweeps);
        let t = |r: (usize, String)| (sweeps[r.0], r.1);
        let same = [1.0, 0.9, 0.8, 0.9];
        assert_eq!(t(choose(&c, &[1.0, 0.9, 0.7, 0.8], &same)).0, 4);
        // 2 % faster is within the margin: the classic sweep.
        let (t1, why) = t(choose(&c, &[1.0, 0.99, 0.98, 1.2], &same));
        assert_eq!(t1, 1);
        assert!(why.contains("T=4"), "{why}");
        assert_eq!(t(choose(&c, &[1.0, 1.1, 1.2, 1.3], &same)).0, 1);
        // One quick turn of T=8, its median slower than the classic
        // sweep's: noise, not a winner.
        let (t8, why) = t(choose(&c, &[1.0, 1.1, 1.2, 0.6], &[1.05, 1.2, 1.3, 1.1]));
        assert_eq!(t8, 1, "{why}");
        assert!(
            why.contains("T=8's best turn") && why.contains("median"),
            "{why}"
        );
        // Over many random timings the choice is T=1 or a candidate both
        // clearly faster by its best and faster by its median.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            0.5 + (x % 1000) as f64 / 1000.0
        };
        for _ in 0..1000 {
            let best: Vec<f64> = (0..4).map(|_| next()).collect();
            let median: Vec<f64> = best.iter().map(|b| b * next().max(1.0)).collect();
            let (i, why) = choose(&c, &best, &median);
            if i != 0 {
                assert!(best[i] < best[0] * (1.0 - MARGIN), "{why}");
                assert!(median[i] < median[0], "{why}");
                assert!(best[1..].iter().all(|&b| b >= best[i]), "{why}");
            }
        }
    }

    /// `--temporal auto`'s rounds reverse their order every other round,
    /// and every candidate within reach of the fastest gets several turns.
    #[test]
    fn the_calibration_alternates_its_order() {
        use crate::calibrate::tests::{built, solver};
        use crate::calibrate::turns_per_sweep;
        let (grid, block, mut cpu, mut halo) = built(4);
        let mut solver = solver((grid, block), &mut cpu, &mut halo);
        let budget = Budget::since(Instant::now(), RunLength::Iterations(1_000_000), 0);
        let mut order = Vec::new();
        let turns = turns_per_sweep(&mut solver, &[1, 2, 3, 4], ROUNDS, &budget, |_, c| {
            order.push(c);
            Ok(())
        })
        .unwrap()
        .unwrap()
        .turns;
        // The untimed block of the classic sweep, then the rounds.
        assert_eq!(order[0], 0);
        let rounds: Vec<&[usize]> = order[1..].chunks(4).collect();
        assert!(rounds.len() >= ROUNDS.min, "{order:?}");
        assert_eq!(rounds[0], [0, 1, 2, 3], "{order:?}");
        assert_eq!(rounds[1], [3, 2, 1, 0], "{order:?}");
        assert!(turns.iter().all(|t| t.len() >= 2), "{turns:?}");
    }
}
