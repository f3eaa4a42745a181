//! The per-rank timeline behind `--trace`: every timed phase as an event
//! with its start and end, recorded at the very clock laps that add the
//! phase to the rank's [`PhaseTimes`], so that a track's sums equal the
//! phase table by construction.
//!
//! The recorder lives in a thread-local slot of the rank's own thread (a
//! process under a launcher, a thread with `--local-ranks`): the solver and
//! the halo exchange time their phases through [`lap`] and [`lap_split`]
//! whether or not a timeline is recorded, and pay one thread-local look-up
//! per phase when none is. No signature between the driver and the halo
//! schedule carries it.
//!
//! A GPU backend adds its streams' work as measured by device events
//! ([`record_on`], on [`GPU_COMPUTE_TRACK`] and [`GPU_HALO_TRACK`]),
//! already placed on this clock.
//!
//! Memory stays bounded: events of the rehearsal and of the first `keep`
//! timed iterations (counted from the first iteration the run times, the
//! restart's on a restarted run) are all kept, then only those of the
//! last `keep` (a ring), and the recorder says which iterations it
//! dropped. Both ends hold at most the events their [`Bound`] allows
//! (what the memory preflight counted before the run); the head grows in
//! fixed chunks and the ring is allocated once at its size, so that no
//! reallocation doubles them.

use crate::timing::{Lap, Phase, PhaseTimes};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

/// The track of the rank's driver thread: every phase it times.
pub const MAIN_TRACK: u32 = 1;

/// The track of a rank's first sweep thread: thread `t` of its pool draws
/// on track `FIRST_THREAD_TRACK + t`.
pub const FIRST_THREAD_TRACK: u32 = 2;

/// The track of a GPU rank's compute stream (the sweep; the halo work
/// too without `--overlap`, which runs it on the same stream), timed by
/// device events. Far above the sweep threads' tracks.
pub const GPU_COMPUTE_TRACK: u32 = 1 << 16;

/// The track of a GPU rank's halo stream (under `--overlap`: the boundary
/// slabs' sweep and the halo's pack, copies and unpack), timed by device
/// events.
pub const GPU_HALO_TRACK: u32 = GPU_COMPUTE_TRACK + 1;

/// Work a GPU stream ran between two device events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuWork {
    /// Sweep kernels.
    Sweep,
    /// Pack kernels gathering faces into their device buffers.
    Pack,
    /// Copies of faces from the device to host buffers.
    ToHost,
    /// Copies of received faces from host buffers to the device.
    ToDevice,
    /// Unpack kernels scattering faces into the ghost planes.
    Unpack,
}

impl GpuWork {
    /// Every kind, in the order of their codes in the gather encoding.
    pub const ALL: [GpuWork; 5] = [
        GpuWork::Sweep,
        GpuWork::Pack,
        GpuWork::ToHost,
        GpuWork::ToDevice,
        GpuWork::Unpack,
    ];

    /// The event's name in a trace: prefixed "gpu ", so that it is never
    /// taken for a host phase of the report.
    pub fn name(self) -> &'static str {
        match self {
            GpuWork::Sweep => "gpu sweep",
            GpuWork::Pack => "gpu pack",
            GpuWork::ToHost => "gpu copy to host",
            GpuWork::ToDevice => "gpu copy to device",
            GpuWork::Unpack => "gpu unpack",
        }
    }
}

/// What an event is: a phase of the report, or a barrier of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum What {
    /// A phase, named as in the report's phase table.
    Phase(Phase),
    /// A barrier outside the phases (the timeline's own, at its ends).
    Barrier,
    /// One sweep thread's share of a sweep, on the thread's own track: the
    /// driver's compute event holds it, so it is no phase of the table.
    Sweep,
    /// Work on a GPU stream, timed by device events, on a GPU track: the
    /// host phases around it hold it, so it is no phase of the table.
    Gpu(GpuWork),
}

impl What {
    /// The event's name in a trace: the phase's report name, or "barrier".
    pub fn name(self) -> &'static str {
        match self {
            What::Phase(p) => p.name(),
            What::Barrier => "barrier",
            What::Sweep => "sweep",
            What::Gpu(w) => w.name(),
        }
    }
}

/// The part of the run an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Before and after the iterations (clock set-up, closing barrier).
    Setup,
    /// The untimed rehearsal iterations.
    Rehearsal,
    /// The timed loop, whose phases the report tabulates.
    Timed,
}

