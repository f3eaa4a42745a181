//! `himeno gpu-check`: one call of a few minutes on a GPU machine that
//! proves the GPU path of a himeno binary and measures it.
//!
//! 0. setup (`setup`): `ldd` of the binary, the GPU, the NVRTC libraries
//!    on the machine, the one the binary finds by itself, a first GPU run;
//! 1. correctness (`matrix`): GPU vs CPU (p fingerprint equal, gosa within
//!    the verification tolerance) on 1, 2 and 4 in-process ranks, pinned
//!    and pageable staging, `--overlap`, the `--gpu-occupancy` variants,
//!    on grids with odd and one-point-wide blocks;
//! 2. timing: `bench transfer`, XL GFLOPS and GB/s beside the device copy
//!    bandwidth per occupancy variant, the phase split of pinned vs
//!    pageable staging with and without `--overlap` on 2 and 4 ranks
//!    (`tables` formats them).
//!
//! Its options and their validation into [`Settings`] are `args`'s. Every run is a child
//! process of the binary under test (`child`), with a
//! time limit. The verdict is the exit code: 0 PASS, 1 FAIL (a GPU result
//! differs from the CPU's, or a correctness run gave none), 2 setup error
//! (or a stop signal, or a report that cannot be written: no verdict),
//! 3 PARTIAL (a part could not run). A build without `cuda` refuses the
//! command (`disabled`).
//!
//! The results folder is the user's (`--out`, `HIMENO_GPU_CHECK_DIR`),
//! new or empty, or a fresh private one; the check writes only files it
//! creates there, new (`crate::files`), and removes only its own details
//! folder once archived.

mod args;
mod child;
mod matrix;
mod setup;
mod tables;
mod tools;

#[cfg(feature = "cuda")]
mod nvrtc;

#[cfg(not(feature = "cuda"))]
mod disabled;
#[cfg(not(feature = "cuda"))]
use disabled as nvrtc;

pub use args::{GpuCheckArgs, Settings};

use crate::bench::transfer::TransferReport;
use crate::environment;
use crate::error::{Error, Result};
use crate::files;
use crate::report::Record;
use crate::signals::StopFlag;
use child::{Ran, Runner, run_limited};
use matrix::Part;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// Exit code of a check in which a part could not run (every check that
/// ran passed).
pub const EXIT_PARTIAL: u8 = 3;

/// The files the check leaves in the results folder (the details archive,
/// or a folder when `tar` fails, besides).
const FILES: [&str; 3] = ["gpu-check.txt", "results.jsonl", "transfer.json"];
/// The details archive's name.
const ARCHIVE: &str = "details.tar.gz";
/// The details folder's name: the scratch folder of the runs' files,
/// archived at the end (kept as a folder when no archive can be made).
const DETAILS: &str = "details";
/// The NVRTC cache folder's name, in the details folder.
const CACHE: &str = "nvrtc-cache";
/// Prefix of the fresh private results folder made when none is named.
const PRIVATE_PREFIX: &str = "himeno-gpu-check";

/// How a part ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Nothing decided it yet, or it could not run (why).
    NotRun(Option<String>),
    /// Left out: by the budget, or a tool the machine lacks (why).
    Skipped(&'static str),
    /// Every run of it passed.
    Ok,
    /// A run of it failed.
    Fail,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::NotRun(None) => write!(f, "not run"),
            Outcome::NotRun(Some(why)) => write!(f, "not run: {why}"),
            Outcome::Skipped(why) => write!(f, "skipped ({why})"),
            Outcome::Ok => write!(f, "ok"),
            Outcome::Fail => write!(f, "fail"),
        }
    }
}

/// Why a run gave no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// It exited 1: its own verification found the answer wrong.
    WrongAnswer,
    /// It passed its time limit and was killed.
    TimedOut,
    /// It exited 0 without a JSON record (or one without a fingerprint).
    NoRecord,
    /// It did not start, failed otherwise or died of a signal.
    Crashed,
    /// The check's budget was spent before it started or while it ran:
    /// not a failure, its step is skipped.
    Budget,
}

impl Failed {
    /// How `ran`, which did not end well, failed.
    fn of(ran: &Ran) -> Failed {
        if ran.timed_out {
            Failed::TimedOut
        } else if ran.code == Some(1) {
            Failed::WrongAnswer
        } else {
            Failed::Crashed
        }
    }
}

