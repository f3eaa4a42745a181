//! Running a benchmark job: the phases the benchmark defines, in its
//! order, each a function below whose `///` states the collectives it
//! runs (every rank runs them, in this order, unless it says rank 0):
//!
//! 1. [`set_up`]: options agreed, memory checked, buffers made;
//! 2. [`calibrate_and_choose`]: `--temporal auto`'s T, the kernel;
//! 3. [`rehearse_and_verify`]: the untimed warm-up and its checked answer;
//! 4. [`timed_loop`]: the measured iterations and the rank summaries;
//! 5. [`verdict`]: rank 0 decides VALID or not, every rank learns it;
//! 6. [`report`]: the stream ceilings, then rank 0 prints and appends.
//!
//! With `--trace`, the timeline is recorded from just before phase 3 to
//! just after phase 4 (`trace::Session`: its start is a barrier, the clock
//! exchange and a recorded barrier; its finish a recorded barrier, the
//! gather of every rank's header, a broadcast of the event count, then
//! rank 0 takes each rank's events in turn, point to point).
//!
//! How the job ended is an [`Outcome`]; `crate::error` maps it to the
//! exit code, in one place.
//!
//! Everything the job takes from its environment (options, stop signals,
//! `HIMENO_FAULT`, `HIMENO_BINDING`, `HIMENO_STOP_GRACE`) is read here or
//! in its validation (`super::validate`) and passed down.
//! Usage errors are found identically on every rank, so every rank returns
//! exit code 2 and only rank 0 prints. A runtime error may strike one rank
//! alone: that rank prints it and aborts the whole job.

use super::args::RunArgs;
use super::validate;
use crate::backend;
use crate::bench::stream;
use crate::calibrate::{self, Built};
use crate::checkpoint::Checkpointer;
use crate::comm::{self, Comm};
use crate::config::{BackendKind, RunConfig, StreamMeasure, agreed};
use crate::energy;
use crate::environment;
use crate::error::{self, Error, Outcome, Result};
use crate::fault::Fault;
use crate::grid::decomp::Block;
use crate::grid::{FLOPS_PER_POINT, Grid};
use crate::halo::Halo;
use crate::kernel_choice::{self, KernelChoice};
use crate::machine::memory;
use crate::output::{self, Format};
use crate::preflight;
use crate::progress::Progress;
use crate::report::{self, Ceilings, Record, RecordInputs};
use crate::signals::StopFlag;
use crate::solver::{self, Extras, MemoryUse, Rehearsal, Solver};
use crate::temporal::{self, TemporalChoice};
use crate::timeline;
use crate::trace;
use crate::verify::{self, Answer, Verdict};
use std::process::ExitCode;

/// Runs the benchmark job described by `args`.
pub fn benchmark(args: &RunArgs) -> ExitCode {
    // In-process GPU ranks share the process's hardware queues, which the
    // driver sizes from the environment when it initialises: set them
    // before the stop watchdog, the rank threads or a GPU probe exist.
    if let Some(ranks) = args.launch.local_ranks
        && cfg!(feature = "cuda")
        && args.backend.may_use_gpu(args.temporal.fixed())
    {
        // SAFETY: the process has one thread here: `main_entry` only parsed
        // the arguments and installed the logger (which starts no thread)
        // before calling this, and everything that starts threads or
        // loads the driver (StopFlag::install, with_comm, the probe) comes
        // below. Under mpirun without --local-ranks nothing is set: each
        // process then has one rank and the default queues suffice.
        unsafe { backend::gpu::connections::prepare(ranks) };
    }
    let stop = StopFlag::install();
    comm::with_comm(args.launch.local_ranks, |comm| {
        run_job(args, comm, stop.clone()).map(Outcome::exit_code)
    })
}

