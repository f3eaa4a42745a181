//! `himeno plan`: the runs of scaling studies, from their definitions.
//!
//! A study definition (`inputs/studies/*.env`) is data, not a script: lines
//! `KEY=VALUE` (a value may be quoted), `#` comments and blank lines. Keys:
//! `NAME` (the label of its runs), `KIND` (`strong`, `weak` or `shape`),
//! `SIZES` (presets or `NIxNJxNK` grids), `RANKS` (rank counts), `PROCS`
//! (process grids; for each rank count those whose product matches, or the
//! automatic choice when none is given), `ITERATIONS`, `THREADS` and
//! `TEMPORAL` (sweeps per halo exchange, `--temporal`; default 1).
//!
//! For a weak study each size is the block of one rank: the global grid
//! grows with the rank count so that every rank owns exactly that interior
//! (each prime factor of the rank count, largest first, multiplies the
//! dimension whose global interior is smallest so far, i before j before
//! k on ties, so blocks stay compact).
//!
//! The plan resolves every grid and process grid the way a run does, so
//! `scripts/sweep.sh` and the job templates keep no copy of the presets or
//! of the decomposition rules.

use crate::config::MAX_ITERATIONS;
use crate::error::{Error, Result};
use crate::grid::decomp::{MAX_DEPTH, MAX_RANKS, ProcGrid};
use crate::grid::{Grid, Preset};
use crate::machine::threads::MAX_THREADS;
use crate::output::{self, Format};
use crate::problem::{ProblemSpec, Ranks};
use clap::Args;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Largest file a study definition may be (they are a few lines).
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Most runs one plan may hold, all its studies together: far more than a
/// job runs (a study of 10 sizes on 20 rank counts is 200), and few enough
/// that the plan is printed at once. A definition of 2000 sizes on 2000
/// rank counts, 10 KB of text, would be 4 million runs and 300 MB of plan.
pub const MAX_RUNS: usize = 10_000;

/// Options of `himeno plan`.
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// Study definitions (`inputs/studies/*.env`).
    #[arg(required = true)]
    pub studies: Vec<PathBuf>,
    /// Leave out runs of more ranks than this (e.g. the job's allocation).
    #[arg(long)]
    pub max_ranks: Option<usize>,
    /// Report format on standard output: text is one run per line, tab
    /// separated (name, size, ranks, process grid, then the run's options).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// What a study varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Varies {
    /// One grid, more ranks.
    Strong,
    /// One block per rank, more ranks.
    Weak,
    /// One grid and rank count, several process grids.
    Shape,
}

impl Varies {
    /// The `--scaling` of the study's runs: a shape study holds its grid
    /// and rank count, so its runs compare as a strong study's do.
    fn scaling(self) -> &'static str {
        match self {
            Varies::Strong | Varies::Shape => "strong",
            Varies::Weak => "weak",
        }
    }
}

/// A study definition, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Study {
    /// Label of the study's runs.
    pub name: String,
    /// What it varies.
    pub kind: Varies,
    /// Sizes: presets or `NIxNJxNK`.
    pub sizes: Vec<String>,
    /// Rank counts.
    pub ranks: Vec<usize>,
    /// Process grids to choose from, empty for the automatic choice.
    pub procs: Vec<ProcGrid>,
    /// Timed iterations per run.
    pub iterations: u64,
    /// Sweep threads per rank.
    pub threads: usize,
    /// Sweeps per halo exchange (`--temporal`; 1 is the classic iteration).
    pub temporal: usize,
}

/// One run of a study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The study's name (the run's `--label`).
    pub study: String,
    /// The study's kind.
    pub kind: Varies,
    /// The size as the study names it (a weak study's per-rank block).
    pub size: String,
    /// Ranks.
    pub ranks: usize,
    /// The global grid.
    pub grid: [usize; 3],
    /// The process grid.
    pub procs: [usize; 3],
    /// Timed iterations.
    pub iterations: u64,
    /// Sweep threads per rank.
    pub threads: usize,
    /// Sweeps per halo exchange.
    pub temporal: usize,
    /// The run's options for `himeno` (no launcher, no output file).
    pub args: Vec<String>,
}

