//! The arrays of `himeno bench stream`, placed by first touch of the thread
//! that uses each part, and the timed rounds over them.
//!
//! Every array is split statically over the pool's threads (the same part
//! for the same thread every call), so each thread reads and writes only
//! the pages it first touched. Under MPI every round of a kernel starts
//! after a barrier, so the ranks run concurrently.
//!
//! A repetition is timed as STREAM times it: one wall clock read before
//! the threads are released (the job posted to all of them at once, as an
//! OpenMP parallel loop forks) and one after the last has ended, so the
//! bytes of all threads are divided by one interval that spans every
//! thread's work. Each thread's own start and end are recorded too, so
//! that the report can say how much of that interval the threads ran
//! together, and a test can check the interval spans them all.

use super::kernels::{self, Kernel, Parts, SUM_ARRAYS, SUM_INPUTS};
use crate::comm::Comm;
use crate::error::Result;
use crate::grid::decomp::split;
use crate::machine::huge::HugeBuffer;
use crate::machine::isa::Isa;
use crate::machine::memory::Footprint;
use crate::machine::threads::Pool;
use std::time::Instant;

/// Distance in bytes between the starts (modulo 4 KiB) of consecutive
/// arrays, as between the solver's fields: identically aligned streams
/// would compete for the same L1 sets.
const STAGGER_BYTES: usize = 256;

/// The counted times of one kernel, one per round after the first.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// The kernel.
    pub kernel: Kernel,
    /// This rank's seconds per round: from the release of its threads to
    /// the end of the last of them.
    pub local: Vec<f64>,
    /// The slowest rank's seconds per round.
    pub slowest: Vec<f64>,
    /// Per round, each thread's `[start, end]` in seconds after the
    /// release (the clock read that starts `local`).
    pub spans: Vec<Vec<[f64; 2]>>,
}

impl Timing {
    /// Whether every round's interval spans each of its threads' work:
    /// no thread started before the clock did or ended after it stopped.
    pub fn spans_every_thread(&self) -> bool {
        self.local.len() == self.spans.len()
            && self.local.iter().zip(&self.spans).all(|(&wall, threads)| {
                threads
                    .iter()
                    .all(|&[s, e]| 0.0 <= s && s <= e && e <= wall)
            })
    }

    /// The smallest share, over the counted rounds, of a round's interval
    /// in which all its threads ran at once (from the last start to the
    /// first end): 1 when they started and ended together, near 0 when
    /// they took turns (their bandwidths then do not add up, and the
    /// interval says so).
    pub fn least_overlap(&self) -> f64 {
        self.local
            .iter()
            .zip(&self.spans)
            .map(|(&wall, threads)| {
                let last_start = threads.iter().map(|t| t[0]).fold(0.0, f64::max);
                let first_end = threads.iter().map(|t| t[1]).fold(f64::INFINITY, f64::min);
                ((first_end - last_start) / wall.max(crate::timing::RESOLUTION_S)).clamp(0.0, 1.0)
            })
            .fold(1.0, f64::min)
    }
}

/// STREAM's three arrays of one rank and Sum13's fourteen (inputs, then
/// output).
pub struct Arrays {
    a: HugeBuffer<f64>,
    b: HugeBuffer<f64>,
    c: HugeBuffer<f64>,
    sum: Vec<HugeBuffer<f32>>,
}

/// The memory [`Arrays::first_touch`]`(_, n, sum_n)` allocates: each
/// array as its [`HugeBuffer`] states it.
pub fn footprint(n: usize, sum_n: usize) -> Footprint {
    (0..3)
        .map(|k| HugeBuffer::<f64>::footprint(n, k * STAGGER_BYTES))
        .chain((0..SUM_ARRAYS).map(|k| HugeBuffer::<f32>::footprint(sum_n, k * STAGGER_BYTES)))
        .sum()
}

impl Arrays {
    /// Allocates `n` elements per STREAM array and `sum_n` per Sum13
    /// array (an error when the memory is refused), on huge pages only
    /// when `huge` asks for them (see [`super::StreamArgs::huge_pages`]),
    /// without touching them, then lets each thread write its own
    /// part first (so its pages live on that thread's node), with STREAM's
    /// initial values a = 1, b = 2, c = 0, and Sum13's input `f` filled
    /// with `f` (small integers: every sum is exact).
    pub fn first_touch(pool: &Pool, n: usize, sum_n: usize, huge: bool) -> Result<Arrays> {
        let array =
            |what: &str, k: usize| HugeBuffer::zeroed_advised(n, k * STAGGER_BYTES, what, huge);
        let mut arr = Arrays {
            a: array("stream array a", 0)?,
            b: array("stream array b", 1)?,
            c: array("stream array c", 2)?,
            sum: (0..SUM_ARRAYS)
                .map(|k| {
                    HugeBuffer::zeroed_advised(sum_n, k * STAGGER_BYTES, "a sum13 array", huge)
                })
                .collect::<Result<_>>()?,
        };
        pool.scatter(arr.split(pool), |_, (a, b, c)| {
            a.fill(1.0);
            b.fill(2.0);
            c.fill(0.0);
        });
        pool.scatter(arr.split_sum(pool), |_, parts| {
            for (f, part) in parts.into_iter().enumerate() {
                part.fill(f as f32);
            }
        });
        Ok(arr)
    }