/// The job itself, phase by phase; see the module's header.
fn run_job(args: &RunArgs, comm: &dyn Comm, stop: StopFlag) -> Result<Outcome> {
    let (mut job, plan, built) = set_up(args, comm, &stop)?;
    let mut chosen = calibrate_and_choose(&job, plan, built, comm, &stop)?;
    let pace = calibrated_pace(&chosen);

    // The rehearsal and the timed loop run on one solver over the chosen
    // buffers, traced when asked; the progress display ends either way.
    let mut progress = Progress::for_rank(comm.rank());
    let trace = (args.trace.trace.as_deref())
        .map(|path| trace::Session::start(path, args.trace.trace_keep, job.trace_bound, comm));
    let mut solver = Solver {
        comm,
        backend: chosen.built.backend.as_mut(),
        halo: &mut chosen.built.halo,
        grid: job.grid,
        block: chosen.built.block,
        stop: stop.clone(),
        extras: Extras {
            fault: job.fault.take(),
            progress: Some(&mut progress),
            memory: job.memory,
            checkpoint: job.checkpoint.as_mut(),
        },
    };
    let measured = rehearse_and_verify(&mut solver, &job.cfg).and_then(|(rehearsal, checked)| {
        Ok((
            timed_loop(&mut solver, &job.cfg, (&rehearsal, pace), args.energy)?,
            checked,
        ))
    });
    drop(solver);
    progress.finish();
    let ((measured, energy), checked) = measured?;
    // Side writes that failed: the record keeps them, the run exits 2.
    let mut warnings = Vec::new();
    if let Some(session) = trace {
        warnings.extend(session.finish(comm, trace_about(&job.cfg, &measured), &stop)?);
    }
    if measured.iterations == 0 {
        if comm.rank() == 0 {
            error::print_line(
                "himeno: stopped by a signal during the rehearsal: no iteration was timed, \
                 so there is no report",
            );
        }
        return Ok(Outcome::Stopped);
    }

    let (verdict, ended) = verdict(&job, &measured, checked, comm, &stop)?;
    // The timed loop and its verdict are over: the fields are given back
    // before the quick stream allocates its arrays.
    drop(chosen.built);
    Ok(report(
        &job,
        &measured,
        Decided {
            verdict,
            ended,
            temporal: chosen.temporal,
            kernel: chosen.kernel,
            warnings,
            energy,
        },
        comm,
        &stop,
    ))
}

/// What the set-up leaves for the phases after it.
struct Job {
    /// The configuration every rank agreed on.
    cfg: RunConfig,
    /// Its global grid.
    grid: Grid,
    /// A failure to inject (robustness tests only).
    fault: Option<Fault>,
    /// `HIMENO_BINDING`, for the record.
    binding: Option<String>,
    /// The events a trace keeps, which the preflight counted.
    trace_bound: timeline::Bound,
    /// This rank's memory as the preflight estimated it.
    memory: MemoryUse,
    /// Checkpoints and restart, if asked for.
    checkpoint: Option<Checkpointer>,
}

