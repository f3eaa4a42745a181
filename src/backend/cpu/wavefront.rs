//! Temporal blocking on the CPU: `L` successive sweeps of a block between
//! two halo exchanges, as a cache-blocked wavefront, so that the
//! coefficients and `p` come from memory once per `L` iterations instead of
//! once per iteration. Level `s` (1 to `L`) is the wavefront's `s`-th
//! sweep; `sweeps` counts them.
//!
//! The block's owned rows form one band along j, cut into tiles of a few
//! rows that the threads take in turn (tile `t` on thread `t % threads`),
//! each tile a step of the walk behind the tile before it, whose edge rows
//! it reads (see [`Shared`]): so no row is updated twice between threads,
//! as it was when each thread had a band of its own and its levels reached
//! `T-s` rows into the next thread's (at size M on two threads and T = 12,
//! 9 % of the updates). A tile walks the whole i extent of
//! the block plane by plane; at each step level 1 updates plane `w` from the
//! field in memory, level 2 plane `w-1` from level 1's planes, and so on, so
//! the planes each level needs were made one, two and three steps before
//! and are still in the cache, and the coefficients level 1 loads are read
//! again by the later sweeps while they are. Only level `L` writes the new
//! field; the others live in buffers private to the thread.
//!
//! Tiles are skewed: level `s` of a tile covers its rows shifted down by
//! `s-1`, so the rows below them that it reads from level `s-1` were made
//! by the previous tile of the band, which copies its last two rows of
//! every level and plane into an edge buffer. Within a band every row of
//! every level is computed once, however small the tiles. A level's rows
//! of a plane sit in a ring of three plane buffers (plane `q` in slot
//! `q % 3`) with the two rows below them (copied back from the edge buffer,
//! or `p`'s fixed boundary) and, where the level ends, `p`'s row above
//! them: so the next level finds every row it reads in one run of rows
//! `nk` values apart, and the row kernel takes a whole run of rows per
//! call, as the classic sweep does (called per row, with its rows looked
//! up one by one, the wavefront took 1.6x the classic sweep's
//! instructions per point: notes/cpu-perf.md, eighteenth session).
//!
//! At the band's ends a level covers `L-s` rows more than the band: into
//! the ghost layers received from a neighbour (filled by the exchange,
//! `depth >= L` deep), and, in a calibration's sample, into the rows after
//! it. Those redundant updates repeat arithmetic that another rank also does, with
//! the same inputs and so the same bits; only the band's own rows are
//! stored or counted in gosa. The same holds along i and k, whose ranges
//! grow by `L-s` towards each neighbour. At the grid's edge the sweeps stop
//! at the fixed boundary, whose values are read from `p` itself.
//!
//! Every level's gosa is kept per owned row, with the row kernel's lane
//! order over the owned k points, and summed in row order by the caller: the
//! classic sweep's sums, bit for bit.

use super::kernel::{self, Inputs, Layout, Planes};
use super::lines::{LineWriter, RowBuffer};
use crate::grid::decomp::Block;
use crate::machine::cache::PerCore;
use crate::machine::isa::Isa;
use ndarray::{ArrayViewMut, ArrayViewMut2, ArrayViewMut3, Axis, Dimension, s};
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Ring slots per intermediate level: a level reads its predecessor's
/// planes `q-1`, `q` and `q+1`.
const SLOTS: usize = 3;
/// `f32` values in 4 KiB, the period of the L1 cache's set index and of
/// the address bits a load is compared with earlier stores on.
const PAGE_FLOATS: usize = 1024;
/// Where a level's rows sit modulo 4 KiB relative to the same row of the
/// fields, in values: past the backend's own staggers (`p`, `next` and the
/// packed coefficients 256 B apart, see the backend), alternating between sweeps so that a level's output
/// never shares its address bits with its input rows of the same plane.
const LEVEL_STAGGER: [usize; 2] = [14 * 64, 15 * 64];

/// The geometry of one block's wavefront with `sweeps` sweeps.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Local extents of the block's arrays.
    pub dims: [usize; 3],
    /// Owned local indices per dimension.
    pub owned: [Range<usize>; 3],
    /// Whether each side of each dimension has a neighbour (ghost layers
    /// that the redundant updates extend into).
    pub open: [[bool; 2]; 3],
    /// Sweeps in this call.
    pub sweeps: usize,
    /// Most sweeps of any call (the halo depth): the scratch space is laid
    /// out for them, so that calls with fewer reuse the same pages.
    pub depth: usize,
    /// Rows per tile (the last tiles of a band may be shorter).
    pub tile_rows: usize,
    /// Threads that take the band's tiles in turn.
    pub threads: usize,
}

impl Plan {
    /// The plan for `sweeps` sweeps over `block`, tiles of `tile_rows`.
    pub fn new(block: &Block, sweeps: usize, tile_rows: usize) -> Plan {
        Plan {
            dims: block.local_dims(),
            owned: std::array::from_fn(|d| block.owned(d)),
            open: std::array::from_fn(|d| {
                std::array::from_fn(|side| block.neighbours[d][side].is_some())
            }),
            sweeps,
            depth: block.depth.max(sweeps),
            tile_rows: tile_rows.max(1),
            threads: 1,
        }
    }

    /// The plan with its band's tiles taken in turn by `threads` threads.
    pub fn shared_by(self, threads: usize) -> Plan {
        Plan {
            threads: threads.max(1),
            ..self
        }
    }

    /// Local indices level `s` (1-based) updates along dimension `d`: the
    /// owned ones and `sweeps - s` more into each side with a neighbour.
    fn range(&self, d: usize, s: usize) -> Range<usize> {
        let e = self.sweeps - s;
        let own = &self.owned[d];
        let lo = if self.open[d][0] {
            own.start - e
        } else {
            own.start
        };
        let hi = if self.open[d][1] {
            own.end + e
        } else {
            own.end
        };
        lo..hi
    }

    /// Where the tiles of a band of `rows` rows start, from 0: tiles of at
    /// least `tile_rows` rows (and two), the first of at least `sweeps`
    /// (its sweeps start at the band's start, not skewed, and must still
    /// leave two rows for the next tile), one tile when the band is short.
    /// With several threads, as many more tiles (of fewer rows, two at
    /// least) as make them a multiple of the threads, so that each thread
    /// sweeps as many (one tile more on some threads cost the others its
    /// whole walk: at M on two threads, 4 tiles against 3).
    fn tile_starts(&self, rows: usize) -> Vec<usize> {
        let (first, rest) = (self.first_tile(), self.rest_tile());
        let single = if rows < first + rest {
            0
        } else {
            (rows - first) / rest
        };
        let (first, tiles) = if self.threads == 1 {
            (first, single)
        } else {
            // Tiles after the first, so that all of them are a multiple of
            // the threads, of even heights (the first of T rows at least,
            // the others of two): a first tile of the model's height and
            // the rest of two rows kept one thread waiting on the other's
            // short tile (a 16-row band at T = 2 on two threads, 0.56x).
            let least = self.sweeps.max(2);
            if rows < least + 2 {
                return vec![0];
            }
            let tiles = ((single + 1).next_multiple_of(self.threads) - 1).min((rows - least) / 2);
            let first = least.max(rows / (tiles + 1)).min(rows - 2 * tiles);
            (first, tiles)
        };
        if tiles == 0 {
            return vec![0];
        }
        std::iter::once(0)
            .chain((0..tiles).map(|t| first + crate::grid::decomp::split(rows - first, tiles, t).0))
            .collect()
    }

