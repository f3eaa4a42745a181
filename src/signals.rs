//! Scheduler signals: SIGTERM, SIGINT and SIGUSR1 ask the run to stop after
//! the current iteration and still report what it did.
//!
//! A second SIGINT (Ctrl-C pressed again) ends the process at once with
//! exit code 2, so an interactive run stays killable. Repeated SIGTERM and
//! SIGUSR1 only stop the run: under a batch system a rank often gets the
//! same signal twice (from the scheduler and forwarded by `mpirun`), and
//! exiting on the second would lose the report; schedulers follow up with
//! SIGKILL anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag raised by the first stop signal.
#[derive(Debug, Clone)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Installs the handlers and returns the flag they raise.
    pub fn install() -> StopFlag {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGUSR1,
        ] {
            // Order matters: the conditional shutdown must see the flag as
            // it was before this signal raised it.
            if sig == signal_hook::consts::SIGINT {
                let _ = signal_hook::flag::register_conditional_shutdown(sig, 2, Arc::clone(&flag));
            }
            let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        }
        StopFlag(flag)
    }

    /// A flag no signal raises (for tools and tests).
    pub fn never() -> StopFlag {
        StopFlag(Arc::new(AtomicBool::new(false)))
    }

    /// Raises the flag as a stop signal would (a failing place that must
    /// end the run the same way, and tests).
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked for.
    pub fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
