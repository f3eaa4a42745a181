//! Multi-host runs on the virtual cluster of `scripts/local-cluster.sh`:
//! hosts that are network namespaces with their own names and addresses, a
//! real slurmctld and one real slurmd per host. Halos between hosts travel
//! over TCP; the tests check that a run over two hosts is VALID and bitwise
//! equal to one rank under mpirun and under srun, that node-local ranks
//! are right, that ping-pong marks inter-node pairs, and that the shipped
//! Slurm template runs a study that `himeno report` splits by hosts, stops
//! with an incomplete record before its time limit, and shares a results
//! file with a concurrent job; that the long-run template, warned
//! before its limit, checkpoints, requeues itself and ends with the
//! uninterrupted run's answer; and that a checkpoint folder local to each
//! host is refused before the run, a shared one used.
//!
//! They run only when asked (`HIMENO_CLUSTER=1`; scripts/test.sh sets it
//! as root), never merely because the user is root. The cluster: the one
//! at `HIMENO_CLUSTER_DIR` when that is set (scripts/test.sh brings it up
//! and takes it down), else the one at the default folder if it is up,
//! else one these tests bring up and take down when the test process
//! exits. They skip, saying why, when not asked and where no cluster can
//! exist: a build without MPI, or not root.

use crate::common::*;
use serde_json::Value;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// Default state folder of `scripts/local-cluster.sh`.
const DEFAULT_DIR: &str = "/run/himeno-cluster";

/// Longest a batch job of these tests may take, queueing included.
const JOB_LIMIT: Duration = Duration::from_secs(300);

/// A virtual cluster that is up.
struct Cluster {
    /// Its state folder (slurm.conf, hostfile).
    dir: PathBuf,
}

impl Cluster {
    /// A command of `scripts/local-cluster.sh`.
    fn script(&self, args: &[&str]) -> Command {
        let mut c = Command::new(root().join("scripts/local-cluster.sh"));
        c.args(args).env("HIMENO_CLUSTER_DIR", &self.dir);
        c
    }

    /// A Slurm client command (sbatch, salloc, scontrol) of this cluster,
    /// run from the repository root as the templates expect.
    fn slurm(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(root())
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            // Ranks outnumber the cores: let waiting ones yield.
            .env("OMPI_MCA_mpi_yield_when_idle", "1");
        c
    }
}

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The cluster's CPUs as the tests of this process hold them: a test
/// that needs them all to itself (two jobs that must run at the same
/// time) takes them whole; the others share them, and Slurm queues
/// their jobs as it would anyone's.
static CPUS: RwLock<()> = RwLock::new(());

/// The cluster, held by one test for as long as it runs: `G` is its hold
/// on the CPUs, given back when the test ends.
struct Held<G> {
    cluster: &'static Cluster,
    _cpus: G,
}

impl<G> Deref for Held<G> {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        self.cluster
    }
}

/// The cluster, shared with the other tests, or `None` (with the reason
/// printed) where none can exist.
fn cluster() -> Option<Held<RwLockReadGuard<'static, ()>>> {
    // A failed test poisons the lock; the CPUs are free again all the same.
    held(|| CPUS.read().unwrap_or_else(|e| e.into_inner()))
}

/// The cluster with no other test's job on it while the caller runs.
fn whole_cluster() -> Option<Held<RwLockWriteGuard<'static, ()>>> {
    held(|| CPUS.write().unwrap_or_else(|e| e.into_inner()))
}

/// The cluster once it is up, held as `hold` takes the CPUs.
fn held<G>(hold: impl FnOnce() -> G) -> Option<Held<G>> {
    let cluster = up()?;
    Some(Held {
        cluster,
        _cpus: hold(),
    })
}

/// The cluster brought up once per test process, or `None`.
fn up() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
    CLUSTER.get_or_init(bring_up).as_ref()
}

fn bring_up() -> Option<Cluster> {
    if !MPI {
        eprintln!("skipping the cluster tests: this build has no MPI (--features mpi)");
        return None;
    }
    if !cluster_asked("the cluster tests") {
        return None;
    }
    let given = std::env::var_os("HIMENO_CLUSTER_DIR");
    let dir = PathBuf::from(given.clone().unwrap_or_else(|| DEFAULT_DIR.into()));
    let c = Cluster { dir };
    let status = run_with_limit(c.script(&["status"]), Duration::from_secs(60));
    if status.status.success() {
        return Some(c);
    }
    if given.is_some() {
        panic!(
            "HIMENO_CLUSTER_DIR={} names a cluster that is not up:\n{}{}",
            c.dir.display(),
            stdout(&status),
            stderr(&status)
        );
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "skipping the cluster tests: a virtual cluster needs root (namespaces, a bridge, \
             daemons); run scripts/local-cluster.sh up as root and set HIMENO_CLUSTER_DIR"
        );
        return None;
    }
    let up = run_with_limit(c.script(&["up"]), Duration::from_secs(600));
    assert!(
        up.status.success(),
        "scripts/local-cluster.sh up failed:\n{}",
        stderr(&up)
    );
    // This process brought it up: it takes it down when it exits, after
    // every test (also failed ones) has finished.
    extern "C" fn take_down() {
        let _ = Command::new(root().join("scripts/local-cluster.sh"))
            .arg("down")
            .env("HIMENO_CLUSTER_DIR", DEFAULT_DIR)
            .status();
    }
    // SAFETY: registering a plain function with no arguments.
    unsafe { libc::atexit(take_down) };
    Some(c)
}

