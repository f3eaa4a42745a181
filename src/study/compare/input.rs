//! The input of `himeno report --compare`: files of JSON documents (JSON
//! lines or pretty-printed, one after another), each file one round, each
//! document giving labelled values, read through their own types:
//!
//! - a run record ([`Record`], `--output` or `--format json`): its
//!   `--label`, the value the metric picks;
//! - a `himeno bench stream` report: `stream/triad` and `stream/sum13`
//!   (GB/s);
//! - a `himeno bench pingpong` report: `pingpong/BYTES`, its first
//!   pair's one-way time in microseconds;
//! - a measurement `{"label": L, "value": V}` (with `"better": "lower"`
//!   for times), for what himeno does not measure itself (a C peer).
//!
//! Anything else is an error (exit 2): a comparison of a misread file
//! would mislead.

use super::stats::Better;
use crate::bench::pingpong::PingpongReport;
use crate::bench::stream::report::StreamReport;
use crate::error::{Error, Result};
use crate::files::{self, Links};
use crate::report::Record;
use crate::temporal::Asked;
use serde::Deserialize;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read from one file: far more than any round's records.
const MAX_FILE_BYTES: u64 = 256 << 20;

/// The value a run record gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// MFLOPS (higher is better).
    #[value(name = "mflops")]
    Mflops,
    /// Effective bandwidth, GB/s (higher is better).
    #[value(name = "gbytes_per_s")]
    GbytesPerS,
    /// Seconds of the timed loop (lower is better).
    #[value(name = "wall_s")]
    WallS,
}

impl Metric {
    /// The record field's name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Mflops => "mflops",
            Metric::GbytesPerS => "gbytes_per_s",
            Metric::WallS => "wall_s",
        }
    }

    /// The value of `r` and which way it is better.
    fn of(self, r: &Record) -> (f64, Better) {
        match self {
            Metric::Mflops => (r.mflops, Better::Higher),
            Metric::GbytesPerS => (r.gbytes_per_s, Better::Higher),
            Metric::WallS => (r.wall_s, Better::Lower),
        }
    }
}

/// A measurement himeno did not make.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Measurement {
    label: String,
    value: f64,
    #[serde(default)]
    better: Better,
}

/// One document of an input file.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Doc {
    Run(Box<Record>),
    Stream(Box<StreamReport>),
    Pingpong(Box<PingpongReport>),
    Measured(Measurement),
}

/// One labelled value of one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The value.
    pub value: f64,
    /// Which way it is better.
    pub better: Better,
    /// For a run record: whether its answer passed (`None`: not checked).
    pub verified: Option<Option<bool>>,
    /// For a run record: what it chose (`--temporal auto`'s sweeps, the
    /// kernel variant's code, `4/nopf+ca`), empty when nothing.
    pub chosen: String,
}

/// Every label's values, round by round.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Labels in the order they first appear.
    pub labels: Vec<String>,
    /// Each label's values, one slot per round.
    pub values: HashMap<String, Vec<Option<Value>>>,
    /// Number of rounds (files).
    pub count: usize,
}

/// Reads `files`, one round each, in order.
pub fn read(files: &[PathBuf], metric: Metric) -> Result<Rounds> {
    let mut rounds = Rounds::default();
    for (round, path) in files.iter().enumerate() {
        let text = slurp(path)?;
        let shown = path.display();
        let mut docs = serde_json::Deserializer::from_str(&text).into_iter::<Doc>();
        loop {
            let start = docs.byte_offset();
            let Some(doc) = docs.next() else { break };
            let doc = doc.map_err(|e| {
                // A document that is JSON but none of the kinds has no
                // position of its own: its first line is the one to name.
                let (line, why) = if e.line() > 0 {
                    (e.line(), format!(" ({e})"))
                } else {
                    (line_of(&text, start), String::new())
                };
                Error::usage(format!(
                    "report --compare: {shown}:{line}: not a run record, a bench stream or \
                     ping-pong report, or a {{\"label\", \"value\"}} measurement{why}"
                ))
            })?;
            for (label, value) in values_of(doc, metric, &shown.to_string())? {
                rounds.put(round, label, value, &shown.to_string())?;
            }
        }
    }
    rounds.count = files.len();
    for v in rounds.values.values_mut() {
        v.resize(rounds.count, None);
    }
    Ok(rounds)
}