impl Part {
    /// Lower-case name used as the trace event's category.
    pub fn name(self) -> &'static str {
        match self {
            Part::Setup => "setup",
            Part::Rehearsal => "rehearsal",
            Part::Timed => "timed",
        }
    }
}

/// One recorded span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What ran.
    pub what: What,
    /// Which part of the run.
    pub part: Part,
    /// First iteration of the block it belongs to (1-based within its
    /// part; 0 outside the iterations).
    pub iteration: u64,
    /// Track (thread or stream) within the rank, never 0.
    pub track: u32,
    /// Start, in nanoseconds since the recorder's origin.
    pub start_ns: u64,
    /// Length in nanoseconds.
    pub dur_ns: u64,
}

/// Timed iterations whose events a recorder dropped to stay bounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Events dropped.
    pub events: u64,
    /// First and last dropped iteration, when any was.
    pub iterations: Option<(u64, u64)>,
}

/// The most events a recorder holds at each end: what the memory
/// preflight counts (see `crate::trace::Bound::of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Events of the setup, the rehearsal and the first `keep` timed
    /// iterations.
    pub head: usize,
    /// Events of the last `keep` timed iterations (the ring).
    pub tail: usize,
}

/// Events in one chunk of a recorder's head: a fixed allocation, so that
/// the head never reallocates (a doubling `Vec` would hold up to twice its
/// events, three times while it moves them).
pub const CHUNK_EVENTS: usize = 4096;

/// One rank's events, bounded as the module doc says.
#[derive(Debug)]
pub struct Recorder {
    origin: Instant,
    keep: u64,
    bound: Bound,
    part: Part,
    iteration: u64,
    /// The first timed iteration marked: the head keeps `keep` from it.
    timed_from: Option<u64>,
    head: Vec<Vec<Event>>,
    head_len: usize,
    tail: VecDeque<Event>,
    dropped: Dropped,
}

impl Recorder {
    /// A recorder keeping the first and last `keep` timed iterations whose
    /// clock starts at `origin`, holding at most `bound` events.
    pub fn new(origin: Instant, keep: u64, bound: Bound) -> Recorder {
        Recorder {
            origin,
            keep: keep.max(1),
            bound,
            part: Part::Setup,
            iteration: 0,
            timed_from: None,
            head: Vec::new(),
            head_len: 0,
            tail: VecDeque::new(),
            dropped: Dropped::default(),
        }
    }

    /// The instant its event times count from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Sets the part and the iteration the following events belong to.
    pub fn mark(&mut self, part: Part, iteration: u64) {
        self.part = part;
        self.iteration = iteration;
        if part == Part::Timed && self.timed_from.is_none() {
            self.timed_from = Some(iteration);
        }
    }

    /// Counts `e` as dropped.
    fn drop_event(&mut self, e: &Event) {
        self.dropped.events += 1;
        if e.part == Part::Timed {
            let it = e.iteration;
            self.dropped.iterations = Some(match self.dropped.iterations {
                Some((first, last)) => (first.min(it), last.max(it)),
                None => (it, it),
            });
        }
    }

    /// Records `what` from `start` to `end` on `track`.
    pub fn record(&mut self, what: What, track: u32, start: Instant, end: Instant) {
        let ns = |t: Instant| t.saturating_duration_since(self.origin).as_nanos() as u64;
        let (start_ns, end_ns) = (ns(start), ns(end));
        let e = Event {
            what,
            part: self.part,
            iteration: self.iteration,
            track,
            start_ns,
            dur_ns: end_ns.saturating_sub(start_ns),
        };
        let head_until = self.timed_from.unwrap_or(1).saturating_add(self.keep);
        if e.part != Part::Timed || e.iteration < head_until {
            if self.head_len >= self.bound.head {
                self.drop_event(&e);
                return;
            }
            if self.head.last().is_none_or(|c| c.len() == CHUNK_EVENTS) {
                self.head.push(Vec::with_capacity(CHUNK_EVENTS));
            }
            self.head.last_mut().expect("a chunk").push(e);
            self.head_len += 1;
            return;
        }
        if self.tail.capacity() == 0 {
            // Allocated once, at the size counted, when the ring is first
            // needed (a run of up to twice `keep` iterations never needs it).
            self.tail.reserve_exact(self.bound.tail);
        }
        if self.bound.tail == 0 {
            self.drop_event(&e);
            return;
        }
        if self.tail.len() == self.bound.tail
            && let Some(old) = self.tail.pop_front()
        {
            self.drop_event(&old);
        }
        self.tail.push_back(e);
        // Only the last `keep` iterations stay in the ring.
        while let Some(old) = self.tail.front()
            && old.iteration + self.keep <= e.iteration
        {
            let old = *old;
            self.tail.pop_front();
            self.drop_event(&old);
        }
    }

