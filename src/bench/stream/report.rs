//! What `himeno bench stream` reports: per kernel the best bandwidth and
//! the time statistics, per rank and aggregated, as a STREAM-style table,
//! JSON or CSV.

use super::arrays::Timing;
use super::kernels::Kernel;
use crate::output::csv_field;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Timing of one kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelResult {
    /// The kernel (`copy`, `scale`, `add`, `triad` or `sum13`).
    pub name: Kernel,
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
    /// The smallest share of a repetition's interval in which all of a
    /// rank's threads ran at once (1: they started and ended together);
    /// for the aggregate, the least over the ranks.
    #[serde(default)]
    pub threads_together: f64,
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
    pub bind: crate::machine::threads::Bind,
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
    /// Whether the arrays asked for huge pages (`--huge-pages`; absent in
    /// records written before the choice existed: they did).
    #[serde(default = "asked_huge_before")]
    pub huge_pages: bool,
    /// The instruction set the kernels were compiled for (`baseline`,
    /// `avx2` or `avx512`: the widest this CPU runs, as STREAM built with
    /// `-march=native` gets); absent in records written before the kernels
    /// were compiled per instruction set (their STREAM kernels were
    /// `baseline`).
    #[serde(default)]
    pub isa: Option<String>,
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

/// Best/avg/min/max of each kernel's `times` (this rank's with `local`,
/// else the slowest rank's), with `elements[0]` per STREAM array and
/// `elements[1]` per Sum13 array moved per repetition.
pub fn summarise(timings: &[Timing], local: bool, elements: [f64; 2]) -> Vec<KernelResult> {
    timings
        .iter()
        .map(|t| {
            let times = if local { &t.local } else { &t.slowest };
            let elements = if t.kernel == Kernel::Sum13 {
                elements[1]
            } else {
                elements[0]
            };
            let bytes = t.kernel.bytes_per_element();
            let min = times.iter().copied().fold(f64::INFINITY, f64::min);
            let max = times.iter().copied().fold(0.0, f64::max);
            let avg = times.iter().sum::<f64>() / times.len().max(1) as f64;
            KernelResult {
                name: t.kernel,
                bytes_per_element: bytes,
                best_gbytes_per_s: bytes * elements / min.max(crate::timing::RESOLUTION_S) / 1e9,
                avg_s: avg,
                min_s: min,
                max_s: max,
                threads_together: t.least_overlap(),
            }
        })
        .collect()
}

/// The best bandwidth of `kernel` among `results` (0 when it did not run).
pub fn best(results: &[KernelResult], kernel: Kernel) -> f64 {
    results
        .iter()
        .find(|r| r.name == kernel)
        .map_or(0.0, |r| r.best_gbytes_per_s)
}

/// What records written before `--huge-pages` existed used: huge pages.
fn asked_huge_before() -> bool {
    true
}

/// STREAM-style text table.
pub fn text(r: &StreamReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "STREAM (f64): {} rank(s) x {} thread(s), bind {}, {} elements per array and rank ({:.1} MiB; LLC {:.1} MiB; {}; kernels {}), {} timed repetitions",
        r.ranks,
        r.threads_per_rank,
        r.bind.name(),
        r.elements_per_rank,
        r.array_bytes as f64 / 1048576.0,
        r.llc_bytes as f64 / 1048576.0,
        if r.huge_pages {
            "huge pages asked for"
        } else {
            "pages as STREAM gets them"
        },
        r.isa.as_deref().unwrap_or("baseline"),
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
                k.name.name(),
                k.best_gbytes_per_s,
                k.avg_s,
                k.min_s,
                k.max_s
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
    let together = r
        .kernels
        .iter()
        .map(|k| k.threads_together)
        .fold(1.0, f64::min);
    let _ = writeln!(
        s,
        "timed as STREAM: each repetition from the threads' common release to the last one's end; all threads ran together for at least {:.0}% of every repetition",
        100.0 * together
    );
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

/// One CSV row per kernel and scope: each rank alone, then the aggregate
/// (`rank` empty).
pub fn csv(r: &StreamReport) -> String {
    let mut s = String::from(
        "rank,host,threads,bind,kernel,bytes_per_element,elements,best_gbytes_per_s,avg_s,min_s,max_s\n",
    );
    let mut rows = |rank: &str, host: &str, elements: [usize; 2], ks: &[KernelResult]| {
        for k in ks {
            let n = if k.name == Kernel::Sum13 {
                elements[1]
            } else {
                elements[0]
            };
            let _ = writeln!(
                s,
                "{rank},{},{},{},{},{},{n},{:.4},{:.6e},{:.6e},{:.6e}",
                csv_field(host),
                r.threads_per_rank,
                r.bind.name(),
                k.name.name(),
                k.bytes_per_element,
                k.best_gbytes_per_s,
                k.avg_s,
                k.min_s,
                k.max_s
            );
        }
    };
    for p in &r.per_rank {
        rows(
            &p.rank.to_string(),
            &p.host,
            [p.elements, p.sum13_elements],
            &p.kernels,
        );
    }
    let total = [
        r.per_rank.iter().map(|p| p.elements).sum(),
        r.per_rank.iter().map(|p| p.sum13_elements).sum(),
    ];
    rows("", "all", total, &r.kernels);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads that took turns over a repetition of 2 s, each moving
    /// its half in 1 s: the bandwidth is all bytes over the 2 s interval,
    /// not the sum of the two threads' own rates (which would double it),
    /// and the first repetition is not among the times.
    #[test]
    fn bandwidth_is_all_bytes_over_the_common_interval() {
        let t = Timing {
            kernel: Kernel::Triad,
            local: vec![2.0, 4.0],
            slowest: vec![2.0, 4.0],
            spans: vec![vec![[0.0, 1.0], [1.0, 2.0]], vec![[0.0, 4.0], [0.0, 4.0]]],
        };
        let r = &summarise(&[t], true, [1e9, 1.0])[0];
        assert_eq!(r.best_gbytes_per_s, 24.0 / 2.0);
        assert_eq!((r.min_s, r.avg_s, r.max_s), (2.0, 3.0, 4.0));
        assert_eq!(r.threads_together, 0.0);
    }
}
