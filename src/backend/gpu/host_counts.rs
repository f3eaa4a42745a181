//! What the host waited for and copied, where the driver counts it: the
//! project's emulated driver (`tests/cuda_emu/`) exports
//! `void himeno_emu_host_counts(uint64_t *waits, uint64_t *bytes)`, the
//! calling thread's host waits for the device (stream, event and context
//! synchronisations, blocking copies and frees) and host<->device bytes
//! so far. A real driver has no such symbol, and nothing is reported.
//!
//! The GPU backend reads it at the start of each sweep (each rank's calls
//! come from its own thread, so the per-thread counts are the rank's) and
//! keeps the most of any whole iteration between two sweep starts: the
//! steady state, without the first iteration (no gosa read yet) and the
//! final read of the last pending gosa.

use crate::backend::api::HostTraffic;
use libloading::os::unix::{Library, Symbol};

/// The name the emulated driver exports its counters under.
pub const COUNTS_SYMBOL: &str = "himeno_emu_host_counts";

type CountsFn = unsafe extern "C" fn(*mut u64, *mut u64);

/// The loaded driver's counters.
pub struct HostCounter {
    counts: Symbol<CountsFn>,
    /// Keeps the driver's library referenced while the symbol is used.
    _lib: Library,
}

impl HostCounter {
    /// The counters of the loaded CUDA driver, if it has them (only the
    /// emulator does). Call once the driver is loaded.
    pub fn find() -> Option<HostCounter> {
        for name in ["libcuda.so.1", "libcuda.so"] {
            // SAFETY: RTLD_NOLOAD loads nothing: it only returns a handle to
            // the driver already loaded, so no initialiser runs.
            let lib = unsafe { Library::open(Some(name), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
            let Ok(lib) = lib else { continue };
            // SAFETY: the emulator exports the symbol with this C
            // signature; a real driver does not export it at all.
            let counts = unsafe { lib.get::<CountsFn>(COUNTS_SYMBOL.as_bytes()) };
            return counts.ok().map(|counts| HostCounter { counts, _lib: lib });
        }
        None
    }

    /// The calling thread's counts so far.
    pub fn now(&self) -> HostTraffic {
        let (mut waits, mut bytes) = (0u64, 0u64);
        // SAFETY: the function writes two u64 through valid pointers and
        // keeps neither; the library stays loaded while `self` lives.
        unsafe { (self.counts)(&mut waits, &mut bytes) };
        HostTraffic { waits, bytes }
    }
}

/// The most host traffic of any whole iteration, from the counts read at
/// each sweep start.
#[derive(Debug, Default)]
pub struct Steady {
    last: Option<HostTraffic>,
    most: Option<HostTraffic>,
}

impl Steady {
    /// Starts over (the fields were reset: a new loop begins).
    pub fn restart(&mut self) {
        *self = Steady::default();
    }

    /// Takes the counts `now` read at a sweep start: the iteration since
    /// the last start, if any, is a whole one.
    pub fn sweep_starts(&mut self, now: HostTraffic) {
        if let Some(last) = self.last {
            let one = HostTraffic {
                waits: now.waits - last.waits,
                bytes: now.bytes - last.bytes,
            };
            let most = self.most.get_or_insert(one);
            most.waits = most.waits.max(one.waits);
            most.bytes = most.bytes.max(one.bytes);
        }
        self.last = Some(now);
    }

    /// The most of any whole iteration so far, once there was one.
    pub fn most(&self) -> Option<HostTraffic> {
        self.most
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_count_is_the_most_of_any_whole_iteration() {
        let at = |waits, bytes| HostTraffic { waits, bytes };
        let mut s = Steady::default();
        s.sweep_starts(at(10, 100));
        assert_eq!(s.most(), None);
        s.sweep_starts(at(13, 108));
        s.sweep_starts(at(19, 116));
        s.sweep_starts(at(25, 124));
        assert_eq!(s.most(), Some(at(6, 8)));
        s.restart();
        assert_eq!(s.most(), None);
    }
}
