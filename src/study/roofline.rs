//! `himeno report --roofline`: the roofline of stored results, drawn
//! without re-running anything. Every run is one point at the kernel's
//! arithmetic intensity (34 flops per 56 bytes of memory traffic per
//! point, [`INTENSITY`]) and its measured GFLOPS; the ceilings are the
//! bandwidths measured beside the runs:
//!
//! - a run's own `--stream quick` figures (stream triad and Sum13), kept
//!   in its record;
//! - `himeno bench stream --format json` reports (`--ceiling FILE`): the
//!   aggregate triad and Sum13 of their ranks and threads;
//! - `himeno bench transfer --format json` reports (`--ceiling FILE`): the
//!   device-to-device copy, the ceiling of GPU runs (one GPU per rank).
//!
//! A run whose fields fit in the cache they are swept from (the node's
//! last-level cache for CPU runs, one GPU's L2 for GPU runs) is marked
//! cache-resident: it reads its fields from the cache, not from memory,
//! so its bandwidth is no fraction of a memory ceiling and none is given
//! (a fraction above 100 % would otherwise read as beating the memory).
//! A run on an emulated GPU is marked EMULATED: its rate is the host
//! CPU's running the emulator.

use super::group::EMULATED_BACKEND;
use super::plot;
use super::records::RunRecord;
use crate::bench::stream::report::StreamReport;
use crate::bench::transfer::TransferReport;
use crate::config::BackendKind;
use crate::error::{Error, Result};
use crate::grid::fields::FIELDS;
use crate::grid::{BYTES_PER_POINT, FLOPS_PER_POINT};
use crate::machine::cache::LastLevel;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The kernel's arithmetic intensity in flops per byte of memory traffic:
/// 34 flops and 56 bytes (13 loads and one store of 4 bytes) per point.
pub const INTENSITY: f64 = FLOPS_PER_POINT / BYTES_PER_POINT;

/// Bytes of fields per grid point: the fourteen `f32` fields every point
/// holds (`grid::fields`), the working set a sweep reads.
pub const FIELD_BYTES_PER_POINT: usize = FIELDS * size_of::<f32>();

/// L2 of the GPUs whose L2 is known, by a word of the device's name: the
/// NVIDIA H100 and H200 (GH100) hold 50 MiB, the A100 40 MiB.
const KNOWN_L2: [(&str, u64); 4] = [
    ("H100", 50 << 20),
    ("H200", 50 << 20),
    ("GH200", 50 << 20),
    ("A100", 40 << 20),
];

/// The L2 the emulated CUDA driver reports for its device (as an H100's).
const EMULATED_L2: u64 = 50 << 20;

/// Most bytes read from one `--ceiling` file.
const MAX_CEILING_FILE: u64 = 64 << 20;

/// One bandwidth ceiling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceiling {
    /// What it is and where it was measured.
    pub name: String,
    /// Bandwidth, GB/s (1e9 bytes).
    pub gbytes_per_s: f64,
    /// Whether it was measured on an emulated GPU (never GPU performance).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
}

/// Where a run's fields were swept from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Residence {
    /// From memory: the fields exceed the cache.
    Memory {
        /// The cache they exceed.
        cache: String,
    },
    /// From the cache: the fields fit in it.
    CacheResident {
        /// The cache they fit in.
        cache: String,
    },
    /// Not known: no cache size for the device.
    Unknown {
        /// Why not.
        why: String,
    },
}

impl Residence {
    /// Whether the fields fit in the cache.
    pub fn cache_resident(&self) -> bool {
        matches!(self, Residence::CacheResident { .. })
    }
}