/// What the FAIL verdict counts: GPU results that differ from the
/// reference, and runs that gave no result, by how.
#[derive(Debug, Default, Clone, PartialEq)]
struct Tally {
    /// Comparisons that found a different field or gosa.
    differs: usize,
    /// Runs that gave no result: wrong answers, time-outs, no records,
    /// other failures.
    wrong: usize,
    timed_out: usize,
    no_record: usize,
    crashed: usize,
}

impl Tally {
    /// Counts a run that gave no result.
    fn missed(&mut self, why: Failed) {
        *match why {
            Failed::WrongAnswer => &mut self.wrong,
            Failed::TimedOut => &mut self.timed_out,
            Failed::NoRecord => &mut self.no_record,
            Failed::Crashed => &mut self.crashed,
            Failed::Budget => return,
        } += 1;
    }

    /// What the FAIL verdict says happened: a difference only when one was
    /// found, and the runs that gave no result by how they ended.
    fn summary(&self) -> String {
        let mut said = Vec::new();
        match self.differs {
            0 => {}
            1 => said.push("a GPU result differs from the CPU's".to_string()),
            n => said.push(format!("{n} GPU results differ from the CPU's")),
        }
        let missed = self.wrong + self.timed_out + self.no_record + self.crashed;
        if missed > 0 {
            let how: Vec<String> = [
                (
                    self.wrong,
                    "failed its own verification",
                    "failed their own verification",
                ),
                (self.timed_out, "timed out", "timed out"),
                (self.no_record, "printed no record", "printed no record"),
                (self.crashed, "failed", "failed"),
            ]
            .iter()
            .filter(|(n, ..)| *n > 0)
            .map(|&(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
            .collect();
            let runs = if missed == 1 { "run" } else { "runs" };
            said.push(format!(
                "no result from {missed} {runs}: {}",
                how.join(", ")
            ));
        }
        if said.is_empty() {
            said.push("a correctness part failed".into());
        }
        format!("{}; see the FAIL and FAILED lines above", said.join("; "))
    }
}

/// The report: on standard output as it goes, and in gpu-check.txt. A
/// write that fails on either ends the check (no run starts after it) and
/// its exit is 2 with one `himeno:` line: a report or result that was
/// lost is never a verdict.
struct Report {
    file: File,
    /// The report file's path, for the message.
    path: PathBuf,
    /// Whether standard output, and the file, still take lines.
    stdout_ok: bool,
    file_ok: bool,
    /// The first write that failed, as the error line says it.
    failed: Option<String>,
}

impl Report {
    /// Prints `line` on whichever of standard output and the file still
    /// take lines.
    fn line(&mut self, line: impl AsRef<str>) {
        let text = format!("{}\n", line.as_ref());
        if self.stdout_ok
            && let Err(e) = std::io::stdout().lock().write_all(text.as_bytes())
        {
            self.stdout_ok = false;
            self.fail(format!("cannot write the report to standard output: {e}"));
        }
        if self.file_ok
            && let Err(e) = self.file.write_all(text.as_bytes())
        {
            self.file_ok = false;
            self.fail(format!("cannot write {}: {e}", self.path.display()));
        }
    }

    /// Notes a failed write of the check's (the first one is told).
    fn fail(&mut self, why: String) {
        self.failed.get_or_insert(why);
    }
}

/// A check in progress.
struct Check<'a> {
    settings: &'a Settings,
    runner: Runner,
    /// The results folder.
    out: PathBuf,
    /// The scratch folder of the details, in `out` (archived at the end).
    work: PathBuf,
    report: Report,
    results: File,
    parts: Vec<(Part, Outcome)>,
    /// Whether the binary runs in-process ranks (why not).
    local: std::result::Result<(), String>,
    /// Whether the first GPU run was on an emulated device (labels the
    /// timing tables).
    emulated_device: bool,
    /// GPU run records seen, and how many of them were emulated.
    gpu_records: usize,
    emulated_records: usize,
    /// Differences and runs without a result, for the FAIL verdict.
    tally: Tally,
    /// When the check started: its budget counts from here.
    started: Instant,
    /// The steps the budget left out, in order.
    budget_skipped: Vec<&'static str>,
    /// The NVRTC cache folder the runs share.
    cache: PathBuf,
}

/// Why a part the budget left out was skipped.
const BUDGET: &str = "the --budget was spent";

/// Runs the check `s` describes. Errors before the report exists (a build
/// without `cuda`, a results folder that cannot be made or is not empty)
/// are returned; everything after is in the report and the exit code,
/// but a report or result that could not be written is an error.
pub fn run(s: &Settings) -> Result<ExitCode> {
    nvrtc::ensure_build()?;
    // SIGTERM, SIGINT, SIGUSR1, SIGHUP: the run going is ended with its
    // group, the details are archived, and the check ends without a
    // verdict.
    let stop = child::stop_signals();
    let out = results_folder(s.out.as_deref())?;
    let cannot = |what: &str, e: std::io::Error| {
        Error::runtime(format!("cannot {what} in {}: {e}", out.display()))
    };
    let work = out.join(DETAILS);
    std::fs::create_dir(&work)
        .and_then(|()| std::fs::create_dir(work.join("runs")))
        .map_err(|e| cannot("create the details folder", e))?;
    let cache = work.join(CACHE);
    std::fs::create_dir(&cache).map_err(|e| cannot("create the NVRTC cache folder", e))?;
    let report = files::create_new(&out.join(FILES[0])).map_err(|e| cannot("write", e))?;
    let results = files::create_new(&out.join(FILES[1])).map_err(|e| cannot("write", e))?;
    let mut runner = Runner::new(s.himeno.clone(), work.join("runs"), s.run_limit, stop);
    // The runs compile the kernels once per variant, not once per process.
    runner.set_env(environment::NVRTC_CACHE, cache.clone().into_os_string());
    let mut ck = Check {
        settings: s,
        runner,
        report: Report {
            file: report,
            path: out.join(FILES[0]),
            stdout_ok: true,
            file_ok: true,
            failed: None,
        },
        out,
        work,
        results,
        parts: Part::ALL
            .iter()
            .map(|&p| (p, Outcome::NotRun(None)))
            .collect(),
        local: Ok(()),
        emulated_device: false,
        gpu_records: 0,
        emulated_records: 0,
        tally: Tally::default(),
        started: Instant::now(),
        budget_skipped: Vec::new(),
        cache,
    };
    let code = ck.all();
    match ck.report.failed.take() {
        Some(why) => Err(Error::runtime(why)),
        None => Ok(ExitCode::from(code)),
    }
}

/// The results folder: the one named (created without its parents, else
/// it must be empty), or a fresh private one in `TMPDIR` (never created).
fn results_folder(named: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = named {
        return files::empty_dir(dir)
            .map(|()| dir.to_path_buf())
            .map_err(|e| {
                Error::usage(format!(
                    "cannot use results folder {} (--out, {}): {e}",
                    dir.display(),
                    environment::GPU_CHECK_DIR
                ))
            });
    }
    let tmp = environment::get_os(environment::TMPDIR).map_or_else(|| "/tmp".into(), PathBuf::from);
    files::private_dir(&tmp, PRIVATE_PREFIX).map_err(|e| {
        Error::usage(format!(
            "cannot make a private results folder in {} ({e}): set TMPDIR to an existing \
             folder, or give --out DIR",
            tmp.display()
        ))
    })
}

impl Check<'_> {
    /// The whole check; its exit code.
    fn all(&mut self) -> u8 {
        let mut lines = Vec::new();
        let setup = setup::setup(
            &mut setup::Setup {
                runner: &mut self.runner,
                work: &self.work,
                search_root: &self.settings.search_root,
            },
            &mut lines,
        );
        if let Ok(found) = &setup {
            self.mark(Part::Setup, Outcome::Ok);
            let search = if found.nvrtc_search {
                Outcome::Ok
            } else {
                Outcome::Fail
            };
            self.mark(Part::NvrtcSearch, search);
            self.emulated_device = found.emulated;
            self.local = found.local.clone();
        }
        self.report.line(format!(
            "== himeno GPU check{}{}, {}, host {}, budget {} s, results in {}",
            if self.emulated_device {
                " (EMULATED device: correctness only)"
            } else {
                ""
            },
            if self.settings.quick { " (quick)" } else { "" },
            crate::build::utc_now(),
            crate::comm::hostname(),
            self.settings.budget.as_secs(),
            self.out.display()
        ));
        for l in lines {
            self.report.line(l);
        }
        if self.stopped() {
            return self.no_verdict();
        }
        if let Err(why) = setup {
            self.finish();
            self.report.line(format!("gpu-check: SETUP ERROR: {why}"));
            return 2;
        }
        // In order of value: the answers at full size, the matrix of rank
        // counts and options, the variants' speed, the phase split, then
        // what the machine's tools say about the sweep.
        self.known_answers();
        self.correctness();
        self.timing();
        self.tools();
        if self.stopped() {
            return self.no_verdict();
        }
        self.verdict()
    }

