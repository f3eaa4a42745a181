//! Command-line options as typed (clap), and their validation into a
//! [`RunConfig`]. Every check that can fail on bad input lives here, so a
//! usage error is found identically on every rank before any work starts.

use crate::backend::Kind;
use crate::bench::BenchArgs;
use crate::checkpoint::CheckpointArgs;
use crate::comm::LaunchArgs;
use crate::config::{
    BackendKind, MAX_ITERATIONS, Occupancy, RunConfig, RunLength, Staging, Stores, StreamMeasure,
};
use crate::error::{Error, Result};
use crate::grid::Preset;
use crate::machine::threads::{self, Bind};
use crate::output::{self, Format};
use crate::problem::{Problem, ProblemArgs, Ranks};
use crate::study::plan::PlanArgs;
use crate::study::{ModelArgs, ReportArgs};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// The Himeno benchmark (RIKEN's 19-point Jacobi kernel) as a distributed
/// solver: MPI ranks on a 3D process grid, CPU threads or a GPU per rank.
#[derive(Debug, Parser)]
#[command(
    name = "himeno",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// A tool other than the benchmark run.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the benchmark run (when no subcommand is given).
    #[command(flatten)]
    pub run: RunArgs,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// Tools beside the benchmark run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the benchmark (the default when no subcommand is given).
    Run(RunArgs),
    /// Check the halo exchange: fill points with a function of their global
    /// index, exchange, and check every ghost (faces, edges, corners).
    Selftest(SelftestArgs),
    /// Tables and plots of scaling studies from results files.
    Report(ReportArgs),
    /// Predict time per iteration and the compute/communication split.
    Model(ModelArgs),
    /// List the runs of scaling-study definitions (what scripts/sweep.sh
    /// and the job templates run).
    Plan(PlanArgs),
    /// Evaluation benchmarks beside the solver (memory bandwidth, MPI
    /// ping-pong, host<->device transfers).
    Bench(BenchArgs),
    /// Check a GPU machine in one call: correctness of the GPU backend
    /// against the CPU on 1, 2 and 4 in-process ranks with every staging,
    /// overlap and occupancy variant, then transfer and solver timing.
    /// Exit 0 PASS, 1 FAIL, 2 setup error, 3 PARTIAL.
    GpuCheck(GpuCheckArgs),
}

/// Options of `himeno gpu-check`.
#[derive(Debug, Args, Clone)]
pub struct GpuCheckArgs {
    /// The himeno binary to check (default: this one).
    #[arg(long, value_name = "PATH")]
    pub himeno: Option<PathBuf>,
    /// Results folder: gpu-check.txt (the report), results.jsonl (every
    /// run's record with its "check" label), transfer.json, details.tar.gz
    /// (each run's command line, stdout and stderr).
    #[arg(
        long,
        value_name = "DIR",
        env = "OUT",
        default_value = "/tmp/himeno-gpu-check"
    )]
    pub out: PathBuf,
    /// Iterations of each correctness run [default: 20, --quick 4].
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub iterations: Option<u64>,
    /// Iterations of each XL timing run.
    #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub xl_iterations: u64,
    /// Iterations of each L phase-split run.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub l_iterations: u64,
    /// Seconds one run may take; a run still going then is killed and its
    /// part fails.
    #[arg(long, value_name = "SECONDS", default_value_t = 180, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub run_limit: u64,
    /// Correctness on small grids with few iterations and a small transfer
    /// benchmark, without the XL and L timing (reported as skipped, not
    /// PARTIAL): for CI on an emulated device.
    #[arg(long)]
    pub quick: bool,
    /// Prefix of the system folders searched for NVRTC (a fake tree, for
    /// tests).
    #[arg(long, hide = true, value_name = "DIR", default_value = "/")]
    pub search_root: PathBuf,
}

/// Longest accepted `--run-limit`: a day.
const MAX_RUN_LIMIT_S: u64 = 24 * 3600;