/// Runs `himeno plan`.
pub fn plan(args: &PlanArgs) -> Result<ExitCode> {
    let mut runs = Vec::new();
    for path in &args.studies {
        let study = Study::read(path)?;
        if runs.len() + study.run_count() > MAX_RUNS {
            return Err(Error::usage(format!(
                "the studies up to {} make more than {MAX_RUNS} runs, the most a plan holds: \
                 split them into several plans",
                path.display()
            )));
        }
        for run in study.runs()? {
            if args.max_ranks.is_some_and(|m| run.ranks > m) {
                continue;
            }
            runs.push(run);
        }
    }
    output::print_report(&match args.format {
        Format::Text => text(&runs),
        Format::Json => output::json(&runs)?,
        Format::Csv => csv(&runs),
    })?;
    Ok(ExitCode::SUCCESS)
}

impl Study {
    /// Reads and parses the definition in `path`.
    pub fn read(path: &Path) -> Result<Study> {
        let bad = |why: String| Error::usage(format!("study definition {}: {why}", path.display()));
        let text = crate::files::read_text(path, MAX_FILE_BYTES)
            .map_err(|e| bad(format!("cannot read it: {e}")))?;
        Study::parse(&text).map_err(|e| match e {
            Error::Usage(m) => bad(m),
            other => other,
        })
    }

