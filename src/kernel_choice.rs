//! `--prefetch auto` and `--stores auto`'s choice between the kernels a
//! backend offers for its sweep ([`Backend::kernel_variants`]): the CPU
//! classic sweep with or without software prefetch, and with streaming or
//! cached stores, once its fields are too large for the cache to settle it;
//! the temporal wavefront's tile height, unless `--tile-rows` gives one.
//!
//! Which one is faster from memory is a property of the machine and of the
//! threads sharing it, not of the sizes: on one Zen 5 guest no prefetch ran
//! 1.05-1.49x faster at size L on all cores and 0.8-0.9x at M, on a Zen 4
//! guest 0.63-0.88x at both, on a Zen 2 guest it won about two rounds in
//! three; streaming stores won at M and L where they were introduced and
//! ran 0.85-1.0x cached stores at M on a Zen 3 guest, while winning some
//! rounds at L (notes/cpu-perf.md). Between two runs of one binary the rate
//! varies by up to 1.9x (the pages a run gets, the host's other guests),
//! more than the effect, so no rule on sizes holds and no timing across
//! runs decides it. Within one run the kernels sweep the same pages: the
//! run times one sweep of each in turn, over several rounds, before the
//! rehearsal, and keeps the fastest, the starting kernel unless another is
//! clearly faster. Every rank takes the same kernel: the offer must be the
//! same on every rank, and the times are the slowest rank's.
//!
//! [`Backend::kernel_variants`]: crate::backend::Backend::kernel_variants

use crate::backend::kernel_variant::KernelVariant;
use crate::calibrate::{self, Built, MARGIN, Rounds, Run};
use crate::comm;
use crate::error::Result;
use serde::{Deserialize, Serialize};

/// How long the kernels are timed: 3 to 12 rounds of one sweep each, the
/// order reversed every other round, ending after 1 s once it has 3 (the
/// best of three absorbs a sweep slowed by a neighbour).
const ROUNDS: Rounds = Rounds {
    min: 3,
    max: 12,
    seconds: 1.0,
    alternate: true,
    keep_within: f64::INFINITY,
    untimed: VARIANT_SLOWDOWN,
};

/// How much slower per sweep than the first kernel another not yet timed
/// is assumed to run when its first turn is weighed against the budget:
/// the widest gap measured between two kernels of one sweep (no prefetch
/// at 0.63x prefetch, tiles of 32 rows at 0.6x tiles of 4 to 12, and 0.6x
/// of 8 at T = 16 on two threads; notes/cpu-perf.md), not the temporal
/// calibration's 4x. With 4x, a block of T = 8 at size L, 0.65 s on one
/// thread of a Zen 4 guest, left a 2 s budget no room for a second tile
/// height, and the run kept the slowest one.
pub const VARIANT_SLOWDOWN: f64 = 1.75;

/// The kernel a run swept with and why, as the record states it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelChoice {
    /// The kernel (written as its name: `prefetch`, `no prefetch, cached
    /// stores`, ...: what the offer varied).
    pub chosen: KernelVariant,
    /// Why, in one sentence.
    pub reason: String,
    /// Each kernel's seconds per sweep: the slowest rank's best round.
    pub trials: Vec<KernelTrial>,
}

/// One kernel's calibration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelTrial {
    /// The kernel.
    pub kernel: KernelVariant,
    /// Seconds per sweep: the best round's, on the slowest rank.
    pub sweep_s: f64,
    /// The median of its rounds' seconds per sweep (absent in records
    /// written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_s: Option<f64>,
    /// Where the calibration swept a sample of each block, how many times
    /// the sample's updates the whole block's are (as a temporal trial's
    /// `sample_scale`). Absent where the whole block was swept, and in
    /// older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_scale: Option<f64>,
}

/// Times the kernels the backend of `built` offers, when every rank offers
/// the same two or more, and leaves the fastest in use with the fields in
/// their initial state; `None` when there was nothing to choose.
/// Collective.
pub fn settle(run: Run<'_>, built: &mut Built) -> Result<Option<KernelChoice>> {
    let mine = built.backend.kernel_variants();
    // Ranks whose fields lie on either side of the cache threshold offer
    // differently; they keep their own starting kernels.
    let offer = comm::decide(run.comm, "the kernel variants", &mine, |all| {
        Ok(if all.iter().all(|v| *v == all[0]) {
            all[0].clone()
        } else {
            Vec::new()
        })
    })?;
    if offer.len() < 2 {
        return Ok(None);
    }
    let sweeps = vec![built.block.depth; offer.len()];
    let calibrated = calibrate::turns_per_sweep(
        &mut built.solver(run),
        &sweeps,
        ROUNDS,
        run.budget,
        |s, k| s.backend.use_kernel_variant(k),
    )?;
    let best = calibrated.as_ref().map(|c| calibrate::bests(&c.turns));
    let (chosen, reason) = match &best {
        None => (0, "a stop signal came during the calibration".to_string()),
        Some(best) if !calibrate::any_other_timed(best) => (
            0,
            format!(
                "{} untimed: a sweep of another kernel would take longer than the calibration \
                 may (at most {:.2} s, with the temporal one)",
                offer[0],
                run.budget.seconds(best[0])
            ),
        ),
        Some(best) => choose(&offer, best),
    };
    built.backend.use_kernel_variant(chosen)?;
    built.backend.reset()?;
    // Kernels the budget left untimed are no trials.
    let trials = calibrated
        .iter()
        .flat_map(calibrate::Timed::timed)
        .map(|(k, t, sample_scale)| KernelTrial {
            kernel: offer[k],
            sweep_s: calibrate::best_of(t),
            median_s: Some(calibrate::median_of(t)),
            sample_scale,
        })
        .collect::<Vec<_>>();
    tracing::info!(chosen = %offer[chosen], ?trials, "kernel auto");
    Ok(Some(KernelChoice {
        chosen: offer[chosen],
        reason,
        trials,
    }))
}

/// The kernel of `names` to run by their seconds per sweep `best`: the
/// first unless another is more than [`MARGIN`] faster; with the reason in
/// words.
fn choose(names: &[KernelVariant], best: &[f64]) -> (usize, String) {
    let start = best[0];
    let (fastest, taken) = calibrate::clear_winner(best);
    let time = best[fastest];
    let ms = |s: f64| s * 1e3;
    if taken {
        let why = format!(
            "{} calibrated fastest: {:.3} ms per sweep against {:.3} with {} ({:.2}x)",
            names[fastest],
            ms(time),
            ms(start),
            names[0],
            start / time
        );
        (fastest, why)
    } else {
        let why = format!(
            "{} calibrated: {} took {:.3} ms per sweep against {:.3}, not {:.0}% less",
            names[0],
            names[fastest],
            ms(time),
            ms(start),
            MARGIN * 100.0
        );
        (0, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_kernel_must_be_clearly_faster() {
        let names = [
            KernelVariant::Classic {
                prefetch: Some(true),
                streaming: None,
            },
            KernelVariant::Classic {
                prefetch: Some(false),
                streaming: None,
            },
        ];
        let (k, why) = choose(&names, &[1.0, 0.9]);
        assert_eq!(k, 1);
        assert!(why.starts_with("no prefetch calibrated fastest"), "{why}");
        assert!(why.contains("(1.11x)"), "{why}");
        // 2 % faster is within the margin: the starting kernel.
        let (k, why) = choose(&names, &[1.0, 0.98]);
        assert_eq!(k, 0);
        assert!(
            why.starts_with("prefetch calibrated: no prefetch took"),
            "{why}"
        );
        assert_eq!(choose(&names, &[1.0, 1.3]).0, 0);
    }
}