    /// Rows (local j) level `s` of a band of `rows` updates: its own and,
    /// towards a neighbour or the next thread's band, `sweeps - s` more.
    fn level_rows(&self, rows: &Range<usize>, s: usize) -> Range<usize> {
        let e = self.sweeps - s;
        let range = self.range(1, s);
        range.start.max(rows.start.saturating_sub(e))..range.end.min(rows.end + e)
    }

    /// Row updates per plane of a band of `rows`, all levels together,
    /// redundant ones included: what its wavefront's time goes with.
    pub fn band_updates(&self, rows: &Range<usize>) -> usize {
        (1..=self.sweeps)
            .map(|s| self.level_rows(rows, s).len())
            .sum()
    }

    /// The rows, from a band's first, of a calibration's sample of a band
    /// of `rows` rows (`Backend::sample`): three tiles per thread (the
    /// first, which differs, and the others after it), and at least
    /// `share` of the band, so that
    /// the sample holds what the cache cannot; `None` (the band is swept
    /// whole) where that is more than half the band, or where the first
    /// tile, as tall as T, is more than twice the others. Its tiles walk
    /// every plane, as the band's do, so that a tile finds the previous
    /// one's rows in the cache as far as in the whole band: a sample of
    /// the first planes instead swept tiles of 4 rows at size L 1.5x
    /// faster than the whole block. A tall first tile sweeps faster per
    /// row and is a larger part of the sample than of the band: with
    /// 4-row tiles at L, T = 8 read 1.12x fast, T = 12 and 16 1.29-1.36x,
    /// where taller tiles read 0.9-1.03x (notes/cpu-perf.md,
    /// twenty-third session).
    pub fn sample_rows(&self, rows: usize, share: f64) -> Option<usize> {
        let (first, rest) = (self.first_tile(), self.rest_tile());
        let least = (rows as f64 * share).ceil() as usize;
        let n = (first + (3 * self.threads - 1) * rest).max(least);
        (first <= 2 * rest && 2 * n <= rows).then_some(n)
    }

    /// Fewest rows of the first tile of a band of several.
    fn first_tile(&self) -> usize {
        self.rest_tile().max(self.sweeps)
    }

    /// Fewest rows of the other tiles (they have fewer than twice as many).
    fn rest_tile(&self) -> usize {
        self.tile_rows.max(2)
    }

    /// Most rows of a level of a tile kept in its ring: a tile has fewer
    /// than `first_tile + rest_tile` rows (or is its band's only one), and
    /// a level reaches `sweeps - 1` rows beyond the band at each end; with
    /// `depth` for `sweeps`, whatever the call.
    fn ring_rows(&self, band_rows: usize) -> usize {
        let first = self.rest_tile().max(self.depth);
        (first + self.rest_tile()).min(band_rows.max(1)) + 2 * self.depth
    }

    /// Values of the scratch space (the rings) one thread sweeping a band
    /// of at most `band_rows` rows needs for calls of up to `depth` sweeps
    /// (with room to start it on a 4 KiB boundary).
    pub fn scratch_len(&self, band_rows: usize) -> usize {
        (self.depth - 1) * self.level_stride(band_rows) + PAGE_FLOATS
    }

    /// Values of the edge buffer the threads of a band share ([`Edges`]):
    /// two rows of every plane of every level below the last, for calls
    /// of up to `depth` sweeps.
    pub fn edges_len(&self) -> usize {
        (self.depth - 1) * self.dims[0] * 2 * self.dims[2]
    }

    /// Distance between ring slots: the rows, the two rows below them
    /// and the one above them that the next level also reads, and room
    /// to shift them within 4 KiB.
    fn slot_stride(&self, band_rows: usize) -> usize {
        (self.ring_rows(band_rows) + 3) * self.dims[2] + PAGE_FLOATS
    }

    /// Distance between the buffers of consecutive sweeps: three slots.
    fn level_stride(&self, band_rows: usize) -> usize {
        SLOTS * self.slot_stride(band_rows)
    }
}

/// Most rows per tile: measured best at sizes M and L, one and two
/// threads, T = 4 and 8, against 8, 16, 48 and 64 on a Zen 3 guest
/// (notes/cpu-perf.md); taller ones fall out of the L2 and L3 share.
pub const TILE_ROWS: usize = 32;

/// Fewest rows per wavefront tile the model gives: shorter tiles cut
/// level 1's runs from memory short (the hardware prefetchers restart at
/// every run) and repeat more edge rows. On a Xeon guest with a 2 MiB L2,
/// tiles of 4 rows swept size L at T = 8 fastest (1.79x T = 1 on one
/// thread, against 1.64x with 8 rows and 1.37x with 16), while on a Zen 3
/// guest 8-row tiles lost 7 % to 16-row ones at M (notes/cpu-perf.md):
/// the driver times the taller heights too ([`other_tile_rows`]).
pub const MIN_TILE_ROWS: usize = 4;

/// Fewest rows per tile the model gives for `sweeps` sweeps: [`MIN_TILE_ROWS`]
/// and half of T, within [`TILE_ROWS`]. A band's first tile has at least T
/// rows; with others of fewer than half as many a calibration cannot sample
/// the band ([`Plan::sample_rows`]) and sweeps the whole block, which at
/// size L with T = 12 and a 2 s budget left the 4-row tiles untimed. Those
/// tiles were also slow: at L on a Zen 4 guest tiles of T/2 rows ran
/// 1.15-1.3x faster than 4-row ones at T = 12 and 16, one and two threads
/// (notes/cpu-perf.md, twenty-fifth session).
pub fn least_tile_rows(sweeps: usize) -> usize {
    MIN_TILE_ROWS.max(sweeps.div_ceil(2)).min(TILE_ROWS)
}

/// Bytes of the thirteen arrays' rows (`p` and twelve coefficients) of
/// one tile row of `nk` values in each of `sweeps` planes in flight: what
/// a tile of one row keeps in the cache.
pub fn bytes_per_tile_row(nk: usize, sweeps: usize) -> usize {
    nk.saturating_mul(4 * 13).saturating_mul(sweeps)
}

