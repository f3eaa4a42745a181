//! Where the CUDA libraries may be: the candidate files and library names
//! for NVRTC and the driver, in the order they are tried.
//!
//! cudarc, built against one CUDA version, knows only that version's
//! library names (`libnvrtc.so.12` and older for `cuda-12080`), and a
//! machine with CUDA 13 alone has `libnvrtc.so.13`. So the backend finds
//! NVRTC itself: the file `HIMENO_NVRTC_LIB` names, whatever its soname;
//! else the dynamic loader's own search (LD_LIBRARY_PATH, the ldconfig
//! cache, the system folders) by soname, the driver's major version first;
//! else the toolkit folders (`$CUDA_HOME`, the folder above `nvcc` on
//! `PATH`, `/usr/local/cuda*`) and the NVIDIA Python wheels
//! (`nvidia/cu13/lib` for CUDA 13, `nvidia/cuda_nvrtc/lib` for CUDA 12) in
//! the site-packages folders of the active environment and the usual
//! prefixes. Nothing here loads anything: `nvrtc` and `driver` do.

use std::path::{Path, PathBuf};

pub use super::env::NVRTC_ENV;

/// NVRTC major versions this backend can use, newest first.
pub const NVRTC_MAJORS: [u32; 2] = [13, 12];

/// Something to hand the dynamic loader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A library name the loader searches for.
    Soname(String),
    /// A file path, loaded as it is.
    File(PathBuf),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Soname(s) => write!(f, "{s} (loader search)"),
            Target::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What the search reads: environment variables and a root for the
/// system folders (`/`, or a fake tree in tests).
pub struct Search<'a> {
    /// An environment variable's value.
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// Prefix of the absolute system folders searched.
    pub root: PathBuf,
}

