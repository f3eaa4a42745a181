//! The problem a command works on: the global grid (`--size` or `--grid`)
//! and the process grid (`--procs`, or the automatic choice), as given and
//! as resolved. Runs, the halo self-test, the model and the plans share
//! these values and resolve them once, here (their grammar is
//! `crate::args::ProblemArgs`).

use crate::comm::MPI_ENABLED;
use crate::error::{Error, Result};
use crate::grid::decomp::{FaceWeights, MAX_DEPTH, ProcGrid};
use crate::grid::{Grid, Preset, Size};

/// `--size`, `--grid` and `--procs` as given, not yet parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProblemSpec {
    /// Size preset name (XS, S, M, L or XL, any case).
    pub size: Option<String>,
    /// Custom global grid `NIxNJxNK`; it takes precedence over `size`.
    pub grid: Option<String>,
    /// Process grid `PIxPJxPK`; `None`: chosen to minimise the halo surface.
    pub procs: Option<String>,
}

/// How many ranks the problem is resolved for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranks {
    /// The ranks of the job being run: `--procs` must match them.
    Job(usize),
    /// A count given for a prediction, or none: then `--procs` decides
    /// (one rank without it).
    Model(Option<usize>),
}

/// The resolved problem. Its `Serialize` names the terms ranks agree on
/// (`crate::config::agreed`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Global grid.
    pub grid: Grid,
    /// The preset, or custom for `--grid`.
    pub size: Size,
    /// Process grid, checked against the rank count and the grid.
    #[serde(rename = "process grid")]
    pub procs: ProcGrid,
}

impl Problem {
    /// Checks `temporal` sweeps per halo exchange for this problem: from 1
    /// (the classic iteration) to [`MAX_DEPTH`], and no block thinner
    /// than its ghost layers (the error names the largest depth that fits).
    pub fn check_temporal(&self, temporal: usize) -> Result<()> {
        if !(1..=MAX_DEPTH).contains(&temporal) {
            return Err(Error::usage(format!(
                "--temporal {temporal} must be from 1 (the classic iteration) to {MAX_DEPTH}"
            )));
        }
        self.procs.check_depth(&self.grid, temporal)
    }

    /// `temporal` where the process grid allows it, else 0: the deepest T
    /// of a run asked for that one (for [`ProblemSpec::resolve_blocked`]).
    pub fn allows(&self, temporal: usize) -> usize {
        if self.check_temporal(temporal).is_ok() {
            temporal
        } else {
            0
        }
    }
}

impl ProblemSpec {
    /// Resolves the options for `ranks`, with `default` when neither
    /// `--size` nor `--grid` is given; an automatic process grid counts
    /// every halo value alike (CPU ranks).
    pub fn resolve(&self, default: Preset, ranks: Ranks) -> Result<Problem> {
        self.resolve_weighted(default, ranks, FaceWeights::UNIFORM)
    }

    /// [`ProblemSpec::resolve`] for CPU ranks that block in time, `deepest`
    /// giving the deepest T a problem's process grid allows the run: an
    /// automatic grid weighs faces normal to k as dear
    /// ([`FaceWeights::DEAR_K`]), unless it allows a shallower T than the
    /// plain surface's grid, which then decides.
    pub fn resolve_blocked(
        &self,
        default: Preset,
        ranks: Ranks,
        deepest: impl Fn(&Problem) -> usize,
    ) -> Result<Problem> {
        let problem = self.resolve_weighted(default, ranks, FaceWeights::DEAR_K)?;
        if self.procs.is_some() {
            return Ok(problem);
        }
        let plain = self.resolve(default, ranks)?;
        Ok(if deepest(&problem) >= deepest(&plain) {
            problem
        } else {
            plain
        })
    }

    /// The problem of CPU ranks that run `temporal` sweeps per exchange:
    /// [`ProblemSpec::resolve_blocked`] for T above 1, else
    /// [`ProblemSpec::resolve`] (what `himeno model` and study plans
    /// predict a run to choose).
    pub fn resolve_for(&self, default: Preset, ranks: Ranks, temporal: usize) -> Result<Problem> {
        if temporal > 1 {
            self.resolve_blocked(default, ranks, |p| p.allows(temporal))
        } else {
            self.resolve(default, ranks)
        }
    }

