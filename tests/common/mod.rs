//! The test harness of both test binaries (`tests/it`, the fast tier, and
//! `tests/system`, the system tier; each includes this folder with
//! `#[path]`): run the built `himeno` binary, alone or under `mpirun`,
//! with a time limit, read its JSON report and results files, and make
//! scratch folders.

#![allow(dead_code)]

pub mod hostile;
pub mod limits;
pub mod signals;
pub mod trace;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Gosa agreement, with the product's own tolerance (one constant for
/// every comparison of gosa values).
pub use himeno::verify::gosa_agrees;

/// The errors that mean "there is no GPU here", the only ones a GPU test
/// may skip on: no driver library, a driver that sees no device (counted,
/// or refused at initialisation), and a build without the `cuda` feature.
pub const NO_GPU_HERE: [&str; 4] = [
    "no CUDA driver found",
    "the CUDA driver sees no device",
    "CUDA_ERROR_NO_DEVICE",
    "this build has no GPU support: rebuild with `--features cuda`",
];

/// Path of the binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_himeno");

/// Whether this test binary was built with MPI support.
pub const MPI: bool = cfg!(feature = "mpi");

/// The smallest real run: one iteration of a 3x3x3 grid, no rehearsal,
/// a JSON report.
pub const TINY_RUN: [&str; 8] = [
    "--grid",
    "3x3x3",
    "--iterations",
    "1",
    "--warmup",
    "0",
    "--format",
    "json",
];

/// A command running the binary with `args`.
pub fn himeno(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    own_session_dir(&mut c);
    model_cache(&mut c);
    c
}

/// The last-level cache the suite's cases are sized for: size S (28 MiB of
/// fields) within it, size M (232 MiB) far beyond it.
pub const MODELLED_CACHE: &str = "32M";

/// Makes the command's runs see a last-level cache of [`MODELLED_CACHE`]
/// (`HIMENO_LLC_BYTES`), unless the suite was started with one stated: a
/// virtual machine is told of its host's whole cache (a 2-vCPU guest saw a
/// 480 MiB L3), and the cases that check in-cache choices, or that a grid
/// is beyond the cache, would test another machine there. A test that
/// wants this machine's own cache removes the variable.
pub fn model_cache(c: &mut Command) {
    if std::env::var_os("HIMENO_LLC_BYTES").is_none() {
        c.env("HIMENO_LLC_BYTES", MODELLED_CACHE);
    }
}

/// Gives the command's Open MPI job a session directory of its own: Open
/// MPI 4.1's singletons and launchers all create and, when it empties,
/// remove one top directory (`/tmp/ompi.HOST.UID`), and two of the many
/// concurrent tests' jobs racing on it failed in `orte_init` ("mkdir ...
/// File exists") in a CI run. The folders go under `HIMENO_TEST_SESSIONS`
/// (`scripts/test.sh` makes it with `mktemp -d`, a short path, as the
/// session directory holds Unix sockets of at most 108 bytes, and removes
/// it), else under the build's own temporary folder.
fn own_session_dir(c: &mut Command) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if !MPI || hydra() {
        return;
    }
    let root = std::env::var_os("HIMENO_TEST_SESSIONS")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = root.join(format!("ompi-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    c.env("OMPI_MCA_orte_tmpdir_base", dir);
}

/// The MPI launcher the tests run: `HIMENO_MPIRUN` (`mpiexec.mpich` for a
/// build against MPICH, see scripts/test.sh), else `mpirun`.
pub fn launcher() -> String {
    std::env::var("HIMENO_MPIRUN").unwrap_or_else(|_| "mpirun".to_string())
}

/// Whether the launcher is MPICH's Hydra, whose options differ from Open
/// MPI's mpirun (and which oversubscribes and runs as root unasked).
pub fn hydra() -> bool {
    static HYDRA: OnceLock<bool> = OnceLock::new();
    *HYDRA.get_or_init(|| {
        Command::new(launcher())
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("HYDRA"))
    })
}