    /// Whether a stop signal came, or a write of the report or results
    /// failed: no run starts after it.
    fn stopped(&self) -> bool {
        self.runner.stop.raised() || self.report.failed.is_some()
    }

    /// The end of a check cut short by a stop signal or a failed write
    /// (exit 2): what ran is in the report and the details, but there is
    /// no verdict.
    fn no_verdict(&mut self) -> u8 {
        self.report.line("");
        self.finish();
        let why = match &self.report.failed {
            Some(e) => format!("a write failed ({e})"),
            None => "by a signal".into(),
        };
        self.report.line(format!(
            "gpu-check: STOPPED {why} before the end: no verdict (the report and the details \
             hold the runs that ended)"
        ));
        2
    }

    /// Records `outcome` for `part`: a failure sticks, a result replaces
    /// "not run", and "not run" never replaces a result.
    fn mark(&mut self, part: Part, outcome: Outcome) {
        let Some((_, now)) = self.parts.iter_mut().find(|(p, _)| *p == part) else {
            return;
        };
        *now = match (&*now, outcome) {
            (Outcome::Fail, _) | (_, Outcome::Fail) => Outcome::Fail,
            (Outcome::Ok, _) | (_, Outcome::Ok) => Outcome::Ok,
            (_, newer) => newer,
        };
    }

