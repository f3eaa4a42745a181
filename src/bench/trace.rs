//! `himeno bench trace`: what recording one timeline event costs, for the
//! bound on `--trace`'s overhead (notes/trace.md). A tight loop of the
//! solver's own phase lap (`timeline::lap`: the clock read, the phase
//! table's sum and, with a recorder, the event) is timed without a
//! recorder, with one keeping every event (runs of up to twice
//! `--trace-keep` iterations; a fresh one every million laps, so that the
//! memory stays bounded) and with one whose ring drops an event for
//! every one it keeps (longer runs); the differences are the recording's
//! cost. The modes take turns and the fastest of the repeats counts (a
//! shared machine only ever slows a loop down).

use crate::error::{Error, Result};
use crate::timeline::{self, Bound, Part, Recorder};
use crate::timing::{Lap, Phase, PhaseTimes};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Options of `himeno bench trace`.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceBenchArgs {
    /// Laps timed per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub laps: u64,
    /// Measurements per mode; the fastest counts.
    #[arg(long, default_value_t = 7)]
    pub repeats: u32,
}

/// Events per simulated iteration in the ring mode (a 2x1x2 rank's count).
const EVENTS_PER_ITERATION: u64 = 13;

/// How a measurement records.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// No recorder: the cost of a lap in a run without `--trace`.
    Off,
    /// A recorder that keeps every event.
    Keep,
    /// A recorder keeping one iteration, so that every event pushed to its
    /// ring drops the oldest.
    Ring,
}

/// Events one recorder of the keep mode holds (32 MiB) before a fresh one
/// takes over: `--laps` up to 1e9 would otherwise hold them all.
const BATCH: u64 = 1 << 20;

/// Nanoseconds per lap of one measurement of `laps` laps in `mode`, timed
/// in batches of at most [`BATCH`] laps (a fresh recorder each, installed
/// and taken outside the time).
fn measure(mode: Mode, laps: u64) -> f64 {
    let (keep, bound) = match mode {
        Mode::Ring => (
            1,
            Bound {
                head: EVENTS_PER_ITERATION as usize,
                tail: EVENTS_PER_ITERATION as usize,
            },
        ),
        _ => (
            u64::MAX / 2,
            Bound {
                head: BATCH as usize,
                tail: 0,
            },
        ),
    };
    let mut times = PhaseTimes::default();
    let mut clock = Lap::start();
    let mut elapsed = Duration::ZERO;
    let mut done = 0;
    while done < laps {
        let batch = (laps - done).min(BATCH);
        if mode != Mode::Off {
            timeline::install(Recorder::new(Instant::now(), keep, bound));
        }
        let started = Instant::now();
        for n in done..done + batch {
            if mode == Mode::Ring && n % EVENTS_PER_ITERATION == 0 {
                timeline::mark(Part::Timed, 2 + n / EVENTS_PER_ITERATION);
            }
            timeline::lap(&mut clock, Phase::Compute, &mut times);
        }
        elapsed += started.elapsed();
        drop(timeline::take());
        done += batch;
    }
    std::hint::black_box(times.get(Phase::Compute));
    elapsed.as_nanos() as f64 / laps as f64
}

/// Runs the benchmark and prints its table and the recording's cost.
pub fn run(args: &TraceBenchArgs) -> Result<ExitCode> {
    if !(1000..=1_000_000_000).contains(&args.laps) || !(1..=1000).contains(&args.repeats) {
        return Err(Error::usage(format!(
            "--laps {} and --repeats {}: use 1000 to 1e9 laps and 1 to 1000 repeats",
            args.laps, args.repeats
        )));
    }
    let modes = [Mode::Off, Mode::Keep, Mode::Ring];
    let mut best = [f64::MAX; 3];
    for _ in 0..args.repeats {
        for (b, &m) in best.iter_mut().zip(&modes) {
            *b = b.min(measure(m, args.laps));
        }
    }
    // One write through the output policy: a standard output that cannot
    // take the table is one `himeno:` line and exit 2, not a panic.
    let mut table = format!(
        "mode        ns_per_lap  (fastest of {} x {} laps)\n",
        args.repeats, args.laps
    );
    for (name, ns) in ["off", "keep", "ring"].iter().zip(best) {
        table.push_str(&format!("{name:<10} {ns:>11.2}\n"));
    }
    table.push_str(&format!(
        "recording_ns_per_event keep={:.2} ring={:.2}\n",
        best[1] - best[0],
        best[2] - best[0]
    ));
    crate::output::print_report(&table)?;
    Ok(ExitCode::SUCCESS)
}