    /// Parses a definition's text.
    pub fn parse(text: &str) -> Result<Study> {
        let mut name = None;
        let mut kind = Varies::Strong;
        let (mut sizes, mut ranks, mut procs) = (None, None, Vec::new());
        let (mut iterations, mut threads, mut temporal) = (100, 1, 1);
        // Where each key was set: a second setting is a mistake (which of
        // two would win is not what a reader of the file can tell).
        let mut set_on: HashMap<String, usize> = HashMap::new();
        // A byte order mark, as some editors write it, is no part of the
        // first key.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |why: String| Error::usage(format!("line {}: {why}", n + 1));
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| at("expected KEY=VALUE".into()))?;
            if let Some(first) = set_on.insert(key.trim().to_string(), n + 1) {
                return Err(at(format!(
                    "{} is set again (first on line {first}): set each key once",
                    key.trim()
                )));
            }
            let value = unquote(value.trim()).map_err(|w| at(w.into()))?;
            let words = || {
                value
                    .split_whitespace()
                    .map(String::from)
                    .collect::<Vec<_>>()
            };
            match key.trim() {
                "NAME" => name = Some(label(value).map_err(at)?),
                "KIND" => {
                    kind = match value {
                        "strong" => Varies::Strong,
                        "weak" => Varies::Weak,
                        "shape" => Varies::Shape,
                        k => return Err(at(format!("KIND '{k}' must be strong, weak or shape"))),
                    }
                }
                "SIZES" => {
                    for s in words() {
                        size_grid(&s).map_err(|e| at(e.message().to_string()))?;
                    }
                    sizes = Some(words());
                }
                "RANKS" => {
                    let mut v = Vec::new();
                    for w in words() {
                        match w.parse::<usize>() {
                            Ok(r) if (1..=MAX_RANKS).contains(&r) => v.push(r),
                            _ => {
                                return Err(at(format!(
                                    "rank count '{w}' must be a whole number from 1 to {MAX_RANKS}"
                                )));
                            }
                        }
                    }
                    ranks = Some(v);
                }
                "PROCS" => {
                    procs = words()
                        .iter()
                        .map(|w| w.parse::<ProcGrid>())
                        .collect::<Result<_>>()
                        .map_err(|e| at(e.message().to_string()))?;
                }
                // Bounded as a run bounds them: a plan holds no run that
                // every run would refuse.
                "ITERATIONS" => {
                    iterations = value
                        .parse()
                        .ok()
                        .filter(|i| (1..=MAX_ITERATIONS).contains(i))
                        .ok_or_else(|| {
                            at(format!(
                                "ITERATIONS '{value}' must be a whole number from 1 to \
                                 {MAX_ITERATIONS}"
                            ))
                        })?;
                }
                "THREADS" => {
                    threads = value
                        .parse()
                        .ok()
                        .filter(|t| (1..=MAX_THREADS).contains(t))
                        .ok_or_else(|| {
                            at(format!(
                                "THREADS '{value}' must be a whole number from 1 to {MAX_THREADS}"
                            ))
                        })?;
                }
                "TEMPORAL" => {
                    temporal = value
                        .parse()
                        .ok()
                        .filter(|t| (1..=MAX_DEPTH).contains(t))
                        .ok_or_else(|| {
                            at(format!("TEMPORAL '{value}' must be from 1 to {MAX_DEPTH}"))
                        })?;
                }
                other => {
                    return Err(at(format!(
                        "unknown key '{other}' (NAME, KIND, SIZES, RANKS, PROCS, ITERATIONS, \
                         THREADS, TEMPORAL)"
                    )));
                }
            }
        }
        let missing = |k: &str| Error::usage(format!("{k} is not set"));
        let study = Study {
            name: name.ok_or_else(|| missing("NAME"))?,
            kind,
            sizes: sizes
                .filter(|s| !s.is_empty())
                .ok_or_else(|| missing("SIZES"))?,
            ranks: ranks
                .filter(|r| !r.is_empty())
                .ok_or_else(|| missing("RANKS"))?,
            procs,
            iterations,
            threads,
            temporal,
        };
        study.check_procs()?;
        let runs = study.run_count();
        if runs > MAX_RUNS {
            return Err(Error::usage(format!(
                "the study makes {runs} runs ({} size(s) x {} rank count(s){}), more than the \
                 {MAX_RUNS} a plan holds: split it into several studies",
                study.sizes.len(),
                study.ranks.len(),
                if study.procs.is_empty() || study.kind == Varies::Weak {
                    ""
                } else {
                    " with their process grids"
                }
            )));
        }
        Ok(study)
    }

    /// Refuses process grids that would be left unused without a word: a
    /// weak study's (it lays out its own) and, in the others, a rank count
    /// none of the given grids has.
    fn check_procs(&self) -> Result<()> {
        if self.procs.is_empty() {
            return Ok(());
        }
        if self.kind == Varies::Weak {
            return Err(Error::usage(
                "PROCS is not used by a weak study (its process grids grow with the ranks): \
                 drop PROCS, or make the study strong",
            ));
        }
        if let Some(np) = self
            .ranks
            .iter()
            .find(|&&np| !self.procs.iter().any(|p| p.ranks() == np))
        {
            return Err(Error::usage(format!(
                "RANKS has {np}, but no process grid in PROCS has {np} ranks, so the study \
                 would run none: add one (e.g. {np}x1x1), drop {np} from RANKS, or drop PROCS \
                 for the automatic choice"
            )));
        }
        Ok(())
    }

    /// How many runs [`Study::runs`] makes, counted without making them.
    pub fn run_count(&self) -> usize {
        let per_size: usize = if self.kind == Varies::Weak || self.procs.is_empty() {
            self.ranks.len()
        } else {
            let mut grids_of = std::collections::HashMap::new();
            for p in &self.procs {
                *grids_of.entry(p.ranks()).or_insert(0usize) += 1;
            }
            self.ranks
                .iter()
                .map(|np| grids_of.get(np).copied().unwrap_or(0))
                .fold(0, usize::saturating_add)
        };
        per_size.saturating_mul(self.sizes.len())
    }

    /// The study's runs, in the order of its sizes, then rank counts, then
    /// process grids.
    pub fn runs(&self) -> Result<Vec<Run>> {
        let mut out = Vec::new();
        for size in &self.sizes {
            let (base, _) = size_grid(size)?;
            for &np in &self.ranks {
                let layouts: Vec<(Grid, Option<ProcGrid>)> = match self.kind {
                    Varies::Weak => {
                        let (g, p) = weak_layout(&base, np)?;
                        vec![(g, Some(p))]
                    }
                    _ if self.procs.is_empty() => vec![(base, None)],
                    _ => self
                        .procs
                        .iter()
                        .filter(|p| p.ranks() == np)
                        .map(|&p| (base, Some(p)))
                        .collect(),
                };
                for (grid, procs) in layouts {
                    let problem = ProblemSpec {
                        size: None,
                        grid: Some(grid.to_string()),
                        procs: procs.map(|p| p.to_string()),
                    }
                    .resolve_for(Preset::M, Ranks::Model(Some(np)), self.temporal)
                    .and_then(|p| p.check_temporal(self.temporal).map(|()| p))
                    .map_err(|e| {
                        Error::usage(format!(
                            "study {}: size {size} on {np} ranks: {}",
                            self.name,
                            e.message()
                        ))
                    })?;
                    let grid_args = if self.kind != Varies::Weak && size.parse::<Preset>().is_ok() {
                        ["--size".to_string(), size.to_ascii_uppercase()]
                    } else {
                        ["--grid".to_string(), problem.grid.to_string()]
                    };
                    let mut args = grid_args.to_vec();
                    args.extend([
                        "--procs".to_string(),
                        problem.procs.to_string(),
                        "--iterations".to_string(),
                        self.iterations.to_string(),
                        "--threads".to_string(),
                        self.threads.to_string(),
                        "--label".to_string(),
                        self.name.clone(),
                        "--scaling".to_string(),
                        self.kind.scaling().to_string(),
                    ]);
                    if self.temporal > 1 {
                        args.extend(["--temporal".to_string(), self.temporal.to_string()]);
                    }
                    out.push(Run {
                        study: self.name.clone(),
                        kind: self.kind,
                        size: size.clone(),
                        ranks: np,
                        grid: problem.grid.n,
                        procs: problem.procs.p,
                        iterations: self.iterations,
                        threads: self.threads,
                        temporal: self.temporal,
                        args,
                    });
                }
            }
        }
        Ok(out)
    }
}

