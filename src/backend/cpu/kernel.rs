//! The fast CPU sweep of one k-row: the 19-point Jacobi update written over
//! fixed-size chunks of equal-length slices, so that bounds checks vanish and
//! the loop vectorises, compiled once per instruction set and chosen at run
//! time ([`Isa`], [`multiversion!`]) rather than with `-C target-cpu=native`
//! on every build. The coefficients come packed in blocks of 16 points
//! ([`super::packed`]): a block's twelve are one base register plus
//! constants, so the hot loop keeps its pointers in registers.
//!
//! Arithmetic follows the specification exactly: every sum is evaluated left
//! to right, no fused multiply-add (Rust never contracts, whatever the target
//! features), so the new `p` is bitwise equal to the reference kernel's.
//! Squared residuals are summed in `f64` in [`LANES`] interleaved partial sums
//! (lane `l` takes the row's points `l, l+LANES, ...` in order) that are
//! combined in a fixed order, so a row's sum does not depend on how rows are
//! shared by threads nor on the instruction set.

use super::packed::{BLOCK, BLOCK_VALUES, CoefRow, Packed, Packing};
use crate::grid::fields::COEFFICIENTS;
use crate::grid::fields::coef::{A0, A1, A2, A3, B0, B1, B2, BND, C0, C1, C2, WRK1};
#[cfg(doc)]
use crate::machine::isa::multiversion;
use crate::machine::isa::{Isa, Set};
use std::ops::{Add, Mul, Range, Sub};

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

/// Read-only inputs of a sweep: the old `p`, whole array of the block's
/// local extents, and the block's packed coefficients.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// Local array geometry.
    pub lay: Layout,
    /// The old pressure field.
    pub p: &'a [f32],
    /// `a0..a3, b0..b2, c0..c2, bnd, wrk1`, packed per row.
    pub coef: Packed<'a>,
    /// Relaxation factor.
    pub omega: f32,
}

impl<'a> Inputs<'a> {
    /// The packed coefficients of row `(i, j)`.
    #[inline]
    pub fn coef_row(&self, i: usize, j: usize) -> CoefRow<'a> {
        self.coef.row(i * self.lay.dims[1] + j)
    }
}

/// A run of consecutive rows of one plane as a wavefront level after the
/// first updates them ([`sweep_planes`]): from three planes of its
/// predecessor, each a run of rows `nk` values apart, wherever they are
/// (the thread's buffers, or `p` itself at the grid's fixed boundary).
#[derive(Clone, Copy)]
pub struct Planes<'a> {
    /// The planes `i - 1`, `i` and `i + 1` of `p`, each from the row
    /// before the run's first on, `nk` values per row.
    pub p: [&'a [f32]; 3],
    /// Values per row.
    pub nk: usize,
    /// The block's packed coefficients.
    pub coef: Packed<'a>,
    /// The packed row of the run's first row (the others follow it).
    pub coef_row: usize,
    /// Relaxation factor.
    pub omega: f32,
}

impl<'a> Planes<'a> {
    /// The run from its row `n` on.
    pub fn from_row(&self, n: usize) -> Planes<'a> {
        Planes {
            p: self.p.map(|plane| &plane[n * self.nk..]),
            coef_row: self.coef_row + n,
            ..*self
        }
    }
}

/// Points per vector step of the AVX-512 copy: one zmm register. The
/// baseline and AVX2 copies step [`LANES`] points (one ymm register).
const WIDE: usize = 16;

