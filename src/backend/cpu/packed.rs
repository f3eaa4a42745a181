//! The CPU backend's coefficients, packed per row in blocks of [`BLOCK`]
//! points: block `b` of a row holds the twelve coefficients of its points
//! one field after the other (`[field][point]`, 768 bytes), so the row
//! kernel reads all twelve from one base register at constant
//! displacements, a single memory stream, instead of twelve.
//!
//! With twelve separate fields the kernel's hot loop kept 22 base pointers
//! (9 rows of `p`, 12 coefficients, `next`) for x86-64's 16 general
//! registers and reloaded spilled ones from the stack; packed, 11 live
//! bases and 3 memory streams (`p`, the blocks, `next`) remain. A
//! standalone kernel with this layout ran 1.3-1.5x faster on in-cache
//! grids (notes/cpu-perf.md, eleventh session).
//!
//! Blocks start at the row's first owned point, the first point the sweeps
//! update, so every vector step of an owned row lies inside one block. A
//! row whose owned length `m` is not a multiple of [`BLOCK`] ends with a
//! block that holds its last [`BLOCK`] points (overlapping the one before
//! it), so that the kernel's last partial step and its overlapping last
//! chunk also find their values in one block; a row shorter than a block
//! has one block, its lanes beyond `m` unused. The points outside the owned
//! range (ghost layers and the fixed boundary, which only the temporal
//! wavefront's redundant updates read, one point at a time) follow the
//! blocks, field by field.

use crate::grid::fields::COEFFICIENTS;
use std::ops::Range;

/// Points per block: one AVX-512 step, two 8-point steps.
pub const BLOCK: usize = 16;

/// Values in one block: every coefficient of [`BLOCK`] points.
pub const BLOCK_VALUES: usize = BLOCK * COEFFICIENTS;

/// Values per cache line: rows are padded to whole lines, so that with the
/// buffer line-aligned every block is.
const LINE_VALUES: usize = 16;

/// Where each coefficient of each point of a row sits in its packed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packing {
    /// Local k of the first owned point (block 0's first point).
    k0: usize,
    /// Owned points per row.
    m: usize,
    /// Local k extent.
    nk: usize,
    /// Blocks per row.
    blocks: usize,
    /// Values per packed row.
    row_len: usize,
}

impl Packing {
    /// The packing of rows of `nk` local points whose owned points are
    /// `owned`.
    pub fn new(nk: usize, owned: Range<usize>) -> Packing {
        assert!(owned.end <= nk, "owned {owned:?} beyond {nk} points");
        let m = owned.len();
        let blocks = m.div_ceil(BLOCK).max(1);
        let row_len =
            (blocks * BLOCK_VALUES + (nk - m) * COEFFICIENTS).next_multiple_of(LINE_VALUES);
        Packing {
            k0: owned.start,
            m,
            nk,
            blocks,
            row_len,
        }
    }

    /// Values per packed row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// The owned points of a row.
    pub fn owned(&self) -> Range<usize> {
        self.k0..self.k0 + self.m
    }

    /// Blocks that start at a multiple of [`BLOCK`] and lie wholly inside
    /// the owned points: the first `m / BLOCK`.
    pub fn regular_blocks(&self) -> usize {
        self.m / BLOCK
    }

    /// Owned point (counted from the first) where block `b` starts.
    fn block_start(&self, b: usize) -> usize {
        (b * BLOCK).min(self.m.saturating_sub(BLOCK))
    }

    /// Offset in a row of the `w` values of coefficient `f` at owned points
    /// `x..x + w` (counted from the first owned point), which lie in one
    /// block: the regular one when it holds them all, else the last (true
    /// of every step of `w` = 8 or 16 points at a multiple of `w`, and of
    /// the last `w` points).
    #[inline]
    pub fn step(&self, f: usize, x: usize, w: usize) -> usize {
        let b = x / BLOCK;
        let b = if b + 1 < self.blocks && x % BLOCK + w <= BLOCK {
            b
        } else {
            self.blocks - 1
        };
        let lane = x - self.block_start(b);
        debug_assert!(lane + w <= BLOCK, "points {x}+{w} straddle blocks");
        b * BLOCK_VALUES + f * BLOCK + lane
    }

    /// Offset in a row of coefficient `f` at local point `k` (any of the
    /// row's `nk`).
    #[inline]
    pub fn at(&self, f: usize, k: usize) -> usize {
        let ghosts = self.nk - self.m;
        let after = self.blocks * BLOCK_VALUES + f * ghosts;
        if k < self.k0 {
            after + k
        } else if k >= self.k0 + self.m {
            after + k - self.m
        } else {
            self.step(f, k - self.k0, 1)
        }
    }

    /// Local points per row.
    pub fn nk(&self) -> usize {
        self.nk
    }

