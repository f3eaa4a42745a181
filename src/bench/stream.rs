//! `himeno bench stream`: McCalpin's STREAM kernels (Copy, Scale, Add,
//! Triad over `f64` arrays far larger than the last-level cache), run with
//! the solver's own worker pool, pinning and first-touch placement, so that
//! the solver's effective bandwidth can be compared with the machine's
//! streaming bandwidth.
//!
//! Bytes are counted as STREAM counts them: 16 per element for Copy and
//! Scale, 24 for Add and Triad. Write-allocate traffic (reading a line
//! before it is written) is NOT counted, as in STREAM; the solver's 56
//! bytes per point leave it out too. The first repetition is dropped. Under
//! MPI every repetition starts after a barrier, so the ranks run
//! concurrently; the aggregate rate is all ranks' bytes over the slowest
//! rank's time.
//!
//! A fifth kernel, Sum13, moves the solver's traffic with none of its
//! arithmetic: 13 `f32` arrays read and one written, 56 bytes per element
//! ([`kernel::sum_streams`]). It measures what the memory system gives to
//! fourteen concurrent streams, which can be less than it gives to Triad's
//! three, so that a gap between the solver and the triad can be split into
//! the memory system's share and the kernel's.

use crate::backend::cache::LastLevel;
use crate::backend::huge::HugeBuffer;
use crate::backend::kernel::{self, Isa, SUM_INPUTS};
use crate::backend::threads::Pool;
use crate::comm::Comm;
use crate::config::{Bind, Format};
use crate::error::{Error, Result};
use crate::grid::decomp::split;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use std::time::Instant;

/// The scalar of Scale and Triad, as in STREAM.
const SCALAR: f64 = 3.0;
/// Largest repetition count: the replayed values grow by 15x per
/// repetition and must stay finite.
const MAX_REPEATS: usize = 200;

/// Options of `himeno bench stream`.
#[derive(Debug, Args, Clone)]
pub struct StreamArgs {
    /// Worker threads per rank; default: the cores this rank may use.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Thread placement: none or cores (as for the solver).
    #[arg(long, value_enum, default_value_t = Bind::None)]
    pub bind: Bind,
    /// Elements (f64) per array and rank; default: 4x the last-level cache
    /// per array, STREAM's rule.
    #[arg(long)]
    pub elements: Option<usize>,
    /// Repetitions of the five kernels (the first is not counted).
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Output format: text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// One kernel: name and bytes counted per element.
const KERNELS: [(&str, f64); 5] = [
    ("copy", 16.0),
    ("scale", 16.0),
    ("add", 24.0),
    ("triad", 24.0),
    (SUM13, 56.0),
];
/// The kernel with the solver's traffic.
const SUM13: &str = "sum13";
/// Distance in bytes between the starts (modulo 4 KiB) of consecutive
/// arrays, as between the solver's fields: identically aligned streams
/// would compete for the same L1 sets.
const STAGGER_BYTES: usize = 256;
/// Arrays of Sum13: 13 inputs and the output.
const SUM_ARRAYS: usize = SUM_INPUTS + 1;

/// Timing of one kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelResult {
    /// `copy`, `scale`, `add`, `triad` or `sum13`.
    pub name: String,
    /// Bytes counted per element.
    pub bytes_per_element: f64,
    /// Bandwidth of the fastest repetition, GB/s (1e9 bytes).
    pub best_gbytes_per_s: f64,
    /// Mean seconds per repetition.
    pub avg_s: f64,
    /// Fastest repetition, seconds.
    pub min_s: f64,
    /// Slowest repetition, seconds.
    pub max_s: f64,
}

/// One rank's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankStream {
    /// Rank number.
    pub rank: usize,
    /// Host name.
    pub host: String,
    /// Where the rank's threads ran.
    pub placement: String,
    /// Elements per array on this rank.
    pub elements: usize,
    /// Elements per Sum13 array on this rank.
    pub sum13_elements: usize,
    /// Per-kernel timings of this rank alone.
    pub kernels: Vec<KernelResult>,
}

