//! Pictures of a study (`himeno report --plot DIR`): per group, speed-up and
//! efficiency against rank count with the ideal line (and the model's
//! prediction when asked for), and stacked bars of the slowest rank's time
//! per phase. Each is written as SVG and PNG.
//!
//! As HPC scaling plots are read: ranks on a log2 axis with a tick at each
//! rank count measured (1, 2, 4, 8, ...), speed-up on a log2 axis (the
//! ideal is the diagonal), and the number of hosts named on the efficiency
//! points, the phase bars and the captions, since halos that cross hosts
//! cost more than halos within one.
//!
//! Each picture is drawn in memory and written whole under a new name,
//! then renamed into place (`crate::files::write_whole`): a reader never
//! sees a cut picture, and a link planted at a picture's name is replaced,
//! never written through.
//!
//! Text in both formats is laid out with a TrueType font that plotters'
//! `ab_glyph` backend reads from memory, so no font library is linked; the
//! font file is looked up at run time (`HIMENO_FONT`, then common system
//! locations such as Debian's `fonts-dejavu-core`).

use super::group::{Group, Row};
use super::records::Scaling;
use crate::error::{Error, Result};
use crate::hash::fnv1a;
use crate::timing::Phase;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Picture size in pixels.
const SIZE: (u32, u32) = (900, 600);

/// Largest font file read.
const MAX_FONT_BYTES: u64 = 64 << 20;

/// Font files tried in order after `HIMENO_FONT`.
const FONT_CANDIDATES: [&str; 10] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// The colour of `phase` in the stacked bars and timelines.
pub(super) fn phase_colour(phase: Phase) -> RGBColor {
    match phase {
        Phase::Compute => RGBColor(31, 119, 180),
        Phase::Pack => RGBColor(255, 127, 14),
        Phase::Transfer => RGBColor(148, 103, 189),
        Phase::Comm => RGBColor(214, 39, 40),
        Phase::Unpack => RGBColor(44, 160, 44),
        Phase::Allreduce => RGBColor(127, 127, 127),
    }
}

/// Registers a font for plot text once per process.
fn ensure_font() -> Result<()> {
    static FONT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let mut tried: Vec<PathBuf> = Vec::new();
        if let Some(p) = crate::environment::get_os(crate::environment::FONT) {
            tried.push(PathBuf::from(p));
        }
        tried.extend(FONT_CANDIDATES.iter().map(PathBuf::from));
        for path in &tried {
            // A font is a few MiB; a wrong HIMENO_FONT (a device, a disk
            // image) is passed over instead of read whole.
            if let Ok(bytes) =
                crate::files::read_capped(path, MAX_FONT_BYTES, crate::files::Links::Follow)
            {
                // The font table keeps a 'static reference: the bytes live
                // as long as the process, loaded at most once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(
            "--plot needs a TrueType font for the labels and none was found: install \
             fonts-dejavu-core (Debian/Ubuntu) or dejavu-sans-fonts (Fedora), or set \
             HIMENO_FONT=/path/to/font.ttf"
                .to_string(),
        )
    })
    .clone()
    .map_err(Error::usage)
}

/// Registers the font the pictures' text is laid out with (a usage error
/// when none is found), for pictures drawn into memory only (the HTML
/// report's).
pub(super) fn font() -> Result<()> {
    ensure_font()
}

/// Makes `dir` ready for the pictures before anything is printed: a font
/// found, the folder created (not its parents: nothing above what the user
/// named is made) and writable (`files::probe_dir`). So a bad
/// `--plot DIR` is an error before the tables go to stdout, not after.
pub fn prepare(dir: &Path) -> Result<()> {
    ensure_font()?;
    let refuse = |e: &dyn std::fmt::Display| {
        Error::usage(format!(
            "cannot write plots into {}: {e}; choose a writable --plot DIR",
            dir.display()
        ))
    };
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(refuse(&e)),
        _ => {}
    }
    if !dir.is_dir() {
        return Err(refuse(&"it is not a directory"));
    }
    crate::files::probe_dir(dir, 0).map_err(|e| refuse(&e))
}

/// Longest readable part of a picture's file name, in bytes: with the
/// hash and the picture's name the whole stays far below the 255 bytes a
/// file name may have, whatever the label.
const MAX_STEM: usize = 100;

