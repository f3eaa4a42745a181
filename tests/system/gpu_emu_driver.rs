//! How a `cuda` build finds the CUDA driver and NVRTC, end to end in the
//! real binary and without a GPU: a stub driver (a small C library that
//! reports a CUDA version and no device) stands in for `libcuda.so.1`, and
//! the NVRTC 12 and 13 wheels that `scripts/install-nvrtc.sh` installs are
//! laid out as machines have them (a CUDA 13 wheel in a virtual
//! environment, a toolkit next to `nvcc`, a renamed file named by
//! `HIMENO_NVRTC_LIB`). A run that gets as far as "the CUDA driver sees no
//! device" has found and loaded NVRTC; its `-v` log says which.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The stub driver's source: the three calls a probe makes before it
/// counts devices, which it finds none of. With `HIMENO_STUB_EXCLUSIVE`
/// set it has one device in EXCLUSIVE_PROCESS compute mode that another
/// process holds: its primary context cannot be retained
/// (CUDA_ERROR_DEVICE_UNAVAILABLE), and the calls the error message
/// makes answer. Like the project's emulated driver it describes itself
/// through `himeno_emu_describe`, which a real driver lacks.
const STUB: &str = r#"
#include <stdlib.h>
#include <string.h>
int cuDriverGetVersion(int *v) {
    const char *e = getenv("HIMENO_STUB_CUDA_VERSION");
    *v = e ? atoi(e) : 13000;
    return 0;
}
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *n) { *n = getenv("HIMENO_STUB_EXCLUSIVE") ? 1 : 0; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
int cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)ctx; (void)d; return 46; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    *v = attr == 20 ? 3 : 0;
    return 0;
}
int cuDeviceGetName(char *name, int len, int d) {
    (void)d;
    strncpy(name, "Stub Exclusive GPU", len);
    return 0;
}
int cuGetErrorString(int e, const char **s) { (void)e; *s = "stub error"; return 0; }
const char *himeno_emu_describe(void) { return "stub CUDA emulator (test)"; }
"#;

/// The folder holding the stub `libcuda.so.1`, built once per test run
/// into the target folder (compiled under a private name, then renamed
/// into place, so concurrent runs never see half a library).
fn stub_driver() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stub-cuda");
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join(format!("stub-{}.c", std::process::id()));
        let tmp = dir.join(format!("libcuda-{}.so", std::process::id()));
        std::fs::write(&src, STUB).unwrap();
        let o = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&tmp)
            .arg(&src)
            .output()
            .expect("a C compiler (cc) is installed: scripts/install-deps.sh installs one");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::rename(&tmp, dir.join("libcuda.so.1")).unwrap();
        let _ = std::fs::remove_file(src);
        dir
    })
}