/// Share of a core's private cache a tile's planes in flight may fill, in
/// eighths: the rest holds the rows streaming in from memory and the edge
/// buffers. On a Xeon guest's 2 MiB L2 the fastest tiles at sizes M and L,
/// T = 4 to 12, one and two threads, held 0.4-0.9 MB; 1.3 MB and more ran
/// 0.6-0.8x of them (notes/cpu-perf.md).
const PRIVATE_EIGHTHS: usize = 3;

/// Rows that fit `bytes` for `sweeps` sweeps of rows `nk` values long,
/// within [`least_tile_rows`]..=[`TILE_ROWS`].
fn rows_within(bytes: usize, nk: usize, sweeps: usize) -> usize {
    (bytes / bytes_per_tile_row(nk, sweeps).max(1)).clamp(least_tile_rows(sweeps), TILE_ROWS)
}

/// Chooses the rows per tile for `sweeps` sweeps of rows `nk` values long
/// on a thread of `core`: as many as keep the planes in flight within
/// [`PRIVATE_EIGHTHS`] of the core's private cache, where a tile's levels
/// reread one another's rows, within [`least_tile_rows`]..=[`TILE_ROWS`].
/// Each T gets its own height, so `--temporal auto` times every candidate
/// with the tiles it would run with.
pub fn tile_rows(nk: usize, sweeps: usize, core: &PerCore) -> usize {
    rows_within(core.private_bytes / 8 * PRIVATE_EIGHTHS, nk, sweeps)
}

/// Share of a thread's share of the last-level cache a tile's planes in
/// flight may fill, in eighths, where they live there. On a Zen 4 guest (a
/// 1 MiB L2, a 32 MiB L3 for two cores, so 16 MiB each) the fastest tiles
/// at size L held 3.4-6.8 MB on one thread (T = 8 with 16 rows 18.2
/// GFLOPS, T = 16 with 16 rows 19.6, against 13.5 and 14.4 with the
/// private cache's 4) and 3.4 MB on two (T = 8 with 16 rows, T = 16 with
/// 8: 31.7 and 31.1, against 24.8 and 26.5 with 4); 6.8 MB on each of two
/// threads ran at 0.83x (notes/cpu-perf.md).
const SHARED_EIGHTHS: usize = 2;

/// The rows per tile that keep the planes in flight within
/// [`SHARED_EIGHTHS`] of the thread's share of the last-level cache
/// ([`PerCore::budget_bytes`]), within [`least_tile_rows`]..=[`TILE_ROWS`]:
/// where a core's private cache is small and the last level fast, the
/// levels reread one another's rows from there. On a Xeon guest (a 2 MiB
/// L2) the private cache's heights ran 1.3-1.6x faster than 32 rows instead
/// (notes/cpu-perf.md).
pub fn shared_tile_rows(nk: usize, sweeps: usize, core: &PerCore) -> usize {
    rows_within(core.budget_bytes() / 8 * SHARED_EIGHTHS, nk, sweeps)
}

/// The heights worth starting `sweeps` sweeps of rows `nk` values long
/// with on a thread of `core`, one per cache a tile may live in: the
/// private cache's ([`tile_rows`]) and the last level's
/// ([`shared_tile_rows`]), which may be equal. `--temporal auto` times
/// each T with both: which cache wins is the machine's business.
pub fn tile_heights(nk: usize, sweeps: usize, core: &PerCore) -> [usize; 2] {
    [
        tile_rows(nk, sweeps, core),
        shared_tile_rows(nk, sweeps, core),
    ]
}

/// The tile heights besides `rows` worth timing for `sweeps` sweeps of
/// rows `nk` values long on `core`, once the run has started with `rows`:
/// half and twice it, and the heights of [`tile_heights`], each once,
/// within [`least_tile_rows`]..=[`TILE_ROWS`]. The height that wins moves
/// between machines and sizes: on a Zen 3 guest (a 512 KiB L2, a fast L3)
/// with two threads, tiles of 16 rows swept size L 1.2-1.3x faster than
/// tiles of 32 at T = 4 and 8, while on a Xeon guest (a 2 MiB L2) tiles of
/// 32 rows ran at 0.6-0.8x of tiles of 4 to 12 (notes/cpu-perf.md).
pub fn other_tile_rows(rows: usize, nk: usize, sweeps: usize, core: &PerCore) -> Vec<usize> {
    let [private, shared] = tile_heights(nk, sweeps, core);
    let mut others: Vec<usize> = Vec::new();
    for r in [rows / 2, rows * 2, private, shared] {
        if (least_tile_rows(sweeps)..=TILE_ROWS).contains(&r) && r != rows && !others.contains(&r) {
            others.push(r);
        }
    }
    others
}

/// The tiles of one wavefront over a band of owned rows: where each level
/// of each tile starts.
pub struct Schedule {
    /// The band's owned rows (local j) swept.
    rows: Range<usize>,
    /// `lo[t][s]`: the first row level `s` of tile `t` updates (tile `t`
    /// ends where tile `t + 1` starts; `lo[tiles]` is the band's end).
    lo: Vec<Vec<usize>>,
}

impl Schedule {
    /// The tiles of `plan` over the band `rows`.
    pub fn new(plan: &Plan, rows: Range<usize>) -> Schedule {
        let sweeps = plan.sweeps;
        let starts = if rows.is_empty() {
            Vec::new()
        } else {
            plan.tile_starts(rows.len())
        };
        let tiles = starts.len();
        let lo = (0..=tiles)
            .map(|t| {
                (0..=sweeps)
                    .map(|s| {
                        let s = s.max(1);
                        let Range { start: first, end } = plan.level_rows(&rows, s);
                        if t == 0 {
                            first
                        } else if t == tiles {
                            end
                        } else {
                            let a = rows.start + starts[t];
                            (a.saturating_sub(s - 1)).clamp(first, end)
                        }
                    })
                    .collect()
            })
            .collect();
        Schedule { rows, lo }
    }

    /// Number of tiles.
    pub fn tiles(&self) -> usize {
        self.lo.len() - 1
    }

    /// The rows of level `s` of tile `t` whose sums the tile keeps: those
    /// of the band's own rows.
    fn kept(&self, t: usize, s: usize) -> Range<usize> {
        let clamp = |j: usize| j.clamp(self.rows.start, self.rows.end);
        clamp(self.lo[t][s])..clamp(self.lo[t + 1][s])
    }

