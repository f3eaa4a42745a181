//! Validation of a run's options into a [`RunConfig`], and of the halo
//! self-test's into its problem. Every check that can fail on bad input
//! lives here, so a usage error is found identically on every rank before
//! any work starts. Where the ranks sweep is decided first
//! ([`resolve_backend`], the one place `--backend auto` is resolved): GPU
//! ranks weigh the faces of an automatic process grid differently, and
//! the configuration carries the backend decided, never `auto`.

use super::args::{BackendChoice, CheckpointArgs, RunArgs, SelftestArgs, Temporal};
use crate::backend::{self, Capabilities};
use crate::comm::Comm;
use crate::config::{
    BackendKind, CheckpointConfig, HaloPath, MAX_ITERATIONS, Occupancy, Prefetch, Restart,
    RunConfig, RunLength, Staging, Stores,
};
use crate::error::{Error, Result};
use crate::fault::Fault;
use crate::grid::Preset;
use crate::machine::threads;
use crate::output;
use crate::problem::{Problem, Ranks};
use crate::report;
use crate::signals;
use crate::trace;
use std::time::Duration;

/// Committed checkpoints kept when `--checkpoint-keep` is not given.
pub const DEFAULT_CHECKPOINT_KEEP: usize = 2;

/// Largest accepted `--seconds` target, one week (a run's record may
/// state a longer duration: `--iterations` bounds a run by count).
const MAX_TARGET_S: f64 = 7.0 * 24.0 * 3600.0;
/// Accepted `--stream-gbs`, in GB/s: a megabyte per second to an exabyte.
const STREAM_GBS: (f64, f64) = (1e-3, 1e9);

impl BackendChoice {
    /// The backend this choice fixes without probing for GPUs, for a depth
    /// of `temporal` ghost layers: `auto` means the CPU beyond what GPU
    /// ranks keep ([`Capabilities`]; an explicit `gpu` is refused by
    /// validation); `None`: `auto`, decided by probing every rank.
    pub fn fixed(self, temporal: usize) -> Option<BackendKind> {
        match self {
            BackendChoice::Cpu => Some(BackendKind::Cpu),
            BackendChoice::Gpu => Some(BackendKind::Gpu),
            BackendChoice::Auto if !Capabilities::of(BackendKind::Gpu).keeps(temporal) => {
                Some(BackendKind::Cpu)
            }
            BackendChoice::Auto => None,
        }
    }

    /// Whether the ranks may end up on GPUs (before any probe).
    pub fn may_use_gpu(self, temporal: usize) -> bool {
        self.fixed(temporal) != Some(BackendKind::Cpu)
    }
}

/// Decides, collectively, where the job's ranks sweep for `choice` with
/// `temporal` ghost layers: what the choice fixes, or for `auto` a GPU
/// only when every rank has a usable one ([`backend::auto`]). Every rank
/// gets the same answer.
pub fn resolve_backend(
    choice: BackendChoice,
    temporal: usize,
    comm: &dyn Comm,
) -> Result<BackendKind> {
    match choice.fixed(temporal) {
        Some(backend) => Ok(backend),
        None => backend::auto(comm),
    }
}

impl SelftestArgs {
    /// The problem to test on `ranks` ranks, checked for the halo depth.
    pub fn resolve(&self, ranks: usize) -> Result<Problem> {
        let problem = self.problem.spec().resolve(Preset::XS, Ranks::Job(ranks))?;
        problem.check_temporal(self.temporal)?;
        if self.backend == BackendChoice::Gpu {
            Capabilities::check_temporal(BackendKind::Gpu, self.temporal)?;
        }
        // Accepted, they would be ignored: the test would not be the one
        // asked for.
        let gpu_only = [
            self.device.map(|_| "--device"),
            self.staging.map(|_| "--staging"),
        ];
        if self.backend == BackendChoice::Cpu
            && let Some(name) = gpu_only.into_iter().flatten().next()
        {
            return Err(Error::usage(format!(
                "{name} sets how the GPU test runs, and this self-test checks host patterns: \
                 add --backend gpu (or auto), or drop {name}"
            )));
        }
        Ok(problem)
    }
}

/// The deepest T `--temporal auto` may take on `problem`'s process grid:
/// the deepest of its candidates that fits (1, the classic sweep, where
/// none does).
fn auto_depth(problem: &Problem) -> usize {
    crate::temporal::AUTO_CANDIDATES
        .into_iter()
        .map(|t| problem.allows(t))
        .max()
        .map_or(1, |t| t.max(1))
}