    /// [`ProblemSpec::resolve`] with an automatic process grid that weighs
    /// each face's values by `weights` (what the ranks' backend pays for
    /// them).
    pub fn resolve_weighted(
        &self,
        default: Preset,
        ranks: Ranks,
        weights: FaceWeights,
    ) -> Result<Problem> {
        let (grid, size) = match (&self.grid, &self.size) {
            (Some(g), _) => (g.parse::<Grid>()?, Size::Custom),
            (None, Some(s)) => {
                let p: Preset = s.parse()?;
                (p.grid(), Size::Preset(p))
            }
            (None, None) => (default.grid(), Size::Preset(default)),
        };
        let given: Option<ProcGrid> = self.procs.as_deref().map(str::parse).transpose()?;
        let procs = match (given, ranks) {
            (Some(pg), Ranks::Job(1)) if pg.ranks() > 1 && !MPI_ENABLED => {
                return Err(Error::usage(format!(
                    "--procs {pg} needs {n} ranks: run them as threads with --local-ranks {n}, \
                     or rebuild with `--features mpi` and start them with mpirun",
                    n = pg.ranks()
                )));
            }
            (Some(pg), Ranks::Job(n) | Ranks::Model(Some(n))) => {
                pg.validate(&grid, n)?;
                pg
            }
            (Some(pg), Ranks::Model(None)) => {
                pg.validate(&grid, pg.ranks())?;
                pg
            }
            (None, Ranks::Job(n) | Ranks::Model(Some(n))) => {
                if n == 0 {
                    return Err(Error::usage("--ranks must be at least 1"));
                }
                ProcGrid::auto_weighted(&grid, n, weights)?
            }
            (None, Ranks::Model(None)) => ProcGrid { p: [1, 1, 1] },
        };
        Ok(Problem { grid, size, procs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(size: Option<&str>, grid: Option<&str>, procs: Option<&str>) -> ProblemSpec {
        ProblemSpec {
            size: size.map(String::from),
            grid: grid.map(String::from),
            procs: procs.map(String::from),
        }
    }

    #[test]
    fn defaults_presets_and_custom_grids() {
        let p = args(None, None, None)
            .resolve(Preset::M, Ranks::Job(1))
            .unwrap();
        assert_eq!(
            (p.grid.n, p.size.to_string().as_str()),
            ([128, 128, 256], "M")
        );
        let p = args(Some("xs"), None, None)
            .resolve(Preset::M, Ranks::Job(1))
            .unwrap();
        assert_eq!(p.size.to_string(), "XS");
        let p = args(None, Some("9x8x7"), None)
            .resolve(Preset::M, Ranks::Model(Some(4)))
            .unwrap();
        assert_eq!(
            (p.size.to_string().as_str(), p.procs.ranks()),
            ("custom", 4)
        );
    }

    #[test]
    fn process_grids_follow_the_rank_count() {
        let model = args(Some("S"), None, Some("2x2x1"));
        assert_eq!(
            model
                .resolve(Preset::M, Ranks::Model(None))
                .unwrap()
                .procs
                .p,
            [2, 2, 1]
        );
        assert!(model.resolve(Preset::M, Ranks::Model(Some(3))).is_err());
        assert!(
            args(None, None, None)
                .resolve(Preset::M, Ranks::Model(Some(0)))
                .is_err()
        );
        let err = model.resolve(Preset::M, Ranks::Job(1)).unwrap_err();
        if MPI_ENABLED {
            assert!(err.to_string().contains("has 4 ranks"), "{err}");
        } else {
            assert!(err.to_string().contains("--local-ranks 4"), "{err}");
        }
    }

    /// Ranks that block in time keep k whole where the plain surface
    /// splits it (two ranks at M and L: an i split, whose wavefront
    /// updates no k ghost points), the classic sweep keeps the plain
    /// surface, and a given grid is kept.
    #[test]
    fn blocked_ranks_keep_k_whole_where_it_leaves_t_as_deep() {
        for (size, ranks, classic, blocked) in [
            ("M", 2, [1, 1, 2], [2, 1, 1]),
            ("L", 2, [1, 1, 2], [2, 1, 1]),
            ("L", 4, [2, 1, 2], [2, 2, 1]),
        ] {
            let spec = args(Some(size), None, None);
            for (t, want) in [(1, classic), (2, blocked), (8, blocked)] {
                let p = spec.resolve_for(Preset::M, Ranks::Job(ranks), t).unwrap();
                assert_eq!(p.procs.p, want, "{size} on {ranks} ranks, T = {t}");
                let model = spec
                    .resolve_for(Preset::M, Ranks::Model(Some(ranks)), t)
                    .unwrap();
                assert_eq!(
                    model.procs, p.procs,
                    "the model predicts what the run takes"
                );
            }
        }
        let given = args(Some("M"), None, Some("1x1x2"));
        let p = given.resolve_for(Preset::M, Ranks::Job(2), 8).unwrap();
        assert_eq!(p.procs.p, [1, 1, 2]);
    }

    /// Where the grid that keeps k whole is too thin for T and the plain
    /// surface's is not, the plain surface decides: blocking never gets
    /// shallower (or refused) for weighing k faces.
    #[test]
    fn a_grid_too_thin_for_t_falls_back_to_the_plain_surface() {
        let mut fell_back = 0;
        for ni in 3..12 {
            for nj in [3, 5, 9, 20] {
                for nk in [3, 5, 9, 20, 40] {
                    let grid = format!("{ni}x{nj}x{nk}");
                    let spec = args(None, Some(&grid), None);
                    for ranks in [2, 3, 4] {
                        for t in [2, 3, 4] {
                            let Ok(plain) = spec.resolve(Preset::M, Ranks::Job(ranks)) else {
                                continue;
                            };
                            let blocked =
                                spec.resolve_for(Preset::M, Ranks::Job(ranks), t).unwrap();
                            assert!(
                                blocked.allows(t) >= plain.allows(t),
                                "{grid} {ranks} T = {t}"
                            );
                            let dear = spec
                                .resolve_weighted(Preset::M, Ranks::Job(ranks), FaceWeights::DEAR_K)
                                .unwrap();
                            if dear.allows(t) < plain.allows(t) {
                                assert_eq!(blocked.procs, plain.procs, "{grid} {ranks} T = {t}");
                                fell_back += 1;
                            } else {
                                assert_eq!(blocked.procs, dear.procs, "{grid} {ranks} T = {t}");
                            }
                        }
                    }
                }
            }
        }
        assert!(fell_back > 0, "some grid is too thin along i or j for T");
    }
}
