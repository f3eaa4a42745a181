//! The fast CPU sweep of one k-row: the 19-point Jacobi update written over
//! fixed-size chunks of equal-length slices, so that bounds checks vanish and
//! the loop vectorises, compiled once per instruction set and chosen at run
//! time ([`Isa`], [`multiversion!`]) rather than with `-C target-cpu=native`
//! on every build.
//!
//! Arithmetic follows the specification exactly: every sum is evaluated left
//! to right, no fused multiply-add (Rust never contracts, whatever the target
//! features), so the new `p` is bitwise equal to the reference kernel's.
//! Squared residuals are summed in `f64` in [`LANES`] interleaved partial sums
//! (lane `l` takes the row's points `l, l+LANES, ...` in order) that are
//! combined in a fixed order, so a row's sum does not depend on how rows are
//! shared by threads nor on the instruction set.

use crate::grid::fields::COEFFICIENTS;
use crate::grid::fields::coef::{A0, A1, A2, A3, B0, B1, B2, BND, C0, C1, C2, WRK1};
#[cfg(doc)]
use crate::machine::isa::Isa;
use crate::machine::isa::multiversion;
use std::ops::Range;

/// Number of interleaved partial sums per row.
pub const LANES: usize = 8;

/// Geometry of a block's local arrays, all of extents `dims`, k fastest.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Local extents (owned points plus the halo layers on each side).
    pub dims: [usize; 3],
}

impl Layout {
    /// Offset of the first element of row `(i, j)`.
    #[inline]
    pub fn row(&self, i: usize, j: usize) -> usize {
        (i * self.dims[1] + j) * self.dims[2]
    }
}

/// Read-only inputs of a sweep: the old `p` and the coefficient fields,
/// whole arrays of the block's local extents.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// Local array geometry.
    pub lay: Layout,
    /// The old pressure field.
    pub p: &'a [f32],
    /// `a0..a3, b0..b2, c0..c2, bnd, wrk1`.
    pub coef: [&'a [f32]; COEFFICIENTS],
    /// Relaxation factor.
    pub omega: f32,
}