/// Phase 1, set up: validates the options, agrees on them, checks the
/// memory and makes the block, its backend and halo exchange (as deep as
/// the deepest T `--temporal auto` may take). Collectives, in order:
/// 1. `--backend auto`'s probe, rank 0 deciding (`validate::resolve_backend`;
///    none for a fixed backend);
/// 2. the agreement on the options (`comm::agree`: the configuration's
///    terms and the trace's; a refusal anywhere stops every rank);
/// 3. `--temporal`'s warning for a fixed T > 1, or its candidates and a
///    memory decision per deeper candidate for `auto` (`temporal::Plan::of`);
/// 4. the memory preflight: the checkpoint folder's agreement when there is
///    one, then the memory decision; the trace's memory decision when
///    tracing (`preflight::check`, `preflight::check_trace`);
/// 5. with a checkpoint folder, its lock's decision, the restart's
///    agreement and the read of its files (`Checkpointer::prepare`);
/// 6. the backend's start-up: none on the CPU, a GPU's device and memory
///    decisions (`backend::create`).
fn set_up(
    args: &RunArgs,
    comm: &dyn Comm,
    stop: &StopFlag,
) -> Result<(Job, temporal::Plan, Built)> {
    // Every rank validates on its own, then all agree before any work: a
    // rank that refused, or resolved otherwise, stops every rank.
    // Where the ranks sweep is decided first (collectively: `auto` probes
    // for GPUs on every rank), because GPU ranks weigh the faces of an
    // automatic process grid differently.
    // A malformed fault is refused in the validation below, on every rank.
    if let Ok(Some(fault)) = Fault::from_env() {
        fault.at_start(comm.rank())?;
    }
    let on = validate::resolve_backend(args.backend, args.temporal.fixed(), comm)?;
    let (cfg, fault, grace) = comm::agree(comm, validate::job(args, on, comm), |(cfg, ..)| {
        let mut terms = cfg.agreement_terms();
        // Tracing adds collectives (the clock exchange, the gather): every
        // rank must record, or none.
        terms.extend(agreed::terms(&args.trace));
        terms
    })?;
    if let Some(grace) = grace {
        stop.set_grace(grace);
    }
    let binding =
        environment::get_os(environment::BINDING).map(|b| b.to_string_lossy().into_owned());
    let (grid, procs) = (cfg.grid(), cfg.procs());
    // The block is made as deep as the deepest T `--temporal auto` may take.
    // The quick stream runs after the solver has freed its fields: the
    // preflight counts the larger of the two.
    let quick_footprint =
        (cfg.stream == StreamMeasure::Quick).then(|| stream::quick_footprint(comm.node_size()));
    let need = |b: &Block| preflight::rank_need(&cfg, b, quick_footprint, comm.rank());
    let plan = temporal::Plan::of(&cfg, &grid, comm, &need)?;
    let block = Block::of(&grid, &procs, comm.rank()).with_depth(plan.depth());
    tracing::info!(rank = comm.rank(), ?block, "block");
    let baseline = memory::resident_now();
    let need = preflight::check(&cfg, &block, quick_footprint, comm)?;
    let trace_bound = timeline::Bound::of(&cfg, args.trace.trace_keep, block.depth);
    let need = match &args.trace.trace {
        Some(_) => preflight::check_trace(&cfg, need, trace_bound, comm)?,
        None => need,
    };
    let checkpoint = Checkpointer::prepare(&cfg, &block, comm, stop)?;
    let mut backend = backend::create(&cfg, &grid, &block, comm)?;
    let halo = Halo::new(&block, backend.as_mut())?;
    let memory = MemoryUse {
        estimated_bytes: need.resident.min(u64::MAX.into()) as u64,
        baseline_bytes: baseline.map(|b| b.min(u64::MAX.into()) as u64),
        peak_bytes: None,
    };
    let job = Job {
        cfg,
        grid,
        fault,
        binding,
        trace_bound,
        memory,
        checkpoint,
    };
    let built = Built {
        block,
        backend,
        halo,
    };
    Ok((job, plan, built))
}

/// What the calibrations chose, with the buffers made for it.
struct Chosen {
    /// The block (as deep as the T chosen), backend and halo exchange,
    /// the fields in their initial state.
    built: Built,
    /// How T was chosen, for the record.
    temporal: Option<TemporalChoice>,
    /// How the kernel was chosen, for the record.
    kernel: Option<KernelChoice>,
}

/// Phase 2, calibrate and choose: `--temporal auto` times its candidate
/// T's and rebuilds the buffers for a shallower winner; `--prefetch` and
/// `--stores auto` time the kernels the backend offers. Collectives, in
/// order: with several T candidates, the calibration rounds (one
/// allreduce and one max each, the budget's max) and, for a shallower T,
/// the backend's start-up again (`temporal::Plan::settle`); the kernel
/// offer (rank 0 decides) and, with two or more kernels, their rounds
/// (`kernel_choice::settle`).
fn calibrate_and_choose(
    job: &Job,
    plan: temporal::Plan,
    built: Built,
    comm: &dyn Comm,
    stop: &StopFlag,
) -> Result<Chosen> {
    let budget = calibrate::Budget::start(&job.cfg);
    let run = calibrate::Run {
        cfg: &job.cfg,
        grid: &job.grid,
        comm,
        stop,
        budget: &budget,
    };
    let (mut built, temporal) = plan.settle(run, built)?;
    let kernel = kernel_choice::settle(run, &mut built)?;
    Ok(Chosen {
        built,
        temporal,
        kernel,
    })
}

