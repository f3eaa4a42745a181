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
//! differs from the CPU's), 2 setup error (or a stop signal: no verdict),
//! 3 PARTIAL (a part could not run). A build without `cuda` refuses the
//! command (`disabled`).

mod args;
mod child;
mod matrix;
mod setup;
mod tables;

#[cfg(feature = "cuda")]
mod nvrtc;

#[cfg(not(feature = "cuda"))]
mod disabled;
#[cfg(not(feature = "cuda"))]
use disabled as nvrtc;

pub use args::{GpuCheckArgs, Settings};

use crate::error::{Error, Result};
use crate::signals::StopFlag;
use child::{Runner, run_limited};
use matrix::Part;
use serde_json::Value;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// Exit code of a check in which a part could not run (every check that
/// ran passed).
pub const EXIT_PARTIAL: u8 = 3;

/// The files the check leaves in the results folder (the details archive,
/// or a folder when `tar` fails, besides).
const FILES: [&str; 3] = ["gpu-check.txt", "results.jsonl", "transfer.json"];
/// The details archive's name.
const ARCHIVE: &str = "details.tar.gz";
/// The details folder's name when no archive could be made.
const DETAILS: &str = "details";

/// How a part ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Nothing decided it yet, or it could not run (why).
    NotRun(Option<String>),
    /// Left out on request.
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
            Outcome::Skipped(why) => write!(f, "skipped by request ({why})"),
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
    /// Anything else: it did not start, failed, passed its time limit or
    /// printed no record.
    NoResult,
}

/// The report: on standard output as it goes, and in gpu-check.txt.
struct Report {
    file: File,
}

impl Report {
    /// Prints `line`. A standard output that went away does not cut the
    /// report short: the file is the one that is collected.
    fn line(&mut self, line: impl AsRef<str>) {
        let text = format!("{}\n", line.as_ref());
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        let _ = self.file.write_all(text.as_bytes());
    }
}

/// A check in progress.
struct Check<'a> {
    settings: &'a Settings,
    runner: Runner,
    /// The scratch folder of the details (archived at the end).
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
}