/// Defines `$name(isa, args..)`, the row kernel `$body` compiled once per
/// instruction set as [`multiversion!`] does, each copy with its own step
/// width: [`WIDE`] points where the registers hold them (AVX-512), else
/// [`LANES`]. `prefetch` is the body's `PREFETCH` parameter: [`NONE`], or
/// the streams it names ([`STREAMS`], [`COEFS`] or both, [`ALL`]).
macro_rules! per_isa {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $body:ident, prefetch = $pf:ident) => {
        $(#[$meta])*
        #[inline]
        $vis fn $name(isa: Isa, $($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) -> $ret {
                $body::<ymm::Ymm, ymm::Ymm, LANES, { $pf }>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,avx512f,avx512vl")]
            fn avx512($($arg: $ty),*) -> $ret {
                $body::<zmm::Zmm, ymm::Ymm, WIDE, { $pf }>($($arg),*)
            }
            match isa.set() {
                Set::Baseline => $body::<Vector<LANES>, Vector<LANES>, LANES, { $pf }>($($arg),*),
                // SAFETY: an `Isa` naming AVX2 or AVX-512 is only made after
                // run-time detection found those features on this CPU.
                #[cfg(target_arch = "x86_64")]
                Set::Avx2 => unsafe { avx2($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                Set::Avx512 => unsafe { avx512($($arg),*) },
            }
        }
    };
}

per_isa!(
    /// Updates points `k` (not the first or last of a row) of the run of
    /// rows `(i, j)`, `j` in `js`, of the fields in `inp` (the classic
    /// sweep, the wavefront's first level) with the kernel compiled for
    /// `isa`: `out` holds the rows' new values from row `(i, js.start)`
    /// on, a whole row of the local k extent each, and `gosa[n]` gets row
    /// `js.start + n`'s sum of squared residuals, point `k.start + x` in
    /// lane `x % LANES`. For rows that stream from memory: the leading row
    /// of `p` and `out` are prefetched ahead (the packed coefficients are
    /// one sequential stream, left to the hardware). One call
    /// per run rather than per row: the call, the dispatch and the checks
    /// that hold for every row of the run were 325 of the 895
    /// instructions that a row of 96 points took (notes/cpu-perf.md).
    /// Every row is found at its offset from the one field, which the
    /// compiler turns into fewer live pointers than nine separate rows
    /// (measured 7% faster at size M).
    pub fn sweep_rows_at(inp: &Inputs<'_>, i: usize, js: Range<usize>, k: Range<usize>, out: &mut [f32], gosa: &mut [f64]) -> () => rows_at, prefetch = STREAMS
);

per_isa!(
    /// As [`sweep_rows_at`], prefetching the packed coefficients as well:
    /// the wavefront's first level, which reads each tile's rows of a
    /// plane from memory in a burst between the cached levels.
    pub fn sweep_rows_ahead(inp: &Inputs<'_>, i: usize, js: Range<usize>, k: Range<usize>, out: &mut [f32], gosa: &mut [f64]) -> () => rows_at, prefetch = ALL
);

per_isa!(
    /// As [`sweep_rows_at`], without software prefetch and with the wide
    /// steps of the AVX-512 copy: the classic sweep of fields that take at
    /// most half the last-level cache, where it measured 1.08-1.4x faster
    /// than with prefetch (notes/cpu-perf.md), as a row already in the L2
    /// did (about 25%; a row from memory was 30-50% slower without).
    pub fn sweep_rows_at_cached(inp: &Inputs<'_>, i: usize, js: Range<usize>, k: Range<usize>, out: &mut [f32], gosa: &mut [f64]) -> () => rows_at, prefetch = NONE
);

per_isa!(
    /// As [`sweep_rows_at_cached`] for the run of rows of `planes` (a
    /// wavefront level after the first, whose rows are in the cache): `out`
    /// holds the run's `gosa.len()` rows, `nk` values apart, and `gosa[n]`
    /// gets the run's row `n`'s sum. One call per run of rows, as the
    /// classic sweep: called per row, with its nine rows found one by one,
    /// the wavefront spent a third of its instructions outside the kernel
    /// (notes/cpu-perf.md, eighteenth session).
    pub fn sweep_planes(planes: &Planes<'_>, k: Range<usize>, out: &mut [f32], gosa: &mut [f64]) -> () => planes_run, prefetch = NONE
);

per_isa!(
    /// As [`sweep_planes`], prefetching the packed coefficients into L2
    /// ahead of use: for the cached levels of a wavefront whose fields
    /// the cache cannot hold, where a tile's levels' coefficients live in
    /// the L3 ([`COEFS`]).
    pub fn sweep_planes_ahead(planes: &Planes<'_>, k: Range<usize>, out: &mut [f32], gosa: &mut [f64]) -> () => planes_run, prefetch = COEFS
);

/// Where a row update finds the rows of `p` it reads.
trait Source<'a> {
    /// The 19 rows of `p` that the update of points `k` reads, each as
    /// the `k.len()` values the stencil member takes (the row at `(i + a
    /// - 1, j + b - 1)` shifted by `dk - 1` in k).
    fn stencil(&self, k: &Range<usize>) -> PRows<'a>;
}

/// The stencil of rows `r(a, b, dk)`: the row of `p` at `(i + a - 1, j +
/// b - 1)` shifted by `dk - 1` in k, for `a, b, dk` in `0..=2`.
#[inline(always)]
fn stencil_of<'a>(r: impl Fn(usize, usize, usize) -> &'a [f32]) -> PRows<'a> {
    Stencil {
        ip: r(2, 1, 1),
        jp: r(1, 2, 1),
        kp: r(1, 1, 2),
        ipjp: r(2, 2, 1),
        ipjm: r(2, 0, 1),
        imjp: r(0, 2, 1),
        imjm: r(0, 0, 1),
        jpkp: r(1, 2, 2),
        jmkp: r(1, 0, 2),
        jpkm: r(1, 2, 0),
        jmkm: r(1, 0, 0),
        ipkp: r(2, 1, 2),
        imkp: r(0, 1, 2),
        ipkm: r(2, 1, 0),
        imkm: r(0, 1, 0),
        im: r(0, 1, 1),
        jm: r(1, 0, 1),
        km: r(1, 1, 0),
        c: r(1, 1, 1),
    }
}

/// The rows of [`Planes`] around the run's row whose first value is at
/// `at` in each plane (its row `j - 1` there, as the planes start one row
/// before the run).
struct Stacked<'a, 'b> {
    planes: &'b Planes<'a>,
    at: usize,
}

impl<'a> Source<'a> for Stacked<'a, '_> {
    // As for the fields (below): every member one offset from its plane's
    // row, no slice checked per member or row; the run's extent is checked
    // once per run (`planes_run`): an array of three checked row slices
    // per row cost the run 50 instructions a row more than the classic
    // sweep's.
    #[inline(always)]
    fn stencil(&self, k: &Range<usize>) -> PRows<'a> {
        let nk = self.planes.nk;
        assert!(
            k.start >= 1 && k.start <= k.end && k.end < nk,
            "points inside the row"
        );
        let m = k.len();
        let at = self.at + k.start;
        let p = self.planes.p;
        stencil_of(|a, b, dk| {
            assert!(a <= 2 && b <= 2 && dk <= 2, "a stencil member");
            let off = at + b * nk + dk - 1;
            // SAFETY: `at` is row n's offset n * nk with n < the run's
            // rows, and every plane holds (rows + 2) * nk values (checked
            // per run); with b and dk at most 2 (constants after inlining)
            // and 1 <= k.start <= k.end < nk (checked above), off + m is
            // at most n * nk + 2 * nk + k.end + 1 <= (n + 3) * nk.
            unsafe { p[a].get_unchecked(off..off + m) }
        })
    }
}

/// The field's rows around row `(i, j)`, at `at`, its offset.
struct Around<'a, 'b> {
    inp: &'b Inputs<'a>,
    at: usize,
}

impl<'a> Source<'a> for Around<'a, '_> {
    // Every row is one offset into the stencil's footprint in the field,
    // as the original kernel wrote them: the compiler then addresses all
    // of them from one index (an earlier form, whole rows sliced again,
    // made it step 25 pointers and spill them, 7-15% slower at size M).
    // The footprint is checked once: 19 checked slices cost two branches
    // each per row, 13% of an in-cache sweep of 96-point rows
    // (notes/cpu-perf.md).
    #[inline(always)]
    fn stencil(&self, k: &Range<usize>) -> PRows<'a> {
        let [_, nj, nk] = self.inp.lay.dims;
        let plane = nj * nk;
        let m = k.len();
        // From (i - 1, j - 1, k.start - 1) to (i + 1, j + 1, k.end).
        let low = (self.at + k.start)
            .checked_sub(plane + nk + 1)
            .expect("row (i, j) has a neighbour on each side");
        let p = &self.inp.p[low..low + 2 * plane + 2 * nk + 2 + m];
        stencil_of(|a, b, dk| {
            assert!(a <= 2 && b <= 2 && dk <= 2, "a stencil member");
            let off = a * plane + b * nk + dk;
            // SAFETY: with a, b and dk at most 2 (and constants after
            // inlining, so the check above is free), off + m is at most
            // 2 * plane + 2 * nk + 2 + m, the length of `p`.
            unsafe { p.get_unchecked(off..off + m) }
        })
    }
}

/// [`row_body`] over the run of rows `js` of plane `i` of the fields,
/// with prefetch or without.
#[inline(always)]
fn rows_at<V: Step<W>, N: Step<LANES>, const W: usize, const PREFETCH: u8>(
    inp: &Inputs<'_>,
    i: usize,
    js: Range<usize>,
    k: Range<usize>,
    out: &mut [f32],
    gosa: &mut [f64],
) {
    let nk = inp.lay.dims[2];
    assert_eq!(gosa.len(), js.len(), "a sum per row");
    assert!(out.len() >= js.len() * nk, "a whole row per row");
    let shape = Shape::of(&k, inp.coef.packing);
    let coefs = run_coefs(&inp.coef, i * inp.lay.dims[1] + js.start, js.len());
    let rows = js.zip(out.chunks_exact_mut(nk)).zip(coefs).zip(gosa);
    for (((j, row), coef), g) in rows {
        let src = Around {
            inp,
            at: inp.lay.row(i, j),
        };
        *g = row_body::<_, V, N, PREFETCH, W>(&src, coef, &shape, inp.omega, row);
    }
}

/// The packed coefficients of `rows` consecutive rows from packed row
/// `first`, one row at a time (checked once for the run).
#[inline(always)]
fn run_coefs<'a>(coef: &Packed<'a>, first: usize, rows: usize) -> std::slice::ChunksExact<'a, f32> {
    let n = coef.packing.row_len();
    coef.values[first * n..][..rows * n].chunks_exact(n)
}

/// What every row of a run shares, worked out once per run rather than
/// per row (where the compiler did not always hoist it: a change beside
/// the kernel once cost the classic sweep 30 instructions a row).
#[derive(Clone, Copy)]
struct Shape {
    /// The points: `k0..k0 + m`.
    k0: usize,
    /// How many.
    m: usize,
    /// The rows' packing.
    packing: Packing,
    /// Which loop takes them.
    path: Path,
    /// Regular blocks: whole blocks from the first owned point.
    regular: usize,
    /// The last block again, where the points are not whole blocks: its
    /// first point (from the first owned one) and its coefficients' place
    /// in a packed row.
    tail: Option<(usize, usize)>,
}

/// How a row's points are updated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Whole blocks: the owned points of a row of at least one block.
    Blocks,
    /// The owned points of a row shorter than a block ([`off_blocks`]).
    Short,
    /// Points in the ghost layers, a few per row ([`off_blocks`]).
    Piece,
}

