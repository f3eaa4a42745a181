//! `himeno report --compare`: the benchmark scripts' statistics, once.
//!
//! A **label** names one thing measured the same way in every round: a
//! run's `--label` (e.g. `M/on` for size M traced), a stream report's
//! `stream/triad`, a C peer's `peer-imb/8`. A **round** is one input
//! file: the scripts run every label once per round, interleaved, so
//! that a round's values share the machine's state of the moment. Per
//! label the table gives the best, median and worst over the rounds (and
//! the spread, worst against best: the machine's own noise), for run
//! records also whether every answer passed and what each round chose;
//! per `--ratio A:B` the ratio of the best values and the median of the
//! per-round ratios, with the rounds one of them lacks.
//!
//! - [`input`]: reading the rounds through the documents' own types;
//! - [`stats`]: best, median, worst and paired ratios.

pub mod input;
pub mod stats;

use crate::error::{Error, Result};
use crate::output::Format;
use input::{Metric, Rounds};
use serde::{Deserialize, Serialize};
use stats::Better;
use std::fmt::Write;
use std::path::PathBuf;

/// What `--compare` was asked.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The round files, in round order.
    pub files: Vec<PathBuf>,
    /// The value run records give.
    pub metric: Metric,
    /// `A:B` ratios asked for.
    pub ratios: Vec<String>,
    /// Labels to show (empty: all).
    pub only: Vec<String>,
    /// Text or JSON.
    pub format: Format,
}

/// One label's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelRow {
    /// The label.
    pub label: String,
    /// Which way its values are better.
    pub better: Better,
    /// Its value in each round (`null` where it has none).
    pub values: Vec<Option<f64>>,
    /// The best value.
    pub best: f64,
    /// The median value.
    pub median: f64,
    /// The worst value.
    pub worst: f64,
    /// `|best - worst| / best`, in percent.
    pub spread_pct: f64,
    /// For run records, how their answers were checked; absent for other
    /// values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Answers>,
    /// For run records: what each round chose, where it chose something.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chosen: Vec<String>,
}

/// How a label's run records were checked, over its rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answers {
    /// Every round's answer passed its check.
    Passed,
    /// Some round's answer failed.
    Failed,
    /// None failed, but some were not checked.
    Unchecked,
}

impl Answers {
    /// The word the table shows.
    fn word(self) -> &'static str {
        match self {
            Answers::Passed => "passed",
            Answers::Failed => "FAILED",
            Answers::Unchecked => "unchecked",
        }
    }
}

/// One ratio's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioRow {
    /// The numerator's label.
    pub numerator: String,
    /// The denominator's label.
    pub denominator: String,
    /// The numerator's best over the denominator's best.
    pub best_ratio: f64,
    /// The median of the per-round ratios (`null`: no round has both).
    pub median_ratio: Option<f64>,
    /// The rounds that paired.
    pub paired_rounds: usize,
    /// The rounds (1-based) one of them lacks.
    pub missing_rounds: Vec<usize>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The run records' value (the record field's name).
    pub metric: String,
    /// Number of rounds.
    pub rounds: usize,
    /// Per label, in order of first appearance.
    pub labels: Vec<LabelRow>,
    /// Per ratio asked.
    pub ratios: Vec<RatioRow>,
}

/// Runs `himeno report --compare`: the text or JSON to print.
pub fn run(ask: &Ask) -> Result<String> {
    if ask.format == Format::Csv {
        return Err(Error::usage(
            "report --compare prints text or JSON: use --format text or json",
        ));
    }
    let ratios = ask
        .ratios
        .iter()
        .map(|r| split_ratio(r))
        .collect::<Result<Vec<_>>>()?;
    let rounds = input::read(&ask.files, ask.metric)?;
    let c = compare(&rounds, ask.metric, &ratios, &ask.only)?;
    match ask.format {
        Format::Json => crate::output::json(&c),
        _ => Ok(text(&c)),
    }
}

/// `A:B` as its two labels.
fn split_ratio(r: &str) -> Result<(String, String)> {
    match r.split_once(':') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
        _ => Err(Error::usage(format!(
            "--ratio '{r}' is not NUMERATOR:DENOMINATOR (two labels)"
        ))),
    }
}

