//! `himeno report --timeline TRACE`: a Gantt chart of a few timed
//! iterations of a `--trace` file, one row per rank, the phases coloured as
//! in the phase bars of the study plots (SVG and PNG), and a text summary
//! of the same window: how long each rank computed and how long it waited.
//!
//! Waiting is what a timeline is read for: the halo wait (`comm`) and the
//! allreduce of a rank that finished its sweep early stretch while it
//! waits for a slower neighbour, so the row with the least red and grey
//! is the one the others wait for.

use super::{plot, trace_file};
use crate::error::{Error, Result};
use crate::files::{self, Named};
use crate::timing::Phase;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Picture width in pixels; the height grows with the ranks.
const WIDTH: u32 = 1200;

/// Width of the key's column on the right, in pixels.
const KEY_WIDTH: u32 = 130;

/// One phase of one rank in the window, in ms from the window's start.
#[derive(Debug, Clone, PartialEq)]
struct Span {
    rank: usize,
    phase: Phase,
    start_ms: f64,
    end_ms: f64,
}

/// The iterations drawn and what they hold.
#[derive(Debug)]
struct Window {
    ranks: usize,
    first: u64,
    last: u64,
    iterations: u64,
    what: String,
    spans: Vec<Span>,
}

/// What one rank did in the window, in ms.
#[derive(Debug, Clone, Copy, Default)]
struct RankSums {
    compute: f64,
    halo: f64,
    wait: f64,
}

impl Window {
    /// Every rank's sums, in one pass over the spans.
    fn sums(&self) -> Vec<RankSums> {
        let mut sums = vec![RankSums::default(); self.ranks];
        for s in &self.spans {
            let ms = s.end_ms - s.start_ms;
            let r = &mut sums[s.rank];
            match s.phase {
                Phase::Compute => r.compute += ms,
                Phase::Pack | Phase::Unpack | Phase::Transfer => r.halo += ms,
                Phase::Comm | Phase::Allreduce => r.wait += ms,
            }
        }
        sums
    }

    fn end_ms(&self) -> f64 {
        self.spans.iter().map(|s| s.end_ms).fold(0.0, f64::max)
    }
}

/// `x` as printed: a negative zero (an empty sum is one) shows as 0.
fn shown(x: f64) -> f64 {
    x + 0.0
}

/// Reads the trace at `path` and picks `count` timed iterations from
/// `from` (default: the first the trace kept).
fn load(path: &Path, from: Option<u64>, count: u64) -> Result<Window> {
    let t = trace_file::read(path, from, count)?;
    let Some((kept_first, kept_last)) = t.kept else {
        return Err(Error::usage(format!(
            "cannot read the trace {}: it holds no timed iteration; give a file written by \
             `himeno run --trace`",
            path.display()
        )));
    };
    let first = from.unwrap_or(kept_first);
    let last = first.saturating_add(count.max(1) - 1);
    if t.spans.is_empty() {
        return Err(Error::usage(format!(
            "the trace {} holds no timed iteration from {first} to {last} (it kept {}): \
             choose others with --timeline-from",
            path.display(),
            t.kept_text
        )));
    }
    let zero = t.spans.iter().map(|e| e.ts).fold(f64::INFINITY, f64::min);
    let spans = t
        .spans
        .iter()
        .map(|e| {
            // Both within the reader's bound, so the sums stay finite.
            let start_ms = (e.ts - zero) * 1e-3;
            Span {
                rank: e.rank as usize,
                phase: e.phase,
                start_ms,
                end_ms: start_ms + e.dur * 1e-3,
            }
        })
        .collect();
    Ok(Window {
        ranks: t.ranks,
        first,
        last: last.min(kept_last),
        iterations: t.iterations.unwrap_or(kept_last),
        what: format!("grid {}, process grid {}", t.grid, t.process_grid),
        spans,
    })
}

/// Per-rank summary of the window, slowest to wait first.
fn text(w: &Window, written: &[PathBuf]) -> String {
    let mut s = format!(
        "timeline of timed iterations {}-{} of {} ({} ranks, {}):\n",
        w.first, w.last, w.iterations, w.ranks, w.what
    );
    s.push_str("rank  compute_ms  halo_ms  wait_ms  wait_share\n");
    let sums = w.sums();
    for (r, x) in sums.iter().enumerate() {
        let all = x.compute + x.halo + x.wait;
        let share = if all > 0.0 { 100.0 * x.wait / all } else { 0.0 };
        s.push_str(&format!(
            "{r:>4}  {:>10.3}  {:>7.3}  {:>7.3}  {:>9.1}%\n",
            shown(x.compute),
            shown(x.halo),
            shown(x.wait),
            shown(share)
        ));
    }
    let by_wait = |a: &usize, b: &usize| sums[*a].wait.total_cmp(&sums[*b].wait);
    if let (Some(least), Some(most)) = ((0..w.ranks).min_by(by_wait), (0..w.ranks).max_by(by_wait))
    {
        s.push_str(&format!(
            "waiting (halo wait and allreduce): least rank {least} ({:.3} ms), the one the \
             others wait for; most rank {most} ({:.3} ms)\n",
            shown(sums[least].wait),
            shown(sums[most].wait)
        ));
    }
    for p in written {
        s.push_str(&format!("wrote {}\n", p.display()));
    }
    s
}

/// Picture height for `ranks` rows: 18 to 60 pixels a row (the reader
/// allows at most `trace_file::MAX_DRAWN_RANKS`, 18612 pixels).
fn height(ranks: usize) -> u32 {
    let ranks = ranks.clamp(1, trace_file::MAX_DRAWN_RANKS as usize) as u32;
    let row = (640 / ranks).clamp(18, 60);
    180 + row * ranks
}

