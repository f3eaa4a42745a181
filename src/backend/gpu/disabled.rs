//! Stand-in for the GPU backend in builds without the `cuda` feature.

use super::options::GpuOptions;
use super::transfer_samples::Measured;
use crate::backend::api::Backend;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::Block;

/// Always false: this build cannot drive a GPU.
pub fn available() -> bool {
    false
}

/// Explains that this build has no GPU support.
pub fn create(
    _cfg: &GpuOptions,
    _grid: &Grid,
    _block: &Block,
    _comm: &dyn Comm,
) -> Result<Box<dyn Backend>> {
    Err(Error::usage(
        "this build has no GPU support: rebuild with `--features cuda`, or use --backend cpu",
    ))
}

/// Explains that this build cannot measure host<->device transfers.
pub fn measure_transfers(_device: usize, _sizes: &[usize]) -> Result<Measured> {
    Err(Error::usage(
        "this build has no GPU support, so there is nothing to measure: rebuild with \
         `--features cuda` to run `himeno bench transfer`",
    ))
}

/// NVTX ranges: none in a build without GPU support.
pub mod nvtx {
    /// A range that was never opened.
    pub struct Range;

    /// Opens nothing.
    pub fn range(_name: &'static str) -> Range {
        Range
    }
}
