//! Running a benchmark job: communicator, configuration, backend, solver,
//! verification and report, with errors mapped so that no rank hangs.
//!
//! Everything the job takes from its environment (options, stop signals,
//! `HIMENO_FAULT`, `HIMENO_BINDING`) is read here and passed down.
//! Usage errors are found identically on every rank, so every rank returns
//! exit code 2 and only rank 0 prints. A runtime error may strike one rank
//! alone: that rank prints it and aborts the whole job.

use crate::backend;
use crate::bench::stream;
use crate::cli::{RunArgs, SelftestArgs};
use crate::comm::{self, Comm};
use crate::config::{RunConfig, StreamMeasure};
use crate::error::{Error, Result};
use crate::fault::Fault;
use crate::grid::decomp::Block;
use crate::halo::Halo;
use crate::output::{self, Format};
use crate::preflight;
use crate::progress::Progress;
use crate::report::{self, Ceilings, Record, RecordInputs};
use crate::selftest;
use crate::signals::StopFlag;
use crate::solver::Solver;
use crate::verify::{self, Answer, Verdict};
use std::process::ExitCode;

/// Runs the benchmark job described by `args`.
pub fn benchmark(args: &RunArgs) -> ExitCode {
    let stop = StopFlag::install();
    comm::with_comm(|comm| run_job(args, comm, stop))
}

/// Runs the halo self-test described by `args`.
pub fn selftest(args: &SelftestArgs) -> ExitCode {
    comm::with_comm(|comm| {
        let problem = args.resolve(comm.size())?;
        let block = Block::of(&problem.grid, &problem.procs, comm.rank()).with_depth(args.temporal);
        preflight::check_need(
            &problem.grid,
            preflight::host_bytes(&block, false, None),
            comm,
        )?;
        let checked = selftest::halo_self_test(comm, &problem, args.temporal)?;
        let mut total = [checked as f64];
        comm.sum(&mut total);
        if comm.rank() == 0 {
            output::emit(&format!(
                "halo self-test passed: grid {}, process grid {}, {} ghost values checked\n",
                problem.grid, problem.procs, total[0]
            ))?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The job itself; see [`benchmark`].
fn run_job(args: &RunArgs, comm: &dyn Comm, stop: StopFlag) -> Result<ExitCode> {
    let cfg = args.validate(comm.size(), comm.node_size())?;
    let fault = Fault::from_env()?;
    let binding = std::env::var("HIMENO_BINDING")
        .ok()
        .filter(|b| !b.is_empty());
    collective_output_check(&cfg, comm)?;
    let (grid, procs) = (cfg.grid(), cfg.procs());
    let block = Block::of(&grid, &procs, comm.rank()).with_depth(cfg.temporal);
    tracing::info!(rank = comm.rank(), ?block, "block");
    let kind = backend::choose(cfg.backend, comm);
    // The quick stream's arrays are freed before the fields are made.
    let quick_bytes = (cfg.stream == StreamMeasure::Quick).then(stream::quick_bytes);
    preflight::check(&cfg, kind, &block, quick_bytes, comm)?;
    let ceilings = match cfg.stream {
        // After the memory check (which counts its arrays) and before the
        // solver allocates, with the run's threads and binding.
        StreamMeasure::Quick => {
            let quick = stream::quick_stream(comm, cfg.threads, cfg.bind)?;
            Ceilings {
                triad_gbs: Some(quick.triad),
                sum13_gbs: Some(quick.sum13),
            }
        }
        StreamMeasure::Off => Ceilings {
            triad_gbs: cfg.stream_gbs,
            sum13_gbs: None,
        },
    };
    let mut backend = backend::create(kind, &cfg, &grid, &block, comm)?;
    let mut halo = Halo::new(&block, backend.as_mut())?;

    let mut progress = Progress::for_rank(comm.rank());
    let outcome = Solver {
        comm,
        backend: backend.as_mut(),
        halo: &mut halo,
        grid,
        block,
        stop,
        fault,
        progress: Some(&mut |done, planned| progress.update(done, planned)),
    }
    .run(&cfg);
    progress.finish();
    let outcome = outcome?;
    if outcome.iterations == 0 {
        if comm.rank() == 0 {
            eprintln!(
                "himeno: stopped by a signal during the rehearsal: no iteration was timed, \
                 so there is no report"
            );
        }
        return Ok(ExitCode::from(2));
    }

    // Verification is decided on rank 0, before anything is printed, and
    // shared so that every rank exits with the same code.
    let verdict = if comm.rank() == 0 {
        if outcome.complete {
            let got = Answer {
                gosa: outcome.gosa,
                p_fingerprint: outcome.fingerprint,
            };
            verify::decide(&grid, outcome.iterations, &got, cfg.verify)
        } else {
            Verdict {
                verified: None,
                against: "none".into(),
                detail: "the run was stopped early; an incomplete run is not verified".into(),
            }
        }
    } else {
        Verdict {
            verified: None,
            against: String::new(),
            detail: String::new(),
        }
    };
    let code = comm.broadcast(match verdict.verified {
        Some(false) => 1,
        _ if !outcome.complete => 2,
        _ => 0,
    });

    if comm.rank() == 0 {
        let record = Record::build(
            &outcome,
            RecordInputs {
                cfg: &cfg,
                verdict,
                ceilings,
                binding,
                mpi_library: comm.library(),
            },
        );
        print_record(&record, cfg.format)?;
        if code == 1 {
            eprintln!(
                "himeno: verification FAILED: {}",
                record.verification.detail
            );
        }
        if code == 2 {
            eprintln!(
                "himeno: stopped by a signal after {} of {} iterations; the report is marked incomplete",
                record.iterations, record.planned_iterations
            );
        }
        // Last, so that a failed write (full disk) still leaves the report
        // and the verdict on the terminal; the write error then sets exit 2.
        if let Some(path) = &cfg.output {
            let line = serde_json::to_string(&record)
                .map_err(|e| Error::runtime(format!("cannot encode the record: {e}")))?;
            report::append::append_line(path, &line)?;
        }
    }
    Ok(ExitCode::from(code as u8))
}

/// Checks on rank 0 that the results file is writable and shares the
/// answer, so that every rank stops together before any work.
fn collective_output_check(cfg: &RunConfig, comm: &dyn Comm) -> Result<()> {
    let mut err = None;
    if comm.rank() == 0
        && let Some(path) = &cfg.output
    {
        err = report::append::check_writable(path).err();
    }
    if comm.broadcast(u64::from(err.is_some())) != 0 {
        return Err(err.unwrap_or_else(|| Error::usage("the results file is not writable")));
    }
    Ok(())
}

/// Prints the record on standard output in the chosen format.
fn print_record(record: &Record, format: Format) -> Result<()> {
    let text = match format {
        Format::Text => report::text::render(record),
        Format::Json => output::json(record)?,
        Format::Csv => format!("{}\n{}\n", report::csv::header(), report::csv::row(record)),
    };
    output::emit(&text)
}