/// The report of `himeno bench stream`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamReport {
    /// Always `stream`.
    pub benchmark: String,
    /// Number of ranks run concurrently.
    pub ranks: usize,
    /// Worker threads per rank.
    pub threads_per_rank: usize,
    /// Thread binding policy.
    pub bind: String,
    /// Elements (f64) per array and rank.
    pub elements_per_rank: usize,
    /// Elements (f32) per Sum13 array and rank: the 14 arrays hold as many
    /// bytes as STREAM's three.
    pub sum13_elements_per_rank: usize,
    /// Bytes of one array on one rank.
    pub array_bytes: u64,
    /// Last-level cache size the default was sized from.
    pub llc_bytes: u64,
    /// Repetitions timed (the first of `repeats` is dropped).
    pub timed_repeats: usize,
    /// Whether write-allocate traffic is counted (never, as in STREAM).
    pub write_allocate_counted: bool,
    /// Every kernel's result matched the replayed values.
    pub validated: bool,
    /// Aggregate over ranks: all ranks' bytes over the slowest rank's time
    /// per repetition.
    pub kernels: Vec<KernelResult>,
    /// Aggregate triad bandwidth, GB/s.
    pub triad_gbytes_per_s: f64,
    /// Aggregate Sum13 bandwidth (the solver's 56 bytes per point), GB/s.
    pub sum13_gbytes_per_s: f64,
    /// Each rank alone.
    pub per_rank: Vec<RankStream>,
}

/// Runs `himeno bench stream`.
pub fn run(args: &StreamArgs, comm: &dyn Comm) -> Result<ExitCode> {
    if args.repeats < 2 || args.repeats > MAX_REPEATS {
        return Err(Error::usage(format!(
            "--repeats {} must be between 2 and {MAX_REPEATS} (the first is not timed)",
            args.repeats
        )));
    }
    if args.elements == Some(0) {
        return Err(Error::usage("--elements must be at least 1"));
    }
    if matches!(args.format, Format::Csv) {
        return Err(Error::usage(
            "bench stream prints text or json: use --format text or --format json",
        ));
    }
    let threads = crate::backend::threads::for_rank(args.threads, comm)?;
    let llc = llc_bytes();
    let elements = args.elements.unwrap_or_else(|| default_elements(llc));
    let sum13_elements = sum13_elements(elements);
    let pool = Pool::new(threads, args.bind)?;
    let mut arrays = Arrays::first_touch(&pool, elements, sum13_elements);
    let times = arrays.time_all(&pool, comm, args.repeats, &KERNELS.map(|k| k.0))?;
    let ok = arrays.validate(&pool, args.repeats);
    let all_ok = comm.max(if ok { 0.0 } else { 1.0 }) == 0.0;

    let mine = RankStream {
        rank: comm.rank(),
        host: comm.host(),
        placement: pool.describe(),
        elements,
        sum13_elements,
        kernels: summarise(&times.local, [elements as f64, sum13_elements as f64]),
    };
    let mut total = [elements as f64, sum13_elements as f64];
    comm.sum(&mut total);
    let kernels = summarise(&times.slowest, total);
    let bytes = serde_json::to_vec(&mine)
        .map_err(|e| Error::runtime(format!("cannot encode the rank result: {e}")))?;
    let gathered = comm.gather(&bytes);
    if !all_ok {
        return Err(Error::Verification(
            "a STREAM kernel's result differs from the replayed values".into(),
        ));
    }
    let Some(all) = gathered else {
        return Ok(ExitCode::SUCCESS);
    };
    let per_rank = all
        .iter()
        .map(|b| serde_json::from_slice(b))
        .collect::<std::result::Result<Vec<RankStream>, _>>()
        .map_err(|e| Error::runtime(format!("bad rank result: {e}")))?;
    let report = StreamReport {
        benchmark: "stream".into(),
        ranks: comm.size(),
        threads_per_rank: pool.threads(),
        bind: format!("{:?}", args.bind).to_lowercase(),
        elements_per_rank: elements,
        sum13_elements_per_rank: sum13_elements,
        array_bytes: (elements * 8) as u64,
        llc_bytes: llc,
        timed_repeats: args.repeats - 1,
        write_allocate_counted: false,
        validated: true,
        triad_gbytes_per_s: kernels[3].best_gbytes_per_s,
        sum13_gbytes_per_s: kernels[4].best_gbytes_per_s,
        kernels,
        per_rank,
    };
    let text = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&report)
                .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?;
            s.push('\n');
            s
        }
        _ => render(&report),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// Aggregate bandwidths of a quick stream measurement, GB/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuickStream {
    /// STREAM triad.
    pub triad: f64,
    /// Sum13, the solver's traffic as 14 plain streams.
    pub sum13: f64,
}