impl Search<'_> {
    /// The search of this process: its environment, the real `/`.
    pub fn here() -> Search<'static> {
        Search {
            var: &crate::environment::get,
            root: PathBuf::from("/"),
        }
    }

    /// `path` (absolute) under the search root.
    fn sys(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// The folders of a colon-separated list variable.
    fn list(&self, name: &str) -> Vec<PathBuf> {
        (self.var)(name)
            .map(|v| {
                v.split(':')
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// CUDA toolkit roots: the usual variables, the folder above the
    /// `bin` that holds `nvcc` on `PATH`, `/usr/local/cuda` and the
    /// versioned `/usr/local/cuda-X.Y` (newest first), `/opt/cuda`.
    pub fn toolkit_roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        for v in crate::environment::CUDA_ROOTS {
            if let Some(r) = (self.var)(v) {
                roots.push(PathBuf::from(r));
            }
        }
        for dir in self.list("PATH") {
            let nvcc = dir.join("nvcc");
            if nvcc.is_file() {
                for p in [Some(nvcc.clone()), std::fs::canonicalize(&nvcc).ok()]
                    .into_iter()
                    .flatten()
                {
                    if let Some(root) = p.parent().and_then(Path::parent) {
                        roots.push(root.to_path_buf());
                    }
                }
            }
        }
        roots.push(self.sys("/usr/local/cuda"));
        roots.extend(versioned(&self.sys("/usr/local"), "cuda-"));
        roots.push(self.sys("/opt/cuda"));
        dedup(roots)
    }

    /// Library folders of the toolkit roots.
    pub fn toolkit_folders(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for root in self.toolkit_roots() {
            out.push(root.join("lib64"));
            out.push(root.join("lib"));
            for t in ["x86_64-linux", "sbsa-linux", "aarch64-linux"] {
                out.push(root.join("targets").join(t).join("lib"));
            }
        }
        dedup(out)
    }

    /// Python site-packages folders: `PYTHONPATH`, the active virtual or
    /// conda environment, the prefix of each `python3` on `PATH`, the
    /// user's `~/.local`, and `/usr/local`, `/usr`, `/opt/conda`.
    pub fn site_folders(&self) -> Vec<PathBuf> {
        let mut prefixes = Vec::new();
        for v in crate::environment::PYTHON_PREFIXES {
            if let Some(p) = (self.var)(v) {
                prefixes.push(PathBuf::from(p));
            }
        }
        for dir in self.list("PATH") {
            let py = dir.join("python3");
            if py.is_file() {
                prefixes.push(dir.parent().map(Path::to_path_buf).unwrap_or(dir.clone()));
                if let Some(real) = std::fs::canonicalize(&py)
                    .ok()
                    .as_deref()
                    .and_then(|r| r.parent().and_then(Path::parent).map(Path::to_path_buf))
                {
                    prefixes.push(real);
                }
            }
        }
        if let Some(home) = (self.var)("HOME") {
            prefixes.push(Path::new(&home).join(".local"));
        }
        for p in ["/usr/local", "/usr", "/opt/conda"] {
            prefixes.push(self.sys(p));
        }
        let mut out = self.list("PYTHONPATH");
        for prefix in dedup(prefixes) {
            let lib = prefix.join("lib");
            for py in versioned(&lib, "python3") {
                out.push(py.join("site-packages"));
                out.push(py.join("dist-packages"));
            }
        }
        dedup(out)
    }

    /// NVRTC library folders of the NVIDIA wheels in the site folders:
    /// `nvidia/cu13/lib` (`nvidia-cuda-nvrtc` 13.x), `nvidia/cu12/lib` and
    /// `nvidia/cuda_nvrtc/lib` (`nvidia-cuda-nvrtc-cu12`).
    pub fn wheel_folders(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for site in self.site_folders() {
            for sub in [
                "nvidia/cu13/lib",
                "nvidia/cu12/lib",
                "nvidia/cuda_nvrtc/lib",
            ] {
                out.push(site.join(sub));
            }
        }
        out
    }

    /// NVRTC candidates in the order to try, majors in `majors` order:
    /// each soname through the loader first, then every matching file in
    /// the toolkit and wheel folders. `HIMENO_NVRTC_LIB` is not among
    /// them: when set it is the only choice (see `nvrtc`).
    pub fn nvrtc_candidates(&self, majors: &[u32]) -> Vec<Target> {
        let mut out: Vec<Target> = majors
            .iter()
            .map(|m| Target::Soname(format!("libnvrtc.so.{m}")))
            .collect();
        out.push(Target::Soname("libnvrtc.so".into()));
        let folders: Vec<PathBuf> = self
            .toolkit_folders()
            .into_iter()
            .chain(self.wheel_folders())
            .collect();
        for m in majors {
            for f in &folders {
                let file = f.join(format!("libnvrtc.so.{m}"));
                if file.is_file() {
                    out.push(Target::File(file));
                }
            }
        }
        out
    }

    /// Folders searched for NVRTC, for the error message when none loads.
    pub fn nvrtc_folders(&self) -> Vec<PathBuf> {
        self.toolkit_folders()
            .into_iter()
            .chain(self.wheel_folders())
            .filter(|f| f.is_dir())
            .collect()
    }

    /// Files of the driver library (`libcuda.so.1`) in the folders where
    /// drivers are installed outside the loader's search: the container
    /// toolkit's `/usr/local/nvidia`, WSL's `/usr/lib/wsl/lib`, and the
    /// distribution's library folders.
    pub fn driver_files(&self) -> Vec<PathBuf> {
        [
            "/usr/local/nvidia/lib64",
            "/usr/local/nvidia/lib",
            "/usr/lib/wsl/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
        ]
        .iter()
        .map(|d| self.sys(d).join("libcuda.so.1"))
        .filter(|f| f.is_file())
        .collect()
    }
}

/// The NVRTC built-in function library next to `lib` for its major
/// version `major` (`libnvrtc-builtins.so.13.0` beside `libnvrtc.so.13`):
/// NVRTC opens it by name at compile time, which finds it only on the
/// loader's path when `libnvrtc` has no RUNPATH (the CUDA 13.0 wheel and
/// toolkit), so it is loaded from here first.
pub fn builtins_beside(lib: &Path, major: u32) -> Vec<PathBuf> {
    let Some(dir) = lib.parent() else {
        return Vec::new();
    };
    let prefix = format!("libnvrtc-builtins.so.{major}");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == prefix || n.starts_with(&format!("{prefix}.")))
        })
        .collect();
    found.sort();
    found
}

