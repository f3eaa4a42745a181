//! The fast CPU sweep of one k-row: the 19-point Jacobi update written over
//! equal-length slices so that bounds checks vanish and the loop vectorises.
//!
//! Arithmetic follows the specification exactly: every sum is evaluated left
//! to right, no fused multiply-add (Rust never contracts), so the new `p` is
//! bitwise equal to the reference kernel's. Squared residuals are summed in
//! `f64` in [`LANES`] interleaved partial sums that are combined in a fixed
//! order, so a row's sum does not depend on how rows are shared by threads.

/// Number of interleaved partial sums per row.
pub const LANES: usize = 8;

/// Index of the 12 coefficient fields in `a0..a3, b0..b2, c0..c2, bnd, wrk1`.
const A0: usize = 0;
const A1: usize = 1;
const A2: usize = 2;
const A3: usize = 3;
const B0: usize = 4;
const B1: usize = 5;
const B2: usize = 6;
const C0: usize = 7;
const C1: usize = 8;
const C2: usize = 9;
const BND: usize = 10;
const WRK1: usize = 11;

/// Geometry of a block's local arrays, all of extents `dims`, k fastest.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Local extents (owned points plus one layer per side).
    pub dims: [usize; 3],
}

impl Layout {
    /// Offset of the first element of row `(i, j)`.
    #[inline]
    pub fn row(&self, i: usize, j: usize) -> usize {
        (i * self.dims[1] + j) * self.dims[2]
    }
}

/// Updates the owned points of row `(i, j)`: reads `p` and the coefficient
/// fields (whole arrays), writes `out` (the row of `next`, full local k
/// extent) and returns the row's sum of squared residuals.
#[inline]
pub fn sweep_row(
    lay: Layout,
    i: usize,
    j: usize,
    p: &[f32],
    coef: &[&[f32]; 12],
    omega: f32,
    out: &mut [f32],
) -> f64 {
    let nk = lay.dims[2];
    let m = nk - 2;
    let base = lay.row(i, j) + 1;
    let di = lay.dims[1] * nk;
    let dj = nk;
    // Row slices of exactly `m` values each, starting at the first owned k.
    let r = |off: usize| &p[off..off + m];
    let (c, kp, km) = (r(base), r(base + 1), r(base - 1));
    let (ip, im) = (r(base + di), r(base - di));
    let (jp, jm) = (r(base + dj), r(base - dj));
    let (ipjp, ipjm) = (r(base + di + dj), r(base + di - dj));
    let (imjp, imjm) = (r(base - di + dj), r(base - di - dj));
    let (jpkp, jmkp) = (r(base + dj + 1), r(base - dj + 1));
    let (jpkm, jmkm) = (r(base + dj - 1), r(base - dj - 1));
    let (ipkp, imkp) = (r(base + di + 1), r(base - di + 1));
    let (ipkm, imkm) = (r(base + di - 1), r(base - di - 1));
    let k = |f: usize| &coef[f][base..base + m];
    let (a0, a1, a2, a3) = (k(A0), k(A1), k(A2), k(A3));
    let (b0, b1, b2) = (k(B0), k(B1), k(B2));
    let (c0, c1, c2) = (k(C0), k(C1), k(C2));
    let (bnd, wrk1) = (k(BND), k(WRK1));
    let out = &mut out[1..1 + m];

    let point = |x: usize| -> f32 {
        let s0 = a0[x] * ip[x]
            + a1[x] * jp[x]
            + a2[x] * kp[x]
            + b0[x] * (ipjp[x] - ipjm[x] - imjp[x] + imjm[x])
            + b1[x] * (jpkp[x] - jmkp[x] - jpkm[x] + jmkm[x])
            + b2[x] * (ipkp[x] - imkp[x] - ipkm[x] + imkm[x])
            + c0[x] * im[x]
            + c1[x] * jm[x]
            + c2[x] * km[x]
            + wrk1[x];
        (s0 * a3[x] - c[x]) * bnd[x]
    };

    let mut acc = [0.0f64; LANES];
    let full = m / LANES * LANES;
    let mut x0 = 0;
    while x0 < full {
        for (l, a) in acc.iter_mut().enumerate() {
            let x = x0 + l;
            let ss = point(x);
            *a += f64::from(ss * ss);
            out[x] = c[x] + omega * ss;
        }
        x0 += LANES;
    }
    for (x, a) in (full..m).zip(acc.iter_mut()) {
        let ss = point(x);
        *a += f64::from(ss * ss);
        out[x] = c[x] + omega * ss;
    }
    acc.iter().sum()
}