/// The seconds per sweep the calibrations timed for the T and kernel the
/// run chose (the kernel's, timed last with the chosen T, else the
/// temporal one's), on the slowest rank: the same on every rank. The
/// median turn's, not the best (which chose): sized from the best turn, a
/// `--seconds 20` run with `--temporal auto` on a 2-vCPU Xeon guest took
/// 21.3 s. A `--seconds` run of a blocked sweep is sized from it
/// (`solver::planned_iterations`).
fn calibrated_pace(chosen: &Chosen) -> Option<f64> {
    let kernel = chosen.kernel.as_ref().and_then(|k| {
        let trial = k.trials.iter().find(|t| t.kernel == k.chosen);
        trial.map(|t| t.median_s.unwrap_or(t.sweep_s))
    });
    let temporal = chosen.temporal.as_ref().and_then(|c| {
        let trial = c
            .trials
            .iter()
            .find(|t| t.sweeps == c.sweeps && t.tile_rows == c.tile_rows);
        trial.map(|t| t.median_s.unwrap_or(t.sweep_s))
    });
    kernel.or(temporal)
}

/// Phase 3, rehearse and verify: the untimed warm-up from the initial
/// state. When an answer is stored for exactly `warmup` iterations it is
/// checked for free (rank 0 decides, every rank learns): a wrong one ends
/// the run with exit 1 before the timed loop; a right one is returned,
/// the verdict of a run that has no check of its own. Collectives, in
/// order: the rehearsal's (`Solver::rehearse`: a barrier, an allreduce per
/// round, a max, the fingerprint's gather) and, for a checked answer,
/// rank 0's decision on it.
fn rehearse_and_verify(
    solver: &mut Solver<'_>,
    cfg: &RunConfig,
) -> Result<(Rehearsal, Option<Verdict>)> {
    let known = verify::known_answer(&solver.grid, cfg.warmup).is_some();
    let rehearsal = solver.rehearse(cfg.warmup, known)?;
    let Some(got) = rehearsal.answer else {
        return Ok((rehearsal, None));
    };
    let comm = solver.comm;
    let mine = if comm.rank() == 0 {
        verify::check_rehearsal(&solver.grid, cfg.warmup, &got)
    } else {
        None
    };
    let checked = comm::decide(comm, "the rehearsal's answer", &mine, |mut all| {
        match all.swap_remove(0) {
            Some(v) if v.verified() == Some(false) => Err(Error::Verification(format!(
                "the rehearsal's answer is wrong: {}",
                v.detail()
            ))),
            verdict => Ok(verdict),
        }
    })?;
    Ok((rehearsal, checked))
}

/// Phase 4, the timed loop: the run sized from the rehearsal (or, for a
/// blocked sweep, the calibrated `pace`: `solver::planned_iterations`),
/// the fields reset (or a restart's checkpoint taken up), the measured iterations,
/// the rank summaries gathered on rank 0; around it, the energy counters
/// read (`--energy`: the node's by its node-local leader, a GPU's by its
/// rank) and every rank's readings gathered on rank 0. Collectives, in
/// order (see `Solver::timed`): the restore's, a barrier, an allreduce
/// per round and each checkpoint's, a barrier, two maxima, the
/// summaries' gather; then the energy readings' gather (`energy::gather`,
/// on every rank whatever its `--energy`).
fn timed_loop(
    solver: &mut Solver<'_>,
    cfg: &RunConfig,
    (rehearsal, pace): (&Rehearsal, Option<f64>),
    energy: energy::Mode,
) -> Result<(solver::Outcome, Option<Vec<energy::RankView>>)> {
    let info = solver.backend.info();
    let gpu = info
        .device
        .as_deref()
        .filter(|_| info.kind == BackendKind::Gpu);
    let meter = energy::Meter::start(energy, solver.comm, gpu);
    let outcome = solver.timed(cfg.length, rehearsal, pace)?;
    let views = energy::gather(solver.comm, &meter.finish());
    Ok((outcome, views))
}

