//! Reading a `--trace` file for `himeno report --timeline` in bounded
//! time and memory, whatever the file holds.
//!
//! The file is named by the user, so nothing in it is trusted: it is
//! opened as a regular file of at most [`MAX_TRACE_BYTES`]
//! (`files::open_regular`: no FIFO, device or directory), parsed as it
//! is read into typed fields (never into a value tree of the whole
//! document), and only the events of the window asked for are kept, at
//! most [`MAX_SPANS`] of them. Every number is checked before it is used:
//! a rank count up to [`MAX_DRAWN_RANKS`], every event's rank below it, times
//! and lengths finite, lengths not negative, both within [`MAX_US`]; anything
//! else is refused with one line naming the limit.

use crate::error::{Error, Result};
use crate::files::{self, Links};
use crate::timing::Phase;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::io::BufReader;
use std::path::Path;

/// Largest trace file read (a trace of 1024 ranks keeping the default 500
/// iterations at each end is about 2 GiB).
pub const MAX_TRACE_BYTES: u64 = 4 << 30;

/// Most ranks a timeline draws, one row each (the picture's height grows
/// with them).
pub const MAX_DRAWN_RANKS: u64 = 1024;

/// Most phase events in the drawn window.
pub const MAX_SPANS: usize = 200_000;

/// Largest time or length taken, in microseconds (about 31 years).
pub const MAX_US: f64 = 1e15;

/// Longest text field shown from the file (the grid, the kept iterations).
const MAX_TEXT: usize = 256;

/// One phase of one rank in the window, as the file gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSpan {
    /// Rank (the event's `pid`).
    pub rank: u64,
    /// Phase.
    pub phase: Phase,
    /// Timed iteration.
    pub iteration: u64,
    /// Start, in µs.
    pub ts: f64,
    /// Length, in µs.
    pub dur: f64,
}

/// What the reader keeps of a trace.
#[derive(Debug, Default)]
pub struct Trace {
    /// `otherData.ranks`.
    pub ranks: usize,
    /// The timed events of the window asked for.
    pub spans: Vec<RawSpan>,
    /// The first and last timed iteration of the file, when it has any.
    pub kept: Option<(u64, u64)>,
    /// `otherData.kept`.
    pub kept_text: String,
    /// `otherData.run.iterations`.
    pub iterations: Option<u64>,
    /// `otherData.run.grid` and `.process_grid`.
    pub grid: String,
    /// The process grid.
    pub process_grid: String,
}

/// `args` of an event.
#[derive(Deserialize)]
struct RawArgs {
    iteration: Option<u64>,
}

/// One event of `traceEvents`, typed: a field of another type is an error.
#[derive(Deserialize)]
struct RawEvent {
    ph: Option<String>,
    cat: Option<String>,
    name: Option<String>,
    pid: Option<u64>,
    // Read only so that a `tid` that is no track number is refused.
    #[allow(dead_code)]
    tid: Option<u64>,
    ts: Option<f64>,
    dur: Option<f64>,
    args: Option<RawArgs>,
}

/// `otherData.run`.
#[derive(Deserialize, Default)]
struct RunAbout {
    iterations: Option<u64>,
    grid: Option<String>,
    process_grid: Option<String>,
}

/// `otherData`.
#[derive(Deserialize)]
struct Other {
    format: Option<String>,
    ranks: Option<u64>,
    kept: Option<String>,
    #[serde(default)]
    run: RunAbout,
}

/// Keeps the events of the window as they are parsed: iterations
/// `from..from + count` (with no `from`, from the lowest timed iteration
/// seen so far, the window moving down as lower ones come).
struct Collect {
    from: Option<u64>,
    count: u64,
    lowest: Option<u64>,
    highest: u64,
    /// The highest rank (`pid`) of any complete event.
    top_rank: Option<u64>,
    spans: Vec<RawSpan>,
}

impl Collect {
    /// The window's first iteration now.
    fn first(&self) -> Option<u64> {
        self.from.or(self.lowest)
    }

    fn in_window(&self, it: u64) -> bool {
        self.first().is_some_and(|f| it >= f && it - f < self.count)
    }

