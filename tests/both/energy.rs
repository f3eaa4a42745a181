//! `--energy` against a counter tree the test builds (`HIMENO_ENERGY_ROOT`):
//! the record's joules, power and GFLOPS/W are the counters' deltas
//! exactly, per node and for the job, on one rank and on four, with each
//! tier's launcher. The helpers that build the tree live here for the
//! fast and system tests of energy.
//!
//! How a counter advances deterministically: the run reads each counter
//! file exactly once at the start of its timed loop and once at its end.
//! A watcher (inotify) sees the run close the file after its first read
//! and replaces it (write and rename) with the end value, a second or
//! more before the run reads it again. So the delta is the test's own,
//! and nothing of the reader is faked.

use crate::common::{self, Launcher};
use serde_json::Value;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The grid of the energy runs: size S, a few milliseconds an iteration.
pub const SIZE_S: [&str; 2] = ["--size", "S"];

/// Runs `cmd_of(options)` on `grid` and a fresh tree that `build` makes
/// in `dir`,
/// for a timed loop long enough for the counters (`--energy` wants at
/// least a second), short enough for the fast tier: `--seconds` sizes the
/// loop from the rehearsal, and on a busy machine a rehearsal slower than
/// the loop makes it shorter than asked, so a run whose loop was under a
/// second (it says so) is made again, asking for longer. Returns the
/// output and how many times the run read each counter file.
pub fn long_run(
    dir: &Path,
    grid: [&str; 2],
    build: &dyn Fn(&mut Tree),
    cmd_of: &dyn Fn(&[&str]) -> std::process::Command,
) -> (std::process::Output, Vec<usize>) {
    for seconds in ["2", "5", "10"] {
        let _ = std::fs::remove_dir_all(dir.join("sys"));
        let mut tree = Tree::new(dir);
        build(&mut tree);
        let o = common::run(tree.on(cmd_of(&[
            grid[0],
            grid[1],
            "--seconds",
            seconds,
            "--warmup",
            "10",
        ])));
        let reads = tree.reads();
        if !common::stdout(&o).contains("shorter than the 1 s") {
            return (o, reads);
        }
    }
    panic!("three timed loops of --seconds 2, 5 and 10 each lasted under a second");
}

/// A counter tree under construction, with the watchers that advance it.
pub struct Tree {
    /// The folder laid out like `/sys`.
    pub root: PathBuf,
    /// One watcher per counter file; each returns how many times the run
    /// read its file.
    watchers: Vec<JoinHandle<usize>>,
}

impl Tree {
    /// An empty tree in `dir`.
    pub fn new(dir: &Path) -> Tree {
        let root = dir.join("sys");
        std::fs::create_dir_all(&root).unwrap();
        Tree {
            root,
            watchers: Vec::new(),
        }
    }

    /// A RAPL zone `folder` named `name` whose `energy_uj` goes from
    /// `start` to `end`, with `max_energy_range_uj` when given.
    pub fn rapl(&mut self, folder: &str, name: &str, start: u64, end: u64, max: Option<u64>) {
        let zone = self.root.join("class/powercap").join(folder);
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), format!("{name}\n")).unwrap();
        if let Some(m) = max {
            std::fs::write(zone.join("max_energy_range_uj"), format!("{m}\n")).unwrap();
        }
        self.counter(
            &zone.join("energy_uj"),
            &format!("{start}\n"),
            &format!("{end}\n"),
        );
    }

    /// A RAPL zone without its counter file.
    pub fn rapl_without_counter(&mut self, folder: &str, name: &str) {
        let zone = self.root.join("class/powercap").join(folder);
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), format!("{name}\n")).unwrap();
    }

    /// A RAPL zone whose counter cannot be read (a folder stands at its
    /// name: the test runs as root, which reads any file mode).
    pub fn rapl_unreadable(&mut self, folder: &str, name: &str) {
        let zone = self.root.join("class/powercap").join(folder);
        std::fs::create_dir_all(zone.join("energy_uj")).unwrap();
        std::fs::write(zone.join("name"), format!("{name}\n")).unwrap();
    }

    /// A Cray pm_counters file going from `start` to `end` joules.
    pub fn cray(&mut self, file: &str, start: u64, end: u64) {
        let dir = self.root.join("cray/pm_counters");
        std::fs::create_dir_all(&dir).unwrap();
        self.counter(
            &dir.join(file),
            &format!("{start} J 1700000000000000 us\n"),
            &format!("{end} J 1700000002000000 us\n"),
        );
    }

    /// Writes `start` to `path` and arms a watcher that writes `end` once
    /// the file has been read and closed.
    fn counter(&mut self, path: &Path, start: &str, end: &str) {
        std::fs::write(path, start).unwrap();
        self.watchers
            .push(advance_after_read(path, end.to_string()));
    }

    /// `cmd` reading this tree.
    pub fn on(&self, mut cmd: std::process::Command) -> std::process::Command {
        cmd.env("HIMENO_ENERGY_ROOT", &self.root);
        cmd
    }

    /// Sends `signal` to each watcher's thread, as the kernel may send a
    /// SIGCHLD meant for the test process to any of its threads.
    pub fn signal_watchers(&self, signal: libc::c_int) {
        use std::os::unix::thread::JoinHandleExt;
        for w in &self.watchers {
            // SAFETY: the thread is alive until joined in `reads`, which
            // takes the tree.
            assert_eq!(unsafe { libc::pthread_kill(w.as_pthread_t(), signal) }, 0);
        }
    }

    /// Waits for the watchers: how many times the run read each file.
    pub fn reads(self) -> Vec<usize> {
        self.watchers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect()
    }
}