/// One run on the roofline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Size, ranks and backend, as the plot labels it.
    pub label: String,
    /// The run's location (`file:line`).
    pub source: String,
    /// Backend as grouped (`gpu-emulated` for an emulated GPU).
    pub backend: String,
    /// Number of ranks.
    pub ranks: usize,
    /// Flops per byte of memory traffic ([`INTENSITY`]).
    pub intensity: f64,
    /// GFLOPS of the whole run.
    pub gflops: f64,
    /// Effective bandwidth, GB/s (56 bytes per point and iteration).
    pub gbytes_per_s: f64,
    /// Bytes of fields per node (CPU) or per GPU.
    pub fields_bytes: u64,
    /// Where the fields were swept from.
    pub residence: Residence,
    /// The memory ceiling the run is compared with, if any.
    pub ceiling: Option<Ceiling>,
    /// `gbytes_per_s` over the ceiling; absent when cache-resident or
    /// without a ceiling.
    pub fraction: Option<f64>,
    /// Whether the run was on an emulated GPU.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
}

/// The whole roofline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roofline {
    /// Flops per byte of the kernel.
    pub intensity: f64,
    /// The CPU runs' last-level cache and where its size came from.
    pub llc: String,
    /// Every ceiling drawn, highest first.
    pub ceilings: Vec<Ceiling>,
    /// One point per run.
    pub points: Vec<Point>,
}

/// The documents a `--ceiling` file may hold.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Doc {
    Stream(Box<StreamReport>),
    Transfer(Box<TransferReport>),
}

/// The bench reports of the `--ceiling` files.
#[derive(Debug, Default)]
pub struct Measured {
    /// `bench stream` reports, with their file.
    pub streams: Vec<(StreamReport, String)>,
    /// `bench transfer` reports, with their file.
    pub transfers: Vec<(TransferReport, String)>,
}

/// Reads `--ceiling` files: each holds `bench stream` and `bench transfer`
/// JSON reports, one after another. Anything else is a usage error.
pub fn read_ceilings(files: &[PathBuf]) -> Result<Measured> {
    let mut m = Measured::default();
    for path in files {
        let shown = path.display().to_string();
        let text = crate::files::read_text(path, MAX_CEILING_FILE).map_err(|e| {
            Error::usage(format!(
                "cannot read --ceiling {shown}: {e}; pass the JSON of `himeno bench stream` \
                 or `himeno bench transfer` (--format json)"
            ))
        })?;
        let mut any = false;
        for doc in serde_json::Deserializer::from_str(&text).into_iter::<Doc>() {
            let doc = doc.map_err(|e| {
                Error::usage(format!(
                    "--ceiling {shown}: not a `bench stream` or `bench transfer` JSON report \
                     ({e})"
                ))
            })?;
            any = true;
            match doc {
                Doc::Stream(s) => m.streams.push((*s, shown.clone())),
                Doc::Transfer(t) => m.transfers.push((*t, shown.clone())),
            }
        }
        if !any {
            return Err(Error::usage(format!(
                "--ceiling {shown} holds no `bench stream` or `bench transfer` report"
            )));
        }
    }
    Ok(m)
}

/// The CPU runs' last-level cache: `HIMENO_LLC_BYTES` when set, else a
/// `bench stream` report's (measured where the runs were), else this
/// machine's (sysfs). Returns the node's bytes and the words that say
/// where they came from.
fn cpu_cache(measured: &Measured) -> (u64, String) {
    let stated = crate::environment::get_os(crate::environment::LLC_BYTES).is_some();
    if !stated && let Some((s, file)) = measured.streams.iter().find(|(s, _)| s.llc_bytes > 0) {
        return (
            s.llc_bytes,
            format!(
                "last-level cache {} (bench stream, {file})",
                mb(s.llc_bytes)
            ),
        );
    }
    let llc = LastLevel::detect();
    let from = if stated {
        "HIMENO_LLC_BYTES"
    } else {
        "this machine's, sysfs; HIMENO_LLC_BYTES overrides"
    };
    (
        llc.node_bytes as u64,
        format!("last-level cache {} ({from})", mb(llc.node_bytes as u64)),
    )
}

