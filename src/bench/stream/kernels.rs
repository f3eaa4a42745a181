//! The kernels of `himeno bench stream`: McCalpin's four (Copy, Scale,
//! Add, Triad over `f64`) and Sum13, the solver's memory traffic without
//! its arithmetic.

use crate::machine::isa::multiversion;
use serde::{Deserialize, Serialize};

/// The scalar of Scale and Triad, as in STREAM.
pub const SCALAR: f64 = 3.0;

/// Input arrays of Sum13: the sweep's twelve coefficients and the new row
/// of `p`.
pub const SUM_INPUTS: usize = 13;

/// Arrays of Sum13: the inputs and the output.
pub const SUM_ARRAYS: usize = SUM_INPUTS + 1;

/// One benchmark kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// `c = a`.
    Copy,
    /// `b = SCALAR * c`.
    Scale,
    /// `c = a + b`.
    Add,
    /// `a = b + SCALAR * c`.
    Triad,
    /// `out = in0 + ... + in12` over `f32` arrays: 56 bytes per element,
    /// as the sweep moves per point.
    Sum13,
}

impl Kernel {
    /// Every kernel, in the order STREAM runs them, Sum13 last.
    pub const ALL: [Kernel; 5] = [
        Kernel::Copy,
        Kernel::Scale,
        Kernel::Add,
        Kernel::Triad,
        Kernel::Sum13,
    ];

    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
            Kernel::Sum13 => "sum13",
        }
    }

    /// Bytes counted per element, as STREAM counts them (write-allocate
    /// traffic is not counted).
    pub fn bytes_per_element(self) -> f64 {
        match self {
            Kernel::Copy | Kernel::Scale => 16.0,
            Kernel::Add | Kernel::Triad => 24.0,
            Kernel::Sum13 => (SUM_ARRAYS * size_of::<f32>()) as f64,
        }
    }
}

/// One thread's parts of STREAM's arrays `a`, `b`, `c`.
pub type Parts<'a> = (&'a mut [f64], &'a mut [f64], &'a mut [f64]);