impl Shape {
    /// The shape of updates of points `k` of rows packed as `packing`.
    fn of(k: &Range<usize>, packing: Packing) -> Shape {
        let m = k.len();
        let path = if *k != packing.owned() {
            Path::Piece
        } else if m < BLOCK {
            Path::Short
        } else {
            Path::Blocks
        };
        let regular = packing.regular_blocks();
        let tail = (path == Path::Blocks && regular * BLOCK < m).then(|| {
            let start = m - BLOCK;
            (start, packing.step(0, start, BLOCK))
        });
        Shape {
            k0: k.start,
            m,
            packing,
            path,
            regular,
            tail,
        }
    }

    /// The points.
    fn k(&self) -> Range<usize> {
        self.k0..self.k0 + self.m
    }
}

/// [`row_body`] over the run of rows of `planes`, with prefetch or
/// without.
#[inline(always)]
fn planes_run<V: Step<W>, N: Step<LANES>, const W: usize, const PREFETCH: u8>(
    planes: &Planes<'_>,
    k: Range<usize>,
    out: &mut [f32],
    gosa: &mut [f64],
) {
    let nk = planes.nk;
    let rows = gosa.len();
    assert!(out.len() >= rows * nk, "a whole row per row");
    // Each plane checked once per run (a checked slice per plane and row
    // cost ten instructions a row).
    for plane in planes.p {
        assert!(
            plane.len() >= (rows + 2) * nk,
            "the run's rows and one each side"
        );
    }
    let shape = Shape::of(&k, planes.coef.packing);
    let coefs = run_coefs(&planes.coef, planes.coef_row, rows);
    let run = out.chunks_exact_mut(nk).zip(coefs).zip(gosa);
    for (n, ((row, coef), g)) in run.enumerate() {
        let src = Stacked { planes, at: n * nk };
        *g = row_body::<_, V, N, PREFETCH, W>(&src, coef, &shape, planes.omega, row);
    }
}

/// A row's partial sums of squared residuals, one per lane, aligned to a
/// cache line.
#[repr(C, align(64))]
struct Lanes([f64; LANES]);

/// `p` at the 19 points of the stencil, named as in the specification
/// (`ip` is `(i+1, j, k)`, `ipjm` `(i+1, j-1, k)`, `c` the centre, ...):
/// one value, a vector step's values, or the rows they come from.
#[derive(Clone, Copy)]
struct Stencil<T> {
    ip: T,
    jp: T,
    kp: T,
    ipjp: T,
    ipjm: T,
    imjp: T,
    imjm: T,
    jpkp: T,
    jmkp: T,
    jpkm: T,
    jmkm: T,
    ipkp: T,
    imkp: T,
    ipkm: T,
    imkm: T,
    im: T,
    jm: T,
    km: T,
    c: T,
}

/// The values one point's update reads: `p` at the stencil's points and
/// the 12 coefficients at the point (in the order of
/// [`crate::grid::fields::coef`]). `T` is one value ([`f32`]) or the
/// values of a vector step ([`Vector`]).
#[derive(Clone, Copy)]
struct Point<T> {
    p: Stencil<T>,
    coef: [T; COEFFICIENTS],
}

/// The arithmetic [`Point::residual`] needs: one `f32`, or `W` of them
/// lane by lane.
trait Value: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> {}
impl<T: Copy + Add<Output = T> + Sub<Output = T> + Mul<Output = T>> Value for T {}

impl<T: Value> Point<T> {
    /// The point of stencil values `p` and coefficients `coef`.
    #[inline(always)]
    fn new(p: Stencil<T>, coef: [T; COEFFICIENTS]) -> Point<T> {
        Point { p, coef }
    }

    /// The residual `ss` of the point, evaluated left to right exactly as
    /// specified (every copy of the kernel, whatever its step width, does
    /// the same operations on each point, so the values are the same).
    #[inline(always)]
    fn residual(&self) -> T {
        let (p, c) = (&self.p, &self.coef);
        let s0 = c[A0] * p.ip
            + c[A1] * p.jp
            + c[A2] * p.kp
            + c[B0] * (p.ipjp - p.ipjm - p.imjp + p.imjm)
            + c[B1] * (p.jpkp - p.jmkp - p.jpkm + p.jmkm)
            + c[B2] * (p.ipkp - p.imkp - p.ipkm + p.imkm)
            + c[C0] * p.im
            + c[C1] * p.jm
            + c[C2] * p.km
            + c[WRK1];
        (s0 * c[A3] - p.c) * c[BND]
    }
}

/// The values of `W` consecutive points, one per lane; each operation works
/// lane by lane, so a step computes each point as [`f32`] arithmetic does.
/// Written as loops over arrays, which the compiler turns into one vector
/// instruction per operation for the copy's instruction set.
#[derive(Clone, Copy)]
struct Vector<const W: usize>([f32; W]);

/// `impl Op for Vector<W>`, lane by lane with the compound operator `op`.
macro_rules! lanewise {
    ($trait:ident, $method:ident, $op:tt) => {
        impl<const W: usize> $trait for Vector<W> {
            type Output = Self;
            #[inline(always)]
            fn $method(self, o: Self) -> Self {
                let mut r = self.0;
                for (r, o) in r.iter_mut().zip(o.0) {
                    *r $op o;
                }
                Vector(r)
            }
        }
    };
}

lanewise!(Add, add, +=);
lanewise!(Sub, sub, -=);
lanewise!(Mul, mul, *=);