/// `bytes` in MB (1e6 bytes), as the cache sizes are written.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The L2 of the GPU named `device`, where known.
fn gpu_l2(device: &str, emulated: bool) -> Option<(u64, String)> {
    if emulated {
        return Some((
            EMULATED_L2,
            format!("the emulated GPU's L2 {}", mb(EMULATED_L2)),
        ));
    }
    KNOWN_L2
        .iter()
        .find(|(word, _)| device.contains(word))
        .map(|&(word, bytes)| (bytes, format!("the {word}'s L2 {}", mb(bytes))))
}

/// A point's label: size (grid when custom), ranks, backend, and threads
/// and sweeps per exchange where not one.
fn label(r: &RunRecord, backend: &str) -> String {
    let size = match r.size {
        crate::grid::Size::Custom => format!("{}x{}x{}", r.grid[0], r.grid[1], r.grid[2]),
        s => s.to_string(),
    };
    let mut s = format!(
        "{size}, {} rank{}, {backend}",
        r.ranks,
        if r.ranks == 1 { "" } else { "s" }
    );
    if r.threads_per_rank > 1 {
        let _ = write!(s, " x{} threads", r.threads_per_rank);
    }
    if r.temporal > 1 {
        let _ = write!(s, ", T={}", r.temporal);
    }
    s
}

/// Ranks x threads and hosts of a stream report, as its ceiling names them.
fn stream_shape(s: &StreamReport) -> String {
    let mut hosts: Vec<&str> = s.per_rank.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    format!(
        "{} rank(s) x {} thread(s) on {} host(s)",
        s.ranks,
        s.threads_per_rank,
        hosts.len().max(1)
    )
}

/// The memory ceiling of CPU run `r`: its own `--stream quick` triad, else
/// the triad of the `bench stream` report with its ranks and threads, else
/// the highest one.
fn cpu_ceiling(r: &RunRecord, measured: &Measured) -> Option<Ceiling> {
    if let Some(t) = r.stream_triad_gbytes_per_s.filter(|t| *t > 0.0) {
        return Some(Ceiling {
            name: format!(
                "stream triad, --stream quick of {} rank(s) x {} thread(s)",
                r.ranks, r.threads_per_rank
            ),
            gbytes_per_s: t,
            emulated: false,
        });
    }
    let same = measured
        .streams
        .iter()
        .find(|(s, _)| s.ranks == r.ranks && s.threads_per_rank == r.threads_per_rank);
    let best = || {
        measured
            .streams
            .iter()
            .max_by(|a, b| a.0.triad_gbytes_per_s.total_cmp(&b.0.triad_gbytes_per_s))
    };
    same.or_else(best)
        .filter(|(s, _)| s.triad_gbytes_per_s > 0.0)
        .map(|(s, file)| Ceiling {
            name: format!("stream triad, bench stream of {} ({file})", stream_shape(s)),
            gbytes_per_s: s.triad_gbytes_per_s,
            emulated: false,
        })
}

/// The memory ceiling of GPU run `r`: the device copy of a `bench
/// transfer` report of the same kind (emulated or real), times the ranks
/// (one GPU each).
fn gpu_ceiling(r: &RunRecord, measured: &Measured) -> Option<Ceiling> {
    let (t, file) = measured
        .transfers
        .iter()
        .filter(|(t, _)| t.emulated == r.emulated)
        .filter_map(|(t, f)| t.peak_gbytes_per_s.get("d2d/device").map(|v| (*v, f)))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let gpus = if r.ranks > 1 {
        format!(" x {} GPUs", r.ranks)
    } else {
        String::new()
    };
    Some(Ceiling {
        name: format!("device copy, bench transfer ({file}){gpus}"),
        gbytes_per_s: t * r.ranks as f64,
        emulated: r.emulated,
    })
}

