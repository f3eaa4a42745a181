//! What `himeno gpu-check` runs and how it judges a GPU result: the parts
//! of the check, the correctness matrix (GPU vs CPU on 1, 2 and 4
//! in-process ranks, pinned and pageable staging, `--overlap`, the
//! `--gpu-occupancy` variants, on grids with odd and one-point-wide
//! blocks), the timing runs, and the comparison with the CPU's answer.
//!
//! Plain data and arithmetic, so the unit tests below can read the whole
//! matrix without running anything.

use crate::config::{GpuLayout, Occupancy, SweepVariant};
use crate::report::Record;
use crate::verify::gosa_agrees;

/// A part of the check; each ends ok, failed, not run or skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The binary loads and a first GPU run works.
    Setup,
    /// The binary finds NVRTC by itself.
    NvrtcSearch,
    /// GPU vs CPU on one rank.
    Correctness1Rank,
    /// GPU vs CPU on two in-process ranks (pinned staging).
    Correctness2Ranks,
    /// GPU vs CPU on four in-process ranks (pinned staging).
    Correctness4Ranks,
    /// Pageable staging equals pinned (and the CPU).
    Staging,
    /// `--overlap` equals the CPU.
    Overlap,
    /// Every `--gpu-occupancy` variant equals the CPU.
    Occupancy,
    /// `himeno bench transfer`.
    Transfer,
    /// XL throughput per occupancy variant.
    XlTiming,
    /// The phase split of pinned vs pageable, with and without overlap.
    PhaseSplit,
    /// Full-size runs (L, XL) against the stored known answers.
    KnownAnswers,
    /// L throughput per sweep and occupancy variant.
    LTiming,
    /// The sweep's machine code summary (`cuobjdump`), where it exists.
    Sass,
    /// One Nsight Compute pass of an L sweep (`ncu`), where it exists.
    Ncu,
}

impl Part {
    /// The correctness parts of the matrix (the check's step 1), in report
    /// order.
    pub const MATRIX: [Part; 6] = [
        Part::Correctness1Rank,
        Part::Correctness2Ranks,
        Part::Correctness4Ranks,
        Part::Staging,
        Part::Overlap,
        Part::Occupancy,
    ];

    /// Every part, in report order.
    pub const ALL: [Part; 15] = {
        let [c1, c2, c4, staging, overlap, occupancy] = Part::MATRIX;
        [
            Part::Setup,
            Part::NvrtcSearch,
            Part::KnownAnswers,
            c1,
            c2,
            c4,
            staging,
            overlap,
            occupancy,
            Part::Transfer,
            Part::XlTiming,
            Part::LTiming,
            Part::PhaseSplit,
            Part::Sass,
            Part::Ncu,
        ]
    };

    /// The part's name in the report (the script's names, which readers
    /// of old reports know).
    pub fn name(self) -> &'static str {
        match self {
            Part::Setup => "setup",
            Part::NvrtcSearch => "nvrtc_search",
            Part::Correctness1Rank => "correctness_1_rank",
            Part::Correctness2Ranks => "correctness_2_ranks",
            Part::Correctness4Ranks => "correctness_4_ranks",
            Part::Staging => "staging",
            Part::Overlap => "overlap",
            Part::Occupancy => "occupancy",
            Part::Transfer => "transfer",
            Part::XlTiming => "xl_timing",
            Part::PhaseSplit => "phase_split",
            Part::KnownAnswers => "known_answers",
            Part::LTiming => "l_timing",
            Part::Sass => "sass",
            Part::Ncu => "ncu",
        }
    }

    /// Whether a failure of this part means a wrong GPU answer (FAIL), not
    /// a part that could not run (PARTIAL).
    pub fn is_correctness(self) -> bool {
        matches!(
            self,
            Part::KnownAnswers
                | Part::Correctness1Rank
                | Part::Correctness2Ranks
                | Part::Correctness4Ranks
                | Part::Staging
                | Part::Overlap
                | Part::Occupancy
        )
    }

    /// The correctness part of runs on `ranks` ranks with pinned staging.
    fn of_ranks(ranks: usize) -> Part {
        match ranks {
            1 => Part::Correctness1Rank,
            2 => Part::Correctness2Ranks,
            _ => Part::Correctness4Ranks,
        }
    }
}

