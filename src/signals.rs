//! Scheduler signals: SIGTERM, SIGINT and SIGUSR1 ask the run to stop after
//! the current iteration and still report what it did.
//!
//! A second SIGINT (Ctrl-C pressed again) ends the process at once with
//! exit code 2, so an interactive run stays killable. Repeated SIGTERM and
//! SIGUSR1 only stop the run: under a batch system a rank often gets the
//! same signal twice (from the scheduler and forwarded by `mpirun`), and
//! exiting on the second would lose the report; schedulers follow up with
//! SIGKILL anyway.
//!
//! Every place that waits (the iteration loop, the reference run, the
//! results-file lock) looks at the flag, or at the signal count to see a
//! signal that arrives while it waits. What cannot look (a rank blocked in
//! an MPI collective because another rank hangs, a stalled write) is
//! covered by a watchdog: once a stop signal has come, a process still
//! running a grace period later (default 60 s, `HIMENO_STOP_GRACE`) says
//! so on one line and ends with exit code 2, so no job outlives a stop
//! request by more than the grace. Work that looks at the flag only when
//! it ends (a block of `--temporal` sweeps, the checkpoint written after a
//! stop) tells the watchdog how long it should take
//! ([`StopFlag::busy_for`]), and the grace counts from then.

use crate::error::{Error, Result, print_line};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Name of the variable that sets the watchdog's grace, in seconds.
pub const GRACE_VAR: &str = crate::environment::STOP_GRACE;

/// The watchdog's grace when [`GRACE_VAR`] is not set.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);

/// Longest grace accepted: one day.
const MAX_GRACE_S: f64 = 86_400.0;

/// The signals that ask for a stop.
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGUSR1,
];

/// How the watchdog ends the process, when not with `_exit(2)`: the
/// communicator's own abort while MPI runs (see [`set_watchdog_end`]).
static WATCHDOG_END: Mutex<Option<fn(i32) -> !>> = Mutex::new(None);

/// How long the watchdog gives [`set_watchdog_end`]'s way to end the
/// process before it ends it with `_exit(2)` itself.
const END_BACKSTOP: Duration = Duration::from_secs(2);

/// How long the watchdog waits between telling its line and aborting the
/// job: an abort tears the job down at once, and MPICH's launcher then
/// drops what a rank wrote a moment before and it had not yet forwarded
/// (seen once in CI: exit 2, and no line). Well below [`END_BACKSTOP`].
const LINE_DRAIN: Duration = Duration::from_millis(300);

/// Sets how the watchdog ends the process (`None`: `_exit(2)`).
///
/// Under MPI a rank that leaves with `_exit` while others are blocked can
/// lose its exit code: MPICH's launcher (Hydra 4.0) records 0 for a rank
/// whose exit it sees only after it has started killing the job, and then
/// exits 0 itself for a job that must fail. `MPI_Abort` hands the code to
/// the launcher first, which then reports it.
pub fn set_watchdog_end(end: Option<fn(i32) -> !>) {
    *WATCHDOG_END.lock().unwrap_or_else(|p| p.into_inner()) = end;
}

/// Ends the process with exit code 2 for the watchdog: through the way
/// [`set_watchdog_end`] gave, with `_exit(2)` as the backstop should that
/// block too (an MPI library stuck on the network that stalled the job).
fn end_for_watchdog() -> ! {
    let end = *WATCHDOG_END.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(end) = end {
        let backstop = std::thread::Builder::new()
            .name("himeno-stop-backstop".into())
            .spawn(|| {
                std::thread::sleep(END_BACKSTOP);
                // SAFETY: ends the process at once; nothing is left to run.
                unsafe { libc::_exit(2) }
            });
        if backstop.is_ok() {
            std::thread::sleep(LINE_DRAIN);
            end(2);
        }
    }
    // SAFETY: ends the process at once; nothing is left to run.
    unsafe { libc::_exit(2) }
}

/// A flag raised by the first stop signal, with a count of them all.
#[derive(Debug, Clone)]
pub struct StopFlag {
    raised: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    grace_ms: Arc<AtomicU64>,
    /// When the work in flight that cannot look at the flag (a block of
    /// sweeps) should be over, or was, in ms of [`clock_ms`]; 0 for none.
    busy_until_ms: Arc<AtomicU64>,
}