/// Builds the roofline of `records` (those fit for a table: complete and
/// not failed) with the ceilings of the runs and of `measured`.
pub fn build(records: &[RunRecord], measured: &Measured) -> Roofline {
    let (llc_bytes, llc) = cpu_cache(measured);
    let mut points = Vec::new();
    let mut ceilings: Vec<Ceiling> = Vec::new();
    let mut add = |c: &Ceiling| match ceilings.iter_mut().find(|x| x.name == c.name) {
        Some(x) => x.gbytes_per_s = x.gbytes_per_s.max(c.gbytes_per_s),
        None => ceilings.push(c.clone()),
    };
    for (s, file) in &measured.streams {
        for (what, v) in [
            ("stream triad", s.triad_gbytes_per_s),
            ("Sum13", s.sum13_gbytes_per_s),
        ] {
            if v > 0.0 {
                add(&Ceiling {
                    name: format!("{what}, bench stream of {} ({file})", stream_shape(s)),
                    gbytes_per_s: v,
                    emulated: false,
                });
            }
        }
    }
    for (t, file) in &measured.transfers {
        if let Some(&v) = t.peak_gbytes_per_s.get("d2d/device") {
            add(&Ceiling {
                name: format!("device copy, bench transfer ({file})"),
                gbytes_per_s: v,
                emulated: t.emulated,
            });
        }
    }
    for r in records.iter().filter(|r| r.flag().is_none()) {
        let backend = if r.emulated {
            EMULATED_BACKEND.to_string()
        } else {
            r.backend.name().to_string()
        };
        let full_points: u64 = r.grid.iter().map(|&n| n as u64).product();
        let all_fields = full_points.saturating_mul(FIELD_BYTES_PER_POINT as u64);
        let gpu = r.backend == BackendKind::Gpu;
        let (fields_bytes, residence, ceiling) = if gpu {
            let per_gpu = all_fields / r.ranks.max(1) as u64;
            let device = r
                .per_rank
                .first()
                .and_then(|p| p.placement.device.clone())
                .or_else(|| r.provenance.devices.first().cloned())
                .unwrap_or_default();
            let residence = match gpu_l2(&device, r.emulated) {
                Some((l2, cache)) if per_gpu <= l2 => Residence::CacheResident { cache },
                Some((_, cache)) => Residence::Memory { cache },
                None => Residence::Unknown {
                    why: format!(
                        "the L2 of GPU '{}' is not known",
                        if device.is_empty() { "?" } else { &device }
                    ),
                },
            };
            (per_gpu, residence, gpu_ceiling(r, measured))
        } else {
            let per_node = all_fields / r.hosts().max(1) as u64;
            let residence = if per_node <= llc_bytes {
                Residence::CacheResident { cache: llc.clone() }
            } else {
                Residence::Memory { cache: llc.clone() }
            };
            (per_node, residence, cpu_ceiling(r, measured))
        };
        if let Some(c) = &ceiling {
            add(c);
        }
        if let Some(s13) = r.stream_sum13_gbytes_per_s.filter(|v| *v > 0.0 && !gpu) {
            add(&Ceiling {
                name: format!(
                    "Sum13, --stream quick of {} rank(s) x {} thread(s)",
                    r.ranks, r.threads_per_rank
                ),
                gbytes_per_s: s13,
                emulated: false,
            });
        }
        let fraction = match (&residence, &ceiling) {
            (Residence::CacheResident { .. }, _) | (_, None) => None,
            (_, Some(c)) => Some(r.gbytes_per_s / c.gbytes_per_s),
        };
        points.push(Point {
            label: label(r, &backend),
            source: r.source.to_string(),
            backend,
            ranks: r.ranks,
            intensity: INTENSITY,
            gflops: r.mflops / 1e3,
            gbytes_per_s: r.gbytes_per_s,
            fields_bytes,
            residence,
            ceiling,
            fraction,
            emulated: r.emulated,
        });
    }
    ceilings.sort_by(|a, b| b.gbytes_per_s.total_cmp(&a.gbytes_per_s));
    Roofline {
        intensity: INTENSITY,
        llc,
        ceilings,
        points,
    }
}