impl<'a> Inputs<'a> {
    /// The rows that the update of row `(i, j)` reads, all from these
    /// arrays.
    #[inline]
    pub fn rows(&'a self, i: usize, j: usize) -> Rows<'a> {
        let nk = self.lay.dims[2];
        let p = self.p;
        let at = |i: usize, j: usize| &p[self.lay.row(i, j)..][..nk];
        Rows {
            p: [
                [at(i - 1, j - 1), at(i - 1, j), at(i - 1, j + 1)],
                [at(i, j - 1), at(i, j), at(i, j + 1)],
                [at(i + 1, j - 1), at(i + 1, j), at(i + 1, j + 1)],
            ],
            coef: &self.coef,
            at: self.lay.row(i, j),
        }
    }
}

/// The rows one row update reads: `p` around the row, each a whole row of
/// the local k extent, which may come from different arrays (the temporal
/// sweep reads `p` from cache-resident copies of earlier levels), and the
/// coefficients of the row itself, from the fields.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// `p[a][b]` is the row of `p` at `(i + a - 1, j + b - 1)`.
    pub p: [[&'a [f32]; 3]; 3],
    /// The coefficient fields, `a0..a3, b0..b2, c0..c2, bnd, wrk1`.
    pub coef: &'a [&'a [f32]; COEFFICIENTS],
    /// Offset of row `(i, j)` in the fields.
    pub at: usize,
}

multiversion!(
    /// Updates points `k` (not the first or last of the row) of one row
    /// with the kernel compiled for `isa`: writes `out[k]` (`out` is the
    /// whole row of the new field) and returns the sum of their squared
    /// residuals, point `k.start + x` in lane `x % LANES`. For rows that
    /// stream from memory: every input is prefetched ahead.
    pub fn sweep_row(rows: &Rows<'_>, k: Range<usize>, omega: f32, out: &mut [f32]) -> f64 => row_streamed
);

multiversion!(
    /// As [`sweep_row`], without software prefetch, for rows already in
    /// the cache (the temporal wavefront's later levels), where the
    /// prefetch instructions only compete with the loads: an L2-resident
    /// row measured about 25% faster without them, a row from memory
    /// 30-50% slower (notes/cpu-perf.md).
    pub fn sweep_row_cached(rows: &Rows<'_>, k: Range<usize>, omega: f32, out: &mut [f32]) -> f64 => row_cached
);

multiversion!(
    /// As [`sweep_row`] for row `(i, j)` of the fields in `inp` (the
    /// classic sweep): the same kernel, with every row found at its offset
    /// from the one field, which the compiler turns into fewer live
    /// pointers than nine separate rows (measured 7% faster at size M).
    pub fn sweep_row_at(inp: &Inputs<'_>, i: usize, j: usize, k: Range<usize>, out: &mut [f32]) -> f64 => row_at
);

/// Where a row update finds the rows it reads, as slices of the `m`
/// values it updates from `k0`.
trait Source<'a> {
    /// The row of `p` at `(i + a - 1, j + b - 1)`, shifted by `dk - 1` in
    /// k.
    fn p(&self, a: usize, b: usize, dk: usize, k0: usize, m: usize) -> &'a [f32];
    /// Coefficient `f`'s row at `(i, j)`.
    fn coef(&self, f: usize, k0: usize, m: usize) -> &'a [f32];
}

impl<'a> Source<'a> for Rows<'a> {
    #[inline(always)]
    fn p(&self, a: usize, b: usize, dk: usize, k0: usize, m: usize) -> &'a [f32] {
        &self.p[a][b][k0 + dk - 1..k0 + dk - 1 + m]
    }
    // The coefficients from one offset into their fields: the compiler
    // then addresses all twelve from one index.
    #[inline(always)]
    fn coef(&self, f: usize, k0: usize, m: usize) -> &'a [f32] {
        &self.coef[f][self.at + k0..self.at + k0 + m]
    }
}

/// The fields' rows around row `(i, j)`, at `at`, its offset.
struct Around<'a, 'b> {
    inp: &'b Inputs<'a>,
    at: usize,
}

impl<'a> Source<'a> for Around<'a, '_> {
    // Every slice is one offset from the start of its field, as the
    // original kernel wrote them: the compiler then addresses all of them
    // from one index (an earlier form, whole rows sliced again, made it
    // step 25 pointers and spill them, 7-15% slower at size M).
    #[inline(always)]
    fn p(&self, a: usize, b: usize, dk: usize, k0: usize, m: usize) -> &'a [f32] {
        let [_, nj, nk] = self.inp.lay.dims;
        let off = self.at + k0 + a * nj * nk + b * nk + dk - nj * nk - nk - 1;
        &self.inp.p[off..off + m]
    }
    #[inline(always)]
    fn coef(&self, f: usize, k0: usize, m: usize) -> &'a [f32] {
        &self.inp.coef[f][self.at + k0..self.at + k0 + m]
    }
}

/// [`row_body`] over the fields, with prefetch.
#[inline(always)]
fn row_at(inp: &Inputs<'_>, i: usize, j: usize, k: Range<usize>, out: &mut [f32]) -> f64 {
    let src = Around {
        inp,
        at: inp.lay.row(i, j),
    };
    row_body::<_, true>(&src, k, inp.omega, out)
}

/// One chunk of [`LANES`] points of every input row.
type Chunk = [f32; LANES];

/// A row's partial sums of squared residuals, one per lane, aligned to a
/// cache line.
#[repr(C, align(64))]
struct Lanes([f64; LANES]);

/// [`row_body`] with prefetch.
#[inline(always)]
fn row_streamed(rows: &Rows<'_>, k: Range<usize>, omega: f32, out: &mut [f32]) -> f64 {
    row_body::<_, true>(rows, k, omega, out)
}

