//! Scaling studies: `himeno report` (results files -> grouped tables and
//! plots) and `himeno model` (a performance model from a single-rank rate
//! and ping-pong numbers).
//!
//! - [`records`]: lenient reading of JSON-lines results files;
//! - [`group`]: grouping into strong/weak studies, speed-up and efficiency;
//! - [`cells`]: the headings and cells of a group's table, for text and HTML;
//! - [`table`]: text, CSV and JSON renderings;
//! - [`plot`]: SVG and PNG pictures;
//! - [`model`]: the performance model;
//! - [`plan`]: `himeno plan`, the runs of study definitions;
//! - [`compare`]: `himeno report --compare`, best, median and paired
//!   ratios of labelled runs over rounds (the benchmark scripts' tables);
//! - [`timeline`]: `himeno report --timeline`, the Gantt chart of a trace;
//! - [`trace_file`]: reading a trace in bounded time and memory;
//! - [`roofline`]: `himeno report --roofline`, runs against the measured
//!   bandwidth ceilings;
//! - [`export`]: `--format bencher` and `--format gbench`, input for
//!   regression dashboards;
//! - [`html`]: `--html FILE`, the whole study as one self-contained page;
//! - [`gpu_model`]: `himeno model --gpu`, the GPU sweep's variants;
//! - [`gpu_halo_model`]: with more than one rank, each `--halo` path's
//!   iteration and its strong scaling from one GPU.

pub mod cells;
pub mod compare;
pub mod export;
pub mod gpu_halo_model;
pub mod gpu_model;
pub mod group;
pub mod html;
pub mod model;
pub mod plan;
pub mod plot;
pub mod records;
pub mod roofline;
pub mod slurm_energy;
pub mod slurm_join;
pub mod table;
pub mod timeline;
pub mod trace_file;

use crate::args::ProblemArgs;
use crate::error::{self, Error, Result};
use crate::files::{self, Named};
use crate::grid::decomp::ProcGrid;
use crate::grid::{FLOPS_PER_POINT, Grid, Preset};
use crate::output::{self, Format};
use crate::problem::Ranks;
use clap::Args;
use model::{Network, Prediction};
use records::RunRecord;
use std::path::PathBuf;
use std::process::ExitCode;

/// The formats of `himeno report`'s standard output: those of every
/// command, and the regression dashboards' ([`export`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Tables, for people.
    Text,
    /// One JSON object.
    Json,
    /// A CSV header and rows.
    Csv,
    /// Bencher Metric Format JSON (one benchmark per configuration).
    Bencher,
    /// Google Benchmark JSON, as `--benchmark_format=json` writes it.
    Gbench,
}

impl ReportFormat {
    /// The format of every command this is, if it is one.
    fn plain(self) -> Option<Format> {
        match self {
            ReportFormat::Text => Some(Format::Text),
            ReportFormat::Json => Some(Format::Json),
            ReportFormat::Csv => Some(Format::Csv),
            ReportFormat::Bencher | ReportFormat::Gbench => None,
        }
    }
}