/// The words a point's fraction of its ceiling is printed as.
fn fraction_text(p: &Point) -> String {
    match (&p.residence, p.fraction) {
        (Residence::CacheResident { .. }, _) => "cache-resident".to_string(),
        (_, None) => "no ceiling".to_string(),
        (Residence::Unknown { .. }, Some(f)) if f > 1.0 => {
            format!("{:.0}% (above memory: cache?)", 100.0 * f)
        }
        (_, Some(f)) => format!("{:.0}%", 100.0 * f),
    }
}

/// A point's figures as the tables show them (the text table and the
/// HTML page, each with its own widths or tags): GFLOPS, GB/s, the
/// fields' MB, the memory ceiling's GB/s (`-` without one) and the words
/// of its fraction of it.
pub fn figures(p: &Point) -> [String; 5] {
    [
        format!("{:.3}", p.gflops),
        format!("{:.2}", p.gbytes_per_s),
        format!("{:.1}", p.fields_bytes as f64 / 1e6),
        p.ceiling
            .as_ref()
            .map_or("-".to_string(), |c| format!("{:.2}", c.gbytes_per_s)),
        fraction_text(p),
    ]
}

/// The roofline as a text table.
pub fn text(r: &Roofline) -> String {
    let mut s = format!(
        "== roofline: {:.3} flop/byte (34 flops per 56 bytes a point); CPU runs against the {} ==\n",
        r.intensity, r.llc
    );
    if r.ceilings.is_empty() {
        s.push_str(
            " no bandwidth ceiling: run with --stream quick, or pass --ceiling FILE with \
             `himeno bench stream --format json` (CPU) or `bench transfer --format json` (GPU)\n",
        );
    }
    for c in &r.ceilings {
        let emu = if c.emulated { " [EMULATED]" } else { "" };
        let _ = writeln!(
            s,
            " ceiling {:>10.2} GB/s = {:>9.2} GFLOPS at this intensity: {}{emu}",
            c.gbytes_per_s,
            c.gbytes_per_s * r.intensity,
            c.name
        );
    }
    let _ = writeln!(
        s,
        " {:<34} {:>10} {:>9} {:>11} {:>12} {:>24}  source",
        "run", "GFLOPS", "GB/s", "fields MB", "ceiling GB/s", "of memory ceiling"
    );
    for p in &r.points {
        let emu = if p.emulated { " EMULATED" } else { "" };
        let [gflops, gbs, mb, ceiling, fraction] = figures(p);
        let _ = writeln!(
            s,
            " {:<34} {gflops:>10} {gbs:>9} {mb:>11} {ceiling:>12} {fraction:>24}  {}{emu}",
            p.label, p.source
        );
    }
    let _ = writeln!(
        s,
        " (cache-resident: the fields fit in the cache they are swept from, so no fraction of \
         a memory ceiling is given)"
    );
    s.push('\n');
    s
}

/// The colour of a point's backend.
fn backend_colour(backend: &str) -> RGBColor {
    match backend {
        "cpu" => RGBColor(31, 119, 180),
        "gpu" => RGBColor(44, 160, 44),
        _ => RGBColor(255, 127, 14),
    }
}

/// Picture size in pixels.
pub const SIZE: (u32, u32) = (1200, 650);

/// Width of the key's column on the right, in pixels.
const KEY_WIDTH: u32 = 480;

/// The most points the key names one by one.
const KEY_POINTS: usize = 16;

/// Longest line of the key, in characters.
const KEY_CHARS: usize = 66;

/// Ceilings within this ratio of each other are drawn as one line: the
/// quick streams of runs of one machine with other ranks and threads
/// differ by a few percent.
const SAME_CEILING: f64 = 1.1;

/// One line drawn for one or more ceilings.
struct Line {
    gbytes_per_s: f64,
    words: String,
    emulated: bool,
}