    /// Takes one event, or says why the file is refused.
    fn take(&mut self, e: RawEvent) -> std::result::Result<(), String> {
        if e.ph.as_deref() != Some("X") {
            return Ok(());
        }
        let (ts, dur) = (e.ts.unwrap_or(0.0), e.dur.unwrap_or(0.0));
        if !(ts.is_finite() && ts.abs() <= MAX_US) {
            return Err(format!("an event's time ts {ts} is beyond {MAX_US:e} µs"));
        }
        if !(dur.is_finite() && (0.0..=MAX_US).contains(&dur)) {
            return Err(format!(
                "an event's length dur {dur} is not between 0 and {MAX_US:e} µs"
            ));
        }
        let rank = e.pid.unwrap_or(0);
        self.top_rank = self.top_rank.max(Some(rank));
        if e.cat.as_deref() != Some("timed") {
            return Ok(());
        }
        let iteration = e.args.and_then(|a| a.iteration).unwrap_or(0);
        if self.lowest.is_none_or(|l| iteration < l) {
            self.lowest = Some(iteration);
            if self.from.is_none() {
                let (f, n) = (iteration, self.count);
                self.spans.retain(|s| s.iteration - f < n);
            }
        }
        self.highest = self.highest.max(iteration);
        let Some(phase) = e.name.as_deref().and_then(Phase::from_name) else {
            return Ok(());
        };
        if !self.in_window(iteration) {
            return Ok(());
        }
        if self.spans.len() >= MAX_SPANS {
            return Err(format!(
                "the drawn iterations hold more than {MAX_SPANS} phase events, the most \
                 drawn: choose fewer with --timeline-count"
            ));
        }
        self.spans.push(RawSpan {
            rank,
            phase,
            iteration,
            ts,
            dur,
        });
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &mut Collect {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for &mut Collect {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(e) = seq.next_element::<RawEvent>()? {
            self.take(e).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// The whole document: its events through [`Collect`], `otherData` typed,
/// anything else skipped.
struct Document<'a> {
    collect: &'a mut Collect,
    other: Option<Other>,
}

impl<'de> Visitor<'de> for &mut Document<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace object with traceEvents and otherData")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => map.next_value_seed(&mut *self.collect)?,
                "otherData" => self.other = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A text field of the file, refused when longer than [`MAX_TEXT`].
fn short(what: &str, s: Option<String>) -> std::result::Result<String, String> {
    match s {
        Some(s) if s.len() > MAX_TEXT => {
            Err(format!("its {what} is longer than {MAX_TEXT} characters"))
        }
        Some(s) => Ok(s),
        None => Ok("?".into()),
    }
}

/// Reads the trace at `path`, keeping the timed events of iterations
/// `from..from + count` (default: from the first the file kept). Every
/// refusal is a usage error whose text says what the file is.
pub fn read(path: &Path, from: Option<u64>, count: u64) -> Result<Trace> {
    let refuse = |why: String| {
        Error::usage(format!(
            "cannot read the trace {}: {why}; give a file written by `himeno run --trace`",
            path.display()
        ))
    };
    let file = files::open_regular(path, MAX_TRACE_BYTES, Links::Follow)
        .map_err(|e| refuse(e.to_string()))?;
    let reader = BufReader::with_capacity(1 << 20, std::io::Read::take(file, MAX_TRACE_BYTES));
    let mut collect = Collect {
        from,
        count: count.max(1),
        lowest: None,
        highest: 0,
        top_rank: None,
        spans: Vec::new(),
    };
    let mut doc = Document {
        collect: &mut collect,
        other: None,
    };
    let mut de = serde_json::Deserializer::from_reader(reader);
    de.deserialize_map(&mut doc)
        .and_then(|()| de.end())
        .map_err(|e| refuse(e.to_string()))?;
    let other = doc.other.take();
    let Some(other) = other.filter(|o| o.format.as_deref() == Some("himeno-trace-1")) else {
        return Err(refuse("it is not a himeno trace".into()));
    };
    let ranks = other.ranks.unwrap_or(0);
    if ranks > MAX_DRAWN_RANKS {
        return Err(refuse(format!(
            "it says it holds {ranks} ranks; a timeline draws at most {MAX_DRAWN_RANKS}"
        )));
    }
    if let Some(top) = collect.top_rank.filter(|&r| r >= ranks) {
        return Err(refuse(format!(
            "an event of rank {top} is beyond its {ranks} ranks"
        )));
    }
    let text = |what, s| short(what, s).map_err(&refuse);
    Ok(Trace {
        ranks: ranks as usize,
        kept: collect.lowest.map(|l| (l, collect.highest)),
        spans: collect.spans,
        kept_text: text("kept", other.kept)?,
        iterations: other.run.iterations,
        grid: text("grid", other.run.grid)?,
        process_grid: text("process grid", other.run.process_grid)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(iteration: u64, ts: f64) -> RawEvent {
        RawEvent {
            ph: Some("X".into()),
            cat: Some("timed".into()),
            name: Some("compute".into()),
            pid: Some(0),
            tid: Some(1),
            ts: Some(ts),
            dur: Some(1.0),
            args: Some(RawArgs {
                iteration: Some(iteration),
            }),
        }
    }

    #[test]
    fn the_window_follows_the_lowest_iteration_seen() {
        let mut c = Collect {
            from: None,
            count: 2,
            lowest: None,
            highest: 0,
            top_rank: None,
            spans: Vec::new(),
        };
        for it in [5, 6, 7, 3, 4, 9] {
            c.take(event(it, it as f64)).unwrap();
        }
        let kept: Vec<u64> = c.spans.iter().map(|s| s.iteration).collect();
        assert_eq!(kept, [3, 4]);
        assert_eq!((c.lowest, c.highest), (Some(3), 9));
        assert!(c.take(event(1, f64::INFINITY)).is_err());
        assert!(c.take(event(1, 2e15)).is_err());
        let mut negative = event(1, 0.0);
        negative.dur = Some(-1.0);
        assert!(c.take(negative).is_err());
    }
}
