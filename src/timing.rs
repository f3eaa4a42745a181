//! Phase timing: what each rank spent in each part of an iteration, and the
//! statistics across ranks that reports print.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The shortest duration a rate is divided by, in seconds: the clock's
/// resolution. A measured 0 (a tiny run on a coarse clock) then gives a
/// large but finite rate, which JSON can hold (it writes infinity as null)
/// and `himeno report` accepts.
pub const RESOLUTION_S: f64 = 1e-9;

/// Longest duration, in seconds (a century), that a run's record or a
/// checkpoint's segment may state: a larger, negative or non-finite one is
/// a hand edit or a broken file, and would make the rates meaningless.
pub const LONGEST_S: f64 = 3.2e9;

/// The median of `values` (the mean of the middle two for an even
/// count); `None` for none. `himeno report --compare`'s and the
/// calibration's one median.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

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

    /// The phase named `name` (as [`Phase::name`] writes it).
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One value per phase, indexed by [`Phase`]. In JSON it is an object keyed
/// by phase name in alphabetical order, as records have always written it
/// (a name-keyed sorted map); a phase missing from such an object reads as
/// `T::default()`, and keys that name no phase are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PerPhase<T>([T; 6]);

/// Seconds spent in each phase by one rank.
pub type PhaseTimes = PerPhase<f64>;

impl<T> PerPhase<T> {
    /// The value of every phase, from `f`.
    pub fn from_fn(f: impl FnMut(Phase) -> T) -> PerPhase<T> {
        PerPhase(Phase::ALL.map(f))
    }

    /// The phases with their values, in [`Phase::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Phase, &T)> {
        Phase::ALL.into_iter().zip(&self.0)
    }

    /// The values in [`Phase::ALL`] order.
    pub fn values(&self) -> &[T; 6] {
        &self.0
    }
}

impl<T> std::ops::Index<Phase> for PerPhase<T> {
    type Output = T;
    fn index(&self, p: Phase) -> &T {
        &self.0[p.index()]
    }
}

impl<T> std::ops::IndexMut<Phase> for PerPhase<T> {
    fn index_mut(&mut self, p: Phase) -> &mut T {
        &mut self.0[p.index()]
    }
}

impl PhaseTimes {
    /// Adds `s` seconds to `phase`.
    pub fn add(&mut self, phase: Phase, s: f64) {
        self[phase] += s;
    }

    /// Seconds spent in `phase`.
    pub fn get(&self, phase: Phase) -> f64 {
        self[phase]
    }

    /// Seconds in all phases together.
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }

    /// Seconds in communication phases (everything but compute).
    pub fn communication(&self) -> f64 {
        self.iter()
            .filter(|(p, _)| p.is_communication())
            .map(|(_, &s)| s)
            .sum()
    }

    /// Each phase's seconds divided by `n`.
    pub fn divided_by(&self, n: f64) -> PhaseTimes {
        PerPhase(self.0.map(|s| s / n))
    }
}

impl<T: Serialize> Serialize for PerPhase<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut by_name: Vec<(Phase, &T)> = self.iter().collect();
        by_name.sort_by_key(|(p, _)| p.name());
        let mut m = s.serialize_map(Some(by_name.len()))?;
        for (p, v) in by_name {
            m.serialize_entry(p.name(), v)?;
        }
        m.end()
    }
}

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for PerPhase<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let by_name = std::collections::BTreeMap::<String, T>::deserialize(d)?;
        let mut out = PerPhase(std::array::from_fn(|_| T::default()));
        for (name, v) in by_name {
            if let Some(p) = Phase::from_name(&name) {
                out[p] = v;
            }
        }
        Ok(out)
    }
}

/// Writes a [`PerPhase`] as an array in [`Phase::ALL`] order, the shape
/// the study tables' JSON has always had.
pub fn in_phase_order<T: Serialize, S: serde::Serializer>(
    v: &PerPhase<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    v.values().serialize(s)
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