/// [`row_body`] without prefetch.
#[inline(always)]
fn row_cached(rows: &Rows<'_>, k: Range<usize>, omega: f32, out: &mut [f32]) -> f64 {
    row_body::<_, false>(rows, k, omega, out)
}

/// The row kernel, inlined into each instruction-set wrapper so that each
/// copy is vectorised for its own target features; `PREFETCH` asks for the
/// inputs ahead of use.
#[inline(always)]
fn row_body<'a, S: Source<'a>, const PREFETCH: bool>(
    rows: &S,
    k: Range<usize>,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    let (k0, m) = (k.start, k.len());
    // Slices of exactly `m` values: the row of p at (i+a-1, j+b-1) shifted
    // by dk-1 in k, and the coefficients.
    let r = |a: usize, b: usize, dk: usize| rows.p(a, b, dk, k0, m);
    let (ip, jp, kp) = (r(2, 1, 1), r(1, 2, 1), r(1, 1, 2));
    let (ipjp, ipjm) = (r(2, 2, 1), r(2, 0, 1));
    let (imjp, imjm) = (r(0, 2, 1), r(0, 0, 1));
    let (jpkp, jmkp) = (r(1, 2, 2), r(1, 0, 2));
    let (jpkm, jmkm) = (r(1, 2, 0), r(1, 0, 0));
    let (ipkp, imkp) = (r(2, 1, 2), r(0, 1, 2));
    let (ipkm, imkm) = (r(2, 1, 0), r(0, 1, 0));
    let (im, jm, km, c) = (r(0, 1, 1), r(1, 0, 1), r(1, 1, 0), r(1, 1, 1));
    let coef = |f: usize| rows.coef(f, k0, m);
    let (a0, a1, a2, a3) = (coef(A0), coef(A1), coef(A2), coef(A3));
    let (b0, b1, b2) = (coef(B0), coef(B1), coef(B2));
    let (c0, c1, c2) = (coef(C0), coef(C1), coef(C2));
    let (bnd, wrk1) = (coef(BND), coef(WRK1));
    let out = &mut out[k0..k0 + m];

    // The values of point `x` of every row, in `point`'s order.
    // (The list is repeated at each use: macro hygiene binds the names
    // where they are written, and the chunked views shadow the rows.)
    macro_rules! gather {
        ($x:expr; $($row:ident)*) => {
            [$(&$row[$x]),*]
        };
    }

    // On a cache line of its own: the compiler keeps the partial sums on
    // the stack and zeroes them with one 64-byte store per row, which a
    // frame that happened to put them across a page boundary made cost
    // 15% of the sweep (perf put 17% of the kernel's samples on it).
    let mut acc = Lanes([0.0f64; LANES]);
    let acc = &mut acc.0;
    let n = m / LANES;
    // Whole chunks of LANES points: each input row viewed as `[Chunk]`, all
    // of length `n`, so that indexing by `ch < n` needs no bounds checks.
    macro_rules! chunked {
        ($($row:ident)*) => {
            $(let $row: &[Chunk] = $row.as_chunks::<LANES>().0;
              assert_eq!($row.len(), n);)*
        };
    }
    {
        chunked!(ip jp kp ipjp ipjm imjp imjm jpkp jmkp jpkm jmkm ipkp imkp ipkm imkm
                 im jm km c a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1);
        let out = out.as_chunks_mut::<LANES>().0;
        assert_eq!(out.len(), n);
        for ch in 0..n {
            if PREFETCH && ch % 2 == 0 {
                // Two distances: far into L2 so the line is on its way from
                // memory, near into L1 so the loads find it there.
                for row in [ipjp, a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1] {
                    prefetch::<L1>(row, ch + PREFETCH_CHUNKS);
                    prefetch::<L2>(row, ch + PREFETCH_L2_CHUNKS);
                }
                prefetch::<L1>(out, ch + PREFETCH_CHUNKS);
                prefetch::<L2>(out, ch + PREFETCH_L2_CHUNKS);
            }
            let chunk: [&Chunk; 31] = gather!(ch; ip jp kp ipjp ipjm imjp imjm jpkp jmkp jpkm
                jmkm ipkp imkp ipkm imkm im jm km c a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1);
            let o = &mut out[ch];
            for l in 0..LANES {
                let v: [f32; 31] = std::array::from_fn(|f| chunk[f][l]);
                let ss = point(&v);
                acc[l] += f64::from(ss * ss);
                o[l] = v[18] + omega * ss;
            }
        }
    }
    // The last `m % LANES` points. When the row has a whole chunk, they are
    // computed as the row's last LANES points (overlapping the previous
    // chunk: same operations per point, so the same values), and only the
    // new ones are stored and summed; point x always goes to lane x % LANES.
    let full = n * LANES;
    if full < m && n > 0 {
        let start = m - LANES;
        macro_rules! last_chunk {
            ($($row:ident)*) => {
                [$($row.last_chunk::<LANES>().expect("m >= LANES")),*]
            };
        }
        let w: [&Chunk; 31] = last_chunk!(ip jp kp ipjp ipjm imjp imjm jpkp jmkp jpkm jmkm
            ipkp imkp ipkm imkm im jm km c a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1);
        let mut ss = [0.0f32; LANES];
        let mut res = [0.0f32; LANES];
        for l in 0..LANES {
            let v: [f32; 31] = std::array::from_fn(|f| w[f][l]);
            ss[l] = point(&v);
            res[l] = v[18] + omega * ss[l];
        }
        for x in full..m {
            let l = x - start;
            acc[x % LANES] += f64::from(ss[l] * ss[l]);
            out[x] = res[l];
        }
    } else {
        for x in full..m {
            let v: [f32; 31] = gather!(x; ip jp kp ipjp ipjm imjp imjm jpkp jmkp jpkm jmkm
                ipkp imkp ipkm imkm im jm km c a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1)
            .map(|v| *v);
            let ss = point(&v);
            acc[x % LANES] += f64::from(ss * ss);
            out[x] = v[18] + omega * ss;
        }
    }
    // Lanes combined left to right: a fixed order.
    acc.iter().sum()
}

