//! The device's hardware queues for in-process ranks: CUDA multiplexes the
//! streams of a process onto `CUDA_DEVICE_MAX_CONNECTIONS` hardware work
//! queues (8 by default, 32 at most), read once when the driver
//! initialises. GPU ranks running as threads of one process (`--local-ranks
//! N`) share that process's queues, two streams each, so with more than
//! four of them the streams of different ranks queue behind each other
//! (false dependencies between ranks that order nothing). A run of such
//! ranks sets the variable, unless the user did, before anything can
//! initialise the driver.
//!
//! Plain arithmetic and the environment, in every build; only `cuda`
//! builds call [`prepare`].

use std::sync::OnceLock;

/// The variable the CUDA driver reads.
pub const VAR: &str = crate::environment::CUDA_CONNECTIONS;
/// Hardware queues the driver uses when the variable is unset.
pub const DRIVER_DEFAULT: usize = 8;
/// The most the driver accepts.
pub const DRIVER_MAX: usize = 32;
/// Streams each GPU rank creates (`main` and `halo`).
pub const STREAMS_PER_RANK: usize = 2;

/// The value set by [`prepare`] and the in-process ranks it was set for.
static SET: OnceLock<(usize, usize)> = OnceLock::new();

/// Hardware queues for `ranks` in-process GPU ranks: a queue per stream,
/// never fewer than the driver's default nor more than its maximum.
pub fn for_ranks(ranks: usize) -> usize {
    ranks
        .saturating_mul(STREAMS_PER_RANK)
        .clamp(DRIVER_DEFAULT, DRIVER_MAX)
}

/// Sets [`VAR`] for `ranks` in-process GPU ranks unless the environment
/// already has it (the user's choice wins), logs it, and returns the value
/// set.
///
/// # Safety
///
/// The process must have one thread: the environment is not synchronised
/// with other threads' reads of it (the driver's, a logger's), which is
/// why Rust 2024 makes setting it unsafe. The driver must not be
/// initialised yet either, or the value is ignored.
pub unsafe fn prepare(ranks: usize) -> Option<usize> {
    if crate::environment::get_os(VAR).is_some() {
        return None;
    }
    let n = for_ranks(ranks);
    // SAFETY: the caller guarantees a single-threaded process.
    unsafe { crate::environment::set(VAR, &n.to_string()) };
    let _ = SET.set((n, ranks));
    tracing::info!(
        connections = n,
        ranks,
        "set {VAR}={n}: {STREAMS_PER_RANK} streams for each of {ranks} in-process GPU ranks"
    );
    Some(n)
}

/// What the GPU backend records about the queues its process uses.
pub fn describe() -> String {
    match (SET.get(), crate::environment::get(VAR)) {
        (Some((n, ranks)), _) => {
            format!("{VAR}={n} (set by himeno for {ranks} in-process ranks)")
        }
        (None, Some(v)) => format!("{VAR}={v} (from the environment)"),
        (None, None) => format!("{VAR} unset (driver default {DRIVER_DEFAULT})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_queues_per_rank_within_the_drivers_range() {
        assert_eq!(for_ranks(1), 8);
        assert_eq!(for_ranks(4), 8);
        assert_eq!(for_ranks(5), 10);
        assert_eq!(for_ranks(16), 32);
        assert_eq!(for_ranks(1000), 32);
        assert_eq!(for_ranks(usize::MAX), 32);
    }
}