    /// Cuts `view` (local j from `offset` along its second axis) into each
    /// tile's kept rows of level `s`, with the local j of each part's first.
    fn cut<'a, A, D: Dimension>(
        &self,
        view: ArrayViewMut<'a, A, D>,
        offset: usize,
        s: usize,
    ) -> Vec<(ArrayViewMut<'a, A, D>, usize)> {
        let (_, mut rest) = view.split_at(Axis(1), self.rows.start - offset);
        let mut parts = Vec::with_capacity(self.tiles());
        for t in 0..self.tiles() {
            let rows = self.kept(t, s);
            let (mine, after) = rest.split_at(Axis(1), rows.len());
            parts.push((mine, rows.start));
            rest = after;
        }
        parts
    }

    /// Cuts what the band's wavefront writes into each tile's part: `next`
    /// (the whole field) and `gosa` (`[level, i - owned i start, j -
    /// offset]`), one [`TileOut`] per tile in order.
    pub fn split<'a>(
        &self,
        next: ArrayViewMut3<'a, f32>,
        gosa: ArrayViewMut3<'a, f64>,
        offset: usize,
    ) -> Vec<TileOut<'a>> {
        let tiles = self.tiles();
        if tiles == 0 {
            return Vec::new();
        }
        let sweeps = self.lo[0].len() - 1;
        // Level `sweeps` writes `next`: each tile its rows of that level.
        let nexts = self.cut(next, 0, sweeps);
        let mut sums: Vec<Vec<(ArrayViewMut2<'a, f64>, usize)>> =
            (0..tiles).map(|_| Vec::with_capacity(sweeps)).collect();
        let mut levels = gosa;
        for s in 1..=sweeps {
            let (level, after) = levels.split_at(Axis(0), 1);
            levels = after;
            let plane = level.index_axis_move(Axis(0), 0);
            for (tile, piece) in sums.iter_mut().zip(self.cut(plane, offset, s)) {
                tile.push(piece);
            }
        }
        nexts
            .into_iter()
            .zip(sums)
            .enumerate()
            .map(|(tile, ((next, first), gosa))| TileOut {
                tile,
                next,
                first,
                gosa,
            })
            .collect()
    }
}

/// What one tile's wavefront writes: its rows of `next` (from level
/// `sweeps`) and its sums of the band's own rows at every level.
pub struct TileOut<'a> {
    /// The tile's number in the band.
    pub tile: usize,
    /// `next` over the tile's rows of the last level, all i and k.
    next: ArrayViewMut3<'a, f32>,
    /// Local j of the first row of `next`.
    first: usize,
    /// Per level: the sums `[i - owned i start, j - first]` of the rows
    /// the tile keeps, and local j of the first.
    gosa: Vec<(ArrayViewMut2<'a, f64>, usize)>,
}

impl TileOut<'_> {
    /// Keeps the sums `gosa` of `level`'s rows: those of the band's own
    /// rows of an owned plane (the level's other rows repeat another
    /// rank's updates, or the rows after a sample, which are not summed).
    fn keep(&mut self, plan: &Plan, level: &Level<'_>, gosa: &[f64]) {
        if !plan.owned[0].contains(&level.q) {
            return;
        }
        let lo = level.rows.start;
        let (sums, first) = &mut self.gosa[level.s - 1];
        let (a, b) = (*first, *first + sums.dim().1);
        if a >= b {
            return;
        }
        let plane = sums.index_axis_mut(Axis(0), level.q - plan.owned[0].start);
        let plane = plane.into_slice().expect("a plane's sums are contiguous");
        plane.copy_from_slice(&gosa[a - lo..b - lo]);
    }
}

/// The edge buffer the threads of a band share: two rows of every plane
/// of every level below the last, where a tile leaves its last two rows of
/// each for the next tile, which another thread may sweep. Written and
/// read through raw pointers: entry `(s, q)` is written by tile `t` at
/// step `q + s - 1` of its walk after it read the entry there, and read
/// by tile `t + 1` at the same step, which waits for tile `t` to have
/// finished that step ([`Shared::wait`]); so the writes and reads of
/// every entry follow the tiles' order, one at a time.
pub struct Edges<'a> {
    values: *mut f32,
    len: usize,
    /// Planes per level (local i extent).
    planes: usize,
    /// Values per entry: two rows.
    entry: usize,
    buffer: PhantomData<&'a mut [f32]>,
}

// SAFETY: the entries are reached only through `read` and `write`, whose
// callers keep to the order above.
unsafe impl Send for Edges<'_> {}
unsafe impl Sync for Edges<'_> {}

impl<'a> Edges<'a> {
    /// The edge buffer of `plan` in `buffer` (at least
    /// [`Plan::edges_len`] values).
    pub fn new(plan: &Plan, buffer: &'a mut [f32]) -> Edges<'a> {
        assert!(
            buffer.len() >= plan.edges_len(),
            "an edge buffer as planned"
        );
        Edges {
            values: buffer.as_mut_ptr(),
            len: buffer.len(),
            planes: plan.dims[0],
            entry: 2 * plan.dims[2],
            buffer: PhantomData,
        }
    }

    /// Where entry `(s, q)` starts.
    fn at(&self, s: usize, q: usize) -> usize {
        let at = ((s - 1) * self.planes + q) * self.entry;
        assert!(at + self.entry <= self.len, "an entry of the buffer");
        at
    }

    /// Copies entry `(s, q)` into `rows`.
    ///
    /// # Safety
    /// No other thread writes the entry meanwhile: the tile that wrote it
    /// last has finished the step that wrote it.
    unsafe fn read(&self, s: usize, q: usize, rows: &mut [f32]) {
        assert_eq!(rows.len(), self.entry, "two rows");
        let at = self.at(s, q);
        // SAFETY: in bounds (`at`); no write races (the caller).
        unsafe { std::ptr::copy_nonoverlapping(self.values.add(at), rows.as_mut_ptr(), self.entry) }
    }

    /// Copies `rows` into entry `(s, q)`.
    ///
    /// # Safety
    /// No other thread reads or writes the entry meanwhile: the tile that
    /// read it last has finished the step that read it.
    unsafe fn write(&self, s: usize, q: usize, rows: &[f32]) {
        assert_eq!(rows.len(), self.entry, "two rows");
        let at = self.at(s, q);
        // SAFETY: in bounds (`at`); no other access (the caller).
        unsafe { std::ptr::copy_nonoverlapping(rows.as_ptr(), self.values.add(at), self.entry) }
    }
}

/// What the threads sweeping one band share: the edge buffer and how far
/// each tile has got.
pub struct Shared<'a> {
    edges: Edges<'a>,
    /// Steps each tile has finished.
    done: Vec<AtomicUsize>,
    /// Set when a thread's sweep panics, so that no thread waits for a
    /// tile that will not go on.
    failed: AtomicBool,
}

