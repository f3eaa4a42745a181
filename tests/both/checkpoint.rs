//! The stopped-and-restarted runs the checkpoint tests of both tiers
//! make: their arguments, the uninterrupted reference and its answer.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Timed iterations of every run here.
pub(crate) const PLANNED: u64 = 10;

/// Before which timed iteration the stop signal comes.
pub(crate) const STOP_BEFORE: u64 = 5;

/// A grid every process grid of the table splits with three layers.
pub(crate) const GRID: &str = "13x13x13";

/// The arguments of a checkpointed run.
pub(crate) fn args(procs: &str, temporal: usize, threads: usize, dir: &Path) -> Vec<String> {
    [
        "--grid",
        GRID,
        "--iterations",
        &PLANNED.to_string(),
        "--warmup",
        "2",
        "--format",
        "json",
        "--procs",
        procs,
        "--temporal",
        &temporal.to_string(),
        "--threads",
        &threads.to_string(),
        "--checkpoint-dir",
        dir.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// A command of `args` and `extra` on `np` ranks of `launcher`.
pub(crate) fn command(launcher: Launcher, np: usize, args: &[String], extra: &[&str]) -> Command {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(extra);
    let mut c = ranks(launcher, np, &all);
    c.env_remove("HIMENO_FAULT").env_remove("RUST_LOG");
    c
}

/// The answer of the uninterrupted run: fingerprint and gosa.
pub(crate) fn reference() -> (String, f64) {
    let r = json_ok(&run(himeno(&[
        "--grid",
        GRID,
        "--iterations",
        &PLANNED.to_string(),
        "--warmup",
        "0",
        "--format",
        "json",
    ])));
    answer(&r)
}

/// The fingerprint and gosa of a record.
pub(crate) fn answer(r: &Value) -> (String, f64) {
    (
        r["p_fingerprint"].as_str().unwrap().to_string(),
        r["gosa"].as_f64().unwrap(),
    )
}

/// A fresh checkpoint folder for `name`.
pub(crate) fn fresh_dir(name: &str) -> PathBuf {
    let d = temp_file("ckpt", name);
    let _ = std::fs::remove_dir_all(&d);
    d
}
