//! Verification: the plain reference kernel, the decomposition-independent
//! fingerprint of the field, stored known answers, and the verdict.

use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::grid::decomp::{Block, ProcGrid};
use crate::grid::fields::coef::{A0, A1, A2, A3, B0, B1, B2, BND, C0, C1, C2, WRK1};
use crate::grid::fields::{Fields, OMEGA};
use crate::signals::StopFlag;
use ndarray::Array3;
use serde::{Deserialize, Serialize};

/// Relative tolerance on gosa between runs whose fields are bitwise equal:
/// only the order of the f64 summation differs.
pub const GOSA_RTOL: f64 = 1e-9;

/// Whether gosa `got` agrees with `want` within [`GOSA_RTOL`] relative to
/// `want`: the one comparison of gosa values (known answers, the reference,
/// GPU vs CPU in `himeno gpu-check`, the tests).
pub fn gosa_agrees(got: f64, want: f64) -> bool {
    gosa_rel_diff(got, want) <= GOSA_RTOL
}

/// The relative difference of gosa `got` from `want` (a zero `want` counts
/// as the smallest positive number, so that only an exact zero agrees).
fn gosa_rel_diff(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(f64::MIN_POSITIVE)
}

/// One reference sweep over the owned points of `f` (a whole-grid block),
/// written as the specification reads, then `p` and `next` are swapped.
/// Returns the sum of squared residuals.
pub fn reference_sweep(f: &mut Fields) -> f64 {
    reference_sweep_unless(f, &StopFlag::never()).expect("never stopped")
}

/// [`reference_sweep`], abandoned (`None`, fields half swept) as soon as
/// `stop` is raised: the flag is read once per i-plane, so that a stop
/// signal is seen within a fraction of a sweep even of the largest grids.
fn reference_sweep_unless(f: &mut Fields, stop: &StopFlag) -> Option<f64> {
    let (ni, nj, nk) = f.p.dim();
    let p = &f.p;
    let c = &f.coef;
    let mut gosa = 0.0f64;
    for i in 1..ni - 1 {
        if stop.raised() {
            return None;
        }
        for j in 1..nj - 1 {
            for k in 1..nk - 1 {
                let at = |f: usize| c[f][[i, j, k]];
                let s0 = at(A0) * p[[i + 1, j, k]]
                    + at(A1) * p[[i, j + 1, k]]
                    + at(A2) * p[[i, j, k + 1]]
                    + at(B0)
                        * (p[[i + 1, j + 1, k]] - p[[i + 1, j - 1, k]] - p[[i - 1, j + 1, k]]
                            + p[[i - 1, j - 1, k]])
                    + at(B1)
                        * (p[[i, j + 1, k + 1]] - p[[i, j - 1, k + 1]] - p[[i, j + 1, k - 1]]
                            + p[[i, j - 1, k - 1]])
                    + at(B2)
                        * (p[[i + 1, j, k + 1]] - p[[i - 1, j, k + 1]] - p[[i + 1, j, k - 1]]
                            + p[[i - 1, j, k - 1]])
                    + at(C0) * p[[i - 1, j, k]]
                    + at(C1) * p[[i, j - 1, k]]
                    + at(C2) * p[[i, j, k - 1]]
                    + at(WRK1);
                let ss = (s0 * at(A3) - p[[i, j, k]]) * at(BND);
                gosa += f64::from(ss * ss);
                f.next[[i, j, k]] = p[[i, j, k]] + OMEGA * ss;
            }
        }
    }
    std::mem::swap(&mut f.p, &mut f.next);
    Some(gosa)
}

/// The answer of a run: gosa of the last iteration and the fingerprint of
/// the final field.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Gosa of the last iteration.
    pub gosa: f64,
    /// Fingerprint of the final interior `p` (see [`fingerprint`]).
    pub p_fingerprint: u64,
}