/// A vector of `W` values that a row step loads, computes with lane by
/// lane ([`Value`]) and stores.
trait Step<const W: usize>: Value {
    /// The vector of `a`'s values.
    ///
    /// # Safety
    /// The CPU has the instruction set the type is written for.
    unsafe fn load(a: &[f32; W]) -> Self;
    /// `x` in every lane.
    ///
    /// # Safety
    /// As [`Step::load`].
    unsafe fn splat(x: f32) -> Self;
    /// The lanes' values.
    fn values(self) -> [f32; W];
    /// Adds the square of the value in lane `x` to `acc[x % LANES]`, in
    /// increasing `x`: the row's partial sums of squared residuals.
    #[inline(always)]
    fn add_squares(self, acc: &mut [f64; LANES]) {
        let sq = (self * self).values();
        for half in sq.as_chunks::<LANES>().0 {
            for (a, s) in acc.iter_mut().zip(half) {
                *a += f64::from(*s);
            }
        }
    }
}

impl<const W: usize> Step<W> for Vector<W> {
    #[inline(always)]
    unsafe fn load(a: &[f32; W]) -> Self {
        Vector(*a)
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Vector([x; W])
    }
    #[inline(always)]
    fn values(self) -> [f32; W] {
        self.0
    }
}

/// Defines module `$m` with `$name`, a [`Step`] of `$w` `f32` in one
/// register `$reg` through the intrinsics `$add` .. `$set1`, made only
/// where the instruction set `$isa` (a string for the comments) runs.
macro_rules! register_step {
    ($(#[$meta:meta])* mod $m:ident: $name:ident($reg:ident; $w:ident), $isa:literal,
     $add:ident, $sub:ident, $mul:ident, $loadu:ident, $set1:ident, $squares:ident) => {
        $(#[$meta])*
        #[cfg(target_arch = "x86_64")]
        mod $m {
            use super::Step;
            use super::$w;
            use std::arch::x86_64::$reg;
            use std::ops::{Add, Mul, Sub};

            #[doc = concat!("`f32` values in one register. Only [`Step::load`] and ",
                "[`Step::splat`] make one, whose callers promise ", $isa,
                ": so every operation on a value runs where ", $isa, " does.")]
            #[derive(Clone, Copy)]
            pub struct $name($reg);

            impl Add for $name {
                type Output = Self;
                #[inline(always)]
                fn add(self, o: Self) -> Self {
                    // SAFETY: a value exists only where its instruction
                    // set does (above).
                    $name(unsafe { std::arch::x86_64::$add(self.0, o.0) })
                }
            }

            impl Sub for $name {
                type Output = Self;
                #[inline(always)]
                fn sub(self, o: Self) -> Self {
                    // SAFETY: as for `add`.
                    $name(unsafe { std::arch::x86_64::$sub(self.0, o.0) })
                }
            }

            impl Mul for $name {
                type Output = Self;
                #[inline(always)]
                fn mul(self, o: Self) -> Self {
                    // SAFETY: as for `add`.
                    $name(unsafe { std::arch::x86_64::$mul(self.0, o.0) })
                }
            }

            impl Step<$w> for $name {
                #[inline(always)]
                unsafe fn load(a: &[f32; $w]) -> Self {
                    // SAFETY: `a` holds the values read; the caller
                    // promises the instruction set.
                    $name(unsafe { std::arch::x86_64::$loadu(a.as_ptr()) })
                }
                #[inline(always)]
                unsafe fn splat(x: f32) -> Self {
                    // SAFETY: the caller promises the instruction set.
                    $name(unsafe { std::arch::x86_64::$set1(x) })
                }
                #[inline(always)]
                fn values(self) -> [f32; $w] {
                    // SAFETY: the register is `$w` `f32`, any bits a valid
                    // value.
                    unsafe { std::mem::transmute::<$reg, [f32; $w]>(self.0) }
                }
                #[inline(always)]
                fn add_squares(self, acc: &mut [f64; super::LANES]) {
                    // SAFETY: as for `add`.
                    unsafe { super::$squares((self * self).0, acc) }
                }
            }
        }
    };
}

register_step!(
    /// The AVX2 step: [`LANES`] values in one ymm register. Left to
    /// vectorise arrays of 8 values ([`Vector`]), the compiler split the
    /// packed kernel's arithmetic into pairs of 128-bit halves (321 xmm
    /// against 177 ymm operands in the AVX2 copy), which doubles the
    /// instructions per point.
    mod ymm: Ymm(__m256; LANES), "AVX2",
    _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_loadu_ps, _mm256_set1_ps, ymm_squares
);

register_step!(
    /// The AVX-512 step: [`WIDE`] values in one zmm register. Arrays of 16
    /// values ([`Vector`]) are vectorised as pairs of ymm registers (the
    /// compiler prefers 256-bit vectors), which gains nothing over 8-point
    /// steps. A zmm step halves the vector loads and arithmetic
    /// instructions per point: on a Zen 5 core (full-width 512-bit units)
    /// the kernel ran 7-10% faster in the cache (notes/cpu-perf.md).
    mod zmm: Zmm(__m512; WIDE), "AVX-512 F",
    _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_loadu_ps, _mm512_set1_ps, zmm_squares
);

/// [`Step::add_squares`] of the AVX2 step, given the squares `sq`: each
/// half widened to `f64` and added to four lanes, written out because the
/// compiler, left to the lane loop, kept half the lanes in shuffled pairs
/// of 128-bit registers (eight more instructions per step).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn ymm_squares(sq: std::arch::x86_64::__m256, acc: &mut [f64; LANES]) {
    use std::arch::x86_64::*;
    let at = acc.as_mut_ptr();
    // SAFETY: `acc` holds eight values, four from `at` and four from `at +
    // 4`; the caller promises AVX2.
    unsafe {
        let lo = _mm256_add_pd(
            _mm256_loadu_pd(at),
            _mm256_cvtps_pd(_mm256_castps256_ps128(sq)),
        );
        let hi = _mm256_add_pd(
            _mm256_loadu_pd(at.add(4)),
            _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(sq)),
        );
        _mm256_storeu_pd(at, lo);
        _mm256_storeu_pd(at.add(4), hi);
    }
}

/// [`Step::add_squares`] of the AVX-512 step, given the squares `sq`: the
/// lower eight lanes, then the upper eight, each widened to `f64` and
/// added to the eight lanes.
///
/// # Safety
/// The CPU has AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn zmm_squares(sq: std::arch::x86_64::__m512, acc: &mut [f64; LANES]) {
    use std::arch::x86_64::*;
    // SAFETY: `acc` holds eight values; the caller promises AVX-512 F.
    unsafe {
        let bits = _mm512_castps_pd(sq);
        let lo = _mm256_castpd_ps(_mm512_castpd512_pd256(bits));
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(bits));
        let mut sum = _mm512_loadu_pd(acc.as_ptr());
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(lo));
        sum = _mm512_add_pd(sum, _mm512_cvtps_pd(hi));
        _mm512_storeu_pd(acc.as_mut_ptr(), sum);
    }
}

