//! Running a benchmark job: communicator, configuration, backend, solver,
//! verification and report, with errors mapped so that no rank hangs.
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
use crate::checkpoint::Checkpointer;
use crate::comm::{self, Comm};
use crate::config::{RunConfig, StreamMeasure};
use crate::environment;
use crate::error::{self, Error, Result};
use crate::fault::Fault;
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::kernel_choice;
use crate::machine::memory;
use crate::output::{self, Format};
use crate::preflight;
use crate::progress::Progress;
use crate::report::{self, Ceilings, Record, RecordInputs};
use crate::signals::StopFlag;
use crate::solver::{MemoryUse, Solver};
use crate::temporal;
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
        run_job(args, comm, stop.clone())
    })
}

/// The job itself; see [`benchmark`].
fn run_job(args: &RunArgs, comm: &dyn Comm, stop: StopFlag) -> Result<ExitCode> {
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
        terms.push(("trace", format!("{:?}", args.trace.trace)));
        terms.push(("trace keep", args.trace.trace_keep.to_string()));
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
    let trace_bound = crate::timeline::Bound::of(&cfg, args.trace.trace_keep, block.depth);
    let need = match &args.trace.trace {
        Some(_) => preflight::check_trace(&cfg, need, trace_bound, comm)?,
        None => need,
    };
    let mut checkpoint = Checkpointer::prepare(&cfg, &block, comm, &stop)?;
    let mut backend = backend::create(&cfg, &grid, &block, comm)?;
    let halo = Halo::new(&block, backend.as_mut())?;
    let budget = temporal::Budget::start(&cfg);
    let run = temporal::Run {
        cfg: &cfg,
        grid: &grid,
        comm,
        stop: &stop,
        budget: &budget,
    };
    let built = temporal::Built {
        block,
        backend,
        halo,
    };
    let (mut built, temporal_choice) = plan.settle(run, built)?;
    let kernel_choice = kernel_choice::settle(run, &mut built)?;
    let temporal::Built {
        block,
        mut backend,
        mut halo,
    } = built;

    let mut progress = Progress::for_rank(comm.rank());
    // The rehearsal runs exactly `warmup` iterations from the initial
    // state: when an answer is stored for that, it is checked for free
    // (rank 0 decides, every rank learns), and a wrong one ends the run
    // with exit 1 before the timed loop.
    let mut rehearsal: Option<Verdict> = None;
    let mut check = |got: Answer| -> Result<()> {
        let mine = if comm.rank() == 0 {
            verify::check_rehearsal(&grid, cfg.warmup, &got)
        } else {
            None
        };
        rehearsal = comm::decide(comm, "the rehearsal's answer", &mine, |mut all| {
            match all.swap_remove(0) {
                Some(v) if v.verified() == Some(false) => Err(Error::Verification(format!(
                    "the rehearsal's answer is wrong: {}",
                    v.detail()
                ))),
                verdict => Ok(verdict),
            }
        })?;
        Ok(())
    };
    let known_rehearsal = verify::known_answer(&grid, cfg.warmup).is_some();
    let trace = (args.trace.trace.as_deref())
        .map(|path| trace::Session::start(path, args.trace.trace_keep, trace_bound, comm));
    let outcome = Solver {
        comm,
        backend: backend.as_mut(),
        halo: &mut halo,
        grid,
        block,
        stop: stop.clone(),
        fault,
        progress: Some(&mut |done, planned| progress.update(done, planned)),
        check_rehearsal: if known_rehearsal {
            Some(&mut check)
        } else {
            None
        },
        memory: MemoryUse {
            estimated_bytes: need.resident.min(u64::MAX.into()) as u64,
            baseline_bytes: baseline.map(|b| b.min(u64::MAX.into()) as u64),
            peak_bytes: None,
        },
        checkpoint: checkpoint.as_mut(),
    }
    .run(&cfg);
    progress.finish();
    let outcome = outcome?;
    // Side writes that failed: the record keeps them, the run exits 2.
    let mut warnings = Vec::new();
    if let Some(session) = trace {
        warnings.extend(session.finish(comm, trace_about(&cfg, &outcome), &stop)?);
    }
    if outcome.iterations == 0 {
        if comm.rank() == 0 {
            error::print_line(
                "himeno: stopped by a signal during the rehearsal: no iteration was timed, \
                 so there is no report",
            );
        }
        return Ok(ExitCode::from(2));
    }

    // Verification is decided on rank 0, before anything is printed, and
    // shared so that every rank exits with the same code.
    let mine = if comm.rank() == 0 {
        let verdict = if outcome.complete {
            let got = Answer {
                gosa: outcome.gosa,
                p_fingerprint: outcome.fingerprint,
            };
            let full = verify::verdict_of(&grid, outcome.iterations, &got, cfg.verify, &stop)?;
            // Without a full check of the timed iterations (a --seconds run,
            // a count with no stored answer), the checked rehearsal is the
            // verdict.
            // A restart's checkpoint is checked there too (see
            // `verify::after_rehearsal`).
            match rehearsal.take() {
                Some(r) if full.verified().is_none() && !full.interrupted() => {
                    verify::after_rehearsal(
                        r,
                        outcome.iterations,
                        checkpoint.as_ref().and_then(|c| c.resumed()),
                        &grid,
                        &stop,
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
    let (verdict, code) = comm::decide(comm, "the verdict", &mine, |mut all| {
        let verdict = all.swap_remove(0).expect("rank 0 states the verdict");
        let code: u64 = match verdict.verified() {
            Some(false) => 1,
            _ if !outcome.complete || verdict.interrupted() => 2,
            _ => 0,
        };
        Ok((verdict, code))
    })?;

    // The timed loop and its verdict are over: the fields are given back
    // before the quick stream allocates its arrays.
    drop(halo);
    drop(backend);
    let (ceilings, quick_failed) = ceilings(&cfg, comm, outcome.complete);
    let code = if quick_failed && code == 0 { 2 } else { code };

    if comm.rank() == 0 {
        // Side writes that failed (the trace, a checkpoint, an old one's
        // removal): the measurement stands, the record says what failed.
        warnings.extend(checkpoint.as_ref().map_or_else(Vec::new, |c| c.warnings()));
        let record = Record::build(
            &outcome,
            RecordInputs {
                cfg: &cfg,
                verdict,
                ceilings,
                binding,
                launch: comm.launch(),
                mpi_library: comm.library(),
                temporal: temporal_choice,
                kernel: kernel_choice,
                warnings,
            },
        );
        let printed = print_record(&record, cfg.format);
        if code == 1 {
            error::print_line(&format!(
                "himeno: verification FAILED: {}",
                record.verification.detail()
            ));
        }
        if code == 2 && record.verification.interrupted() {
            error::print_line(
                "himeno: stopped by a signal during the reference run: the run is complete \
                 but not verified",
            );
        } else if code == 2 {
            error::print_line(&format!(
                "himeno: stopped by a signal after {} of {} iterations; the report is marked incomplete",
                record.iterations, record.planned_iterations
            ));
        }
        // Whatever became of the report on stdout (a closed pipe, a full
        // disk), the record is appended: it is what studies are made of.
        let appended = match &cfg.output {
            Some(path) => append_record(path, &record, &stop),
            None => Ok(()),
        };
        // Each failure is told on its own line. Both are rank 0's alone and
        // come after the last collective, so rank 0 ends with exit 2 (or 1:
        // a wrong answer outranks a lost report) without aborting the job.
        let mut failed = false;
        for e in [printed.err(), appended.err()].into_iter().flatten() {
            error::print_line(&format!("himeno: {e}"));
            failed = true;
        }
        // A failed side write is told after the record is kept, and turns
        // a clean exit into exit 2 (a wrong answer keeps its 1).
        for w in &record.warnings {
            error::print_line(&format!("himeno: warning: {w}"));
        }
        if (failed || !record.warnings.is_empty()) && code != 1 {
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::from(code as u8))
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
/// the second value is then true (the run ends with exit 2, its report
/// still printed and appended).
fn ceilings(cfg: &RunConfig, comm: &dyn Comm, complete: bool) -> (Ceilings, bool) {
    match cfg.stream {
        StreamMeasure::Quick if complete => {
            match stream::quick_stream(comm, cfg.threads, cfg.bind) {
                Ok(quick) => (
                    Ceilings {
                        triad_gbs: Some(quick.triad),
                        sum13_gbs: Some(quick.sum13),
                    },
                    false,
                ),
                Err(e) => {
                    if comm.rank() == 0 {
                        error::print_line(&format!(
                            "himeno: {e}; the report has no stream fractions"
                        ));
                    }
                    (Ceilings::default(), true)
                }
            }
        }
        StreamMeasure::Quick => (Ceilings::default(), false),
        StreamMeasure::Off => (
            Ceilings {
                triad_gbs: cfg.stream_gbs,
                sum13_gbs: None,
            },
            false,
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

/// What a trace file says about its run.
fn trace_about(cfg: &RunConfig, outcome: &crate::solver::Outcome) -> serde_json::Value {
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