impl GpuCheckArgs {
    /// Validates the options; the binary defaults to the running one.
    pub fn settings(&self) -> Result<crate::gpu_check::Settings> {
        let iterations = self.iterations.unwrap_or(if self.quick { 4 } else { 20 });
        for (name, n) in [
            ("--iterations", iterations),
            ("--xl-iterations", self.xl_iterations),
            ("--l-iterations", self.l_iterations),
        ] {
            if !(1..=MAX_ITERATIONS).contains(&n) {
                return Err(Error::usage(format!(
                    "{name} {n} must be from 1 to {MAX_ITERATIONS}"
                )));
            }
        }
        if !(1..=MAX_RUN_LIMIT_S).contains(&self.run_limit) {
            return Err(Error::usage(format!(
                "--run-limit {} must be from 1 to {MAX_RUN_LIMIT_S} seconds",
                self.run_limit
            )));
        }
        let himeno = match &self.himeno {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| {
                Error::runtime(format!(
                    "cannot tell which binary is running ({e}): give --himeno PATH"
                ))
            })?,
        };
        Ok(crate::gpu_check::Settings {
            himeno,
            out: self.out.clone(),
            iterations,
            xl_iterations: self.xl_iterations,
            l_iterations: self.l_iterations,
            run_limit: std::time::Duration::from_secs(self.run_limit),
            quick: self.quick,
            search_root: self.search_root.clone(),
        })
    }
}

/// Options of the halo self-test.
#[derive(Debug, Args, Clone)]
pub struct SelftestArgs {
    /// The grid and process grid to test (default size XS).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Ghost layers to exchange and check, as a `--temporal T` run keeps.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub temporal: usize,
    /// Where the exchanged field lives: cpu (a host pattern), gpu (each
    /// rank's device: its buffers, pack/unpack kernels and staging), or
    /// auto (a GPU when every rank has one).
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    pub backend: BackendKind,
    /// GPU halo staging: pinned or pageable host memory.
    #[arg(long, value_enum, default_value_t = Staging::Pinned)]
    pub staging: Staging,
    /// GPU ordinal to use; default: the node-local rank modulo the devices.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub device: Option<usize>,
}

impl SelftestArgs {
    /// The problem to test on `ranks` ranks, checked for the halo depth.
    pub fn resolve(&self, ranks: usize) -> Result<Problem> {
        let problem = self.problem.resolve(Preset::XS, Ranks::Job(ranks))?;
        problem.check_temporal(self.temporal)?;
        if self.backend == BackendKind::Gpu && self.temporal > 1 {
            return Err(Error::usage(
                "GPU ranks keep one ghost layer: use --temporal 1 with --backend gpu",
            ));
        }
        Ok(problem)
    }

    /// Where the ranks exchange: `auto` is a GPU only for one ghost layer.
    pub fn backend_asked(&self) -> BackendKind {
        backend_asked(self.backend, self.temporal)
    }
}

/// The backend asked for, as a job resolves it before probing: GPU ranks
/// keep one ghost layer, so `auto` means the CPU for a depth of `temporal`
/// above 1 (an explicit `gpu` is refused by validation).
fn backend_asked(backend: BackendKind, temporal: usize) -> BackendKind {
    match backend {
        BackendKind::Auto if temporal > 1 => BackendKind::Cpu,
        b => b,
    }
}