/// The correctness grids: size S, an odd one (odd blocks on every split)
/// and a thin one whose k split leaves one-point-wide blocks. The quick
/// mode keeps the thin one and a small odd one, which an emulated device
/// sweeps in moments.
pub fn grids(quick: bool) -> &'static [&'static str] {
    if quick {
        &["13x11x9", THIN]
    } else {
        &["64x64x128", "33x35x37", THIN]
    }
}

/// The thin grid: interior 8x9x3, so a k split makes blocks one and two
/// points wide.
pub const THIN: &str = "9x10x5";

/// Rehearsal iterations of every correctness run.
const WARMUP: &str = "2";

/// The options every run on `grid` shares.
fn base(grid: &str, iterations: u64) -> Vec<String> {
    strings(&[
        "--grid",
        grid,
        "--iterations",
        &iterations.to_string(),
        "--warmup",
        WARMUP,
    ])
}

/// One run of the binary: its label and its options (`--format json` is
/// added when it is run).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The label of its record in results.jsonl and of its detail files.
    pub name: String,
    /// The command-line options.
    pub args: Vec<String>,
}

/// The CPU run on `grid` that the GPU runs on it are compared with.
pub fn cpu_reference(grid: &str, iterations: u64) -> Run {
    let mut args = base(grid, iterations);
    args.extend(strings(&["--backend", "cpu"]));
    Run {
        name: format!("cpu-{grid}"),
        args,
    }
}

/// A GPU run of the correctness matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuRun {
    /// The part its outcome counts for.
    pub part: Part,
    /// In-process ranks (`--local-ranks`, left out for one).
    pub ranks: usize,
    /// Its label and options.
    pub run: Run,
}

/// The GPU runs on `grid`, each to compare with [`cpu_reference`].
pub fn gpu_runs(grid: &str, iterations: u64) -> Vec<GpuRun> {
    let mut out = Vec::new();
    let mut add = |part: Part, ranks: usize, name: String, extra: &[&str]| {
        let mut args = strings(&["--backend", "gpu"]);
        if ranks > 1 {
            args.extend(strings(&["--local-ranks", &ranks.to_string()]));
        }
        args.extend(base(grid, iterations));
        args.extend(strings(extra));
        out.push(GpuRun {
            part,
            ranks,
            run: Run {
                name: format!("gpu-{grid}-{name}"),
                args,
            },
        });
    };
    if grid == THIN {
        add(
            Part::Overlap,
            2,
            "r2-1x1x2-overlap".into(),
            &["--procs", "1x1x2", "--overlap"],
        );
        add(
            Part::Overlap,
            4,
            "r4-2x1x2-overlap".into(),
            &["--procs", "2x1x2", "--overlap"],
        );
        add(
            Part::Staging,
            4,
            "r4-1x2x2-pageable".into(),
            &["--procs", "1x2x2", "--staging", "pageable"],
        );
        return out;
    }
    add(Part::Correctness1Rank, 1, "r1".into(), &[]);
    add(Part::Overlap, 1, "r1-overlap".into(), &["--overlap"]);
    add(
        Part::Occupancy,
        1,
        "r1-occ4".into(),
        &["--gpu-occupancy", "4"],
    );
    add(
        Part::Occupancy,
        1,
        "r1-occ5".into(),
        &["--gpu-occupancy", "5"],
    );
    for (ranks, procs) in [(2, "2x1x1"), (2, "1x1x2"), (4, "1x2x2"), (4, "2x2x1")] {
        let tag = format!("r{ranks}-{procs}");
        add(
            Part::of_ranks(ranks),
            ranks,
            format!("{tag}-pinned"),
            &["--procs", procs, "--staging", "pinned"],
        );
        add(
            Part::Staging,
            ranks,
            format!("{tag}-pageable"),
            &["--procs", procs, "--staging", "pageable"],
        );
        add(
            Part::Overlap,
            ranks,
            format!("{tag}-overlap"),
            &["--procs", procs, "--overlap"],
        );
    }
    add(
        Part::Occupancy,
        4,
        "r4-1x2x2-all".into(),
        &[
            "--procs",
            "1x2x2",
            "--overlap",
            "--staging",
            "pageable",
            "--gpu-occupancy",
            "5",
        ],
    );
    out
}

/// `himeno bench transfer` up to 1 GiB (1 MiB in the quick mode: enough
/// to see every series once).
pub fn transfer(quick: bool) -> Run {
    let max = if quick { 1u64 << 20 } else { 1 << 30 };
    Run {
        name: "transfer".into(),
        args: strings(&["bench", "transfer", "--max-bytes", &max.to_string()]),
    }
}

