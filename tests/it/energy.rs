//! `--energy` on one rank against a counter tree (`tests/both/energy.rs`
//! builds it and checks four ranks): exact figures, a whole-node Cray
//! counter, and the line each kind of broken counter gives; without any
//! source, one line naming the sources tried, exit 0.

use crate::both::energy::{SIZE_S, Tree, assert_figures, check_package_and_dram, flops, long_run};
use crate::common::{self, Launcher, TINY_RUN};

#[test]
fn one_rank_records_the_counters_deltas() {
    check_package_and_dram(Launcher::Local, 1);
}

#[test]
fn a_whole_node_counter_is_the_nodes_energy() {
    let dir = common::scratch("cray");
    let build = |tree: &mut Tree| {
        tree.cray("energy", 1000, 1012);
        tree.cray("cpu_energy", 500, 508);
        tree.cray("accel0_energy", 100, 102);
    };
    let (o, reads) = long_run(&dir, SIZE_S, &build, &|opts| {
        let mut c = common::himeno(opts);
        c.args(["--format", "json"]);
        c
    });
    let r = common::json_ok(&o);
    assert_eq!(reads, [2, 2, 2]);
    let e = &r["energy"];
    let window = e["window_s"].as_f64().unwrap();
    let iterations = r["iterations"].as_u64().unwrap();
    assert_figures(e, window, 12_000_000, flops(&r), iterations);
    assert_eq!(e["sources"], serde_json::json!(["Cray energy"]));
}

#[test]
fn each_broken_counter_gives_its_line() {
    let dir = common::scratch("broken");
    let build = |tree: &mut Tree| {
        tree.rapl(
            "intel-rapl:0",
            "package-0",
            5_000,
            1_005_000,
            Some(9_000_000),
        );
        // Wrapped: 9_000_000 - 8_500_000 + 250_000.
        tree.rapl(
            "intel-rapl:1",
            "package-1",
            8_500_000,
            250_000,
            Some(9_000_000),
        );
        tree.rapl_without_counter("intel-rapl:2", "package-2");
        tree.rapl_unreadable("intel-rapl:3", "package-3");
        // Backwards: no wrap value.
        tree.rapl("intel-rapl:0:0", "dram", 700, 600, None);
    };
    let (o, reads) = long_run(&dir, SIZE_S, &build, &|opts| common::himeno(opts));
    let text = common::stdout_ok(&o);
    assert_eq!(reads, [2, 2, 2]);
    let lines = common::lines_starting(&text, " Energy : ");
    assert_eq!(lines.len(), 1, "{text}");
    let line = lines[0];
    // package-0's 1 J and package-1's 0.75 J wrapped; the rest told.
    assert!(line.starts_with(" Energy : 1.750000 J in "), "{line}");
    for told in [
        "RAPL package-1 wrapped around once (counted)",
        "RAPL package-2: ",
        "intel-rapl:2/energy_uj is missing",
        "RAPL package-3: ",
        "intel-rapl:3/energy_uj is unreadable",
        "RAPL dram: it went backwards (700 to 600 uJ, and it has no wrap value)",
        "[TEST TREE ",
    ] {
        assert!(line.contains(told), "{told:?} not in {line}");
    }
}

#[test]
fn a_lone_counter_that_went_backwards_gives_its_line_and_no_figure() {
    // A counter that moves needs a loop long enough for the test's watcher
    // to move it between the two readings: a tiny run's loop can end
    // first, and then the counter reads alike twice.
    let dir = common::scratch("backwards");
    let out = dir.join("results.jsonl");
    let build = |t: &mut Tree| t.cray("energy", 10, 9);
    let (o, reads) = long_run(&dir, SIZE_S, &build, &|opts| {
        let mut c = common::himeno(opts);
        c.args(["--output", out.to_str().unwrap()]);
        c
    });
    assert_eq!(reads, [2]);
    let text = common::stdout_ok(&o);
    let lines = common::lines_starting(&text, " Energy : ");
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].starts_with(" Energy : no figure; "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("it went backwards (10000000 to 9000000 uJ"),
        "{}",
        lines[0]
    );
    let record = common::records(&out).pop().unwrap();
    assert!(record["energy"].get("energy_j").is_none(), "{record:#}");
}