/// `Stencil` of `$e` for each member `$r` of the stencil `$s`.
macro_rules! each_p {
    ($s:expr, |$r:ident| $e:expr) => {
        each_p!(@ $s, $r, $e, ip jp kp ipjp ipjm imjp imjm jpkp jmkp jpkm jmkm ipkp imkp ipkm
            imkm im jm km c)
    };
    (@ $s:expr, $r:ident, $e:expr, $($n:ident)*) => {{
        let Stencil { $($n),* } = $s;
        Stencil { $($n: { let $r = $n; $e }),* }
    }};
}

/// `[at(0), .., at(11)]`, one value per coefficient: written out, because
/// `std::array::from_fn` stayed a call in the instruction-set copies
/// (with every vector spilled around it).
#[inline(always)]
fn coefs<T>(at: impl Fn(usize) -> T) -> [T; COEFFICIENTS] {
    [
        at(0),
        at(1),
        at(2),
        at(3),
        at(4),
        at(5),
        at(6),
        at(7),
        at(8),
        at(9),
        at(10),
        at(11),
    ]
}

/// The rows of `p` of one row update, as slices of the same length.
type PRows<'a> = Stencil<&'a [f32]>;

/// The `W` values of `a` from `at`, as an array (with `at` a constant
/// after inlining, and `a` an array, the check vanishes).
#[inline(always)]
fn part<const W: usize>(a: &[f32], at: usize) -> &[f32; W] {
    a[at..at + W].try_into().expect("W values")
}

/// The row kernel, inlined into each instruction-set wrapper so that each
/// copy is vectorised for its own target features, `W` points per vector
/// step of type `V` in the cache, [`LANES`] per step of type `N` where
/// the wide steps do not pay; `PREFETCH` asks for the inputs ahead of use.
#[inline(always)]
fn row_body<'a, S: Source<'a>, V: Step<W>, N: Step<LANES>, const PREFETCH: u8, const W: usize>(
    rows: &S,
    coef: &[f32],
    shape: &Shape,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    let k = shape.k();
    if shape.path != Path::Blocks {
        let coef = CoefRow {
            values: coef,
            packing: shape.packing,
        };
        return if shape.path == Path::Piece {
            // A piece of a row (the wavefront's points in the ghost
            // layers, a few per row).
            piece(rows, &coef, k, omega, out)
        } else {
            short(rows, &coef, k, omega, out)
        };
    }
    let (k0, m) = (shape.k0, shape.m);
    let set = rows.stencil(&k);
    let out = &mut out[k0..k0 + m];
    // On a cache line of its own: the compiler keeps the partial sums on
    // the stack and zeroes them with one 64-byte store per row, which a
    // frame that happened to put them across a page boundary made cost
    // 15% of the sweep (perf put 17% of the kernel's samples on it).
    let mut acc = Lanes([0.0f64; LANES]);
    let acc = &mut acc.0;
    // The whole blocks, then the row's last block again where it is not
    // whole blocks. Points are summed in increasing order, each into its
    // lane, so the sums do not depend on W.
    // Only rows already in the cache (whose `p` is not prefetched) take
    // the wide steps: from memory (with prefetch) they measured 3-7%
    // slower than 8-point chunks at sizes M and L on one thread
    // (notes/cpu-perf.md), as on Zen 4 before.
    let regular = shape.regular * BLOCK;
    let blocks_of = &coef.as_chunks::<BLOCK_VALUES>().0[..shape.regular];
    let first = &mut out[..regular];
    if W > LANES && PREFETCH & STREAMS == 0 {
        blocks::<V, PREFETCH, W>(&set, blocks_of, omega, first, acc);
    } else {
        blocks::<N, PREFETCH, LANES>(&set, blocks_of, omega, first, acc);
    }
    if let Some((start, at)) = shape.tail {
        // The last BLOCK points as one block (overlapping the regular
        // blocks' last points: same operations per point, so the same
        // values), in the two steps the regular blocks take: two
        // [`chunk`]s and a lane at a time cost twice the instructions.
        // Only the new points are summed: `regular` is a multiple of
        // LANES, so new point `regular + x` goes to lane `x % LANES`,
        // after point `regular + x - LANES` where that is new too; two
        // whole vector adds of the new points' squares, zero beyond them
        // (adding +0.0 to a sum of squares changes no bit).
        let block = coef[at..at + BLOCK_VALUES]
            .try_into()
            .expect("a whole block");
        let (sq, new) = last_block::<N>(&set, block, start, omega);
        // The whole block is stored, the points already stored again with
        // their same values: a copy of a variable length is a call.
        // The new points' squares shifted to the front, zero after them:
        // read from a copy with zeros behind it (element by element, the
        // shift took 16 address computations and 16 scalar loads).
        let old = regular - start;
        let mut behind = [0.0f32; 2 * BLOCK];
        behind[..BLOCK].copy_from_slice(&sq);
        let tail = &behind[old..old + BLOCK];
        for half in tail.chunks_exact(LANES) {
            for (a, s) in acc.iter_mut().zip(half) {
                *a += f64::from(*s);
            }
        }
        out[start..].copy_from_slice(&new);
    }
    // Lanes combined left to right: a fixed order.
    acc.iter().sum()
}

/// Points `k` of a row shorter than a block ([`BLOCK`] points,
/// [`Path::Short`]; `out` the whole row), as [`row_body`] sums them: whole
/// chunks of [`LANES`] points in the portable steps, then the last `m %
/// LANES` points (the last [`LANES`] again where there is a chunk before
/// them). Not inlined into the instruction-set copies, as [`piece`]:
/// scalar and portable steps need no vector features, and the rare paths
/// kept the hot path's stencil in memory (their pointers spilled to the
/// stack on every row; one function per path, as a path passed as a value
/// cost the classic sweep 3 instructions a row: callgrind, 10x18x98 at
/// T = 1, 7.67 to 7.70 per point).
#[inline(never)]
fn short<'a, S: Source<'a>>(
    rows: &S,
    coef: &CoefRow<'_>,
    k: Range<usize>,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    let set = rows.stencil(&k);
    let (k0, m) = (k.start, k.len());
    let out = &mut out[k];
    let mut acc = Lanes([0.0f64; LANES]);
    let acc = &mut acc.0;
    let whole = m / LANES * LANES;
    for x in (0..whole).step_by(LANES) {
        let (ss, new) = chunk(&set, coef, x, omega);
        for (a, s) in acc.iter_mut().zip(ss.0) {
            *a += f64::from(s * s);
        }
        out[x..][..LANES].copy_from_slice(&new.0);
    }
    if whole == m {
        // No points left.
    } else if whole > 0 {
        // The last LANES points (overlapping the previous chunk: same
        // operations per point, so the same values); only the new ones
        // are stored and summed.
        let start = m - LANES;
        let (ss, new) = chunk(&set, coef, start, omega);
        for x in whole..m {
            let l = x - start;
            acc[x % LANES] += f64::from(ss.0[l] * ss.0[l]);
            out[x] = new.0[l];
        }
    } else {
        points(&set, coef, k0, 0..m, omega, out, acc);
    }
    acc.iter().sum()
}

