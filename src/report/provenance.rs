//! Provenance: what produced a result (version, commit, features, MPI
//! library, hosts, devices, command line), so a number in a report can be
//! traced back and reproduced.

use crate::backend::GpuSoftware;
use crate::solver::RankSummary;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where and with what a run was made.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from (`unknown` outside a checkout).
    pub git_commit: String,
    /// Cargo features compiled in.
    pub features: Vec<String>,
    /// MPI library version string, if built with MPI.
    pub mpi_library: Option<String>,
    /// Distinct host names, in rank order of first appearance.
    pub hosts: Vec<String>,
    /// Distinct devices used (GPU backends).
    pub devices: Vec<String>,
    /// Distinct GPU software the ranks ran with: CUDA driver and NVRTC
    /// versions, NVRTC library (absent for CPU runs and older records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_software: Vec<GpuSoftware>,
    /// The command line of rank 0 (bytes that are not UTF-8 replaced by
    /// U+FFFD).
    pub command: Vec<String>,
}

impl Provenance {
    /// Collects provenance from the gathered rank summaries.
    pub fn collect(ranks: &[RankSummary], mpi_library: Option<String>) -> Provenance {
        let mut hosts: Vec<String> = Vec::new();
        let mut devices: Vec<String> = Vec::new();
        let mut gpu_software: Vec<GpuSoftware> = Vec::new();
        for r in ranks {
            if let Some(g) = &r.backend.gpu_software
                && !gpu_software.contains(g)
            {
                gpu_software.push(g.clone());
            }
            if !hosts.contains(&r.host) {
                hosts.push(r.host.clone());
            }
            if let Some(d) = &r.backend.device
                && !devices.contains(d)
            {
                devices.push(d.clone());
            }
        }
        Provenance {
            version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: env!("HIMENO_GIT_COMMIT").to_string(),
            features: features(),
            mpi_library,
            hosts,
            devices,
            gpu_software,
            // Arguments are OS strings (a path need not be UTF-8); the
            // record is JSON text, so they are kept lossily.
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }
}

/// Cargo features compiled into this binary.
pub fn features() -> Vec<String> {
    let mut f = Vec::new();
    if cfg!(feature = "mpi") {
        f.push("mpi".to_string());
    }
    if cfg!(feature = "cuda") {
        f.push("cuda".to_string());
    }
    f
}

/// The current UTC time as RFC 3339 (`2026-11-30T01:40:32Z`).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_from_unix(secs)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC.
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(utc_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_from_unix(1_796_003_232), "2026-11-30T01:47:12Z");
    }
}
