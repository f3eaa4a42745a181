//! What a host<->device transfer measurement returns, in every build: the
//! GPU backend measures (`himeno bench transfer`), the bench tool
//! summarises and prints.

use serde::{Deserialize, Serialize};

/// One measured copy size in one direction with one kind of memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// `h2d`, `d2h` or `d2d`.
    pub direction: String,
    /// Host memory: `pinned`, `pageable`, or `device` for `d2d`.
    pub memory: String,
    /// Bytes per copy.
    pub bytes: usize,
    /// Copies timed.
    pub copies: u32,
    /// Seconds per copy: host<->device copies are each issued and waited
    /// for on their own; device copies run back to back.
    pub seconds_per_copy: f64,
    /// Bytes moved per second / 1e9; for `d2d` the bytes read plus the
    /// bytes written (2 x size), as stream benchmarks count a copy.
    pub gbytes_per_s: f64,
}

/// A device's transfer measurement: its description and every sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The device measured (name, bus id).
    pub device: String,
    /// Every sample, sizes ascending within each series.
    pub samples: Vec<Sample>,
    /// The emulated CUDA driver's description when the device is one (its
    /// times are the host's).
    pub emulator: Option<String>,
}

/// The (direction, memory) series in report order.
pub const SERIES: [(&str, &str); 5] = [
    ("h2d", "pinned"),
    ("h2d", "pageable"),
    ("d2h", "pinned"),
    ("d2h", "pageable"),
    ("d2d", "device"),
];
