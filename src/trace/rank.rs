//! One rank's timeline as rank 0 gathers it: a small header (JSON, in the
//! gather) and its events in fixed-size records, sent in chunks of at
//! most [`CHUNK_EVENTS`] so that neither end ever holds a rank's events
//! twice over.

use crate::error::{Error, Result};
use crate::timeline::{Dropped, Event, GpuWork, Part, What};
use crate::timing::Phase;
use serde::{Deserialize, Serialize};

/// One rank's timeline without its events, as rank 0 gathers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankHeader {
    /// Rank number.
    pub rank: usize,
    /// Host the rank ran on.
    pub host: String,
    /// The rank's recording origin on its host's monotonic clock, in ns.
    pub origin_ns: u64,
    /// Iterations kept at each end of the timed loop.
    pub keep: u64,
    /// What the rank's recorder dropped.
    pub dropped: Dropped,
    /// How many events the rank sends after the header.
    pub events: u64,
}

/// Bytes of one encoded event.
pub const EVENT_BYTES: usize = 1 + 1 + 4 + 8 + 8 + 8;

/// Events in one message of the event transfer (under 4 MiB).
pub const CHUNK_EVENTS: usize = 1 << 17;

/// Code of an event's kind in the encoding: the phase's place in
/// [`Phase::ALL`], then the barrier, then a sweep thread's share, then
/// the GPU work in the order of [`GpuWork::ALL`].
fn what_code(w: What) -> u8 {
    let phases = Phase::ALL.len() as u8;
    match w {
        What::Phase(p) => Phase::ALL.iter().position(|&q| q == p).unwrap_or(0) as u8,
        What::Barrier => phases,
        What::Sweep => phases + 1,
        What::Gpu(g) => phases + 2 + GpuWork::ALL.iter().position(|&q| q == g).unwrap_or(0) as u8,
    }
}

/// The kind of event whose code is `code` ([`what_code`]'s inverse).
fn what_of(code: u8) -> Result<What> {
    let phases = Phase::ALL.len();
    let c = code as usize;
    Ok(match c {
        _ if c < phases => What::Phase(Phase::ALL[c]),
        _ if c == phases => What::Barrier,
        _ if c == phases + 1 => What::Sweep,
        _ => GpuWork::ALL
            .get(c - phases - 2)
            .map(|&g| What::Gpu(g))
            .ok_or_else(|| {
                Error::runtime(format!("bad timeline from a rank: event kind {code}"))
            })?,
    })
}

/// Encodes the header for the gather.
pub fn encode_header(h: &RankHeader) -> Result<Vec<u8>> {
    serde_json::to_vec(h).map_err(|e| Error::runtime(format!("cannot encode the timeline: {e}")))
}

/// Decodes what [`encode_header`] made.
pub fn decode_header(bytes: &[u8]) -> Result<RankHeader> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::runtime(format!("bad timeline from a rank: {e}")))
}

/// Appends `events` to `out` in fixed-size little-endian fields (a JSON
/// array of a million events would be several times larger).
pub fn encode_events<'a>(events: impl IntoIterator<Item = &'a Event>, out: &mut Vec<u8>) {
    for e in events {
        out.push(what_code(e.what));
        out.push(e.part as u8);
        out.extend_from_slice(&e.track.to_le_bytes());
        out.extend_from_slice(&e.iteration.to_le_bytes());
        out.extend_from_slice(&e.start_ns.to_le_bytes());
        out.extend_from_slice(&e.dur_ns.to_le_bytes());
    }
}

/// Decodes what [`encode_events`] made into `into` (cleared first).
pub fn decode_events(bytes: &[u8], into: &mut Vec<Event>) -> Result<()> {
    let bad = |why: &str| Error::runtime(format!("bad timeline from a rank: {why}"));
    if !bytes.len().is_multiple_of(EVENT_BYTES) {
        return Err(bad("a partial event"));
    }
    into.clear();
    let u64_at =
        |c: &[u8], at: usize| u64::from_le_bytes(c[at..at + 8].try_into().expect("8 bytes"));
    for c in bytes.chunks_exact(EVENT_BYTES) {
        let what = what_of(c[0])?;
        let part = match c[1] {
            0 => Part::Setup,
            1 => Part::Rehearsal,
            _ => Part::Timed,
        };
        into.push(Event {
            what,
            part,
            track: u32::from_le_bytes(c[2..6].try_into().expect("4 bytes")),
            iteration: u64_at(c, 6),
            start_ns: u64_at(c, 14),
            dur_ns: u64_at(c, 22),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timelines_survive_the_gather_encoding() {
        let h = RankHeader {
            rank: 3,
            host: "node7".into(),
            origin_ns: 123_456_789,
            keep: 5,
            dropped: Dropped {
                events: 4,
                iterations: Some((6, 9)),
            },
            events: 4,
        };
        assert_eq!(decode_header(&encode_header(&h).unwrap()).unwrap(), h);
        let events = vec![
            Event {
                what: What::Phase(Phase::Unpack),
                part: Part::Timed,
                iteration: 12,
                track: 1,
                start_ns: 99,
                dur_ns: 7,
            },
            Event {
                what: What::Sweep,
                part: Part::Timed,
                iteration: 12,
                track: 3,
                start_ns: 100,
                dur_ns: 5,
            },
            Event {
                what: What::Gpu(GpuWork::ToDevice),
                part: Part::Rehearsal,
                iteration: 1,
                track: crate::timeline::GPU_HALO_TRACK,
                start_ns: 50,
                dur_ns: 3,
            },
            Event {
                what: What::Barrier,
                part: Part::Setup,
                iteration: 0,
                track: 2,
                start_ns: u64::MAX - 1,
                dur_ns: 0,
            },
        ];
        let mut bytes = Vec::new();
        encode_events(&events, &mut bytes);
        assert_eq!(bytes.len(), events.len() * EVENT_BYTES);
        let mut back = vec![events[0]];
        decode_events(&bytes, &mut back).unwrap();
        assert_eq!(back, events);
        assert!(decode_events(&bytes[..40], &mut back).is_err());
        for w in GpuWork::ALL {
            assert_eq!(what_of(what_code(What::Gpu(w))).unwrap(), What::Gpu(w));
        }
        assert!(what_of(200).is_err());
    }
}