/// Phase 5, the verdict: rank 0 checks the timed iterations' answer (a
/// stored one, or a reference run with `--verify`, on rank 0 alone) or
/// falls back on the `checked` rehearsal, and every rank learns the
/// verdict and how the run ended. Collective: rank 0's decision on the
/// verdict, once.
fn verdict(
    job: &Job,
    measured: &solver::Outcome,
    checked: Option<Verdict>,
    comm: &dyn Comm,
    stop: &StopFlag,
) -> Result<(Verdict, Outcome)> {
    let grid = &job.grid;
    let mine = if comm.rank() == 0 {
        let verdict = if measured.complete {
            let got = Answer {
                gosa: measured.gosa,
                p_fingerprint: measured.fingerprint,
            };
            let full = verify::verdict_of(grid, measured.iterations, &got, job.cfg.verify, stop)?;
            // Without a full check of the timed iterations (a --seconds run,
            // a count with no stored answer), the checked rehearsal is the
            // verdict.
            // A restart's checkpoint is checked there too (see
            // `verify::after_rehearsal`).
            match checked {
                Some(r) if full.verified().is_none() && !full.interrupted() => {
                    verify::after_rehearsal(
                        r,
                        measured.iterations,
                        job.checkpoint.as_ref().and_then(|c| c.resumed()),
                        grid,
                        stop,
                    )?
                }
                _ => full,
            }
        } else {
            Verdict::Unchecked {
                detail: "the run was stopped early; an incomplete run is not verified".into(),
            }
        };
        Some(verdict)
    } else {
        None
    };
    comm::decide(comm, "the verdict", &mine, |mut all| {
        let verdict = all.swap_remove(0).expect("rank 0 states the verdict");
        let ended = match verdict.verified() {
            Some(false) => Outcome::Wrong,
            _ if !measured.complete || verdict.interrupted() => Outcome::Stopped,
            _ => Outcome::Done,
        };
        Ok((verdict, ended))
    })
}

/// What the phases before the report decided, for the record.
struct Decided {
    /// The verdict every rank learnt.
    verdict: Verdict,
    /// How the run ended, by the verdict.
    ended: Outcome,
    /// How T was chosen.
    temporal: Option<TemporalChoice>,
    /// How the kernel was chosen.
    kernel: Option<KernelChoice>,
    /// Side writes that failed so far (the trace).
    warnings: Vec<String>,
    /// Every rank's energy readings (rank 0 only).
    energy: Option<Vec<energy::RankView>>,
}

/// Phase 6, the report: the bandwidths to compare with (the quick stream,
/// measured now), then on rank 0 the record printed, appended to the
/// results file and each failure told. Returns how the job ended: the
/// verdict's ending, exit 2 for a failed stream, report or side write (a
/// wrong answer keeps its 1). Collective: the quick stream's (`ceilings`);
/// the rest is rank 0's alone, after the last collective, so a failure
/// there ends rank 0 with exit 2 without aborting the job.
fn report(
    job: &Job,
    measured: &solver::Outcome,
    decided: Decided,
    comm: &dyn Comm,
    stop: &StopFlag,
) -> Outcome {
    let (ceilings, streamed) = ceilings(&job.cfg, comm, measured.complete);
    let mut ended = decided.ended.and(streamed);
    if comm.rank() != 0 {
        return ended;
    }
    // Side writes that failed (the trace, a checkpoint, an old one's
    // removal): the measurement stands, the record says what failed.
    let mut warnings = decided.warnings;
    warnings.extend(
        job.checkpoint
            .as_ref()
            .map_or_else(Vec::new, |c| c.warnings()),
    );
    let mut record = Record::build(
        measured,
        RecordInputs {
            cfg: &job.cfg,
            verdict: decided.verdict,
            ceilings,
            binding: job.binding.clone(),
            launch: comm.launch(),
            mpi_library: comm.library(),
            temporal: decided.temporal,
            kernel: decided.kernel,
            warnings,
        },
    );
    record.energy = decided
        .energy
        .and_then(|views| energy::summarise(views, &energy_work(&record)));
    let printed = print_record(&record, job.cfg.format);
    match decided.ended {
        Outcome::Wrong => error::print_line(&format!(
            "himeno: verification FAILED: {}",
            record.verification.detail()
        )),
        Outcome::Stopped if record.verification.interrupted() => error::print_line(
            "himeno: stopped by a signal during the reference run: the run is complete \
             but not verified",
        ),
        Outcome::Stopped => error::print_line(&format!(
            "himeno: stopped by a signal after {} of {} iterations; the report is marked incomplete",
            record.iterations, record.planned_iterations
        )),
        _ => {}
    }
    // Whatever became of the report on stdout (a closed pipe, a full
    // disk), the record is appended: it is what studies are made of.
    let appended = match &job.cfg.output {
        Some(path) => append_record(path, &record, stop),
        None => Ok(()),
    };
    // Each failure is told on its own line.
    for e in [printed.err(), appended.err()].into_iter().flatten() {
        error::print_line(&format!("himeno: {e}"));
        ended = ended.and(Outcome::Warned);
    }
    // A failed side write is told after the record is kept, and turns
    // a clean exit into exit 2 (a wrong answer keeps its 1).
    for w in &record.warnings {
        error::print_line(&format!("himeno: warning: {w}"));
        ended = ended.and(Outcome::Warned);
    }
    ended
}