/// Runs `iterations` reference sweeps on the whole of `grid` in one block;
/// `Ok(None)` when `stop` was raised before the end, an error when the
/// memory for its fields is refused.
pub fn reference_run(grid: &Grid, iterations: u64, stop: &StopFlag) -> Result<Option<Answer>> {
    let block = Block::of(grid, &ProcGrid { p: [1, 1, 1] }, 0);
    let mut f = Fields::initial(grid, &block)?;
    let mut gosa = 0.0;
    for _ in 0..iterations {
        match reference_sweep_unless(&mut f, stop) {
            Some(g) => gosa = g,
            None => return Ok(None),
        }
    }
    Ok(Some(Answer {
        gosa,
        p_fingerprint: fingerprint(grid, &block, &f.p),
    }))
}

/// SplitMix64's output function: a cheap, well-mixing 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// This block's part of the field fingerprint: the wrapping sum over owned
/// points of a hash of (global linear index, value bits). Sums of parts are
/// equal for bitwise-equal fields whatever the decomposition.
pub fn fingerprint(grid: &Grid, block: &Block, p: &Array3<f32>) -> u64 {
    owned_points(grid, block)
        .map(|(g, [li, lj, lk])| hash_point(g, p[[li, lj, lk]]))
        .fold(0, u64::wrapping_add)
}

/// This block's part of the field fingerprint (see [`fingerprint`]) from
/// its owned values alone, in the order a checkpoint's rank file holds
/// them (`i` slowest, `k` fastest).
pub fn fingerprint_of_values(grid: &Grid, block: &Block, values: &[f32]) -> u64 {
    owned_points(grid, block)
        .zip(values)
        .map(|((g, _), &v)| hash_point(g, v))
        .fold(0, u64::wrapping_add)
}

/// One point's term of the fingerprint.
fn hash_point(global: u64, v: f32) -> u64 {
    mix(mix(global) ^ u64::from(v.to_bits()))
}

/// The block's owned points, `i` slowest and `k` fastest: each one's global
/// linear index and its local index.
fn owned_points<'a>(
    grid: &'a Grid,
    block: &'a Block,
) -> impl Iterator<Item = (u64, [usize; 3])> + 'a {
    block.owned(0).flat_map(move |li| {
        let gi = block.global(0, li) as u64;
        block.owned(1).flat_map(move |lj| {
            let gj = block.global(1, lj) as u64;
            let row = (gi * grid.n[1] as u64 + gj) * grid.n[2] as u64;
            block
                .owned(2)
                .map(move |lk| (row + block.global(2, lk) as u64, [li, lj, lk]))
        })
    })
}

/// Most grid points of a reference run made without being asked for
/// (`--verify`): its fields on rank 0 stay below a quarter GiB.
pub const CHECK_MAX_POINTS: u64 = 1 << 22;

/// Most point-iterations of such a run: a few seconds of the reference
/// kernel.
pub const CHECK_MAX_WORK: u64 = 1 << 29;

/// Whether a reference run of `iterations` on `grid` is cheap enough to
/// make without being asked (the check of a restart's checkpoint).
pub fn reference_affordable(grid: &Grid, iterations: u64) -> bool {
    let points = grid.n.iter().map(|&n| n as u64).product::<u64>();
    points <= CHECK_MAX_POINTS && points.saturating_mul(iterations) <= CHECK_MAX_WORK
}

/// Formats a fingerprint as reports show it.
pub fn fingerprint_hex(f: u64) -> String {
    format!("{f:016x}")
}

/// A stored known answer for a grid and iteration count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnownAnswer {
    /// Global grid `[NI, NJ, NK]`.
    pub grid: [usize; 3],
    /// Iterations from the initial state.
    pub iterations: u64,
    /// Gosa of the last iteration.
    pub gosa: f64,
    /// Field fingerprint, hexadecimal.
    pub p_fingerprint: String,
}