/// The runs against the stored known answers (`inputs/known_answers.json`):
/// L for 60 iterations and XL for 3, each verified by the run itself; in
/// the quick mode the small grids with stored answers.
pub fn known_answers(quick: bool) -> Vec<Run> {
    let cases: [(&str, &str, &str); 2] = if quick {
        [("--grid", "32x32x64", "3"), ("--grid", "9x10x11", "50")]
    } else {
        [("--size", "L", "60"), ("--size", "XL", "3")]
    };
    cases
        .iter()
        .map(|&(how, grid, iterations)| Run {
            name: format!("known-{grid}-{iterations}"),
            args: strings(&[
                "--backend",
                "gpu",
                how,
                grid,
                "--iterations",
                iterations,
                "--warmup",
                "0",
                "--verify",
            ]),
        })
        .collect()
}

/// A size the variants are timed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedSize {
    /// The size it measures, `XL` or `L`.
    pub label: &'static str,
    /// `--size` or `--grid`.
    pub how: &'static str,
    /// Its value: the size itself, or the small grid standing in for it
    /// in the quick mode.
    pub grid: &'static str,
    /// The part its rows count for.
    pub part: Part,
}

/// The sizes the variants are timed at: XL and L, or in the quick mode
/// small grids standing in for them (an emulated device's times are the
/// host's anyway).
pub fn timed_sizes(quick: bool) -> [TimedSize; 2] {
    let (how, xl, l) = if quick {
        ("--grid", "21x21x41", "17x17x33")
    } else {
        ("--size", "XL", "L")
    };
    [
        TimedSize {
            label: "XL",
            how,
            grid: xl,
            part: Part::XlTiming,
        },
        TimedSize {
            label: "L",
            how,
            grid: l,
            part: Part::LTiming,
        },
    ]
}

impl TimedSize {
    /// The options of a timing run of `iterations` at this size: the size
    /// and the run's length, with the rehearsal of a timing run.
    fn run_options(self, iterations: u64, quick: bool) -> Vec<String> {
        let warmup = if quick { "1" } else { "5" };
        strings(&[
            self.how,
            self.grid,
            "--iterations",
            &iterations.to_string(),
            "--warmup",
            warmup,
        ])
    }
}

/// The timing run of sweep variant `sweep` with occupancy `occ` and
/// field layout `layout` at `size`.
pub fn variant(
    size: TimedSize,
    (sweep, occ, layout): (SweepVariant, Occupancy, GpuLayout),
    iterations: u64,
    quick: bool,
) -> Run {
    let padded = layout == GpuLayout::Padded;
    let mut args = strings(&["--backend", "gpu"]);
    args.extend(size.run_options(iterations, quick));
    args.extend(strings(&[
        "--gpu-sweep",
        sweep.name(),
        "--gpu-occupancy",
        occ.name(),
    ]));
    // The exact layout is the default: its runs name no layout.
    if padded {
        args.extend(strings(&["--gpu-layout", layout.name()]));
    }
    Run {
        name: format!(
            "time-{}-{}-occ{}{}",
            size.label,
            sweep.name(),
            occ.name(),
            if padded { "-padded" } else { "" }
        ),
        args,
    }
}

/// The occupancy the padded layout is timed at, beside every sweep
/// variant: 4 blocks per multiprocessor, which every variant fits and
/// where the model expects each to come nearest the copy bandwidth
/// (docs/gpu.md), so that the table shows what padding adds there.
pub const PADDED_OCCUPANCY: Occupancy = Occupancy::Blocks4;

/// Every (sweep, occupancy, layout) gpu-check times: in the exact
/// layout, every pair a run accepts, sweep variants outer (a pipelined
/// sweep would spill at occupancy 5); then, padded, every sweep variant
/// at [`PADDED_OCCUPANCY`], so that the budget cuts the padded rows
/// first.
pub fn variants() -> Vec<(SweepVariant, Occupancy, GpuLayout)> {
    let exact = SweepVariant::ALL
        .iter()
        .flat_map(|&s| Occupancy::ALL.iter().map(move |&o| (s, o)))
        .filter(|&(s, o)| s.fits(o))
        .map(|(s, o)| (s, o, GpuLayout::Exact));
    let padded = SweepVariant::ALL
        .iter()
        .map(|&s| (s, PADDED_OCCUPANCY, GpuLayout::Padded));
    exact.chain(padded).collect()
}