/// Options of a benchmark run, as typed.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The grid and process grid (default size M).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// How the ranks are started.
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Sweep threads per rank; default: the cores this rank may use (shared
    /// with the node's other ranks when the launcher did not bind them).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub threads: Option<usize>,
    /// Fixed number of timed iterations (overrides --seconds).
    #[arg(long, conflicts_with = "seconds", allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub iterations: Option<u64>,
    /// Target duration of the timed run in seconds, sized from the rehearsal
    /// as the original does.
    #[arg(long, default_value_t = 60.0, allow_negative_numbers = true, value_parser = number)]
    pub seconds: f64,
    /// Rehearsal iterations before the timed run (not recorded; the fields
    /// are reset afterwards).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub warmup: u64,
    /// Backend: cpu, gpu, or auto (a GPU when one is usable).
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    pub backend: BackendKind,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Append the result as one JSON line to this file (safe for concurrent
    /// jobs).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Verify the result against the reference kernel when no stored known
    /// answer covers this grid and iteration count.
    #[arg(long)]
    pub verify: bool,
    /// Thread placement: none or cores.
    #[arg(long, value_enum, default_value_t = Bind::None)]
    pub bind: Bind,
    /// GPU halo staging: pinned (the default) or pageable host memory.
    #[arg(long, value_enum)]
    pub staging: Option<Staging>,
    /// GPU ordinal to use; default: the node-local rank modulo the devices.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub device: Option<usize>,
    /// Overlap the interior sweep with the halo exchange (GPU backend; refused
    /// with --backend cpu, ignored when auto picks the CPU).
    #[arg(long)]
    pub overlap: bool,
    /// GPU sweep kernel variant: the thread blocks per multiprocessor it is
    /// compiled to fit (auto: the compiler's register choice; 4 or 5 cap
    /// the registers for more resident blocks). Results are identical.
    /// Default auto.
    #[arg(long, value_enum)]
    pub gpu_occupancy: Option<Occupancy>,
    /// How the CPU sweep writes the new field: streaming (non-temporal
    /// stores, no read of each line before writing it), cached, or auto
    /// (streaming when the node's fields exceed its last-level cache).
    /// Default auto.
    #[arg(long, value_enum)]
    pub stores: Option<Stores>,
    /// Sweeps per halo exchange (temporal blocking): each rank keeps T
    /// ghost layers, exchanges them once every T iterations and runs T
    /// sweeps as a cache-blocked wavefront. The answer is bitwise the
    /// classic one (T = 1, the default, as the original benchmark), but
    /// with fewer memory passes, so its score is not comparable with
    /// classic Himeno scores. CPU backend only. `auto` chooses T for this
    /// machine (from its caches, and by timing the candidates when they
    /// cannot tell), T=1 when blocking does not pay; the report says what
    /// and why.
    #[arg(long, default_value = "1", allow_negative_numbers = true, value_parser = temporal)]
    pub temporal: Temporal,
    /// Rows per tile of the temporal wavefront (default: chosen from the
    /// detected cache sizes); for experiments and tests.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub tile_rows: Option<usize>,
    /// Measured stream triad bandwidth in GB/s; the report shows the
    /// solver's effective bandwidth as a fraction of it.
    #[arg(long, allow_negative_numbers = true, value_parser = number)]
    pub stream_gbs: Option<f64>,
    /// Measure the stream triad and Sum13 bandwidths before the run
    /// (`quick`: a fraction of a second, with the run's threads and
    /// binding) and report the solver's bandwidth as a fraction of both.
    #[arg(long, value_enum, default_value_t = StreamMeasure::Off, conflicts_with = "stream_gbs")]
    pub stream: StreamMeasure,
    /// Label recorded in the results, e.g. the study this run belongs to.
    #[arg(long, value_parser = clap::value_parser!(OsString))]
    pub label: Option<OsString>,
    /// Timeline of every rank's phases (`--trace FILE`).
    #[command(flatten)]
    pub trace: crate::trace::TraceArgs,
    /// Checkpoints and restart.
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
}

/// Parses a whole number for a count option (clap adds the option's name
/// and the value to the message).
fn whole<T: std::str::FromStr>(s: &str) -> std::result::Result<T, String> {
    let t = s.trim();
    t.parse().map_err(|_| {
        if t.starts_with('-') {
            "must not be negative: give a whole number, e.g. 10".to_string()
        } else if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            "is too large: give a smaller whole number".to_string()
        } else {
            "expected a whole number, e.g. 10".to_string()
        }
    })
}