/// The known answers kept in `inputs/known_answers.json`, compiled in.
pub fn known_answers() -> Vec<KnownAnswer> {
    serde_json::from_str(include_str!("../inputs/known_answers.json"))
        .expect("inputs/known_answers.json is valid")
}

/// The stored answer for `grid` after `iterations`, if there is one.
pub fn known_answer(grid: &Grid, iterations: u64) -> Option<Answer> {
    known_answers()
        .into_iter()
        .find(|k| k.grid == grid.n && k.iterations == iterations)
        .map(|k| Answer {
            gosa: k.gosa,
            p_fingerprint: u64::from_str_radix(&k.p_fingerprint, 16)
                .expect("known answer fingerprints are hexadecimal"),
        })
}

/// What a run's answer was checked against (JSON: the kebab-case name).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Against {
    /// The stored known answer for the grid and iteration count.
    KnownAnswer,
    /// A fresh run of the reference kernel (`--verify`).
    Reference,
    /// The rehearsal's answer, for runs without a check of their own.
    Rehearsal,
    /// Not checked (JSON `none`).
    #[default]
    #[serde(rename = "none")]
    Unchecked,
    /// A stop signal cut the check short (the run itself is done).
    Interrupted,
}

impl Against {
    /// The name the record and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Against::KnownAnswer => "known-answer",
            Against::Reference => "reference",
            Against::Rehearsal => "rehearsal",
            Against::Unchecked => "none",
            Against::Interrupted => "interrupted",
        }
    }
}

/// What a checked answer was compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The stored known answer for the grid and iteration count.
    KnownAnswer,
    /// A fresh run of the reference kernel (`--verify`).
    Reference,
    /// The rehearsal's answer, for runs without a check of their own.
    Rehearsal,
    /// Not stated: a record that says whether it passed but not against
    /// what (older or hand-made lines; JSON `none`).
    Unstated,
}

impl Basis {
    /// The record's name for it.
    pub fn against(self) -> Against {
        match self {
            Basis::KnownAnswer => Against::KnownAnswer,
            Basis::Reference => Against::Reference,
            Basis::Rehearsal => Against::Rehearsal,
            Basis::Unstated => Against::Unchecked,
        }
    }
}

/// How a run's answer was checked: one of four outcomes, each with its
/// one-line explanation. In JSON it is the three fields records have
/// always had (`verified`: `true`, `false` or `null`; `against`;
/// `detail`), through [`VerdictFields`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "VerdictFields", from = "VerdictFields")]
pub enum Verdict {
    /// The answer matched.
    Passed {
        /// What it matched.
        against: Basis,
        /// A one-line explanation.
        detail: String,
    },
    /// The answer differed.
    Failed {
        /// What it differed from.
        against: Basis,
        /// A one-line explanation.
        detail: String,
    },
    /// Not checked.
    Unchecked {
        /// Why not.
        detail: String,
    },
    /// A stop signal cut the check short (the run itself is done).
    Interrupted {
        /// What was cut short.
        detail: String,
    },
}

impl Default for Verdict {
    /// Not checked, with nothing said.
    fn default() -> Verdict {
        Verdict::Unchecked {
            detail: String::new(),
        }
    }
}

impl Verdict {
    /// `Some(true)` passed, `Some(false)` failed, `None` not checked.
    pub fn verified(&self) -> Option<bool> {
        match self {
            Verdict::Passed { .. } => Some(true),
            Verdict::Failed { .. } => Some(false),
            Verdict::Unchecked { .. } | Verdict::Interrupted { .. } => None,
        }
    }

    /// What it was checked against, as the record names it.
    pub fn against(&self) -> Against {
        match self {
            Verdict::Passed { against, .. } | Verdict::Failed { against, .. } => against.against(),
            Verdict::Unchecked { .. } => Against::Unchecked,
            Verdict::Interrupted { .. } => Against::Interrupted,
        }
    }

