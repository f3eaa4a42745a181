//! What the GPU backend is asked for, in every build: the run's options
//! that concern a rank's device.

use crate::config::{GpuLayout, HaloPath, Occupancy, Staging, SweepVariant};

/// What the GPU backend is asked for (as narrow as the CPU backend's
/// options): the run's options that concern a rank's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    /// `--device`: the ordinal to use; `None`: by node-local rank.
    pub device: Option<usize>,
    /// Host memory the halo messages are staged in.
    pub staging: Staging,
    /// Whether the boundary planes are swept first, the interior during
    /// the exchange.
    pub overlap: bool,
    /// The sweep kernel's register budget.
    pub occupancy: Occupancy,
    /// The sweep kernel's variant.
    pub sweep: SweepVariant,
    /// How the halo faces move: staged through host buffers, or device to
    /// device.
    pub halo: HaloPath,
    /// How the fields lie in device memory.
    pub layout: GpuLayout,
}
