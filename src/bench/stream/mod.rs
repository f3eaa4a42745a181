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
//! arithmetic: 13 `f32` arrays read and one written, 56 bytes per element.
//! It measures what the memory system gives to fourteen concurrent
//! streams, which can be less than it gives to Triad's three, so that a gap
//! between the solver and the triad can be split into the memory system's
//! share and the kernel's.
//!
//! - [`kernels`]: the five kernels;
//! - [`arrays`]: the arrays, their placement, timed rounds and validation;
//! - [`report`]: results, summaries and renderings.

pub mod arrays;
pub mod kernels;
pub mod report;

use crate::args::LaunchArgs;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::machine::cache::LastLevel;
use crate::machine::memory::{self, Footprint};
use crate::machine::threads::{self, Bind, Pool};
use crate::output::{self, Format};
use arrays::Arrays;
use clap::Args;
use kernels::{Kernel, SUM_ARRAYS};
use report::{RankStream, StreamReport};
use std::process::ExitCode;

/// Largest repetition count: the replayed values grow by 15x per
/// repetition and must stay finite.
const MAX_REPEATS: usize = 200;

/// Largest `--elements`: 8 TiB per array, beyond any node, and small
/// enough that every byte count derived from it fits in 64 bits.
const MAX_ELEMENTS: usize = 1 << 40;

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
    /// Ask for transparent huge pages for the arrays (`madvise`). Without
    /// it they get the pages a C program's static arrays get, as in
    /// McCalpin's STREAM: on a Xeon guest whose transparent huge pages
    /// were `madvise`, huge pages read a triad 1.12x STREAM's, and with
    /// them off both agreed to 0.3 %.
    #[arg(long)]
    pub huge_pages: bool,
    /// Repetitions of the five kernels (the first is not counted).
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// Runs `himeno bench stream`.
pub fn run(args: &StreamArgs, comm: &dyn Comm) -> Result<ExitCode> {
    let threads = crate::comm::agree(comm, validate(args, comm), |_| {
        vec![
            ("command", "bench stream".into()),
            ("repeats", args.repeats.to_string()),
            ("elements", format!("{:?}", args.elements)),
            ("binding", format!("{:?}", args.bind)),
            ("format", format!("{:?}", args.format)),
        ]
    })?;
    let llc = llc_bytes();
    let elements = args.elements.unwrap_or_else(|| default_elements(llc));
    let sum13_elements = sum13_elements(elements);
    crate::preflight::check_need(
        &format!("bench stream with {elements} elements per array"),
        Footprint::rank_thread()
            + arrays::footprint(elements, sum13_elements)
            + Footprint::threads(Pool::spawned(threads, args.bind)),
        comm,
    )?;
    let pool = Pool::new(threads, args.bind, [comm.node_rank(), comm.node_size()])?;
    let mut arrays = Arrays::first_touch(&pool, elements, sum13_elements, args.huge_pages)?;
    let timings = arrays.time(&pool, comm, args.repeats, &Kernel::ALL);
    let ok = arrays.valid(&pool, args.repeats);
    let all_ok = comm.max(if ok { 0.0 } else { 1.0 }) == 0.0;

    let mine = RankStream {
        rank: comm.rank(),
        host: comm.host(),
        placement: pool.describe(),
        elements,
        sum13_elements,
        kernels: report::summarise(&timings, true, [elements as f64, sum13_elements as f64]),
    };
    let mut total = [elements as f64, sum13_elements as f64];
    comm.sum(&mut total);
    let mut kernels = report::summarise(&timings, false, total);
    for k in &mut kernels {
        // The least over the ranks (every rank calls this, in one order).
        k.threads_together = -comm.max(-k.threads_together);
    }
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
        bind: args.bind,
        elements_per_rank: elements,
        sum13_elements_per_rank: sum13_elements,
        array_bytes: elements as u64 * 8,
        llc_bytes: llc,
        timed_repeats: args.repeats - 1,
        write_allocate_counted: false,
        huge_pages: args.huge_pages,
        isa: Some(crate::machine::isa::Isa::detect().name().into()),
        validated: true,
        triad_gbytes_per_s: report::best(&kernels, Kernel::Triad),
        sum13_gbytes_per_s: report::best(&kernels, Kernel::Sum13),
        kernels,
        per_rank,
    };
    output::print_report(&match args.format {
        Format::Text => report::text(&report),
        Format::Json => output::json(&report)?,
        Format::Csv => report::csv(&report),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// This rank's own check of the options; its thread count.
fn validate(args: &StreamArgs, comm: &dyn Comm) -> Result<usize> {
    crate::machine::cache::stated()?;
    if args.repeats < 2 || args.repeats > MAX_REPEATS {
        return Err(Error::usage(format!(
            "--repeats {} must be between 2 and {MAX_REPEATS} (the first is not timed)",
            args.repeats
        )));
    }
    match args.elements {
        Some(0) => return Err(Error::usage("--elements must be at least 1")),
        Some(n) if n > MAX_ELEMENTS => {
            return Err(Error::usage(format!(
                "--elements {n} is more than {MAX_ELEMENTS} (8 TiB per array): give fewer"
            )));
        }
        _ => {}
    }
    threads::for_rank(args.threads, comm.node_size())
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
/// concurrently; returns the aggregate bandwidths on every rank, or the
/// same error on every rank.
pub fn quick_stream(comm: &dyn Comm, threads: usize, bind: Bind) -> Result<QuickStream> {
    const REPEATS: usize = 5;
    let elements = quick_elements(comm.node_size());
    let sum_elements = sum13_elements(elements);
    let made = Pool::new(threads, bind, [comm.node_rank(), comm.node_size()]).and_then(|pool| {
        Ok((
            Arrays::first_touch(&pool, elements, sum_elements, false)?,
            pool,
        ))
    });
    // Decided together: a rank that could not set up (memory refused) must
    // not leave the others waiting in the timing's collectives, and the run
    // that asked for the measurement goes on without it on every rank.
    let mine = made.as_ref().err().cloned();
    crate::comm::decide(comm, "the quick stream", &mine, |all| {
        all.into_iter().flatten().next().map_or(Ok(()), Err)
    })?;
    let (mut arrays, pool) = made?;
    let timings = arrays.time(&pool, comm, REPEATS, &[Kernel::Triad, Kernel::Sum13]);
    let ok = arrays.triad_valid(&pool);
    if comm.max(if ok { 0.0 } else { 1.0 }) != 0.0 {
        return Err(Error::Verification(
            "the quick stream measurement's result is wrong".into(),
        ));
    }
    let mut total = [elements as f64, sum_elements as f64];
    comm.sum(&mut total);
    let k = report::summarise(&timings, false, total);
    let quick = QuickStream {
        triad: report::best(&k, Kernel::Triad),
        sum13: report::best(&k, Kernel::Sum13),
    };
    tracing::info!(?quick, "quick stream");
    Ok(quick)
}

/// The memory one of `node_ranks` ranks of a node allocates for
/// [`quick_stream`]: STREAM's three arrays and Sum13's fourteen.
pub fn quick_footprint(node_ranks: usize) -> Footprint {
    let elements = quick_elements(node_ranks);
    arrays::footprint(elements, sum13_elements(elements))
}

/// Fewest elements per array the quick stream takes when memory is short
/// (8 MiB of `f64`s).
const MIN_QUICK_ELEMENTS: u128 = 1 << 20;

/// Elements per STREAM array of the quick stream on one of `node_ranks`
/// ranks of a node: STREAM's rule ([`default_elements`]), but the arrays
/// of all the node's ranks together take at most a quarter of the memory
/// available now. The quick stream is a side measurement and must never be
/// why a run is refused: a virtual machine told of its host's whole cache
/// (a 2-vCPU guest saw a 480 MiB L3) sized 11 GiB per rank by the rule
/// alone, and two ranks of size M no longer fitted a 24 GiB node.
fn quick_elements(node_ranks: usize) -> usize {
    let rule = default_elements(llc_bytes());
    let Some((available, _)) = memory::available() else {
        return rule;
    };
    // Three f64 arrays and Sum13's f32 arrays of the same bytes.
    let per_element = 2 * 3 * 8;
    let cap = available / 4 / node_ranks.max(1) as u128 / per_element;
    let elements = (rule as u128).min(cap.max(MIN_QUICK_ELEMENTS)) as usize;
    if elements < rule {
        tracing::info!(
            elements,
            rule,
            "the quick stream's arrays are smaller than 4x the last-level cache, to fit memory"
        );
    }
    elements
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
    // In u128: 24 x a 64-bit count may not fit in 64 bits.
    ((3 * 8 * elements as u128 / (SUM_ARRAYS * 4) as u128) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum13_arrays_hold_streams_bytes() {
        // 14 f32 arrays of n13 elements against 3 f64 arrays of n.
        let n = 4 * (32 << 20) / 8;
        let n13 = sum13_elements(n);
        assert_eq!(n13, 3 * 8 * n / 56);
        assert!((14 * 4 * n13) as f64 / (3 * 8 * n) as f64 > 0.999);
        assert_eq!(sum13_elements(1), 1);
        // Both sets take whole pages, with at most a few more for the
        // staggering.
        let three = 3 * 8 * default_elements(llc_bytes()) as u128;
        let quick = arrays::footprint(
            default_elements(llc_bytes()),
            sum13_elements(default_elements(llc_bytes())),
        )
        .resident;
        assert!(
            quick >= 2 * three - 64 && quick <= 2 * three + 17 * (4 << 20),
            "{quick}"
        );
    }

    #[test]
    fn the_quick_stream_takes_at_most_a_quarter_of_the_memory_left() {
        let rule = default_elements(llc_bytes());
        for ranks in [1, 2, 64, 1 << 20] {
            let n = quick_elements(ranks);
            assert!(n <= rule && n as u128 >= MIN_QUICK_ELEMENTS.min(rule as u128));
            if n < rule && n as u128 > MIN_QUICK_ELEMENTS {
                let (available, _) = memory::available().expect("capped by a reading");
                let all = quick_footprint(ranks).resident * ranks as u128;
                // Whole pages and staggering on top of the quarter.
                assert!(
                    all <= available / 4 + ranks as u128 * 17 * (4 << 20),
                    "{ranks}"
                );
            }
        }
        assert!(quick_elements(1 << 20) <= quick_elements(1));
    }
}
