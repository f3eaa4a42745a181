//! What a rank tells rank 0 of its readings: each counter's delta or why
//! it has none, its node's window, the sources that did not apply.

use super::counters::Role;
use serde::{Deserialize, Serialize};

/// One counter's outcome between the two readings, as a rank sends it to
/// rank 0.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceView {
    /// Its name (`RAPL package-0`, `Cray energy`, `NVML GPU-...`).
    pub name: String,
    /// How it enters its node's sum.
    pub role: Role,
    /// Microjoules between the readings, when both were read and it
    /// advanced (or wrapped once).
    pub delta_uj: Option<u64>,
    /// Whether it wrapped around between the readings.
    pub wrapped: bool,
    /// Why there is no delta.
    pub problem: Option<String>,
    /// The emulator's description, for an emulated GPU's counter.
    pub emulated: Option<String>,
}

/// What a node's leader read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    /// Seconds between the first and the last reading.
    pub window_s: f64,
    /// The test tree read, when it was one.
    pub test_tree: Option<String>,
    /// Its counters.
    pub sources: Vec<SourceView>,
    /// The sources that did not apply, and why.
    pub absent: Vec<String>,
}

/// What one rank read: its node's counters if it leads the node, its
/// GPU's if it drives one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankView {
    /// The rank's host: the node its readings belong to.
    pub host: String,
    /// The node's counters (the node-local leader only).
    pub node: Option<NodeView>,
    /// The rank's GPU counter.
    pub gpu: Option<SourceView>,
}