    /// Iterations kept at each end of the timed loop.
    pub fn keep(&self) -> u64 {
        self.keep
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// How many events are kept.
    pub fn len(&self) -> usize {
        self.head_len + self.tail.len()
    }

    /// Whether no event is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept events, in the order they were recorded.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.head.iter().flatten().chain(self.tail.iter())
    }
}

thread_local! {
    /// This thread's recorder while it records a timeline.
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Starts recording on this thread (replacing any recorder it had).
pub fn install(recorder: Recorder) {
    RECORDER.with(|r| *r.borrow_mut() = Some(recorder));
}

/// Stops recording on this thread and hands back what was recorded.
pub fn take() -> Option<Recorder> {
    RECORDER.with(|r| r.borrow_mut().take())
}

/// Whether this thread records a timeline.
pub fn recording() -> bool {
    RECORDER.with(|r| r.borrow().is_some())
}

/// Runs `f` on this thread's recorder, when it has one.
fn with(f: impl FnOnce(&mut Recorder)) {
    RECORDER.with(|r| {
        if let Some(rec) = r.borrow_mut().as_mut() {
            f(rec);
        }
    });
}

/// Tells this thread's recorder, if any, the part and first iteration of
/// the block that follows.
pub fn mark(part: Part, iteration: u64) {
    with(|r| r.mark(part, iteration));
}

/// Records `what` between `start` and `end` on the main track, if this
/// thread records.
pub fn record(what: What, start: Instant, end: Instant) {
    with(|r| r.record(what, MAIN_TRACK, start, end));
}

/// Records each sweep thread's span (`spans[t]` for thread `t`) on its
/// own track, if this thread records.
pub fn record_threads(spans: &[(Instant, Instant)]) {
    with(|r| {
        for (t, &(start, end)) in spans.iter().enumerate() {
            r.record(What::Sweep, FIRST_THREAD_TRACK + t as u32, start, end);
        }
    });
}

/// Records `what` between `start` and `end` on `track` (a GPU stream's),
/// if this thread records.
pub fn record_on(what: What, track: u32, start: Instant, end: Instant) {
    with(|r| r.record(what, track, start, end));
}

/// Ends the clock's lap as `phase`: adds its seconds to `times` and records
/// the same span. Returns the seconds.
pub fn lap(clock: &mut Lap, phase: Phase, times: &mut PhaseTimes) -> f64 {
    let (start, end) = clock.span();
    let s = end.duration_since(start).as_secs_f64();
    times.add(phase, s);
    record(What::Phase(phase), start, end);
    s
}

/// Ends the clock's lap as `first` followed by `second_s` seconds of
/// `second` (a pack whose device copy the backend timed inside it): the
/// two are added to `times` and recorded one after the other, `first`
/// taking what is left when `second_s` exceeds the lap.
pub fn lap_split(
    clock: &mut Lap,
    first: Phase,
    second: Phase,
    second_s: f64,
    times: &mut PhaseTimes,
) {
    let (start, end) = clock.span();
    let whole = end.duration_since(start);
    let tail = std::time::Duration::try_from_secs_f64(second_s.max(0.0))
        .unwrap_or_default()
        .min(whole);
    times.add(second, second_s);
    times.add(first, (whole.as_secs_f64() - second_s).max(0.0));
    record(What::Phase(first), start, end - tail);
    record(What::Phase(second), end - tail, end);
}

/// The monotonic clock in nanoseconds, the same for every process of one
/// host (`CLOCK_MONOTONIC` on Unix, which `Instant` reads too): what the
/// ranks' origins are placed on before their clocks are aligned.
pub fn monotonic_ns() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: clock_gettime only writes the timespec it is given.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) } == 0 {
            return t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
        }
    }
    // Elsewhere: time since the first call, one clock per process.
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A bound no test reaches.
    const ROOMY: Bound = Bound {
        head: 1 << 20,
        tail: 1 << 20,
    };

    fn at(origin: Instant, ns: u64) -> Instant {
        origin + Duration::from_nanos(ns)
    }

    /// Records two events in each of the timed iterations `its` on `r`.
    fn timed(r: &mut Recorder, its: std::ops::RangeInclusive<u64>) {
        let origin = r.origin();
        for it in its {
            r.mark(Part::Timed, it);
            for n in 0..2 {
                let t = it * 100 + n * 10;
                r.record(
                    What::Phase(Phase::Compute),
                    MAIN_TRACK,
                    at(origin, t),
                    at(origin, t + 10),
                );
            }
        }
    }

    #[test]
    fn laps_are_recorded_as_they_are_added() {
        install(Recorder::new(Instant::now(), 10, ROOMY));
        mark(Part::Timed, 1);
        let mut times = PhaseTimes::default();
        let mut clock = Lap::start();
        std::thread::sleep(Duration::from_millis(2));
        let s = lap(&mut clock, Phase::Compute, &mut times);
        std::thread::sleep(Duration::from_millis(2));
        lap_split(&mut clock, Phase::Pack, Phase::Transfer, 0.001, &mut times);
        let rec = take().expect("installed");
        assert!(!recording());
        let ev: Vec<Event> = rec.events().copied().collect();
        assert_eq!(ev.len(), 3);
        let secs = |e: &Event| e.dur_ns as f64 * 1e-9;
        assert_eq!(ev[0].what, What::Phase(Phase::Compute));
        assert!((secs(&ev[0]) - s).abs() < 1e-9);
        assert!((secs(&ev[1]) - times.get(Phase::Pack)).abs() < 1e-9);
        assert!((secs(&ev[2]) - 0.001).abs() < 1e-9);
        // Back to back on one track: each starts where the previous ended.
        assert_eq!(ev[1].start_ns, ev[0].start_ns + ev[0].dur_ns);
        assert_eq!(ev[2].start_ns, ev[1].start_ns + ev[1].dur_ns);
        assert!(ev.iter().all(|e| e.track == MAIN_TRACK && e.iteration == 1));
    }

    #[test]
    fn without_a_recorder_laps_only_add() {
        assert!(take().is_none());
        let mut times = PhaseTimes::default();
        let mut clock = Lap::start();
        let s = lap(&mut clock, Phase::Comm, &mut times);
        assert_eq!(times.get(Phase::Comm), s);
    }

    #[test]
    fn only_the_first_and_last_iterations_are_kept() {
        let origin = Instant::now();
        let mut r = Recorder::new(origin, 3, ROOMY);
        r.mark(Part::Rehearsal, 1);
        r.record(
            What::Phase(Phase::Compute),
            MAIN_TRACK,
            at(origin, 0),
            at(origin, 5),
        );
        timed(&mut r, 1..=10);
        let kept: Vec<(Part, u64)> = r.events().map(|e| (e.part, e.iteration)).collect();
        let mut want = vec![(Part::Rehearsal, 1)];
        for it in [1, 2, 3, 8, 9, 10] {
            want.extend([(Part::Timed, it), (Part::Timed, it)]);
        }
        assert_eq!(kept, want);
        assert_eq!(
            r.dropped(),
            Dropped {
                events: 8,
                iterations: Some((4, 7))
            }
        );
    }

    #[test]
    fn a_restarted_run_keeps_its_own_first_iterations() {
        // Restarted at iteration 600: its first timed iteration is 601.
        let mut r = Recorder::new(Instant::now(), 3, ROOMY);
        timed(&mut r, 601..=610);
        let kept: Vec<u64> = r.events().map(|e| e.iteration).step_by(2).collect();
        assert_eq!(kept, [601, 602, 603, 608, 609, 610]);
        assert_eq!(r.dropped().iterations, Some((604, 607)));
    }

    #[test]
    fn no_end_holds_more_than_its_bound() {
        let mut r = Recorder::new(Instant::now(), 3, Bound { head: 5, tail: 3 });
        timed(&mut r, 1..=10);
        let kept: Vec<u64> = r.events().map(|e| e.iteration).collect();
        // The head's sixth event and the ring's oldest go.
        assert_eq!(kept, [1, 1, 2, 2, 3, 9, 10, 10]);
        assert_eq!(r.len(), 8);
        assert_eq!(r.dropped().events, 12);
        assert!(r.tail.capacity() < 8, "the ring grew past its bound");
    }

    #[test]
    fn the_monotonic_clock_runs_with_instant() {
        let (m0, i0) = (monotonic_ns(), Instant::now());
        std::thread::sleep(Duration::from_millis(5));
        let (m1, i1) = (monotonic_ns(), Instant::now());
        let by_instant = i1.duration_since(i0).as_nanos() as f64;
        assert!(
            ((m1 - m0) as f64 - by_instant).abs() < 1e6,
            "{m0} {m1} {by_instant}"
        );
    }
}