    /// Runs `run` with a JSON report, appends its record to results.jsonl
    /// with its label, and returns it read as a run record; a failed run
    /// is reported. `gpu`: whether it is a GPU run (counted for the
    /// emulation verdict).
    fn record(&mut self, run: &matrix::Run, gpu: bool) -> std::result::Result<Record, Failed> {
        let record: Record = self.report_of(run)?;
        if gpu {
            self.gpu_records += 1;
            self.emulated_records += usize::from(matrix::emulated(&record));
        }
        Ok(record)
    }

    /// Runs `run` with a JSON report, reads the report as a `T` and
    /// appends it to results.jsonl with its label; a failed run, or one
    /// whose standard output is not a `T`, is reported.
    fn report_of<T: DeserializeOwned + Serialize>(
        &mut self,
        run: &matrix::Run,
    ) -> std::result::Result<T, Failed> {
        let mut args = run.args.clone();
        args.extend(["--format".into(), "json".into()]);
        let left = self.left();
        if left.is_zero() {
            return Err(Failed::Budget);
        }
        // A run gets its own limit or what is left of the budget.
        let cut = left < self.settings.run_limit;
        self.runner.limit = self.settings.run_limit.min(left);
        let ran = self.runner.run(&run.name, &args, &[]);
        if ran.timed_out && cut {
            self.report.line(format!(
                "  budget {:<40} stopped: the check's --budget is spent",
                run.name
            ));
            return Err(Failed::Budget);
        }
        if !ran.ok() {
            let why = ran.why(self.runner.limit);
            self.report.line(tables::failed(&run.name, &why));
            let failed = Failed::of(&ran);
            self.tally.missed(failed);
            return Err(failed);
        }
        let read: T = match serde_json::from_str(&ran.stdout) {
            Ok(r) => r,
            Err(e) => {
                self.report.line(tables::failed(
                    &run.name,
                    &format!("exit 0, but no JSON record on stdout ({e})"),
                ));
                self.tally.missed(Failed::NoRecord);
                return Err(Failed::NoRecord);
            }
        };
        let line = serde_json::to_string(&read).map(|body| labelled(&run.name, &body));
        if let Err(e) = line
            .map_err(std::io::Error::other)
            .and_then(|line| writeln!(self.results, "{line}"))
        {
            let path = self.out.join(FILES[1]);
            self.report
                .fail(format!("cannot write {}: {e}", path.display()));
        }
        Ok(read)
    }

