//! Collective agreement before any work: every rank validates its own
//! options and environment, then all ranks compare what they resolved.
//!
//! Ranks can disagree: an MPMD launch (`mpirun -np 1 himeno --iterations 5
//! : -np 1 himeno --iterations 0`), a job script that passes a rank its own
//! arguments, a node with fewer CPUs than `--threads` allows, a results
//! file only rank 0 checks. A rank that refused its options and left alone
//! used to leave the others waiting in their first collective for ever.
//! Now each rank sends rank 0 either its error or a hash per resolved term
//! (grid, length, format, ...); rank 0 decides for all and broadcasts the
//! decision, so either every rank goes on or every rank stops with exit 2
//! and rank 0 tells one line naming the rank and the problem.
//!
//! Terms that may legitimately differ between ranks (threads, a GPU
//! ordinal) are left out by the caller.

use super::api::Comm;
use super::decide::decide;
use crate::error::{Error, Result};
use crate::hash::fnv1a;
use serde::{Deserialize, Serialize};

/// What a rank resolved that every rank must share: (name, value) pairs.
pub type Terms = Vec<(&'static str, String)>;

/// Agrees on `local` (this rank's validated configuration or its error)
/// across all ranks of `comm`: returns it on every rank when every rank
/// validated and all `terms` match rank 0's; otherwise an error on every
/// rank, whose message (rank 0's) names the first rank that refused or
/// differs. Collective: the first thing every command that communicates
/// does.
pub fn agree<T>(comm: &dyn Comm, local: Result<T>, terms: impl Fn(&T) -> Terms) -> Result<T> {
    // Rank 0 prints the report: a standard output closed at start refuses
    // the run here, where every rank hears of it.
    let local = match crate::output::check_stdout_open() {
        Err(e) if comm.rank() == 0 && local.is_ok() => Err(e),
        _ => local,
    };
    let own = local.as_ref().ok().map(&terms);
    let position = match (&local, &own) {
        (Err(e), _) => Position::Refused(e.clone()),
        (Ok(_), Some(t)) => Position::Resolved(
            t.iter()
                .map(|(name, value)| (name.to_string(), fnv1a(value)))
                .collect(),
        ),
        (Ok(_), None) => unreachable!("terms exist for a validated configuration"),
    };
    decide(comm, "the options", &position, |all| {
        decide_agreement(&all, own.as_ref())
    })?;
    local
}

/// One rank's position: its error (kind and message), or a hash per term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Position {
    Refused(Error),
    Resolved(Vec<(String, u64)>),
}

/// Rank 0's decision from every rank's position and its own terms (for
/// naming the value that differs).
fn decide_agreement(all: &[Position], own: Option<&Terms>) -> Result<()> {
    let n = all.len();
    let refused: Vec<(usize, &Error)> = all
        .iter()
        .enumerate()
        .filter_map(|(r, p)| match p {
            Position::Refused(e) => Some((r, e)),
            Position::Resolved(_) => None,
        })
        .collect();
    if let Some(&(first, e)) = refused.first() {
        // Every rank refused alike: the error is the same one a single rank
        // gives, without a rank number.
        if refused.len() == n && refused.iter().all(|(_, x)| *x == e) {
            return Err(e.clone());
        }
        let others = n - refused.len();
        return Err(Error::usage(format!(
            "rank {first} of {n}: {}{}",
            e.message(),
            if others > 0 {
                format!(
                    " ({others} other rank(s) accepted theirs: start every rank with the \
                     same options on alike nodes)"
                )
            } else {
                String::new()
            }
        )));
    }
    let Some(Position::Resolved(base)) = all.first() else {
        return Err(Error::usage("rank 0's options could not be compared"));
    };
    for (r, p) in all.iter().enumerate().skip(1) {
        let Position::Resolved(terms) = p else {
            unreachable!("no rank refused (checked above)");
        };
        if terms == base {
            continue;
        }
        let name = base
            .iter()
            .zip(terms.iter())
            .find(|(a, b)| a != b)
            .map(|(a, _)| a.0.clone())
            .unwrap_or_else(|| "command".to_string());
        let value = own
            .and_then(|t| t.iter().find(|(k, _)| *k == name))
            .map(|(_, v)| shorten(v))
            .unwrap_or_default();
        return Err(Error::usage(format!(
            "the ranks disagree: rank {r} resolved a different {name} from rank 0's \
             ({value}): start every rank with the same command and options"
        )));
    }
    Ok(())
}

/// `v` cut to 80 characters for a message.
fn shorten(v: &str) -> String {
    if v.chars().count() <= 80 {
        v.to_string()
    } else {
        let mut s: String = v.chars().take(79).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::single::SingleComm;

    fn terms(iterations: &str) -> Terms {
        vec![
            ("command", "run".into()),
            ("grid", "9x9x9".into()),
            ("length", iterations.into()),
        ]
    }

    fn resolved(t: &Terms) -> Position {
        Position::Resolved(t.iter().map(|(n, v)| (n.to_string(), fnv1a(v))).collect())
    }

    #[test]
    fn positions_round_trip() {
        for p in [
            resolved(&terms("5")),
            Position::Refused(Error::usage("bad\ttab")),
        ] {
            let back: Position = serde_json::from_slice(&serde_json::to_vec(&p).unwrap()).unwrap();
            assert_eq!(back, p);
        }
    }

    #[test]
    fn agreement_and_its_three_failures() {
        let t5 = terms("5");
        let ok = resolved(&t5);
        assert!(decide_agreement(&[ok.clone(), ok.clone()], Some(&t5)).is_ok());
        // One rank refused.
        let bad = Position::Refused(Error::usage("--iterations must be at least 1"));
        let e = decide_agreement(&[ok.clone(), bad.clone()], Some(&t5)).unwrap_err();
        assert!(
            e.message()
                .starts_with("rank 1 of 2: --iterations must be at least 1")
                && e.message().contains("1 other rank(s) accepted"),
            "{e}"
        );
        // Every rank refused alike: the plain error.
        let e = decide_agreement(&[bad.clone(), bad], None).unwrap_err();
        assert_eq!(e, Error::usage("--iterations must be at least 1"));
        // All resolved, one differently.
        let e = decide_agreement(&[ok, resolved(&terms("7"))], Some(&t5)).unwrap_err();
        assert!(
            e.message().contains("rank 1 resolved a different length")
                && e.message().contains("(5)"),
            "{e}"
        );
    }

    #[test]
    fn a_single_rank_keeps_its_own_error() {
        let e = agree::<()>(&SingleComm, Err(Error::runtime("x")), |_| Vec::new()).unwrap_err();
        assert_eq!(e, Error::runtime("x"));
        assert_eq!(agree(&SingleComm, Ok(3), |_| terms("5")).unwrap(), 3);
    }
}
