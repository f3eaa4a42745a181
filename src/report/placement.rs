//! Where a rank's work ran: the backend, its threads, the device, the
//! backend's details and the threads' CPUs. The record writes it as one
//! line of prose (`cpu x2 threads, kernel avx512; cached stores; bind
//! cores: threads on cpus 0,1 (allowed 0,1)`), as it always has; this type
//! writes that line and reads it back into its parts, so nothing else
//! parses it.

use crate::backend::BackendInfo;
use crate::config::BackendKind;
use crate::machine::threads::ThreadCpus;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A rank's placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// The backend.
    pub backend: BackendKind,
    /// Sweep threads.
    pub threads: usize,
    /// The device (GPU backends), e.g. its name and bus id.
    pub device: Option<String>,
    /// The backend's own details: kernel, stores, staging, ...
    pub detail: Option<String>,
    /// Where the sweep threads ran (CPU backends).
    pub cpus: Option<ThreadCpus>,
}

impl From<&BackendInfo> for Placement {
    fn from(b: &BackendInfo) -> Placement {
        Placement {
            backend: b.kind,
            threads: b.threads,
            device: b.device.clone(),
            detail: b.detail.clone(),
            cpus: b.cpus.clone(),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x{} threads", self.backend.name(), self.threads)?;
        if let Some(d) = &self.device {
            write!(f, ", device {d}")?;
        }
        if let Some(d) = &self.detail {
            write!(f, ", {d}")?;
        }
        if let Some(c) = &self.cpus {
            // The CPUs are the last of the details, which `;` separates.
            let sep = if self.detail.is_some() { "; " } else { ", " };
            write!(f, "{sep}{c}")?;
        }
        Ok(())
    }
}

/// Where a GPU backend's details start after its device: a device's
/// description holds commas of its own (`GPU 0: X (sm_90, 16 GiB, ...)`).
const GPU_DETAIL: &str = ", kernels ";

impl FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Placement, String> {
        let bad = || format!("placement '{s}' does not start with BACKEND xN threads");
        let (backend, rest) = s.split_once(" x").ok_or_else(bad)?;
        let backend = match backend {
            "cpu" => BackendKind::Cpu,
            "gpu" => BackendKind::Gpu,
            _ => return Err(bad()),
        };
        let (threads, mut rest) = rest.split_once(" threads").ok_or_else(bad)?;
        let threads = threads.parse().map_err(|_| bad())?;
        let mut cpus = None;
        if let Some(at) = rest.rfind("bind ")
            && let Ok(c) = rest[at..].parse::<ThreadCpus>()
            && (rest[..at].ends_with("; ") || rest[..at].ends_with(", "))
        {
            cpus = Some(c);
            rest = &rest[..at - 2];
        }
        let (mut device, mut detail) = (None, None);
        if let Some(d) = rest.strip_prefix(", device ") {
            match d.find(GPU_DETAIL) {
                Some(at) => {
                    device = Some(d[..at].to_string());
                    detail = Some(d[at + 2..].to_string());
                }
                None => device = Some(d.to_string()),
            }
        } else if let Some(d) = rest.strip_prefix(", ") {
            detail = Some(d.to_string());
        } else if !rest.is_empty() {
            return Err(bad());
        }
        Ok(Placement {
            backend,
            threads,
            device,
            detail,
            cpus,
        })
    }
}

impl Serialize for Placement {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Placement {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Placement, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::threads::Bind;

    #[test]
    fn placements_read_back_into_their_parts() {
        let cpu = "cpu x2 threads, kernel avx512; cached stores; wavefront of 4 sweeps, tiles \
                   of 32 rows; bind cores: threads on cpus 0,1 (allowed 0,1)";
        let p: Placement = cpu.parse().unwrap();
        assert_eq!(
            (p.backend, p.threads, p.device.as_deref()),
            (BackendKind::Cpu, 2, None)
        );
        assert_eq!(
            p.detail.as_deref(),
            Some("kernel avx512; cached stores; wavefront of 4 sweeps, tiles of 32 rows")
        );
        let c = p.cpus.clone().unwrap();
        assert_eq!(
            (c.bind, c.cpus, c.allowed),
            (Bind::Cores, vec![Some(0), Some(1)], vec![0, 1])
        );
        assert_eq!(p.to_string(), cpu);
        let gpu = "gpu x1 threads, device GPU 0: X (sm_90, 16 GiB, PCI 0000:10:00.0), kernels \
                   sm_90 by NVRTC 13.0, occupancy auto, staging pinned";
        let p: Placement = gpu.parse().unwrap();
        assert_eq!(
            p.device.as_deref(),
            Some("GPU 0: X (sm_90, 16 GiB, PCI 0000:10:00.0)")
        );
        assert!(p.detail.as_deref().unwrap().starts_with("kernels sm_90"));
        assert_eq!(p.cpus, None);
        assert_eq!(p.to_string(), gpu);
        for plain in [
            "gpu x1 threads, device GPU 0: Stub H200",
            "cpu x1 threads, halo self-test pattern",
            "cpu x3 threads",
        ] {
            assert_eq!(plain.parse::<Placement>().unwrap().to_string(), plain);
        }
        for bad in ["", "tpu x1 threads", "cpu xtwo threads", "cpu x1 threadsX"] {
            assert!(bad.parse::<Placement>().is_err(), "{bad}");
        }
    }
}
