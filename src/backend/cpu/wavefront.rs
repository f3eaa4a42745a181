//! Temporal blocking on the CPU: `L` successive sweeps of a block between
//! two halo exchanges, as a cache-blocked wavefront, so that the
//! coefficients and `p` come from memory once per `L` iterations instead of
//! once per iteration.
//!
//! The block's owned rows are split along j into one band per thread and
//! each band into tiles of a few rows. A tile walks the whole i extent of
//! the block plane by plane; at each step level 1 updates plane `w` from the
//! field in memory, level 2 plane `w-1` from level 1's planes, and so on, so
//! the planes each level needs were made one, two and three steps before
//! and are still in the cache, and the coefficients level 1 loads are read
//! again by the later levels while they are. Levels `1..L-1` live in three
//! small plane buffers each (a ring: a level's plane `q` goes to slot
//! `q % 3`), private to the thread; only level `L` writes the new field.
//!
//! Level `s` covers more than the owned points: the dependency cone of the
//! last level reaches `L-s` layers beyond, into the ghost layers received
//! from a neighbour (filled by the exchange, `depth >= L` deep) and, inside
//! the block, into the tile's neighbours in j. Those redundant updates
//! repeat arithmetic that another tile or rank also does, with the same
//! inputs and so the same bits; only the owned points of the tile's own
//! rows are stored or counted in gosa. At the grid's edge the cone stops at
//! the fixed boundary, whose values are read from `p` itself.
//!
//! Every level's gosa is kept per owned row, with the row kernel's lane
//! order over the owned k points, and summed in row order by the caller: the
//! classic sweep's sums, bit for bit.

use super::kernel::{self, Inputs, Rows};
use super::lines::LineWriter;
use crate::grid::decomp::Block;
use crate::machine::isa::Isa;
use ndarray::{ArrayViewMut2, ArrayViewMut3, s};
use std::ops::Range;

/// Ring slots per intermediate level: a level reads its predecessor's
/// planes `q-1`, `q` and `q+1`.
const SLOTS: usize = 3;
/// `f32` values per cache line.
const LINE_FLOATS: usize = 16;
/// Stagger between consecutive slots, in values (256 B), so that the rows a
/// level reads from three slots do not share L1 sets (see the fields'
/// stagger in the backend).
const SLOT_STAGGER: usize = 64;

/// The geometry of one block's wavefront with `levels` sweeps.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Local extents of the block's arrays.
    pub dims: [usize; 3],
    /// Owned local indices per dimension.
    pub owned: [Range<usize>; 3],
    /// Whether each side of each dimension has a neighbour (ghost layers
    /// that the redundant updates extend into).
    pub open: [[bool; 2]; 3],
    /// Sweeps per exchange in this call.
    pub levels: usize,
    /// Rows per tile (the last tiles of a band may be shorter).
    pub tile_rows: usize,
}

impl Plan {
    /// The plan for `levels` sweeps over `block`, tiles of `tile_rows`.
    pub fn new(block: &Block, levels: usize, tile_rows: usize) -> Plan {
        Plan {
            dims: block.local_dims(),
            owned: std::array::from_fn(|d| block.owned(d)),
            open: std::array::from_fn(|d| {
                std::array::from_fn(|side| block.neighbours[d][side].is_some())
            }),
            levels,
            tile_rows: tile_rows.max(1),
        }
    }