    /// Part 1: every GPU run of the matrix against the CPU's answer.
    fn correctness(&mut self) {
        let iterations = self.settings.iterations;
        self.report.line("");
        self.report.line(format!(
            "== 1. correctness: GPU vs CPU, {iterations} iterations (fingerprint equal, gosa \
             within {:.0e})",
            crate::verify::GOSA_RTOL
        ));
        for grid in matrix::grids(self.settings.quick) {
            if self.stopped() {
                return;
            }
            let cpu = match self.record(&matrix::cpu_reference(grid, iterations), false) {
                Ok(cpu) => cpu,
                Err(Failed::Budget) => return self.out_of_budget("1. correctness", &Part::MATRIX),
                Err(_) => {
                    for p in Part::MATRIX {
                        self.mark(p, Outcome::Fail);
                    }
                    continue;
                }
            };
            for g in matrix::gpu_runs(grid, iterations) {
                if self.stopped() {
                    return;
                }
                if g.ranks > 1
                    && let Err(why) = &self.local
                {
                    let why = why.clone();
                    self.mark(g.part, Outcome::NotRun(Some(why)));
                    continue;
                }
                let ok = match self.record(&g.run, true) {
                    Ok(gpu) => {
                        let ok = matrix::agrees(&gpu, &cpu);
                        self.report
                            .line(tables::comparison(&g.run.name, ok, &gpu, &cpu));
                        self.tally.differs += usize::from(!ok);
                        ok
                    }
                    Err(Failed::Budget) => {
                        return self.out_of_budget("1. correctness", &Part::MATRIX);
                    }
                    Err(_) => false,
                };
                self.mark(g.part, if ok { Outcome::Ok } else { Outcome::Fail });
            }
        }
    }

    /// What is left of the budget.
    fn left(&self) -> Duration {
        self.settings.budget.saturating_sub(self.started.elapsed())
    }

    /// Whether the budget is spent; if so the step `step` and its `parts`
    /// are said to be skipped (once per step).
    fn over_budget(&mut self, step: &'static str, parts: &[Part]) -> bool {
        if !self.left().is_zero() {
            return false;
        }
        self.out_of_budget(step, parts);
        true
    }

    /// Marks the step `step` and its `parts` skipped for the budget (what
    /// of them ran keeps its outcome) and says so once.
    fn out_of_budget(&mut self, step: &'static str, parts: &[Part]) {
        for &p in parts {
            self.mark(p, Outcome::Skipped(BUDGET));
        }
        if !self.budget_skipped.contains(&step) {
            self.budget_skipped.push(step);
            self.report.line(format!(
                "{step}: skipped from here, the --budget of {} s is spent",
                self.settings.budget.as_secs()
            ));
        }
    }

    /// Part 0b: full-size runs against the stored known answers, each
    /// verified by the run itself.
    fn known_answers(&mut self) {
        const STEP: &str = "0. known answers";
        self.report.line("");
        self.report.line(format!(
            "== {STEP}: full-size runs verified against inputs/known_answers.json{}",
            if self.settings.quick {
                " (quick: the small grids with stored answers)"
            } else {
                ""
            }
        ));
        for run in matrix::known_answers(self.settings.quick) {
            if self.stopped() || self.over_budget(STEP, &[Part::KnownAnswers]) {
                return;
            }
            match self.record(&run, true) {
                Ok(r) => {
                    let ok = r.verified() == Some(true) && !r.p_fingerprint.is_empty();
                    self.report.line(format!(
                        "  {}  {:<44} fingerprint {} gosa {} verified {}",
                        if ok { "ok  " } else { "FAIL" },
                        run.name,
                        r.p_fingerprint,
                        r.gosa,
                        r.verified().map_or("null".to_string(), |v| v.to_string())
                    ));
                    self.tally.differs += usize::from(!ok);
                    self.mark(
                        Part::KnownAnswers,
                        if ok { Outcome::Ok } else { Outcome::Fail },
                    );
                }
                Err(Failed::Budget) => return self.out_of_budget(STEP, &[Part::KnownAnswers]),
                Err(_) => self.mark(Part::KnownAnswers, Outcome::Fail),
            }
        }
    }