/// The wheel folders of NVRTC 12 and 13; `None` (after saying why) when
/// this is not a `cuda` build or they are missing outside CI. In CI a
/// missing wheel fails the test.
fn wheels(test: &str) -> Option<(PathBuf, PathBuf)> {
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: this build has no CUDA support");
        return None;
    }
    match (nvrtc_wheel_dir(12), nvrtc_wheel_dir(13)) {
        (Ok(a), Ok(b)) => Some((a, b)),
        (Err(e), _) | (_, Err(e)) if std::env::var_os("CI").is_some() => {
            panic!("CI needs the NVRTC wheels: {e}")
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

/// Links every file of `from` into `to` (created).
fn link_all(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::os::unix::fs::symlink(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A GPU run with the stub driver, nothing of CUDA on the search paths
/// but what `env` adds, and an empty home.
fn gpu_run(home: &Path, env: &[(&str, String)]) -> Output {
    let mut c = himeno(&[
        "-v",
        "--backend",
        "gpu",
        "--grid",
        "3x3x3",
        "--iterations",
        "1",
    ]);
    for v in [
        "HIMENO_NVRTC_LIB",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUDA_TOOLKIT_ROOT_DIR",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONPATH",
        "RUST_LOG",
    ] {
        c.env_remove(v);
    }
    c.env("LD_LIBRARY_PATH", stub_driver())
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home);
    for (k, v) in env {
        c.env(k, v);
    }
    run(c)
}

/// Asserts that the run found NVRTC `version` in `folder` and stopped at
/// the stub's missing device.
fn assert_found(o: &Output, version: &str, folder: &Path) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the CUDA driver sees no device"), "{err}");
    let want = format!("NVRTC {version} loaded from {}", folder.display());
    assert!(err.contains(&want), "no `{want}` in:\n{err}");
}

#[test]
fn gpu_emu_driver_explains_an_exclusive_device_held_by_another_process() {
    let Some((_, cu13)) = wheels("the EXCLUSIVE_PROCESS message") else {
        return;
    };
    let t = scratch("exclusive");
    let o = gpu_run(
        &t,
        &[
            (
                "HIMENO_NVRTC_LIB",
                cu13.join("libnvrtc.so.13").display().to_string(),
            ),
            ("HIMENO_STUB_EXCLUSIVE", "1".into()),
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "one error line:\n{err}");
    for want in [
        "GPU 0 (Stub Exclusive GPU)",
        "EXCLUSIVE_PROCESS",
        "CUDA_VISIBLE_DEVICES",
        "--local-ranks",
        "DEFAULT",
    ] {
        assert!(lines[0].contains(want), "no `{want}` in: {}", lines[0]);
    }
    // The loaded driver was recognised as an emulator by its export.
    assert!(
        err.contains("the CUDA driver is an emulator") && err.contains("stub CUDA emulator (test)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_finds_the_cuda_13_wheel_of_a_virtual_environment() {
    let Some((_, cu13)) = wheels("the CUDA 13 wheel search") else {
        return;
    };
    let t = scratch("venv");
    let lib = t.join("venv/lib/python3.12/site-packages/nvidia/cu13/lib");
    link_all(&cu13, &lib);
    let o = gpu_run(&t, &[("VIRTUAL_ENV", t.join("venv").display().to_string())]);
    assert_found(&o, "13.0", &lib);
    // The same venv found through its python3 on PATH.
    std::fs::create_dir_all(t.join("venv/bin")).unwrap();
    std::fs::write(t.join("venv/bin/python3"), "").unwrap();
    let path = format!("{}:/usr/bin:/bin", t.join("venv/bin").display());
    let o = gpu_run(&t, &[("PATH", path)]);
    assert_found(&o, "13.0", &lib);
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_finds_the_toolkit_next_to_nvcc() {
    let Some((_, cu13)) = wheels("the toolkit search") else {
        return;
    };
    let t = scratch("toolkit");
    let root = t.join("cuda-13.0");
    link_all(&cu13, &root.join("lib64"));
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::write(root.join("bin/nvcc"), "").unwrap();
    let path = format!("{}:/usr/bin:/bin", root.join("bin").display());
    let o = gpu_run(&t, &[("PATH", path)]);
    assert_found(&o, "13.0", &root.join("lib64"));
    let o = gpu_run(&t, &[("CUDA_HOME", root.display().to_string())]);
    assert_found(&o, "13.0", &root.join("lib64"));
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_prefers_nvrtc_of_the_drivers_major_version() {
    let Some((cu12, cu13)) = wheels("the NVRTC version choice") else {
        return;
    };
    let t = scratch("majors");
    let site = t.join("venv/lib/python3.12/site-packages/nvidia");
    link_all(&cu12, &site.join("cuda_nvrtc/lib"));
    link_all(&cu13, &site.join("cu13/lib"));
    let venv = ("VIRTUAL_ENV", t.join("venv").display().to_string());
    let o = gpu_run(&t, std::slice::from_ref(&venv));
    assert_found(&o, "13.0", &site.join("cu13/lib"));
    let o = gpu_run(&t, &[venv, ("HIMENO_STUB_CUDA_VERSION", "12080".into())]);
    assert_found(&o, "12.9", &site.join("cuda_nvrtc/lib"));
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_honours_the_nvrtc_variable_whatever_the_file_name() {
    let Some((_, cu13)) = wheels("HIMENO_NVRTC_LIB") else {
        return;
    };
    let t = scratch("variable");
    let renamed = t.join("mine/libnvrtc-any-name.so");
    std::fs::create_dir_all(renamed.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(cu13.join("libnvrtc.so.13"), &renamed).unwrap();
    let o = gpu_run(&t, &[("HIMENO_NVRTC_LIB", renamed.display().to_string())]);
    assert_found(&o, "13.0", &renamed);
    // A wrong one is an error that names it, not a silent search.
    let o = gpu_run(
        &t,
        &[("HIMENO_NVRTC_LIB", "/nonexistent/libnvrtc.so.13".into())],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("HIMENO_NVRTC_LIB=/nonexistent/libnvrtc.so.13 cannot be used"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_without_nvrtc_lists_what_was_tried() {
    if wheels("the missing-NVRTC message").is_none() {
        return;
    }
    let cache = Command::new("/sbin/ldconfig").arg("-p").output();
    if let Ok(c) = &cache
        && String::from_utf8_lossy(&c.stdout).contains("libnvrtc")
    {
        eprintln!(
            "SKIPPED the missing-NVRTC message: this machine has NVRTC in its ldconfig cache"
        );
        return;
    }
    let t = scratch("none");
    let o = gpu_run(&t, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for want in [
        "the NVRTC library cannot be loaded; tried libnvrtc.so.13 (loader search)",
        "libnvrtc.so.12 (loader search)",
        "pip install nvidia-cuda-nvrtc",
        "HIMENO_NVRTC_LIB=",
    ] {
        assert!(err.contains(want), "no `{want}` in:\n{err}");
    }
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn gpu_emu_driver_links_no_cuda_and_without_mpi_no_mpi() {
    let o = Command::new("ldd").arg(BIN).output().expect("ldd runs");
    let libs = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{libs}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The driver and NVRTC are loaded at run time, in every build: a GPU
    // build starts (and runs on the CPU) where CUDA is missing.
    for lib in ["libcuda", "libnvrtc", "libcudart"] {
        assert!(!libs.contains(lib), "{lib} linked:\n{libs}");
    }
    // A build without the mpi feature (`--features cuda` for a GPU machine
    // without MPI) needs no MPI library.
    if !MPI {
        assert!(!libs.contains("libmpi"), "MPI linked:\n{libs}");
    }
}