/// The options of the one Nsight Compute pass: a short L run (a small
/// grid in the quick mode) whose third sweep launch is profiled.
pub fn ncu_target(quick: bool) -> Vec<String> {
    let size = timed_sizes(quick)[1];
    strings(&[
        "--backend",
        "gpu",
        size.how,
        size.grid,
        "--iterations",
        "3",
        "--warmup",
        "0",
    ])
}

/// A run of the phase split at size L.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// In-process ranks sharing the GPU.
    pub ranks: usize,
    /// The process grid.
    pub procs: &'static str,
    /// `pinned` or `pageable`.
    pub staging: &'static str,
    /// Whether `--overlap` is on.
    pub overlap: bool,
    /// Its label and options.
    pub run: Run,
}

/// The phase-split runs: pinned and pageable, overlap off and on, on 2
/// and 4 ranks, at L (a small grid in the quick mode).
pub fn splits(iterations: u64, quick: bool) -> Vec<Split> {
    let size = timed_sizes(quick)[1];
    let mut out = Vec::new();
    for (ranks, procs) in [(2, "2x1x1"), (4, "1x2x2")] {
        for staging in ["pinned", "pageable"] {
            for overlap in [false, true] {
                let mut args = strings(&[
                    "--backend",
                    "gpu",
                    "--local-ranks",
                    &ranks.to_string(),
                    "--procs",
                    procs,
                ]);
                args.extend(size.run_options(iterations, quick));
                args.extend(strings(&["--staging", staging]));
                if overlap {
                    args.push("--overlap".into());
                }
                let name = format!(
                    "split-L-r{ranks}-{procs}-{staging}-overlap{}",
                    if overlap { "on" } else { "off" }
                );
                out.push(Split {
                    ranks,
                    procs,
                    staging,
                    overlap,
                    run: Run { name, args },
                });
            }
        }
    }
    out
}

/// The options of the first GPU run (the smallest there is).
pub fn probe() -> Vec<String> {
    strings(&[
        "-v",
        "--backend",
        "gpu",
        "--grid",
        "3x3x3",
        "--iterations",
        "1",
        "--warmup",
        "0",
    ])
}

/// The options of a run that shows whether the binary has `--local-ranks`.
pub fn local_ranks_probe() -> Vec<String> {
    strings(&[
        "--local-ranks",
        "2",
        "--backend",
        "cpu",
        "--grid",
        "5x5x5",
        "--iterations",
        "1",
        "--warmup",
        "0",
    ])
}

/// Whether the GPU record `gpu` has the CPU record `cpu`'s answer: an
/// equal field fingerprint (present), gosa within the verification
/// tolerance, and no failed verification of its own.
pub fn agrees(gpu: &Record, cpu: &Record) -> bool {
    !gpu.p_fingerprint.is_empty()
        && gpu.p_fingerprint == cpu.p_fingerprint
        && gpu.verified() != Some(false)
        && gosa_agrees(gpu.gosa, cpu.gosa)
}

/// Whether every rank of `record` ran on an emulated device (the field
/// is absent on real GPUs).
pub fn emulated(record: &Record) -> bool {
    !record.per_rank.is_empty() && record.per_rank.iter().all(|r| r.emulated)
}