multiversion!(
    /// Runs STREAM kernel `kernel` over one thread's parts, compiled for
    /// the instruction set `isa` as McCalpin's `stream.c` is compiled with
    /// `-march=native`: on a Zen 4 guest the width of the stores alone moved
    /// the triad by 1.13x (16-byte stores against 64-byte ones, both in one
    /// C probe; notes/cpu-perf.md, twenty-first session), so a kernel built
    /// for the baseline read more than STREAM on the same machine.
    ///
    /// # Panics
    /// For [`Kernel::Sum13`], whose arrays are others ([`sum13`]).
    pub fn stream(parts: Parts<'_>, kernel: Kernel) => stream_body
);

/// [`stream`]'s loops, inlined into each instruction-set copy. Every
/// kernel is a plain loop of loads and stores, Copy too: a `memcpy` (which
/// GCC 12 does not make of STREAM's copy loop) moves large arrays with
/// non-temporal stores, without the write-allocate reads STREAM's loop
/// pays for, and read 1.08-1.11x STREAM's Copy on a Xeon guest.
#[inline(always)]
fn stream_body((a, b, c): Parts<'_>, kernel: Kernel) {
    let n = a.len();
    let (a, b, c) = (&mut a[..n], &mut b[..n], &mut c[..n]);
    match kernel {
        Kernel::Copy => copy_body(a, c),
        Kernel::Scale => {
            for x in 0..n {
                b[x] = SCALAR * c[x];
            }
        }
        Kernel::Add => {
            for x in 0..n {
                c[x] = a[x] + b[x];
            }
        }
        Kernel::Triad => {
            for x in 0..n {
                a[x] = b[x] + SCALAR * c[x];
            }
        }
        Kernel::Sum13 => panic!("Sum13 runs over its own arrays"),
    }
}

/// Copy's loop, `to = from`, in blocks of [`COPY_BLOCK`] values. Within a
/// block the compiler vectorises the loop with the instruction set's
/// registers; a compiler fence after each block keeps the loop from being
/// recognised as a whole-array `memcpy`.
#[inline(always)]
fn copy_body(from: &[f64], to: &mut [f64]) {
    for (to, from) in to.chunks_mut(COPY_BLOCK).zip(from.chunks(COPY_BLOCK)) {
        for (t, f) in to.iter_mut().zip(from) {
            *t = *f;
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// Values Copy moves between compiler fences: 64 cache lines.
const COPY_BLOCK: usize = 512;

/// The values STREAM's arrays hold after `repeats` rounds of its four
/// kernels from `a = 1, b = 2, c = 0`, replayed in scalars: every element
/// goes through the same operations, so the comparison is exact.
pub fn replay(repeats: usize) -> (f64, f64, f64) {
    let (mut a, mut b, mut c) = (1.0f64, 2.0f64, 0.0f64);
    for _ in 0..repeats {
        c = a;
        b = SCALAR * c;
        c = a + b;
        a = b + SCALAR * c;
    }
    (a, b, c)
}

multiversion!(
    /// Sum13 over one thread's parts: `out[x] = ins[0][x] + ... +
    /// ins[12][x]`, summed left to right, compiled like the sweep for the
    /// instruction set `isa` but with no software prefetch: a hardware
    /// probe, as STREAM's kernels are. It tells a machine's bandwidth for
    /// fourteen concurrent streams per thread apart from the sweep's own
    /// cost.
    ///
    /// # Panics
    /// If an input is shorter than `out`.
    pub fn sum13(ins: &[&[f32]; SUM_INPUTS], out: &mut [f32]) => sum_body
);

/// [`sum13`]'s loop, inlined into each instruction-set copy.
#[inline(always)]
fn sum_body(ins: &[&[f32]; SUM_INPUTS], out: &mut [f32]) {
    let n = out.len();
    // Each input bound to its own name and cut to `n`, so that the
    // compiler sees every length and drops the bounds checks.
    let [a, b, c, d, e, f, g, h, i, j, k, l, m] = ins.map(|s| &s[..n]);
    for x in 0..n {
        out[x] = a[x]
            + b[x]
            + c[x]
            + d[x]
            + e[x]
            + f[x]
            + g[x]
            + h[x]
            + i[x]
            + j[x]
            + k[x]
            + l[x]
            + m[x];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::isa::Isa;

    #[test]
    fn names_bytes_and_replayed_values() {
        let names: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["copy", "scale", "add", "triad", "sum13"]);
        assert_eq!(Kernel::Sum13.bytes_per_element(), 56.0);
        assert_eq!(serde_json::to_string(&Kernel::Triad).unwrap(), "\"triad\"");
    }

    /// Every instruction set's copy of the four kernels, over lengths
    /// that end inside a vector and inside Copy's blocks, leaves every
    /// element at the replayed values.
    #[test]
    fn every_copy_of_the_stream_kernels_gives_the_replayed_values() {
        for isa in Isa::all_supported() {
            for n in [1, 3, 17, COPY_BLOCK + 5, 3 * COPY_BLOCK] {
                let (mut a, mut b, mut c) = (vec![1.0; n], vec![2.0; n], vec![0.0; n]);
                for _ in 0..2 {
                    for k in [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad] {
                        stream(isa, (&mut a, &mut b, &mut c), k);
                    }
                }
                let want = replay(2);
                assert!(
                    (0..n).all(|x| (a[x], b[x], c[x]) == want),
                    "{} n={n}",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn sum13_adds_every_input_in_every_copy() {
        let ins: Vec<Vec<f32>> = (0..SUM_INPUTS).map(|f| vec![f as f32; 19]).collect();
        let refs: [&[f32]; SUM_INPUTS] = std::array::from_fn(|f| &ins[f][..]);
        for isa in Isa::all_supported() {
            let mut out = vec![0.0f32; 19];
            sum13(isa, &refs, &mut out);
            assert!(out.iter().all(|&x| x == 78.0), "{}", isa.name());
        }
    }
}