    /// The one-line explanation.
    pub fn detail(&self) -> &str {
        match self {
            Verdict::Passed { detail, .. }
            | Verdict::Failed { detail, .. }
            | Verdict::Unchecked { detail }
            | Verdict::Interrupted { detail } => detail,
        }
    }

    /// The same outcome explained by `detail`.
    pub fn with_detail(self, detail: String) -> Verdict {
        match self {
            Verdict::Passed { against, .. } => Verdict::Passed { against, detail },
            Verdict::Failed { against, .. } => Verdict::Failed { against, detail },
            Verdict::Unchecked { .. } => Verdict::Unchecked { detail },
            Verdict::Interrupted { .. } => Verdict::Interrupted { detail },
        }
    }

    /// Whether a stop signal cut the check short (the run itself is done).
    pub fn interrupted(&self) -> bool {
        matches!(self, Verdict::Interrupted { .. })
    }
}

/// A verdict as its JSON fields. Every verdict writes as them and reads
/// back the same; of the combinations a hand-made line may hold that no
/// verdict writes, a pass or failure against `none` or `interrupted`
/// reads as one against an unstated basis, and `null` against a basis
/// as not checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerdictFields {
    /// `true` passed, `false` failed, `null` not checked.
    pub verified: Option<bool>,
    /// What it was checked against.
    pub against: Against,
    /// A one-line explanation.
    pub detail: String,
}

impl From<Verdict> for VerdictFields {
    fn from(v: Verdict) -> VerdictFields {
        VerdictFields {
            verified: v.verified(),
            against: v.against(),
            detail: v.detail().to_string(),
        }
    }
}

impl From<VerdictFields> for Verdict {
    fn from(f: VerdictFields) -> Verdict {
        let against = match f.against {
            Against::KnownAnswer => Basis::KnownAnswer,
            Against::Reference => Basis::Reference,
            Against::Rehearsal => Basis::Rehearsal,
            Against::Unchecked | Against::Interrupted => Basis::Unstated,
        };
        let detail = f.detail;
        match (f.verified, f.against) {
            (Some(true), _) => Verdict::Passed { against, detail },
            (Some(false), _) => Verdict::Failed { against, detail },
            (None, Against::Interrupted) => Verdict::Interrupted { detail },
            (None, _) => Verdict::Unchecked { detail },
        }
    }
}

/// Compares `got` with `want`: the fingerprints must be equal (bitwise-equal
/// fields) and gosa within [`GOSA_RTOL`].
pub fn compare(got: &Answer, want: &Answer, against: Basis) -> Verdict {
    let rel = gosa_rel_diff(got.gosa, want.gosa);
    let fp_ok = got.p_fingerprint == want.p_fingerprint;
    let gosa_ok = gosa_agrees(got.gosa, want.gosa);
    let detail = format!(
        "gosa {:.12e} vs {:.12e} (rel. diff {rel:.1e}, tolerance {GOSA_RTOL:.0e}); \
         p fingerprint {} vs {}{}",
        got.gosa,
        want.gosa,
        fingerprint_hex(got.p_fingerprint),
        fingerprint_hex(want.p_fingerprint),
        if fp_ok { " (equal)" } else { " (DIFFERENT)" }
    );
    if fp_ok && gosa_ok {
        Verdict::Passed { against, detail }
    } else {
        Verdict::Failed { against, detail }
    }
}

/// Decides the verdict of a complete run on rank 0: against a stored known
/// answer when one exists, against a fresh reference run when `force` is
/// set (unchecked when `stop` ends that run early), otherwise unchecked.
pub fn verdict_of(
    grid: &Grid,
    iterations: u64,
    got: &Answer,
    force: bool,
    stop: &StopFlag,
) -> Result<Verdict> {
    if let Some(want) = known_answer(grid, iterations) {
        return Ok(compare(got, &want, Basis::KnownAnswer));
    }
    if force {
        tracing::info!("verifying against the reference kernel on rank 0");
        return Ok(match reference_run(grid, iterations, stop)? {
            Some(want) => compare(got, &want, Basis::Reference),
            None => Verdict::Interrupted {
                detail: "a stop signal ended the reference run before it could check the \
                         answer"
                    .into(),
            },
        });
    }
    Ok(Verdict::Unchecked {
        detail: "no known answer for this grid and iteration count; pass --verify to \
                 check against the reference kernel"
            .into(),
    })
}

