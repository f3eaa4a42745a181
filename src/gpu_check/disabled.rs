//! Stand-in for the NVRTC listing of `himeno gpu-check` in builds without
//! the `cuda` feature: such a build has no GPU backend to check, so the
//! command stops before it runs anything.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Explains that this build cannot check a GPU.
pub fn ensure_build() -> Result<()> {
    Err(Error::usage(
        "this build has no GPU support, so `himeno gpu-check` has nothing to check: rebuild \
         with `cargo build --release --features cuda` (and --himeno PATH can then check \
         another binary)",
    ))
}

/// Never reached (see [`ensure_build`]); the same error.
pub fn libraries(_root: &Path, _driver_major: Option<u32>) -> Result<Vec<(u32, PathBuf)>> {
    ensure_build().map(|()| Vec::new())
}