/// Draws the Gantt chart of `w`.
fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    w: &Window,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    area.fill(&WHITE).map_err(e)?;
    // The key has a column of its own, so that it hides no rank's row.
    let (area, key) = area.split_horizontally(WIDTH - KEY_WIDTH);
    let n = w.ranks.max(1);
    let end = w.end_ms().max(1e-6);
    // Rank 0 on top: row r spans y in [n-1-r-0.5, n-1-r+0.5].
    let row_y = |r: usize| (n - 1 - r) as f64;
    let label = |v: &f64| {
        let r = n as f64 - 1.0 - v.round();
        if (v - v.round()).abs() < 1e-6 && r >= 0.0 {
            format!("rank {r}")
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!(
                "timeline: timed iterations {}-{} of {}, {} ranks, {}",
                w.first, w.last, w.iterations, w.ranks, w.what
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end * 1.01, -0.5..n as f64 - 0.5)
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("ms from the window's start (red and grey: waiting)")
        .y_labels(n.min(32))
        .y_label_formatter(&label)
        .y_label_style(("sans-serif", if n > 16 { 11 } else { 15 }))
        .x_label_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    for phase in Phase::ALL {
        if !w.spans.iter().any(|s| s.phase == phase) {
            continue;
        }
        let colour = plot::phase_colour(phase);
        let bars = w.spans.iter().filter(|s| s.phase == phase).map(|s| {
            let y = row_y(s.rank);
            Rectangle::new(
                [(s.start_ms, y - 0.4), (s.end_ms, y + 0.4)],
                colour.filled(),
            )
        });
        chart.draw_series(bars).map_err(e)?;
    }
    for (i, phase) in Phase::ALL
        .into_iter()
        .filter(|&p| w.spans.iter().any(|s| s.phase == p))
        .enumerate()
    {
        let y = 60 + 24 * i as i32;
        let colour = plot::phase_colour(phase);
        key.draw(&Rectangle::new([(10, y - 7), (24, y + 7)], colour.filled()))
            .map_err(e)?;
        key.draw(&Text::new(
            phase.name(),
            (32, y - 8),
            ("sans-serif", 15).into_font(),
        ))
        .map_err(e)?;
    }
    Ok(())
}

/// Runs `himeno report --timeline`: draws `count` iterations of the trace
/// at `path` from `from` into `dir` (default: beside the trace, named
/// after it) and returns the summary for standard output. A picture that
/// is the trace itself, by any alias, is refused before anything is read.
pub fn report(path: &Path, dir: Option<&Path>, from: Option<u64>, count: u64) -> Result<String> {
    let (dir, stem) = match dir {
        Some(d) => (d.to_path_buf(), "timeline".to_string()),
        None => (
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            format!(
                "{}-timeline",
                path.file_stem()
                    .map_or("trace".into(), |s| s.to_string_lossy())
            ),
        ),
    };
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let outputs = [svg.clone(), png.clone()].map(|p| Named::whole("--timeline's picture", p));
    files::distinct(&outputs, &[Named::new("--timeline", path)])?;
    let w = load(path, from, count)?;
    plot::prepare(&dir)?;
    let size = (WIDTH, height(w.ranks));
    plot::write_picture(&svg, plot::svg_bytes(size, |a| draw(a, &w)))?;
    plot::write_picture(&png, plot::png_bytes(size, |a| draw(a, &w)))?;
    Ok(text(&w, &[svg, png]))
}

/// The timeline of `count` iterations of the trace at `path` from `from`
/// for a page: the text summary and the picture as SVG text, drawn as
/// [`report`] draws its `.svg` file.
pub fn inline(path: &Path, from: Option<u64>, count: u64) -> Result<(String, String)> {
    let w = load(path, from, count)?;
    plot::font()?;
    let size = (WIDTH, height(w.ranks));
    let bytes = plot::svg_bytes(size, |a| draw(a, &w))
        .map_err(|e| Error::runtime(format!("cannot draw the timeline: {e}")))?;
    let svg =
        String::from_utf8(bytes).map_err(|e| Error::runtime(format!("the timeline's SVG: {e}")))?;
    Ok((text(&w, &[]), svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rank_that_waits_least_is_named() {
        let span = |rank, phase, start_ms, end_ms| Span {
            rank,
            phase,
            start_ms,
            end_ms,
        };
        let mut w = Window {
            ranks: 2,
            first: 1,
            last: 1,
            iterations: 1,
            what: "grid g".into(),
            // Rank 1 computes longer; rank 0 waits for it.
            spans: vec![
                span(0, Phase::Compute, 0.0, 1.0),
                span(0, Phase::Comm, 1.0, 3.0),
                span(1, Phase::Compute, 0.0, 2.9),
                span(1, Phase::Comm, 2.9, 3.0),
            ],
        };
        let t = text(&w, &[]);
        assert!(t.contains("least rank 1 (0.100 ms)"), "{t}");
        assert!(t.contains("most rank 0 (2.000 ms)"), "{t}");
        assert!(t.contains("66.7%"), "{t}");
        // Rank 2 drew nothing: its empty sums are no negative zero.
        w.ranks = 3;
        let t = text(&w, &[]);
        assert!(t.contains("   2       0.000    0.000    0.000"), "{t}");
        assert!(!t.contains("-0"), "{t}");
        assert_eq!(height(2), 180 + 120);
        assert_eq!(height(64), 180 + 18 * 64);
        assert_eq!(height(usize::MAX), 180 + 18 * 1024);
    }
}
