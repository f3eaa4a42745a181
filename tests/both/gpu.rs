//! The GPU helpers both tiers' GPU tests use: whether this machine has no
//! GPU (the skip), and running a GPU case.

use crate::common::*;
use std::process::Output;
use std::sync::OnceLock;

/// `None` when a GPU run works here; why not when there is no GPU (for
/// skip notes). Any other failure panics: a GPU that is present but broken
/// (no NVRTC, kernels that do not load, a crash) must fail these tests,
/// not skip them. Probed once per test binary.
pub(crate) fn no_gpu() -> Option<String> {
    static PROBED: OnceLock<Option<String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let o = go(&["--backend", "gpu", "--size", "XS", "--iterations", "1"]);
            if o.status.success() {
                return None;
            }
            let err = stderr(&o).trim().to_string();
            assert!(
                NO_GPU_HERE.iter().any(|w| err.contains(w)),
                "a GPU run failed, and not because there is no GPU here (exit {:?}):\n{err}",
                o.status.code()
            );
            Some(err)
        })
        .clone()
}

/// Runs `args` and returns the output.
pub(crate) fn go(args: &[&str]) -> Output {
    run(himeno(args))
}