impl<'a> Shared<'a> {
    /// The shared state of a band of `tiles` tiles with edge buffer `edges`.
    pub fn new(edges: Edges<'a>, tiles: usize) -> Shared<'a> {
        Shared {
            edges,
            done: (0..tiles).map(|_| AtomicUsize::new(0)).collect(),
            failed: AtomicBool::new(false),
        }
    }

    /// Waits until tile `t` has finished `steps` steps: spinning briefly
    /// (the tile before is one step ahead, a few tens of microseconds),
    /// then giving the CPU to others, so that a team with more threads
    /// than CPUs still goes on. Panics where another thread failed.
    fn wait(&self, t: usize, steps: usize) {
        let mut spins = 0;
        while self.done[t].load(Ordering::Acquire) < steps {
            assert!(
                !self.failed.load(Ordering::Relaxed),
                "a thread sweeping an earlier tile failed"
            );
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Marks the band failed where a thread's sweep unwinds.
struct Failing<'s>(&'s AtomicBool);

impl Drop for Failing<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Runs the wavefront of `plan` over one thread's `tiles` of the band of
/// `schedule` (in order; each after the band's tile before it has gone a
/// step ahead, `shared`), reading `inp` (the field at the start and the
/// coefficients), with `scratch` of at least `plan.scratch_len(band
/// rows)` values, with the `kernel` asked for.
#[allow(clippy::too_many_arguments)]
pub fn sweep_tiles(
    isa: Isa,
    plan: &Plan,
    inp: &Inputs<'_>,
    schedule: &Schedule,
    shared: &Shared<'_>,
    tiles: Vec<TileOut<'_>>,
    scratch: &mut [f32],
    kernel: Kernel,
) {
    let _failing = Failing(&shared.failed);
    let rows = &schedule.rows;
    let sweeps = plan.sweeps;
    let lo = &schedule.lo;
    let count = schedule.tiles();
    // The scratch space starts on 4 KiB, so that a row placed at an offset
    // with the same residue as its field row has that row's address bits.
    let to_page = (scratch.as_ptr() as usize % 4096) / 4;
    let scratch = &mut scratch[(PAGE_FLOATS - to_page) % PAGE_FLOATS..];
    let at = Offsets {
        lay: inp.lay,
        slot: plan.slot_stride(rows.len()),
        level: plan.level_stride(rows.len()),
    };
    // The most rows of a level in one tile: the longest run.
    let longest = (0..count)
        .flat_map(|t| (1..=sweeps).map(move |s| (t, s)))
        .map(|(t, s)| lo[t + 1][s] - lo[t][s])
        .max()
        .unwrap_or(0);
    let mut front = Front {
        isa,
        plan,
        inp,
        at,
        shared,
        scratch,
        work: Work {
            gosa: vec![0.0; longest],
            spare: vec![0.0; longest],
            row_buf: (kernel.streaming).then(|| RowBuffer::new(plan.dims[2], plan.owned[2].start)),
            first: first_level(kernel.prefetch),
            cached: cached_level(kernel.prefetch),
        },
    };
    for mut out in tiles {
        let t = out.tile;
        let tile = Tile {
            t,
            lo: &lo[t],
            hi: &lo[t + 1],
            end: &lo[count],
            after: t > 0,
            before: t + 1 < count,
        };
        front.sweep_tile(&tile, &mut out);
    }
}

/// One thread's wavefront over its tiles: what every level reads (the
/// instruction set, the plan, the field at the start and the
/// coefficients, where the levels' rows lie in the scratch space, what
/// the band's threads share) and what the levels write (the scratch
/// space, the runs' sums).
struct Front<'t> {
    isa: Isa,
    plan: &'t Plan,
    inp: &'t Inputs<'t>,
    at: Offsets,
    shared: &'t Shared<'t>,
    scratch: &'t mut [f32],
    work: Work,
}

/// Where a level's rows are in the scratch space, from the start of the
/// level's own buffers. Every row of a ring slot sits at an offset with
/// the residue modulo 4 KiB of its own row in the fields, plus the level's
/// stagger, so the rows one update reads and writes fall on different L1
/// sets and never look like the same address to the load-store unit, as
/// in the classic sweep over the fields.
struct Offsets {
    lay: Layout,
    slot: usize,
    level: usize,
}

impl Offsets {
    /// Where level `s`'s buffers start.
    fn level(&self, s: usize) -> usize {
        (s - 1) * self.level
    }

    /// Row `lo - 2` of level `s`'s ring slot for plane `q`, whose tile
    /// updates rows `lo..` of the level: the slot holds the level's rows of
    /// the plane from `lo - 2` on, `nk` values apart.
    fn ring(&self, s: usize, q: usize, lo: usize) -> usize {
        let nk = self.lay.dims[2];
        let below = PAGE_FLOATS - (2 * nk) % PAGE_FLOATS;
        let shift = (self.lay.row(q, lo) + LEVEL_STAGGER[s % 2] + below) % PAGE_FLOATS;
        (q % SLOTS) * self.slot + shift
    }
}

/// One tile's rows at every level.
struct Tile<'a> {
    /// The tile's number in the band.
    t: usize,
    /// First row of each level.
    lo: &'a [usize],
    /// End of each level's rows.
    hi: &'a [usize],
    /// End of each level's rows in the band's last tile.
    end: &'a [usize],
    /// Whether a tile came before this one in the band (and left the two
    /// rows below this one's of every level and plane in the edge buffer).
    after: bool,
    /// Whether a tile comes after this one (and takes its last two rows
    /// of every level and plane from the edge buffer).
    before: bool,
}

/// A thread's space for the sums of one run of rows.
struct Work {
    /// The run's gosa, per row.
    gosa: Vec<f64>,
    /// Sums of the pieces of rows in ghost layers, not kept.
    spare: Vec<f64>,
    /// A whole row, for streaming stores.
    row_buf: Option<RowBuffer>,
    /// Level 1's kernel ([`first_level`]).
    first: FirstLevel,
    /// The later levels' kernel ([`cached_level`]).
    cached: CachedLevel,
}

/// How a wavefront's levels meet memory.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    /// Whether the last level writes `next` with streaming stores.
    pub streaming: bool,
    /// Whether the first level, which reads the fields as the classic
    /// sweep does, prefetches them as the classic sweep would (fields
    /// beyond the cache): in the cache the prefetch instructions were a
    /// tenth of level 1's (notes/cpu-perf.md, eighteenth session), as
    /// they slowed the classic sweep there. The cached levels then
    /// prefetch their coefficients ([`cached_level`]).
    pub prefetch: bool,
}