    /// Part 2: bench transfer (the device copy bandwidth, the variants'
    /// yardstick), every sweep and occupancy variant at XL and L, the
    /// phase split.
    fn timing(&mut self) {
        const STEP: &str = "2. timing";
        let s = self.settings;
        if self.stopped() {
            return;
        }
        self.report.line("");
        self.report.line(format!(
            "== {STEP}{}",
            if self.emulated_device {
                " (EMULATED device: host times, not GPU performance)"
            } else {
                ""
            }
        ));
        let timing = [
            Part::Transfer,
            Part::XlTiming,
            Part::LTiming,
            Part::PhaseSplit,
        ];
        if self.over_budget(STEP, &timing) {
            return;
        }
        let transfer = matrix::transfer(s.quick);
        let mut d2d = None;
        match self.report_of::<TransferReport>(&transfer) {
            Ok(r) => {
                let (line, copy) = tables::transfer(&r);
                d2d = copy;
                let path = self.out.join(FILES[2]);
                let kept =
                    std::fs::read(self.work.join("runs").join("transfer.out")).and_then(|bytes| {
                        files::create_new(&path).and_then(|mut f| f.write_all(&bytes))
                    });
                self.report.line(line);
                if let Err(e) = kept {
                    self.report
                        .fail(format!("cannot write {}: {e}", path.display()));
                }
                self.mark(Part::Transfer, Outcome::Ok);
            }
            Err(Failed::Budget) => return self.out_of_budget(STEP, &timing),
            Err(_) => self.mark(Part::Transfer, Outcome::Fail),
        }
        let mut rows = Vec::new();
        for size in matrix::timed_sizes(s.quick) {
            if self.stopped() || !self.variants(size, d2d, &mut rows) {
                return self.out_of_budget(STEP, &timing[1..]);
            }
        }
        for l in tables::recommendation(&rows, self.emulated_device) {
            self.report.line(l);
        }
        self.split();
    }

    /// The table of every sweep and occupancy variant at `size`, beside
    /// the device copy bandwidth `d2d`; the variants' fields must be
    /// equal (it counts for the occupancy part). Each row goes into
    /// `rows` for the recommendation. False when the budget ran out.
    fn variants(
        &mut self,
        size: matrix::TimedSize,
        d2d: Option<f64>,
        rows: &mut Vec<tables::VariantRow>,
    ) -> bool {
        let s = self.settings;
        let iterations = match (s.quick, size.label) {
            (true, _) => 3,
            (false, "XL") => s.xl_iterations,
            (false, _) => s.l_iterations,
        };
        self.report.line("");
        for l in tables::variants_head(size, iterations, self.emulated_device) {
            self.report.line(l);
        }
        let mut first: Option<String> = None;
        for (sweep, occ, layout) in matrix::variants() {
            if self.stopped() || self.left().is_zero() {
                return false;
            }
            let run = matrix::variant(size, (sweep, occ, layout), iterations, s.quick);
            let r = match self.record(&run, true) {
                Ok(r) => r,
                Err(Failed::Budget) => return false,
                Err(why) => {
                    self.timing_failed(why, size.part, Part::Occupancy);
                    continue;
                }
            };
            self.report
                .line(tables::variant_row((sweep, occ, layout), &r, d2d));
            rows.push(tables::VariantRow {
                size: size.label,
                sweep,
                occ,
                gflops: r.mflops / 1000.0,
                layout,
            });
            self.mark(size.part, Outcome::Ok);
            let Some(fp) = self.fingerprint(&r, &run.name, Part::Occupancy) else {
                continue;
            };
            match &first {
                None => first = Some(fp),
                Some(f) if *f == fp => self.mark(Part::Occupancy, Outcome::Ok),
                Some(f) => {
                    let line = format!(
                        "  FAIL  {} fingerprint {fp} differs from the first variant's {f}",
                        run.name
                    );
                    self.report.line(line);
                    self.tally.differs += 1;
                    self.mark(Part::Occupancy, Outcome::Fail);
                }
            }
        }
        true
    }

    /// The phase split at L; the runs' fields must be equal (it counts for
    /// the staging part).
    fn split(&mut self) {
        const STEP: &str = "2. timing (phase split)";
        let iterations = if self.settings.quick {
            3
        } else {
            self.settings.l_iterations
        };
        self.report.line("");
        for l in tables::split_head(
            matrix::timed_sizes(self.settings.quick)[1],
            iterations,
            self.emulated_device,
        ) {
            self.report.line(l);
        }
        if let Err(why) = &self.local {
            let why = why.clone();
            self.mark(Part::PhaseSplit, Outcome::NotRun(Some(why)));
            return;
        }
        let mut first: Option<String> = None;
        for sp in matrix::splits(iterations, self.settings.quick) {
            if self.stopped() || self.over_budget(STEP, &[Part::PhaseSplit]) {
                return;
            }
            let r = match self.record(&sp.run, true) {
                Ok(r) => r,
                Err(Failed::Budget) => return self.out_of_budget(STEP, &[Part::PhaseSplit]),
                Err(why) => {
                    self.timing_failed(why, Part::PhaseSplit, Part::Staging);
                    continue;
                }
            };
            self.report.line(tables::split_row(
                sp.ranks, sp.procs, sp.staging, sp.overlap, &r,
            ));
            self.mark(Part::PhaseSplit, Outcome::Ok);
            let Some(fp) = self.fingerprint(&r, &sp.run.name, Part::Staging) else {
                continue;
            };
            match &first {
                None => first = Some(fp),
                Some(f) if *f == fp => {}
                Some(f) => {
                    let line =
                        format!("  FAIL  {}: fingerprint {fp} differs from {f}", sp.run.name);
                    self.report.line(line);
                    self.tally.differs += 1;
                    self.mark(Part::Staging, Outcome::Fail);
                }
            }
        }
    }