/// The ceilings as drawn: highest first, those within [`SAME_CEILING`] of
/// the line above (and of its kind, emulated or not) merged into it.
fn lines(r: &Roofline) -> Vec<Line> {
    let mut out: Vec<(Line, usize)> = Vec::new();
    for c in &r.ceilings {
        match out.last_mut() {
            Some((l, more))
                if l.emulated == c.emulated && l.gbytes_per_s <= c.gbytes_per_s * SAME_CEILING =>
            {
                *more += 1;
            }
            _ => out.push((
                Line {
                    gbytes_per_s: c.gbytes_per_s,
                    words: format!(
                        "{}{:.1} GB/s: {}",
                        if c.emulated { "[EMULATED] " } else { "" },
                        c.gbytes_per_s,
                        c.name,
                    ),
                    emulated: c.emulated,
                },
                0,
            )),
        }
    }
    out.into_iter()
        .map(|(mut l, more)| {
            if more > 0 {
                l.words = format!("(+{more} within 10%) {}", l.words);
            }
            l
        })
        .collect()
}

/// An axis label: two significant digits, no float noise.
fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `s` cut to [`KEY_CHARS`] characters.
fn cut(s: &str) -> String {
    if s.chars().count() <= KEY_CHARS {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(KEY_CHARS - 1).collect();
        t.push('…');
        t
    }
}

/// The colour of the `i`th ceiling line.
fn line_colour(i: usize) -> RGBColor {
    [
        RGBColor(0, 0, 0),
        RGBColor(140, 86, 75),
        RGBColor(148, 103, 189),
        RGBColor(110, 110, 110),
    ][i % 4]
}

/// Draws the roofline: GFLOPS against flops per byte, both on log axes,
/// each ceiling a dashed line `GFLOPS = GB/s x intensity`, each run a
/// numbered point at the kernel's intensity (spread a little sideways so
/// that runs of similar rates stay apart), cache-resident runs hollow; the
/// key in a column of its own on the right.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    r: &Roofline,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    area.fill(&WHITE).map_err(e)?;
    let (area, key) = area.split_horizontally(SIZE.0 - KEY_WIDTH);
    let drawn = lines(r);
    let (x0, x1) = (r.intensity / 8.0, r.intensity * 8.0);
    let values = r
        .points
        .iter()
        .map(|p| p.gflops)
        .chain(drawn.iter().map(|l| l.gbytes_per_s * r.intensity))
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (lo / 3.0, hi * 3.0)
    } else {
        (0.1, 10.0)
    };
    if !(lo > 0.0 && hi.is_finite() && lo < hi) {
        return Err(format!("the GFLOPS axis would run from {lo} to {hi}"));
    }
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!(
                "roofline: 34 flops / 56 bytes = {:.3} flop/byte",
                r.intensity
            ),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (lo..hi).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity, flop/byte (log scale)")
        .y_desc("GFLOPS (log scale)")
        .x_labels(6)
        .x_label_formatter(&|x: &f64| short(*x))
        .y_label_formatter(&|y: &f64| short(*y))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    // The kernel's intensity, where every run sits.
    chart
        .draw_series(LineSeries::new(
            [(r.intensity, lo), (r.intensity, hi)],
            RGBColor(190, 190, 190).stroke_width(1),
        ))
        .map_err(e)?;
    for (i, l) in drawn.iter().enumerate() {
        // Clipped to the chart: from where the line enters to where it leaves.
        let from = x0.max(lo / l.gbytes_per_s);
        let to = x1.min(hi / l.gbytes_per_s);
        if from < to {
            chart
                .draw_series(DashedLineSeries::new(
                    [(from, l.gbytes_per_s * from), (to, l.gbytes_per_s * to)],
                    10,
                    4,
                    line_colour(i).stroke_width(2),
                ))
                .map_err(e)?;
        }
    }
    let n = r.points.len();
    let spot = |i: usize| {
        // Spread over a fifth of a doubling either side of the intensity.
        let offset = if n > 1 {
            (i as f64 / (n - 1) as f64 - 0.5) * 0.4
        } else {
            0.0
        };
        r.intensity * 2f64.powf(offset)
    };
    let style = |p: &Point| {
        let colour = backend_colour(&p.backend);
        if p.residence.cache_resident() {
            colour.stroke_width(2)
        } else {
            colour.filled()
        }
    };
    for (i, p) in r.points.iter().enumerate() {
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((spot(i), p.gflops))
                    + Circle::new((0, 0), 5, style(p))
                    + Text::new(
                        format!("{}", i + 1),
                        (7, -7),
                        ("sans-serif", 12).into_font(),
                    ),
            ))
            .map_err(e)?;
    }
    // The key: the ceilings, then the runs.
    let font = ("sans-serif", 13).into_font();
    let mut y = 30;
    let say = |words: &str, y: &mut i32| -> std::result::Result<(), String> {
        key.draw(&Text::new(cut(words), (34, *y - 7), font.clone()))
            .map_err(e)?;
        *y += 20;
        Ok(())
    };
    say("ceilings (measured bandwidth x intensity):", &mut y)?;
    if drawn.is_empty() {
        say("none: run with --stream quick or pass --ceiling", &mut y)?;
    }
    for (i, l) in drawn.iter().enumerate() {
        key.draw(&PathElement::new(
            [(6, y), (28, y)],
            line_colour(i).stroke_width(2),
        ))
        .map_err(e)?;
        say(&l.words, &mut y)?;
    }
    y += 10;
    say("runs (hollow: cache-resident, no memory fraction):", &mut y)?;
    for (i, p) in r.points.iter().enumerate().take(KEY_POINTS) {
        key.draw(&Circle::new((17, y), 5, style(p))).map_err(e)?;
        let mut words = format!("{}: {}", i + 1, p.label);
        if p.emulated {
            words.push_str(" EMULATED");
        }
        if p.residence.cache_resident() {
            words.push_str(", cache-resident");
        } else if let Some(f) = p.fraction {
            let _ = write!(words, ", {:.0}% of its ceiling", 100.0 * f);
        }
        say(&words, &mut y)?;
    }
    if n > KEY_POINTS {
        say(
            &format!("... {} more runs: see the table", n - KEY_POINTS),
            &mut y,
        )?;
    }
    if r.points.iter().any(|p| p.emulated) || drawn.iter().any(|l| l.emulated) {
        y += 10;
        say("EMULATED: the host CPU running an emulator,", &mut y)?;
        say("never GPU performance", &mut y)?;
    }
    key.present().map_err(|x| x.to_string())
}