/// The file-name stem of each group's pictures: the group's slug, cut to
/// [`MAX_STEM`] bytes, followed by a hash of the group's full key whenever
/// the slug is not the key itself (characters replaced, or cut), and
/// numbered if still not unique. So `study 1`, `study_1` and `study/1`
/// never overwrite each other's pictures.
fn stems(groups: &[Group]) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    groups
        .iter()
        .map(|g| {
            let slug = g.slug();
            let plain = |s: &str| {
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            };
            // The slug is ASCII: cutting at a byte is cutting at a character.
            let mut stem = slug[..slug.len().min(MAX_STEM)].to_string();
            if !plain(&g.label) || !plain(&g.backend) || slug.len() > MAX_STEM {
                let key = format!(
                    "{:?}\u{0}{}\u{0}{:?}\u{0}{}\u{0}{}\u{0}{}",
                    g.kind, g.label, g.grid, g.backend, g.threads_per_rank, g.temporal
                );
                stem.push_str(&format!("-{:08x}", fnv1a(&key) as u32));
            }
            let mut unique = stem.clone();
            let mut n = 2;
            while !taken.insert(unique.clone()) {
                unique = format!("{stem}-{n}");
                n += 1;
            }
            unique
        })
        .collect()
}

/// The files [`write_all`] writes for `groups` into `dir`, in order: per
/// group and picture, the SVG and the PNG.
pub fn planned(groups: &[Group], dir: &Path) -> Vec<PathBuf> {
    stems(groups)
        .iter()
        .flat_map(|stem| {
            Picture::ALL.into_iter().flat_map(move |pic| {
                ["svg", "png"].map(|ext| dir.join(format!("{stem}-{}.{ext}", pic.name())))
            })
        })
        .collect()
}

/// Writes every group's pictures into `dir` (see [`prepare`]) and returns
/// the paths written.
pub fn write_all(groups: &[Group], dir: &Path) -> Result<Vec<PathBuf>> {
    prepare(dir)?;
    let paths = planned(groups, dir);
    let mut files = paths.iter();
    for g in groups {
        for pic in Picture::ALL {
            let (Some(svg), Some(png)) = (files.next(), files.next()) else {
                return Err(Error::runtime(
                    "the plot files were not planned per picture",
                ));
            };
            write_picture(svg, svg_bytes(SIZE, |a| pic.draw(a, g)))?;
            write_picture(png, png_bytes(SIZE, |a| pic.draw(a, g)))?;
        }
    }
    Ok(paths)
}

/// Every picture of group `g` as SVG text, with its name (`speedup`,
/// `efficiency`, `phases`): the same drawing [`write_all`] writes to the
/// `.svg` files, for pages that hold their pictures inline.
pub fn svg_pictures(g: &Group) -> Result<Vec<(&'static str, String)>> {
    font()?;
    Picture::ALL
        .into_iter()
        .map(|pic| {
            let bytes = svg_bytes(SIZE, |a| pic.draw(a, g)).map_err(|e| {
                Error::runtime(format!("cannot draw the {} picture: {e}", pic.name()))
            })?;
            let text = String::from_utf8(bytes)
                .map_err(|e| Error::runtime(format!("the {} picture: {e}", pic.name())))?;
            Ok((pic.name(), text))
        })
        .collect()
}

/// The picture `draw` makes on a `size` canvas, as SVG text.
pub(super) fn svg_bytes(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> std::result::Result<(), String>,
) -> std::result::Result<Vec<u8>, String> {
    let mut text = String::new();
    {
        let area = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw(&area)?;
    }
    Ok(text.into_bytes())
}

/// The picture `draw` makes on a `size` canvas, as a PNG file's bytes.
pub(super) fn png_bytes(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> std::result::Result<(), String>,
) -> std::result::Result<Vec<u8>, String> {
    let (w, h) = size;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let area = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        draw(&area)?;
    }
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut w| w.write_image_data(&rgb))
        .map_err(|e| format!("cannot encode the PNG: {e}"))?;
    Ok(bytes)
}

/// Writes a drawn picture whole at `path` (see the module's notes).
pub(super) fn write_picture(
    path: &Path,
    drawn: std::result::Result<Vec<u8>, String>,
) -> Result<()> {
    let bytes = drawn.map_err(|e| plot_error(path, &e))?;
    crate::files::write_whole(path, &bytes).map_err(|e| plot_error(path, &e.to_string()))
}