/// A quick triad and Sum13 measurement for the solver's report (a fraction
/// of a second): the default array sizes, 5 repetitions, all ranks
/// concurrently; returns the aggregate bandwidths on every rank.
pub fn quick_stream(comm: &dyn Comm, threads: usize, bind: Bind) -> Result<QuickStream> {
    const REPEATS: usize = 5;
    let elements = default_elements(llc_bytes());
    let sum_elements = sum13_elements(elements);
    let pool = Pool::new(threads, bind)?;
    let mut arrays = Arrays::first_touch(&pool, elements, sum_elements);
    let times = arrays.time_all(&pool, comm, REPEATS, &["triad", SUM13])?;
    // Triad alone from a=1, b=2, c=0 leaves a = b + 3*0 = 2 everywhere.
    let triad_ok = pool
        .scatter(arrays.split(&pool), |_, (a, _, _)| {
            a.iter().all(|&x| x == 2.0)
        })
        .into_iter()
        .all(|x| x);
    let ok = triad_ok && arrays.sum13_valid(&pool);
    if comm.max(if ok { 0.0 } else { 1.0 }) != 0.0 {
        return Err(Error::Verification(
            "the quick stream measurement's result is wrong".into(),
        ));
    }
    let mut total = [elements as f64, sum_elements as f64];
    comm.sum(&mut total);
    let k = summarise(&times.slowest, total);
    let quick = QuickStream {
        triad: k[0].best_gbytes_per_s,
        sum13: k[1].best_gbytes_per_s,
    };
    tracing::info!(?quick, "quick stream");
    Ok(quick)
}

/// Bytes one rank allocates for [`quick_stream`]: STREAM's three arrays
/// and Sum13's fourteen.
pub fn quick_bytes() -> u128 {
    let n = default_elements(llc_bytes());
    (3 * 8 * n + SUM_ARRAYS * 4 * sum13_elements(n)) as u128
}

/// Bytes of one last-level cache instance: each rank sizes its arrays from
/// it, so a node's ranks together stay far beyond the caches they share
/// without one rank alone taking a whole node's worth.
fn llc_bytes() -> u64 {
    LastLevel::detect().instance_bytes as u64
}

/// Elements per array: 4x the last-level cache in `f64`s.
fn default_elements(llc: u64) -> usize {
    (4 * llc / 8) as usize
}

/// Elements per Sum13 array for `elements` per STREAM array: the 14 `f32`
/// arrays take the bytes of STREAM's three `f64` ones, so both sets are
/// as far beyond the caches.
fn sum13_elements(elements: usize) -> usize {
    (3 * 8 * elements / (SUM_ARRAYS * 4)).max(1)
}

/// Per-repetition times of each kernel: this rank's and the slowest
/// rank's.
struct Times {
    local: Vec<(String, f64, Vec<f64>)>,
    slowest: Vec<(String, f64, Vec<f64>)>,
}

/// The three arrays of one rank, each split into the threads' parts, and
/// Sum13's fourteen (inputs, then output; none for a triad alone).
struct Arrays {
    a: HugeBuffer<f64>,
    b: HugeBuffer<f64>,
    c: HugeBuffer<f64>,
    sum: Vec<HugeBuffer<f32>>,
}

/// One thread's parts of `a`, `b`, `c`.
type Parts<'a> = (&'a mut [f64], &'a mut [f64], &'a mut [f64]);