    /// Part 3: what the machine's own tools say about the sweep, where
    /// they exist: the SASS summary of the kernels the runs compiled
    /// (`cuobjdump` on the cached CUBINs) and one Nsight Compute pass of
    /// an L sweep (`ncu`). A tool that is absent skips its part with one
    /// line.
    fn tools(&mut self) {
        const STEP: &str = "3. tools";
        if self.stopped() {
            return;
        }
        self.report.line("");
        self.report.line(format!(
            "== {STEP}: the sweep's machine code and memory traffic"
        ));
        if self.over_budget(STEP, &[Part::Sass, Part::Ncu]) {
            return;
        }
        let lines = tools::sass(&mut self.runner, &self.cache);
        self.tool_part(Part::Sass, lines);
        if self.stopped() || self.over_budget(STEP, &[Part::Ncu]) {
            return;
        }
        self.runner.limit = self.settings.run_limit.min(self.left());
        let lines = tools::ncu(&mut self.runner, self.settings.quick);
        self.tool_part(Part::Ncu, lines);
    }

    /// Reports a tool's lines and marks its part: skipped when the tool
    /// is absent, failed when it ran without giving what was asked.
    fn tool_part(&mut self, part: Part, outcome: tools::Said) {
        for l in &outcome.lines {
            self.report.line(l);
        }
        self.mark(
            part,
            match outcome.result {
                tools::Result::Absent => Outcome::Skipped("the tool is not on this machine"),
                tools::Result::Ok => Outcome::Ok,
                tools::Result::Failed(why) => Outcome::NotRun(Some(why)),
            },
        );
    }

    /// A timing run of `part` that gave no record: a wrong answer (its own
    /// verification failed) is also a failure of the correctness part
    /// `answer`, not merely a part that could not run.
    fn timing_failed(&mut self, why: Failed, part: Part, answer: Part) {
        self.mark(part, Outcome::Fail);
        if why == Failed::WrongAnswer {
            self.mark(answer, Outcome::Fail);
        }
    }

    /// The field fingerprint of the timing run `what`, which must have one:
    /// without it, the comparison of the runs' fields counts as a failure
    /// of `part` (two missing fingerprints are not equal fields).
    fn fingerprint(&mut self, r: &Record, what: &str, part: Part) -> Option<String> {
        let fp = Some(r.p_fingerprint.clone()).filter(|f| !f.is_empty());
        if fp.is_none() {
            self.report
                .line(format!("  FAIL  {what}: its record has no p_fingerprint"));
            self.tally.missed(Failed::NoRecord);
            self.mark(part, Outcome::Fail);
        }
        fp
    }