fn plot_error(path: &Path, e: &str) -> Error {
    Error::runtime(format!("cannot draw {}: {e}", path.display()))
}

/// The pictures drawn per group.
#[derive(Debug, Clone, Copy)]
enum Picture {
    Speedup,
    Efficiency,
    Phases,
}

impl Picture {
    const ALL: [Picture; 3] = [Picture::Speedup, Picture::Efficiency, Picture::Phases];

    fn name(self) -> &'static str {
        match self {
            Picture::Speedup => "speedup",
            Picture::Efficiency => "efficiency",
            Picture::Phases => "phases",
        }
    }

    fn draw<DB: DrawingBackend>(
        self,
        area: &DrawingArea<DB, Shift>,
        g: &Group,
    ) -> std::result::Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        match self {
            Picture::Speedup => curve(area, g, false),
            Picture::Efficiency => curve(area, g, true),
            Picture::Phases => phases(area, g),
        }?;
        area.present().map_err(|e| e.to_string())
    }
}

/// For each rank count, in increasing order, the highest value of `f`
/// among its rows.
fn best_per_ranks(rows: &[Row], f: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    let mut best: std::collections::BTreeMap<usize, f64> = std::collections::BTreeMap::new();
    for r in rows {
        let y = f(r);
        best.entry(r.ranks)
            .and_modify(|b| *b = b.max(y))
            .or_insert(y);
    }
    best.into_iter().map(|(x, y)| (x as f64, y)).collect()
}

/// The group's title for a caption, at most [`CAPTION_CHARS`] characters
/// (a label may be as long as a command line; the picture is 900 pixels).
fn caption(g: &Group) -> String {
    let t = g.title();
    if t.chars().count() <= CAPTION_CHARS {
        t
    } else {
        let mut s: String = t.chars().take(CAPTION_CHARS - 1).collect();
        s.push('…');
        s
    }
}

/// Longest caption drawn.
const CAPTION_CHARS: usize = 110;

/// Checks that an axis range is finite before it reaches the plotting
/// library, which loops without end over a non-finite range. Records are
/// checked when read (`records`), so this only guards against arithmetic
/// that still overflows.
fn finite_axis(name: &str, lo: f64, hi: f64) -> std::result::Result<(), String> {
    if lo.is_finite() && hi.is_finite() && lo < hi {
        Ok(())
    } else {
        Err(format!("the {name} axis would run from {lo} to {hi}"))
    }
}

/// The rank axis, in log2 of the rank count: its range (half a doubling
/// beyond the smallest and largest count) and one tick per count measured.
fn rank_axis(rows: &[Row]) -> (Range<f64>, Vec<f64>) {
    let mut ticks: Vec<f64> = rows.iter().map(|r| (r.ranks as f64).log2()).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let lo = ticks.first().copied().unwrap_or(0.0);
    let hi = ticks.last().copied().unwrap_or(0.0);
    (lo - 0.5..hi + 0.5, ticks)
}

/// The label of a tick at `x` on a log2 axis: the value 2^x (1, 2, 4, ...,
/// and 0.5, 0.25, ... below 1).
fn pow2_label(x: &f64) -> String {
    let v = 2f64.powf(*x);
    if v >= 1.0 {
        format!("{}", v.round())
    } else {
        format!("{}", 2f64.powi(x.round() as i32))
    }
}

/// A log2 value axis spanning the positive ones of `values`: its range and
/// ticks at whole powers of two, at most about ten of them.
fn pow2_axis(values: impl Iterator<Item = f64>) -> (Range<f64>, Vec<f64>) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .map(f64::log2)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) };
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    let step = ((last - first) / 10 + 1) as usize;
    let ticks = (first..=last).step_by(step).map(f64::from).collect();
    (lo - 0.3..hi + 0.3, ticks)
}

/// The hosts a group's rows ran on, for captions: "on 2 hosts",
/// "on 1-2 hosts", or nothing when the records do not say.
fn hosts_phrase(rows: &[Row]) -> String {
    let known = rows.iter().map(|r| r.hosts).filter(|&h| h > 0);
    match (known.clone().min(), known.max()) {
        (Some(1), Some(1)) => ", on 1 host".to_string(),
        (Some(a), Some(b)) if a == b => format!(", on {a} hosts"),
        (Some(a), Some(b)) => format!(", on {a}-{b} hosts"),
        _ => String::new(),
    }
}