/// The comparison of `rounds`: rows for every label (or those of
/// `only`), and the `ratios`.
pub fn compare(
    rounds: &Rounds,
    metric: Metric,
    ratios: &[(String, String)],
    only: &[String],
) -> Result<Comparison> {
    let known = |l: &str| -> Result<()> {
        if rounds.values.contains_key(l) {
            Ok(())
        } else {
            Err(Error::usage(format!(
                "report --compare: no value is labelled '{l}' in {} round file(s)",
                rounds.count
            )))
        }
    };
    for l in only.iter().chain(ratios.iter().flat_map(|(a, b)| [a, b])) {
        known(l)?;
    }
    let labels = rounds
        .labels
        .iter()
        .filter(|l| only.is_empty() || only.contains(l))
        .map(|l| label_row(l, &rounds.values[l]))
        .collect::<Result<Vec<_>>>()?;
    let numbers = |l: &str| -> Vec<Option<f64>> {
        rounds.values[l]
            .iter()
            .map(|v| v.as_ref().map(|v| v.value))
            .collect()
    };
    let ratios = ratios
        .iter()
        .map(|(a, b)| {
            let (x, y) = (numbers(a), numbers(b));
            let p = stats::paired(&x, &y);
            let best = |v: &[Option<f64>], l: &str| {
                let better = rounds.values[l].iter().flatten().next().map(|v| v.better);
                stats::best(
                    &v.iter().flatten().copied().collect::<Vec<_>>(),
                    better.unwrap_or_default(),
                )
                .unwrap_or(f64::NAN)
            };
            RatioRow {
                numerator: a.clone(),
                denominator: b.clone(),
                best_ratio: best(&x, a) / best(&y, b),
                median_ratio: stats::median(&p.ratios),
                paired_rounds: p.ratios.len(),
                missing_rounds: p.missing,
            }
        })
        .collect();
    Ok(Comparison {
        metric: metric.name().to_string(),
        rounds: rounds.count,
        labels,
        ratios,
    })
}

/// The row of `label` with its values `slots`.
fn label_row(label: &str, slots: &[Option<input::Value>]) -> Result<LabelRow> {
    let present: Vec<&input::Value> = slots.iter().flatten().collect();
    let better = present[0].better;
    if present.iter().any(|v| v.better != better) {
        return Err(Error::usage(format!(
            "report --compare: label '{label}' is better higher in some rounds and lower in \
             others: one label, one kind of value"
        )));
    }
    let numbers: Vec<f64> = present.iter().map(|v| v.value).collect();
    // At least one value: a label exists because a round gave it one.
    let best = stats::best(&numbers, better).unwrap_or(f64::NAN);
    let worst = stats::worst(&numbers, better).unwrap_or(f64::NAN);
    let runs: Vec<Option<bool>> = present.iter().filter_map(|v| v.verified).collect();
    let answers = (!runs.is_empty()).then(|| {
        if runs.contains(&Some(false)) {
            Answers::Failed
        } else if runs.iter().all(|v| *v == Some(true)) {
            Answers::Passed
        } else {
            Answers::Unchecked
        }
    });
    Ok(LabelRow {
        label: label.to_string(),
        better,
        values: slots.iter().map(|v| v.as_ref().map(|v| v.value)).collect(),
        best,
        median: stats::median(&numbers).unwrap_or(f64::NAN),
        worst,
        spread_pct: 100.0 * (best - worst).abs() / best,
        answers,
        chosen: present
            .iter()
            .filter(|v| !v.chosen.is_empty())
            .map(|v| v.chosen.clone())
            .collect(),
    })
}

/// A number as the table shows it: four significant places or more
/// (tiny values, a short run's seconds, in exponent form).
fn num(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 1000.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else if x.abs() >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.3e}")
    }
}

