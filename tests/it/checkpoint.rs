//! Checkpoint and restart: a run stopped by SIGTERM mid-way (the
//! `HIMENO_FAULT` `term` hook sends it at a known iteration) writes a
//! checkpoint at the end of its block, and the restart ends bitwise equal
//! to the uninterrupted run, for every process grid, T = 1 and 3, 1 and 2
//! threads, with in-process ranks and under `mpirun`. A checkpoint whose
//! write was cut short is never used, and every refusal is one line and
//! exit 2 with the folder left as it was.

use crate::both::checkpoint::*;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A run of 4 in-process ranks that writes checkpoints every 2
/// iterations into `dir`, keeping 3, and ends complete.
fn periodic(dir: &Path) -> Value {
    let a = args("2x2x1", 1, 1, dir);
    json_ok(&run(command(
        Launcher::Local,
        4,
        &a,
        &["--checkpoint-every", "2", "--checkpoint-keep", "3"],
    )))
}

/// The names in `dir`, sorted, with the sizes of the files below; the
/// folder's lock is left out (it names the last run that held the folder,
/// refused or not).
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == himeno::checkpoint::lock::LOCK {
            continue;
        }
        if e.path().is_dir() {
            for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                let len = f.metadata().unwrap().len();
                out.push((format!("{name}/{}", f.file_name().to_string_lossy()), len));
            }
        } else {
            out.push((name, e.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

#[test]
fn periodic_checkpoints_keep_the_newest_and_restart_from_the_last_committed() {
    let want = reference();
    let dir = fresh_dir("periodic");
    let r = periodic(&dir);
    assert_eq!(answer(&r), want);
    assert_eq!(r["checkpoints"]["written"], 4, "at 2, 4, 6 and 8: {r}");
    let names: Vec<String> = listing(&dir)
        .into_iter()
        .filter(|(n, _)| n.ends_with("manifest.json"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [4, 6, 8].map(|i| format!("ckpt-{i:010}/manifest.json")),
        "the last 3 are kept"
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(&names[2])).unwrap()).unwrap();
    assert_eq!(manifest["iteration"], 8);
    assert_eq!(manifest["ranks"], 4);
    assert_eq!(manifest["procs"], serde_json::json!([2, 2, 1]));
    assert!(
        manifest["coefficients"]
            .as_str()
            .unwrap()
            .contains("initial state"),
        "{manifest}"
    );
    assert_eq!(manifest["files"].as_array().unwrap().len(), 4);

    // A write cut short after the rank files, before the manifest: the
    // newest folder lacks its manifest, and is passed over with a note.
    std::fs::remove_file(dir.join(&names[2])).unwrap();
    let a = args("2x2x1", 1, 1, &dir);
    let o = run(command(Launcher::Local, 4, &a, &["--restart", "latest"]));
    let r = json_ok(&o);
    assert_eq!(answer(&r), want, "restarted from the older checkpoint");
    assert_eq!(r["restarted_from"]["iteration"], 6);
    let err = stderr(&o);
    assert!(
        err.contains("ckpt-0000000008 has no manifest") && err.contains("ignored"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Asserts a refusal: exit 2, one `himeno:` line holding `words`, and the
/// checkpoint folder exactly as `before`.
fn assert_refused(o: &Output, words: &str, dir: &Path, before: &[(String, u64)]) {
    assert_clean_error(o, &[words]);
    assert_eq!(himeno_lines(o).len(), 1, "{}", stderr(o));
    assert_eq!(listing(dir), before, "nothing is overwritten");
}

#[test]
fn checkpoints_of_another_run_or_damaged_ones_are_refused() {
    let dir = fresh_dir("refusals");
    let _ = periodic(&dir);
    let before = listing(&dir);
    let base = args("2x2x1", 1, 1, &dir);
    let latest = ["--restart", "latest"];
    let refused =
        |np: usize, a: &[String], extra: &[&str], words: &str, before: &[(String, u64)]| {
            let o = run(command(Launcher::Local, np, a, extra));
            assert_refused(&o, words, &dir, before);
        };
    let mut other_grid = base.clone();
    other_grid[1] = "13x13x15".into();
    refused(4, &other_grid, &latest, "is of grid 13x13x13", &before);
    refused(
        2,
        &args("2x1x1", 1, 1, &dir),
        &latest,
        "is of rank count 4",
        &before,
    );
    refused(
        4,
        &args("1x2x2", 1, 1, &dir),
        &latest,
        "is of process grid 2x2x1",
        &before,
    );
    refused(
        4,
        &args("2x2x1", 2, 1, &dir),
        &latest,
        "is of --temporal 1",
        &before,
    );
    // A fresh run into a folder of committed checkpoints would overwrite
    // them; so would a restart from an older one.
    refused(4, &base, &[], "would overwrite", &before);
    let older = dir.join("ckpt-0000000006");
    refused(
        4,
        &base,
        &["--restart", older.to_str().unwrap()],
        "would overwrite",
        &before,
    );
    let newest = dir.join("ckpt-0000000008");
    // Another version's manifest.
    let m = newest.join("manifest.json");
    let text = std::fs::read_to_string(&m).unwrap();
    let other = text.replacen(
        &format!("\"version\": \"{}\"", himeno::checkpoint::VERSION),
        "\"version\": \"0.0.1\"",
        1,
    );
    assert_ne!(other, text);
    std::fs::write(&m, &other).unwrap();
    let changed = listing(&dir);
    refused(4, &base, &latest, "is of himeno version 0.0.1", &changed);
    std::fs::write(&m, &text).unwrap();
    // A damaged rank file (one value changed), a truncated one, a missing one.
    let f = newest.join("rank-000002.bin");
    let good = std::fs::read(&f).unwrap();
    let mut bad = good.clone();
    bad[100] ^= 1;
    std::fs::write(&f, &bad).unwrap();
    refused(4, &base, &latest, "checksum", &before);
    std::fs::write(&f, &good[..good.len() / 2]).unwrap();
    let truncated = listing(&dir);
    refused(4, &base, &latest, "is damaged", &truncated);
    std::fs::remove_file(&f).unwrap();
    let missing = listing(&dir);
    refused(4, &base, &latest, "rank-000002.bin", &missing);
    // A folder that cannot be written is found before the run.
    let file = temp_file("ckpt", "a-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("ck");
    let o = run(command(
        Launcher::Local,
        4,
        &args("2x2x1", 1, 1, &under_file),
        &[],
    ));
    assert_clean_error(&o, &["cannot be written"]);
    // Options that need a folder, or a fixed count.
    let o = run(himeno(&[
        "--grid",
        GRID,
        "--iterations",
        "3",
        "--restart",
        "latest",
    ]));
    assert_clean_error(&o, &["--restart needs --checkpoint-dir"]);
    let o = run(himeno(&[
        "--grid",
        GRID,
        "--seconds",
        "1",
        "--checkpoint-dir",
        "x",
    ]));
    assert_clean_error(&o, &["needs a fixed --iterations"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restart_with_nothing_committed_starts_from_the_initial_state() {
    let dir = fresh_dir("empty");
    let o = run(command(
        Launcher::Local,
        2,
        &args("1x1x2", 1, 1, &dir),
        &["--restart", "latest"],
    ));
    let r = json_ok(&o);
    assert_eq!(answer(&r), reference());
    assert!(r.get("restarted_from").is_none(), "{r}");
    assert!(
        stderr(&o).contains("starting from the initial state"),
        "{}",
        stderr(&o)
    );
    // No checkpoint was due: the folder was never needed.
    assert!(!dir.exists(), "{}", dir.display());
}

#[test]
fn two_concurrent_jobs_with_their_own_folders_restart_alike() {
    let want = reference();
    let dirs = [fresh_dir("concurrent-a"), fresh_dir("concurrent-b")];
    let start = |dir: &Path, restart: bool| {
        let mut c = command(
            Launcher::Local,
            2,
            &args("2x1x1", 1, 1, dir),
            if restart {
                &["--restart", "latest"]
            } else {
                &[]
            },
        );
        if !restart {
            c.env("HIMENO_FAULT", "0:3:term");
        }
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first: Vec<_> = dirs.iter().map(|d| start(d, false)).collect();
    for c in first {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    }
    let second: Vec<_> = dirs.iter().map(|d| start(d, true)).collect();
    for (c, d) in second.into_iter().zip(&dirs) {
        let r = json_ok(&c.wait_with_output().unwrap());
        assert_eq!(answer(&r), want);
        assert_eq!(
            r["restarted_from"]["manifest"],
            d.join("ckpt-0000000003/manifest.json").to_str().unwrap()
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// `bash SCRIPT` from the repository root, with no Slurm job around it.
fn script(path: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg(path)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_RESTART_COUNT")
        .env("DRY_RUN", "1");
    c
}

#[test]
fn the_long_run_template_restarts_from_latest_once_requeued() {
    let first = stdout_ok(&run(script("scripts/slurm/long-run.sbatch")));
    assert!(
        first.contains("--checkpoint-dir checkpoints/himeno-long-local")
            && first.contains("--checkpoint-every 1000")
            && first.starts_with("srun --kill-on-bad-exit=1 ")
            && !first.contains("--restart"),
        "{first}"
    );
    let mut again = script("scripts/slurm/long-run.sbatch");
    again.env("SLURM_RESTART_COUNT", "1");
    let again = stdout_ok(&run(again));
    assert!(again.trim_end().ends_with("--restart latest"), "{again}");
    let mut bad = script("scripts/slurm/long-run.sbatch");
    bad.env("SLURM_RESTART_COUNT", "x");
    let o = run(bad);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("SLURM_RESTART_COUNT"), "{}", stderr(&o));
}

/// The long-run template, warned while its run goes, with stand-ins for
/// srun (a run the warning stops) and for an scontrol that fails its
/// first `failures` calls: the exit status, stderr and the scontrol calls.
fn warned_long_run(failures: u32) -> (Output, u32) {
    warned_long_run_with(failures, &[])
}

/// A folder name's part for the variables `env`.
fn tag_of(env: &[(&str, &str)]) -> String {
    env.iter()
        .flat_map(|(k, v)| ["-", k, v])
        .collect::<String>()
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
}

/// [`warned_long_run`] with more variables `env` set.
fn warned_long_run_with(failures: u32, env: &[(&str, &str)]) -> (Output, u32) {
    let dir = temp_file("ckpt", &format!("requeue-{failures}{}", tag_of(env)));
    let _ = std::fs::remove_dir_all(&dir);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = dir.join("scontrol-calls");
    // The warning comes to the batch shell, again until the shell has
    // passed it on to the run (it may come before the shell knows the
    // run's pid), which then stops as a warned run does.
    write_executable(
        &bin.join("srun"),
        "#!/bin/sh\ntrap 'exit 2' USR1\nwhile :; do kill -USR1 $PPID; sleep 0.2; done\n",
    );
    write_executable(
        &bin.join("scontrol"),
        &format!(
            "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0)\necho $((n + 1)) > '{c}'\n\
             [ \"$1 $2\" = 'requeue 7' ] || exit 3\n\
             if [ $n -lt {failures} ]; then\n\
             echo 'slurm_requeue error: Socket timed out on send/recv operation' >&2; exit 1\nfi\n",
            c = calls.display()
        ),
    );
    let mut c = script("scripts/slurm/long-run.sbatch");
    c.env_remove("DRY_RUN")
        .env("SLURM_JOB_ID", "7")
        .env("CKPT_DIR", dir.join("ck"))
        .env("RESULTS", dir.join("r.jsonl"))
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        );
    c.envs(env.iter().copied());
    let o = run(c);
    let n = std::fs::read_to_string(&calls).map_or(0, |t| t.trim().parse().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    (o, n)
}

#[test]
fn the_long_run_template_asks_again_when_a_requeue_fails() {
    // Two failed requeues, then one that is taken: the segment ends as
    // requeued (exit 0).
    let (o, calls) = warned_long_run(2);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(calls, 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("requeueing job 7"), "{}", stderr(&o));
    // A controller that never takes it: the job fails, saying so, instead
    // of ending as if its run were done.
    let (o, calls) = warned_long_run(u32::MAX);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(calls, 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("scontrol requeue failed 4 times: job 7 is not requeued"),
        "{}",
        stderr(&o)
    );
}

/// Every number the long-run template uses is checked before anything
/// runs: a word bash's arithmetic would misread (`20x` dropped the
/// requeue bound, `08` is a bad octal number, 20 digits wrap), a sign, an
/// exponent, spaces or a value out of range is refused with one line
/// naming the variable, exit 2 and nothing run; an empty one is the
/// default; leading zeros are base 10.
#[test]
fn the_long_run_template_refuses_every_malformed_number() {
    let bad = [
        "20x",
        "-1",
        "1e3",
        "0x10",
        "abc",
        " 3",
        "3 ",
        "99999999999999999999",
        "+5",
    ];
    for var in ["MAX_REQUEUES", "CKPT_EVERY", "SLURM_RESTART_COUNT"] {
        let out_of_range = match var {
            "MAX_REQUEUES" => &["10001"][..],
            "CKPT_EVERY" => &["0", "1000000001"],
            _ => &["1000000000"],
        };
        for value in bad.iter().chain(out_of_range) {
            let mut c = script("scripts/slurm/long-run.sbatch");
            c.env(var, value);
            let o = run(c);
            assert_eq!(o.status.code(), Some(2), "{var}={value:?}: {}", stderr(&o));
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{var}={value:?}: {err}");
            assert!(
                err.starts_with(&format!("long-run.sbatch: {var}=")),
                "{var}={value:?}: {err}"
            );
            assert!(o.stdout.is_empty(), "{var}={value:?}: nothing runs");
        }
    }
    let dry = |env: &[(&str, &str)]| {
        let mut c = script("scripts/slurm/long-run.sbatch");
        c.envs(env.iter().copied());
        stdout_ok(&run(c))
    };
    assert!(dry(&[("CKPT_EVERY", "")]).contains("--checkpoint-every 1000 "));
    assert!(dry(&[("CKPT_EVERY", "0250")]).contains("--checkpoint-every 250 "));
    let again = dry(&[("SLURM_RESTART_COUNT", "09"), ("MAX_REQUEUES", "")]);
    assert!(again.trim_end().ends_with("--restart latest"), "{again}");
    // The study job's one number of Slurm's, put into every launcher.
    for value in ["0", "2x", "-1", "99999999999999999999"] {
        let mut c = script("scripts/slurm/study.sbatch");
        c.env("SLURM_CPUS_PER_TASK", value)
            .env("STUDY", "inputs/studies/local-strong.env");
        let o = run(c);
        assert_eq!(o.status.code(), Some(2), "{value:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).contains("SLURM_CPUS_PER_TASK"), "{}", stderr(&o));
    }
}

/// A requeue bound written with a leading zero (`08`, a bad octal number
/// to bash) still bounds the chain: the segment after the last requeue
/// allowed is not requeued.
#[test]
fn the_long_run_template_keeps_its_requeue_bound() {
    let (o, calls) =
        warned_long_run_with(0, &[("MAX_REQUEUES", "08"), ("SLURM_RESTART_COUNT", "8")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(calls, 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("after 8 requeue(s), the most allowed: not requeued"),
        "{}",
        stderr(&o)
    );
    let (o, calls) =
        warned_long_run_with(0, &[("MAX_REQUEUES", "08"), ("SLURM_RESTART_COUNT", "7")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(calls, 1, "{}", stderr(&o));
}

/// A chain whose requeue failed goes on with the command its message
/// gives: that command's segment, and a requeue of it, restart once from
/// the same folder and append to the same results, and himeno takes it
/// (run here with a stand-in srun); options the script sets itself are
/// refused in RUN_ARGS with one line.
#[test]
fn a_chain_whose_requeue_failed_resumes_with_the_command_it_is_told() {
    let env = [("RUN_ARGS", "--grid 9x9x9 --iterations 4 --format json")];
    let (o, _) = warned_long_run_with(u32::MAX, &env);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let told = err
        .lines()
        .find_map(|l| l.split("to go on from them: ").nth(1))
        .unwrap_or_else(|| panic!("no command in: {err}"))
        .to_string();
    assert!(
        told.ends_with(" sbatch scripts/slurm/long-run.sbatch"),
        "{told}"
    );
    let dir = temp_file("ckpt", "resume-told");
    let _ = std::fs::remove_dir_all(&dir);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // srun's own options (the template's --kill-on-bad-exit) come before
    // the program: the stand-in drops them.
    write_executable(
        &bin.join("srun"),
        "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n",
    );
    // The told command, its folders moved into this test's own.
    let told = told
        .replace(" sbatch ", " bash ")
        .replace("/requeue-", "/resumed-");
    for restarts in ["0", "3"] {
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(&told)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("SLURM_JOB_ID")
            .env("SLURM_RESTART_COUNT", restarts)
            .env("HIMENO", BIN)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            );
        let mut dry = Command::new("bash");
        dry.args(["-c", &told])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("SLURM_JOB_ID")
            .env("SLURM_RESTART_COUNT", restarts)
            .env("DRY_RUN", "1");
        let printed = stdout_ok(&run(dry));
        assert_eq!(printed.matches("--restart").count(), 1, "{printed}");
        let o = run(c);
        assert_eq!(o.status.code(), Some(0), "{restarts}: {}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).expect("the run's record");
        assert_eq!(r["iterations"], 4, "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let resumed = temp_file("ckpt", &format!("resumed-{}{}", u32::MAX, tag_of(&env)));
    let _ = std::fs::remove_dir_all(&resumed);
    for given in [
        "--checkpoint-dir x",
        "--output=r.jsonl",
        "--checkpoint-every 5",
    ] {
        let mut c = script("scripts/slurm/long-run.sbatch");
        c.env("RUN_ARGS", format!("--grid 9x9x9 --iterations 4 {given}"));
        let o = run(c);
        assert_eq!(o.status.code(), Some(2), "{given}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(
            stderr(&o).contains("which the script sets"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn the_sweep_gives_every_run_a_checkpoint_folder_of_its_own() {
    let mut c = script("scripts/sweep.sh");
    c.args([
        "--dry-run",
        "--himeno",
        BIN,
        "--launcher",
        "local",
        "--checkpoints",
        "ck",
        "inputs/studies/local-strong.env",
    ]);
    let out = stdout_ok(&run(c));
    let folders: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split("--checkpoint-dir ").nth(1))
        .collect();
    assert_eq!(
        folders.len(),
        out.lines().count() - 1,
        "all but the report: {out}"
    );
    let mut unique = folders.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), folders.len(), "{out}");
}

/// `a` with `--iterations n`.
fn planning(mut a: Vec<String>, n: u64) -> Vec<String> {
    assert_eq!(a[2], "--iterations");
    a[3] = n.to_string();
    a
}

/// A small tmpfs mounted for one test, unmounted (and its mount point
/// removed) when dropped; `None`, saying why, where mounting is not
/// allowed (not root, no tmpfs).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(name: &str, bytes: u64) -> Option<SmallDisk> {
        let at = fresh_dir(name);
        std::fs::create_dir_all(&at).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&at)
            .output();
        match o {
            Ok(o) if o.status.success() => Some(SmallDisk(at)),
            other => {
                eprintln!(
                    "skipping: cannot mount a small tmpfs here (root and tmpfs needed): {other:?}"
                );
                let _ = std::fs::remove_dir(&at);
                None
            }
        }
    }

    /// Makes the disk `bytes` large, keeping what it holds.
    fn grow(&self, bytes: u64) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }

    /// Fills the disk to its last byte.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The one record a results file holds.
fn only_record(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn a_checkpoint_the_disk_cannot_take_is_a_warning_and_the_run_keeps_its_record() {
    // Room for the first two checkpoints of 4 ranks (a page per file),
    // not for the later ones: the run goes on, ends complete, prints and
    // appends its record with the failures as warnings, and exits 2.
    let Some(disk) = SmallDisk::mount("full-later", 48 << 10) else {
        return;
    };
    let dir = disk.0.join("ck");
    let results = temp_file("ckpt", "full-later.jsonl");
    let a = args("2x2x1", 1, 1, &dir);
    let o = run(command(
        Launcher::Local,
        4,
        &a,
        &[
            "--checkpoint-every",
            "2",
            "--checkpoint-keep",
            "4",
            "--output",
            results.to_str().unwrap(),
        ],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).expect("the report is printed");
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(answer(&r), reference(), "the measurement is the run's");
    let written = r["checkpoints"]["written"].as_u64().unwrap();
    assert!((1..4).contains(&written), "{r}");
    let warnings = r["warnings"].as_array().expect("warnings in the record");
    assert!(
        warnings[0].as_str().unwrap().contains("was not written"),
        "{r}"
    );
    assert_eq!(only_record(&results)["warnings"], r["warnings"]);
    assert!(
        stderr(&o).contains("himeno: warning: the checkpoint at iteration"),
        "{}",
        stderr(&o)
    );
    // What the run committed is whole: the restart takes up the last one,
    // once the disk has room again (how full the run left it depends on
    // how many checkpoints it wrote before the first failed, and a full
    // folder is refused before a run).
    disk.grow(1 << 20);
    let o = run(command(
        Launcher::Local,
        4,
        &planning(a, 12),
        &["--restart", "latest"],
    ));
    let r = json_ok(&o);
    assert_eq!(r["restarted_from"]["iteration"], 2 * written, "{r}");
    drop(disk);
    let _ = std::fs::remove_file(&results);
}

#[test]
fn a_full_or_dangling_checkpoint_folder_is_refused_before_the_run() {
    if let Some(disk) = SmallDisk::mount("full-before", 64 << 10) {
        disk.fill();
        let o = run(command(
            Launcher::Local,
            2,
            &args("1x1x2", 1, 1, &disk.0.join("ck")),
            &[],
        ));
        assert_clean_error(&o, &["cannot be written"]);
        assert!(stderr(&o).contains("free"), "{}", stderr(&o));
    }
    let link = temp_file("ckpt", "dangling");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(temp_file("ckpt", "nowhere"), &link).unwrap();
    let o = run(command(
        Launcher::Local,
        2,
        &args("1x1x2", 1, 1, &link),
        &[],
    ));
    assert_clean_error(&o, &["symbolic link to nothing"]);
    let o = run(command(
        Launcher::Local,
        2,
        &args("1x1x2", 1, 1, &link.join("below")),
        &[],
    ));
    assert_clean_error(&o, &["symbolic link to nothing"]);
    std::fs::remove_file(&link).unwrap();
}

#[test]
fn a_held_checkpoint_folder_refuses_another_run_naming_its_holder() {
    let dir = fresh_dir("held");
    // The holder hangs in its loop: it holds the folder until it is killed.
    let mut holder = command(Launcher::Local, 2, &args("1x1x2", 1, 1, &dir), &[]);
    holder
        .env("HIMENO_FAULT", "0:3:hang")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = holder.spawn().unwrap();
    let _guard = KillOnPanic(child.id());
    let lock = dir.join(himeno::checkpoint::lock::LOCK);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("token")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never locked"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = format!("pid {}", child.id());
    // Another run of the same problem, a restart, and another problem.
    for extra in [&[][..], &["--restart", "latest"][..]] {
        let o = run(command(
            Launcher::Local,
            2,
            &args("1x1x2", 1, 1, &dir),
            extra,
        ));
        assert_clean_error(&o, &["in use by another run"]);
        assert!(stderr(&o).contains(&pid), "{}", stderr(&o));
    }
    let mut other = args("1x1x2", 1, 1, &dir);
    other[1] = "9x10x11".into();
    let o = run(command(Launcher::Local, 2, &other, &[]));
    assert_clean_error(&o, &["in use by another run"]);
    // A holder that died holds nothing: the kernel released its lock.
    kill_tree(child.id());
    let _ = child.wait();
    let r = json_ok(&run(command(
        Launcher::Local,
        2,
        &args("1x1x2", 1, 1, &dir),
        &["--checkpoint-every", "4"],
    )));
    assert_eq!(r["checkpoints"]["written"], 2, "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn ckpt_entries_himeno_did_not_write_are_never_followed_or_removed() {
    // A committed checkpoint outside the folder, linked in as an old one;
    // a file, a FIFO and a folder of someone else's with checkpoint names.
    let outside = fresh_dir("outside");
    let _ = periodic(&outside);
    let outside_before = listing(&outside);
    let dir = fresh_dir("foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(outside.join("ckpt-0000000008"), dir.join("ckpt-0000000001"))
        .unwrap();
    std::fs::write(dir.join("ckpt-0000000003"), "mine").unwrap();
    mkfifo(&dir.join("ckpt-0000000005"));
    std::fs::create_dir_all(dir.join("ckpt-0000000007")).unwrap();
    std::fs::write(dir.join("ckpt-0000000007/notes.txt"), "mine too").unwrap();
    let foreign: Vec<(String, u64)> = listing(&dir)
        .into_iter()
        .filter(|(n, _)| !n.starts_with("ckpt-0000000001"))
        .collect();
    let r = json_ok(&run(command(
        Launcher::Local,
        4,
        &args("2x2x1", 1, 1, &dir),
        &["--checkpoint-every", "2", "--checkpoint-keep", "1"],
    )));
    assert_eq!(r["checkpoints"]["written"], 4, "{r}");
    assert_eq!(listing(&outside), outside_before, "the link was followed");
    let now = listing(&dir);
    for entry in &foreign {
        assert!(now.contains(entry), "{entry:?} was touched: {now:?}");
    }
    assert!(
        std::fs::symlink_metadata(dir.join("ckpt-0000000001"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Its own checkpoints were pruned to the newest.
    assert!(dir.join("ckpt-0000000008/manifest.json").is_file());
    assert!(!dir.join("ckpt-0000000006").exists());
    // A link where the run would write a checkpoint: that checkpoint is a
    // warning, the link's target untouched, the record kept.
    let dir2 = fresh_dir("link-in-the-way");
    std::fs::create_dir_all(&dir2).unwrap();
    std::os::unix::fs::symlink(
        outside.join("ckpt-0000000008"),
        dir2.join("ckpt-0000000004"),
    )
    .unwrap();
    let o = run(command(
        Launcher::Local,
        4,
        &args("2x2x1", 1, 1, &dir2),
        &["--checkpoint-every", "2"],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["checkpoints"]["written"], 3, "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("iteration 4 was not written"),
        "{r}"
    );
    assert_eq!(listing(&outside), outside_before, "the link was followed");
    for d in [&outside, &dir, &dir2] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn hand_edited_or_odd_manifests_are_refused_and_never_pruned() {
    let dir = fresh_dir("edited");
    let _ = periodic(&dir);
    let newest = dir.join("ckpt-0000000008");
    let m = newest.join("manifest.json");
    let text = std::fs::read_to_string(&m).unwrap();
    let base = planning(args("2x2x1", 1, 1, &dir), 12);
    let latest = ["--restart", "latest"];
    let refused = |words: &str| {
        let before = listing(&dir);
        for extra in [&latest[..], &[][..]] {
            let o = run(command(Launcher::Local, 4, &base, extra));
            assert_refused(&o, words, &dir, &before);
        }
    };
    let edits: [(&str, &str, &str); 7] = [
        ("\"rank-000001.bin\"", "\"../rank-000001.bin\"", "is named"),
        ("\"rank-000001.bin\"", "\"/etc/passwd\"", "is named"),
        (
            "\"rank-000001.bin\"",
            "\"ckpt/rank-000001.bin\"",
            "is named",
        ),
        ("\"wall_s\": ", "\"wall_s\": -", "s, not a time"),
        (
            "\"iteration\": 8",
            "\"iteration\": 18446744073709551616",
            "not one",
        ),
        ("\"iteration\": 8", "\"iteration\": 9", "segments end"),
        ("\"planned\": 10", "\"planned\": 7", "out of range"),
    ];
    for (from, to, words) in edits {
        let edited = text.replacen(from, to, 1);
        assert_ne!(edited, text, "{from}");
        std::fs::write(&m, &edited).unwrap();
        refused(words);
    }
    let huge_wall = text.replacen("\"wall_s\": ", "\"wall_s\": 1e308, \"x\": ", 1);
    std::fs::write(&m, &huge_wall).unwrap();
    refused("s, not a time");
    // Not a regular file: a FIFO, a link to /dev/zero, a huge file.
    std::fs::remove_file(&m).unwrap();
    mkfifo(&m);
    refused("not a regular file");
    std::fs::remove_file(&m).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &m).unwrap();
    refused("symbolic link");
    std::fs::remove_file(&m).unwrap();
    let f = std::fs::File::create(&m).unwrap();
    f.set_len(100 << 20).unwrap();
    drop(f);
    refused("more than");
    std::fs::remove_file(&m).unwrap();
    // Another build's (same version, another commit).
    let commit = serde_json::from_str::<Value>(&text).unwrap()["git_commit"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&m, text.replacen(&commit, &format!("{commit}0"), 1)).unwrap();
    let before = listing(&dir);
    let o = run(command(Launcher::Local, 4, &base, &latest));
    assert_refused(&o, "is of himeno build", &dir, &before);
    std::fs::write(&m, &text).unwrap();
    let r = json_ok(&run(command(Launcher::Local, 4, &base, &latest)));
    assert_eq!(r["restarted_from"]["iteration"], 8, "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restart_checks_the_state_it_takes_up_against_the_reference() {
    // A grid whose rehearsal has a stored answer: the restart's verdict
    // used to be VALID from the rehearsal alone, whatever the checkpoint.
    let grid_args = |dir: &Path| {
        let mut a = args("1x1x2", 1, 1, dir);
        a[1] = "9x10x11".into();
        a[5] = "50".into();
        a
    };
    let dir = fresh_dir("perturbed");
    let a = grid_args(&dir);
    let mut first = command(Launcher::Local, 2, &a, &["--checkpoint-every", "2"]);
    first.env("HIMENO_FAULT", "0:5:perturb");
    let _ = run(first);
    assert!(dir.join("ckpt-0000000008/manifest.json").is_file());
    let o = run(command(
        Launcher::Local,
        2,
        &planning(a, 12),
        &["--restart", "latest"],
    ));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("restarted from does not hold the state"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // The same without the fault: VALID, saying the checkpoint was checked.
    let dir = fresh_dir("clean");
    let a = grid_args(&dir);
    let _ = run(command(
        Launcher::Local,
        2,
        &a,
        &["--checkpoint-every", "2"],
    ));
    let r = json_ok(&run(command(
        Launcher::Local,
        2,
        &planning(a, 12),
        &["--restart", "latest"],
    )));
    assert_eq!(r["verified"], true, "{r}");
    let detail = r["verification"]["detail"].as_str().unwrap();
    assert!(detail.contains("matched a reference run"), "{detail}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `folder` bound read-only onto itself for one test, unbound when
/// dropped; `None`, saying why, where that is not allowed (not root).
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn bind(folder: &Path) -> Option<ReadOnly> {
        let ok = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .arg(folder)
                .arg(folder)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["--bind"]) {
            eprintln!("skipping: cannot bind-mount here (root needed)");
            return None;
        }
        let held = ReadOnly(folder.to_path_buf());
        if !ok(&["-o", "remount,ro,bind"]) {
            eprintln!("skipping: cannot remount a bind mount read-only here");
            return None;
        }
        Some(held)
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn an_old_checkpoint_that_cannot_be_removed_is_a_warning_and_the_run_goes_on() {
    let dir = fresh_dir("unprunable");
    let a = args("1x1x2", 1, 1, &dir);
    let mut first = command(Launcher::Local, 2, &a, &["--checkpoint-every", "2"]);
    first.env("HIMENO_FAULT", format!("0:{STOP_BEFORE}:term"));
    let o = run(first);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let old = dir.join("ckpt-0000000004");
    assert!(old.join("manifest.json").is_file());
    let Some(ro) = ReadOnly::bind(&old) else {
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    };
    let o = run(command(
        Launcher::Local,
        2,
        &a,
        &[
            "--restart",
            "latest",
            "--checkpoint-every",
            "2",
            "--checkpoint-keep",
            "1",
        ],
    ));
    drop(ro);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).expect("the report is printed");
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(answer(&r), reference());
    assert_eq!(r["checkpoints"]["written"], 2, "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("an old checkpoint was not removed"),
        "{r}"
    );
    assert!(old.join("manifest.json").is_file(), "still committed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_folder_given_empty_is_left_empty_when_no_checkpoint_was_due() {
    // As a study makes it (mktemp -d) and removes it when unused (rmdir).
    let dir = fresh_dir("given-empty");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = json_ok(&run(command(
        Launcher::Local,
        2,
        &args("1x1x2", 1, 1, &dir),
        &[],
    )));
    std::fs::remove_dir(&dir).expect("the folder is left empty");
}