/// The launcher words for `np` ranks, as `scripts/mpirun-for` (the one
/// place that knows the options this machine's launcher needs) prints
/// them; asked once per rank count.
fn launcher_words(np: usize) -> Vec<String> {
    static WORDS: OnceLock<Mutex<BTreeMap<usize, Vec<String>>>> = OnceLock::new();
    let mut known = WORDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    known
        .entry(np)
        .or_insert_with(|| {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mpirun-for");
            let o = Command::new(script)
                .arg(np.to_string())
                .output()
                .expect("scripts/mpirun-for runs");
            assert!(
                o.status.success(),
                "scripts/mpirun-for {np}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .clone()
}

/// A command running the binary on `np` ranks under the MPI launcher, with
/// the options `scripts/mpirun-for` gives it on this machine.
pub fn mpirun(np: usize, args: &[&str]) -> Command {
    let words = launcher_words(np);
    let mut c = Command::new(&words[0]);
    c.args(&words[1..]);
    if !hydra() {
        // Keep Open MPI local on the single test machine (no cross-memory
        // attach in containers), and let the many tests' concurrent jobs
        // share its cores, as --oversubscribe would beyond them.
        c.env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
            .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    }
    c.arg(BIN).args(args);
    own_session_dir(&mut c);
    model_cache(&mut c);
    c
}

/// Whether an MPI test can run; when it cannot, says so on stderr (shown
/// with `cargo test -- --nocapture` or `--show-output`), naming the test.
pub fn mpi_or_skip(test: &str) -> bool {
    if !MPI {
        eprintln!("skipped {test}: this test binary was built without the mpi feature");
    }
    MPI
}

/// How a multi-rank test starts its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// Processes under a real `mpirun`.
    Mpirun,
    /// Threads of one process (`--local-ranks`), in every build.
    Local,
}

/// The launchers this tier tests: in-process ranks in the fast tier,
/// `mpirun` in the system tier of a build with the mpi feature (so a test
/// of `tests/both`, compiled into both binaries, runs each launcher once
/// over the two tiers). A system tier without MPI has none, and says so.
pub fn launchers() -> Vec<Launcher> {
    if !crate::SYSTEM_TIER {
        vec![Launcher::Local]
    } else if MPI {
        vec![Launcher::Mpirun]
    } else {
        eprintln!("skipped the mpirun cases: this test binary was built without the mpi feature");
        Vec::new()
    }
}

/// Every launcher this build has, whatever the tier: for a system-tier
/// test too long for the fast tier that checks in-process ranks too.
pub fn every_launcher() -> Vec<Launcher> {
    if MPI {
        vec![Launcher::Local, Launcher::Mpirun]
    } else {
        vec![Launcher::Local]
    }
}

/// A command running the binary on `np` ranks started by `launcher`.
/// Options go before any subcommand's own, so `args` may start with a
/// subcommand (`selftest`, `bench stream`).
pub fn ranks(launcher: Launcher, np: usize, args: &[&str]) -> Command {
    match launcher {
        Launcher::Mpirun => mpirun(np, args),
        Launcher::Local => {
            let n = np.to_string();
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["--local-ranks", &n]);
            himeno(&all)
        }
    }
}

/// A command that runs `program` with every signal at its default
/// disposition, as a batch system starts a job's shell. A shell cannot
/// trap a signal that was ignored when it started, and the test process
/// may have inherited ignored ones: SIGHUP under `nohup`, SIGINT and
/// SIGQUIT when the suite itself was started in the background (`cmd &`).
/// Tests that signal a script start it through this.
pub fn with_default_signals(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("env");
    c.arg("--default-signal").arg(program);
    model_cache(&mut c);
    c
}

/// Writes `text` to `path` as an executable script (mode 755): the stand-in
/// programs tests put first on PATH.
pub fn write_executable(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A fresh path `name` in a folder of this test process, for results files
/// and plots (`tag` keeps the areas' files apart).
pub fn temp_file(tag: &str, name: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(name);
    let _ = std::fs::remove_file(&f);
    f
}

/// The one deadline of the tests: waits for `child` at most `limit`; a
/// child still running then is killed with everything it started, and
/// reaped (never left behind), and the test fails, saying `what` and
/// `stderr()` (what it wrote, read only after the kill).
pub fn wait_or_kill(
    child: &mut Child,
    limit: Duration,
    what: &dyn std::fmt::Debug,
    stderr: impl FnOnce() -> String,
) -> ExitStatus {
    match child.wait_timeout(limit).expect("wait works") {
        Some(s) => s,
        None => {
            kill_tree(child.id());
            let _ = child.wait();
            panic!(
                "{what:?} did not finish within {limit:?} (hang?); stderr:\n{}",
                stderr()
            );
        }
    }
}

/// Processes whose parent is `parent`, read from /proc.
pub fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so split after ')'.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let ppid = after.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Kills (SIGKILL) `pid` and every process below it. The whole tree is
/// read before the first kill: a process killed first would hand its
/// children to init, out of reach, and they would run on after the test
/// (a stopped sweep's run left so took a core for the rest of a CI run).
pub fn kill_tree(pid: u32) {
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        tree.extend(children(tree[i]));
        i += 1;
    }
    for p in tree.iter().rev() {
        // SAFETY: kill(2) takes plain integers; a process already gone
        // only makes it fail with ESRCH.
        unsafe { libc::kill(*p as libc::pid_t, libc::SIGKILL) };
    }
}

/// Kills a process and everything below it when a test fails before the
/// process ended (a failed assertion between start and finish would
/// otherwise leave a whole job running after the test).
pub struct KillOnPanic(pub u32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            kill_tree(self.0);
        }
    }
}