/// srun's MPI plugin for the MPI library of this build, and the other one.
/// Debian's Open MPI speaks PMIx only; Debian's MPICH speaks PMI-2 only.
fn pmi_plugins() -> (&'static str, &'static str) {
    if hydra() {
        ("pmi2", "pmix")
    } else {
        ("pmix", "pmi2")
    }
}

/// A verified run whose answer is stored in inputs/known_answers.json.
const CHECKED: [&str; 8] = [
    "--size",
    "S",
    "--iterations",
    "100",
    "--threads",
    "1",
    "--format",
    "json",
];

/// The field fingerprint of a one-rank run of `CHECKED`.
fn one_rank_fingerprint() -> String {
    static FP: OnceLock<String> = OnceLock::new();
    FP.get_or_init(|| {
        let r = json_ok(&run(himeno(&CHECKED)));
        assert_eq!(r["verified"], true, "{r}");
        r["p_fingerprint"].as_str().unwrap().to_string()
    })
    .clone()
}

/// Checks a 4-rank report from two hosts: VALID, bitwise equal to one
/// rank, two ranks per host with node-local ranks 0 and 1.
fn assert_two_hosts_valid(r: &Value) {
    assert_eq!(r["ranks"], 4, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(
        r["p_fingerprint"].as_str().unwrap(),
        one_rank_fingerprint(),
        "the field over two hosts differs from one rank's"
    );
    assert_eq!(
        r["provenance"]["hosts"],
        serde_json::json!(["node1", "node2"])
    );
    for host in ["node1", "node2"] {
        let mut local: Vec<u64> = r["per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["host"] == host)
            .map(|p| p["node_rank"].as_u64().unwrap())
            .collect();
        local.sort_unstable();
        assert_eq!(local, [0, 1], "node-local ranks on {host}: {r}");
    }
}

#[test]
fn mpirun_over_two_hosts_is_valid_and_bitwise_equal_to_one_rank() {
    let Some(c) = cluster() else { return };
    let mut args = vec!["-n", "4", BIN, "--procs", "2x1x2"];
    args.extend(CHECKED);
    let mut cmd = c.script(&["mpirun"]);
    cmd.args(&args).env("OMPI_MCA_mpi_yield_when_idle", "1");
    assert_two_hosts_valid(&json_ok(&run(cmd)));
    if !hydra() {
        // Shared memory cannot reach the other host: without the TCP
        // transport Open MPI has no way to send the halos at all.
        let mut cmd = c.script(&["mpirun", "--mca", "btl", "self,vader"]);
        cmd.args(&args);
        let o = run(cmd);
        assert!(!o.status.success(), "ran without TCP: {}", stdout(&o));
    }
}

#[test]
fn srun_in_an_allocation_is_valid_with_the_pmi_plugin_of_this_mpi() {
    let Some(c) = cluster() else { return };
    let (good, bad) = pmi_plugins();
    let mpi = format!("--mpi={good}");
    let mut args = vec![
        "-N",
        "2",
        "-n",
        "4",
        "--ntasks-per-node=2",
        "--time=5",
        "srun",
        &mpi,
        BIN,
        "--procs",
        "2x2x1",
    ];
    args.extend(CHECKED);
    assert_two_hosts_valid(&json_ok(&run_with_limit(
        c.slurm("salloc", &args),
        JOB_LIMIT,
    )));
    // The other plugin does not start a job of this MPI library: the run
    // must fail, never run as independent single ranks.
    let mpi = format!("--mpi={bad}");
    let mut args = vec!["-N", "2", "-n", "2", "--time=5", &mpi, BIN];
    args.extend(TINY_RUN);
    let o = run_with_limit(c.slurm("srun", &args), JOB_LIMIT);
    assert!(!o.status.success(), "--mpi={bad} ran: {}", stdout(&o));
    assert!(stdout(&o).is_empty(), "no report: {}", stdout(&o));
}

#[test]
fn pingpong_marks_and_measures_inter_node_pairs() {
    let Some(c) = cluster() else { return };
    // Three ranks: the hostfile's order puts two on node1, one on node2.
    let mut cmd = c.script(&[
        "mpirun",
        "-n",
        "3",
        BIN,
        "bench",
        "pingpong",
        "--max-bytes",
        "64KiB",
        "--format",
        "json",
    ]);
    cmd.env("OMPI_MCA_mpi_yield_when_idle", "1");
    let r = json_ok(&run(cmd));
    assert_eq!(r["hosts"], serde_json::json!(["node1", "node1", "node2"]));
    let pairs = r["pairs"].as_array().unwrap();
    let pair = |b: u64| pairs.iter().find(|p| p["b"] == b).unwrap();
    assert_eq!(pair(1)["intra_node"], true, "{r}");
    assert_eq!(pair(2)["intra_node"], false, "{r}");
    assert_eq!(
        (pair(2)["host_a"].clone(), pair(2)["host_b"].clone()),
        ("node1".into(), "node2".into())
    );
    for p in pairs {
        for s in p["sizes"].as_array().unwrap() {
            assert!(s["latency_us"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
}

/// Writes a study definition into `dir` and returns its path.
fn study(dir: &Path, name: &str, body: &str) -> PathBuf {
    let f = dir.join(format!("{name}.env"));
    std::fs::write(&f, format!("NAME={name}\n{body}")).unwrap();
    f
}

/// The study template's environment: this build, the study, the results
/// file and the srun plugin of this MPI.
fn template_env(cmd: &mut Command, study: &Path, results: &Path) {
    cmd.env("STUDY", study)
        .env("HIMENO", BIN)
        .env("RESULTS", results)
        .env("SRUN_ARGS", format!("--mpi={}", pmi_plugins().0));
}

/// Job output: the one file in `dir` whose name starts with `prefix`.
fn job_output(dir: &Path, prefix: &str) -> String {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    assert_eq!(files.len(), 1, "job output {prefix}* in {}", dir.display());
    std::fs::read_to_string(&files[0]).unwrap()
}

fn ok_or_show(o: &Output, what: &str, dir: &Path) {
    if !o.status.success() {
        let outs: String = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "out"))
            .map(|p| std::fs::read_to_string(&p).unwrap_or_default())
            .collect();
        panic!(
            "{what}: exit {:?}\n{}{}\njob output:\n{outs}",
            o.status.code(),
            stdout(o),
            stderr(o)
        );
    }
}

#[test]
fn slurm_template_runs_strong_and_weak_studies_over_two_hosts() {
    let Some(c) = cluster() else { return };
    let dir = scratch("template");
    let out = format!("--output={}/%x-%j.out", dir.display());
    let strong = study(
        &dir,
        "cluster-strong",
        "KIND=strong\nSIZES=S\nRANKS=\"1 2 4\"\nITERATIONS=30\nTHREADS=1\n",
    );
    let weak = study(
        &dir,
        "cluster-weak",
        "KIND=weak\nSIZES=XS\nRANKS=\"1 2 4\"\nITERATIONS=30\nTHREADS=1\n",
    );
    let (strong_results, weak_results) = (dir.join("strong.jsonl"), dir.join("weak.jsonl"));
    // As a user submits it: sbatch on the template, the study in STUDY.
    let alloc = ["-N", "2", "-n", "4", "--ntasks-per-node=2", "--time=5"];
    let mut args = vec!["--wait"];
    args.extend(alloc);
    args.extend([out.as_str(), "scripts/slurm/study.sbatch"]);
    let mut sbatch = c.slurm("sbatch", &args);
    template_env(&mut sbatch, &strong, &strong_results);
    ok_or_show(&run_with_limit(sbatch, JOB_LIMIT), "sbatch strong", &dir);
    // Run as a script, the template submits itself named after the study.
    let mut args = vec!["scripts/slurm/study.sbatch", "--wait"];
    args.extend(alloc);
    args.push(out.as_str());
    let mut submit = c.slurm("bash", &args);
    template_env(&mut submit, &weak, &weak_results);
    ok_or_show(
        &run_with_limit(submit, JOB_LIMIT),
        "study.sbatch weak",
        &dir,
    );
    assert!(job_output(&dir, "himeno-study-").contains("3 run(s), 0 failed"));
    let weak_out = job_output(&dir, "himeno-cluster-weak-");
    assert!(weak_out.contains("weak scaling"), "{weak_out}");

    for (results, hosts) in [(&strong_results, [1, 2, 2]), (&weak_results, [1, 2, 2])] {
        let recs = records(results);
        assert_eq!(recs.len(), 3, "{}", results.display());
        for (r, h) in recs.iter().zip(hosts) {
            assert_eq!(r["complete"], true, "{r}");
            let on: std::collections::BTreeSet<&str> = r["per_rank"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["host"].as_str().unwrap())
                .collect();
            assert_eq!(on.len(), h, "hosts of {} ranks: {on:?}", r["ranks"]);
        }
    }

    let plots = dir.join("plots");
    let report = json_ok(&run(himeno(&[
        "report",
        strong_results.to_str().unwrap(),
        weak_results.to_str().unwrap(),
        "--format",
        "json",
        "--plot",
        plots.to_str().unwrap(),
    ])));
    let groups = report["groups"].as_array().unwrap();
    let kinds: Vec<&str> = groups.iter().map(|g| g["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["strong", "weak"], "{report}");
    for g in groups {
        let rows = g["rows"].as_array().unwrap();
        let shape: Vec<(u64, u64)> = rows
            .iter()
            .map(|r| (r["ranks"].as_u64().unwrap(), r["hosts"].as_u64().unwrap()))
            .collect();
        assert_eq!(shape, [(1, 1), (2, 2), (4, 2)], "{g}");
        // The phase split: over two hosts the slowest rank waits on halos
        // (comm, index 3) and on the allreduce (index 5).
        for r in &rows[1..] {
            let phases = r["slowest_phases"].as_array().unwrap();
            assert!(phases[3].as_f64().unwrap() > 0.0, "{r}");
            assert!(phases[5].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let text = stdout_ok(&run(himeno(&["report", strong_results.to_str().unwrap()])));
    assert!(text.contains(" ranks hosts     procs"), "{text}");
    // The plots: ranks on a log2 axis ticked at the counts measured, hosts named.
    let svg = |kind: &str, grid: &str| {
        std::fs::read_to_string(plots.join(format!("{kind}-cpu-t1-{grid}.svg")))
            .unwrap_or_else(|e| panic!("{kind} {grid}: {e}"))
    };
    // The texts of an SVG picture.
    let texts = |svg: String| -> Vec<String> {
        svg.split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, x)| x.trim().to_string()))
            .collect()
    };
    let speedup = texts(svg("strong-cluster-strong-64x64x128", "speedup"));
    for tick in ["1", "2", "4"] {
        assert!(
            speedup.iter().any(|t| t == tick),
            "no tick {tick}: {speedup:?}"
        );
    }
    for between in ["1.5", "2.5", "3", "3.5"] {
        assert!(
            !speedup.iter().any(|t| t == between),
            "tick {between}: {speedup:?}"
        );
    }
    let efficiency = texts(svg("strong-cluster-strong-64x64x128", "efficiency"));
    assert!(efficiency.iter().any(|t| t == "2 hosts"), "{efficiency:?}");
    let phases = texts(svg("strong-cluster-strong-64x64x128", "phases"));
    assert!(
        phases
            .iter()
            .any(|t| t.starts_with("4 (") && t.ends_with("), 2 hosts")),
        "{phases:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_warned_before_its_time_limit_leaves_an_incomplete_record_and_a_report() {
    let Some(c) = cluster() else { return };
    let dir = scratch("limit");
    // Two runs: the warning stops the first, the second must not start.
    let long = study(
        &dir,
        "cluster-limit",
        "KIND=strong\nSIZES=\"S XS\"\nRANKS=2\nITERATIONS=1000000000\nTHREADS=1\n",
    );
    // The warning to the job steps (the template's way), and to the batch
    // shell only (B:), which must pass it on to the run going. One job
    // after the other: the concurrent-jobs test needs free CPUs meanwhile.
    let jobs: Vec<_> = ["USR1@30", "B:USR1@30"]
        .into_iter()
        .map(|signal| {
            let results = dir.join(format!("limit-{}.jsonl", signal.replace(['@', ':'], "-")));
            let out = format!("--output={}/%x-%j-{}.out", dir.display(), &signal[..1]);
            let signal = format!("--signal={signal}");
            // Slurm sends the warning up to a minute early (its check runs
            // every 30 s and looks a minute ahead): with 2 minutes and 30 s
            // of warning, SIGUSR1 comes 30 to 60 s after the start, well
            // before the limit.
            let mut sbatch = c.slurm(
                "sbatch",
                &[
                    "--wait",
                    "-N",
                    "2",
                    "-n",
                    "2",
                    "--ntasks-per-node=1",
                    "--exclusive=user",
                    "--time=2",
                    &signal,
                    "--parsable",
                    &out,
                    "scripts/slurm/study.sbatch",
                ],
            );
            template_env(&mut sbatch, &long, &results);
            (signal, results, run_with_limit(sbatch, JOB_LIMIT))
        })
        .collect();
    for (signal, results, o) in jobs {
        // The stop makes the sweep, and so the job, exit 2.
        assert!(!o.status.success(), "{signal}: {}", stdout(&o));
        let job = stdout(&o).trim().to_string();
        let recs = records(&results);
        assert_eq!(recs.len(), 1, "{signal}: {recs:?}");
        let r = &recs[0];
        assert_eq!(r["complete"], false, "{signal}: {r}");
        let done = r["iterations"].as_u64().unwrap();
        assert!(done > 0 && done < 1_000_000_000, "{signal}: {r}");
        // Ended by the warning, not killed at the limit.
        let show = stdout(&run(c.slurm("scontrol", &["show", "job", &job])));
        assert!(show.contains("JobState=FAILED"), "{signal}: {show}");
        let out = job_output(&dir, &format!("himeno-study-{job}-"));
        assert!(out.contains("STOPPED (exit 2"), "{signal}: {out}");
        assert!(out.contains("1 stopped, 1 not started"), "{signal}: {out}");
        assert!(
            out.contains("incomplete (stopped early)"),
            "{signal}: no report: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_jobs_append_to_one_results_file_concurrently() {
    // No other test's job on the cluster: both of these start at once.
    let Some(c) = whole_cluster() else { return };
    // Two jobs' steps starting together on the same hosts: with Slurm
    // 22.05's mixed fences about one step in 300 lost a rank to SIGSEGV in
    // MPI_Init (scripts/cluster/mpi.conf says why); the cluster must run
    // ring fences for this test to mean anything.
    let config = stdout(&run(c.slurm("scontrol", &["show", "config"])));
    assert!(
        config
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["PMIxCollFence", "=", "ring"]),
        "the virtual cluster does not run ring fences:\n{config}"
    );
    let dir = scratch("concurrent");
    // Six runs per job, each on both hosts, one CPU per host per job: the
    // two jobs fit on the cluster together and append at the same time.
    let s = study(
        &dir,
        "cluster-shared",
        "KIND=shape\nSIZES=S\nRANKS=2\nPROCS=\"2x1x1 1x2x1 1x1x2 2x1x1 1x2x1 1x1x2\"\nITERATIONS=40\nTHREADS=1\n",
    );
    let results = dir.join("shared.jsonl");
    let out = format!("--output={}/%x-%j.out", dir.display());
    let submit = || {
        let mut sbatch = c.slurm(
            "sbatch",
            &[
                "--wait",
                "--parsable",
                "-N",
                "2",
                "-n",
                "2",
                "--ntasks-per-node=1",
                "--exclusive=user",
                "--time=5",
                &out,
                "scripts/slurm/study.sbatch",
            ],
        );
        template_env(&mut sbatch, &s, &results);
        std::thread::spawn(move || run_with_limit(sbatch, JOB_LIMIT))
    };
    let (a, b) = (submit(), submit());
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    ok_or_show(&a, "job a", &dir);
    ok_or_show(&b, "job b", &dir);
    // They did run at the same time.
    let window = |o: &Output| {
        let job = stdout(o).trim().to_string();
        let show = stdout(&run(c.slurm("scontrol", &["show", "job", &job])));
        let field = |k: &str| {
            show.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in {show}"))
                .to_string()
        };
        (field("StartTime="), field("EndTime="))
    };
    let ((sa, ea), (sb, eb)) = (window(&a), window(&b));
    assert!(
        sa <= eb && sb <= ea,
        "jobs did not overlap: {sa}..{ea} and {sb}..{eb}"
    );
    let recs = records(&results);
    assert_eq!(recs.len(), 12, "two jobs of six runs each");
    assert!(
        recs.iter()
            .all(|r| r["complete"] == true && r["ranks"] == 2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether this process runs as root (a virtual cluster needs it).
fn root_user() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `scripts/local-cluster.sh ARGS` for the state folder `dir` (relative to
/// `cwd` if it is relative) and network `net`.
fn cluster_script(cwd: &Path, dir: &str, net: &str, args: &[&str]) -> Command {
    // Signals at their defaults: the stop-signal test sends SIGINT and
    // SIGHUP to the script's shell.
    let mut c = with_default_signals(root().join("scripts/local-cluster.sh"));
    c.args(args)
        .current_dir(cwd)
        .env("HIMENO_CLUSTER_DIR", dir)
        .env("HIMENO_CLUSTER_NET", net);
    c
}

/// The network namespaces of this machine.
fn namespaces() -> Vec<String> {
    let o = run({
        let mut c = Command::new("ip");
        c.args(["netns", "list"]);
        c
    });
    let mut v: Vec<String> = stdout(&o)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// The tag in the names of the namespaces, links and bridge of the cluster
/// with state folder `state` (absolute): its path's cksum, as the script
/// computes it.
fn tag_of(state: &Path) -> String {
    let o = run({
        let mut c = Command::new("sh");
        c.args(["-c", "printf %s \"$1\" | cksum", "sh"]).arg(state);
        c
    });
    let sum: u64 = stdout(&o)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    format!("{sum:08x}")
}

/// The namespaces of the cluster with state folder `state`.
fn namespaces_of(state: &Path) -> Vec<String> {
    let prefix = format!("himeno-{}-", tag_of(state));
    namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The bridges of this machine.
fn bridges() -> Vec<String> {
    let o = run({
        let mut c = Command::new("ip");
        c.args(["-o", "link", "show", "type", "bridge"]);
        c
    });
    stdout(&o)
        .lines()
        .filter_map(|l| l.split(": ").nth(1).map(str::to_string))
        .collect()
}

/// Processes whose command line mentions `path` (a cluster's daemons name
/// its state folder).
fn processes_of(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&needle) && e.file_name().to_string_lossy().parse::<u32>().is_ok() {
                v.push(cmd);
            }
        }
    }
    v
}

/// A fresh folder for a test's own clusters, with a short path: the state
/// folder's path must leave room for the socket paths under it, and the
/// target folder's may be long. Under /run, which only root may write.
fn short_scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(format!("/run/hc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// Removes a test's folder when the test ends, also a failed one.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Takes down the cluster of a state folder when a test ends, also a
/// failed one.
struct DownOnDrop(PathBuf, &'static str);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let dir = self.0.to_string_lossy().into_owned();
        let _ = cluster_script(Path::new("/"), &dir, self.1, &["down"]).output();
    }
}

#[test]
fn up_and_down_touch_no_folder_or_file_they_did_not_make() {
    if !cluster_asked("this test of scripts/local-cluster.sh") {
        return;
    }
    if !MPI || !root_user() {
        eprintln!("skipping: the virtual cluster needs root and an MPI build");
        return;
    }
    // Short, so that the script judges the folder and not its length
    // wherever the checkout lies.
    let dir = short_scratch("foreign");
    let _rm = RemoveOnDrop(dir.clone());
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("keep"), "precious").unwrap();
    std::fs::write(dir.join("plain"), "a file").unwrap();
    std::os::unix::fs::symlink(&data, dir.join("link")).unwrap();
    for name in ["data", "plain", "link", "data/", "./data"] {
        for cmd in ["down", "up"] {
            let o = run_with_limit(
                cluster_script(&dir, name, "10.80.0", &[cmd]),
                Duration::from_secs(10),
            );
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("not a state folder of this script"),
                "{cmd} {name}: {}",
                stderr(&o)
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(data.join("keep")).unwrap(),
        "precious"
    );
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(dir.join("plain")).unwrap(),
        "a file"
    );
    assert!(dir.join("link").is_symlink());
    // A path that slurm.conf and munged cannot take is refused at once,
    // with nothing made.
    for name in ["with space", "x\ty", "a'b", &"l".repeat(70)] {
        let started = std::time::Instant::now();
        let o = run_with_limit(
            cluster_script(&dir, name, "10.80.0", &["up"]),
            Duration::from_secs(10),
        );
        assert_eq!(o.status.code(), Some(2), "up {name:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "up {name:?}: {}", stderr(&o));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "up {name:?} stalled"
        );
        assert!(!dir.join(name).exists(), "up {name:?} made its folder");
    }
    for name in ["data", "plain", "link"] {
        assert!(namespaces_of(&dir.join(name)).is_empty(), "{name}");
    }
}

#[test]
fn a_second_cluster_comes_and_goes_without_touching_the_first() {
    let Some(first) = cluster() else { return };
    let first_net = std::fs::read_to_string(first.dir.join("net"))
        .map(|n| n.trim().to_string())
        .unwrap_or_else(|_| "10.77.0".into());
    let dir = short_scratch("second");
    let _rm = RemoveOnDrop(dir.clone());
    let first_dir = std::fs::canonicalize(&first.dir).unwrap();
    let spaces = namespaces_of(&first_dir);
    assert!(
        !spaces.is_empty(),
        "the first cluster has no namespaces of its name"
    );
    let link = std::fs::read_link("/etc/slurm/slurm.conf").ok();
    let first_ok = || {
        let o = run_with_limit(first.script(&["status"]), Duration::from_secs(60));
        assert!(o.status.success(), "the first cluster: {}", stdout(&o));
    };
    // On the first one's network: refused before anything is made.
    let o = run_with_limit(
        cluster_script(&dir, "c2", &first_net, &["up", "--nodes", "1"]),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is in use"), "{}", stderr(&o));
    assert!(!dir.join("c2").exists());
    assert!(namespaces_of(&dir.join("c2")).is_empty());
    assert_eq!(namespaces_of(&first_dir), spaces);
    first_ok();
    // A relative state folder, its own network.
    let state = dir.join("c2");
    let _down = DownOnDrop(state.clone(), "10.78.0");
    let o = run_with_limit(
        cluster_script(&dir, "c2", "10.78.0", &["up", "--nodes", "1"]),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "up c2: {}", stderr(&o));
    assert!(state.join("slurm.conf").is_file());
    assert_eq!(namespaces_of(&state).len(), 2, "{:?}", namespaces());
    let mut c = cluster_script(&dir, "c2", "10.99.0", &["mpirun", "-n", "2", BIN]);
    c.args(["--grid", "9x9x9", "--iterations", "2", "--format", "json"])
        .env("OMPI_MCA_mpi_yield_when_idle", "1");
    let r = json_ok(&run(c));
    assert_eq!(
        r["provenance"]["hosts"],
        serde_json::json!(["node1"]),
        "{r}"
    );
    first_ok();
    let o = run_with_limit(
        cluster_script(&dir, "c2", "10.78.0", &["down"]),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "down c2: {}", stderr(&o));
    assert!(!state.exists(), "c2's folder is left");
    assert!(
        processes_of(&state).is_empty(),
        "{:?}",
        processes_of(&state)
    );
    assert!(namespaces_of(&state).is_empty(), "{:?}", namespaces());
    assert_eq!(
        namespaces_of(&first_dir),
        spaces,
        "the first cluster's namespaces changed"
    );
    assert_eq!(std::fs::read_link("/etc/slurm/slurm.conf").ok(), link);
    first_ok();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_signal_during_up_takes_down_what_it_brought_up() {
    if !cluster_asked("this test of scripts/local-cluster.sh") {
        return;
    }
    if !MPI || !root_user() {
        eprintln!("skipping: the virtual cluster needs root and an MPI build");
        return;
    }
    let dir = short_scratch("stop");
    let _rm = RemoveOnDrop(dir.clone());
    for (sig, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        let state = dir.join(format!("c-{sig}"));
        let _down = DownOnDrop(state.clone(), "10.79.0");
        let bridge = format!("hm{}-br", tag_of(&state));
        let mut c = cluster_script(
            &dir,
            state.to_str().unwrap(),
            "10.79.0",
            &["up", "--nodes", "6"],
        );
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let holder = state.join("hosts/node1/holder.pid");
        let started = std::time::Instant::now();
        while !holder.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{sig}: node1 never came"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        crate::common::signals::kill(sig, child.id());
        let mut err_pipe = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut err_pipe, &mut err);
            err
        });
        let status = wait_or_kill(
            &mut child,
            Duration::from_secs(60),
            &format!("{sig}: up"),
            String::new,
        );
        let err = reader.join().unwrap();
        assert_eq!(status.code(), Some(code), "{sig}: {err}");
        assert!(
            err.contains(&format!("stopped by SIG{sig}")),
            "{sig}: {err}"
        );
        assert!(!state.exists(), "{sig}: the state folder is left");
        assert!(
            processes_of(&state).is_empty(),
            "{sig}: {:?}",
            processes_of(&state)
        );
        assert_eq!(namespaces_of(&state), Vec::<String>::new(), "{sig}: {err}");
        assert!(!bridges().contains(&bridge), "{sig}: bridge {bridge} left");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn srun_over_two_hosts_writes_one_aligned_trace() {
    let Some(c) = cluster() else { return };
    let (good, _) = pmi_plugins();
    let mpi = format!("--mpi={good}");
    let path = scratch("trace").join("t.json");
    let p = path.to_str().unwrap();
    let mut args = vec![
        "-N",
        "2",
        "-n",
        "4",
        "--ntasks-per-node=2",
        "--time=5",
        "srun",
        &mpi,
        BIN,
        "--trace",
        p,
    ];
    args.extend(CHECKED);
    let r = json_ok(&run_with_limit(c.slurm("salloc", &args), JOB_LIMIT));
    let t = crate::common::trace::load(&path);
    crate::common::trace::assert_perfetto_shape(&t, 4);
    crate::common::trace::assert_sums_match(&r, &t);
    // The ranks on node2 are aligned with their estimated offsets. The
    // hosts are namespaces of one kernel, so the true offset is zero and
    // every estimate must lie within half its round trip of it.
    for clock in t["otherData"]["clock"].as_array().unwrap() {
        let est = clock["offset_estimate_ns"].as_i64().unwrap();
        let rtt = clock["rtt_ns"].as_i64().unwrap();
        assert!(est.abs() <= rtt / 2 + 1, "{clock}");
        let applied = clock["applied_offset_ns"].as_i64().unwrap();
        let want = if clock["host"] == "node1" { 0 } else { est };
        assert_eq!(applied, want, "{clock}");
    }
    let labels: std::collections::BTreeSet<&str> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_labels")
        .map(|e| e["args"]["labels"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["node1", "node2"].into());
}

#[test]
fn the_reframe_checks_pass_on_the_cluster() {
    let Some(c) = cluster() else { return };
    let Some(rf) = crate::reframe::reframe() else {
        return;
    };
    let conf = c.dir.join("slurm.conf");
    let (o, report) = crate::reframe::run_checks(
        rf,
        "vcluster",
        "vcluster",
        &[],
        &[
            ("SLURM_CONF", conf.to_str().unwrap()),
            ("OMPI_MCA_mpi_yield_when_idle", "1"),
        ],
    );
    crate::reframe::assert_all_passed(&o, &report, 6);
    // Four ranks of two per node span both hosts, as each job says (the
    // report's job_nodelist stays empty for a job that no poll of squeue
    // found running).
    let four: Vec<_> = crate::reframe::cases(&report)
        .into_iter()
        .filter(|c| c["ranks"] == 4)
        .collect();
    assert_eq!(four.len(), 2, "{report}");
    for case in four {
        let out = crate::reframe::passed_job_stdout(case);
        assert!(
            out.lines().any(|l| l == "himeno job nodes: node[1-2]"),
            "{}: {out}",
            case["display_name"]
        );
    }
}

#[test]
fn a_failed_squeue_does_not_end_a_reframe_check_early() {
    let Some(c) = cluster() else { return };
    let Some(rf) = crate::reframe::reframe() else {
        return;
    };
    // An squeue first on PATH that fails every other call, as squeue does
    // when the controller of a loaded machine is slow to answer ("Socket
    // timed out"). ReFrame's own `squeue` scheduler takes the job of a
    // failed query as completed and reads the output of a job still
    // running; the site configuration's scheduler asks again.
    let dir = scratch("squeue");
    let count = dir.join("calls");
    let wrapper = dir.join("squeue");
    write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\n\
             n=$(cat '{count}' 2>/dev/null || echo 0)\n\
             echo $((n + 1)) > '{count}'\n\
             if [ $((n % 2)) -eq 1 ]; then\n\
             echo 'slurm_load_jobs error: Socket timed out on send/recv operation' >&2; exit 1\n\
             fi\n\
             PATH=${{PATH#*:}} exec squeue \"$@\"\n",
            count = count.display()
        ),
    );
    // The wrapper's folder first; it takes itself off PATH to run the real one.
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
    let conf = c.dir.join("slurm.conf");
    // Long enough (a few seconds) that a failed poll comes while it runs.
    let (o, report) = crate::reframe::run_checks(
        rf,
        "vcluster",
        "vcluster-squeue",
        &[
            "-n",
            "himeno_check%ranks=4%variant=classic",
            "-S",
            "iterations=1500",
        ],
        &[
            ("SLURM_CONF", conf.to_str().unwrap()),
            ("PATH", &path),
            ("OMPI_MCA_mpi_yield_when_idle", "1"),
        ],
    );
    crate::reframe::assert_all_passed(&o, &report, 1);
    let calls: u32 = std::fs::read_to_string(&count)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(calls >= 2, "squeue failed no poll ({calls} calls)");
    assert!(
        stdout(&o).contains("squeue failed (exit 1), asking again"),
        "{}",
        stdout(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_long_run_warned_before_its_limit_requeues_itself_and_ends_with_the_uninterrupted_answer() {
    let Some(c) = cluster() else { return };
    let dir = scratch("requeue");
    let results = dir.join("long.jsonl");
    let checkpoints = dir.join("checkpoints");
    // About 100 s on two hosts of this machine (7 ms an iteration), and
    // far from converged (size S reaches its fixed point, where every
    // answer is alike, within 60000 iterations). With a 2-minute limit and
    // 30 s of warning Slurm warns each segment 30 to 60 s after its start
    // (its check runs every 30 s and looks a minute ahead), so the first
    // segment is always cut short.
    let planned = 14_000u64;
    let run_args = format!("--size M --iterations {planned} --threads 1 --warmup 3 --format json");
    let out = format!("--output={}/%x-%j.out", dir.display());
    let mut sbatch = c.slurm(
        "sbatch",
        &[
            "--wait",
            "-N",
            "2",
            "-n",
            "2",
            "--ntasks-per-node=1",
            "--exclusive=user",
            "--time=2",
            "--signal=B:USR1@30",
            "--parsable",
            &out,
            "scripts/slurm/long-run.sbatch",
        ],
    );
    sbatch
        .env("HIMENO", BIN)
        .env("RUN_ARGS", &run_args)
        .env("CKPT_EVERY", "2000")
        .env("CKPT_DIR", &checkpoints)
        .env("RESULTS", &results)
        .env("SRUN_ARGS", format!("--mpi={}", pmi_plugins().0));
    // A requeued job waits 30 s before it may start again (cred_expire in
    // scripts/cluster/slurm.conf.in).
    let o = run_with_limit(sbatch, Duration::from_secs(600));
    ok_or_show(&o, "long-run.sbatch", &dir);
    let job = stdout(&o).trim().to_string();
    let recs = records(&results);
    assert!(recs.len() >= 2, "the first segment was cut short: {recs:?}");
    let (last, cut) = recs.split_last().unwrap();
    // Each segment but the last stopped with a checkpoint, which the next
    // one restarted from.
    let mut at = 0;
    for (n, r) in recs.iter().enumerate() {
        let from = r["restarted_from"]["iteration"].as_u64().unwrap_or(0);
        assert_eq!(from, at, "segment {n}: {r}");
        if n > 0 {
            assert_eq!(
                r["restarted_from"]["manifest"],
                recs[n - 1]["checkpoints"]["last"],
                "segment {n} names the checkpoint of the one before: {r}"
            );
        }
        at = r["iterations"].as_u64().unwrap();
        assert!(at > from, "segment {n}: {r}");
        let hosts: std::collections::BTreeSet<&str> = r["per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["host"].as_str().unwrap())
            .collect();
        assert_eq!(hosts.len(), 2, "{r}");
    }
    for r in cut {
        assert_eq!(r["complete"], false, "{r}");
    }
    assert_eq!(last["complete"], true, "{last}");
    assert_eq!(last["iterations"], planned);
    // A restart continues from whatever its checkpoint holds: a state of
    // size M at thousands of iterations is beyond a reference run made
    // unasked, so the verdict says it is not checked (the answer itself is
    // compared with the uninterrupted run's here).
    assert_eq!(last["verified"], Value::Null, "{last}");
    assert!(
        last["verification"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("not checked: restarted from a checkpoint"),
        "{last}"
    );
    // The complete record lists every segment, as the records did.
    let segments: Vec<(u64, u64)> = last["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["from"].as_u64().unwrap(), s["to"].as_u64().unwrap()))
        .collect();
    let from_records: Vec<(u64, u64)> = recs
        .iter()
        .map(|r| {
            let from = r["restarted_from"]["iteration"].as_u64().unwrap_or(0);
            (from, r["iterations"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(segments, from_records);
    let show = stdout(&run(c.slurm("scontrol", &["show", "job", &job])));
    assert!(
        show.contains("JobState=COMPLETED")
            && show.contains(&format!("Restarts={}", recs.len() - 1)),
        "{show}"
    );
    let log = job_output(&dir, &format!("himeno-long-{job}"));
    assert!(log.contains("requeueing job"), "{log}");
    assert!(log.contains("segment 2 of job"), "{log}");
    // The uninterrupted run's answer, here on the same process grid (its
    // gosa sums the ranks' parts in the same order: bitwise the same).
    let p: Vec<String> = last["procs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    let procs = p.join("x");
    let whole = json_ok(&run_with_limit(
        himeno(&[
            "--size",
            "M",
            "--iterations",
            &planned.to_string(),
            "--threads",
            "1",
            "--local-ranks",
            "2",
            "--procs",
            &procs,
            "--warmup",
            "0",
            "--format",
            "json",
        ]),
        Duration::from_secs(400),
    ));
    assert_eq!(last["p_fingerprint"], whole["p_fingerprint"]);
    assert_eq!(last["gosa"], whole["gosa"]);
    assert!(
        whole["gosa"].as_f64().unwrap() > 0.0,
        "not yet converged: {whole}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_checkpoint_folder_local_to_each_host_is_refused_before_the_run() {
    let Some(c) = cluster() else { return };
    let run_into = |dir: &str| {
        let mut cmd = c.script(&["mpirun"]);
        cmd.args([
            "-n",
            "4",
            BIN,
            "--procs",
            "2x1x2",
            "--grid",
            "13x13x13",
            "--iterations",
            "10",
            "--threads",
            "1",
            "--format",
            "json",
            "--checkpoint-dir",
            dir,
            "--checkpoint-every",
            "2",
        ])
        .env("OMPI_MCA_mpi_yield_when_idle", "1");
        run(cmd)
    };
    // Each host has a /tmp of its own: rank 0's folder is not node2's.
    let local = format!("/tmp/himeno-node-local-{}", std::process::id());
    let o = run_into(&local);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "it ran: {}", stdout(&o));
    let lines = himeno_lines(&o);
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    assert!(
        lines[0].contains("host node2 does not see the checkpoint folder"),
        "{}",
        lines[0]
    );
    // A folder both hosts share takes the run's checkpoints.
    let shared = scratch("checkpoints");
    let r = json_ok(&run_into(shared.join("ck").to_str().unwrap()));
    assert_eq!(r["checkpoints"]["written"], 4, "{r}");
    assert_eq!(
        r["provenance"]["hosts"],
        serde_json::json!(["node1", "node2"])
    );
    std::fs::remove_dir_all(&shared).unwrap();
}