/// The verdict on a rehearsal of `warmup` iterations that gave `got`, when
/// an answer is stored for it (`None` otherwise).
pub fn check_rehearsal(grid: &Grid, warmup: u64, got: &Answer) -> Option<Verdict> {
    let want = known_answer(grid, warmup)?;
    Some(compare(got, &want, Basis::Rehearsal))
}

/// The verdict of a run of `iterations` timed iterations whose rehearsal
/// passed `rehearsal` (see [`check_rehearsal`]) and which has no check of
/// its own: VALID, saying how. `restarted` is, for a restarted run, the
/// iteration of the checkpoint it took up and the answer that
/// checkpoint's state gives: a restart continues from whatever the
/// checkpoint holds (a fault in an earlier segment carries into it), so
/// that state is checked too, against the stored answer for its iteration
/// or a reference run when one is affordable ([`reference_affordable`]);
/// a state that differs fails the verdict, and one that cannot be checked
/// leaves the run not checked, saying so.
pub fn after_rehearsal(
    rehearsal: Verdict,
    iterations: u64,
    restarted: Option<(u64, Answer)>,
    grid: &Grid,
    stop: &StopFlag,
) -> Result<Verdict> {
    let said = |from: String| {
        let detail = format!(
            "the rehearsal from the initial state matched the stored known answer ({}); the \
             {iterations} timed iterations ran the same kernel and halo exchange {from}",
            rehearsal.detail()
        );
        rehearsal.clone().with_detail(detail)
    };
    let Some((at, state)) = restarted else {
        return Ok(said("from the same initial state".to_string()));
    };
    let want = match known_answer(grid, at) {
        Some(want) => Some((want, "the stored known answer")),
        None if reference_affordable(grid, at) => {
            tracing::info!(
                at,
                "checking the restart's checkpoint against the reference"
            );
            match reference_run(grid, at, stop)? {
                Some(want) => Some((want, "a reference run")),
                None => {
                    return Ok(Verdict::Interrupted {
                        detail: "a stop signal ended the reference run before it could check \
                                 the checkpoint this run restarted from"
                            .into(),
                    });
                }
            }
        }
        None => None,
    };
    let Some((want, source)) = want else {
        return Ok(Verdict::Unchecked {
            detail: format!(
                "not checked: restarted from a checkpoint that could not be checked against a \
                 known answer (iteration {at} of grid {grid}: no stored answer, and a \
                 reference run of it is beyond {CHECK_MAX_POINTS} points or \
                 {CHECK_MAX_WORK} point-iterations); pass --verify to check the whole run"
            ),
        });
    };
    let check = compare(&state, &want, Basis::Reference);
    if check.verified() == Some(false) {
        return Ok(Verdict::Failed {
            against: Basis::Reference,
            detail: format!(
                "the checkpoint of iteration {at} this run restarted from does not hold the \
                 state {source} gives: {}",
                check.detail()
            ),
        });
    }
    Ok(said(format!(
        "from the checkpoint of iteration {at}, whose state matched {source} ({})",
        check.detail()
    )))
}