impl Front<'_> {
    /// The wavefront of one tile: at each step `w`, level `s` updates
    /// plane `w + 1 - s`; each step once the tile before has finished it
    /// (and left the edge rows the step reads), the step's end made known
    /// to the tile after.
    fn sweep_tile(&mut self, tile: &Tile<'_>, out: &mut TileOut<'_>) {
        let sweeps = self.plan.sweeps;
        let i_range: Vec<Range<usize>> =
            (0..=sweeps).map(|s| self.plan.range(0, s.max(1))).collect();
        let first = i_range[1].start;
        let last = i_range[1].end + sweeps - 1;
        for w in first..last {
            let step = w + 1 - first;
            if tile.after {
                self.shared.wait(tile.t - 1, step);
            }
            for s in 1..=sweeps {
                let Some(q) = (w + 1).checked_sub(s) else {
                    continue;
                };
                if !i_range[s].contains(&q) {
                    continue;
                }
                let level = Level {
                    s,
                    q,
                    rows: tile.lo[s]..tile.hi[s],
                    i_range: &i_range,
                };
                if s < sweeps {
                    self.sweep_inner(tile, &level, out);
                } else {
                    self.sweep_last(tile, &level, out);
                }
            }
            self.shared.done[tile.t].store(step, Ordering::Release);
        }
    }

    /// Level `s` of plane `q` below the last: the tile's rows of it into
    /// the level's ring slot, which then also holds the two rows below
    /// them (from the previous tile, through the edge buffer, or `p`'s
    /// fixed boundary) and, at the level's end, `p`'s row above them: so
    /// the next level finds the three rows around each of its rows in one
    /// run of rows.
    fn sweep_inner(&mut self, tile: &Tile<'_>, level: &Level<'_>, dst: &mut TileOut<'_>) {
        // The fields as locals, as the borrows below split them.
        let Front {
            isa,
            plan,
            inp,
            ref at,
            shared,
            ref mut scratch,
            ref mut work,
        } = *self;
        let (s, q, lo, hi) = (level.s, level.q, level.rows.start, level.rows.end);
        let nk = plan.dims[2];
        // Levels below s are read, level s written.
        let (done, todo) = scratch.split_at_mut(at.level(s));
        let done: &[f32] = done;
        let base = at.ring(s, q, lo);
        let row_at = |j: usize| base + (j + 2 - lo) * nk;
        let p_row = |j: usize| &inp.p[inp.lay.row(q, j)..][..nk];
        if tile.after {
            // SAFETY: the tile before finished this step (`sweep_tile`),
            // which wrote the entry; the tile after reads it only once
            // this tile has finished the step.
            unsafe {
                shared
                    .edges
                    .read(s, q, &mut todo[row_at(lo - 2)..][..2 * nk]);
            }
        } else {
            for j in lo.saturating_sub(2)..lo {
                todo[row_at(j)..][..nk].copy_from_slice(p_row(j));
            }
        }
        if hi == tile.end[s] && hi < plan.dims[1] {
            todo[row_at(hi)..][..nk].copy_from_slice(p_row(hi));
        }
        if lo == hi {
            return;
        }
        let k = plan.range(2, s);
        let out = &mut todo[row_at(lo)..row_at(hi)];
        let gosa = &mut work.gosa[..hi - lo];
        let spare = &mut work.spare[..hi - lo];
        let own = &plan.owned[2];
        if s == 1 {
            let first = work.first;
            in_pieces(&k, own, gosa, spare, |k, g| {
                first(isa, inp, q, lo..hi, k, out, g);
            });
        } else {
            let planes = planes(plan, inp, tile, at, done, level);
            let cached = work.cached;
            in_pieces(&k, own, gosa, spare, |k, g| {
                cached(isa, &planes, k, out, g);
            });
        }
        // The fixed boundary values just outside the level's k range,
        // which the next level reads (`p`'s own); beside a neighbour the
        // next level reads no further than this one updated.
        let (low, high) = (!plan.open[2][0], !plan.open[2][1]);
        if low || high {
            let (first, end) = (k.start - 1, k.end);
            assert!(end < nk, "the boundary lies in the row");
            let p_rows = &inp.p[inp.lay.row(q, lo)..inp.lay.row(q, hi)];
            for (row, p) in out.chunks_exact_mut(nk).zip(p_rows.chunks_exact(nk)) {
                if low {
                    row[first] = p[first];
                }
                if high {
                    row[end] = p[end];
                }
            }
        }
        if tile.before {
            // SAFETY: this tile read the entry above in this step, after
            // the tile before wrote it; the tile after reads it only once
            // this tile has finished the step.
            unsafe { shared.edges.write(s, q, &todo[row_at(hi - 2)..row_at(hi)]) };
        }
        dst.keep(plan, level, gosa);
    }

    /// The last level of plane `q`: the tile's rows of this plane, all
    /// owned and in the band, into the new field.
    fn sweep_last(&mut self, tile: &Tile<'_>, level: &Level<'_>, out: &mut TileOut<'_>) {
        let (plan, inp) = (self.plan, self.inp);
        let (s, q, lo, hi) = (level.s, level.q, level.rows.start, level.rows.end);
        let nk = plan.dims[2];
        if lo == hi {
            return;
        }
        let k_own = plan.owned[2].clone();
        let mut plane: ArrayViewMut2<f32> =
            out.next
                .slice_mut(s![q, lo - out.first..hi - out.first, ..]);
        let dst = plane
            .as_slice_mut()
            .expect("rows of a plane are contiguous");
        let gosa = &mut self.work.gosa[..hi - lo];
        let (first, cached) = (self.work.first, self.work.cached);
        let planes = if s == 1 {
            None
        } else {
            Some(planes(plan, inp, tile, &self.at, self.scratch, level))
        };
        let isa = self.isa;
        match (self.work.row_buf.as_mut(), planes) {
            (Some(buf), planes) => {
                // Whole rows, so that the tile's rows form one run of lines.
                let mut writer = LineWriter::new(dst);
                for (n, g) in gosa.iter_mut().enumerate() {
                    let j = lo + n;
                    let row = buf.with_ends(&inp.p[inp.lay.row(q, j)..][..nk], &k_own);
                    let g = std::slice::from_mut(g);
                    match &planes {
                        Some(planes) => {
                            let one = planes.from_row(n);
                            cached(isa, &one, k_own.clone(), row, g);
                        }
                        None => first(isa, inp, q, j..j + 1, k_own.clone(), row, g),
                    }
                    writer.write(n * nk, row);
                }
            }
            (None, Some(planes)) => cached(isa, &planes, k_own, dst, gosa),
            (None, None) => first(isa, inp, q, lo..hi, k_own, dst, gosa),
        }
        out.keep(plan, level, gosa);
    }
}

/// The plane one level updates at one step of a tile's wavefront.
struct Level<'a> {
    /// The level (1-based).
    s: usize,
    /// The plane (local i).
    q: usize,
    /// The tile's rows (local j) of the level.
    rows: Range<usize>,
    /// Local i each level updates, by level (index 0 as level 1).
    i_range: &'a [Range<usize>],
}

/// The three planes of level `s - 1` that level `s` reads for the tile's
/// rows of plane `q`, each from the row below the tile's first on: level
/// `s - 1`'s ring slot (in `done`, the levels below `s`), or `p` itself
/// (the grid's fixed boundary along i).
fn planes<'a>(
    plan: &Plan,
    inp: &Inputs<'a>,
    tile: &Tile<'_>,
    at: &Offsets,
    done: &'a [f32],
    level: &Level<'_>,
) -> Planes<'a> {
    let (s, q, lo, hi) = (level.s, level.q, level.rows.start, level.rows.end);
    let nk = plan.dims[2];
    let prev = s - 1;
    let (plo, phi) = (tile.lo[prev], tile.hi[prev]);
    // The previous level's slot holds its rows plo - 2 .. phi, and row
    // phi (`p`'s) where the level ends there.
    assert!(
        lo + 1 >= plo && (hi < phi || hi == phi && phi == tile.end[prev]),
        "level {s}'s rows {lo}..{hi} read level {prev}'s {plo}..{phi}"
    );
    let plane = |qq: usize| -> &'a [f32] {
        if level.i_range[prev].contains(&qq) {
            let first = at.level(prev) + at.ring(prev, qq, plo) + (lo + 1 - plo) * nk;
            &done[first..]
        } else {
            &inp.p[inp.lay.row(qq, lo - 1)..]
        }
    };
    Planes {
        p: [plane(q - 1), plane(q), plane(q + 1)],
        nk,
        coef: inp.coef,
        coef_row: q * plan.dims[1] + lo,
        omega: inp.omega,
    }
}

