//! The statistics of `himeno report --compare`, over one label's values
//! in round order (`None` where a round has none): the best, median and
//! worst, and the per-round ratios of two labels.
//!
//! The best is the summary a shared machine allows (other work only ever
//! slows a run down, so the best run is the least disturbed); the median
//! of per-round ratios is the one a drifting machine allows (two runs of
//! one round, seconds apart, share the machine's state, while the best
//! runs of two labels may come from different states).

use serde::{Deserialize, Serialize};

/// Which way a measurement is better.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Rates: MFLOPS, GB/s.
    #[default]
    Higher,
    /// Times: seconds, latencies.
    Lower,
}

pub use crate::timing::median;

/// The best of `values` the way `better` says; `None` for none.
pub fn best(values: &[f64], better: Better) -> Option<f64> {
    let pick = match better {
        Better::Higher => f64::max,
        Better::Lower => f64::min,
    };
    values.iter().copied().reduce(pick)
}

/// The worst of `values` the way `better` says; `None` for none.
pub fn worst(values: &[f64], better: Better) -> Option<f64> {
    let flipped = match better {
        Better::Higher => Better::Lower,
        Better::Lower => Better::Higher,
    };
    best(values, flipped)
}

/// The per-round ratios of two labels' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// `a / b` of every round both have, in round order.
    pub ratios: Vec<f64>,
    /// The rounds (1-based) one of them lacks.
    pub missing: Vec<usize>,
}

/// Pairs `a` and `b` round by round (a round past the end of one of them
/// is missing from it).
pub fn paired(a: &[Option<f64>], b: &[Option<f64>]) -> Paired {
    let rounds = a.len().max(b.len());
    let mut out = Paired {
        ratios: Vec::new(),
        missing: Vec::new(),
    };
    for r in 0..rounds {
        match (a.get(r).copied().flatten(), b.get(r).copied().flatten()) {
            (Some(x), Some(y)) => out.ratios.push(x / y),
            _ => out.missing.push(r + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_one_of_an_even_the_mean_of_two() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0]), Some(4.0));
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&[9.0, 1.0, 5.0, 2.0]), Some(3.5));
        assert_eq!(median(&[2.0, 2.0]), Some(2.0));
    }

    #[test]
    fn best_and_worst_follow_the_direction() {
        let v = [3.0, 1.0, 2.0];
        assert_eq!(best(&v, Better::Higher), Some(3.0));
        assert_eq!(best(&v, Better::Lower), Some(1.0));
        assert_eq!(worst(&v, Better::Higher), Some(1.0));
        assert_eq!(worst(&v, Better::Lower), Some(3.0));
        assert_eq!(best(&[], Better::Higher), None);
    }

    #[test]
    fn a_round_one_label_lacks_is_missing_not_paired() {
        let a = [Some(2.0), None, Some(9.0), Some(4.0)];
        let b = [Some(1.0), Some(5.0), Some(3.0)];
        let p = paired(&a, &b);
        assert_eq!(p.ratios, [2.0, 3.0]);
        assert_eq!(p.missing, [2, 4]);
        assert_eq!(median(&p.ratios), Some(2.5));
        let none = paired(&[None], &[Some(1.0)]);
        assert!(none.ratios.is_empty());
        assert_eq!(median(&none.ratios), None);
    }
}