/// Fails with a verification error when gosa is not a finite number.
pub fn check_finite(gosa: f64, iteration: u64) -> Result<()> {
    if gosa.is_finite() {
        Ok(())
    } else {
        Err(Error::Verification(format!(
            "gosa is {gosa} at iteration {iteration}: the field has diverged or holds NaN/Inf"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_changes_with_any_bit() {
        let g = Grid::new([5, 6, 7]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [1, 1, 1] }, 0);
        let f = Fields::initial(&g, &b).unwrap();
        let base = fingerprint(&g, &b, &f.p);
        let mut p = f.p.clone();
        p[[2, 3, 4]] = f32::from_bits(p[[2, 3, 4]].to_bits() ^ 1);
        assert_ne!(fingerprint(&g, &b, &p), base);
        let mut q = f.p.clone();
        q[[0, 0, 0]] = 42.0;
        assert_eq!(
            fingerprint(&g, &b, &q),
            base,
            "boundary points are not owned"
        );
    }

    #[test]
    fn compare_needs_both_fingerprint_and_gosa() {
        let a = Answer {
            gosa: 1.0,
            p_fingerprint: 7,
        };
        assert_eq!(compare(&a, &a, Basis::Reference).verified(), Some(true));
        let b = Answer {
            gosa: 1.0 + 1e-7,
            ..a
        };
        assert_eq!(compare(&b, &a, Basis::Reference).verified(), Some(false));
        let c = Answer {
            p_fingerprint: 8,
            ..a
        };
        assert_eq!(compare(&c, &a, Basis::Reference).verified(), Some(false));
    }

    #[test]
    fn a_raised_stop_ends_the_reference_run() {
        let g = Grid::new([6, 7, 8]).unwrap();
        let stop = StopFlag::never();
        assert!(reference_run(&g, 2, &stop).unwrap().is_some());
        stop.raise();
        assert_eq!(reference_run(&g, 2, &stop).unwrap(), None);
        let got = Answer {
            gosa: 1.0,
            p_fingerprint: 1,
        };
        let v = verdict_of(&g, 2, &got, true, &stop).unwrap();
        assert_eq!(v.verified(), None);
        assert!(v.interrupted(), "{v:?}");
    }

    #[test]
    fn a_restart_from_a_checkpoint_too_large_to_check_is_not_checked() {
        let rehearsal = Verdict::Passed {
            against: Basis::Rehearsal,
            detail: "ok".into(),
        };
        let state = Answer {
            gosa: 1.0,
            p_fingerprint: 1,
        };
        // Far beyond a reference run made unasked: nothing is allocated.
        let big = Grid {
            n: [4096, 4096, 4096],
        };
        assert!(!reference_affordable(&big, 1));
        let v = after_rehearsal(
            rehearsal.clone(),
            20,
            Some((10, state)),
            &big,
            &StopFlag::never(),
        )
        .unwrap();
        assert_eq!(v.verified(), None, "{v:?}");
        assert!(
            v.detail()
                .starts_with("not checked: restarted from a checkpoint"),
            "{v:?}"
        );
        // A small grid is checked, and a state that is not the reference's
        // fails.
        let small = Grid::new([6, 7, 8]).unwrap();
        let v =
            after_rehearsal(rehearsal, 20, Some((3, state)), &small, &StopFlag::never()).unwrap();
        assert_eq!(v.verified(), Some(false), "{v:?}");
    }

    #[test]
    fn a_checkpoints_values_fingerprint_as_its_field() {
        let g = Grid::new([7, 6, 9]).unwrap();
        let b = Block::of(&g, &ProcGrid { p: [2, 1, 2] }, 3);
        let f = Fields::initial(&g, &b).unwrap();
        let mut values = Vec::new();
        for li in b.owned(0) {
            for lj in b.owned(1) {
                for lk in b.owned(2) {
                    values.push(f.p[[li, lj, lk]]);
                }
            }
        }
        assert_eq!(
            fingerprint_of_values(&g, &b, &values),
            fingerprint(&g, &b, &f.p)
        );
    }

    #[test]
    fn nan_gosa_is_a_verification_error() {
        assert!(check_finite(1.0, 3).is_ok());
        assert!(matches!(
            check_finite(f64::NAN, 3),
            Err(Error::Verification(m)) if m.contains("iteration 3")
        ));
    }
}
