//! Whether NVIDIA's Multi-Process Service (MPS) serves this host's GPUs,
//! and the warning for MPI processes that share a GPU without it.
//!
//! Without MPS, kernels of different processes on one GPU never run at
//! once: the GPU time-slices between the processes' contexts, often 2-10
//! times slower than the same ranks as threads of one process
//! (`--local-ranks`), which share one context. What is checked: the MPS
//! control daemon's `control` pipe in its pipe folder
//! (`CUDA_MPS_PIPE_DIRECTORY`, default `/tmp/nvidia-mps`), which
//! `nvidia-cuda-mps-control -d` creates and clients connect through. The
//! driver has no query for it.

use crate::environment;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The MPS pipe folder when `CUDA_MPS_PIPE_DIRECTORY` is unset.
pub const DEFAULT_PIPE_DIR: &str = "/tmp/nvidia-mps";

/// The pipe folder MPS clients of this process would use.
pub fn pipe_dir() -> PathBuf {
    environment::get_os(environment::MPS_PIPE)
        .map_or_else(|| PathBuf::from(DEFAULT_PIPE_DIR), PathBuf::from)
}

/// Whether an MPS control daemon listens in `dir`: its `control` pipe
/// (a FIFO, or a socket) is there.
pub fn serves(dir: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(dir.join("control"))
        .map(|m| m.file_type().is_fifo() || m.file_type().is_socket())
        .unwrap_or(false)
}

/// Whether MPS serves this process's GPUs.
pub fn active() -> bool {
    serves(&pipe_dir())
}

/// What one rank says about the GPU it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharer<'a> {
    /// Host name.
    pub host: &'a str,
    /// The device's identity on that host.
    pub device: &'a str,
    /// The device as the report describes it.
    pub description: &'a str,
    /// The rank's process id.
    pub pid: u32,
    /// Whether the rank sees MPS.
    pub mps: bool,
}

/// The warnings for every GPU that ranks of more than one process use
/// while none of them sees MPS, from every rank's view (indexed by
/// rank): one line per such GPU, naming its ranks and the fixes.
pub fn time_slicing(reports: &[Sharer<'_>]) -> Vec<String> {
    #[derive(Default)]
    struct Use<'a> {
        ranks: Vec<usize>,
        pids: BTreeSet<u32>,
        mps: bool,
        description: &'a str,
    }
    let mut devices: BTreeMap<(&str, &str), Use<'_>> = BTreeMap::new();
    for (rank, r) in reports.iter().enumerate() {
        let u = devices.entry((r.host, r.device)).or_default();
        u.ranks.push(rank);
        u.pids.insert(r.pid);
        u.mps |= r.mps;
        u.description = r.description;
    }
    devices
        .iter()
        .filter(|(_, u)| u.pids.len() > 1 && !u.mps)
        .map(|((host, _), u)| {
            let ranks: Vec<String> = u.ranks.iter().map(usize::to_string).collect();
            format!(
                "{} on host {host} is shared by {} processes (ranks {}) without MPS: the GPU \
                 time-slices between them, often 2-10x slower; run them as threads of one \
                 process (--local-ranks {}), or start MPS (nvidia-cuda-mps-control -d) before \
                 the job",
                u.description,
                u.pids.len(),
                ranks.join(", "),
                u.ranks.len()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report<'a>(host: &'a str, device: &'a str, pid: u32, mps: bool) -> Sharer<'a> {
        Sharer {
            host,
            device,
            description: device,
            pid,
            mps,
        }
    }

    #[test]
    fn processes_sharing_a_gpu_without_mps_are_told() {
        // Two processes on one GPU: told, naming both ranks.
        let w = time_slicing(&[report("a", "g0", 10, false), report("a", "g0", 11, false)]);
        assert_eq!(w.len(), 1, "{w:?}");
        for want in [
            "g0 on host a",
            "2 processes",
            "ranks 0, 1",
            "--local-ranks 2",
            "MPS",
        ] {
            assert!(w[0].contains(want), "{want}: {}", w[0]);
        }
        // In-process ranks (one pid), one process per GPU, other hosts, or
        // MPS seen: nothing.
        assert!(
            time_slicing(&[report("a", "g0", 10, false), report("a", "g0", 10, false)]).is_empty()
        );
        assert!(
            time_slicing(&[report("a", "g0", 10, false), report("a", "g1", 11, false)]).is_empty()
        );
        assert!(
            time_slicing(&[report("a", "g0", 10, false), report("b", "g0", 11, false)]).is_empty()
        );
        assert!(
            time_slicing(&[report("a", "g0", 10, true), report("a", "g0", 11, true)]).is_empty()
        );
    }

    #[test]
    fn mps_is_seen_by_its_control_pipe() {
        let dir = std::env::temp_dir().join(format!("himeno-mps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(!serves(&dir));
        std::fs::write(dir.join("control"), b"").unwrap();
        assert!(!serves(&dir), "a plain file is no pipe");
        std::fs::remove_file(dir.join("control")).unwrap();
        let c = std::ffi::CString::new(dir.join("control").into_os_string().into_encoded_bytes())
            .unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(serves(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