/// Milliseconds since the first call: the clock the watchdog and
/// [`StopFlag::busy_for`] share.
fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl StopFlag {
    /// Installs the handlers and the watchdog and returns the flag they
    /// raise.
    pub fn install() -> StopFlag {
        let stop = StopFlag::never();
        for sig in STOP_SIGNALS {
            // Order matters: the conditional shutdown must see the flag as
            // it was before this signal raised it.
            if sig == signal_hook::consts::SIGINT {
                let _ = signal_hook::flag::register_conditional_shutdown(
                    sig,
                    2,
                    Arc::clone(&stop.raised),
                );
            }
            let _ = signal_hook::flag::register(sig, Arc::clone(&stop.raised));
            let count = Arc::clone(&stop.count);
            // SAFETY: the action only increments an atomic, which is
            // async-signal-safe.
            let _ = unsafe {
                signal_hook::low_level::register(sig, move || {
                    count.fetch_add(1, Ordering::SeqCst);
                })
            };
        }
        // The grace applies from here, before the ranks agree on the run
        // (a rank stuck before the agreement holds the others there); a
        // malformed value keeps the default until the validation refuses it.
        if let Ok(Some(grace)) = grace_from_env() {
            stop.set_grace(grace);
        }
        stop.start_watchdog();
        stop
    }

    /// A flag no signal raises (for tools and tests).
    pub fn never() -> StopFlag {
        StopFlag {
            raised: Arc::new(AtomicBool::new(false)),
            count: Arc::new(AtomicUsize::new(0)),
            grace_ms: Arc::new(AtomicU64::new(DEFAULT_GRACE.as_millis() as u64)),
            busy_until_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Tells the watchdog that work which looks at the flag only when it
    /// ends (a block of `--temporal` sweeps between two exchanges, a
    /// checkpoint's write) starts
    /// now and should take at most `expected`; `Duration::ZERO` when such
    /// work has just ended. The grace after a stop signal then counts from
    /// the end of that work, not from the signal: a healthy block longer
    /// than the grace still ends, and the run still has the whole grace to
    /// report. `expected` is capped at a day, so that a hung block is
    /// still ended.
    pub fn busy_for(&self, expected: Duration) {
        let expected = expected.min(Duration::from_secs_f64(MAX_GRACE_S));
        self.busy_until_ms
            .store(clock_ms() + expected.as_millis() as u64, Ordering::SeqCst);
    }

    /// Raises the flag as a stop signal would (a failing place that must
    /// end the run the same way, and tests).
    pub fn raise(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.raised.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }

    /// How many stop signals have come so far: a wait compares it with
    /// the count when it began, to see a signal that arrives meanwhile
    /// even when the run had already been asked to stop.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Sets the watchdog's grace (see the module documentation).
    pub fn set_grace(&self, grace: Duration) {
        self.grace_ms
            .store(grace.as_millis() as u64, Ordering::SeqCst);
    }

    /// Starts the watchdog thread: it sleeps until the first stop signal,
    /// then for the grace, then ends the process with exit code 2.
    fn start_watchdog(&self) {
        let Ok(mut signals) = signal_hook::iterator::Signals::new(STOP_SIGNALS) else {
            return;
        };
        let grace = Arc::clone(&self.grace_ms);
        let busy_until = Arc::clone(&self.busy_until_ms);
        let spawned = std::thread::Builder::new()
            .name("himeno-stop-watchdog".into())
            .spawn(move || {
                if signals.forever().next().is_none() {
                    return;
                }
                let signalled = clock_ms();
                let ms = grace.load(Ordering::SeqCst);
                // The grace counts from the signal, or from the expected
                // end of the work in flight when that is later (read again
                // after each sleep: the run may start one more block
                // before it sees the stop).
                loop {
                    let from = busy_until.load(Ordering::SeqCst).max(signalled);
                    let now = clock_ms();
                    match (from + ms).checked_sub(now) {
                        Some(left) if left > 0 => std::thread::sleep(Duration::from_millis(left)),
                        _ => break,
                    }
                }
                print_line(&format!(
                    "himeno: error: still running {} s after a stop signal (a rank, a file \
                     or the network is blocked): exiting now; set {GRACE_VAR} to allow more",
                    ms as f64 / 1000.0
                ));
                end_for_watchdog()
            });
        if let Err(e) = spawned {
            tracing::warn!("no stop watchdog: {e}");
        }
    }
}

/// Shortest grace accepted: the watchdog counts in milliseconds, and a
/// shorter grace would become none (`1e-300` was 0 ms, and the record lost).
const MIN_GRACE_S: f64 = 0.001;

/// The grace [`GRACE_VAR`] asks for, if set: seconds from a millisecond to
/// a day.
pub fn grace_from_env() -> Result<Option<Duration>> {
    let Some(v) = crate::environment::get_os(GRACE_VAR) else {
        return Ok(None);
    };
    parse_grace(&v.to_string_lossy()).map(Some)
}

/// A grace as [`GRACE_VAR`] gives it, in seconds.
fn parse_grace(text: &str) -> Result<Duration> {
    match text.trim().parse::<f64>() {
        Ok(s) if (MIN_GRACE_S..=MAX_GRACE_S).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(Error::usage(format!(
            "{GRACE_VAR}='{text}' is not a number of seconds from {MIN_GRACE_S} (a \
             millisecond) to {MAX_GRACE_S} (a day): fix or unset it"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grace_is_a_millisecond_to_a_day() {
        assert_eq!(parse_grace("0.001").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_grace(" 60 ").unwrap(), Duration::from_secs(60));
        for bad in [
            "1e-300", "0.0009", "0", "-1", "86401", "NaN", "inf", "soon", "",
        ] {
            assert!(parse_grace(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn raising_counts_and_flags() {
        let s = StopFlag::never();
        assert!(!s.raised() && s.count() == 0);
        s.raise();
        s.raise();
        assert!(s.raised());
        assert_eq!(s.count(), 2);
        let copy = s.clone();
        assert_eq!(copy.count(), 2, "clones share the flag");
    }
}