/// Points `k` of a row that are not its owned points (`out` the whole
/// row; [`Path::Piece`]: the wavefront's redundant updates in the ghost
/// layers, up to T - 1 points at a row's end), as [`points`] updates and
/// sums them one at a time: in chunks of [`LANES`] points where the
/// chunk's coefficients load as vectors (the ghost points of one side of
/// the owned ones, which are stored one after the other per field,
/// [`Packing::ghost_steps`]), the chunk reaching past the piece where the
/// row leaves room and the points beyond it updated but not stored; one
/// point at a time elsewhere. Same operations on each point in either, so
/// the same values and sums. One point at a time, the pieces took 30 %
/// of a two-rank run of size M at T = 8 split along k (perf;
/// notes/cpu-perf.md, twenty-second session).
#[inline(never)]
fn piece<'a, S: Source<'a>>(
    rows: &S,
    coef: &CoefRow<'_>,
    k: Range<usize>,
    omega: f32,
    out: &mut [f32],
) -> f64 {
    let mut acc = Lanes([0.0f64; LANES]);
    let acc = &mut acc.0;
    let mut next = k.start;
    while next < k.end {
        let end = (next + LANES).min(k.end);
        if let Some((c, bases)) = ghost_chunk(coef.packing, next..end) {
            let set = rows.stencil(&(c..c + LANES));
            let v = Point::new(
                each_p!(set, |row| Vector(*part::<LANES>(row, 0))),
                coefs(|f| Vector(*part::<LANES>(coef.values, bases[f]))),
            );
            let ss = v.residual();
            let new = v.p.c + Vector([omega; LANES]) * ss;
            for x in next..end {
                let l = x - c;
                acc[(x - k.start) % LANES] += f64::from(ss.0[l] * ss.0[l]);
                out[x] = new.0[l];
            }
        } else {
            let set = rows.stencil(&k);
            let xs = next - k.start..end - k.start;
            points(&set, coef, k.start, xs, omega, &mut out[k.clone()], acc);
        }
        next = end;
    }
    // Lanes combined left to right, as the other paths do.
    acc.iter().sum()
}

/// Where [`piece`] updates its points `points` (at most [`LANES`]) as one
/// chunk: the chunk's first point (from the points' first on, or where the
/// row ends too soon, ending with their last) and each coefficient's
/// offset in the packed row; `None` where the row or the packed row leaves
/// no room, or the points are not ghost points of one side.
fn ghost_chunk(packing: Packing, points: Range<usize>) -> Option<(usize, [usize; COEFFICIENTS])> {
    let nk = packing.nk();
    let c = if points.start + LANES < nk {
        points.start
    } else {
        points.end.saturating_sub(LANES)
    };
    if c < 1 || c + LANES >= nk {
        return None;
    }
    Some((c, packing.ghost_steps(c, LANES, points)?))
}

/// Updates the points of the packed `blocks` (whole blocks of
/// [`BLOCK`] points from the row's first owned point; `out` the outputs of
/// exactly those points) in steps of `W`, adding each point's squared
/// residual to lane `x % LANES` of `acc`.
#[inline(always)]
fn blocks<V: Step<W>, const PREFETCH: u8, const W: usize>(
    set: &PRows<'_>,
    blocks: &[[f32; BLOCK_VALUES]],
    omega: f32,
    out: &mut [f32],
    acc: &mut [f64; LANES],
) {
    let n = blocks.len();
    // Every row of p viewed as `[[f32; BLOCK]]` of length `n`, so that
    // indexing by `b < n` needs no bounds checks.
    let rows = each_p!(*set, |row| row[..n * BLOCK].as_chunks::<BLOCK>().0);
    let out = out.as_chunks_mut::<BLOCK>().0;
    assert_eq!(out.len(), n);
    // SAFETY (here and at the loads): `V` is a vector type of the copy's
    // own instruction set (`per_isa!`), which runs only where detection
    // found that set.
    let omega = unsafe { V::splat(omega) };
    for b in 0..n {
        if PREFETCH & STREAMS != 0 {
            // Two distances: far into L2 so the line is on its way from
            // memory, near into L1 so the loads find it there. A block
            // covers one line of each row of p and of `next` (only the
            // leading row of p, the others were loaded by earlier rows).
            let at = b * BLOCK;
            for row in [rows.ipjp.as_ptr().cast::<f32>(), out.as_ptr().cast()] {
                prefetch::<L1>(row, at + PREFETCH_AHEAD);
                prefetch::<L2>(row, at + PREFETCH_L2_AHEAD);
            }
        }
        // With [`COEFS`] the coefficients' 12 lines of the block
        // [`COEF_AHEAD`] blocks on, into L2. The wavefront's first level
        // ([`ALL`]) reads them in bursts of a tile's rows between the
        // cached levels, and ran 1.07-1.20x faster with them at size L
        // (T = 8, one and two threads, Zen 4). The cached levels, whose
        // rows of `p` are in the cache but whose coefficients a step's
        // other levels have pushed out to L3, prefetch only those:
        // 1.02-1.08x at L on one thread, T = 8, and 1.00-1.10x on two at
        // T = 12 (notes/cpu-perf.md). The classic sweep, a steady
        // stream, leaves them to the hardware: with them its prefetching
        // copy was as fast as the one without on Zen 4, so `--prefetch
        // auto` took either by the noise, and on a Zen 3 they made it
        // slower (12 lines per block at 2 or 4 blocks 0.7-0.9x;
        // notes/cpu-perf.md).
        if PREFETCH & COEFS != 0 {
            let coef = blocks.as_ptr().cast::<f32>();
            for line in 0..BLOCK_VALUES / LINE_VALUES {
                prefetch::<L2>(coef, (b + COEF_AHEAD) * BLOCK_VALUES + line * LINE_VALUES);
            }
        }
        let block = &blocks[b];
        for h in 0..BLOCK / W {
            let v = Point::new(
                each_p!(rows, |row| unsafe { V::load(part::<W>(&row[b], h * W)) }),
                coefs(|f| unsafe { V::load(part::<W>(block, f * BLOCK + h * W)) }),
            );
            let ss = v.residual();
            ss.add_squares(acc);
            out[b][h * W..][..W].copy_from_slice(&(v.p.c + omega * ss).values());
        }
    }
}

