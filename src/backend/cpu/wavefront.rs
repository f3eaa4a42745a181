//! Temporal blocking on the CPU: `L` successive sweeps of a block between
//! two halo exchanges, as a cache-blocked wavefront, so that the
//! coefficients and `p` come from memory once per `L` iterations instead of
//! once per iteration. Level `s` (1 to `L`) is the wavefront's `s`-th
//! sweep; `sweeps` counts them.
//!
//! The block's owned rows are split along j into one band per thread and
//! each band into tiles of a few rows. A tile walks the whole i extent of
//! the block plane by plane; at each step level 1 updates plane `w` from the
//! field in memory, level 2 plane `w-1` from level 1's planes, and so on, so
//! the planes each level needs were made one, two and three steps before
//! and are still in the cache, and the coefficients level 1 loads are read
//! again by the later sweeps while they are. Only level `L` writes the new
//! field; the others live in buffers private to the thread.
//!
//! Tiles are skewed: level `s` of a tile covers its rows shifted down by
//! `s-1`, so the rows below them that it reads from level `s-1` were made
//! by the previous tile of the band, which leaves its last two rows of
//! every level and plane in an edge buffer (two of them, for alternate
//! tiles). Within a band every row of every level is computed once, however
//! small the tiles; the rest of a level's rows sit in a ring of three plane
//! buffers (plane `q` in slot `q % 3`).
//!
//! At the band's ends a level covers `L-s` rows more than the band: into
//! the ghost layers received from a neighbour (filled by the exchange,
//! `depth >= L` deep), and into the next thread's band. Those redundant
//! updates repeat arithmetic that another thread or rank also does, with
//! the same inputs and so the same bits; only the band's own rows are
//! stored or counted in gosa. The same holds along i and k, whose ranges
//! grow by `L-s` towards each neighbour. At the grid's edge the sweeps stop
//! at the fixed boundary, whose values are read from `p` itself.
//!
//! Every level's gosa is kept per owned row, with the row kernel's lane
//! order over the owned k points, and summed in row order by the caller: the
//! classic sweep's sums, bit for bit.

use super::kernel::{self, Inputs, Layout, Rows};
use super::lines::{LineWriter, RowBuffer};
use crate::grid::decomp::Block;
use crate::machine::isa::Isa;
use ndarray::{ArrayViewMut2, ArrayViewMut3, s};
use std::ops::Range;

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
    fn tile_starts(&self, rows: usize) -> Vec<usize> {
        let (first, rest) = (self.first_tile(), self.rest_tile());
        if rows < first + rest {
            return vec![0];
        }
        let tiles = (rows - first) / rest;
        std::iter::once(0)
            .chain((0..tiles).map(|t| first + crate::grid::decomp::split(rows - first, tiles, t).0))
            .collect()
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

    /// Values of the scratch space one thread with a band of at most
    /// `band_rows` rows needs for calls of up to `depth` sweeps (with room
    /// to start it on a 4 KiB boundary).
    pub fn scratch_len(&self, band_rows: usize) -> usize {
        (self.depth - 1) * self.level_stride(band_rows) + PAGE_FLOATS
    }

    /// Distance between ring slots: the rows, and room to shift them
    /// within 4 KiB.
    fn slot_stride(&self, band_rows: usize) -> usize {
        self.ring_rows(band_rows) * self.dims[2] + PAGE_FLOATS
    }

    /// Distance between the planes of an edge buffer: two rows, and room
    /// to shift them within 4 KiB.
    fn edge_plane(&self) -> usize {
        2 * self.dims[2] + PAGE_FLOATS
    }

    /// Distance between the buffers of consecutive sweeps: three slots
    /// and two edge buffers of every plane.
    fn level_stride(&self, band_rows: usize) -> usize {
        SLOTS * self.slot_stride(band_rows) + 2 * self.dims[0] * self.edge_plane()
    }
}

/// Rows per tile, unless the cache is too small for them: measured best at
/// sizes M and L, one and two threads, T = 4 and 8, against 8, 16, 48 and
/// 64 (notes/cpu-perf.md). Shorter tiles keep the planes in flight in the
/// L2 but cut level 1's runs from memory short (the hardware prefetchers
/// restart at every run) and read more edge rows from the L3; taller ones
/// fall out of the L2 and L3 share.
const TILE_ROWS: usize = 32;

/// Fewest rows per wavefront tile that still pays (16-row tiles gained
/// 1.05x at size M, 8-row ones lost 7 %: notes/cpu-perf.md).
pub const MIN_TILE_ROWS: usize = 16;