impl Rounds {
    /// Puts `label`'s `value` into `round`: once per round.
    fn put(&mut self, round: usize, label: String, value: Value, file: &str) -> Result<()> {
        if !value.value.is_finite() || value.value <= 0.0 {
            return Err(Error::usage(format!(
                "report --compare: {file}: {label}'s value {} is not a positive number",
                value.value
            )));
        }
        let slots = self.values.entry(label.clone()).or_insert_with(|| {
            self.labels.push(label.clone());
            Vec::new()
        });
        if slots.len() > round {
            return Err(Error::usage(format!(
                "report --compare: {file}: label '{label}' twice in one round (each file is \
                 one round)"
            )));
        }
        slots.resize(round, None);
        slots.push(Some(value));
        Ok(())
    }
}

/// The labelled values of one document.
fn values_of(doc: Doc, metric: Metric, file: &str) -> Result<Vec<(String, Value)>> {
    let plain = |value: f64, better: Better| Value {
        value,
        better,
        verified: None,
        chosen: String::new(),
    };
    Ok(match doc {
        Doc::Run(r) => {
            let Some(label) = r.label.clone() else {
                return Err(Error::usage(format!(
                    "report --compare: {file}: a run record without a label: run each with \
                     --label"
                )));
            };
            let (value, better) = metric.of(&r);
            vec![(
                label,
                Value {
                    verified: Some(r.verified()),
                    chosen: chosen(&r),
                    ..plain(value, better)
                },
            )]
        }
        Doc::Stream(s) => vec![
            (
                "stream/triad".into(),
                plain(s.triad_gbytes_per_s, Better::Higher),
            ),
            (
                "stream/sum13".into(),
                plain(s.sum13_gbytes_per_s, Better::Higher),
            ),
        ],
        Doc::Pingpong(p) => p
            .pairs
            .first()
            .map(|pair| {
                pair.sizes
                    .iter()
                    .map(|s| {
                        (
                            format!("pingpong/{}", s.bytes),
                            plain(s.latency_us, Better::Lower),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        Doc::Measured(m) => vec![(m.label, plain(m.value, m.better))],
    })
}

/// What run `r` chose: the sweeps `--temporal auto` took, then the code
/// of the kernel variant it calibrated (`4/nopf+ca`, `r16`, `1`).
fn chosen(r: &Record) -> String {
    let mut c = String::new();
    if r.temporal_choice.as_ref().map(|t| t.asked) == Some(Asked::Auto) {
        c = r.temporal.to_string();
    }
    if let Some(k) = &r.kernel_choice {
        if !c.is_empty() {
            c.push('/');
        }
        c.push_str(&k.chosen.code());
    }
    c
}

/// The 1-based line of the first non-blank character of `text` from byte
/// `start` on.
fn line_of(text: &str, start: usize) -> usize {
    let from = text[start..]
        .find(|c: char| !c.is_whitespace())
        .map_or(text.len(), |i| start + i);
    text[..from].matches('\n').count() + 1
}

/// The text of `path`, read through the one safe opener.
fn slurp(path: &Path) -> Result<String> {
    let fail = |e: std::io::Error| {
        Error::usage(format!(
            "report --compare: cannot read {}: {e}",
            path.display()
        ))
    };
    let mut text = String::new();
    files::open_regular(path, MAX_FILE_BYTES, Links::Follow)
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_string(&mut text))
        .map_err(fail)?;
    Ok(text)
}