/// Runs the check `s` describes. Errors before the report exists (a build
/// without `cuda`, a results folder that cannot be written) are returned;
/// everything after is in the report and the exit code.
pub fn run(s: &Settings) -> Result<ExitCode> {
    nvrtc::ensure_build()?;
    // SIGTERM, SIGINT, SIGUSR1: the run going is killed, the details are
    // archived, and the check ends without a verdict.
    let stop = StopFlag::install();
    let cannot = |what: &str, e: std::io::Error| {
        Error::runtime(format!("cannot {what} in {}: {e}", s.out.display()))
    };
    std::fs::create_dir_all(&s.out).map_err(|e| cannot("create the results folder", e))?;
    for f in FILES.iter().chain([&ARCHIVE]) {
        let _ = std::fs::remove_file(s.out.join(f));
    }
    let _ = std::fs::remove_dir_all(s.out.join(DETAILS));
    let report = File::create(s.out.join(FILES[0])).map_err(|e| cannot("write", e))?;
    let results = File::create(s.out.join(FILES[1])).map_err(|e| cannot("write", e))?;
    let work = std::env::temp_dir().join(format!(
        "himeno-gpu-check-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(work.join("runs"))
        .map_err(|e| Error::runtime(format!("cannot create {}: {e}", work.display())))?;
    let mut ck = Check {
        settings: s,
        runner: Runner::new(s.himeno.clone(), work.join("runs"), s.run_limit, stop),
        work,
        report: Report { file: report },
        results,
        parts: Part::ALL
            .iter()
            .map(|&p| (p, Outcome::NotRun(None)))
            .collect(),
        local: Ok(()),
        emulated_device: false,
        gpu_records: 0,
        emulated_records: 0,
    };
    let code = ck.all();
    Ok(ExitCode::from(code))
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
            "== himeno GPU check{}{}, {}, host {}",
            if self.emulated_device {
                " (EMULATED device: correctness only)"
            } else {
                ""
            },
            if self.settings.quick { " (quick)" } else { "" },
            crate::report::provenance::utc_now(),
            crate::comm::hostname()
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
        self.correctness();
        self.timing();
        if self.stopped() {
            return self.no_verdict();
        }
        self.verdict()
    }

    /// Whether a stop signal came: no run starts after it.
    fn stopped(&self) -> bool {
        self.runner.stop.raised()
    }

    /// The end of a check cut short by a stop signal (exit 2): what ran
    /// is in the report and the details, but there is no verdict.
    fn no_verdict(&mut self) -> u8 {
        self.report.line("");
        self.finish();
        self.report.line(
            "gpu-check: STOPPED by a signal before the end: no verdict (the report and the \
             details hold the runs that ended)",
        );
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
    /// with its label, and returns it; a failed run is reported. `gpu`:
    /// whether it is a GPU run (counted for the emulation verdict).
    fn record(&mut self, run: &matrix::Run, gpu: bool) -> std::result::Result<Value, Failed> {
        let mut args = run.args.clone();
        args.extend(["--format".into(), "json".into()]);
        let ran = self.runner.run(&run.name, &args, &[]);
        if !ran.ok() {
            let why = ran.why(self.runner.limit);
            self.report.line(tables::failed(&run.name, &why));
            return Err(if ran.code == Some(1) {
                Failed::WrongAnswer
            } else {
                Failed::NoResult
            });
        }
        let record: Value = match serde_json::from_str(&ran.stdout) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) | Err(_) => {
                self.report.line(tables::failed(
                    &run.name,
                    "exit 0, but no JSON record on stdout",
                ));
                return Err(Failed::NoResult);
            }
        };
        if gpu {
            self.gpu_records += 1;
            self.emulated_records += usize::from(matrix::emulated(&record));
        }
        if let Err(e) = writeln!(self.results, "{}", labelled(&run.name, &record)) {
            let line = format!("  note: {}'s record is not in results.jsonl: {e}", run.name);
            self.report.line(line);
        }
        Ok(record)
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
            let Ok(cpu) = self.record(&matrix::cpu_reference(grid, iterations), false) else {
                for p in Part::ALL.into_iter().filter(|p| p.is_correctness()) {
                    self.mark(p, Outcome::Fail);
                }
                continue;
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
                        ok
                    }
                    Err(_) => false,
                };
                self.mark(g.part, if ok { Outcome::Ok } else { Outcome::Fail });
            }
        }
    }

    /// Part 2: bench transfer, XL per occupancy variant, the phase split.
    fn timing(&mut self) {
        let s = self.settings;
        if self.stopped() {
            return;
        }
        self.report.line("");
        self.report.line(format!(
            "== 2. timing{}",
            if self.emulated_device {
                " (EMULATED device: host times, not GPU performance)"
            } else {
                ""
            }
        ));
        let transfer = matrix::transfer(s.quick);
        let mut d2d = None;
        match self.record(&transfer, false) {
            Ok(r) => {
                let (line, copy) = tables::transfer(&r);
                d2d = copy;
                let kept = std::fs::copy(
                    self.work.join("runs").join("transfer.out"),
                    s.out.join(FILES[2]),
                );
                self.report.line(line);
                if let Err(e) = kept {
                    self.report
                        .line(format!("  note: transfer.json not written: {e}"));
                }
                self.mark(Part::Transfer, Outcome::Ok);
            }
            Err(_) => self.mark(Part::Transfer, Outcome::Fail),
        }
        if self.stopped() {
            return;
        }
        if s.quick {
            for (part, what) in [(Part::XlTiming, "XL"), (Part::PhaseSplit, "L phase split")] {
                self.report
                    .line(format!("{what} timing: skipped by request (--quick)"));
                self.mark(part, Outcome::Skipped("--quick"));
            }
            return;
        }
        self.xl(d2d);
        self.split();
    }

    /// XL throughput per occupancy variant; the variants' fields must be
    /// equal (it counts for the occupancy part).
    fn xl(&mut self, d2d: Option<f64>) {
        let iterations = self.settings.xl_iterations;
        self.report.line("");
        for l in tables::xl_head(iterations, self.emulated_device) {
            self.report.line(l);
        }
        let mut first: Option<String> = None;
        for occ in matrix::OCCUPANCIES {
            if self.stopped() {
                return;
            }
            let r = match self.record(&matrix::xl(occ, iterations), true) {
                Ok(r) => r,
                Err(why) => {
                    self.timing_failed(why, Part::XlTiming, Part::Occupancy);
                    continue;
                }
            };
            self.report.line(tables::xl_row(occ, &r, d2d));
            self.mark(Part::XlTiming, Outcome::Ok);
            let Some(fp) = self.fingerprint(&r, &format!("XL occupancy {occ}"), Part::Occupancy)
            else {
                continue;
            };
            match &first {
                None => first = Some(fp),
                Some(f) if *f == fp => self.mark(Part::Occupancy, Outcome::Ok),
                Some(f) => {
                    let line = format!(
                        "  FAIL  XL fingerprint {fp} of occupancy {occ} differs from the first \
                         variant's {f}"
                    );
                    self.report.line(line);
                    self.mark(Part::Occupancy, Outcome::Fail);
                }
            }
        }
    }

    /// The phase split at L; the runs' fields must be equal (it counts for
    /// the staging part).
    fn split(&mut self) {
        let iterations = self.settings.l_iterations;
        self.report.line("");
        for l in tables::split_head(iterations, self.emulated_device) {
            self.report.line(l);
        }
        if let Err(why) = &self.local {
            let why = why.clone();
            self.mark(Part::PhaseSplit, Outcome::NotRun(Some(why)));
            return;
        }
        let mut first: Option<String> = None;
        for sp in matrix::splits(iterations) {
            if self.stopped() {
                return;
            }
            let r = match self.record(&sp.run, true) {
                Ok(r) => r,
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
                    self.mark(Part::Staging, Outcome::Fail);
                }
            }
        }
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
    fn fingerprint(&mut self, r: &Value, what: &str, part: Part) -> Option<String> {
        let fp = r["p_fingerprint"].as_str().map(str::to_string);
        if fp.is_none() {
            self.report
                .line(format!("  FAIL  {what}: its record has no p_fingerprint"));
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
            (
                1,
                format!("FAIL ({device}a GPU result differs from the CPU's; see FAIL lines above)"),
            )
        } else if partial {
            (
                EXIT_PARTIAL,
                format!(
                    "PARTIAL ({device}every check that ran passed, but not every part ran or \
                     passed)"
                ),
            )
        } else if self.settings.quick {
            (
                0,
                format!(
                    "PASS ({device}every part asked for ran; every GPU result equals the CPU's; \
                     --quick left out the XL and L timing)"
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
    /// removes the scratch folder and says where the results are.
    fn finish(&mut self) {
        let out = &self.settings.out;
        let mut tar = Command::new("tar");
        tar.arg("-czf")
            .arg(out.join(ARCHIVE))
            .arg("-C")
            .arg(&self.work)
            .args(["--exclude", "tar.out", "--exclude", "tar.err", "."]);
        // Archived after a stop signal too: that is when the details
        // matter most.
        let tarred = run_limited(
            tar,
            Duration::from_secs(120),
            &StopFlag::never(),
            &self.work.join("tar.out"),
            &self.work.join("tar.err"),
        );
        let details = if tarred.ok() {
            let _ = std::fs::remove_dir_all(&self.work);
            ARCHIVE
        } else {
            let _ = std::fs::remove_file(out.join(ARCHIVE));
            let kept = std::fs::rename(&self.work, out.join(DETAILS));
            let why = tarred.why(Duration::from_secs(120));
            match kept {
                Ok(()) => {
                    self.report.line(format!(
                        "note: no details archive (tar {why}): kept as a folder"
                    ));
                    DETAILS
                }
                Err(e) => {
                    self.report.line(format!(
                        "note: no details archive (tar {why}), and they cannot be moved \
                         ({e}): they stay in {}",
                        self.work.display()
                    ));
                    ""
                }
            }
        };
        let mut names: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| out.join(f).exists())
            .collect();
        if !details.is_empty() {
            names.push(details);
        }
        self.report
            .line(format!("results: {} ({})", out.display(), names.join(", ")));
    }
}

/// `record` as one JSON line with its `"check"` label first.
fn labelled(name: &str, record: &Value) -> String {
    let body = record.to_string();
    let label = Value::String(name.into());
    match body.strip_prefix('{') {
        Some("}") => format!("{{\"check\":{label}}}"),
        Some(rest) => format!("{{\"check\":{label},{rest}"),
        None => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_line_is_labelled_first_and_stays_one_line() {
        let line = labelled(
            "cpu-9x10x5",
            &json!({"gosa": 1.0, "per_rank": [{"rank": 0}]}),
        );
        assert!(line.starts_with("{\"check\":\"cpu-9x10x5\","), "{line}");
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["check"], "cpu-9x10x5");
        assert_eq!(v["gosa"], 1.0);
        assert_eq!(labelled("x", &json!({})), "{\"check\":\"x\"}");
    }

    #[test]
    fn outcomes_say_why_and_skips_say_who_asked() {
        assert_eq!(Outcome::NotRun(None).to_string(), "not run");
        assert_eq!(
            Outcome::NotRun(Some("no ranks".into())).to_string(),
            "not run: no ranks"
        );
        assert_eq!(
            Outcome::Skipped("--quick").to_string(),
            "skipped by request (--quick)"
        );
    }
}