impl Arrays {
    /// Allocates the arrays without touching them and lets each thread
    /// write its own part first (so its pages live on that thread's node),
    /// with STREAM's initial values a = 1, b = 2, c = 0, and Sum13's input
    /// `f` filled with `f` (small integers: every sum is exact).
    fn first_touch(pool: &Pool, n: usize, sum_n: usize) -> Arrays {
        let sum_arrays = if sum_n == 0 { 0 } else { SUM_ARRAYS };
        let mut arr = Arrays {
            a: HugeBuffer::zeroed(n, 0),
            b: HugeBuffer::zeroed(n, STAGGER_BYTES),
            c: HugeBuffer::zeroed(n, 2 * STAGGER_BYTES),
            sum: (0..sum_arrays)
                .map(|k| HugeBuffer::zeroed(sum_n, k * STAGGER_BYTES))
                .collect(),
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
        arr
    }

    /// Whether every Sum13 output element is 0 + 1 + ... + 12 (true when
    /// there are no Sum13 arrays).
    fn sum13_valid(&mut self, pool: &Pool) -> bool {
        pool.scatter(self.split_sum(pool), |_, parts| {
            let want = (0..SUM_INPUTS).map(|f| f as f32).sum::<f32>();
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

    /// The static partition of the arrays over the pool's threads: the same
    /// parts every call.
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

    /// Runs `repeats` rounds of the named kernels, each after a barrier, and
    /// returns the counted times (the first round dropped).
    fn time_all(
        &mut self,
        pool: &Pool,
        comm: &dyn Comm,
        repeats: usize,
        names: &[&str],
    ) -> Result<Times> {
        let mut local: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        let mut slowest: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for rep in 0..repeats {
            for (n, name) in names.iter().enumerate() {
                let kernel = if *name == SUM13 {
                    None
                } else {
                    Some(kernel_fn(name)?)
                };
                comm.barrier();
                let t0 = Instant::now();
                match kernel {
                    Some(kernel) => {
                        pool.scatter(self.split(pool), |_, parts| kernel(parts));
                    }
                    None => {
                        let isa = Isa::detect();
                        pool.scatter(self.split_sum(pool), |_, parts| sum13(isa, parts));
                    }
                }
                let dt = t0.elapsed().as_secs_f64();
                let worst = comm.max(dt);
                if rep > 0 {
                    local[n].push(dt);
                    slowest[n].push(worst);
                }
            }
        }
        let label = |v: Vec<Vec<f64>>| {
            names
                .iter()
                .zip(v)
                .map(|(name, t)| (name.to_string(), bytes_of(name), t))
                .collect()
        };
        Ok(Times {
            local: label(local),
            slowest: label(slowest),
        })
    }

    /// Checks every element against STREAM's values replayed in scalars
    /// after `repeats` rounds of all four STREAM kernels, and Sum13's output
    /// against 0 + 1 + ... + 12. All elements go through the same
    /// operations, so the comparisons are exact.
    fn validate(&mut self, pool: &Pool, repeats: usize) -> bool {
        let sum_ok = self.sum13_valid(pool);
        let (mut a, mut b, mut c) = (1.0f64, 2.0f64, 0.0f64);
        for _ in 0..repeats {
            c = a;
            b = SCALAR * c;
            c = a + b;
            a = b + SCALAR * c;
        }
        let want = (a, b, c);
        sum_ok
            && pool
                .scatter(self.split(pool), |_, (a, b, c)| {
                    a.iter().all(|&x| x == want.0)
                        && b.iter().all(|&x| x == want.1)
                        && c.iter().all(|&x| x == want.2)
                })
                .into_iter()
                .all(|ok| ok)
    }
}

/// The kernel body of `name` over one thread's parts.
fn kernel_fn(name: &str) -> Result<fn(Parts<'_>)> {
    Ok(match name {
        "copy" => |(a, _, c)| c.copy_from_slice(a),
        "scale" => |(_, b, c)| {
            for (b, c) in b.iter_mut().zip(c.iter()) {
                *b = SCALAR * c;
            }
        },
        "add" => |(a, b, c)| {
            for ((c, a), b) in c.iter_mut().zip(a.iter()).zip(b.iter()) {
                *c = a + b;
            }
        },
        "triad" => |(a, b, c)| {
            for ((a, b), c) in a.iter_mut().zip(b.iter()).zip(c.iter()) {
                *a = b + SCALAR * c;
            }
        },
        other => return Err(Error::runtime(format!("no stream kernel {other}"))),
    })
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

/// Sum13 over one thread's parts: the 13 inputs, then the output.
fn sum13(isa: Isa, mut parts: Vec<&mut [f32]>) {
    let out = parts.pop().expect("Sum13 has an output array");
    let ins: [&[f32]; SUM_INPUTS] = std::array::from_fn(|f| &*parts[f]);
    kernel::sum_streams(isa, &ins, out);
}

/// Bytes counted per element of kernel `name`.
fn bytes_of(name: &str) -> f64 {
    KERNELS.iter().find(|k| k.0 == name).map_or(0.0, |k| k.1)
}

/// Best/avg/min/max of each kernel's times, with `elements[0]` per STREAM
/// array and `elements[1]` per Sum13 array moved per repetition.
fn summarise(times: &[(String, f64, Vec<f64>)], elements: [f64; 2]) -> Vec<KernelResult> {
    times
        .iter()
        .map(|(name, bytes, t)| {
            let elements = if name == SUM13 {
                elements[1]
            } else {
                elements[0]
            };
            let min = t.iter().copied().fold(f64::INFINITY, f64::min);
            let max = t.iter().copied().fold(0.0, f64::max);
            let avg = t.iter().sum::<f64>() / t.len().max(1) as f64;
            KernelResult {
                name: name.clone(),
                bytes_per_element: *bytes,
                best_gbytes_per_s: bytes * elements / min.max(f64::MIN_POSITIVE) / 1e9,
                avg_s: avg,
                min_s: min,
                max_s: max,
            }
        })
        .collect()
}

/// STREAM-style text table.
fn render(r: &StreamReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "STREAM (f64): {} rank(s) x {} thread(s), bind {}, {} elements per array and rank ({:.1} MiB; LLC {:.1} MiB), {} timed repetitions",
        r.ranks,
        r.threads_per_rank,
        r.bind,
        r.elements_per_rank,
        r.array_bytes as f64 / 1048576.0,
        r.llc_bytes as f64 / 1048576.0,
        r.timed_repeats
    );
    let _ = writeln!(
        s,
        "bytes counted as STREAM does (copy/scale 16, add/triad 24 per element; write-allocate not counted)"
    );
    let _ = writeln!(
        s,
        "sum13: the solver's traffic without its arithmetic, 13 f32 arrays read and 1 written (56 bytes per element), {} elements per array and rank",
        r.sum13_elements_per_rank
    );
    let table = |s: &mut String, title: &str, ks: &[KernelResult]| {
        let _ = writeln!(s, "{title}");
        let _ = writeln!(
            s,
            "  {:<8}{:>14}{:>12}{:>12}{:>12}",
            "Function", "Best GB/s", "Avg time", "Min time", "Max time"
        );
        for k in ks {
            let _ = writeln!(
                s,
                "  {:<8}{:>14.2}{:>12.6}{:>12.6}{:>12.6}",
                k.name, k.best_gbytes_per_s, k.avg_s, k.min_s, k.max_s
            );
        }
    };
    if r.ranks > 1 {
        for rank in &r.per_rank {
            table(
                &mut s,
                &format!("rank {} on {} ({})", rank.rank, rank.host, rank.placement),
                &rank.kernels,
            );
        }
        table(
            &mut s,
            "aggregate (all ranks concurrently; slowest rank's time)",
            &r.kernels,
        );
    } else {
        table(&mut s, &r.per_rank[0].placement, &r.kernels);
    }
    let _ = writeln!(
        s,
        "Solution Validates: every element matches the replayed values"
    );
    let _ = writeln!(s, "stream triad: {:.2} GB/s", r.triad_gbytes_per_s);
    let _ = writeln!(
        s,
        "sum13: {:.2} GB/s ({:.1}% of triad)",
        r.sum13_gbytes_per_s,
        100.0 * r.sum13_gbytes_per_s / r.triad_gbytes_per_s.max(f64::MIN_POSITIVE)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleComm;

    #[test]
    fn kernels_validate_and_a_broken_one_fails() {
        let pool = Pool::new(3, Bind::None).unwrap();
        let comm = SingleComm;
        let mut arr = Arrays::first_touch(&pool, 1001, 517);
        arr.time_all(&pool, &comm, 4, &KERNELS.map(|k| k.0))
            .unwrap();
        assert!(arr.validate(&pool, 4));
        // One more round than replayed, or a corrupted element, must fail.
        assert!(!arr.validate(&pool, 5));
        arr.sum[SUM_INPUTS][516] += 1.0;
        assert!(!arr.validate(&pool, 4));
        arr.sum[SUM_INPUTS][516] -= 1.0;
        assert!(arr.validate(&pool, 4));
        arr.c[1000] += 1.0;
        assert!(!arr.validate(&pool, 4));
    }

    #[test]
    fn sum13_arrays_hold_streams_bytes() {
        // 14 f32 arrays of n13 elements against 3 f64 arrays of n.
        let n = 4 * (32 << 20) / 8;
        let n13 = sum13_elements(n);
        assert_eq!(n13, 3 * 8 * n / 56);
        assert!((14 * 4 * n13) as f64 / (3 * 8 * n) as f64 > 0.999);
        assert_eq!(sum13_elements(1), 1);
        let three = 3 * 8 * default_elements(llc_bytes()) as u128;
        assert!(quick_bytes() <= 2 * three && quick_bytes() > 2 * three - 64);
    }
}
