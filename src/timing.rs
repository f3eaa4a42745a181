//! Phase timing: what each rank spent in each part of an iteration, and the
//! statistics across ranks that reports print.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The shortest duration a rate is divided by, in seconds: the clock's
/// resolution. A measured 0 (a tiny run on a coarse clock) then gives a
/// large but finite rate, which JSON can hold (it writes infinity as null)
/// and `himeno report` accepts.
pub const RESOLUTION_S: f64 = 1e-9;

/// The parts of an iteration that are timed separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The Jacobi sweep (kernel time).
    Compute,
    /// Copying faces into send buffers.
    Pack,
    /// Host<->device copies of halo messages (GPU backends).
    Transfer,
    /// Waiting for halo messages (post, send, wait).
    Comm,
    /// Copying received faces into ghost layers.
    Unpack,
    /// The global sum of gosa.
    Allreduce,
}

impl Phase {
    /// All phases, in report order.
    pub const ALL: [Phase; 6] = [
        Phase::Compute,
        Phase::Pack,
        Phase::Transfer,
        Phase::Comm,
        Phase::Unpack,
        Phase::Allreduce,
    ];

    /// Lower-case name used in reports and JSON keys.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Compute => "compute",
            Phase::Pack => "pack",
            Phase::Transfer => "transfer",
            Phase::Comm => "comm",
            Phase::Unpack => "unpack",
            Phase::Allreduce => "allreduce",
        }
    }

    /// Whether the phase is communication overhead rather than computation.
    pub fn is_communication(self) -> bool {
        !matches!(self, Phase::Compute)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Seconds spent in each phase by one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Seconds per phase, indexed in [`Phase::ALL`] order.
    pub secs: [f64; 6],
}

impl PhaseTimes {
    /// Adds `s` seconds to `phase`.
    pub fn add(&mut self, phase: Phase, s: f64) {
        self.secs[phase.index()] += s;
    }

    /// Seconds spent in `phase`.
    pub fn get(&self, phase: Phase) -> f64 {
        self.secs[phase.index()]
    }

    /// Seconds in all phases together.
    pub fn total(&self) -> f64 {
        self.secs.iter().sum()
    }

    /// Seconds in communication phases (everything but compute).
    pub fn communication(&self) -> f64 {
        Phase::ALL
            .iter()
            .filter(|p| p.is_communication())
            .map(|&p| self.get(p))
            .sum()
    }
}

/// A host clock that returns the time since its last lap.
#[derive(Debug)]
pub struct Lap(Instant);

impl Lap {
    /// Starts the clock.
    pub fn start() -> Lap {
        Lap(Instant::now())
    }

    /// Seconds since the previous lap (or the start), restarting the clock.
    pub fn lap(&mut self) -> f64 {
        let now = Instant::now();
        let s = now.duration_since(self.0).as_secs_f64();
        self.0 = now;
        s
    }

    /// The previous lap (or the start) and now, restarting the clock: the
    /// span a timeline records where [`Lap::lap`] gives only its length.
    pub fn span(&mut self) -> (Instant, Instant) {
        let now = Instant::now();
        let start = std::mem::replace(&mut self.0, now);
        (start, now)
    }

    /// Seconds since the previous lap (or the start), without restarting
    /// the clock.
    pub fn elapsed(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// CPU seconds (user and system) this process has used so far, all its
/// threads together; 0 where the platform does not tell.
pub fn process_cpu_s() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: rusage is plain data that getrusage fills in.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            return secs(u.ru_utime) + secs(u.ru_stime);
        }
    }
    0.0
}

/// Minimum, mean and maximum of one quantity across ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Smallest value.
    pub min_s: f64,
    /// Mean value.
    pub avg_s: f64,
    /// Largest value.
    pub max_s: f64,
}

impl Stats {
    /// Statistics of `values` (all zero for an empty slice).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Stats {
        let mut n = 0usize;
        let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for v in values {
            n += 1;
            min = min.min(v);
            max = max.max(v);
            sum += v;
        }
        if n == 0 {
            return Stats::default();
        }
        Stats {
            min_s: min,
            avg_s: sum / n as f64,
            max_s: max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lap_measures_elapsed_time() {
        let mut l = Lap::start();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let s = l.lap();
        assert!((0.015..1.0).contains(&s), "lap measured {s}");
        assert!(l.lap() < s);
    }

    #[test]
    fn phases_accumulate_and_split() {
        let mut t = PhaseTimes::default();
        t.add(Phase::Compute, 2.0);
        t.add(Phase::Comm, 0.5);
        t.add(Phase::Comm, 0.25);
        t.add(Phase::Allreduce, 0.25);
        assert_eq!(t.get(Phase::Comm), 0.75);
        assert_eq!(t.total(), 3.0);
        assert_eq!(t.communication(), 1.0);
    }

    #[test]
    fn process_cpu_time_grows_with_work() {
        let before = process_cpu_s();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used = process_cpu_s() - before;
        if cfg!(unix) {
            assert!(used > 0.01, "{used} s of CPU for 50 ms of spinning");
        }
    }

    #[test]
    fn stats_of_values() {
        let s = Stats::of([1.0, 3.0, 2.0]);
        assert_eq!((s.min_s, s.avg_s, s.max_s), (1.0, 2.0, 3.0));
        assert_eq!(Stats::of([]), Stats::default());
    }
}