/// "1 host", "2 hosts".
fn hosts_label(h: usize) -> String {
    if h == 1 {
        "1 host".to_string()
    } else {
        format!("{h} hosts")
    }
}

/// Speed-up (or efficiency) against rank count: measured, ideal, model.
/// Ranks are on a log2 axis with a tick at each count measured; speed-up
/// is on a log2 axis too (the ideal is the diagonal), efficiency on a
/// linear one, with each point marked with the hosts it ran on.
fn curve<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    g: &Group,
    efficiency: bool,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    area.fill(&WHITE).map_err(e)?;
    let n0 = g.base_ranks as f64;
    let base_mflops = g
        .rows
        .iter()
        .filter(|r| r.ranks == g.base_ranks)
        .map(|r| r.mflops)
        .fold(0.0, f64::max);
    let value = |r: &Row| if efficiency { r.efficiency } else { r.speedup };
    let measured = best_per_ranks(&g.rows, value);
    let model: Vec<(f64, f64)> = if base_mflops > 0.0 {
        best_per_ranks(
            &g.rows
                .iter()
                .filter(|r| r.model.is_some())
                .cloned()
                .collect::<Vec<_>>(),
            |r| {
                let s = r.model.map_or(0.0, |m| m.mflops) / base_mflops;
                if efficiency {
                    s * n0 / r.ranks as f64
                } else {
                    s
                }
            },
        )
    } else {
        Vec::new()
    };
    let xmax = g.rows.iter().map(|r| r.ranks).max().unwrap_or(1) as f64;
    let ideal = |x: f64| if efficiency { 1.0 } else { x / n0 };
    // Points in chart coordinates: x = log2 ranks; y = log2 speed-up or
    // the efficiency itself. A speed-up of 0 (no base rate) has no place
    // on a log axis and is left out.
    let to_chart = |(x, y): (f64, f64)| -> Option<(f64, f64)> {
        if efficiency {
            Some((x.log2(), y))
        } else {
            (y > 0.0).then(|| (x.log2(), y.log2()))
        }
    };
    let (xrange, xticks) = rank_axis(&g.rows);
    let (yrange, yticks) = if efficiency {
        let top = g
            .rows
            .iter()
            .map(value)
            .chain(model.iter().map(|p| p.1))
            .fold(1.0, f64::max)
            * 1.15;
        (0.0..top, Vec::new())
    } else {
        pow2_axis(
            g.rows
                .iter()
                .map(value)
                .chain(model.iter().map(|p| p.1))
                .chain([ideal(n0), ideal(xmax)]),
        )
    };
    let kind = match g.kind {
        Scaling::Strong => "speed-up",
        Scaling::Weak => "scaled speed-up",
    };
    let ylabel = if efficiency {
        "parallel efficiency"
    } else {
        kind
    };
    finite_axis("rank", xrange.start, xrange.end)?;
    finite_axis(ylabel, yrange.start, yrange.end)?;
    let caption = format!("{ylabel}: {}{}", caption(g), hosts_phrase(&g.rows));
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            Ticked {
                range: xrange,
                ticks: xticks,
            },
            Ticked {
                ticks: if efficiency {
                    linear_ticks(&yrange)
                } else {
                    yticks
                },
                range: yrange,
            },
        )
        .map_err(e)?;
    let ylabels = |y: &f64| {
        if efficiency {
            format!("{y:.1}")
        } else {
            pow2_label(y)
        }
    };
    chart
        .configure_mesh()
        .x_desc("ranks (log2 scale)")
        .y_desc(if efficiency {
            ylabel.to_string()
        } else {
            format!("{ylabel} (log2 scale)")
        })
        .x_label_formatter(&pow2_label)
        .y_label_formatter(&ylabels)
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    // The ideal line is wide and light, so a curve on top of it stays visible.
    let grey = RGBColor(170, 170, 170);
    let blue = phase_colour(Phase::Compute);
    let lines = [
        (
            [(n0, ideal(n0)), (xmax, ideal(xmax))]
                .into_iter()
                .filter_map(to_chart)
                .collect::<Vec<_>>(),
            grey.stroke_width(5),
            "ideal",
        ),
        (
            measured.iter().copied().filter_map(to_chart).collect(),
            blue.stroke_width(2),
            if g.emulated {
                "measured on an EMULATED GPU (best run per rank count)"
            } else {
                "measured (best run per rank count)"
            },
        ),
    ];
    for (points, style, label) in lines {
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(e)?
            .label(label)
            .legend(line_key(style));
    }
    let all: Vec<(f64, f64)> = g
        .rows
        .iter()
        .filter_map(|r| to_chart((r.ranks as f64, value(r))))
        .collect();
    chart
        .draw_series(all.iter().map(|&p| Circle::new(p, 4, blue.filled())))
        .map_err(e)?;
    if efficiency {
        // Each (ranks, hosts) pair's best point says how many hosts it used.
        let mut marks: Vec<(usize, usize, f64)> = Vec::new();
        for r in g.rows.iter().filter(|r| r.hosts > 0) {
            match marks.iter_mut().find(|m| m.0 == r.ranks && m.1 == r.hosts) {
                Some(m) => m.2 = m.2.max(r.efficiency),
                None => marks.push((r.ranks, r.hosts, r.efficiency)),
            }
        }
        let style = TextStyle::from(("sans-serif", 13)).color(&BLACK);
        chart
            .draw_series(marks.iter().map(|&(ranks, hosts, eff)| {
                EmptyElement::at(((ranks as f64).log2(), eff))
                    + Text::new(hosts_label(hosts), (6, -16), style.clone())
            }))
            .map_err(e)?;
    }
    if !model.is_empty() {
        let red = phase_colour(Phase::Comm);
        let points: Vec<(f64, f64)> = model.iter().copied().filter_map(to_chart).collect();
        chart
            .draw_series(DashedLineSeries::new(
                points.iter().copied(),
                8,
                5,
                red.stroke_width(2),
            ))
            .map_err(e)?
            .label("model")
            .legend(line_key(red.stroke_width(2)));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| TriangleMarker::new(p, 5, red.filled())),
            )
            .map_err(e)?;
    }
    legend(
        &mut chart,
        if efficiency {
            SeriesLabelPosition::LowerLeft
        } else {
            SeriesLabelPosition::UpperLeft
        },
    )
}