    /// Runs `repeats` rounds of `kernels`, each kernel after a barrier,
    /// and returns the counted times (the first round dropped).
    pub fn time(
        &mut self,
        pool: &Pool,
        comm: &dyn Comm,
        repeats: usize,
        kernels: &[Kernel],
    ) -> Vec<Timing> {
        let isa = Isa::detect();
        let mut out: Vec<Timing> = kernels
            .iter()
            .map(|&kernel| Timing {
                kernel,
                local: Vec::new(),
                slowest: Vec::new(),
                spans: Vec::new(),
            })
            .collect();
        for round in 0..repeats {
            for t in &mut out {
                comm.barrier();
                let t0 = Instant::now();
                let spans = match t.kernel {
                    Kernel::Sum13 => pool.scatter(self.split_sum(pool), |_, mut parts| {
                        span(t0, || {
                            let out = parts.pop().expect("Sum13 has an output array");
                            let ins: [&[f32]; SUM_INPUTS] = std::array::from_fn(|f| &*parts[f]);
                            kernels::sum13(isa, &ins, out);
                        })
                    }),
                    k => pool.scatter(self.split(pool), |_, parts| {
                        span(t0, || kernels::stream(isa, parts, k))
                    }),
                };
                let dt = t0.elapsed().as_secs_f64();
                let worst = comm.max(dt);
                if round > 0 {
                    t.local.push(dt);
                    t.slowest.push(worst);
                    t.spans.push(spans);
                }
            }
        }
        out
    }

    /// Whether every STREAM element holds the values of
    /// [`kernels::replay`] after `repeats` rounds of the four kernels, and
    /// every Sum13 output element 0 + 1 + ... + 12.
    pub fn valid(&mut self, pool: &Pool, repeats: usize) -> bool {
        let want = kernels::replay(repeats);
        self.sum13_valid(pool) && self.stream_valid(pool, want)
    }

    /// Whether, after Triad alone from the initial values, `a` holds
    /// b + 3*0 = 2 everywhere, and Sum13 is right.
    pub fn triad_valid(&mut self, pool: &Pool) -> bool {
        self.sum13_valid(pool) && self.stream_valid(pool, (2.0, 2.0, 0.0))
    }

    /// Whether every element of `a`, `b`, `c` equals `want`.
    fn stream_valid(&mut self, pool: &Pool, want: (f64, f64, f64)) -> bool {
        pool.scatter(self.split(pool), |_, (a, b, c)| {
            a.iter().all(|&x| x == want.0)
                && b.iter().all(|&x| x == want.1)
                && c.iter().all(|&x| x == want.2)
        })
        .into_iter()
        .all(|ok| ok)
    }

    /// Whether every Sum13 output element is 0 + 1 + ... + 12.
    fn sum13_valid(&mut self, pool: &Pool) -> bool {
        let want = (0..SUM_INPUTS).map(|f| f as f32).sum::<f32>();
        pool.scatter(self.split_sum(pool), |_, parts| {
            parts
                .last()
                .is_none_or(|out| out.iter().all(|&x| x == want))
        })
        .into_iter()
        .all(|ok| ok)
    }

    /// The static partition of Sum13's arrays over the pool's threads: for
    /// each thread, its part of every array.
    fn split_sum(&mut self, pool: &Pool) -> Vec<Vec<&mut [f32]>> {
        partition(
            self.sum.iter_mut().map(|v| &mut v[..]).collect(),
            pool.threads(),
        )
    }

    /// The static partition of STREAM's arrays over the pool's threads.
    fn split(&mut self, pool: &Pool) -> Vec<Parts<'_>> {
        let arrays = vec![&mut self.a[..], &mut self.b[..], &mut self.c[..]];
        partition(arrays, pool.threads())
            .into_iter()
            .map(|parts| {
                let [a, b, c]: [&mut [f64]; 3] = parts.try_into().expect("three arrays");
                (a, b, c)
            })
            .collect()
    }

    /// Changes one element of `c` or of Sum13's output (for tests of the
    /// validation).
    #[cfg(test)]
    fn nudge(&mut self, sum13: bool, by: f64) {
        if sum13 {
            let out = self.sum.last_mut().expect("Sum13 output");
            let last = out.len() - 1;
            out[last] += by as f32;
        } else {
            let last = self.c.len() - 1;
            self.c[last] += by;
        }
    }
}