/// The squared residuals and new values of the [`BLOCK`] owned points
/// from `start` of a row (points counted from its first owned one), whose
/// coefficients are `block`, in steps of `N` as [`blocks`] takes them.
#[inline(always)]
fn last_block<N: Step<LANES>>(
    set: &PRows<'_>,
    block: &[f32; BLOCK_VALUES],
    start: usize,
    omega: f32,
) -> ([f32; BLOCK], [f32; BLOCK]) {
    let rows = each_p!(*set, |row| part::<BLOCK>(row, start));
    // SAFETY (here and at the loads): as in `blocks`.
    let omega = unsafe { N::splat(omega) };
    let (mut sq, mut new) = ([0.0; BLOCK], [0.0; BLOCK]);
    for h in 0..BLOCK / LANES {
        let v = Point::new(
            each_p!(rows, |row| unsafe {
                N::load(part::<LANES>(row, h * LANES))
            }),
            coefs(|f| unsafe { N::load(part::<LANES>(block, f * BLOCK + h * LANES)) }),
        );
        let ss = v.residual();
        sq[h * LANES..][..LANES].copy_from_slice(&(ss * ss).values());
        new[h * LANES..][..LANES].copy_from_slice(&(v.p.c + omega * ss).values());
    }
    (sq, new)
}

/// The residuals and new values of the LANES owned points from `x` of a
/// row (points counted from its first owned one), which lie in one block.
#[inline(always)]
fn chunk(
    set: &PRows<'_>,
    coef: &CoefRow<'_>,
    x: usize,
    omega: f32,
) -> (Vector<LANES>, Vector<LANES>) {
    let v = Point::new(
        each_p!(*set, |row| Vector(*part::<LANES>(row, x))),
        coefs(|f| Vector(*part::<LANES>(coef.values, coef.packing.step(f, x, LANES)))),
    );
    let ss = v.residual();
    (ss, v.p.c + Vector([omega; LANES]) * ss)
}

/// Updates points `xs` of the rows (counted from local point `k0`) one at
/// a time, point x's squared residual into lane `x % LANES`.
#[inline(always)]
fn points(
    set: &PRows<'_>,
    coef: &CoefRow<'_>,
    k0: usize,
    xs: Range<usize>,
    omega: f32,
    out: &mut [f32],
    acc: &mut [f64; LANES],
) {
    for x in xs {
        let v = Point::new(each_p!(*set, |row| row[x]), coefs(|f| coef.at(f, k0 + x)));
        let ss = v.residual();
        acc[x % LANES] += f64::from(ss * ss);
        out[x] = v.p.c + omega * ss;
    }
}

/// A row kernel's software prefetch (its `PREFETCH` parameter, a set of
/// these flags): none.
const NONE: u8 = 0;
/// The leading row of `p` and the new row, ahead of use (the narrow steps
/// then: [`row_body`]).
const STREAMS: u8 = 1;
/// The packed coefficients.
const COEFS: u8 = 2;
/// Both.
const ALL: u8 = STREAMS | COEFS;

/// How many blocks ahead [`COEFS`] prefetches the coefficients into L2
/// (3 KiB; 8 blocks measured the same).
const COEF_AHEAD: usize = 4;

/// Values per cache line.
const LINE_VALUES: usize = 16;

/// How far ahead, in values, the streams are prefetched into L1 (256 B).
const PREFETCH_AHEAD: usize = 64;
/// How far ahead, in values, they are prefetched into L2 (1 KiB): far
/// enough to cover a memory latency, so that the L1 prefetch, which holds a
/// miss buffer until its line arrives, finds the line in L2. Measured
/// against one distance alone (notes/cpu-perf.md): 5-15% faster per thread
/// at M and L; 512 B and 2 KiB were slower.
const PREFETCH_L2_AHEAD: usize = 256;

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