/// Watches `path`'s folder; after the first time a process closes `path`
/// having read it, replaces it with `end`. Returns how many reads it saw
/// (it stops at a second one, or after a quiet minute).
///
/// The test process has a SIGCHLD handler (`wait-timeout` installs one),
/// and every child any test reaps interrupts a `poll` in whichever thread
/// the kernel picks, SA_RESTART or not: an interrupted wait is waited
/// again, never taken for the end (that once returned one read of two).
fn advance_after_read(path: &Path, end: String) -> JoinHandle<usize> {
    let dir = path.parent().unwrap().to_path_buf();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    // SAFETY: plain inotify calls on a descriptor this function owns.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    assert!(fd >= 0, "inotify_init1");
    let c = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let wd = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_CLOSE_NOWRITE) };
    assert!(wd >= 0, "inotify_add_watch {}", dir.display());
    std::thread::spawn(move || {
        let mut reads = 0;
        let mut buf = [0u8; 4096];
        let mut quiet_since = Instant::now();
        while reads < 2 {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let left = QUIET.saturating_sub(quiet_since.elapsed());
            // SAFETY: one pollfd, then a read into the buffer it owns.
            let ready = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
            if ready < 0 && interrupted() {
                continue;
            }
            if ready <= 0 {
                break;
            }
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 && interrupted() {
                continue;
            }
            if n <= 0 {
                break;
            }
            quiet_since = Instant::now();
            let mut at = 0;
            while at + 16 <= n as usize {
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
                let raw = &buf[at + 16..at + 16 + len];
                let got = raw.split(|&b| b == 0).next().unwrap_or_default();
                if got == name.as_bytes() {
                    reads += 1;
                    if reads == 1 {
                        let tmp = dir.join(format!(".{name}.next"));
                        std::fs::write(&tmp, &end).unwrap();
                        std::fs::rename(&tmp, dir.join(&name)).unwrap();
                    }
                }
                at += 16 + len;
            }
        }
        unsafe { libc::close(fd) };
        reads
    })
}

/// How long a watcher waits for a read before it gives up.
const QUIET: Duration = Duration::from_secs(60);

/// Whether the call that just failed was interrupted by a signal.
fn interrupted() -> bool {
    std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
}

/// The flops of `r`'s timed iterations (34 per interior point).
pub fn flops(r: &Value) -> f64 {
    let g = &r["grid"];
    let points: f64 = (0..3)
        .map(|i| (g[i].as_u64().unwrap() - 2) as f64)
        .product();
    34.0 * points * r["iterations"].as_u64().unwrap() as f64
}

/// Asserts that `e` (a node's or the job's energy) is `uj` microjoules
/// over its window, with the power, GFLOPS/W and joules per iteration
/// they make for `flops` and `iterations`, exactly.
pub fn assert_figures(e: &Value, window_s: f64, uj: u64, flops: f64, iterations: u64) {
    let j = uj as f64 / 1e6;
    assert_eq!(e["energy_j"].as_f64(), Some(j), "{e:#}");
    assert_eq!(e["avg_power_w"].as_f64(), Some(j / window_s), "{e:#}");
    assert_eq!(e["gflops_per_w"].as_f64(), Some(flops / 1e9 / j), "{e:#}");
    assert_eq!(
        e["j_per_iteration"].as_f64(),
        Some(j / iterations as f64),
        "{e:#}"
    );
}

/// Two summed RAPL zones and one inside a package.
pub fn package_and_dram(t: &mut Tree) {
    t.rapl(
        "intel-rapl:0",
        "package-0",
        1_000_000,
        4_500_000,
        Some(262_143_328_850),
    );
    t.rapl(
        "intel-rapl:0:0",
        "core",
        10,
        2_000_010,
        Some(262_143_328_850),
    );
    t.rapl("intel-rapl:0:1", "dram", 200, 700_200, Some(65_712_999_613));
}

/// Checks a run on `np` ranks started by `launcher` against
/// [`package_and_dram`]: 3.5 J + 0.7 J on its one node and for the job.
pub fn check_package_and_dram(launcher: Launcher, np: usize) {
    let dir = common::scratch(&format!("energy-{np}-{launcher:?}"));
    let (o, reads) = long_run(&dir, SIZE_S, &package_and_dram, &|opts| {
        let mut all = opts.to_vec();
        all.extend(["--format", "json"]);
        if np == 1 {
            common::himeno(&all)
        } else {
            common::ranks(launcher, np, &all)
        }
    });
    let r = common::json_ok(&o);
    assert_eq!(reads, [2, 2, 2], "each counter is read twice, by one rank");
    let e = &r["energy"];
    let window = e["window_s"].as_f64().unwrap();
    assert!(window >= 1.0, "{e:#}");
    let iterations = r["iterations"].as_u64().unwrap();
    let flops = flops(&r);
    assert_figures(e, window, 4_200_000, flops, iterations);
    assert_eq!(
        e["sources"],
        serde_json::json!(["RAPL package-0", "RAPL dram"])
    );
    assert_eq!(
        e["test_tree"].as_str(),
        Some(dir.join("sys").to_str().unwrap())
    );
    let nodes = e["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{e:#}");
    assert_figures(
        &nodes[0],
        nodes[0]["window_s"].as_f64().unwrap(),
        4_200_000,
        flops,
        iterations,
    );
    let core = &nodes[0]["sources"][1];
    assert_eq!(
        (core["name"].as_str(), core["summed"].as_bool()),
        (Some("RAPL core"), Some(false))
    );
    assert_eq!(core["joules"].as_f64(), Some(2.0));
    assert!(e.get("notes").is_none(), "{e:#}");
}

#[test]
fn four_ranks_record_the_counters_deltas() {
    for launcher in common::launchers() {
        check_package_and_dram(launcher, 4);
    }
}