    /// Local indices level `s` (1-based) updates along dimension `d`: the
    /// owned ones and `levels - s` more into each side with a neighbour.
    fn range(&self, d: usize, s: usize) -> Range<usize> {
        let e = self.levels - s;
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

    /// Rows level `s` updates for the tile of owned rows `tile`: the
    /// tile's own, `levels - s` more on each side, within the level's
    /// range of the block.
    fn tile_range(&self, tile: &Range<usize>, s: usize) -> Range<usize> {
        let e = self.levels - s;
        let block = self.range(1, s);
        tile.start.saturating_sub(e).max(block.start)..(tile.end + e).min(block.end)
    }

    /// Most rows any level of a tile spans.
    fn max_rows(&self) -> usize {
        self.tile_rows + 2 * (self.levels - 1)
    }

    /// Values of the scratch space one thread needs for this plan.
    pub fn scratch_len(&self) -> usize {
        (self.levels - 1) * SLOTS * self.slot_stride() + LINE_FLOATS
    }

    /// Distance between slots in the scratch space (rows on whole lines).
    fn slot_stride(&self) -> usize {
        self.max_rows() * self.pitch() + SLOT_STAGGER
    }

    /// Distance between rows in the scratch space: whole cache lines.
    fn pitch(&self) -> usize {
        self.dims[2].next_multiple_of(LINE_FLOATS)
    }
}

/// Chooses the rows per tile for `levels` sweeps of rows `nk` values long,
/// so that what a tile keeps in use fits in `budget` bytes: per row of the
/// tile, the twelve coefficients of the `levels` planes in flight, three
/// planes of `p`, three of every intermediate level and the output.
pub fn tile_rows(nk: usize, levels: usize, budget: usize) -> usize {
    let per_row = nk * 4 * (12 * levels + 3 + 3 * (levels - 1) + 1);
    // Below a few rows the redundant updates at the tile's edges (levels-1
    // rows on each side) would outweigh the tile itself.
    (budget / per_row.max(1)).max(levels.max(4))
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
/// `plan.scratch_len()` values; `streaming` writes `next` with streaming
/// stores.
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
    let tiles = rows.len().div_ceil(plan.tile_rows);
    for t in 0..tiles {
        let (start, len) = crate::grid::decomp::split(rows.len(), tiles, t);
        let tile = rows.start + start..rows.start + start + len;
        sweep_tile(isa, plan, inp, band, &tile, scratch, streaming);
    }
}

/// The wavefront of one tile of owned rows.
fn sweep_tile(
    isa: Isa,
    plan: &Plan,
    inp: &Inputs<'_>,
    band: &mut Band<'_>,
    tile: &Range<usize>,
    scratch: &mut [f32],
    streaming: bool,
) {
    let levels = plan.levels;
    let nk = plan.dims[2];
    let pitch = plan.pitch();
    // Each slot's first owned k on a cache line, as in the fields.
    let skew = (scratch[plan.owned[2].start..].as_ptr() as usize % 64) / 4;
    let scratch = &mut scratch[(LINE_FLOATS - skew) % LINE_FLOATS..];
    let stride = plan.slot_stride();
    let slot_at = |s: usize, q: usize| ((s - 1) * SLOTS + q % SLOTS) * stride;
    let i_range: Vec<Range<usize>> = (0..=levels).map(|s| plan.range(0, s.max(1))).collect();
    let j_range: Vec<Range<usize>> = (0..=levels)
        .map(|s| plan.tile_range(tile, s.max(1)))
        .collect();
    let k_own = plan.owned[2].clone();
    let mut buf = vec![0.0f32; nk + LINE_FLOATS];
    // The row buffer's owned points start on a cache line, as the field's do.
    let bskew = (buf[k_own.start..].as_ptr() as usize % 64) / 4;
    let row_buf = &mut buf[(LINE_FLOATS - bskew) % LINE_FLOATS..][..nk];
    let i_own = plan.owned[0].clone();

    let first = i_range[1].start;
    let last = i_range[1].end + levels - 1;
    for w in first..last {
        for s in 1..=levels {
            let Some(q) = (w + 1).checked_sub(s) else {
                continue;
            };
            if !i_range[s].contains(&q) {
                continue;
            }
            let k = plan.range(2, s);
            // Where level s-1's row (q', j') is: its ring slot when that
            // level computed it, otherwise `p` itself (level 0, or the
            // grid's fixed boundary).
            let prev = s - 1;
            let (scr, out_slots) = scratch.split_at_mut(if s < levels {
                slot_at(s, 0).min(scratch.len())
            } else {
                scratch.len()
            });
            let scr: &[f32] = scr;
            let src = |qq: usize, jj: usize| -> &[f32] {
                if prev > 0 && i_range[prev].contains(&qq) && j_range[prev].contains(&jj) {
                    let at = slot_at(prev, qq) + (jj - j_range[prev].start) * pitch;
                    &scr[at..at + nk]
                } else {
                    &inp.p[inp.lay.row(qq, jj)..][..nk]
                }
            };
            let owned_plane = i_own.contains(&q);
            if s < levels {
                let base = slot_at(s, q) - slot_at(s, 0);
                let j0 = j_range[s].start;
                for j in j_range[s].clone() {
                    let rows = neighbourhood(inp, &src, q, j);
                    let at = base + (j - j0) * pitch;
                    let out = &mut out_slots[at..at + nk];
                    // The fixed boundary values just outside the level's k
                    // range, which the next level reads (`p`'s own).
                    let p_row = &inp.p[inp.lay.row(q, j)..][..nk];
                    out[k.start - 1] = p_row[k.start - 1];
                    out[k.end] = p_row[k.end];
                    let g = sweep_pieces(isa, &rows, &k, &k_own, inp.omega, out);
                    if owned_plane && tile.contains(&j) {
                        band.gosa[[s - 1, q - i_own.start, j - band.rows.start]] = g;
                    }
                }
            } else {
                // The last level: the tile's owned rows of this plane, into
                // the new field.
                let mut plane: ArrayViewMut2<f32> = band.next.slice_mut(s![
                    q,
                    tile.start - band.offset..tile.end - band.offset,
                    ..
                ]);
                let dst = plane
                    .as_slice_mut()
                    .expect("rows of a plane are contiguous");
                let gosa = &mut band.gosa;
                let row_gosa = |j: usize| [s - 1, q - i_own.start, j - band.rows.start];
                if streaming {
                    let mut writer = LineWriter::new(dst);
                    for j in tile.clone() {
                        let rows = neighbourhood(inp, &src, q, j);
                        // Whole rows, their ends from `p` (ghosts the
                        // exchange replaces, or the shared boundary), so
                        // that the tile's rows form one run of lines.
                        let p_row = &inp.p[inp.lay.row(q, j)..][..nk];
                        row_buf[..k_own.start].copy_from_slice(&p_row[..k_own.start]);
                        row_buf[k_own.end..].copy_from_slice(&p_row[k_own.end..]);
                        gosa[row_gosa(j)] =
                            kernel::sweep_row(isa, &rows, k_own.clone(), inp.omega, row_buf);
                        writer.write((j - tile.start) * nk, row_buf);
                    }
                } else {
                    for j in tile.clone() {
                        let rows = neighbourhood(inp, &src, q, j);
                        let at = (j - tile.start) * nk;
                        let out = &mut dst[at..at + nk];
                        gosa[row_gosa(j)] =
                            kernel::sweep_row(isa, &rows, k_own.clone(), inp.omega, out);
                    }
                }
            }
        }
    }
}

/// The rows the update of row `(q, j)` reads: level `s-1`'s `p` through
/// `src`, the coefficients from memory.
#[inline]
fn neighbourhood<'r>(
    inp: &Inputs<'r>,
    src: &impl Fn(usize, usize) -> &'r [f32],
    q: usize,
    j: usize,
) -> Rows<'r> {
    let nk = inp.lay.dims[2];
    let base = inp.lay.row(q, j);
    Rows {
        p: std::array::from_fn(|a| std::array::from_fn(|b| src(q + a - 1, j + b - 1))),
        coef: inp.coef.map(|c| &c[base..base + nk]),
    }
}

/// Updates points `k` of a row, the owned ones `own` with the row kernel's
/// gosa lanes (returned) and the redundant ones beyond them, into ghost
/// layers, without.
fn sweep_pieces(
    isa: Isa,
    rows: &Rows<'_>,
    k: &Range<usize>,
    own: &Range<usize>,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    if k.start < own.start {
        kernel::sweep_row(isa, rows, k.start..own.start, omega, out);
    }
    if own.end < k.end {
        kernel::sweep_row(isa, rows, own.end..k.end, omega, out);
    }
    kernel::sweep_row(isa, rows, own.clone(), omega, out)
}