/// `s` as owned strings.
fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_matrix_covers_every_correctness_part_on_every_grid_set() {
        for quick in [false, true] {
            let runs: Vec<GpuRun> = grids(quick).iter().flat_map(|g| gpu_runs(g, 3)).collect();
            // Every correctness part but the known answers (their own runs).
            for part in Part::ALL
                .into_iter()
                .filter(|p| p.is_correctness() && *p != Part::KnownAnswers)
            {
                assert!(runs.iter().any(|r| r.part == part), "{part:?} {quick}");
            }
            // The known answers' runs are of grids and lengths with a
            // stored answer.
            for r in known_answers(quick) {
                let at = |flag: &str| {
                    r.args
                        .windows(2)
                        .find(|w| w[0] == flag)
                        .map(|w| w[1].clone())
                };
                let iterations: u64 = at("--iterations").unwrap().parse().unwrap();
                let grid = match (at("--size"), at("--grid")) {
                    (Some(size), None) => size.parse::<crate::grid::Preset>().unwrap().grid(),
                    (None, Some(g)) => g.parse::<crate::grid::Grid>().unwrap(),
                    _ => panic!("{r:?}"),
                };
                assert!(
                    crate::verify::known_answer(&grid, iterations).is_some(),
                    "{r:?}: no stored answer"
                );
            }
            let mut names: Vec<&str> = runs.iter().map(|r| r.run.name.as_str()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "labels are unique");
            for r in &runs {
                let local = r.run.args.windows(2).any(|w| w[0] == "--local-ranks");
                assert_eq!(local, r.ranks > 1, "{:?}", r.run);
            }
        }
        assert_eq!(gpu_runs("33x35x37", 20).len(), 17);
        assert_eq!(gpu_runs(THIN, 20).len(), 3);
        assert_eq!(splits(100, false).len(), 8);
        let pipelined = SweepVariant::ALL.iter().filter(|s| s.pipelined()).count();
        assert_eq!(
            variants().len(),
            SweepVariant::ALL.len() * Occupancy::ALL.len() - pipelined + SweepVariant::ALL.len()
        );
        // Every padded run fits its occupancy and comes after every exact one.
        let v = variants();
        let first_padded = v.iter().position(|x| x.2 == GpuLayout::Padded).unwrap();
        assert!(
            v[first_padded..]
                .iter()
                .all(|x| x.2 == GpuLayout::Padded && x.0.fits(x.1))
        );
        let padded = variant(
            timed_sizes(true)[1],
            (SweepVariant::Slab, Occupancy::Blocks4, GpuLayout::Padded),
            3,
            true,
        );
        assert_eq!(padded.name, "time-L-slab-occ4-padded");
        assert!(
            padded
                .args
                .windows(2)
                .any(|w| w == ["--gpu-layout", "padded"]),
            "{padded:?}"
        );
        // Every run a quick check times has a stored answer or a small grid.
        for r in known_answers(true).iter().chain(&known_answers(false)) {
            assert!(r.args.contains(&"--verify".to_string()), "{r:?}");
        }
        let v = variant(
            timed_sizes(true)[0],
            (SweepVariant::Classic, Occupancy::Blocks4, GpuLayout::Exact),
            3,
            true,
        );
        assert!(!v.args.iter().any(|a| a == "--gpu-layout"), "{v:?}");
        assert_eq!(v.name, "time-XL-classic-occ4");
        assert!(
            v.args.windows(2).any(|w| w == ["--grid", "21x21x41"]),
            "{v:?}"
        );
        assert!(
            v.args.windows(2).any(|w| w == ["--gpu-sweep", "classic"]),
            "{v:?}"
        );
    }

    /// A record with the fields a run always writes and those of `more`.
    fn rec(more: serde_json::Value) -> Record {
        let mut v = json!({"schema": 1, "grid": [5, 5, 5], "procs": [1, 1, 1], "ranks": 1,
                           "iterations": 1, "mflops": 1.0, "wall_s": 1.0});
        v.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn agreement_needs_the_fingerprint_the_tolerance_and_no_failed_check() {
        let cpu = rec(json!({"p_fingerprint": "00ab", "gosa": 1.0e-3}));
        let same =
            rec(json!({"p_fingerprint": "00ab", "gosa": 1.0e-3 * (1.0 + 1e-12), "verified": null}));
        assert!(agrees(&same, &cpu));
        let far = rec(json!({"p_fingerprint": "00ab", "gosa": 1.001e-3}));
        assert!(!agrees(&far, &cpu));
        let other = rec(json!({"p_fingerprint": "00ac", "gosa": 1.0e-3}));
        assert!(!agrees(&other, &cpu));
        let refused = rec(json!({"p_fingerprint": "00ab", "gosa": 1.0e-3, "verified": false}));
        assert!(!agrees(&refused, &cpu));
        assert!(!agrees(&rec(json!({})), &rec(json!({}))));
    }

    #[test]
    fn emulated_means_every_rank_says_so() {
        let t = json!({"rank": 0, "emulated": true});
        assert!(emulated(&rec(json!({"per_rank": [t, t]}))));
        assert!(!emulated(&rec(json!({"per_rank": [t, {"rank": 1}]}))));
        assert!(!emulated(&rec(json!({"per_rank": []}))));
        assert!(!emulated(&rec(json!({}))));
    }
}