/// How far ahead, in chunks, the streams are prefetched into L1 (256 B).
const PREFETCH_CHUNKS: usize = 8;
/// How far ahead, in chunks, they are prefetched into L2 (1 KiB): far
/// enough to cover a memory latency, so that the L1 prefetch, which holds a
/// miss buffer until its line arrives, finds the line in L2. Measured
/// against one distance alone (notes/cpu-perf.md): 5-15% faster per thread
/// at M and L; 512 B and 2 KiB were slower.
const PREFETCH_L2_CHUNKS: usize = 32;

/// The `_mm_prefetch` hints used: into every cache level, or into L2 and
/// below (`T1`; Zen 4 and recent Intel cores keep it out of L1).
#[cfg(target_arch = "x86_64")]
const L1: i32 = std::arch::x86_64::_MM_HINT_T0;
#[cfg(target_arch = "x86_64")]
const L2: i32 = std::arch::x86_64::_MM_HINT_T1;
#[cfg(not(target_arch = "x86_64"))]
const L1: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const L2: i32 = 0;

/// Asks for the line holding chunk `ch` of `row` (which may lie beyond the
/// row: a prefetch never faults, and the next row usually follows) with
/// hint `HINT`.
#[inline(always)]
fn prefetch<const HINT: i32>(row: &[Chunk], ch: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_prefetch;
        let at = row.as_ptr().wrapping_add(ch).cast::<i8>();
        // SAFETY: a prefetch is a hint; it reads nothing architecturally.
        unsafe { _mm_prefetch::<HINT>(at) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, ch);
}