/// Runs one thread's `work` and returns its `[start, end]`, read on that
/// thread, in seconds after `t0`.
fn span(t0: Instant, work: impl FnOnce()) -> [f64; 2] {
    let start = t0.elapsed().as_secs_f64();
    work();
    [start, t0.elapsed().as_secs_f64()]
}

/// The static partition of equally long `arrays` over `threads` threads:
/// for each thread, its part of every array, the same parts every call.
fn partition<T>(arrays: Vec<&mut [T]>, threads: usize) -> Vec<Vec<&mut [T]>> {
    let n = arrays.first().map_or(0, |a| a.len());
    let mut rest = arrays;
    (0..threads)
        .map(|t| {
            let len = split(n, threads, t).1;
            rest.iter_mut()
                .map(|r| {
                    let (head, tail) = std::mem::take(r).split_at_mut(len);
                    *r = tail;
                    head
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleComm;
    use crate::machine::threads::Bind;

    #[test]
    fn kernels_validate_and_a_broken_one_fails() {
        let pool = Pool::new(3, Bind::None, [0, 1]).unwrap();
        let mut arr = Arrays::first_touch(&pool, 1001, 517, false).unwrap();
        let times = arr.time(&pool, &SingleComm, 4, &Kernel::ALL);
        assert!(
            times
                .iter()
                .all(|t| t.local.len() == 3 && t.slowest.len() == 3)
        );
        assert!(arr.valid(&pool, 4));
        // One more round than replayed, or a corrupted element, must fail.
        assert!(!arr.valid(&pool, 5));
        for sum13 in [true, false] {
            arr.nudge(sum13, 1.0);
            assert!(!arr.valid(&pool, 4));
            arr.nudge(sum13, -1.0);
            assert!(arr.valid(&pool, 4));
        }
    }

    /// The measured interval of every repetition spans each thread's own
    /// start and end, read on the thread: the bytes of all threads are
    /// divided by one interval in which they all ran, never by a thread's
    /// own time (with which threads that take turns would add up to more
    /// than the memory gives).
    #[test]
    fn each_repetition_spans_every_threads_work() {
        let pool = Pool::new(3, Bind::None, [0, 1]).unwrap();
        let mut arr = Arrays::first_touch(&pool, 30011, 4099, false).unwrap();
        for t in arr.time(&pool, &SingleComm, 4, &Kernel::ALL) {
            assert_eq!(t.spans.len(), 3, "{:?}", t.kernel);
            assert!(t.spans.iter().all(|s| s.len() == 3), "{:?}", t.kernel);
            assert!(t.spans_every_thread(), "{t:?}");
            let overlap = t.least_overlap();
            assert!((0.0..=1.0).contains(&overlap), "{overlap}");
        }
    }

    #[test]
    fn overlap_tells_threads_that_ran_together_from_threads_that_took_turns() {
        let timing = |spans: Vec<[f64; 2]>, wall: f64| Timing {
            kernel: Kernel::Triad,
            local: vec![wall],
            slowest: vec![wall],
            spans: vec![spans],
        };
        let together = timing(vec![[0.0, 1.0], [0.0, 1.0]], 1.0);
        assert_eq!(together.least_overlap(), 1.0);
        assert!(together.spans_every_thread());
        let turns = timing(vec![[0.0, 1.0], [1.0, 2.0]], 2.0);
        assert_eq!(turns.least_overlap(), 0.0);
        assert!(turns.spans_every_thread());
        let half = timing(vec![[0.0, 1.0], [0.5, 1.5]], 2.0);
        assert_eq!(half.least_overlap(), 0.25);
        // A thread's own time longer than the interval: not spanned.
        assert!(!timing(vec![[0.0, 1.0], [0.5, 2.5]], 2.0).spans_every_thread());
        assert!(!timing(vec![[-0.1, 1.0]], 2.0).spans_every_thread());
    }

    #[test]
    fn triad_alone_is_validated() {
        let pool = Pool::new(2, Bind::None, [0, 1]).unwrap();
        let mut arr = Arrays::first_touch(&pool, 999, 33, false).unwrap();
        arr.time(&pool, &SingleComm, 2, &[Kernel::Triad, Kernel::Sum13]);
        assert!(arr.triad_valid(&pool));
        assert!(!arr.valid(&pool, 1));
    }
}