/// `--temporal`: a number of sweeps per halo exchange, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporal {
    /// Chosen by the run (`crate::temporal`).
    Auto,
    /// This many.
    Sweeps(usize),
}

impl Temporal {
    /// The sweeps asked for; `auto` may end at 1, so it counts as 1 where
    /// a fixed depth is checked.
    fn fixed(self) -> usize {
        match self {
            Temporal::Auto => 1,
            Temporal::Sweeps(t) => t,
        }
    }
}

/// Parses `--temporal`: `auto` or a whole number.
fn temporal(s: &str) -> std::result::Result<Temporal, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(Temporal::Auto);
    }
    whole(s)
        .map(Temporal::Sweeps)
        .map_err(|e| format!("{e}, or auto"))
}

/// Parses a real number (range checks are done in validation, with the
/// option's own limits).
fn number(s: &str) -> std::result::Result<f64, String> {
    s.trim()
        .parse()
        .map_err(|_| "expected a number, e.g. 60 or 0.5".to_string())
}

/// Condenses a clap error into the one line every usage error gets: the
/// problem (and clap's tip or possible values), then where to look, without
/// the usage block.
pub fn one_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
        // clap does not say which argument.
        return "an argument is not valid UTF-8 text: only file names (--output, --plot, \
                results and ping-pong files) and --label may hold other bytes; see \
                `himeno --help`"
            .to_string();
    }
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    format!("{}; see `himeno --help`", parts.join(" "))
}

/// Largest accepted target duration, one week.
const MAX_SECONDS: f64 = 7.0 * 24.0 * 3600.0;
/// Accepted `--stream-gbs`, in GB/s: a megabyte per second to an exabyte.
const STREAM_GBS: (f64, f64) = (1e-3, 1e9);

impl RunArgs {
    /// The backend asked for, as the run resolves it before probing
    /// ([`backend_asked`]).
    pub fn backend_asked(&self) -> BackendKind {
        backend_asked(self.backend, self.temporal.fixed())
    }

    /// Refuses options of one backend given to a run of the other, which
    /// it would ignore: the run would not be the one asked for. With
    /// `--backend auto` (either may run) they are taken as given.
    fn check_backend_options(&self) -> Result<()> {
        // `auto` with several sweeps per exchange runs on the CPU.
        let cpu = self.backend == BackendKind::Cpu;
        let gpu = self.backend == BackendKind::Gpu;
        let given = |set: bool, name: &'static str| set.then_some(name);
        let gpu_only = [
            given(self.device.is_some(), "--device"),
            given(self.staging.is_some(), "--staging"),
            given(self.gpu_occupancy.is_some(), "--gpu-occupancy"),
        ];
        if cpu && let Some(name) = gpu_only.into_iter().flatten().next() {
            return Err(Error::usage(format!(
                "{name} sets how the GPU backend runs, and this run is on the CPU: add \
                 --backend gpu (or auto), or drop {name}"
            )));
        }
        if gpu && self.stores.is_some() {
            return Err(Error::usage(
                "--stores sets how the CPU sweep writes, and this run is on the GPU: add \
                 --backend cpu (or auto), or drop --stores",
            ));
        }
        Ok(())
    }

    /// Validates the options into the final configuration of a job of
    /// `ranks` ranks, `node_ranks` of them on this rank's node (they share
    /// its CPUs when the launcher did not bind them). An automatic process
    /// grid is chosen for GPU ranks under `--backend gpu` and for CPU
    /// ranks otherwise; a run that has resolved `auto` uses
    /// [`RunArgs::validate_for`].
    pub fn validate(&self, ranks: usize, node_ranks: usize) -> Result<RunConfig> {
        let kind = match self.backend {
            BackendKind::Gpu => Kind::Gpu,
            BackendKind::Cpu | BackendKind::Auto => Kind::Cpu,
        };
        self.validate_for(ranks, node_ranks, kind)
    }