/// The residual `ss` of one point from its 19 `p` values and 12
/// coefficients, in the order of [`row_body`]'s `gather!`: `p` at `i+1, j+1,
/// k+1, (i+1,j+1), (i+1,j-1), (i-1,j+1), (i-1,j-1), (j+1,k+1), (j-1,k+1),
/// (j+1,k-1), (j-1,k-1), (i+1,k+1), (i-1,k+1), (i+1,k-1), (i-1,k-1), i-1,
/// j-1, k-1`, the centre, then `a0 a1 a2 a3 b0 b1 b2 c0 c1 c2 bnd wrk1`.
/// Evaluated left to right exactly as specified.
#[inline(always)]
fn point(v: &[f32; 31]) -> f32 {
    let s0 = v[19] * v[0]
        + v[20] * v[1]
        + v[21] * v[2]
        + v[23] * (v[3] - v[4] - v[5] + v[6])
        + v[24] * (v[7] - v[8] - v[9] + v[10])
        + v[25] * (v[11] - v[12] - v[13] + v[14])
        + v[26] * v[15]
        + v[27] * v[16]
        + v[28] * v[17]
        + v[30];
    (s0 * v[22] - v[18]) * v[29]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;
    use crate::grid::decomp::{Block, ProcGrid};
    use crate::grid::fields::{Fields, OMEGA};
    use crate::machine::isa::Isa;
    use crate::verify::reference_sweep;

    /// Every instruction-set variant, on rows whose length is and is not a
    /// multiple of the lane count, gives bitwise the reference's field and
    /// gosa within rounding of the summation order.
    #[test]
    fn every_isa_matches_the_reference() {
        for dims in [[5, 6, 21], [4, 5, 10], [6, 4, 3], [5, 5, 37]] {
            let grid = Grid::new(dims).unwrap();
            let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
            let mut reference = Fields::initial(&grid, &block).unwrap();
            // Perturb p so that every neighbour's coefficient matters.
            for (n, v) in reference.p.iter_mut().enumerate() {
                *v += (n % 7) as f32 * 0.01;
            }
            reference.next.assign(&reference.p);
            let start = reference.clone();
            let ref_gosa = reference_sweep(&mut reference);
            for isa in Isa::all_supported() {
                let mut f = start.clone();
                let lay = Layout { dims };
                let p = f.p.as_slice().unwrap();
                let inp = Inputs {
                    lay,
                    p,
                    coef: std::array::from_fn(|c| f.coef[c].as_slice().unwrap()),
                    omega: OMEGA,
                };
                let mut pieces = f.next.clone();
                let out = f.next.as_slice_mut().unwrap();
                let mut gosa = 0.0;
                let pieces_out = pieces.as_slice_mut().unwrap();
                let nk = dims[2];
                for i in 1..dims[0] - 1 {
                    for j in 1..dims[1] - 1 {
                        let at = lay.row(i, j);
                        let row = &mut out[at..at + nk];
                        gosa += sweep_row(isa, &inp.rows(i, j), 1..nk - 1, OMEGA, row);
                        let mut cached = vec![0.0; nk];
                        let g =
                            sweep_row_cached(isa, &inp.rows(i, j), 1..nk - 1, OMEGA, &mut cached);
                        assert_eq!(&cached[1..nk - 1], &row[1..nk - 1]);
                        assert_eq!(
                            g.to_bits(),
                            sweep_row(isa, &inp.rows(i, j), 1..nk - 1, OMEGA, &mut cached)
                                .to_bits()
                        );
                        // The same row in up to three pieces (as the temporal
                        // sweep splits its rows): the same values.
                        let row = &mut pieces_out[at..at + nk];
                        let cuts = [1, (nk / 3).max(1), (2 * nk / 3).max(1), nk - 1];
                        for w in cuts.windows(2).filter(|w| w[0] < w[1]) {
                            sweep_row(isa, &inp.rows(i, j), w[0]..w[1], OMEGA, row);
                        }
                    }
                }
                assert_eq!(f.next, reference.p, "{dims:?} {}", isa.name());
                assert_eq!(pieces, reference.p, "{dims:?} {} in pieces", isa.name());
                assert!(
                    crate::verify::gosa_agrees(gosa, ref_gosa),
                    "{dims:?} {}: {gosa} vs {ref_gosa}",
                    isa.name()
                );
            }
        }
    }
}
