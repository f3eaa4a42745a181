//! The NVRTC libraries on this machine, listed for the report and as the
//! fallback when the binary under test does not find one by itself: the
//! same search the GPU backend makes (`backend::gpu::locate`), plus the
//! ldconfig cache, which the backend reaches through the loader by name.

use crate::backend::gpu::locate::{self, Search, Target};
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this build can check a GPU (it can: it has the `cuda` feature).
pub fn ensure_build() -> Result<()> {
    Ok(())
}

/// Every NVRTC 12 or 13 file found, as (major version, path), in the
/// order to prefer for a driver of CUDA major `driver_major`: by major as
/// the backend tries them, the ldconfig cache first within a major, then
/// the toolkit folders and the wheels. System folders are looked for under
/// `root` (`/`, or a fake tree in tests); the ldconfig cache only when it
/// is `/`, since it describes the real one.
pub fn libraries(root: &Path, driver_major: Option<u32>) -> Result<Vec<(u32, PathBuf)>> {
    let majors = locate::majors_for(driver_major);
    let search = Search {
        var: &crate::environment::get,
        root: root.to_path_buf(),
    };
    let files: Vec<PathBuf> = search
        .nvrtc_candidates(&majors)
        .into_iter()
        .filter_map(|t| match t {
            Target::File(p) => Some(p),
            Target::Soname(_) => None,
        })
        .collect();
    let cached = if root == Path::new("/") {
        ldconfig()
    } else {
        Vec::new()
    };
    let mut out: Vec<(u32, PathBuf)> = Vec::new();
    for m in majors {
        for p in cached.iter().chain(&files) {
            if locate::soname_major(p) == Some(m) && !out.iter().any(|(_, q)| q == p) {
                out.push((m, p.clone()));
            }
        }
    }
    Ok(out)
}

/// The `libnvrtc.so.N` files of the ldconfig cache (none when `ldconfig`
/// is missing).
fn ldconfig() -> Vec<PathBuf> {
    let Ok(o) = Command::new("ldconfig").arg("-p").output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("libnvrtc.so."))
        .filter_map(|l| l.rsplit(" => ").next().map(|p| PathBuf::from(p.trim())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_root_lists_its_files_by_major_toolkit_first() {
        let root =
            std::env::temp_dir().join(format!("himeno-gpu-check-nvrtc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for f in [
            "usr/local/cuda-13.0/lib64/libnvrtc.so.13",
            "usr/local/cuda-12.4/lib64/libnvrtc.so.12",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        let found = libraries(&root, Some(12)).unwrap();
        let rel: Vec<(u32, PathBuf)> = found
            .into_iter()
            .map(|(m, p)| (m, p.strip_prefix(&root).unwrap().to_path_buf()))
            .collect();
        assert_eq!(
            rel,
            [
                (
                    12,
                    PathBuf::from("usr/local/cuda-12.4/lib64/libnvrtc.so.12")
                ),
                (
                    13,
                    PathBuf::from("usr/local/cuda-13.0/lib64/libnvrtc.so.13")
                ),
            ]
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