/// The tile heights besides `rows` (the height [`tile_rows`] chose) that
/// are worth timing on the machine: half of it, where that leaves the
/// [`MIN_TILE_ROWS`] that still pay. The height that wins moves between
/// machines and sizes: on a Zen 3 guest with two threads, tiles of 16 rows
/// swept size L 1.2-1.3x faster than tiles of 32 at T = 4 and 8, while at
/// M neither won clearly (notes/cpu-perf.md).
pub fn other_tile_rows(rows: usize) -> Vec<usize> {
    let half = rows / 2;
    if half >= MIN_TILE_ROWS {
        vec![half]
    } else {
        Vec::new()
    }
}

/// Chooses the rows per tile for `sweeps` sweeps of rows `nk` values long:
/// [`TILE_ROWS`], or fewer if the thirteen arrays' rows of the `sweeps`
/// planes in flight would not fit in `budget` bytes (the core's share of
/// the last-level cache), at least 2.
pub fn tile_rows(nk: usize, sweeps: usize, budget: usize) -> usize {
    let fit = budget / (nk * 4 * 13 * sweeps).max(1);
    TILE_ROWS.min(fit).max(2)
}

/// One thread's part of a wavefront: its band of owned rows, the band of
/// `next` and of the per-row gosa those rows land in.
pub struct Band<'a> {
    /// Owned rows (local j) of the band.
    pub rows: Range<usize>,
    /// `next` over local j `offset..`, all i and k.
    pub next: ArrayViewMut3<'a, f32>,
    /// Gosa per level and owned row: `[level, i - owned i start, j -
    /// rows.start]`.
    pub gosa: ArrayViewMut3<'a, f64>,
    /// Local j of the first row of `next`.
    pub offset: usize,
}