/// The bandwidths the report compares the run with: given (`--stream-gbs`)
/// or measured now by the quick stream (`--stream quick`), with the run's
/// threads and binding, collectively. The quick stream runs after the timed
/// loop, not before it: memory it allocated and freed just before the loop
/// was still being handed back to the hypervisor (a guest's free page
/// reporting) while the loop ran, which stole CPU time from the sweep and
/// slowed it by up to a fifth (notes/cpu-perf.md, twelfth session). A run
/// stopped early (`complete` false on every rank) skips it, to leave in
/// its grace. A failed measurement leaves the fractions out and says so;
/// the second value is then [`Outcome::Warned`] (the run ends with exit 2,
/// its report still printed and appended), [`Outcome::Done`] otherwise.
fn ceilings(cfg: &RunConfig, comm: &dyn Comm, complete: bool) -> (Ceilings, Outcome) {
    match cfg.stream {
        StreamMeasure::Quick if complete => {
            match stream::quick_stream(comm, cfg.threads, cfg.bind) {
                Ok(quick) => (
                    Ceilings {
                        triad_gbs: Some(quick.triad),
                        sum13_gbs: Some(quick.sum13),
                    },
                    Outcome::Done,
                ),
                Err(e) => {
                    if comm.rank() == 0 {
                        error::print_line(&format!(
                            "himeno: {e}; the report has no stream fractions"
                        ));
                    }
                    (Ceilings::default(), Outcome::Warned)
                }
            }
        }
        StreamMeasure::Quick => (Ceilings::default(), Outcome::Done),
        StreamMeasure::Off => (
            Ceilings {
                triad_gbs: cfg.stream_gbs,
                sum13_gbs: None,
            },
            Outcome::Done,
        ),
    }
}

/// Appends `record` to the results file at `path` as one JSON line. When
/// that fails, the error carries the line, so that the record survives in
/// the job's log and can be appended by hand.
fn append_record(path: &std::path::Path, record: &Record, stop: &StopFlag) -> Result<()> {
    let line = serde_json::to_string(record)
        .map_err(|e| Error::runtime(format!("cannot encode the record: {e}")))?;
    report::append::append_line(path, &line, stop).map_err(|e| {
        Error::runtime(format!(
            "{}; the record was not appended, here it is: {line}",
            e.message()
        ))
    })
}

/// The work the job's energy paid for: its timed iterations (after a
/// restart's, as the rates count them) and each host's flops in them.
fn energy_work(record: &Record) -> energy::summary::Work {
    let iterations = record
        .iterations
        .saturating_sub(record.restarted_from.as_ref().map_or(0, |r| r.iteration));
    let mut flops = std::collections::BTreeMap::new();
    for x in &record.per_rank {
        let points: f64 = x.points.iter().map(|&p| p as f64).product();
        *flops.entry(x.host.clone()).or_insert(0.0) += FLOPS_PER_POINT * points * iterations as f64;
    }
    energy::summary::Work { iterations, flops }
}

/// What a trace file says about its run.
fn trace_about(cfg: &RunConfig, outcome: &solver::Outcome) -> serde_json::Value {
    serde_json::json!({
        "grid": cfg.grid().to_string(),
        "process_grid": cfg.procs().to_string(),
        "iterations": outcome.iterations,
        "planned_iterations": outcome.planned,
        "warmup_iterations": cfg.warmup,
        "temporal": outcome.temporal,
        "complete": outcome.complete,
        "restarted_from": outcome.restarted_from.as_ref().map(|r| r.iteration),
        "label": cfg.label,
    })
}

/// Prints the record on standard output in the chosen format.
fn print_record(record: &Record, format: Format) -> Result<()> {
    let text = match format {
        Format::Text => report::text::render(record),
        Format::Json => output::json(record)?,
        Format::Csv => format!("{}\n{}\n", report::csv::header(), report::csv::row(record)),
    };
    output::print_report(&text)
}