/// A linear axis whose ticks are exactly `ticks` (plotters' own choice of
/// round numbers would put fractional rank counts on a log2 axis).
struct Ticked {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let f = if span > 0.0 {
            (v - self.range.start) / span
        } else {
            0.5
        };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Ticks every 0.1 or 0.2 over a linear efficiency range starting at 0.
fn linear_ticks(range: &Range<f64>) -> Vec<f64> {
    let step = if range.end > 1.5 { 0.2 } else { 0.1 };
    (0..)
        .map(|i| f64::from(i) * step)
        .take_while(|v| *v <= range.end)
        .collect()
}

/// Draws the chart's legend box at `position`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| x.to_string())
}

/// The legend key of a line series: a short stroke in the series' style.
fn line_key(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style)
}

/// Stacked bars of the slowest rank's milliseconds per iteration per phase,
/// one bar per row.
fn phases<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    g: &Group,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    area.fill(&WHITE).map_err(e)?;
    let n = g.rows.len();
    let labels: Vec<String> = g
        .rows
        .iter()
        .map(|r| {
            let on = if r.hosts > 0 {
                format!(", {}", hosts_label(r.hosts))
            } else {
                String::new()
            };
            format!(
                "{} ({}x{}x{}){on}",
                r.ranks, r.procs[0], r.procs[1], r.procs[2]
            )
        })
        .collect();
    let ymax = g
        .rows
        .iter()
        .map(|r| r.slowest_phases.total() * 1e3)
        .fold(0.0, f64::max)
        * 1.3;
    let fmt = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            labels.get(*i).cloned().unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    finite_axis("time", 0.0, ymax.max(1e-6))?;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "time per iteration by phase (slowest rank): {}{}",
                caption(g),
                hosts_phrase(&g.rows)
            ),
            ("sans-serif", 16),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        // A discrete range includes its end: 0..n-1 gives one segment per
        // row. A lone row gets a second, empty segment: a range of one
        // segment gives its bar no width (an SVG rect of negative width,
        // which browsers refuse and report).
        .build_cartesian_2d((0..n.max(2) - 1).into_segmented(), 0.0..ymax.max(1e-6))
        .map_err(e)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("ranks (process grid), hosts")
        .y_desc("ms per iteration")
        .x_labels(n)
        .x_label_formatter(&fmt)
        .x_label_style(("sans-serif", if n > 4 { 12 } else { 15 }))
        .y_label_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    for (pi, phase) in Phase::ALL.into_iter().enumerate() {
        if g.rows.iter().all(|r| r.slowest_phases[phase] == 0.0) {
            continue;
        }
        let colour = phase_colour(phase);
        let bars = g.rows.iter().enumerate().map(move |(i, r)| {
            // The bar stacks the phases in `Phase::ALL` order.
            let below: f64 = r.slowest_phases.values()[..pi].iter().sum::<f64>() * 1e3;
            let top = below + r.slowest_phases[phase] * 1e3;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), below),
                    (SegmentValue::Exact(i + 1), top),
                ],
                colour.filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        });
        chart
            .draw_series(bars)
            .map_err(e)?
            .label(phase.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::group::group;
    use crate::study::records::tests::line;
    use crate::study::records::{Loaded, parse};

    fn rows(procs: &[[usize; 3]]) -> Vec<Row> {
        let lines: Vec<String> = procs
            .iter()
            .map(|&p| line("s", [34, 34, 34], p, 100.0))
            .collect();
        let mut l = Loaded::default();
        parse("t", &lines.join("\n"), &mut l);
        group(&l.records).groups.remove(0).rows
    }

    #[test]
    fn ranks_axis_is_log2_with_a_tick_per_measured_count() {
        let r = rows(&[[1, 1, 1], [2, 1, 1], [4, 1, 1], [2, 2, 1], [8, 1, 1]]);
        let (range, ticks) = rank_axis(&r);
        assert_eq!(ticks, [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(range, -0.5..3.5);
        let labels: Vec<String> = ticks.iter().map(pow2_label).collect();
        assert_eq!(labels, ["1", "2", "4", "8"]);
        // Counts that are not powers of two keep their own tick and label.
        let (_, ticks) = rank_axis(&rows(&[[3, 1, 1], [6, 1, 1]]));
        let labels: Vec<String> = ticks.iter().map(pow2_label).collect();
        assert_eq!(labels, ["3", "6"]);
    }

    #[test]
    fn speedup_axis_ticks_at_powers_of_two() {
        let (range, ticks) = pow2_axis([0.3, 1.0, 8.0, 0.0].into_iter());
        assert_eq!(ticks, [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]);
        assert!(range.start < 0.3f64.log2() && range.end > 3.0);
        let labels: Vec<String> = ticks.iter().map(pow2_label).collect();
        assert_eq!(labels, ["0.25", "0.5", "1", "2", "4", "8"]);
        // Many doublings: about ten ticks, still whole powers.
        let (_, ticks) = pow2_axis([1.0, 2f64.powi(30)].into_iter());
        assert!(ticks.len() <= 11 && ticks.iter().all(|t| t.fract() == 0.0));
    }

    #[test]
    fn a_lone_row_gets_a_phase_bar_of_positive_width() {
        let g = {
            let mut l = Loaded::default();
            parse("t", &line("s", [34, 34, 34], [1, 1, 1], 100.0), &mut l);
            group(&l.records).groups.remove(0)
        };
        let pictures = svg_pictures(&g).unwrap();
        let (name, phases) = &pictures[2];
        assert_eq!(*name, "phases");
        assert!(!phases.contains("width=\"-"), "{phases}");
        // The compute bar, in its colour, with a width.
        let bar = phases
            .lines()
            .find(|l| l.starts_with("<rect") && l.contains("fill=\"#1F77B4\""))
            .expect("a compute bar");
        assert!(!bar.contains("width=\"0\""), "{bar}");
    }

    #[test]
    fn captions_name_the_hosts() {
        assert_eq!(hosts_phrase(&rows(&[[1, 1, 1], [2, 1, 1]])), ", on 1 host");
        let mut r = rows(&[[1, 1, 1], [2, 1, 1]]);
        r[1].hosts = 2;
        assert_eq!(hosts_phrase(&r), ", on 1-2 hosts");
        r[0].hosts = 2;
        assert_eq!(hosts_phrase(&r), ", on 2 hosts");
        r.iter_mut().for_each(|x| x.hosts = 0);
        assert_eq!(hosts_phrase(&r), "");
        assert_eq!(hosts_label(1), "1 host");
        assert_eq!(hosts_label(3), "3 hosts");
    }
}
