//! Failure injection, a hook for the robustness tests only.
//!
//! `HIMENO_FAULT=RANK:ITERATION:KIND` makes rank `RANK` misbehave just
//! before timed iteration `ITERATION` (counted from 1), before rehearsal
//! iteration N when `ITERATION` is `rN` (`0:r2:perturb`), or at the start,
//! before the ranks agree on the run, when it is `start` (`1:start:hang`:
//! panic, error or hang only, there being no field yet). It is read once per
//! run, is not a command-line option and is not meant for users: the tests
//! use it to prove that one failing rank never hangs a job and that a wrong
//! answer is never reported as valid. Kinds:
//!
//! - `panic`: the rank panics (the MPI panic hook must abort the job);
//! - `error`: the rank returns a runtime error (the driver must abort the job);
//! - `nan`: one ghost plane of the rank's `p` becomes NaN, so gosa is NaN at
//!   that iteration on every rank (the NaN guard must stop the run, exit 1);
//! - `perturb`: one ghost value of the rank's `p` is changed slightly, so the
//!   run finishes with finite but wrong numbers (verification must fail);
//! - `hang`: the rank sleeps for good, deaf to stop signals, as a rank stuck
//!   in the kernel or on a dead file system does (the other ranks then wait
//!   in their next collective; the stop watchdog must end the job);
//! - `term`: the rank sends itself SIGTERM, as a scheduler at a time limit
//!   does, at a known iteration (the run must stop after that block, write
//!   its checkpoint when it has a folder, and report).
//!
//! Ghost planes are written through the backend's own `unpack`, so the hook
//! works on every backend without a method of its own.

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::grid::decomp::Face;
use ndarray::Axis;

/// Name of the environment variable that holds the fault.
pub const VAR: &str = crate::environment::FAULT;

/// What the faulty rank does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Panic.
    Panic,
    /// Return a runtime error.
    Error,
    /// Poison a ghost plane of `p` with NaN.
    Nan,
    /// Change one ghost value of `p` slightly.
    Perturb,
    /// Sleep for good, ignoring stop signals.
    Hang,
    /// Send SIGTERM to this process.
    Term,
}

/// The loop a fault strikes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The untimed rehearsal (warm-up) iterations.
    Rehearsal,
    /// The timed iterations.
    Timed,
    /// Before the ranks agree on the run (`iteration` is 0).
    Start,
}

/// An injected fault: which rank, before which iteration of which loop,
/// what kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The rank that fails.
    pub rank: usize,
    /// The loop it fails in.
    pub stage: Stage,
    /// The iteration of that loop (from 1) before which it fails.
    pub iteration: u64,
    /// How it fails.
    pub action: Action,
}