/// [`wait_or_kill`] for a child whose stderr a thread reads into a `T`
/// (bytes or text): the status and what the thread read, which is also
/// the failure's message when the child has to be killed.
pub fn wait_or_kill_reading<T: Default + AsRef<[u8]>>(
    child: &mut Child,
    limit: Duration,
    what: &dyn std::fmt::Debug,
    stderr: std::thread::JoinHandle<T>,
) -> (ExitStatus, T) {
    let mut reader = Some(stderr);
    let mut read = || {
        reader
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    };
    let status = wait_or_kill(child, limit, what, || {
        String::from_utf8_lossy(read().as_ref()).into_owned()
    });
    (status, read())
}

/// Runs `cmd` to completion, killing it after `limit`; a run that has to be
/// killed fails the test (a hang is a bug).
pub fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    let mut child: Child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let (status, stderr) = wait_or_kill_reading(&mut child, limit, &cmd, err_reader);
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr,
    }
}

/// Runs `cmd` with a two-minute limit.
pub fn run(cmd: Command) -> Output {
    run_with_limit(cmd, Duration::from_secs(120))
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines of standard error that himeno wrote (`himeno...`), leaving
/// out what a launcher adds around them.
pub fn himeno_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("himeno"))
        .map(String::from)
        .collect()
}

/// Asserts success and returns standard output.
pub fn stdout_ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts success and parses the JSON report on standard output.
pub fn json_ok(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout_ok(o))
        .unwrap_or_else(|e| panic!("stdout is not one JSON report ({e}):\n{}", stdout(o)))
}

/// Process grids over 1..8 ranks that split each axis, alone and together.
pub const PROCESS_GRIDS: [(usize, &str); 12] = [
    (1, "1x1x1"),
    (2, "2x1x1"),
    (2, "1x2x1"),
    (2, "1x1x2"),
    (3, "3x1x1"),
    (3, "1x1x3"),
    (4, "2x2x1"),
    (4, "1x2x2"),
    (4, "2x1x2"),
    (6, "3x2x1"),
    (6, "1x2x3"),
    (8, "2x2x2"),
];

/// The installed NVRTC wheel folder of `major` (the folder holding
/// `libnvrtc.so.<major>` and its built-ins), or why there is none.
pub fn nvrtc_wheel_dir(major: u32) -> Result<PathBuf, String> {
    let var = format!("HIMENO_NVRTC{major}_LIB");
    if let Some(p) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p).parent().unwrap().to_path_buf());
    }
    let root = std::env::var_os("HIMENO_NVRTC_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("himeno-nvrtc"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/himeno-nvrtc")))
        .ok_or("no HOME")?;
    let dir = match major {
        12 => root.join("cu12/nvidia/cuda_nvrtc/lib"),
        _ => root.join(format!("cu{major}/nvidia/cu{major}/lib")),
    };
    if dir.join(format!("libnvrtc.so.{major}")).is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no NVRTC {major} in {} (run scripts/install-nvrtc.sh)",
            dir.display()
        ))
    }
}