/// The roofline's SVG and PNG files in `dir`.
pub fn planned(dir: &Path) -> [PathBuf; 2] {
    ["svg", "png"].map(|ext| dir.join(format!("roofline.{ext}")))
}

/// The roofline as SVG text (the same drawing as the files).
pub fn svg(r: &Roofline) -> Result<String> {
    plot::font()?;
    let bytes = plot::svg_bytes(SIZE, |a| draw(a, r))
        .map_err(|e| Error::runtime(format!("cannot draw the roofline: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Error::runtime(format!("the roofline's SVG: {e}")))
}

/// Writes the roofline's SVG and PNG into `dir` (ready: `plot::prepare`).
pub fn write(r: &Roofline, dir: &Path) -> Result<Vec<PathBuf>> {
    let [svg, png] = planned(dir);
    plot::write_picture(&svg, plot::svg_bytes(SIZE, |a| draw(a, r)))?;
    plot::write_picture(&png, plot::png_bytes(SIZE, |a| draw(a, r)))?;
    Ok(vec![svg, png])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::records::tests::{line, records_of};

    fn records(lines: &[String]) -> Vec<RunRecord> {
        records_of("r.jsonl", lines)
    }

    fn with(line: String, f: impl Fn(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        f(&mut v);
        v.to_string()
    }

    #[test]
    fn intensity_is_34_flops_per_56_bytes() {
        assert!((INTENSITY - 34.0 / 56.0).abs() < 1e-15);
        assert_eq!(FIELD_BYTES_PER_POINT, 56);
        // The original's size S, 65 x 65 x 129 points of 56 bytes: 30.5 MB.
        assert_eq!(65 * 65 * 129 * FIELD_BYTES_PER_POINT, 30_521_400);
    }

    #[test]
    fn runs_get_their_own_quick_stream_ceiling_and_cache_marks() {
        // Large grid from memory with its own triad; a small one in the cache.
        let big = with(line("r", [1026, 1026, 514], [1, 1, 1], 20_000.0), |v| {
            v["gbytes_per_s"] = 32.9.into();
            v["stream_triad_gbytes_per_s"] = 40.0.into();
            v["stream_sum13_gbytes_per_s"] = 36.0.into();
        });
        let small = with(line("r", [10, 10, 10], [1, 1, 1], 9_000.0), |v| {
            v["gbytes_per_s"] = 80.0.into();
            v["stream_triad_gbytes_per_s"] = 40.0.into();
        });
        let r = build(&records(&[big, small]), &Measured::default());
        assert_eq!(r.points.len(), 2);
        let (p, q) = (&r.points[0], &r.points[1]);
        assert!(!p.residence.cache_resident(), "{:?}", p.residence);
        assert!((p.fraction.unwrap() - 32.9 / 40.0).abs() < 1e-12);
        assert!((p.gflops - 20.0).abs() < 1e-12);
        // 80 GB/s against 40 would read as 200 %: it is cache-resident.
        assert!(q.residence.cache_resident());
        assert_eq!(q.fraction, None);
        assert_eq!(fraction_text(q), "cache-resident");
        let names: Vec<&str> = r.ceilings.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].starts_with("stream triad") && names[1].starts_with("Sum13"));
        let t = text(&r);
        assert!(t.contains("cache-resident") && t.contains("82%"), "{t}");
    }

    #[test]
    fn gpu_runs_take_the_device_copy_and_size_s_fits_an_h100_l2() {
        let gpu = |grid: [usize; 3], device: &str, emulated: bool| {
            with(line("g", grid, [1, 1, 1], 100_000.0), |v| {
                v["backend"] = "gpu".into();
                v["gbytes_per_s"] = 1000.0.into();
                v["per_rank"][0]["placement"] =
                    format!("gpu x1 threads, device GPU 0: {device} (sm_90, 80 GiB)").into();
                if emulated {
                    v["per_rank"][0]["emulated"] = true.into();
                }
            })
        };
        let transfer = |emulated: bool, d2d: f64| TransferReport {
            host: "h".into(),
            device: "d".into(),
            samples: Vec::new(),
            latency_us: Default::default(),
            peak_gbytes_per_s: [("d2d/device".to_string(), d2d)].into(),
            emulated,
            emulator: emulated.then(|| "emu".to_string()),
        };
        let measured = Measured {
            streams: Vec::new(),
            transfers: vec![
                (transfer(false, 2500.0), "t.json".into()),
                (transfer(true, 5.0), "e.json".into()),
            ],
        };
        let r = build(
            &records(&[
                gpu([65, 65, 129], "NVIDIA H100 80GB HBM3", false),
                gpu([129, 129, 257], "NVIDIA H200", false),
                gpu([65, 65, 129], "himeno emulated GPU", true),
                gpu([65, 65, 129], "Mystery GPU", false),
            ]),
            &measured,
        );
        let p = &r.points;
        assert!(p[0].residence.cache_resident(), "{:?}", p[0].residence);
        assert!(!p[1].residence.cache_resident());
        assert!((p[1].fraction.unwrap() - 1000.0 / 2500.0).abs() < 1e-12);
        assert!(p[2].emulated && p[2].residence.cache_resident());
        assert_eq!(p[2].backend, EMULATED_BACKEND);
        assert!(p[2].ceiling.as_ref().unwrap().emulated);
        assert!(matches!(p[3].residence, Residence::Unknown { .. }));
        assert!(text(&r).contains("EMULATED"));
    }
}