    /// The parts table and the verdict; the exit code.
    fn verdict(&mut self) -> u8 {
        self.report.line("");
        self.report.line("== parts");
        let mut failed = false;
        let mut partial = false;
        for (part, outcome) in self.parts.clone() {
            self.report.line(format!("  {:<22} {outcome}", part.name()));
            match outcome {
                Outcome::Ok | Outcome::Skipped(_) => {}
                Outcome::Fail if part.is_correctness() => failed = true,
                Outcome::Fail | Outcome::NotRun(_) => partial = true,
            }
        }
        self.finish();
        // Every GPU record says so; with none (every run failed), the
        // first GPU run decides.
        let emulated = if self.gpu_records > 0 {
            self.emulated_records == self.gpu_records
        } else {
            self.emulated_device
        };
        let device = if emulated {
            "emulated device: correctness only, times are not GPU performance; "
        } else {
            ""
        };
        let (code, line) = if failed {
            (1, format!("FAIL ({device}{})", self.tally.summary()))
        } else if partial {
            (
                EXIT_PARTIAL,
                format!(
                    "PARTIAL ({device}every check that ran passed, but not every part ran or \
                     passed)"
                ),
            )
        } else if !self.budget_skipped.is_empty() {
            (
                EXIT_PARTIAL,
                format!(
                    "PARTIAL ({device}every check that ran passed, but the --budget of {} s was \
                     spent before: {})",
                    self.settings.budget.as_secs(),
                    self.budget_skipped.join(", ")
                ),
            )
        } else if self.settings.quick {
            (
                0,
                format!(
                    "PASS ({device}every part ran, on --quick's small grids, in {:.0} s of the \
                     {} s budget; every GPU result equals the CPU's)",
                    self.started.elapsed().as_secs_f64(),
                    self.settings.budget.as_secs()
                ),
            )
        } else {
            (
                0,
                format!("PASS ({device}every part ran; every GPU result equals the CPU's)"),
            )
        };
        self.report.line(format!("gpu-check: {line}"));
        code
    }

    /// Archives the details (or keeps them as a folder when `tar` fails),
    /// removes the details folder once archived and says where the
    /// results are.
    fn finish(&mut self) {
        let out = self.out.clone();
        let archive = out.join(ARCHIVE);
        // The archive is tar's standard output, a file created new here:
        // tar never opens a path of the results folder itself.
        let mut tar = Command::new("tar");
        tar.arg("-czf")
            .arg("-")
            .arg("-C")
            .arg(&self.work)
            .args(["--exclude", "tar.err", "."]);
        // Archived after a stop signal too: that is when the details
        // matter most.
        let tarred = run_limited(
            tar,
            Duration::from_secs(120),
            &StopFlag::never(),
            &archive,
            &self.work.join("tar.err"),
        );
        let details = if tarred.ok() {
            let _ = std::fs::remove_dir_all(&self.work);
            ARCHIVE
        } else {
            if tarred.files_made {
                let _ = std::fs::remove_file(&archive);
            }
            let why = tarred.why(Duration::from_secs(120));
            self.report.line(format!(
                "note: no details archive (tar {why}): kept as the folder {DETAILS}/"
            ));
            DETAILS
        };
        let mut names: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| out.join(f).exists())
            .collect();
        names.push(details);
        self.report
            .line(format!("results: {} ({})", out.display(), names.join(", ")));
    }
}

/// The one-line JSON object `body` with a `"check"` label `name` first.
fn labelled(name: &str, body: &str) -> String {
    let label = serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into());
    match body.strip_prefix('{') {
        Some("}") => format!("{{\"check\":{label}}}"),
        Some(rest) => format!("{{\"check\":{label},{rest}"),
        None => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_line_is_labelled_first_and_stays_one_line() {
        let line = labelled("cpu-9x10x5", r#"{"gosa":1.0,"per_rank":[{"rank":0}]}"#);
        assert_eq!(
            line,
            r#"{"check":"cpu-9x10x5","gosa":1.0,"per_rank":[{"rank":0}]}"#
        );
        assert_eq!(labelled("x", "{}"), "{\"check\":\"x\"}");
        assert_eq!(labelled("a\"b", "{}"), r#"{"check":"a\"b"}"#);
    }

    #[test]
    fn a_fail_says_differs_only_when_a_result_differed() {
        let mut t = Tally::default();
        t.missed(Failed::TimedOut);
        let said = t.summary();
        assert!(
            said.starts_with("no result from 1 run: 1 timed out;"),
            "{said}"
        );
        assert!(!said.contains("differs"), "{said}");
        t.differs = 2;
        t.missed(Failed::Crashed);
        t.missed(Failed::WrongAnswer);
        t.missed(Failed::WrongAnswer);
        assert_eq!(
            t.summary(),
            "2 GPU results differ from the CPU's; no result from 4 runs: 2 failed their own \
             verification, 1 timed out, 1 failed; see the FAIL and FAILED lines above"
        );
    }

    #[test]
    fn outcomes_say_why_and_skips_say_who_asked() {
        assert_eq!(Outcome::NotRun(None).to_string(), "not run");
        assert_eq!(
            Outcome::NotRun(Some("no ranks".into())).to_string(),
            "not run: no ranks"
        );
        assert_eq!(
            Outcome::Skipped(BUDGET).to_string(),
            "skipped (the --budget was spent)"
        );
    }
}