    /// Offsets in a row of `w` values of each coefficient whose lane `l`
    /// holds point `c + l` for every point of `points` (inside `c..c +
    /// w`), which lie wholly in the ghost points on one side of the owned
    /// ones (a field's ghost points are stored one after the other, those
    /// before the owned ones, then those after); the other lanes hold other
    /// values of the row. `None` where the points are not all on one side,
    /// or the values would leave the row.
    pub fn ghost_steps(
        &self,
        c: usize,
        w: usize,
        points: Range<usize>,
    ) -> Option<[usize; COEFFICIENTS]> {
        debug_assert!(c <= points.start && points.end <= c + w && !points.is_empty());
        let ghosts = self.nk - self.m;
        let after = self.blocks * BLOCK_VALUES;
        let first = if points.end <= self.k0 {
            after + c
        } else if points.start >= self.k0 + self.m {
            (after + c).checked_sub(self.m)?
        } else {
            return None;
        };
        let last = first + (COEFFICIENTS - 1) * ghosts;
        (last + w <= self.row_len).then(|| std::array::from_fn(|f| first + f * ghosts))
    }

    /// Writes one packed row: `value(f, k)`, coefficient `f` at local
    /// point `k`, into every place that holds it; the unused lanes of a
    /// short row's block are zero.
    pub fn pack_row(&self, row: &mut [f32], value: impl Fn(usize, usize) -> f32) {
        let row = &mut row[..self.row_len];
        row.fill(0.0);
        for b in 0..self.blocks {
            let start = self.block_start(b);
            for f in 0..COEFFICIENTS {
                for lane in 0..BLOCK {
                    let x = start + lane;
                    if x < self.m {
                        row[b * BLOCK_VALUES + f * BLOCK + lane] = value(f, self.k0 + x);
                    }
                }
            }
        }
        for k in (0..self.k0).chain(self.k0 + self.m..self.nk) {
            for f in 0..COEFFICIENTS {
                row[self.at(f, k)] = value(f, k);
            }
        }
    }
}

/// A block's packed coefficients, read-only: `rows` packed rows, row `r`
/// the local row `r = i * nj + j`.
#[derive(Clone, Copy)]
pub struct Packed<'a> {
    /// The packed rows, one after the other.
    pub values: &'a [f32],
    /// Their packing.
    pub packing: Packing,
}

impl<'a> Packed<'a> {
    /// Packed row number `r` (`i * nj + j`).
    #[inline]
    pub fn row(&self, r: usize) -> CoefRow<'a> {
        let n = self.packing.row_len;
        CoefRow {
            values: &self.values[r * n..][..n],
            packing: self.packing,
        }
    }
}

/// The packed coefficients of one row.
#[derive(Clone, Copy)]
pub struct CoefRow<'a> {
    /// The row's values, [`Packing::row_len`] of them.
    pub values: &'a [f32],
    /// Their packing.
    pub packing: Packing,
}

impl CoefRow<'_> {
    /// Coefficient `f` at local point `k`.
    #[inline]
    pub fn at(&self, f: usize, k: usize) -> f32 {
        self.values[self.packing.at(f, k)]
    }
}

/// A packed copy of coefficient fields, for the kernel's tests, which hold
/// the fields as arrays: `fields[f]` holds coefficient `f` for every local
/// point, rows of `nk` values.
#[cfg(test)]
pub fn pack_fields(fields: [&[f32]; COEFFICIENTS], packing: Packing) -> Vec<f32> {
    let rows = fields[0].len() / packing.nk;
    let mut out = vec![0.0; rows * packing.row_len];
    for (r, row) in out.chunks_exact_mut(packing.row_len).enumerate() {
        packing.pack_row(row, |f, k| fields[f][r * packing.nk + k]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of every row length lands where `at` and `step` look
    /// for it, for owned ranges with and without ghost points around.
    #[test]
    fn every_value_is_found_where_it_was_packed() {
        for m in (1..=40).chain([255]) {
            for (lo, hi) in [(1, 1), (0, 0), (3, 2), (8, 8)] {
                let nk = lo + m + hi;
                let pk = Packing::new(nk, lo..lo + m);
                assert_eq!(pk.row_len() % LINE_VALUES, 0);
                let value = |f: usize, k: usize| (f * 1000 + k) as f32;
                let mut row = vec![f32::NAN; pk.row_len()];
                pk.pack_row(&mut row, value);
                for k in 0..nk {
                    for f in 0..COEFFICIENTS {
                        assert_eq!(row[pk.at(f, k)], value(f, k), "m {m} lo {lo} k {k} f {f}");
                    }
                }
                // The kernel's steps: 16 and 8 points at their multiples
                // while they fit, and the last 8 points.
                for w in [8, 16] {
                    let mut x = 0;
                    let mut starts = Vec::new();
                    while x + w <= m {
                        starts.push(x);
                        x += w;
                    }
                    if m >= w {
                        starts.push(m - w);
                    }
                    for x in starts {
                        for f in 0..COEFFICIENTS {
                            let o = pk.step(f, x, w);
                            for l in 0..w {
                                assert_eq!(row[o + l], value(f, lo + x + l), "m {m} x {x} w {w}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn packed_rows_take_about_what_the_fields_took() {
        // Size M's rows: 255 owned points and the two boundary points.
        let pk = Packing::new(257, 1..256);
        let fields = 12 * 257;
        assert!(pk.row_len() >= fields && pk.row_len() < fields + fields / 50);
    }
}