impl Fault {
    /// Reads [`VAR`]; `Ok(None)` when it is unset or empty. Every rank sees
    /// the same environment, so a malformed value is a usage error on all.
    pub fn from_env() -> Result<Option<Fault>> {
        // Read as an OS string: a value that is not UTF-8 is malformed, not
        // absent.
        match crate::environment::get_os(VAR) {
            Some(s) if !s.to_string_lossy().trim().is_empty() => {
                Fault::parse(&s.to_string_lossy()).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Parses `RANK:ITERATION:KIND`.
    pub fn parse(s: &str) -> Result<Fault> {
        let bad = || {
            Error::usage(format!(
                "{VAR}='{s}' is not RANK:ITERATION:KIND (KIND panic, error, nan, \
                 perturb, hang or term; ITERATION from 1, rN for rehearsal iteration N, \
                 or start with panic, error, hang or term): fix or unset it"
            ))
        };
        let parts: Vec<&str> = s.trim().split(':').collect();
        let [rank, iteration, kind] = parts[..] else {
            return Err(bad());
        };
        let rank = rank.parse().map_err(|_| bad())?;
        let (stage, iteration) = match iteration.strip_prefix('r') {
            _ if iteration == "start" => (Stage::Start, "0"),
            Some(n) => (Stage::Rehearsal, n),
            None => (Stage::Timed, iteration),
        };
        let iteration = iteration.parse().map_err(|_| bad())?;
        if (iteration == 0) != (stage == Stage::Start) {
            return Err(bad());
        }
        let kind = match kind {
            "panic" => Action::Panic,
            "error" => Action::Error,
            "nan" => Action::Nan,
            "perturb" => Action::Perturb,
            "hang" => Action::Hang,
            "term" => Action::Term,
            _ => return Err(bad()),
        };
        if stage == Stage::Start && matches!(kind, Action::Nan | Action::Perturb) {
            return Err(bad());
        }
        Ok(Fault {
            rank,
            stage,
            iteration,
            action: kind,
        })
    }

    /// Strikes if this fault is meant for `rank` at the start, before the
    /// ranks agree on the run.
    pub fn at_start(&self, rank: usize) -> Result<()> {
        if rank != self.rank || self.stage != Stage::Start {
            return Ok(());
        }
        tracing::warn!(rank, action = ?self.action, "{VAR}: injecting a fault at the start");
        self.fail(rank, "the start")
    }

    /// Strikes if `rank` is about to run iteration `iteration` of `stage`
    /// and this fault is meant for it.
    pub fn before_iteration(
        &self,
        rank: usize,
        stage: Stage,
        iteration: u64,
        backend: &mut dyn Backend,
    ) -> Result<()> {
        if rank != self.rank || stage != self.stage || iteration != self.iteration {
            return Ok(());
        }
        tracing::warn!(rank, ?stage, iteration, action = ?self.action, "{VAR}: injecting a fault");
        let at = match stage {
            Stage::Rehearsal => format!("rehearsal iteration {iteration}"),
            Stage::Timed | Stage::Start => format!("iteration {iteration}"),
        };
        match self.action {
            Action::Nan => edit_low_i_ghost_plane(backend, |plane, _| plane.fill(f32::NAN)),
            // The centre of the plane is a face ghost, read through a
            // non-zero coefficient (c0); edge ghosts meet only b-terms,
            // which are zero and would hide the change.
            Action::Perturb => edit_low_i_ghost_plane(backend, |plane, [nj, nk]| {
                plane[(nj / 2) * nk + nk / 2] += 0.25;
            }),
            Action::Panic | Action::Error | Action::Hang | Action::Term => self.fail(rank, &at),
        }
    }

    /// Panics, errs, raises a stop signal or hangs on `rank` at `at`.
    fn fail(&self, rank: usize, at: &str) -> Result<()> {
        match self.action {
            Action::Panic => panic!("{VAR}: injected panic on rank {rank} at {at}"),
            Action::Error => Err(Error::runtime(format!(
                "{VAR}: injected error on rank {rank} at {at}"
            ))),
            Action::Term => {
                // Directed at this thread, so that the handler has run
                // (the stop flag is up) when `raise` returns.
                // SAFETY: raising a signal whose handler is installed.
                unsafe { libc::raise(libc::SIGTERM) };
                Ok(())
            }
            Action::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Action::Nan | Action::Perturb => unreachable!("parse refuses them at the start"),
        }
    }
}

/// Rewrites the low-i ghost plane of the current field `p` with `edit`,
/// which gets the plane (row-major, ghosts included) and its extents. The
/// backend's `unpack` writes into the new field, so the fields are swapped
/// around it; the next sweep then reads the edited plane.
fn edit_low_i_ghost_plane(
    backend: &mut dyn Backend,
    edit: impl FnOnce(&mut [f32], [usize; 2]),
) -> Result<()> {
    let face = Face { dim: 0, side: 0 };
    let field = backend.field()?;
    let dims = [field.dim().0, field.dim().1, field.dim().2];
    let mut plane: Vec<f32> = field
        .index_axis(Axis(face.dim), face.ghost_plane(dims))
        .iter()
        .copied()
        .collect();
    edit(&mut plane, [dims[1], dims[2]]);
    backend.swap();
    let written = backend.unpack(&[(face, &plane)]);
    backend.swap();
    written.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::{CpuBackend, CpuOptions};
    use crate::config::{Prefetch, Stores};
    use crate::grid::Grid;
    use crate::grid::decomp::{Block, ProcGrid};
    use crate::machine::threads::Bind;

    #[test]
    fn parses_the_documented_form_only() {
        assert_eq!(
            Fault::parse("3:7:nan").unwrap(),
            Fault {
                rank: 3,
                stage: Stage::Timed,
                iteration: 7,
                action: Action::Nan
            }
        );
        assert_eq!(
            Fault::parse("0:r2:perturb").unwrap().stage,
            Stage::Rehearsal
        );
        assert_eq!(
            Fault::parse("1:start:hang").unwrap(),
            Fault {
                rank: 1,
                stage: Stage::Start,
                iteration: 0,
                action: Action::Hang
            }
        );
        for bad in [
            "1:start:nan",
            "1:start:perturb",
            "1:r0:hang",
            "",
            "1:2",
            "1:2:3:4",
            "a:1:panic",
            "1:0:panic",
            "1:1:boom",
            "-1:1:error",
            "0:r0:nan",
            "0:rr1:nan",
            "0:r:nan",
        ] {
            assert!(
                matches!(Fault::parse(bad), Err(Error::Usage(_))),
                "{bad} accepted"
            );
        }
    }

    fn backend() -> (CpuBackend, Block) {
        let grid = Grid::new([6, 5, 7]).unwrap();
        let block = Block::of(&grid, &ProcGrid { p: [1, 1, 1] }, 0);
        let opts = CpuOptions {
            threads: 1,
            bind: Bind::None,
            stores: Stores::Auto,
            prefetch: Prefetch::Auto,
            tile_rows: None,
        };
        (
            CpuBackend::new(&grid, &block, &opts, [0, 1]).unwrap(),
            block,
        )
    }

    #[test]
    fn edits_reach_the_current_field_and_nothing_else() {
        let (mut cpu, _) = backend();
        let before = cpu.field().unwrap();
        edit_low_i_ghost_plane(&mut cpu, |plane, _| plane[3] = 42.0).unwrap();
        let after = cpu.field().unwrap();
        let changed: Vec<_> = before
            .indexed_iter()
            .filter(|(ix, v)| after[*ix].to_bits() != v.to_bits())
            .map(|(ix, _)| ix)
            .collect();
        // Plane i=0 of a 5x7 j-k plane, row-major: value 3 is (0, 0, 3).
        assert_eq!(changed, vec![(0, 0, 3)]);
        assert_eq!(after[[0, 0, 3]], 42.0);
    }

    #[test]
    fn other_ranks_and_iterations_are_untouched() {
        let (mut cpu, _) = backend();
        let f = Fault::parse("0:2:error").unwrap();
        assert!(f.before_iteration(1, Stage::Timed, 2, &mut cpu).is_ok());
        assert!(f.before_iteration(0, Stage::Timed, 1, &mut cpu).is_ok());
        assert!(f.before_iteration(0, Stage::Rehearsal, 2, &mut cpu).is_ok());
        assert!(matches!(
            f.before_iteration(0, Stage::Timed, 2, &mut cpu),
            Err(Error::Runtime(m)) if m.contains("rank 0 at iteration 2")
        ));
    }
}