/// The major version in a library file name such as `libnvrtc.so.13`.
pub fn soname_major(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name.split(".so.").nth(1)?;
    rest.split('.').next()?.parse().ok()
}

/// The subfolders of `dir` named `prefix...`, highest version first (by
/// the numbers in the rest of the name).
fn versioned(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let rest = name.strip_prefix(prefix)?;
            let key: Vec<u64> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|s| s.parse().ok())
                .collect();
            e.path().is_dir().then(|| (key, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// `v` without repeats, first occurrence kept.
fn dedup(v: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in v {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// NVRTC majors in the order to try for a driver of major version
/// `driver` (if known): the driver's own first, older ones next (a CUBIN
/// from an older NVRTC loads on a newer driver), newer ones last.
pub fn majors_for(driver: Option<u32>) -> Vec<u32> {
    let mut m: Vec<u32> = NVRTC_MAJORS.to_vec();
    if let Some(d) = driver {
        m.sort_by_key(|&v| (v > d, d.abs_diff(v)));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fake file tree under a fresh temporary folder named after `name`.
    fn tree(name: &str, files: &[&str]) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("himeno-locate-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for f in files {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
        }
        root
    }

    fn search<'a>(vars: &'a dyn Fn(&str) -> Option<String>, root: &Path) -> Search<'a> {
        Search {
            var: vars,
            root: root.to_path_buf(),
        }
    }

    #[test]
    fn cuda_13_layouts_are_found_driver_major_first() {
        let root = tree(
            "layouts",
            &[
                "usr/local/cuda-13.0/bin/nvcc",
                "usr/local/cuda-13.0/lib64/libnvrtc.so.13",
                "usr/local/cuda-12.4/lib64/libnvrtc.so.12",
                "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
                "venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                "venv/bin/python3",
            ],
        );
        let env: HashMap<&str, String> = [
            (
                "PATH",
                format!(
                    "{}:{}",
                    root.join("venv/bin").display(),
                    root.join("usr/local/cuda-13.0/bin").display()
                ),
            ),
            ("HOME", root.join("home").display().to_string()),
        ]
        .into();
        let vars = move |k: &str| env.get(k).cloned();
        let s = search(&vars, &root);
        let c = s.nvrtc_candidates(&majors_for(Some(13)));
        let files: Vec<String> = c
            .iter()
            .filter_map(|t| match t {
                Target::File(p) => Some(p.strip_prefix(&root).unwrap().display().to_string()),
                Target::Soname(_) => None,
            })
            .collect();
        assert_eq!(c[0], Target::Soname("libnvrtc.so.13".into()));
        assert_eq!(c[1], Target::Soname("libnvrtc.so.12".into()));
        assert_eq!(
            files,
            [
                "usr/local/cuda-13.0/lib64/libnvrtc.so.13",
                "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
                "usr/local/cuda-12.4/lib64/libnvrtc.so.12",
                "venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
            ]
        );
        // A CUDA 12 driver prefers NVRTC 12 and tries 13 last.
        assert_eq!(majors_for(Some(12)), [12, 13]);
        assert_eq!(majors_for(None), [13, 12]);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn builtins_and_majors_are_read_from_file_names() {
        let root = tree(
            "builtins",
            &[
                "w/libnvrtc.so.13",
                "w/libnvrtc-builtins.so.13.0",
                "w/libnvrtc-builtins.alt.so.13.0",
                "w/libnvrtc-builtins.so.12.9",
            ],
        );
        let lib = root.join("w/libnvrtc.so.13");
        assert_eq!(soname_major(&lib), Some(13));
        assert_eq!(soname_major(Path::new("/x/libnvrtc.so")), None);
        assert_eq!(
            builtins_beside(&lib, 13),
            [root.join("w/libnvrtc-builtins.so.13.0")]
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
