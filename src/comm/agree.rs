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
use crate::error::{Error, Result};
use std::fmt::Write;

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
    let mine = local.as_ref().map(&terms);
    let verdict = match comm.gather(encode(&mine).as_bytes()) {
        Some(all) => {
            let all: Vec<Option<Position>> = all.iter().map(|b| decode(b)).collect();
            decide(&all, mine.as_ref().ok())
        }
        None => Ok(()),
    };
    if comm.broadcast(u64::from(verdict.is_err())) != 0 {
        return Err(verdict.err().unwrap_or_else(|| {
            Error::usage("the ranks did not agree on their options (see rank 0's message)")
        }));
    }
    local
}

/// One rank's position: its error (kind and message), or a hash per term.
#[derive(Debug, Clone, PartialEq)]
enum Position {
    Refused(Error),
    Resolved(Vec<(String, u64)>),
}

/// FNV-1a, a stable 64-bit hash (the standard library's may differ
/// between builds, and ranks may run different builds).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `E\t<kind>\t<message>`, or `O` and a `\n<name>\t<hash>` line per term.
fn encode(mine: &std::result::Result<Terms, &Error>) -> String {
    match mine {
        Err(e) => {
            let kind = match e {
                Error::Usage(_) => 'U',
                Error::Runtime(_) => 'R',
                Error::Verification(_) => 'V',
            };
            format!("E\t{kind}\t{}", e.message())
        }
        Ok(terms) => {
            let mut s = String::from("O");
            for (name, value) in terms {
                let _ = write!(s, "\n{name}\t{:016x}", fnv(value));
            }
            s
        }
    }
}

/// The position a rank sent, or `None` when it cannot be read.
fn decode(b: &[u8]) -> Option<Position> {
    let s = std::str::from_utf8(b).ok()?;
    if let Some(rest) = s.strip_prefix("E\t") {
        let (kind, message) = rest.split_once('\t')?;
        let message = message.to_string();
        return Some(Position::Refused(match kind {
            "U" => Error::Usage(message),
            "R" => Error::Runtime(message),
            "V" => Error::Verification(message),
            _ => return None,
        }));
    }
    let rest = s.strip_prefix('O')?;
    rest.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, hash) = l.split_once('\t')?;
            Some((name.to_string(), u64::from_str_radix(hash, 16).ok()?))
        })
        .collect::<Option<Vec<_>>>()
        .map(Position::Resolved)
}

/// Rank 0's decision from every rank's position (`None`: unreadable) and
/// its own terms (for naming the value that differs).
fn decide(all: &[Option<Position>], own: Option<&Terms>) -> Result<()> {
    let n = all.len();
    let refused: Vec<(usize, &Error)> = all
        .iter()
        .enumerate()
        .filter_map(|(r, p)| match p {
            Some(Position::Refused(e)) => Some((r, e)),
            _ => None,
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
    let Some(Some(Position::Resolved(base))) = all.first() else {
        return Err(Error::usage("rank 0's options could not be compared"));
    };
    for (r, p) in all.iter().enumerate().skip(1) {
        let Some(Position::Resolved(terms)) = p else {
            return Err(Error::usage(format!(
                "rank {r}'s options could not be read: start every rank with the same \
                 himeno build and options"
            )));
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

    fn position(t: std::result::Result<Terms, Error>) -> Option<Position> {
        let mine: std::result::Result<Terms, &Error> = match &t {
            Ok(v) => Ok(v.clone()),
            Err(e) => Err(e),
        };
        decode(encode(&mine).as_bytes())
    }

    #[test]
    fn positions_round_trip() {
        let ok = position(Ok(terms("5")));
        assert!(matches!(&ok, Some(Position::Resolved(v)) if v.len() == 3));
        let err = position(Err(Error::usage("bad\ttab")));
        assert_eq!(err, Some(Position::Refused(Error::usage("bad\ttab"))));
        assert_eq!(decode(b"garbage"), None);
    }

    #[test]
    fn agreement_and_its_three_failures() {
        let t5 = terms("5");
        let ok = position(Ok(t5.clone()));
        assert!(decide(&[ok.clone(), ok.clone()], Some(&t5)).is_ok());
        // One rank refused.
        let bad = position(Err(Error::usage("--iterations must be at least 1")));
        let e = decide(&[ok.clone(), bad.clone()], Some(&t5)).unwrap_err();
        assert!(
            e.message()
                .starts_with("rank 1 of 2: --iterations must be at least 1")
                && e.message().contains("1 other rank(s) accepted"),
            "{e}"
        );
        // Every rank refused alike: the plain error.
        let e = decide(&[bad.clone(), bad], None).unwrap_err();
        assert_eq!(e, Error::usage("--iterations must be at least 1"));
        // All resolved, one differently.
        let e = decide(&[ok, position(Ok(terms("7")))], Some(&t5)).unwrap_err();
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