impl RunArgs {
    /// Refuses options of one backend given to a run of the other, which
    /// it would ignore: the run would not be the one asked for. With
    /// `--backend auto` (either may run) they are taken as given.
    fn check_backend_options(&self) -> Result<()> {
        // `auto` with several sweeps per exchange runs on the CPU.
        let cpu = self.backend == BackendChoice::Cpu;
        let gpu = self.backend == BackendChoice::Gpu;
        let given = |set: bool, name: &'static str| set.then_some(name);
        let gpu_only = [
            given(self.device.is_some(), "--device"),
            given(self.staging.is_some(), "--staging"),
            given(self.gpu_occupancy.is_some(), "--gpu-occupancy"),
            given(self.gpu_sweep.is_some(), "--gpu-sweep"),
            given(self.gpu_layout.is_some(), "--gpu-layout"),
        ];
        let cpu_only = [
            given(self.stores.is_some(), "--stores"),
            given(self.prefetch.is_some(), "--prefetch"),
        ];
        // (the run is on the other backend, its options, what they set,
        // the backend they need, the one the run is on)
        let sides = [
            (cpu, &gpu_only[..], "the GPU backend", "gpu", "CPU"),
            (gpu, &cpu_only[..], "the CPU sweep", "cpu", "GPU"),
        ];
        for (elsewhere, options, sets, needs, runs_on) in sides {
            if elsewhere && let Some(name) = options.iter().flatten().next() {
                return Err(Error::usage(format!(
                    "{name} sets how {sets} runs, and this run is on the {runs_on}: add \
                     --backend {needs} (or auto), or drop {name}"
                )));
            }
        }
        Ok(())
    }

    /// The problem on `ranks` ranks of `backend`: an automatic process
    /// grid weighs each face by what the backend pays for it, and CPU
    /// ranks that block in time weigh faces normal to k as dear where that
    /// leaves T as deep ([`crate::problem::ProblemSpec::resolve_blocked`]).
    fn resolve_problem(&self, ranks: usize, backend: BackendKind) -> Result<Problem> {
        let spec = self.problem.spec();
        let ranks = Ranks::Job(ranks);
        match (backend, self.temporal) {
            (BackendKind::Cpu, Temporal::Sweeps(t)) => spec.resolve_for(Preset::M, ranks, t),
            (BackendKind::Cpu, Temporal::Auto) => {
                spec.resolve_blocked(Preset::M, ranks, auto_depth)
            }
            (BackendKind::Gpu, _) => {
                spec.resolve_weighted(Preset::M, ranks, backend.face_weights())
            }
        }
    }