/// Runs the wavefront of `plan` over one thread's `band`, reading `inp` (the
/// field at the start and the coefficients), with `scratch` of at least
/// `plan.scratch_len(band rows)` values; `streaming` writes `next` with
/// streaming stores.
pub fn sweep_band(
    isa: Isa,
    plan: &Plan,
    inp: &Inputs<'_>,
    band: &mut Band<'_>,
    scratch: &mut [f32],
    streaming: bool,
) {
    let rows = band.rows.clone();
    if rows.is_empty() {
        return;
    }
    let sweeps = plan.sweeps;
    // The scratch space starts on 4 KiB, so that a row placed at an offset
    // with the same residue as its field row has that row's address bits.
    let to_page = (scratch.as_ptr() as usize % 4096) / 4;
    let scratch = &mut scratch[(PAGE_FLOATS - to_page) % PAGE_FLOATS..];
    let starts = plan.tile_starts(rows.len());
    let tiles = starts.len();
    // lo[t][s]: the first row level s of tile t updates (tile t ends where
    // tile t+1 starts; lo[tiles] is the band's end).
    let lo: Vec<Vec<usize>> = (0..=tiles)
        .map(|t| {
            (0..=sweeps)
                .map(|s| {
                    let s = s.max(1);
                    let range = plan.range(1, s);
                    let first = range.start.max(rows.start.saturating_sub(sweeps - s));
                    let end = range.end.min(rows.end + sweeps - s);
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
    let at = Offsets {
        lay: inp.lay,
        slot: plan.slot_stride(rows.len()),
        edge: plan.dims[0] * plan.edge_plane(),
        edge_plane: plan.edge_plane(),
        level: plan.level_stride(rows.len()),
    };
    for t in 0..tiles {
        let tile = Tile {
            lo: &lo[t],
            hi: &lo[t + 1],
            after: t > 0,
            parity: t % 2,
        };
        sweep_tile(isa, plan, inp, band, &tile, &at, scratch, streaming);
    }
}

/// Where a level's rows are in the scratch space. Every row sits at an
/// offset with the residue modulo 4 KiB of its own row in the fields, plus
/// the level's stagger, so the rows one update reads and writes fall on
/// different L1 sets and never look like the same address to the
/// load-store unit, as in the classic sweep over the fields.
struct Offsets {
    lay: Layout,
    slot: usize,
    edge: usize,
    edge_plane: usize,
    level: usize,
}

impl Offsets {
    /// Shift within 4 KiB of row `(q, j)` of level `s`.
    fn shift(&self, s: usize, q: usize, j: usize) -> usize {
        (self.lay.row(q, j) + LEVEL_STAGGER[s % 2]) % PAGE_FLOATS
    }

    /// Row `j` of level `s`'s ring slot for plane `q`, whose rows start at
    /// row `first`.
    fn ring(&self, s: usize, q: usize, first: usize, j: usize) -> usize {
        let nk = self.lay.dims[2];
        (s - 1) * self.level + (q % SLOTS) * self.slot + self.shift(s, q, first) + (j - first) * nk
    }

    /// Row `j` of plane `q` in level `s`'s edge buffer `parity`, which
    /// holds rows `first` and `first + 1`.
    fn edge(&self, s: usize, parity: usize, q: usize, first: usize, j: usize) -> usize {
        let nk = self.lay.dims[2];
        (s - 1) * self.level
            + SLOTS * self.slot
            + parity * self.edge
            + q * self.edge_plane
            + self.shift(s, q, first)
            + (j - first) * nk
    }
}

/// One tile's rows at every level.
struct Tile<'a> {
    /// First row of each level.
    lo: &'a [usize],
    /// End of each level's rows.
    hi: &'a [usize],
    /// Whether a tile came before this one in the band (and left the two
    /// rows below this one's of every level in the other edge buffer).
    after: bool,
    /// Which edge buffer this tile writes.
    parity: usize,
}

/// The wavefront of one tile.
#[allow(clippy::too_many_arguments)]
fn sweep_tile(
    isa: Isa,
    plan: &Plan,
    inp: &Inputs<'_>,
    band: &mut Band<'_>,
    tile: &Tile<'_>,
    at: &Offsets,
    scratch: &mut [f32],
    streaming: bool,
) {
    let sweeps = plan.sweeps;
    let nk = plan.dims[2];
    let i_range: Vec<Range<usize>> = (0..=sweeps).map(|s| plan.range(0, s.max(1))).collect();
    let k_own = plan.owned[2].clone();
    let i_own = plan.owned[0].clone();
    let band_rows = band.rows.clone();
    let mut row_buf = streaming.then(|| RowBuffer::new(nk, k_own.start));
    let first = i_range[1].start;
    let last = i_range[1].end + sweeps - 1;
    for w in first..last {
        for s in 1..=sweeps {
            let Some(q) = (w + 1).checked_sub(s) else {
                continue;
            };
            if !i_range[s].contains(&q) {
                continue;
            }
            let k = plan.range(2, s);
            let prev = s - 1;
            // Levels below s are read, level s (and above) written.
            let split = if s < sweeps {
                (s - 1) * at.level
            } else {
                scratch.len()
            };
            let (done, todo) = scratch.split_at_mut(split.min(scratch.len()));
            let done: &[f32] = done;
            // Where level s-1's rows of planes q-1, q, q+1 are: made by this
            // tile, by the previous one (its last two rows, in the other
            // edge buffer), or `p` itself (level 0, or the grid's fixed
            // boundary).
            let source = |qq: usize| {
                let plane = &inp.p[inp.lay.row(qq, 0)..];
                if prev == 0 || !i_range[prev].contains(&qq) {
                    return Source::plane(plane, nk);
                }
                let (lo, hi) = (tile.lo[prev], tile.hi[prev]);
                let edge_from = hi.saturating_sub(2).max(lo);
                let (earlier, earlier_rows) = if tile.after {
                    let o = at.edge(prev, 1 - tile.parity, qq, lo - 2, lo - 2);
                    (&done[o..], lo - 2..lo)
                } else {
                    (&done[..0], lo..lo)
                };
                Source {
                    ring: &done[at.ring(prev, qq, lo, lo)..],
                    ring_rows: lo..edge_from,
                    edge: &done[at.edge(prev, tile.parity, qq, hi - 2, edge_from)..],
                    edge_rows: edge_from..hi,
                    earlier,
                    earlier_rows,
                    plane,
                    nk,
                }
            };
            let srcs = [source(q - 1), source(q), source(q + 1)];
            let rows_of = |j: usize| Rows {
                p: [
                    [srcs[0].row(j - 1), srcs[0].row(j), srcs[0].row(j + 1)],
                    [srcs[1].row(j - 1), srcs[1].row(j), srcs[1].row(j + 1)],
                    [srcs[2].row(j - 1), srcs[2].row(j), srcs[2].row(j + 1)],
                ],
                coef: inp.coef_row(q, j),
            };
            // Where level s keeps its row j: the ring, or the edge buffer
            // for the tile's last two rows of the level.
            let (lo, hi) = (tile.lo[s], tile.hi[s]);
            let edge_from = hi.saturating_sub(2).max(lo);
            let place = |j: usize| {
                if j < edge_from {
                    at.ring(s, q, lo, j)
                } else {
                    at.edge(s, tile.parity, q, hi - 2, j)
                }
            };
            let owned_plane = i_own.contains(&q);
            let rows = tile.lo[s]..tile.hi[s];
            // Level 1 streams from memory; the others find their rows in
            // the cache, where prefetching only costs.
            let kernel: RowKernel = if s == 1 {
                kernel::sweep_row
            } else {
                kernel::sweep_row_cached
            };
            if rows.is_empty() {
                continue;
            }
            if s < sweeps {
                for j in rows {
                    let nb = rows_of(j);
                    let o = place(j) - split;
                    let out = &mut todo[o..o + nk];
                    // The fixed boundary values just outside the level's k
                    // range, which the next level reads (`p`'s own).
                    let p_row = &inp.p[inp.lay.row(q, j)..][..nk];
                    out[k.start - 1] = p_row[k.start - 1];
                    out[k.end] = p_row[k.end];
                    let g = sweep_pieces(kernel, isa, &nb, &k, &k_own, inp.omega, out);
                    if owned_plane && band_rows.contains(&j) {
                        band.gosa[[s - 1, q - i_own.start, j - band_rows.start]] = g;
                    }
                }
            } else {
                // The last level: the tile's rows of this plane, all owned
                // and in the band, into the new field.
                let mut plane: ArrayViewMut2<f32> = band.next.slice_mut(s![
                    q,
                    rows.start - band.offset..rows.end - band.offset,
                    ..
                ]);
                let dst = plane
                    .as_slice_mut()
                    .expect("rows of a plane are contiguous");
                let gosa = &mut band.gosa;
                let row_gosa = |j: usize| [s - 1, q - i_own.start, j - band_rows.start];
                if let Some(buf) = row_buf.as_mut() {
                    let mut writer = LineWriter::new(dst);
                    for j in rows.clone() {
                        let nb = rows_of(j);
                        // Whole rows, so that the tile's rows form one run
                        // of lines.
                        let row = buf.with_ends(&inp.p[inp.lay.row(q, j)..][..nk], &k_own);
                        gosa[row_gosa(j)] = kernel(isa, &nb, k_own.clone(), inp.omega, row);
                        writer.write((j - rows.start) * nk, row);
                    }
                } else {
                    for j in rows.clone() {
                        let nb = rows_of(j);
                        let o = (j - rows.start) * nk;
                        let out = &mut dst[o..o + nk];
                        gosa[row_gosa(j)] = kernel(isa, &nb, k_own.clone(), inp.omega, out);
                    }
                }
            }
        }
    }
}

/// Where one plane of level `s-1`'s rows is, as [`sweep_tile`] finds them.
struct Source<'a> {
    /// The ring slot, from its first row.
    ring: &'a [f32],
    /// Rows in the ring.
    ring_rows: Range<usize>,
    /// This tile's edge buffer, from its first row.
    edge: &'a [f32],
    /// Rows in it.
    edge_rows: Range<usize>,
    /// The previous tile's edge buffer, from its first row.
    earlier: &'a [f32],
    /// Rows in it.
    earlier_rows: Range<usize>,
    /// The plane of `p`, from its first row.
    plane: &'a [f32],
    /// Values per row.
    nk: usize,
}

impl<'a> Source<'a> {
    /// Rows all read from the plane of `p`.
    fn plane(plane: &'a [f32], nk: usize) -> Source<'a> {
        Source {
            ring: &plane[..0],
            ring_rows: 0..0,
            edge: &plane[..0],
            edge_rows: 0..0,
            earlier: &plane[..0],
            earlier_rows: 0..0,
            plane,
            nk,
        }
    }

    /// Row `j`.
    #[inline(always)]
    fn row(&self, j: usize) -> &'a [f32] {
        let nk = self.nk;
        let (from, at) = if self.ring_rows.contains(&j) {
            (self.ring, j - self.ring_rows.start)
        } else if self.edge_rows.contains(&j) {
            (self.edge, j - self.edge_rows.start)
        } else if self.earlier_rows.contains(&j) {
            (self.earlier, j - self.earlier_rows.start)
        } else {
            (self.plane, j)
        };
        &from[at * nk..at * nk + nk]
    }
}

/// Updates points `k` of a row, the owned ones `own` with the row kernel's
/// gosa lanes (returned) and the redundant ones beyond them, into ghost
/// layers, without.
fn sweep_pieces(
    kernel: RowKernel,
    isa: Isa,
    rows: &Rows<'_>,
    k: &Range<usize>,
    own: &Range<usize>,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    if k.start < own.start {
        kernel(isa, rows, k.start..own.start, omega, out);
    }
    if own.end < k.end {
        kernel(isa, rows, own.end..k.end, omega, out);
    }
    kernel(isa, rows, own.clone(), omega, out)
}

/// A row kernel: [`kernel::sweep_row`] or [`kernel::sweep_row_cached`].
type RowKernel = fn(Isa, &Rows<'_>, Range<usize>, f32, &mut [f32]) -> f64;
