//! Aligning the ranks' clocks before their timelines are merged: rank 0
//! estimates every rank's clock offset from a few ping-pongs (the reply
//! carries the rank's clock; the round trip with the shortest time bounds
//! the error by half of it), and ranks on rank 0's host, whose monotonic
//! clock is the same kernel clock, are taken as they are.

use crate::comm::Comm;
use crate::timeline::monotonic_ns;
use serde::{Deserialize, Serialize};

/// Ping-pongs per rank: the shortest round trip of these is kept.
const ROUNDS: usize = 8;

/// One rank's clock, as rank 0 measured it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Offset {
    /// The rank's clock minus rank 0's, in nanoseconds (0 for rank 0).
    pub estimate_ns: i64,
    /// The round trip the estimate came from, in nanoseconds: the true
    /// offset lies within half of it of the estimate.
    pub rtt_ns: u64,
}

/// Estimates every rank's offset from rank 0's clock; collective. Rank 0
/// gets one entry per rank, the others an empty vector.
pub fn estimate(comm: &dyn Comm) -> Vec<Offset> {
    let mut offsets = Vec::new();
    if comm.rank() == 0 {
        offsets.push(Offset::default());
        for peer in 1..comm.size() {
            let mut best: Option<Offset> = None;
            for _ in 0..ROUNDS {
                let mut theirs = [0u8; 8];
                let t0 = monotonic_ns();
                comm.send(peer, &t0.to_le_bytes());
                comm.recv(peer, &mut theirs);
                let t1 = monotonic_ns();
                let rtt = t1.saturating_sub(t0);
                if best.is_none_or(|b| rtt < b.rtt_ns) {
                    // Their clock was read somewhere between t0 and t1:
                    // the middle is off by at most half the round trip.
                    let mid = t0 as i128 + (rtt / 2) as i128;
                    best = Some(Offset {
                        estimate_ns: (u64::from_le_bytes(theirs) as i128 - mid) as i64,
                        rtt_ns: rtt,
                    });
                }
            }
            offsets.push(best.unwrap_or_default());
        }
    } else {
        for _ in 0..ROUNDS {
            let mut ping = [0u8; 8];
            comm.recv(0, &mut ping);
            comm.send(0, &monotonic_ns().to_le_bytes());
        }
    }
    offsets
}
