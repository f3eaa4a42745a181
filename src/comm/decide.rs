//! One way for ranks to decide together: every rank states its view,
//! rank 0 applies one rule to all of them, and every rank learns the
//! decision, or the one error, that rank 0 reached.
//!
//! This is the system's central safety promise (no rank left waiting, one
//! message for the user), so every collective decision goes through here:
//! the agreement on the run's configuration (`agree`), the host memory
//! preflight, the device memory check and the GPU start-up of each rank,
//! `--backend auto`, the rehearsal's verdict and the run's exit code.
//!
//! Views and decisions travel serde-encoded (JSON): a rank running another
//! build of himeno sends a view rank 0 cannot read, which is refused with a
//! message naming the rank. An error decided on rank 0 reaches every rank
//! whole, so that it maps to the same exit code everywhere, and is printed
//! by rank 0 alone (`crate::comm::with_comm`): the other ranks get a
//! runtime error as a usage one, which they do not print.
//! A rank that never arrives (hung, dead) leaves the others waiting in the
//! gather, where the stop watchdog (`crate::signals`) and the launcher's
//! own failure handling end the job: the primitive adds no timeout of its
//! own, since a slow rank (a large allocation, a busy file system) is not a
//! failed one.

use super::api::Comm;
use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Decides `what` (named in messages, e.g. "the options") together: every
/// rank passes its view `mine`; on rank 0, `rule` gets every rank's view in
/// rank order and returns the decision or the error; every rank returns
/// that same outcome. Collective: every rank must call it, in the same
/// order as every other collective.
pub fn decide<V, D>(
    comm: &dyn Comm,
    what: &str,
    mine: &V,
    rule: impl FnOnce(Vec<V>) -> Result<D>,
) -> Result<D>
where
    V: Serialize + DeserializeOwned,
    D: Serialize + DeserializeOwned,
{
    let view = serde_json::to_vec(mine).expect("a view encodes as JSON");
    let outcome = comm
        .gather(&view)
        .map(|all| read_views(&all, what).and_then(rule));
    let sent = match &outcome {
        Some(outcome) => serde_json::to_vec(outcome).expect("a decision encodes as JSON"),
        None => Vec::new(),
    };
    let got = comm.broadcast_bytes(&sent);
    let decided = serde_json::from_slice::<Result<D>>(&got).unwrap_or_else(|e| {
        Err(Error::runtime(format!(
            "rank 0's decision on {what} could not be read ({e})"
        )))
    });
    // Rank 0 keeps the error as decided (a runtime one ends the job through
    // rank 0, as before the decision); the other ranks know it is told and
    // end quietly with the same exit code.
    match decided {
        Err(Error::Runtime(m)) if comm.rank() != 0 => Err(Error::Usage(m)),
        other => other,
    }
}

/// Every rank's view from the bytes it sent, or an error naming the first
/// rank whose view cannot be read.
fn read_views<V: DeserializeOwned>(all: &[Vec<u8>], what: &str) -> Result<Vec<V>> {
    all.iter()
        .enumerate()
        .map(|(rank, bytes)| {
            serde_json::from_slice(bytes).map_err(|_| {
                Error::usage(format!(
                    "rank {rank}'s view of {what} could not be read: start every rank with \
                     the same himeno build"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::local::Job;
    use crate::comm::single::SingleComm;

    #[test]
    fn every_rank_learns_rank_0s_decision() {
        let job = Job::new(4);
        let outcomes: Vec<Result<usize>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|r| {
                    let comm = job.comm(r);
                    s.spawn(move || {
                        decide(&comm, "a sum", &(r * 10), |views: Vec<usize>| {
                            Ok(views.iter().sum())
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(outcomes.iter().all(|o| *o == Ok(60)), "{outcomes:?}");
    }

    #[test]
    fn every_rank_gets_the_one_error() {
        let job = Job::new(3);
        let outcomes: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|r| {
                    let comm = job.comm(r);
                    s.spawn(move || {
                        decide(&comm, "a check", &(r != 2), |views: Vec<bool>| match views
                            .iter()
                            .position(|ok| !ok)
                        {
                            Some(bad) => Err(Error::Verification(format!("rank {bad}"))),
                            None => Ok(()),
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            outcomes
                .iter()
                .all(|o| *o == Err(Error::Verification("rank 2".into()))),
            "{outcomes:?}"
        );
    }

    #[test]
    fn an_unreadable_view_is_refused_naming_the_rank() {
        let all = [b"1".to_vec(), b"\"text\"".to_vec()];
        let e = read_views::<u64>(&all, "the options").unwrap_err();
        assert!(
            e.message().starts_with("rank 1's view of the options"),
            "{e}"
        );
        assert_eq!(
            decide(&SingleComm, "a value", &7u64, |v| Ok(v[0] + 1)),
            Ok(8)
        );
    }
}
