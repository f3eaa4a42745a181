//! The device memory check, decided for each GPU by all the ranks that
//! share it.
//!
//! Ranks of one host that use the same GPU (more ranks than GPUs, or
//! in-process ranks on one GPU) each see the whole free memory: checked one
//! by one they all pass and then run out of memory together. So every rank
//! reads the free memory after every rank has opened its device (contexts
//! and modules take memory too) and before any allocates its fields, sends
//! it with its need to rank 0, which adds the needs per (host, device) and
//! broadcasts the verdict (`crate::comm::decide`), with the warnings of
//! `mps::time_slicing` for GPUs that several processes share without MPS,
//! which rank 0 prints.

use super::mps::{Sharer, time_slicing};
use crate::comm::{self, Comm};
use crate::error::{Error, Result};
use crate::machine::memory::GIB;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rank's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Host name.
    pub host: String,
    /// The device's identity (UUID) on that host.
    pub device: String,
    /// The device as the report describes it.
    pub description: String,
    /// Bytes this rank will allocate on it.
    pub need: u64,
    /// Free bytes the rank read on it.
    pub free: u64,
    /// The rank's process id: ranks of several processes on one GPU
    /// time-slice it without MPS (`mps`).
    pub pid: u32,
    /// Whether the rank sees an MPS daemon.
    pub mps: bool,
}

/// Decides from every rank's report whether each device has room for the
/// ranks that share it; the error names the first one that does not.
pub fn room_on_each_device(reports: &[Report]) -> std::result::Result<(), String> {
    #[derive(Default)]
    struct Use<'a> {
        ranks: usize,
        need: u64,
        free: Option<u64>,
        description: &'a str,
    }
    let mut devices: BTreeMap<(&str, &str), Use<'_>> = BTreeMap::new();
    for r in reports {
        let u = devices.entry((&r.host, &r.device)).or_default();
        u.ranks += 1;
        u.need = u.need.saturating_add(r.need);
        // Ranks read the figure a moment apart; the smallest is safe.
        u.free = Some(u.free.map_or(r.free, |f| f.min(r.free)));
        u.description = &r.description;
    }
    for ((host, _), u) in &devices {
        let free = u.free.unwrap_or(0);
        if u.need > free {
            let who = if u.ranks == 1 {
                "this rank's block needs".to_string()
            } else {
                format!("the {} ranks sharing it need", u.ranks)
            };
            return Err(format!(
                "{} on host {host}: {who} {:.2} GiB of device memory together but {:.2} GiB is \
                 free: use more GPUs or nodes, fewer ranks per GPU, or a smaller grid",
                u.description,
                u.need as f64 / GIB,
                free as f64 / GIB
            ));
        }
    }
    Ok(())
}

/// Checks, collectively, that the device `mine` reports has room for every
/// rank that uses it. Every rank must call it, with the free memory read
/// after every rank opened its device (after a collective step that
/// follows the opening) and before any allocates; every rank returns the
/// same verdict.
pub fn check(mine: &Report, comm: &dyn Comm) -> Result<()> {
    let warnings: Vec<String> = comm::decide(comm, "the device memory", mine, |reports| {
        room_on_each_device(&reports).map_err(Error::usage)?;
        let sharers: Vec<Sharer<'_>> = reports
            .iter()
            .map(|r| Sharer {
                host: &r.host,
                device: &r.device,
                description: &r.description,
                pid: r.pid,
                mps: r.mps,
            })
            .collect();
        Ok(time_slicing(&sharers))
    })?;
    if comm.rank() == 0 {
        for w in warnings {
            tracing::warn!("{w}");
        }
    }
    tracing::info!(
        need_gib = mine.need as f64 / GIB,
        "device memory check passed"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(host: &str, device: &str, need: u64, free: u64) -> Report {
        Report {
            host: host.into(),
            device: device.into(),
            description: format!("GPU {device}"),
            need,
            free,
            pid: 1,
            mps: false,
        }
    }

    #[test]
    fn ranks_sharing_a_gpu_are_summed() {
        // Four ranks on one 100-byte GPU: each fits alone, not together.
        let shared: Vec<Report> = (0..4).map(|_| report("a", "GPU-1", 30, 100)).collect();
        let err = room_on_each_device(&shared).unwrap_err();
        assert!(err.contains("the 4 ranks sharing it need"), "{err}");
        assert!(room_on_each_device(&shared[..3]).is_ok());
        // The same GPU identity on another host is another GPU.
        let spread = [
            report("a", "GPU-1", 60, 100),
            report("b", "GPU-1", 60, 100),
            report("a", "GPU-2", 60, 100),
        ];
        assert!(room_on_each_device(&spread).is_ok());
        // The smallest free figure of a device counts.
        assert!(
            room_on_each_device(&[report("a", "g", 50, 100), report("a", "g", 40, 80)]).is_err()
        );
    }

    #[test]
    fn reports_survive_their_encoding() {
        let r = report("node\t7", "GPU-aa", 123, 456);
        let back: Report = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