/// The kernel of level 1, which reads the fields: with prefetch or
/// without.
type FirstLevel = fn(Isa, &Inputs<'_>, usize, Range<usize>, Range<usize>, &mut [f32], &mut [f64]);

/// Level 1's kernel: with prefetch (of the coefficients too,
/// [`kernel::sweep_rows_ahead`]) or without.
fn first_level(prefetch: bool) -> FirstLevel {
    if prefetch {
        kernel::sweep_rows_ahead
    } else {
        kernel::sweep_rows_at_cached
    }
}

/// The kernel of the levels after the first, which read their rows of `p`
/// from the cache.
type CachedLevel = fn(Isa, &Planes<'_>, Range<usize>, &mut [f32], &mut [f64]);

/// The cached levels' kernel: where the fields are beyond the cache (and
/// level 1 prefetches), prefetching the coefficients, which a step's
/// other levels have pushed out to the L3
/// ([`kernel::sweep_planes_ahead`]); in the cache without, as the
/// prefetch instructions would only take issue slots there.
fn cached_level(prefetch: bool) -> CachedLevel {
    if prefetch {
        kernel::sweep_planes_ahead
    } else {
        kernel::sweep_planes
    }
}

/// Updates points `k` of a run's rows, the owned ones `own` with the row
/// kernel's gosa lanes (into `gosa`) and the redundant ones beyond them,
/// into ghost layers, without (into `spare`), calling `sweep(k, sums)`
/// for each piece.
fn in_pieces(
    k: &Range<usize>,
    own: &Range<usize>,
    gosa: &mut [f64],
    spare: &mut [f64],
    mut sweep: impl FnMut(Range<usize>, &mut [f64]),
) {
    if k.start < own.start {
        sweep(k.start..own.start, spare);
    }
    if own.end < k.end {
        sweep(own.end..k.end, spare);
    }
    sweep(own.clone(), gosa);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Xeon guest's caches: a 2 MiB L2 per core, a 480 MiB L3 for two.
    const XEON: PerCore = PerCore {
        private_bytes: 2 << 20,
        shared_bytes: 480 << 20,
        sharing: 2,
    };

    /// A band's sample is three tiles, at least the share asked for and
    /// at most half the band; a first tile (T rows) more than twice the
    /// others leaves the band whole.
    #[test]
    fn a_sample_is_three_tiles_unless_the_first_is_far_taller() {
        let grid = crate::grid::Grid::new([257, 257, 513]).unwrap();
        let one = crate::grid::decomp::ProcGrid { p: [1, 1, 1] };
        let block = Block::of(&grid, &one, 0).with_depth(16);
        let plan = |sweeps: usize, rows: usize| Plan::new(&block, sweeps, rows);
        assert_eq!(plan(16, 9).sample_rows(255, 0.01), Some(34));
        assert_eq!(plan(8, 19).sample_rows(255, 0.01), Some(57));
        assert_eq!(plan(8, 4).sample_rows(255, 0.01), Some(16));
        assert_eq!(plan(8, 4).sample_rows(255, 0.2), Some(51));
        assert_eq!(plan(12, 4).sample_rows(255, 0.01), None);
        assert_eq!(plan(16, 4).sample_rows(255, 0.01), None);
        assert_eq!(plan(8, 19).sample_rows(113, 0.01), None);
        assert_eq!(plan(8, 19).sample_rows(114, 0.01), Some(57));
        // Every height the model offers leaves a sample, on any cache and
        // for every depth: on a 256 KiB L2 and on a Xeon's 2 MiB.
        let small = PerCore {
            private_bytes: 256 << 10,
            shared_bytes: 4 << 20,
            sharing: 2,
        };
        for core in [small, XEON] {
            for sweeps in 2..=16 {
                for rows in tile_heights(514, sweeps, &core) {
                    let others = other_tile_rows(rows, 514, sweeps, &core);
                    for r in std::iter::once(rows).chain(others) {
                        let sample = plan(sweeps, r).sample_rows(255, 0.01);
                        assert!(sample.is_some(), "T={sweeps}, tiles of {r} rows");
                    }
                }
            }
        }
    }

    /// Several threads get as many tiles each: the one-thread count rounded
    /// up to a multiple of the threads, of two rows at least, on a short
    /// band a first tile of T rows and the rest split; one thread's tiles
    /// are as before.
    #[test]
    fn threads_get_as_many_tiles_each() {
        let grid = crate::grid::Grid::new([34, 130, 34]).unwrap();
        let one = crate::grid::decomp::ProcGrid { p: [1, 1, 1] };
        let block = Block::of(&grid, &one, 0).with_depth(8);
        let starts = |sweeps: usize, rows: usize, threads: usize, band: usize| {
            Plan::new(&block, sweeps, rows)
                .shared_by(threads)
                .tile_starts(band)
        };
        // One thread: a first tile of 16, then tiles of 16 to 31 rows.
        assert_eq!(starts(8, 16, 1, 127), [0, 16, 35, 54, 73, 91, 109]);
        // Two: 8 tiles, 3: 9, 4: 8, of even heights.
        assert_eq!(starts(8, 16, 2, 127), [0, 15, 31, 47, 63, 79, 95, 111]);
        for threads in 1..=8 {
            let n = starts(12, 16, threads, 127).len();
            assert!(n.is_multiple_of(threads), "{threads} threads: {n} tiles");
            assert!(n >= 7, "{threads} threads: {n} tiles");
        }
        // A band shorter than two tiles: split evenly, the first of T
        // rows at least.
        assert_eq!(starts(8, 32, 1, 16), [0]);
        assert_eq!(starts(8, 32, 2, 16), [0, 8]);
        assert_eq!(starts(2, 32, 2, 16), [0, 8]);
        assert_eq!(starts(4, 32, 3, 16), [0, 5, 11]);
        assert_eq!(starts(12, 32, 2, 16), [0, 12]);
        assert_eq!(starts(8, 32, 2, 40), [0, 20]);
        // Too short for a second tile of two rows.
        assert_eq!(starts(8, 32, 2, 9), [0]);
        // The first tile has T rows at least, every other two.
        for band in 2..60 {
            for threads in 1..=5 {
                for sweeps in [2, 4, 7] {
                    let s = starts(sweeps, 2, threads, band);
                    let case = format!("{band} rows, {threads} threads, T={sweeps}: {s:?}");
                    assert!(s.len() == 1 || s[1] >= sweeps, "{case}");
                    assert!(s.windows(2).all(|w| w[1] - w[0] >= 2), "{case}");
                    assert!(band - s.last().unwrap() >= 2 || s.len() == 1, "{case}");
                }
            }
        }
    }

    /// The tiles' parts of `next` and of the sums cover the band's rows
    /// once, at every level.
    #[test]
    fn the_tiles_outputs_cover_the_band_once() {
        let grid = crate::grid::Grid::new([6, 40, 5]).unwrap();
        let one = crate::grid::decomp::ProcGrid { p: [1, 1, 1] };
        let block = Block::of(&grid, &one, 0).with_depth(4);
        let dims = block.local_dims();
        let plan = Plan::new(&block, 4, 3).shared_by(2);
        let j0 = block.origin(1);
        for rows in [j0..j0 + block.n[1], j0..j0 + 17] {
            let schedule = Schedule::new(&plan, rows.clone());
            let mut next = ndarray::Array3::<f32>::zeros(dims);
            let mut gosa = ndarray::Array3::<f64>::zeros((4, block.n[0], block.n[1]));
            let tiles = schedule.split(next.view_mut(), gosa.view_mut(), j0);
            assert!(tiles.len().is_multiple_of(2) && tiles.len() > 2);
            let mut seen = vec![vec![0; dims[1]]; 5];
            for (t, tile) in tiles.iter().enumerate() {
                assert_eq!(tile.tile, t);
                let mine = tile.first..tile.first + tile.next.dim().1;
                seen[0][mine].iter_mut().for_each(|n| *n += 1);
                for (s, (sums, first)) in tile.gosa.iter().enumerate() {
                    let mine = *first..first + sums.dim().1;
                    seen[s + 1][mine].iter_mut().for_each(|n| *n += 1);
                }
            }
            for counts in seen {
                let want: Vec<usize> = (0..dims[1])
                    .map(|j| usize::from(rows.contains(&j)))
                    .collect();
                assert_eq!(counts, want, "{rows:?}");
            }
        }
    }

    /// A thread waiting for a tile whose thread failed gives up (panics)
    /// instead of waiting for ever.
    #[test]
    fn a_wait_for_a_failed_tile_ends() {
        let grid = crate::grid::Grid::new([6, 10, 5]).unwrap();
        let one = crate::grid::decomp::ProcGrid { p: [1, 1, 1] };
        let plan = Plan::new(&Block::of(&grid, &one, 0).with_depth(2), 2, 2);
        let mut buffer = vec![0.0; plan.edges_len()];
        let shared = Shared::new(Edges::new(&plan, &mut buffer), 2);
        shared.done[0].store(3, Ordering::Release);
        shared.wait(0, 3);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| shared.wait(0, 4));
            let failing = scope.spawn(|| {
                let _failing = Failing(&shared.failed);
                panic!("a sweep fails");
            });
            assert!(failing.join().is_err());
            assert!(waiter.join().is_err(), "the waiter gave up");
        });
    }

    /// The model fills three eighths of the private cache, within 4 to 32
    /// rows: the heights measured fastest there at sizes M and L.
    #[test]
    fn tiles_fill_three_eighths_of_the_private_cache() {
        // Size M's rows (258 values): 786 KiB for T = 4 is 14 rows.
        assert_eq!(tile_rows(258, 4, &XEON), 14);
        assert_eq!(tile_rows(258, 8, &XEON), 7);
        // Size L's rows: T = 8 would get 2, the floor is 4.
        assert_eq!(tile_rows(514, 8, &XEON), MIN_TILE_ROWS);
        // Short rows: the ceiling.
        assert_eq!(tile_rows(10, 2, &XEON), TILE_ROWS);
        // Each tile row of T planes really fits: 14 rows of M at T = 4.
        assert!(14 * bytes_per_tile_row(258, 4) <= (2 << 20) * 3 / 8);
        assert!(15 * bytes_per_tile_row(258, 4) > (2 << 20) * 3 / 8);
    }

    /// Each T starts with two heights, one per cache: three eighths of the
    /// private one, a quarter of the thread's share of the last level.
    #[test]
    fn each_t_starts_with_a_height_for_each_cache() {
        // A Zen 4 guest: a 1 MiB L2, a 32 MiB L3 for two cores.
        let zen4 = PerCore {
            private_bytes: 1 << 20,
            shared_bytes: 32 << 20,
            sharing: 2,
        };
        // Size L's rows: 214 KB a tile row at T = 8, 4 MiB hold 19.
        assert_eq!(tile_heights(514, 8, &zen4), [MIN_TILE_ROWS, 19]);
        // T = 16: half of T is the floor.
        assert_eq!(tile_heights(514, 16, &zen4), [8, 9]);
        assert!(19 * bytes_per_tile_row(514, 8) <= 4 << 20);
        assert!(20 * bytes_per_tile_row(514, 8) > 4 << 20);
        // Size M's rows at T = 8: the private cache's floor, the ceiling.
        assert_eq!(tile_heights(258, 8, &zen4), [MIN_TILE_ROWS, TILE_ROWS]);
        // A Xeon guest's 480 MiB L3: the ceiling for every T.
        assert_eq!(tile_heights(258, 4, &XEON), [14, TILE_ROWS]);
        assert_eq!(tile_heights(514, 16, &XEON), [8, TILE_ROWS]);
        assert_eq!(tile_heights(514, 12, &XEON), [6, TILE_ROWS]);
    }

    /// The driver also times half and twice the starting height and the
    /// other cache's, each once and only within 4 to 32 rows.
    #[test]
    fn the_other_heights_are_half_twice_and_the_other_caches() {
        assert_eq!(other_tile_rows(14, 258, 4, &XEON), [7, 28, 32]);
        // The floor: no half, no 2 below it.
        assert_eq!(other_tile_rows(4, 514, 8, &XEON), [8, 32]);
        // The ceiling: the shared fit is the model's own height.
        assert_eq!(other_tile_rows(32, 10, 2, &XEON), [16]);
        // A 512 KiB L2 and a 4 MiB share of the L3: the floor, twice it,
        // and the 19 rows a quarter of the share holds.
        let small = PerCore {
            private_bytes: 512 << 10,
            shared_bytes: 8 << 20,
            sharing: 2,
        };
        let rows = tile_rows(258, 4, &small);
        assert_eq!(rows, MIN_TILE_ROWS);
        assert_eq!(other_tile_rows(rows, 258, 4, &small), [8, 19]);
        // Started with the shared height: half, and the private one (twice
        // is beyond the ceiling).
        assert_eq!(other_tile_rows(19, 258, 4, &small), [9, 4]);
    }
}