/// Options of `himeno report`.
#[derive(Debug, Args, Clone)]
#[command(group(clap::ArgGroup::new("trace_given").args(["timeline", "html_trace"])))]
pub struct ReportArgs {
    /// Results files (JSON lines written by `--output`); with --compare,
    /// one file per round.
    #[arg(required_unless_present = "timeline")]
    pub files: Vec<PathBuf>,
    /// Compare labelled values over rounds, one FILE each: per label the
    /// best, median and worst, per --ratio the ratio of the best values
    /// and the median of the per-round ratios. A file holds run records
    /// (each with its --label), `bench stream` and `bench pingpong`
    /// reports (labels stream/triad, stream/sum13, pingpong/BYTES) and
    /// {"label": L, "value": V[, "better": "lower"]} lines.
    #[arg(long, conflicts_with_all = ["timeline", "plot", "model_pingpong", "model_latency_us", "model_rate"])]
    pub compare: bool,
    /// The value a run record gives --compare.
    #[arg(long, value_enum, default_value_t = compare::input::Metric::Mflops, requires = "compare")]
    pub metric: compare::input::Metric,
    /// A ratio for --compare, NUMERATOR:DENOMINATOR (two labels);
    /// repeatable.
    #[arg(long, value_name = "A:B", requires = "compare")]
    pub ratio: Vec<String>,
    /// Show only this label in --compare's table (repeatable; default:
    /// every label).
    #[arg(long, value_name = "LABEL", requires = "compare")]
    pub only: Vec<String>,
    /// Draw a timeline (Gantt chart, one row per rank) of a trace written
    /// by `--trace`, into --plot DIR (default: beside the trace), and print
    /// each rank's compute and wait time in the drawn iterations.
    #[arg(long, value_name = "TRACE", conflicts_with_all = ["files", "model_pingpong", "model_latency_us", "model_rate"])]
    pub timeline: Option<PathBuf>,
    /// First timed iteration the timeline draws [default: the first the
    /// trace kept].
    #[arg(long, value_name = "N", requires = "trace_given",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeline_from: Option<u64>,
    /// Iterations the timeline draws.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "trace_given",
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub timeline_count: u64,
    /// Output format on standard output: text, json and csv as every
    /// command; bencher (Bencher Metric Format) and gbench (Google
    /// Benchmark JSON) for regression dashboards, one benchmark per size,
    /// ranks, process grid, backend, threads and T.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write speed-up, efficiency and phase plots (SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Show the model's prediction beside each row, with the network from
    /// this ping-pong JSON report (`himeno bench pingpong --format json`).
    #[arg(long, value_name = "FILE")]
    pub model_pingpong: Option<PathBuf>,
    /// Model latency in microseconds (instead of --model-pingpong).
    #[arg(
        long,
        requires = "model_bandwidth_gbs",
        conflicts_with = "model_pingpong"
    )]
    pub model_latency_us: Option<f64>,
    /// Model bandwidth in GB/s (instead of --model-pingpong).
    #[arg(long, requires = "model_latency_us")]
    pub model_bandwidth_gbs: Option<f64>,
    /// Single-rank compute rate in MFLOPS for the model; default: each
    /// group's best 1-rank run.
    #[arg(long)]
    pub model_rate: Option<f64>,
    /// The roofline: each run's GFLOPS at the kernel's 34 flops per 56
    /// bytes against the measured bandwidth ceilings (the runs' own
    /// --stream quick, and the --ceiling files); cache-resident runs
    /// marked. A table on standard output, and roofline.svg/.png in
    /// --plot DIR.
    #[arg(long, conflicts_with_all = ["compare", "timeline"])]
    pub roofline: bool,
    /// A `himeno bench stream --format json` or `bench transfer --format
    /// json` report whose bandwidths are roofline ceilings (repeatable).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["compare", "timeline"])]
    pub ceiling: Vec<PathBuf>,
    /// Write the whole study as one self-contained HTML page: the tables,
    /// every plot as inline SVG (speed-up, efficiency, phases, roofline,
    /// and the timeline of --html-trace), the provenance of each group.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["compare", "timeline"])]
    pub html: Option<PathBuf>,
    /// A trace written by `--trace` whose timeline the --html page shows
    /// (window: --timeline-from, --timeline-count).
    #[arg(long, value_name = "TRACE", requires = "html")]
    pub html_trace: Option<PathBuf>,
}