/// Runs a short one-rank run on `tree` and returns its energy line and
/// record, the run having succeeded.
fn short_run(tree: &Tree) -> (String, serde_json::Value) {
    let dir = tree.root.parent().unwrap();
    let out = dir.join("results.jsonl");
    let mut cmd = tree.on(common::himeno(&TINY_RUN[..6]));
    cmd.args(["--format", "text", "--output", out.to_str().unwrap()]);
    let text = common::stdout_ok(&common::run(cmd));
    let lines = common::lines_starting(&text, " Energy : ");
    assert_eq!(lines.len(), 1, "{text}");
    (lines[0].to_string(), common::records(&out).remove(0))
}

#[test]
fn a_lone_broken_counter_gives_its_line_and_no_figure() {
    type Build = fn(&mut Tree);
    let cases: [(&str, Build, &str); 2] = [
        (
            "missing",
            |t| t.rapl_without_counter("intel-rapl:0", "package-0"),
            "is missing",
        ),
        (
            "unreadable",
            |t| t.rapl_unreadable("intel-rapl:0", "package-0"),
            "is unreadable",
        ),
    ];
    for (name, build, told) in cases {
        let dir = common::scratch(name);
        let mut tree = Tree::new(&dir);
        build(&mut tree);
        let (line, record) = short_run(&tree);
        assert!(line.starts_with(" Energy : no figure; "), "{line}");
        assert!(line.contains(told), "{name}: {told:?} not in {line}");
        assert!(record["energy"].get("energy_j").is_none(), "{record:#}");
        tree.reads();
    }
}

#[test]
fn a_timed_loop_under_a_second_gives_no_figure() {
    let dir = common::scratch("short");
    let mut tree = Tree::new(&dir);
    tree.rapl("intel-rapl:0", "package-0", 1, 2, None);
    let (line, record) = short_run(&tree);
    assert!(
        line.contains("shorter than the 1 s the counters need"),
        "{line}"
    );
    assert!(record["energy"].get("energy_j").is_none(), "{record:#}");
    assert_eq!(tree.reads(), [2]);
}

#[test]
fn without_a_source_one_line_names_those_tried() {
    let dir = common::scratch("none");
    let tree = Tree::new(&dir);
    let (line, record) = short_run(&tree);
    let sys = tree.root.display();
    assert_eq!(
        line,
        format!(
            " Energy : no figure; no energy counter: RAPL: {sys}/class/powercap is missing; \
             Cray pm_counters: {sys}/cray/pm_counters is missing; NVML: no rank ran on a GPU \
             [TEST TREE {sys}: not this machine's energy]"
        )
    );
    assert!(record["energy"].get("energy_j").is_none(), "{record:#}");
    // Off: nothing read, nothing said.
    let mut cmd = tree.on(common::himeno(&TINY_RUN));
    cmd.args(["--energy", "off"]);
    let r = common::json_ok(&common::run(cmd));
    assert!(r.get("energy").is_none(), "{r:#}");
}

/// The counter trees' watchers count reads through the SIGCHLDs that the
/// test process gets whenever any test's child ends: once, such a signal
/// ended a watcher's wait early, and a run that read a counter twice was
/// reported as having read it once.
#[test]
fn a_counters_watcher_counts_reads_through_signals() {
    use std::os::unix::fs::MetadataExt;
    use wait_timeout::ChildExt;
    // The handler every `wait_or_kill` installs, in case no test has yet.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    assert!(
        child
            .wait_timeout(std::time::Duration::from_secs(30))
            .unwrap()
            .is_some()
    );
    let dir = common::scratch("watcher");
    let mut tree = Tree::new(&dir);
    tree.cray("energy", 1, 2);
    let file = tree.root.join("cray/pm_counters/energy");
    let interrupt = |tree: &Tree| {
        for _ in 0..5 {
            tree.signal_watchers(libc::SIGCHLD);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    interrupt(&tree);
    let before = std::fs::metadata(&file).unwrap().ino();
    assert!(std::fs::read_to_string(&file).unwrap().starts_with("1 J"));
    // Only stat from here until the next read: a stat is not a read.
    let started = std::time::Instant::now();
    while std::fs::metadata(&file).unwrap().ino() == before {
        assert!(started.elapsed().as_secs() < 30, "the counter never moved");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    interrupt(&tree);
    assert!(std::fs::read_to_string(&file).unwrap().starts_with("2 J"));
    assert_eq!(tree.reads(), [2]);
}