/// Asserts a clean one-line failure with exit code 2 that mentions one of
/// `words`, and no panic.
pub fn assert_clean_error(o: &Output, words: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
    assert!(!err.contains("panicked"), "panic:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "expected one error line:\n{err}");
    assert!(
        words.iter().any(|w| lines[0].contains(w)),
        "{words:?} not in: {}",
        lines[0]
    );
    assert!(stdout(o).is_empty(), "stdout:\n{}", stdout(o));
}

/// The `bench transfer --max-bytes 65536` command line, JSON report.
pub const TRANSFER_64K: [&str; 6] = [
    "bench",
    "transfer",
    "--max-bytes",
    "65536",
    "--format",
    "json",
];

/// Asserts the report of [`TRANSFER_64K`]: 8 B .. 64 KiB is 14 sizes, 5
/// series each, every rate and the pinned latency positive.
pub fn assert_transfer_report(r: &serde_json::Value) {
    let samples = r["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 14 * 5, "{r}");
    for s in samples {
        assert!(s["gbytes_per_s"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert!(r["latency_us"]["h2d/pinned"].as_f64().unwrap() > 0.0, "{r}");
}

/// Two in-process ranks splitting size M along k, one thread each: 2 x 14
/// fields of 2.2 M points (235 MiB), beyond any last-level cache.
pub const TWO_RANKS_OF_M: [&str; 8] = [
    "--size",
    "M",
    "--procs",
    "1x1x2",
    "--local-ranks",
    "2",
    "--threads",
    "1",
];

/// Four iterations of a grid of 18 x 18 x 34 points (14 fields of 44 KiB),
/// well inside any last-level cache.
pub const IN_CACHE: [&str; 4] = ["--grid", "18x18x34", "--iterations", "4"];

/// The lines of a report that start with `head`.
pub fn lines_starting<'a>(text: &'a str, head: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(head)).collect()
}

/// Compiles the C program at `src` (relative to the repository) with `cc`
/// and `flags` into the build's temporary folder, as `name` and this test
/// process's id; the path of the program.
pub fn compile_c(src: &str, name: &str, flags: &[&str]) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(src);
    let exe = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-{name}-{}", std::process::id()));
    let o = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is installed: scripts/install-deps.sh installs one");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

/// A fresh, empty scratch folder for one test, in the build's temporary
/// folder (on the file system a virtual cluster's hosts share), named
/// after the calling test file, this test process and `name`.
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let file = std::path::Path::new(std::panic::Location::caller().file());
    let area = file
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-{area}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// The records of a results file, one JSON value a line; none when the
/// file does not exist (a run that must append nothing), a failed test on
/// any other error or on a line that is not a whole record.
pub fn records(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("{}: {e}", path.display()),
    };
    text.lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a whole record ({e}): {l}"))
        })
        .collect()
}

/// Whether the virtual-cluster tests were asked for (`HIMENO_CLUSTER=1`,
/// which `scripts/test.sh` sets as root): they bring up network
/// namespaces and Slurm daemons, never merely because the user is root.
/// When not asked, says so on stderr, naming `what`.
pub fn cluster_asked(what: &str) -> bool {
    let asked = std::env::var_os("HIMENO_CLUSTER").is_some_and(|v| v == "1");
    if !asked {
        eprintln!(
            "skipping {what}: the virtual-cluster tests run only when asked (HIMENO_CLUSTER=1, \
             as root; scripts/test.sh sets it)"
        );
    }
    asked
}

/// The sweeps per exchange of each calibration trial of a record's
/// `temporal_choice`, in the order timed (the classic sweep first).
pub fn trial_sweeps(choice: &serde_json::Value) -> Vec<u64> {
    choice["trials"]
        .as_array()
        .unwrap_or_else(|| panic!("no trials: {choice}"))
        .iter()
        .map(|t| t["sweeps"].as_u64().unwrap())
        .collect()
}

/// Whether `--temporal auto` may take `t` sweeps per exchange: the
/// classic sweep or one of its candidates.
pub fn auto_offers(t: u64) -> bool {
    t == 1 || himeno::temporal::AUTO_CANDIDATES.contains(&(t as usize))
}