    /// Validates the options into the final configuration of a job of
    /// `ranks` ranks, `node_ranks` of them on this rank's node (they share
    /// its CPUs when the launcher did not bind them), whose ranks sweep on
    /// `backend` (decided by [`resolve_backend`]); its costs weigh the
    /// faces of an automatic process grid.
    pub fn validate(
        &self,
        ranks: usize,
        node_ranks: usize,
        backend: BackendKind,
    ) -> Result<RunConfig> {
        let problem = self.resolve_problem(ranks, backend)?;
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
                if !(s.is_finite() && s > 0.0 && s <= MAX_TARGET_S) {
                    return Err(Error::usage(format!(
                        "--seconds {} must be a number of seconds above 0 and at most \
                         {MAX_TARGET_S} (one week): give such a target, or --iterations N",
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
            Temporal::Auto => auto_depth(&problem),
        };
        problem.check_temporal(temporal)?;
        if self.temporal == Temporal::Auto && self.checkpoint.checkpoint_dir.is_some() {
            return Err(Error::usage(
                "--temporal auto may choose a different T on a restart, and a checkpoint \
                 holds the T it was written with: give --temporal T with --checkpoint-dir",
            ));
        }
        if self.backend == BackendChoice::Auto && self.checkpoint.checkpoint_dir.is_some() {
            // A segment that lands where no GPU is usable would sweep on
            // the CPU, whose ranks split the grid otherwise than GPU ranks
            // (`BackendKind::face_weights`), so its blocks would not be the
            // checkpoint's.
            return Err(Error::usage(
                "--backend auto may choose another backend on a restart, and with it another \
                 process grid, while a checkpoint holds the blocks it was written with: give \
                 --backend cpu or --backend gpu with --checkpoint-dir",
            ));
        }
        if self.overlap && self.backend == BackendChoice::Cpu {
            // Measured: with k split (every automatic grid at M and L) the
            // boundary pass costs far more than the 2-7% exchange it could
            // hide, and without it the gain is within the noise.
            return Err(Error::usage(
                "--overlap overlaps the halo exchange with GPU sweeps only; on CPU ranks it \
                 does not pay (notes/cpu-overlap.md): drop --overlap or use --backend gpu",
            ));
        }
        if self.backend == BackendChoice::Gpu {
            Capabilities::check_temporal(BackendKind::Gpu, self.temporal.fixed())?;
        }
        if self.tile_rows == Some(0) {
            return Err(Error::usage("--tile-rows must be at least 1"));
        }
        self.check_backend_options()?;
        self.check_halo(backend)?;
        if self.tile_rows.is_some() && self.temporal == Temporal::Sweeps(1) {
            // Accepted, it would be ignored: the run would not be the
            // experiment asked for.
            return Err(Error::usage(
                "--tile-rows sets the tiles of the temporal wavefront, which runs only with \
                 --temporal 2 or more: add --temporal T, or drop --tile-rows",
            ));
        }
        if matches!(self.prefetch, Some(Prefetch::On | Prefetch::Off)) && self.temporal.fixed() > 1
        {
            // The wavefront always prefetches its first level: a fixed
            // choice would be ignored.
            return Err(Error::usage(
                "--prefetch on|off sets the classic sweep's kernel, and --temporal above 1 runs \
                 the wavefront instead: use --temporal 1 (or auto), or drop --prefetch",
            ));
        }
        if let (Some(v), Some(o)) = (self.gpu_sweep, self.gpu_occupancy)
            && !v.fits(o)
        {
            // 48 registers cannot hold two planes' loads: the kernel would
            // spill to memory (docs/gpu.md, "Sweep variants").
            return Err(Error::usage(format!(
                "--gpu-sweep {} keeps two i-planes of loads in registers, which do not fit the \
                 48 of --gpu-occupancy 5 (they would spill): use --gpu-occupancy auto or 4, or \
                 --gpu-sweep classic or slab",
                v.name()
            )));
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
            backend,
            format: self.format,
            output: self.output.clone(),
            verify: self.verify,
            bind: self.bind,
            staging: self.staging.unwrap_or(Staging::Pinned),
            device: self.device,
            overlap: self.overlap,
            gpu_occupancy: self.gpu_occupancy.unwrap_or(Occupancy::Auto),
            stores: self.stores.unwrap_or(Stores::Auto),
            prefetch: self.prefetch.unwrap_or(Prefetch::Auto),
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
            scaling: self.scaling,
            checkpoint: self.checkpoint.validate(length, temporal)?,
            gpu_sweep: self.gpu_sweep.unwrap_or_default(),
            halo: self.halo.unwrap_or_default(),
            gpu_layout: self.gpu_layout.unwrap_or_default(),
        })
    }

    /// Refuses a device-direct `--halo` path where it cannot run: on CPU
    /// ranks (there is no device), and `peer` without in-process ranks
    /// (it copies between the GPUs of one process's ranks).
    fn check_halo(&self, backend: BackendKind) -> Result<()> {
        let Some(path) = self.halo.filter(|h| h.device_direct()) else {
            return Ok(());
        };
        let name = path.name();
        if backend == BackendKind::Cpu {
            return Err(Error::usage(format!(
                "--halo {name} moves halo faces between GPUs, and this run is on the CPU: add \
                 --backend gpu, or drop --halo {name}"
            )));
        }
        if path == HaloPath::Peer && self.launch.local_ranks.is_none() {
            return Err(Error::usage(
                "--halo peer copies faces between the GPUs of in-process ranks: add \
                 --local-ranks N, or use --halo staged (or nccl, mpi-device) with MPI ranks",
            ));
        }
        Ok(())
    }
}

impl CheckpointArgs {
    /// The validated settings of a run of `length` with `temporal` sweeps
    /// per exchange, or `None` when no checkpoint option was given.
    fn validate(&self, length: RunLength, temporal: usize) -> Result<Option<CheckpointConfig>> {
        let Some(dir) = &self.checkpoint_dir else {
            let given = [
                self.checkpoint_every.map(|_| "--checkpoint-every"),
                self.checkpoint_keep.map(|_| "--checkpoint-keep"),
                self.restart.as_ref().map(|_| "--restart"),
            ];
            return match given.into_iter().flatten().next() {
                Some(name) => Err(Error::usage(format!(
                    "{name} needs --checkpoint-dir DIR, the folder of the run's checkpoints"
                ))),
                None => Ok(None),
            };
        };
        if dir.as_os_str().is_empty() {
            return Err(Error::usage("--checkpoint-dir is empty: give a folder"));
        }
        let RunLength::Iterations(planned) = length else {
            // A --seconds run sizes its length from the rehearsal's time,
            // which a restart cannot repeat: its answer would not be the
            // uninterrupted run's.
            return Err(Error::usage(
                "--checkpoint-dir needs a fixed --iterations N: a --seconds run's length \
                 depends on its timing, so a restart could not reproduce it",
            ));
        };
        // A checkpoint falls on the end of a block of `temporal` sweeps.
        let depth = temporal.max(1) as u64;
        let every = self.checkpoint_every.map(|n| n.div_ceil(depth) * depth);
        if let (Some(n), Some(asked)) = (every, self.checkpoint_every)
            && n != asked
        {
            tracing::info!(
                asked,
                every = n,
                "checkpoint interval rounded up to whole blocks"
            );
        }
        if every.is_some_and(|n| n >= planned) {
            tracing::info!(
                planned,
                "the checkpoint interval is not shorter than the run"
            );
        }
        let restart = self.restart.as_ref().map(|r| match r.to_str() {
            Some("latest") => Restart::Latest,
            _ => Restart::Manifest(r.clone()),
        });
        if let Some(Restart::Manifest(p)) = &restart
            && p.as_os_str().is_empty()
        {
            return Err(Error::usage(
                "--restart is empty: give `latest` or a checkpoint's manifest",
            ));
        }
        Ok(Some(CheckpointConfig {
            dir: dir.clone(),
            every,
            keep: self
                .checkpoint_keep
                .map_or(DEFAULT_CHECKPOINT_KEEP, |k| k as usize),
            restart,
        }))
    }
}

/// This rank's own validation of the run on `backend`: the options, the
/// test hooks and the stop grace from the environment, and on rank 0
/// (which appends) that the results file is writable.
pub fn job(
    args: &RunArgs,
    backend: BackendKind,
    comm: &dyn Comm,
) -> Result<(RunConfig, Option<Fault>, Option<Duration>)> {
    let cfg = args.validate(comm.size(), comm.node_size(), backend)?;
    let fault = Fault::from_env()?;
    let grace = signals::grace_from_env()?;
    crate::machine::cache::stated()?;
    super::outputs::check(args)?;
    if comm.rank() == 0
        && let Some(path) = &cfg.output
    {
        report::append::check_writable(path)?;
    }
    if comm.rank() == 0
        && let Some(path) = &args.trace.trace
    {
        trace::check_writable(path)?;
    }
    Ok((cfg, fault, grace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::PathBuf;

    /// A `himeno run` command line, parsed.
    fn args(extra: &[&str]) -> RunArgs {
        #[derive(clap::Parser)]
        struct Run {
            #[command(flatten)]
            run: RunArgs,
        }
        let mut argv = vec!["himeno"];
        argv.extend_from_slice(extra);
        Run::try_parse_from(argv).expect("parses").run
    }

    /// Validated for one rank on the backend the options fix (`auto`
    /// without probing: the CPU).
    fn validated(a: &RunArgs) -> Result<RunConfig> {
        let backend = a
            .backend
            .fixed(a.temporal.fixed())
            .unwrap_or(BackendKind::Cpu);
        a.validate(1, 1, backend)
    }

    #[test]
    fn auto_is_left_to_the_probe_only_where_a_gpu_can_run() {
        use BackendChoice::{Auto, Cpu, Gpu};
        assert_eq!(Auto.fixed(1), None);
        assert_eq!(Auto.fixed(2), Some(BackendKind::Cpu));
        assert_eq!(Cpu.fixed(1), Some(BackendKind::Cpu));
        // Refused by validation, not turned into something else.
        assert_eq!(Gpu.fixed(4), Some(BackendKind::Gpu));
        assert!(Auto.may_use_gpu(1) && !Auto.may_use_gpu(3) && !Cpu.may_use_gpu(1));
    }

    #[test]
    fn defaults_are_the_original_run() {
        let cfg = validated(&args(&[])).unwrap();
        assert_eq!(cfg.grid().n, [128, 128, 256]);
        assert_eq!(cfg.length, RunLength::Seconds(60.0));
        assert_eq!(cfg.warmup, 3);
    }

    /// CPU ranks that block in time, a fixed T or `auto`, keep k whole as
    /// GPU ranks do; the classic sweep splits it (the plain surface).
    #[test]
    fn blocked_cpu_ranks_keep_k_whole() {
        for (temporal, want) in [("1", [1, 1, 2]), ("4", [2, 1, 1]), ("auto", [2, 1, 1])] {
            let cfg = args(&["--size", "M", "--backend", "cpu", "--temporal", temporal])
                .validate(2, 2, BackendKind::Cpu)
                .unwrap();
            assert_eq!(cfg.procs().p, want, "--temporal {temporal}");
        }
    }

    #[test]
    fn gpu_ranks_keep_k_whole_where_cpu_ranks_split_it() {
        for (ranks, cpu, gpu) in [
            (2, [1, 1, 2], [2, 1, 1]),
            (4, [2, 1, 2], [2, 2, 1]),
            (8, [2, 2, 2], [4, 2, 1]),
        ] {
            let on = |choice: &str, backend: BackendKind| {
                let cfg = args(&["--size", "L", "--backend", choice])
                    .validate(ranks, ranks, backend)
                    .unwrap();
                assert_eq!(cfg.backend, backend, "the configuration is resolved");
                cfg.procs().p
            };
            assert_eq!(on("cpu", BackendKind::Cpu), cpu, "{ranks} CPU ranks");
            assert_eq!(
                on("auto", BackendKind::Cpu),
                cpu,
                "{ranks} ranks, auto on CPUs"
            );
            assert_eq!(on("gpu", BackendKind::Gpu), gpu, "{ranks} GPU ranks");
            assert_eq!(
                on("auto", BackendKind::Gpu),
                gpu,
                "{ranks} ranks, auto on GPUs"
            );
        }
    }

    #[test]
    fn bad_numbers_are_usage_errors() {
        // One command line a case, split at spaces.
        for bad in [
            "--iterations 0",
            "--seconds 0",
            "--seconds NaN",
            "--threads 0",
            "--grid 2x3x4",
            "--size XXL",
            "--procs 2x1x1",
            "--stream-gbs=-1",
            "--temporal 0",
            "--temporal 33",
            "--temporal 2 --backend gpu",
            "--temporal auto --checkpoint-dir /tmp/x --iterations 4",
            "--backend auto --checkpoint-dir /tmp/x --iterations 4",
            "--backend auto --temporal 2 --checkpoint-dir /tmp/x --iterations 4",
            "--tile-rows 0",
            "--tile-rows 4",
            "--tile-rows 4 --temporal 1",
            "--device 0",
            "--staging pageable --backend cpu",
            "--gpu-occupancy 4",
            "--gpu-sweep classic --backend cpu",
            "--gpu-sweep slab",
            "--gpu-layout padded --backend cpu",
            "--gpu-sweep pipelined --gpu-occupancy 5 --backend gpu",
            "--stores cached --backend gpu",
            "--prefetch off --backend gpu",
            "--prefetch on --temporal 4",
        ] {
            let bad: Vec<&str> = bad.split(' ').collect();
            let err = validated(&args(&bad)).unwrap_err();
            assert!(matches!(err, Error::Usage(_)), "{bad:?}: {err}");
        }
    }

    fn checkpoint(every: Option<u64>, restart: Option<&str>) -> CheckpointArgs {
        CheckpointArgs {
            checkpoint_every: every,
            checkpoint_dir: Some("ck".into()),
            checkpoint_keep: None,
            restart: restart.map(PathBuf::from),
        }
    }

    #[test]
    fn the_interval_is_whole_blocks() {
        let c = checkpoint(Some(5), None)
            .validate(RunLength::Iterations(20), 3)
            .unwrap()
            .unwrap();
        assert_eq!((c.every, c.keep), (Some(6), DEFAULT_CHECKPOINT_KEEP));
        let c = checkpoint(Some(5), None)
            .validate(RunLength::Iterations(20), 1)
            .unwrap()
            .unwrap();
        assert_eq!(c.every, Some(5));
    }

    #[test]
    fn restart_names_latest_or_a_manifest() {
        let l = checkpoint(None, Some("latest"))
            .validate(RunLength::Iterations(9), 1)
            .unwrap()
            .unwrap();
        assert_eq!(l.restart, Some(Restart::Latest));
        let m = checkpoint(None, Some("ck/x/manifest.json"))
            .validate(RunLength::Iterations(9), 1)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.restart,
            Some(Restart::Manifest("ck/x/manifest.json".into()))
        );
    }

    #[test]
    fn refused_without_a_folder_or_a_fixed_count() {
        let mut a = checkpoint(Some(2), None);
        assert!(a.validate(RunLength::Seconds(5.0), 1).is_err());
        a.checkpoint_dir = None;
        let e = a.validate(RunLength::Iterations(9), 1).unwrap_err();
        assert!(
            e.message()
                .contains("--checkpoint-every needs --checkpoint-dir")
        );
        assert_eq!(
            CheckpointArgs::default()
                .validate(RunLength::Seconds(5.0), 1)
                .unwrap(),
            None
        );
    }
}