/// Runs `himeno report`.
pub fn report(args: &ReportArgs) -> Result<ExitCode> {
    if let Some(trace) = &args.timeline {
        if args.format != ReportFormat::Text {
            return Err(Error::usage(
                "--timeline prints a text summary beside its pictures: drop --format",
            ));
        }
        let summary = timeline::report(
            trace,
            args.plot.as_deref(),
            args.timeline_from,
            args.timeline_count,
        )?;
        output::print_report(&summary)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.compare {
        let Some(format) = args.format.plain() else {
            return Err(Error::usage(
                "--compare prints text, json or csv: --format bencher and gbench export run \
                 records, without --compare",
            ));
        };
        let out = compare::run(&compare::Ask {
            files: args.files.clone(),
            metric: args.metric,
            ratios: args.ratio.clone(),
            only: args.only.clone(),
            format,
        })?;
        output::print_report(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let measured = roofline::read_ceilings(&args.ceiling)?;
    if args.html.is_some() {
        plot::font()?;
    }
    let loaded = records::load(&args.files)?;
    if let Some(dir) = &args.plot {
        plot::prepare(dir)?;
    }
    for m in &loaded.malformed {
        error::print_line(&format!("himeno report: skipped {}: {}", m.source, m.why));
    }
    let mut study = group::group(&loaded.records);
    let mut pictures = match &args.plot {
        Some(dir) => plot::planned(&study.groups, dir),
        None => Vec::new(),
    };
    if args.roofline
        && let Some(dir) = &args.plot
    {
        pictures.extend(roofline::planned(dir));
    }
    check_plot_files(&pictures, args)?;
    let net = match (
        &args.model_pingpong,
        args.model_latency_us,
        args.model_bandwidth_gbs,
    ) {
        (Some(path), _, _) => Some(model::network_from_file(path)?),
        (None, Some(l), Some(b)) => Some(model::network(l, b)?),
        _ => None,
    };
    if let Some(r) = args.model_rate {
        model::check_rate(r, "--model-rate")?;
    }
    if let Some(net) = net {
        for g in &mut study.groups {
            if !attach_model(g, args.model_rate, &net) {
                error::print_line(&format!(
                    "himeno report: no model for \"{}\": it has no 1-rank run; pass --model-rate MFLOPS",
                    g.title()
                ));
            }
        }
    }
    let roof = roofline::build(&loaded.records, &measured);
    let slurm = slurm_join::join(&loaded);
    let out = match args.format {
        ReportFormat::Text => {
            let mut s = table::text(&study);
            if args.roofline {
                s.push_str(&roofline::text(&roof));
            }
            s.push_str(&slurm_join::text(&slurm));
            if study.groups.is_empty() {
                s.push_str("no usable results: nothing to tabulate\n");
            }
            if !loaded.malformed.is_empty() {
                s.push_str(&format!(
                    "{} line(s) skipped as malformed (listed on stderr)\n",
                    loaded.malformed.len()
                ));
            }
            s
        }
        ReportFormat::Csv => table::csv(&study),
        ReportFormat::Json if args.roofline || !slurm.is_empty() => {
            let mut v: serde_json::Value = serde_json::from_str(
                &table::json(&study, &loaded.malformed)
                    .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?,
            )
            .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?;
            if args.roofline {
                v["roofline"] = serde_json::to_value(&roof)
                    .map_err(|e| Error::runtime(format!("cannot encode the roofline: {e}")))?;
            }
            // Only where a record has Slurm's figure: other reports stay
            // as they were.
            if !slurm.is_empty() {
                v["slurm_energy"] = serde_json::to_value(&slurm)
                    .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?;
            }
            output::json(&v)?
        }
        ReportFormat::Json => table::json(&study, &loaded.malformed)
            .map_err(|e| Error::runtime(format!("cannot encode the report: {e}")))?,
        ReportFormat::Bencher => output::json(&export::bencher(&loaded.records))?,
        ReportFormat::Gbench => output::json(&export::gbench(&loaded.records))?,
    };
    if let Some(path) = &args.html {
        let timeline = match &args.html_trace {
            Some(trace) => {
                let (summary, svg) =
                    timeline::inline(trace, args.timeline_from, args.timeline_count)?;
                Some(html::Timeline {
                    trace: trace.display().to_string(),
                    summary,
                    svg,
                })
            }
            None => None,
        };
        let files: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
        let page = html::render(&html::Page {
            files: &files,
            records: &loaded.records,
            study: &study,
            malformed: &loaded.malformed,
            roofline: &roof,
            timeline,
        })?;
        files::write_whole(path, page.as_bytes()).map_err(|e| {
            Error::runtime(format!("cannot write the page {}: {e}", path.display()))
        })?;
    }
    output::print_report(&out)?;
    if let Some(path) = &args.html {
        error::print_line(&format!("himeno report: wrote {}", path.display()));
    }
    if let Some(dir) = &args.plot {
        let mut written = plot::write_all(&study.groups, dir)?;
        if args.roofline {
            written.extend(roofline::write(&roof, dir)?);
        }
        error::print_line(&format!(
            "himeno report: wrote {} plot files into {}",
            written.len(),
            dir.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses plot files of `report` that would replace one of its inputs
/// (a results file, the ping-pong report) or one another, by any alias
/// (exit 2, before anything is printed or drawn).
fn check_plot_files(pictures: &[PathBuf], args: &ReportArgs) -> Result<()> {
    let mut outputs: Vec<Named> = pictures
        .iter()
        .map(|p| Named::whole("--plot DIR's picture", p))
        .collect();
    outputs.extend(args.html.iter().map(|p| Named::whole("--html", p)));
    let mut inputs: Vec<Named> = args
        .files
        .iter()
        .map(|f| Named::new("results file", f))
        .collect();
    inputs.extend(
        args.model_pingpong
            .iter()
            .map(|f| Named::new("--model-pingpong", f)),
    );
    inputs.extend(args.ceiling.iter().map(|f| Named::new("--ceiling", f)));
    inputs.extend(
        args.html_trace
            .iter()
            .map(|f| Named::new("--html-trace", f)),
    );
    files::distinct(&outputs, &inputs)
}

/// Adds the model's prediction to every row of `g`, with the rate given or
/// the group's best 1-rank run. Returns false when there is no rate.
pub fn attach_model(g: &mut group::Group, rate: Option<f64>, net: &Network) -> bool {
    let rate = rate.or_else(|| {
        g.rows
            .iter()
            .filter(|r| r.ranks == 1)
            .map(|r| r.mflops)
            .reduce(f64::max)
    });
    let Some(rate) = rate.filter(|&r| model::check_rate(r, "rate").is_ok()) else {
        return false;
    };
    for row in &mut g.rows {
        let grid = Grid { n: row.grid };
        row.model = Some(model::predict(&grid, &ProcGrid { p: row.procs }, rate, net));
    }
    true
}

/// Options of `himeno model`.
#[derive(Debug, Args, Clone)]
pub struct ModelArgs {
    /// The grid and process grid (default size M).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Number of ranks (default: the product of --procs, else 1).
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Measured single-rank compute rate in MFLOPS.
    #[arg(long, conflicts_with_all = ["seconds_per_iteration", "results"])]
    pub rate_mflops: Option<f64>,
    /// Measured single-rank seconds per iteration of this grid.
    #[arg(long, conflicts_with = "results")]
    pub seconds_per_iteration: Option<f64>,
    /// Results file to take the single-rank rate from (its best complete
    /// 1-rank run, preferring the same grid).
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Ping-pong JSON report for latency and bandwidth.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["latency_us", "bandwidth_gbs"])]
    pub pingpong: Option<PathBuf>,
    /// One-way latency in microseconds.
    #[arg(long, requires = "bandwidth_gbs")]
    pub latency_us: Option<f64>,
    /// Bandwidth in GB/s (1e9 bytes).
    #[arg(long, requires = "latency_us")]
    pub bandwidth_gbs: Option<f64>,
    /// Sweeps per halo exchange (temporal blocking, as `--temporal` of a
    /// run): messages and latencies per iteration divided by T, and the
    /// redundant updates of the ghost layers added to the compute.
    #[arg(long, default_value_t = 1)]
    pub temporal: usize,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The GPU sweep's model instead (needs no rate or network): one
    /// rank of the grid per --gpu-sweep and --gpu-occupancy on an H100
    /// and an H200, predicted TFLOPS beside the device copy bandwidth's
    /// ceiling, and the sectors per load request of each --gpu-layout
    /// (predictions: docs/gpu.md).
    /// With more than one rank (--procs/--ranks) it also predicts each
    /// --halo path's iteration, with and without --overlap, and the
    /// strong scaling from one GPU; --pingpong (or --latency-us and
    /// --bandwidth-gbs) gives the staged path's MPI between hosts,
    /// --transfer its host link.
    #[arg(long, conflicts_with_all = ["rate_mflops", "seconds_per_iteration", "results"])]
    pub gpu: bool,
    /// With --gpu: a `himeno bench transfer --format json` report whose
    /// pinned copies are the staged path's host link (default: PCIe 5
    /// x16, 10 us and 50 GB/s each way).
    #[arg(long, value_name = "FILE", requires = "gpu")]
    pub transfer: Option<PathBuf>,
}

/// The GPU sweep model's report of one rank of `grid` (size `size`) in
/// `format` (see [`gpu_model`]); in JSON with the halo model's `halo`
/// rows of `procs` too, where there are any.
fn gpu_model_report(
    grid: &Grid,
    size: &str,
    format: Format,
    procs: &ProcGrid,
    halo: &[gpu_halo_model::PathPrediction],
) -> Result<String> {
    use crate::config::GpuLayout;
    let rows = gpu_model::predict_all(grid);
    let d2 = grid.n[2];
    let sectors: Vec<(&str, f64)> = GpuLayout::ALL
        .iter()
        .map(|l| (l.name(), gpu_model::sectors_per_request(*l, d2)))
        .collect();
    Ok(match format {
        Format::Json => {
            let mut j = serde_json::json!({
                "grid": grid.n, "size": size, "ranks": 1, "predictions": rows,
                "sectors_per_request": sectors.iter().map(|(l, s)| (l.to_string(), *s))
                    .collect::<std::collections::BTreeMap<String, f64>>(),
            });
            if !halo.is_empty() {
                j["halo_model"] = serde_json::json!({
                    "procs": procs.p, "ranks": procs.ranks(), "paths": halo,
                });
            }
            output::json(&j)?
        }
        Format::Csv => {
            let mut s = String::from(
                "device,sweep,occupancy,registers,blocks_per_sm,in_flight_bytes,tflops,\
                 ceiling_tflops\n",
            );
            for r in &rows {
                s.push_str(&format!(
                    "{},{},{},{},{},{},{},{}\n",
                    output::csv_field(r.device),
                    r.sweep,
                    r.occupancy,
                    r.registers,
                    r.blocks_per_sm,
                    r.in_flight_bytes,
                    r.tflops,
                    r.ceiling_tflops
                ));
            }
            s
        }
        Format::Text => {
            let mut s = format!(
                "GPU sweep model (predictions, not measurements: docs/gpu.md): one rank of grid \
                 {grid} ({size})\n  {:<9} {:<14} {:<9} {:>9} {:>6} {:>12} {:>7} {:>9}\n",
                "device",
                "sweep",
                "occupancy",
                "registers",
                "blocks",
                "KB in flight",
                "TFLOPS",
                "% of copy"
            );
            for r in &rows {
                s.push_str(&format!(
                    "  {:<9} {:<14} {:<9} {:>9} {:>6} {:>12.1} {:>7.2} {:>8.0}%\n",
                    r.device,
                    r.sweep,
                    r.occupancy,
                    r.registers,
                    r.blocks_per_sm,
                    r.in_flight_bytes / 1e3,
                    r.tflops,
                    100.0 * r.tflops / r.ceiling_tflops
                ));
            }
            for d in gpu_model::DEVICES {
                s.push_str(&format!(
                    "copy-bandwidth ceiling on the {}: {:.2} TFLOPS ({:.2} TB/s device copy, \
                     {:.1} KB in flight per SM needed)\n",
                    d.name,
                    d.ceiling_tflops(),
                    d.copy / 1e12,
                    d.needed_in_flight() / 1e3
                ));
            }
            let said: Vec<String> = sectors.iter().map(|(l, v)| format!("{l} {v:.2}")).collect();
            s.push_str(&format!(
                "sectors per load request (the same HBM bytes; --gpu-layout): {}\n",
                said.join(", ")
            ));
            s
        }
    })
}

/// The halo model's table for `grid` on `procs` in `format` (text or
/// CSV; JSON has it inside the sweep model's object), appended to the
/// sweep model's report (see [`gpu_halo_model`]).
fn gpu_halo_report(
    grid: &Grid,
    procs: &ProcGrid,
    rows: &[gpu_halo_model::PathPrediction],
    format: Format,
) -> String {
    match format {
        Format::Csv => {
            let mut s = String::from(
                "device,halo,overlap,sweep_s,exchange_s,host_waits,iteration_s,speedup\n",
            );
            for r in rows {
                s.push_str(&format!(
                    "{},{},{},{},{},{},{},{}\n",
                    output::csv_field(r.device),
                    r.path,
                    r.overlap,
                    r.sweep_s,
                    r.exchange_s,
                    r.host_waits,
                    r.iteration_s,
                    r.speedup
                ));
            }
            s
        }
        Format::Text => {
            let mut s = format!(
                "GPU halo model (predictions, not measurements: docs/gpu.md): grid {grid} on {} \
                 GPUs ({}x{}x{}), slowest rank\n  {:<9} {:<10} {:<7} {:>9} {:>11} {:>9} \
                 {:>10} {:>12} {:>10}\n",
                procs.ranks(),
                procs.p[0],
                procs.p[1],
                procs.p[2],
                "device",
                "halo",
                "overlap",
                "sweep ms",
                "exchange ms",
                "exch/sweep",
                "host waits",
                "iteration ms",
                "speed-up"
            );
            for r in rows {
                s.push_str(&format!(
                    "  {:<9} {:<10} {:<7} {:>9.3} {:>11.3} {:>9.2}x {:>10} {:>12.3} {:>9.2}x\n",
                    r.device,
                    r.path,
                    if r.overlap { "on" } else { "off" },
                    r.sweep_s * 1e3,
                    r.exchange_s * 1e3,
                    r.exchange_s / r.sweep_s,
                    r.host_waits,
                    r.iteration_s * 1e3,
                    r.speedup
                ));
            }
            s.push_str("  (speed-up: one GPU's iteration of the whole grid over this one)\n");
            s
        }
        Format::Json => String::new(),
    }
}

/// Runs `himeno model`.
pub fn model(args: &ModelArgs) -> Result<ExitCode> {
    let problem =
        args.problem
            .spec()
            .resolve_for(Preset::M, Ranks::Model(args.ranks), args.temporal)?;
    problem.check_temporal(args.temporal)?;
    let (grid, procs) = (problem.grid, problem.procs);
    let size = problem.size.to_string();
    if args.gpu {
        let mut halo = Vec::new();
        if procs.ranks() > 1 {
            let mpi = match (&args.pingpong, args.latency_us, args.bandwidth_gbs) {
                (Some(p), _, _) => model::network_from_file(p)?,
                (None, Some(l), Some(b)) => model::network(l, b)?,
                _ => gpu_halo_model::NODE_MPI,
            };
            let host = match &args.transfer {
                Some(path) => gpu_halo_model::host_link_from_file(path)?,
                None => gpu_halo_model::PINNED_PCIE5,
            };
            halo = gpu_halo_model::predict_all(&grid, &procs, &host, &mpi);
        }
        let mut report = gpu_model_report(&grid, &size, args.format, &procs, &halo)?;
        if !halo.is_empty() && args.format != Format::Json {
            report.push_str(&gpu_halo_report(&grid, &procs, &halo, args.format));
        }
        output::print_report(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (rate, rate_from) = match (args.rate_mflops, args.seconds_per_iteration, &args.results) {
        (Some(r), _, _) => (
            model::check_rate(r, "--rate-mflops")?,
            "--rate-mflops".to_string(),
        ),
        (_, Some(s), _) => {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::usage(format!(
                    "--seconds-per-iteration {} must be above 0",
                    output::number(s)
                )));
            }
            let r = grid.interior_points() as f64 * FLOPS_PER_POINT / s / 1e6;
            let r = model::check_rate(
                r,
                &format!(
                    "--seconds-per-iteration {} on grid {grid} gives a rate of",
                    output::number(s)
                ),
            )?;
            (r, format!("{s} s/iteration on one rank"))
        }
        (_, _, Some(path)) => rate_from_results(path, &grid)?,
        _ => {
            return Err(Error::usage(
                "the model needs a single-rank compute rate: pass --rate-mflops, \
                 --seconds-per-iteration or --results FILE",
            ));
        }
    };
    let (net, net_from) = match (&args.pingpong, args.latency_us, args.bandwidth_gbs) {
        (Some(p), _, _) => (model::network_from_file(p)?, p.display().to_string()),
        (None, Some(l), Some(b)) => (model::network(l, b)?, "arguments".to_string()),
        _ if procs.ranks() == 1 => (model::network(0.0, 1.0)?, "unused (1 rank)".to_string()),
        _ => {
            return Err(Error::usage(
                "the model needs the network: pass --pingpong FILE or \
                 --latency-us and --bandwidth-gbs",
            ));
        }
    };
    let p = model::predict_temporal(&grid, &procs, rate, &net, args.temporal);
    if !p.is_finite() {
        return Err(Error::runtime(format!(
            "the model's prediction is not a finite number ({p:?}): the rates given are \
             out of proportion with grid {grid}"
        )));
    }
    let text = match args.format {
        Format::Json => output::json(&serde_json::json!({
            "grid": grid.n, "size": size, "procs": procs.p, "ranks": procs.ranks(),
            "rate_mflops": rate, "rate_from": rate_from,
            "latency_us": net.latency_s * 1e6,
            "bandwidth_gbytes_per_s": net.bandwidth_bytes_per_s / 1e9,
            "network_from": net_from,
            "prediction": p,
        }))?,
        Format::Csv => format!(
            "ni,nj,nk,size,pi,pj,pk,ranks,rate_mflops,latency_us,bandwidth_gbytes_per_s,\
             slowest_rank,compute_s,halo_s,allreduce_s,total_s,compute_share,comm_share,mflops,\
             temporal,messages_per_iteration,halo_bytes_per_iteration,redundant_fraction\n\
             {},{},{},{},{},{},{},{},{rate},{},{},{},{:e},{:e},{:e},{:e},{},{},{},{},{},{},{}\n",
            grid.n[0],
            grid.n[1],
            grid.n[2],
            output::csv_field(&size),
            procs.p[0],
            procs.p[1],
            procs.p[2],
            procs.ranks(),
            net.latency_s * 1e6,
            net.bandwidth_bytes_per_s / 1e9,
            p.slowest_rank,
            p.compute_s,
            p.halo_s,
            p.allreduce_s,
            p.total_s,
            p.compute_share,
            p.comm_share,
            p.mflops,
            p.temporal,
            p.messages_per_iteration,
            p.halo_bytes_per_iteration,
            p.redundant_fraction
        ),
        Format::Text => {
            render_prediction(&grid, &size, &procs, rate, &rate_from, &net, &net_from, &p)
        }
    };
    output::print_report(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The text form of a prediction.
#[allow(clippy::too_many_arguments)]
fn render_prediction(
    grid: &Grid,
    size: &str,
    procs: &ProcGrid,
    rate: f64,
    rate_from: &str,
    net: &Network,
    net_from: &str,
    p: &Prediction,
) -> String {
    let temporal = if p.temporal > 1 {
        format!(
            "temporal blocking: {} sweeps per exchange; {:.2} messages and {:.0} bytes per \
             iteration, {:.1}% redundant updates in the ghost layers (slowest rank)\n",
            p.temporal,
            p.messages_per_iteration,
            p.halo_bytes_per_iteration,
            100.0 * p.redundant_fraction
        )
    } else {
        String::new()
    };
    format!(
        "model: grid {grid} ({size}), {} rank(s), process grid {procs}\n\
         inputs: single-rank rate {rate:.1} MFLOPS ({rate_from}); latency {:.3} us, \
         bandwidth {:.3} GB/s ({net_from})\n\
         per iteration (slowest rank {}): compute {:.4} ms + halo {:.4} ms + allreduce {:.4} ms \
         = {:.4} ms\n\
         compute {:.1}%, communication {:.1}%; predicted {:.1} MFLOPS\n{temporal}",
        procs.ranks(),
        net.latency_s * 1e6,
        net.bandwidth_bytes_per_s / 1e9,
        p.slowest_rank,
        p.compute_s * 1e3,
        p.halo_s * 1e3,
        p.allreduce_s * 1e3,
        p.total_s * 1e3,
        100.0 * p.compute_share,
        100.0 * p.comm_share,
        p.mflops
    )
}

/// The single-rank rate from a results file: the best complete, not failed
/// 1-rank run (not on an emulated GPU), on the same grid when there is one.
fn rate_from_results(path: &std::path::Path, grid: &Grid) -> Result<(f64, String)> {
    let loaded = records::load(&[path])?;
    let ok: Vec<&RunRecord> = loaded
        .records
        .iter()
        .filter(|r| {
            // An emulated GPU's rate is the host CPU's running the
            // emulator: no basis for a model.
            r.ranks == 1
                && !r.emulated
                && r.flag().is_none()
                && model::check_rate(r.mflops, "rate").is_ok()
        })
        .collect();
    let best = |same_grid: bool| {
        ok.iter()
            .filter(|r| !same_grid || r.grid == grid.n)
            .max_by(|a, b| a.mflops.total_cmp(&b.mflops))
            .copied()
    };
    let same = best(true);
    match same.or_else(|| best(false)) {
        Some(r) => {
            let note = if r.grid == grid.n {
                ""
            } else {
                ", another grid"
            };
            Ok((r.mflops, format!("{}{note}", r.source)))
        }
        None => Err(Error::usage(format!(
            "{} has no complete 1-rank run to take the compute rate from; \
             run `himeno --iterations N --output {}` on one rank or pass --rate-mflops",
            path.display(),
            path.display()
        ))),
    }
}