/// A value without its surrounding quotes; shell syntax beyond that is
/// refused, since the file is data.
fn unquote(v: &str) -> std::result::Result<&str, &'static str> {
    let inner = match v.as_bytes() {
        [b'"', .., b'"'] | [b'\'', .., b'\''] if v.len() >= 2 => &v[1..v.len() - 1],
        _ => v,
    };
    if inner.contains(['"', '\'', '$', '`', '\\', ';', '(', ')', '|', '&', '<', '>']) {
        return Err(
            "a value holds shell syntax (quotes, $, `, \\, ;, (, ), |, &, <, >): \
                    definitions are data, not scripts",
        );
    }
    Ok(inner)
}

/// A study name: usable as a label and in file names.
fn label(v: &str) -> std::result::Result<String, String> {
    // The first character a letter or digit: the name is passed on as the
    // value of `--label`, where a leading '-' reads as an option.
    if v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        Ok(v.to_string())
    } else {
        Err(format!(
            "NAME '{v}' must be 1 to 64 letters, digits, '.', '_' or '-', starting with a \
             letter or digit"
        ))
    }
}

/// The grid a study's size names: a preset or `NIxNJxNK`.
fn size_grid(s: &str) -> Result<(Grid, crate::grid::Size)> {
    // A grid has digits; anything else is meant as a preset (and named in
    // the error as an unknown size).
    let args = if !s.chars().any(|c| c.is_ascii_digit()) {
        ProblemSpec {
            size: Some(s.to_string()),
            ..ProblemSpec::default()
        }
    } else {
        ProblemSpec {
            grid: Some(s.to_string()),
            ..ProblemSpec::default()
        }
    };
    let p = args.resolve(Preset::M, Ranks::Model(None))?;
    Ok((p.grid, p.size))
}

/// The global grid and process grid that give each of `np` ranks the
/// interior of `block`.
pub fn weak_layout(block: &Grid, np: usize) -> Result<(Grid, ProcGrid)> {
    let inner = block.interior();
    let mut p = [1usize; 3];
    for f in prime_factors(np).into_iter().rev() {
        let mut best = 0;
        for d in 1..3 {
            if p[d] * inner[d] < p[best] * inner[best] {
                best = d;
            }
        }
        p[best] *= f;
    }
    let mut n = [0usize; 3];
    for d in 0..3 {
        n[d] = p[d]
            .checked_mul(inner[d])
            .and_then(|v| v.checked_add(2))
            .ok_or_else(|| Error::usage(format!("{np} ranks of {block} is too large a grid")))?;
    }
    Ok((Grid::new(n)?, ProcGrid { p }))
}