/// Asks for the line holding value `at` of the stream at `base` (which
/// may lie beyond its slice: a prefetch never faults, and the next row
/// usually follows) with hint `HINT`.
#[inline(always)]
fn prefetch<const HINT: i32>(base: *const f32, at: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_prefetch;
        let at = base.wrapping_add(at).cast::<i8>();
        // SAFETY: a prefetch is a hint; it reads nothing architecturally.
        unsafe { _mm_prefetch::<HINT>(at) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (base, at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::packed::{Packing, pack_fields};
    use crate::grid::Grid;
    use crate::grid::decomp::{Block, ProcGrid};
    use crate::grid::fields::{Fields, OMEGA};
    use crate::machine::isa::Isa;
    use crate::verify::reference_sweep;

    /// Every instruction-set variant, on rows whose length is and is not a
    /// multiple of the step widths (8 and 16 points), gives bitwise the
    /// reference's field and gosa within rounding of the summation order,
    /// and the same gosa bits as the baseline copy; rows of 16 points or
    /// more that are not whole blocks end with their last block again,
    /// overlapping the whole ones by 1 to 15 points (19, 24, 35, 40, 50).
    #[test]
    fn every_isa_matches_the_reference() {
        let dims = [[5, 6, 21], [4, 5, 10], [6, 4, 3], [5, 5, 37], [4, 4, 52]];
        for dims in dims.into_iter().chain([[4, 5, 26], [5, 4, 42]]) {
            isas_match_the_reference(dims);
        }
    }

    /// The same on every row length of 1 to 17 interior points: the 16-point
    /// step, the 8-point chunk and the tail, alone and together.
    #[test]
    fn every_isa_matches_the_reference_on_short_rows() {
        for m in 1..=17 {
            isas_match_the_reference([4, 5, m + 2]);
        }
    }

    fn isas_match_the_reference(dims: [usize; 3]) {
        let grid = Grid::new(dims).unwrap();
        let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
        let mut reference = Fields::initial(&grid, &block).unwrap();
        // Perturb p so that every neighbour's coefficient matters, and
        // every coefficient point by point, so that a value packed in the
        // wrong place (another point, another field) shows.
        for (n, v) in reference.p.iter_mut().enumerate() {
            *v += (n % 7) as f32 * 0.01;
        }
        for (c, field) in reference.coef.iter_mut().enumerate() {
            for (n, v) in field.iter_mut().enumerate() {
                *v += ((3 * n + c) % 11) as f32 * 0.01;
            }
        }
        reference.next.assign(&reference.p);
        let start = reference.clone();
        let ref_gosa = reference_sweep(&mut reference);
        let mut baseline_gosa = None;
        for isa in Isa::all_supported() {
            let mut f = start.clone();
            let lay = Layout { dims };
            let p = f.p.as_slice().unwrap();
            let packing = Packing::new(dims[2], block.owned(2));
            let fields = std::array::from_fn(|c| f.coef[c].as_slice().unwrap());
            let packed = pack_fields(fields, packing);
            let inp = Inputs {
                lay,
                p,
                coef: Packed {
                    values: &packed,
                    packing,
                },
                omega: OMEGA,
            };
            let mut pieces = f.next.clone();
            let mut at_field = f.next.clone();
            let mut pieces_at = f.next.clone();
            let out = f.next.as_slice_mut().unwrap();
            let (mut gosa, mut gosa_at) = (0.0, 0.0);
            let pieces_out = pieces.as_slice_mut().unwrap();
            let pieces_at_out = pieces_at.as_slice_mut().unwrap();
            let at_out = at_field.as_slice_mut().unwrap();
            let nk = dims[2];
            for i in 1..dims[0] - 1 {
                // The plane's rows as one run, as the classic sweep takes
                // them.
                let js = 1..dims[1] - 1;
                let mut g_rows = vec![0.0; js.len()];
                let rows_at = &mut at_out[lay.row(i, 1)..];
                sweep_rows_at(isa, &inp, i, js.clone(), 1..nk - 1, rows_at, &mut g_rows);
                // Added row by row, in the order `gosa` takes them.
                for g in &g_rows {
                    gosa_at += g;
                }
                // The run from row j on, as a wavefront level takes it,
                // its three planes found in `p`.
                let planes = |j: usize| Planes {
                    p: [i - 1, i, i + 1].map(|a| &p[lay.row(a, j - 1)..]),
                    nk,
                    coef: inp.coef,
                    coef_row: i * dims[1] + j,
                    omega: OMEGA,
                };
                let mut g_run = vec![0.0; js.len()];
                let run = &mut out[lay.row(i, 1)..];
                sweep_planes(isa, &planes(1), 1..nk - 1, run, &mut g_run);
                for g in &g_run {
                    gosa += g;
                }
                for j in js {
                    let at = lay.row(i, j);
                    let row = &out[at..at + nk];
                    // A run of one row: the same values and sum.
                    let mut one = vec![0.0; nk];
                    let mut g = [0.0];
                    sweep_planes(isa, &planes(j), 1..nk - 1, &mut one, &mut g);
                    assert_eq!(&one[1..nk - 1], &row[1..nk - 1]);
                    assert_eq!(g[0].to_bits(), g_run[j - 1].to_bits());
                    // The copy that prefetches the coefficients: the same.
                    let mut ahead = vec![0.0; nk];
                    let mut g_ahead = [0.0];
                    sweep_planes_ahead(isa, &planes(j), 1..nk - 1, &mut ahead, &mut g_ahead);
                    assert_eq!(&ahead[1..nk - 1], &row[1..nk - 1]);
                    assert_eq!(g_ahead[0].to_bits(), g[0].to_bits());
                    let mut at_cached = vec![0.0; nk];
                    let mut g_at = [0.0];
                    sweep_rows_at_cached(
                        isa,
                        &inp,
                        i,
                        j..j + 1,
                        1..nk - 1,
                        &mut at_cached,
                        &mut g_at,
                    );
                    assert_eq!(&at_cached[1..nk - 1], &row[1..nk - 1]);
                    assert_eq!(g_at[0].to_bits(), g[0].to_bits());
                    assert_eq!(g_rows[j - 1].to_bits(), g[0].to_bits());
                    // The same row in up to three pieces (as the temporal
                    // sweep splits its rows into ghost layers): the same
                    // values, with either kernel.
                    let cuts = [1, (nk / 3).max(1), (2 * nk / 3).max(1), nk - 1];
                    for w in cuts.windows(2).filter(|w| w[0] < w[1]) {
                        let row = &mut pieces_out[at..at + nk];
                        sweep_planes(isa, &planes(j), w[0]..w[1], row, &mut [0.0]);
                        let row = &mut pieces_at_out[at..at + nk];
                        sweep_rows_at(isa, &inp, i, j..j + 1, w[0]..w[1], row, &mut [0.0]);
                    }
                }
            }
            let name = isa.name();
            assert_eq!(f.next, reference.p, "{dims:?} {name}");
            assert_eq!(at_field, reference.p, "{dims:?} {name} over the fields");
            assert_eq!(pieces, reference.p, "{dims:?} {name} in pieces");
            assert_eq!(pieces_at, reference.p, "{dims:?} {name} in pieces");
            assert_eq!(gosa.to_bits(), gosa_at.to_bits(), "{dims:?} {name}");
            assert!(
                crate::verify::gosa_agrees(gosa, ref_gosa),
                "{dims:?} {name}: {gosa} vs {ref_gosa}"
            );
            let want = *baseline_gosa.get_or_insert(gosa);
            assert_eq!(
                gosa.to_bits(),
                want.to_bits(),
                "{dims:?} {name} vs baseline"
            );
        }
    }

    /// The ghost points of a row in pieces, as the wavefront's redundant
    /// updates take them: the chunks (where the row leaves room and the
    /// coefficients load as vectors) give the values and sums that one
    /// point at a time gives, on rows with ghost points on either side or
    /// both, for every piece of them, long and short, at the row's ends.
    #[test]
    fn ghost_pieces_in_chunks_match_one_point_at_a_time() {
        for (nk, owned) in [
            (30, 8..22),
            (20, 1..12),
            (12, 5..11),
            (40, 1..39),
            (9, 2..4),
            (60, 17..40),
        ] {
            let packing = Packing::new(nk, owned.clone());
            let value = |f: usize, k: usize| 0.5 + ((f * 31 + k * 7) % 23) as f32 * 0.03;
            let mut coef = vec![0.0; packing.row_len()];
            packing.pack_row(&mut coef, value);
            let coef = CoefRow {
                values: &coef,
                packing,
            };
            let plane = |a: usize| -> Vec<f32> {
                (0..3 * nk)
                    .map(|n| 1.0 + ((n * 13 + a * 5) % 17) as f32 * 0.05)
                    .collect()
            };
            let p = [plane(0), plane(1), plane(2)];
            let planes = Planes {
                p: [&p[0][..], &p[1][..], &p[2][..]],
                nk,
                coef: Packed {
                    values: coef.values,
                    packing,
                },
                coef_row: 0,
                omega: 0.8,
            };
            let src = Stacked {
                planes: &planes,
                at: 0,
            };
            let sides = [1..owned.start, owned.end..nk - 1];
            let mut in_chunks = 0;
            for side in sides.iter().filter(|s| !s.is_empty()) {
                for a in side.clone() {
                    for b in a + 1..=side.end {
                        // Where the first chunk is loaded as vectors.
                        if ghost_chunk(packing, a..(a + LANES).min(b)).is_some() {
                            in_chunks += 1;
                        }
                        let mut chunked = vec![0.0; nk];
                        let got = piece(&src, &coef, a..b, 0.8, &mut chunked);
                        let mut one = vec![0.0; nk];
                        let mut acc = [0.0f64; LANES];
                        let set = src.stencil(&(a..b));
                        points(&set, &coef, a, 0..b - a, 0.8, &mut one[a..b], &mut acc);
                        let want: f64 = acc.iter().sum();
                        assert_eq!(chunked, one, "{nk} {owned:?}: {a}..{b}");
                        assert_eq!(got.to_bits(), want.to_bits(), "{nk} {owned:?}: {a}..{b}");
                    }
                }
            }
            let has_pieces = sides.iter().any(|s| !s.is_empty());
            assert!(
                nk < 10 || !has_pieces || in_chunks > 0,
                "{nk} {owned:?}: no piece in chunks"
            );
        }
    }
}