    /// [`RunArgs::validate`] for ranks that sweep on `kind` (the backend
    /// resolved from [`RunArgs::backend_asked`]), whose costs weigh the
    /// faces of an automatic process grid.
    pub fn validate_for(&self, ranks: usize, node_ranks: usize, kind: Kind) -> Result<RunConfig> {
        let problem =
            self.problem
                .resolve_weighted(Preset::M, Ranks::Job(ranks), kind.face_weights())?;
        let threads = threads::for_rank(self.threads, node_ranks)?;
        let length = match self.iterations {
            Some(0) => return Err(Error::usage("--iterations must be at least 1")),
            Some(n) if n > MAX_ITERATIONS => {
                return Err(Error::usage(format!(
                    "--iterations {n} is more than {MAX_ITERATIONS}: give a smaller count"
                )));
            }
            Some(n) => RunLength::Iterations(n),
            None => {
                let s = self.seconds;
                if !(s.is_finite() && s > 0.0 && s <= MAX_SECONDS) {
                    return Err(Error::usage(format!(
                        "--seconds {} must be a number of seconds above 0 and at most \
                         {MAX_SECONDS} (one week): give such a target, or --iterations N",
                        output::number(s)
                    )));
                }
                RunLength::Seconds(s)
            }
        };
        if matches!(length, RunLength::Seconds(_)) && self.warmup == 0 {
            return Err(Error::usage(
                "--warmup 0 leaves nothing to size a --seconds run from: \
                 give --iterations N or at least one warm-up iteration",
            ));
        }
        if self.warmup > 1000 {
            return Err(Error::usage(format!(
                "--warmup {} is more than 1000: give at most 1000 rehearsal iterations",
                self.warmup
            )));
        }
        // `auto` tries what the process grid allows, up to the candidates.
        let temporal = match self.temporal {
            Temporal::Sweeps(t) => t,
            Temporal::Auto => crate::temporal::AUTO_CANDIDATES
                .into_iter()
                .rev()
                .find(|&t| problem.check_temporal(t).is_ok())
                .unwrap_or(1),
        };
        problem.check_temporal(temporal)?;
        if self.temporal == Temporal::Auto && self.checkpoint.checkpoint_dir.is_some() {
            return Err(Error::usage(
                "--temporal auto may choose a different T on a restart, and a checkpoint \
                 holds the T it was written with: give --temporal T with --checkpoint-dir",
            ));
        }
        if self.overlap && self.backend == BackendKind::Cpu {
            // Measured: with k split (every automatic grid at M and L) the
            // boundary pass costs far more than the 2-7% exchange it could
            // hide, and without it the gain is within the noise.
            return Err(Error::usage(
                "--overlap overlaps the halo exchange with GPU sweeps only; on CPU ranks it \
                 does not pay (notes/cpu-overlap.md): drop --overlap or use --backend gpu",
            ));
        }
        if self.temporal.fixed() > 1 && self.backend == BackendKind::Gpu {
            return Err(Error::usage(
                "--temporal above 1 runs on the CPU backend only for now: use --backend cpu, \
                 or --temporal 1 on GPUs",
            ));
        }
        if self.tile_rows == Some(0) {
            return Err(Error::usage("--tile-rows must be at least 1"));
        }
        self.check_backend_options()?;
        if self.tile_rows.is_some() && self.temporal == Temporal::Sweeps(1) {
            // Accepted, it would be ignored: the run would not be the
            // experiment asked for.
            return Err(Error::usage(
                "--tile-rows sets the tiles of the temporal wavefront, which runs only with \
                 --temporal 2 or more: add --temporal T, or drop --tile-rows",
            ));
        }
        if let Some(g) = self.stream_gbs
            && !(g.is_finite() && (STREAM_GBS.0..=STREAM_GBS.1).contains(&g))
        {
            // Beyond these the fraction of it printed is 0% or inf%.
            return Err(Error::usage(format!(
                "--stream-gbs {} must be a bandwidth in GB/s above 0, from {} to {:e}",
                output::number(g),
                STREAM_GBS.0,
                STREAM_GBS.1
            )));
        }
        Ok(RunConfig {
            problem,
            threads,
            length,
            warmup: self.warmup,
            backend: self.backend_asked(),
            format: self.format,
            output: self.output.clone(),
            verify: self.verify,
            bind: self.bind,
            staging: self.staging.unwrap_or(Staging::Pinned),
            device: self.device,
            overlap: self.overlap,
            gpu_occupancy: self.gpu_occupancy.unwrap_or(Occupancy::Auto),
            stores: self.stores.unwrap_or(Stores::Auto),
            temporal,
            temporal_auto: self.temporal == Temporal::Auto,
            tile_rows: self.tile_rows,
            stream_gbs: self.stream_gbs,
            stream: self.stream,
            // Any argument is legal on the command line; the record is JSON
            // text, so bytes that are not UTF-8 become U+FFFD.
            label: self
                .label
                .as_ref()
                .map(|l| l.to_string_lossy().into_owned()),
            checkpoint: self.checkpoint.validate(length, temporal)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RunArgs {
        let mut argv = vec!["himeno"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).expect("parses").run
    }

    #[test]
    fn defaults_are_the_original_run() {
        let cfg = args(&[]).validate(1, 1).unwrap();
        assert_eq!(cfg.grid().n, [128, 128, 256]);
        assert_eq!(cfg.length, RunLength::Seconds(60.0));
        assert_eq!(cfg.warmup, 3);
    }

    #[test]
    fn gpu_ranks_keep_k_whole_where_cpu_ranks_split_it() {
        for (ranks, cpu, gpu) in [
            (2, [1, 1, 2], [2, 1, 1]),
            (4, [2, 1, 2], [2, 2, 1]),
            (8, [2, 2, 2], [4, 2, 1]),
        ] {
            let on = |backend: &str, kind: Kind| {
                args(&["--size", "L", "--backend", backend])
                    .validate_for(ranks, ranks, kind)
                    .unwrap()
                    .procs()
                    .p
            };
            assert_eq!(on("cpu", Kind::Cpu), cpu, "{ranks} CPU ranks");
            assert_eq!(on("auto", Kind::Cpu), cpu, "{ranks} ranks, auto on CPUs");
            assert_eq!(on("gpu", Kind::Gpu), gpu, "{ranks} GPU ranks");
            assert_eq!(on("auto", Kind::Gpu), gpu, "{ranks} ranks, auto on GPUs");
            // Without a resolved kind, `--backend gpu` alone decides.
            let plain = args(&["--size", "L", "--backend", "gpu"])
                .validate(ranks, ranks)
                .unwrap();
            assert_eq!(plain.procs().p, gpu, "{ranks} ranks, --backend gpu");
        }
    }

    #[test]
    fn bad_numbers_are_usage_errors() {
        for bad in [
            &["--iterations", "0"][..],
            &["--seconds", "0"],
            &["--seconds", "NaN"],
            &["--threads", "0"],
            &["--grid", "2x3x4"],
            &["--size", "XXL"],
            &["--procs", "2x1x1"],
            &["--stream-gbs=-1"],
            &["--temporal", "0"],
            &["--temporal", "33"],
            &["--temporal", "2", "--backend", "gpu"],
            &[
                "--temporal",
                "auto",
                "--checkpoint-dir",
                "/tmp/x",
                "--iterations",
                "4",
            ],
            &["--tile-rows", "0"],
            &["--tile-rows", "4"],
            &["--tile-rows", "4", "--temporal", "1"],
            &["--device", "0"],
            &["--staging", "pageable", "--backend", "cpu"],
            &["--gpu-occupancy", "4"],
            &["--stores", "cached", "--backend", "gpu"],
        ] {
            let err = args(bad).validate(1, 1).unwrap_err();
            assert!(matches!(err, Error::Usage(_)), "{bad:?}: {err}");
        }
    }
}