/// Prime factors of `n`, ascending, with multiplicity.
fn prime_factors(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut f = 2;
    while f * f <= n {
        while n.is_multiple_of(f) {
            out.push(f);
            n /= f;
        }
        f += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// One run per line: name, size, ranks, process grid, options (tabs
/// between the first five fields, spaces between the options).
fn text(runs: &[Run]) -> String {
    let mut s = String::new();
    for r in runs {
        let [pi, pj, pk] = r.procs;
        let _ = writeln!(
            s,
            "{}\t{}\t{}\t{pi}x{pj}x{pk}\t{}",
            r.study,
            r.size,
            r.ranks,
            r.args.join(" ")
        );
    }
    s
}

/// CSV: one row per run.
fn csv(runs: &[Run]) -> String {
    let mut s =
        String::from("study,kind,size,ranks,ni,nj,nk,pi,pj,pk,iterations,threads,temporal\n");
    for r in runs {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.study,
            serde_json::to_value(r.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            output::csv_field(&r.size),
            r.ranks,
            r.grid[0],
            r.grid[1],
            r.grid[2],
            r.procs[0],
            r.procs[1],
            r.procs[2],
            r.iterations,
            r.threads,
            r.temporal
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRONG: &str = "# a comment\nNAME=s1\nKIND=strong\nSIZES=\"XS S\"\nRANKS='1 2 4'\n\
                          PROCS=\"1x1x1 2x1x1 1x1x2 2x2x1\"\nITERATIONS=40\nTHREADS=2\n";

    #[test]
    fn strong_studies_keep_matching_process_grids() {
        let runs = Study::parse(STRONG).unwrap().runs().unwrap();
        // Per size: 1 rank (1x1x1), 2 ranks (2 grids), 4 ranks (1 grid).
        assert_eq!(runs.len(), 8);
        assert_eq!(
            runs[0].args.join(" "),
            "--size XS --procs 1x1x1 --iterations 40 --threads 2 --label s1 --scaling strong"
        );
        assert_eq!(runs[7].procs, [2, 2, 1]);
        assert_eq!(runs[7].grid, [64, 64, 128]);
    }

    #[test]
    fn runs_are_counted_before_they_are_made_and_bounded() {
        for text in [
            STRONG,
            "NAME=w\nKIND=weak\nSIZES=\"9x9x9 12x12x12\"\nRANKS=\"1 2 3\"\n",
            "NAME=a\nSIZES=\"XS S M\"\nRANKS=\"1 2 4 8\"\n",
        ] {
            let study = Study::parse(text).unwrap();
            assert_eq!(study.run_count(), study.runs().unwrap().len(), "{text}");
        }
        let sizes: Vec<String> = (3..104).map(|i| format!("{i}x9x9")).collect();
        let ranks: Vec<String> = (1..=100).map(|r| r.to_string()).collect();
        let text = format!(
            "NAME=n\nSIZES={}\nRANKS={}\n",
            sizes.join(" "),
            ranks.join(" ")
        );
        let e = Study::parse(&text).unwrap_err();
        assert!(e.message().contains("10100 runs"), "{e}");
    }

    #[test]
    fn temporal_studies_pass_the_depth_and_refuse_thin_blocks() {
        let runs = Study::parse("NAME=t\nSIZES=S\nRANKS=\"1 2\"\nTEMPORAL=4\n")
            .unwrap()
            .runs()
            .unwrap();
        assert!(
            runs[1]
                .args
                .join(" ")
                .ends_with("--label t --scaling strong --temporal 4")
        );
        assert_eq!(runs[1].temporal, 4);
        assert!(csv(&runs).lines().nth(2).unwrap().ends_with(",1,4"));
        // 30 interior points along i over 8 ranks: blocks of 3 or 4.
        let err = Study::parse("NAME=t\nSIZES=32x32x32\nRANKS=8\nPROCS=8x1x1\nTEMPORAL=4\n")
            .unwrap()
            .runs()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("study t") && err.contains("--temporal 3 or less"),
            "{err}"
        );
        let err = Study::parse("NAME=t\nSIZES=S\nRANKS=1\nTEMPORAL=0\n").unwrap_err();
        assert!(
            err.to_string().contains("TEMPORAL '0' must be from 1"),
            "{err}"
        );
    }

    #[test]
    fn automatic_process_grids_are_resolved_as_a_run_does() {
        let s = Study::parse("NAME=a\nSIZES=M\nRANKS=\"2 8\"\n").unwrap();
        let runs = s.runs().unwrap();
        assert_eq!(runs[0].procs, [1, 1, 2]);
        assert_eq!(runs[1].procs, [2, 2, 2]);
        assert_eq!((runs[0].iterations, runs[0].threads), (100, 1));
    }

    #[test]
    fn weak_studies_grow_the_grid_with_the_ranks() {
        let xs = Preset::XS.grid();
        let layout = |n| {
            let (g, p) = weak_layout(&xs, n).unwrap();
            (g.n, p.p)
        };
        assert_eq!(layout(1), ([32, 32, 64], [1, 1, 1]));
        assert_eq!(layout(2), ([62, 32, 64], [2, 1, 1]));
        assert_eq!(layout(4), ([62, 62, 64], [2, 2, 1]));
        // 60x60 against 62 in k: i is the smallest again.
        assert_eq!(layout(8), ([122, 62, 64], [4, 2, 1]));
        assert_eq!(layout(6), ([92, 62, 64], [3, 2, 1]));
        let runs = Study::parse("NAME=w\nKIND=weak\nSIZES=XS\nRANKS=\"4\"\n")
            .unwrap()
            .runs()
            .unwrap();
        assert_eq!(runs[0].args[..4].join(" "), "--grid 62x62x64 --procs 2x2x1");
        assert_eq!(prime_factors(360), [2, 2, 2, 3, 3, 5]);
    }

    #[test]
    fn definitions_are_data() {
        for (bad, why) in [
            ("SIZES=XS\nRANKS=1\n", "NAME is not set"),
            ("NAME=x\nRANKS=1\n", "SIZES is not set"),
            ("NAME=x\nSIZES=XS\nRANKS=0\n", "rank count '0'"),
            ("NAME=x\nSIZES=XXL\nRANKS=1\n", "unknown size"),
            ("NAME=x\nSIZES=XS\nRANKS=1\nKIND=odd\n", "KIND 'odd'"),
            ("NAME=$(rm -rf /)\n", "shell syntax"),
            ("NAME=a b\n", "NAME 'a b'"),
            ("NAME=x\nFOO=1\n", "unknown key 'FOO'"),
            ("just words\n", "expected KEY=VALUE"),
            ("NAME=x\nSIZES=XS\nRANKS=1\nPROCS=2x2\n", "process grid"),
            // Values nothing could use, and settings that would be lost.
            ("NAME=-v\nSIZES=XS\nRANKS=1\n", "starting with a letter"),
            (
                "NAME=--label\nSIZES=XS\nRANKS=1\n",
                "starting with a letter",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\nTHREADS=18446744073709551615\n",
                "THREADS",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\nTHREADS=4097\n",
                "from 1 to 4096",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\nITERATIONS=18446744073709551615\n",
                "ITERATIONS",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\nITERATIONS=1000000001\n",
                "ITERATIONS",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\nNAME=y\n",
                "line 4: NAME is set again (first on line 1)",
            ),
            ("NAME=x\nSIZES=XS\nRANKS=1\nRANKS=2\n", "RANKS is set again"),
            (
                "NAME=x\nSIZES=XS\nRANKS=\"1 2 3\"\nPROCS=\"1x1x1 2x1x1\"\n",
                "RANKS has 3",
            ),
            (
                "NAME=x\nKIND=weak\nSIZES=XS\nRANKS=2\nPROCS=2x1x1\n",
                "weak study",
            ),
            (
                "NAME=x\nSIZES=XS\nRANKS=1\n\u{feff}FOO=1\n",
                "'\\u{feff}FOO'",
            ),
        ] {
            let err = Study::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        // A byte order mark at the start is no part of the first key.
        let s = Study::parse("\u{feff}NAME=x\nSIZES=XS\nRANKS=1\n").unwrap();
        assert_eq!(s.name, "x");
        let s = Study::parse("NAME=x\nSIZES=2x3x4\nRANKS=1\n").unwrap_err();
        assert!(s.to_string().contains("at least 3"), "{s}");
    }

    #[test]
    fn the_shipped_studies_parse_and_name_themselves_after_their_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("inputs/studies");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let study = Study::read(&path).unwrap();
            assert!(!study.runs().unwrap().is_empty(), "{}", path.display());
            let stem = path.file_stem().unwrap().to_string_lossy();
            assert_eq!(study.name, stem, "{}", path.display());
            n += 1;
        }
        assert!(n >= 5);
    }
}
