//! Running a benchmark job: communicator, configuration, backend, solver,
//! verification and report, with errors mapped so that no rank hangs.
//!
//! Usage errors are found identically on every rank, so every rank returns
//! exit code 2 and only rank 0 prints. A runtime error may strike one rank
//! alone: that rank prints it and aborts the whole job.

use crate::backend;
use crate::cli::{RunArgs, SelftestArgs};
use crate::comm::{self, Comm};
use crate::config::{Format, RunConfig, StreamMeasure};
use crate::error::{Error, Result};
use crate::grid::decomp::{Block, ProcGrid};
use crate::halo::Halo;
use crate::preflight;
use crate::report::{self, Record, RecordInputs};
use crate::selftest;
use crate::signals::StopFlag;
use crate::solver::Solver;
use crate::verify::{self, Answer, Verdict};
use std::process::ExitCode;

/// Runs the benchmark job described by `args`.
pub fn benchmark(args: &RunArgs) -> ExitCode {
    let stop = StopFlag::install();
    with_comm(|comm| run_job(args, comm, stop))
}

/// Runs the halo self-test described by `args`.
pub fn selftest(args: &SelftestArgs) -> ExitCode {
    with_comm(|comm| {
        let grid = args.grid()?;
        let procs = match &args.procs {
            Some(s) => s.parse()?,
            None => ProcGrid::auto(&grid, comm.size())?,
        };
        procs.validate(&grid, comm.size())?;
        let block = Block::of(&grid, &procs, comm.rank());
        preflight::check_need(&grid, preflight::host_bytes(&block, false, None), comm)?;
        let checked = selftest::halo_self_test(comm, &grid, &procs)?;
        let mut total = [checked as f64];
        comm.sum(&mut total);
        if comm.rank() == 0 {
            println!(
                "halo self-test passed: grid {grid}, process grid {procs}, {} ghost values checked",
                total[0]
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Starts communication, runs `job`, and turns its error into an exit code
/// (aborting every rank when the error may be local to this one).
pub(crate) fn with_comm(job: impl FnOnce(&dyn Comm) -> Result<ExitCode>) -> ExitCode {
    let comm = match comm::init() {
        Ok(c) => c,
        Err(e) => {
            // Every rank a launcher started fails alike: let one speak.
            if crate::launcher_rank().unwrap_or(0) == 0 {
                eprintln!("himeno: {e}");
            }
            return e.to_exit_code();
        }
    };
    match job(comm.as_ref()) {
        Ok(code) => code,
        Err(e @ (Error::Usage(_) | Error::Verification(_))) => {
            if comm.rank() == 0 {
                eprintln!("himeno: {e}");
            }
            e.to_exit_code()
        }
        Err(e) => {
            eprintln!("himeno: rank {}: {e}", comm.rank());
            if comm.size() > 1 {
                comm.abort(i32::from(e.exit_code()));
            }
            e.to_exit_code()
        }
    }
}

/// The job itself; see [`benchmark`].
fn run_job(args: &RunArgs, comm: &dyn Comm, stop: StopFlag) -> Result<ExitCode> {
    let mut cfg = args.validate(comm.size())?;
    cfg.threads = crate::backend::threads::for_rank(args.threads, comm)?;
    collective_output_check(&cfg, comm)?;
    let grid = cfg.grid;
    let procs = match cfg.procs {
        Some(p) => p,
        None => ProcGrid::auto(&grid, comm.size())?,
    };
    let block = Block::of(&grid, &procs, comm.rank());
    tracing::info!(rank = comm.rank(), ?block, "block");
    preflight::check(&cfg, &grid, &block, comm)?;
    if cfg.stream == StreamMeasure::Quick {
        // After the memory check (which counts its arrays) and before the
        // solver allocates, with the run's threads and binding.
        let quick = crate::bench::stream::quick_stream(comm, cfg.threads, cfg.bind)?;
        cfg.stream_gbs = Some(quick.triad);
        cfg.stream_sum13_gbs = Some(quick.sum13);
    }
    let mut backend = backend::create(&cfg, &grid, &block, comm)?;
    let mut halo = Halo::new(&block, backend.as_mut())?;
    let mut halo_bytes = [halo.bytes_per_exchange() as f64];
    comm.sum(&mut halo_bytes);

    let mut progress = crate::study::progress::Progress::for_rank(comm.rank());
    let outcome = Solver {
        comm,
        backend: backend.as_mut(),
        halo: &mut halo,
        grid,
        block,
        stop,
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
                procs,
                halo_bytes: halo_bytes[0] as u64,
                verdict,
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
        Format::Json => {
            let mut s = serde_json::to_string_pretty(record)
                .map_err(|e| Error::runtime(format!("cannot encode the record: {e}")))?;
            s.push('\n');
            s
        }
        Format::Csv => format!("{}\n{}\n", report::csv::header(), report::csv::row(record)),
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::runtime(format!("cannot write the report: {e}")))
}