/// The comparison as two tables.
pub fn text(c: &Comparison) -> String {
    let mut s = String::new();
    let width = c
        .labels
        .iter()
        .map(|r| r.label.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    let _ = writeln!(
        s,
        "{:<width$} {:>6} {:>12} {:>12} {:>12} {:>8} {:>6} {:>9}  chosen",
        "label", "rounds", "best", "median", "worst", "spread", "better", "answers"
    );
    for r in &c.labels {
        let valid = r.answers.map_or("-", Answers::word);
        let chosen = if r.chosen.is_empty() {
            "-".to_string()
        } else {
            r.chosen.join(",")
        };
        let _ = writeln!(
            s,
            "{:<width$} {:>6} {:>12} {:>12} {:>12} {:>7.1}% {:>6} {:>9}  {chosen}",
            r.label,
            r.values.iter().flatten().count(),
            num(r.best),
            num(r.median),
            num(r.worst),
            r.spread_pct,
            match r.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            },
            valid,
        );
    }
    if !c.ratios.is_empty() {
        let names: Vec<String> = c
            .ratios
            .iter()
            .map(|r| format!("{} / {}", r.numerator, r.denominator))
            .collect();
        let w = names.iter().map(String::len).chain([5]).max().unwrap_or(5);
        let _ = writeln!(
            s,
            "{:<w$} {:>6} {:>12} {:>12}  missing",
            "ratio", "paired", "best/best", "median"
        );
        for (r, name) in c.ratios.iter().zip(&names) {
            let missing = if r.missing_rounds.is_empty() {
                "-".to_string()
            } else {
                let m: Vec<String> = r.missing_rounds.iter().map(|m| m.to_string()).collect();
                format!("round {}", m.join(","))
            };
            let _ = writeln!(
                s,
                "{name:<w$} {:>6} {:>12.4} {:>12}  {missing}",
                r.paired_rounds,
                r.best_ratio,
                r.median_ratio.map_or("-".into(), |m| format!("{m:.4}")),
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::input::Value;
    use super::*;

    fn v(x: f64) -> Option<Value> {
        Some(Value {
            value: x,
            better: Better::Higher,
            verified: None,
            chosen: String::new(),
        })
    }

    fn rounds(pairs: &[(&str, Vec<Option<Value>>)]) -> Rounds {
        Rounds {
            labels: pairs.iter().map(|(l, _)| l.to_string()).collect(),
            values: pairs
                .iter()
                .map(|(l, v)| (l.to_string(), v.clone()))
                .collect(),
            count: pairs.iter().map(|(_, v)| v.len()).max().unwrap_or(0),
        }
    }

    #[test]
    fn a_ratio_pairs_the_rounds_both_have() {
        let r = rounds(&[
            ("a", vec![v(4.0), None, v(6.0)]),
            ("b", vec![v(2.0), v(3.0), v(2.0)]),
        ]);
        let c = compare(&r, Metric::Mflops, &[("a".into(), "b".into())], &[]).unwrap();
        assert_eq!(c.labels[0].best, 6.0);
        assert_eq!(c.labels[0].median, 5.0);
        assert_eq!(c.labels[0].worst, 4.0);
        assert_eq!(c.labels[1].median, 2.0);
        let ratio = &c.ratios[0];
        assert_eq!(ratio.best_ratio, 2.0);
        assert_eq!(ratio.median_ratio, Some(2.5));
        assert_eq!(ratio.paired_rounds, 2);
        assert_eq!(ratio.missing_rounds, [2]);
        let t = text(&c);
        assert!(t.contains("a / b"), "{t}");
        assert_eq!(
            [num(1234.56), num(12.3456), num(0.25), num(3.25e-5)],
            ["1234.6", "12.346", "0.2500", "3.250e-5"]
        );
        assert!(t.contains("round 2"), "{t}");
    }

    #[test]
    fn an_unknown_label_or_a_bad_ratio_is_a_usage_error() {
        let r = rounds(&[("a", vec![v(1.0)])]);
        let e = compare(&r, Metric::Mflops, &[("a".into(), "z".into())], &[]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().contains("'z'"), "{}", e.message());
        let e = compare(&r, Metric::Mflops, &[], &["q".into()]).unwrap_err();
        assert!(e.message().contains("'q'"), "{}", e.message());
        for bad in ["a", "a:", ":b", ""] {
            assert_eq!(split_ratio(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
        assert_eq!(
            split_ratio("M/on:M/off").unwrap(),
            ("M/on".into(), "M/off".into())
        );
    }
}
