//! Scaling-study workflow: `himeno report`, `himeno model`, `himeno bench
//! pingpong`, and the scripts (syntax, shellcheck, dry runs, a real sweep).

use crate::common::{
    BIN, MPI, children, himeno, hydra, json_ok, launcher, run, scratch, stderr, stdout, stdout_ok,
    with_default_signals, write_executable,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (tests run there, but be explicit for scripts).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every shell script the project ships: the files of `scripts/` and its
/// Slurm and PBS folders, and CI's entry point.
fn scripts() -> Vec<PathBuf> {
    let mut v = vec![root().join(".ci/run")];
    for dir in ["scripts", "scripts/slurm", "scripts/pbs"] {
        for e in std::fs::read_dir(root().join(dir)).expect("script folder") {
            let path = e.expect("entry").path();
            if path.is_file() {
                v.push(path);
            }
        }
    }
    for name in [
        "sweep.sh",
        "bind.sh",
        "bench-cpu.sh",
        "run-job.sh",
        "test.sh",
    ] {
        assert!(
            v.contains(&root().join("scripts").join(name)),
            "{name}: {v:?}"
        );
    }
    v
}

/// A bash command running `script` with `args` from the repository root.
fn bash(script: &str, args: &[&str]) -> Command {
    // Signals at their defaults, as a batch shell has them: the stop-signal
    // test sends the sweep SIGHUP and SIGINT.
    let mut c = with_default_signals("bash");
    c.current_dir(root()).arg(script).args(args);
    c
}

#[test]
fn scripts_pass_bash_n_and_shellcheck() {
    let have_shellcheck = Command::new("shellcheck").arg("--version").output().is_ok();
    if !have_shellcheck {
        eprintln!("shellcheck not installed: checking syntax with bash -n only");
    }
    for s in scripts() {
        let o = run({
            let mut c = Command::new("bash");
            c.arg("-n").arg(&s);
            c
        });
        assert!(
            o.status.success(),
            "bash -n {}: {}",
            s.display(),
            stderr(&o)
        );
        if have_shellcheck {
            let o = run({
                let mut c = Command::new("shellcheck");
                c.arg(&s);
                c
            });
            assert!(
                o.status.success(),
                "shellcheck {}:\n{}",
                s.display(),
                stdout(&o)
            );
        }
    }
}

#[test]
fn plan_resolves_the_runs_of_study_definitions() {
    let runs = json_ok(&run(himeno(&[
        "plan",
        "--format",
        "json",
        "--max-ranks",
        "4",
        "inputs/studies/weak-M.env",
    ])));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "1, 2 and 4 ranks");
    assert_eq!(runs[2]["grid"], serde_json::json!([254, 254, 256]));
    assert_eq!(runs[2]["procs"], serde_json::json!([2, 2, 1]));
    assert_eq!(runs[2]["kind"], "weak");
    let dir = scratch("plan");
    let bad = dir.join("bad.env");
    std::fs::write(&bad, "NAME=x\nSIZES=XS\nRANKS=\"1 two\"\n").unwrap();
    let o = run(himeno(&["plan", bad.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("bad.env: line 3: rank count 'two'"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn sweep_dry_run_prints_every_run_and_the_report() {
    let out = stdout_ok(&run(bash(
        "scripts/sweep.sh",
        &[
            "--dry-run",
            "--himeno",
            BIN,
            "--results",
            "/tmp/r.jsonl",
            "--launcher",
            "mpirun -np %n",
            "inputs/studies/local-strong.env",
            "inputs/studies/local-weak.env",
        ],
    )));
    let lines: Vec<&str> = out.lines().collect();
    // local-strong: 2 sizes x (1 + 2 + 3 process grids); local-weak: 3.
    assert_eq!(lines.len(), 12 + 3 + 1, "{out}");
    assert!(lines[0].starts_with(&format!("mpirun -np 1 {BIN} --size XS --procs 1x1x1")));
    assert!(out.contains(&format!(
        "-np 4 {BIN} --size S --procs 1x2x2 --iterations 40"
    )));
    // Weak scaling: XS interior 30x30x62 per rank, doubled along i then j.
    assert!(out.contains(&format!("-np 2 {BIN} --grid 62x32x64 --procs 2x1x1")));
    assert!(out.contains(&format!("-np 4 {BIN} --grid 62x62x64 --procs 2x2x1")));
    // In-process ranks need no launcher.
    let local = stdout_ok(&run(bash(
        "scripts/sweep.sh",
        &[
            "--dry-run",
            "--himeno",
            BIN,
            "--launcher",
            "local",
            "inputs/studies/local-weak.env",
        ],
    )));
    assert!(
        local.lines().nth(2).unwrap().starts_with(&format!(
            "{BIN} --grid 62x62x64 --procs 2x2x1 --iterations 40 --threads 1 --label local-weak \
             --scaling weak --output results/local-weak.jsonl --local-ranks 4"
        )),
        "{local}"
    );
    assert!(
        lines[15].contains("report /tmp/r.jsonl --plot /tmp/r-plots"),
        "{out}"
    );
    let bad = run(bash(
        "scripts/sweep.sh",
        &["--dry-run", "--himeno", BIN, "no-such-study.env"],
    ));
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("cannot read study definition"));
}

#[test]
fn job_templates_dry_run_locally() {
    // One template per scheduler; STUDY chooses the study, whose file name
    // names the results.
    for (script, study, launcher, args) in [
        (
            "scripts/slurm/study.sbatch",
            "inputs/studies/strong-L.env",
            "srun --ntasks=8",
            "--size L",
        ),
        (
            "scripts/slurm/study.sbatch",
            "inputs/studies/weak-M.env",
            "srun --ntasks=4",
            "--grid 254x254x256 --procs 2x2x1",
        ),
        (
            "scripts/pbs/study.pbs",
            "inputs/studies/strong-L.env",
            "mpiexec -n 16",
            "--size L",
        ),
        (
            "scripts/pbs/study.pbs",
            "inputs/studies/weak-M.env",
            "mpiexec -n 2",
            "--grid 254x128x256 --procs 2x1x1",
        ),
    ] {
        let mut c = bash(script, &[]);
        c.env("DRY_RUN", "1")
            .env("HIMENO", BIN)
            .env("STUDY", study)
            .env_remove("SLURM_NTASKS")
            .env_remove("SLURM_JOB_ID")
            .env_remove("PBS_JOBID")
            .env_remove("PBS_NODEFILE")
            .env_remove("RESULTS");
        let out = stdout_ok(&run(c));
        assert!(
            out.lines()
                .any(|l| l.contains(launcher) && l.contains(args)),
            "{script} {study}: no '{launcher} ... {args}' in\n{out}"
        );
        assert!(
            out.contains("bind.sh --policy local --layout roundrobin --"),
            "{out}"
        );
        assert!(
            !script.ends_with(".sbatch") || out.contains("--kill-on-bad-exit=1"),
            "{script}: a crashed task would leave the others waiting:\n{out}"
        );
        let name = study
            .trim_start_matches("inputs/studies/")
            .trim_end_matches(".env");
        assert!(
            out.contains(&format!("--output results/{name}-local.jsonl")),
            "{script}: results not named after {name}:\n{out}"
        );
    }
    // Without a study there is nothing to run.
    let mut c = bash("scripts/slurm/study.sbatch", &[]);
    c.env("DRY_RUN", "1").env("STUDY", " ");
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("STUDY is empty"), "{}", stderr(&o));
}

#[test]
fn bind_helper_places_ranks_and_degrades_without_numactl() {
    let dry = |policy: &str, layout: &str, rank: &str| {
        let mut c = bash(
            "scripts/bind.sh",
            &[
                "--dry-run",
                "--policy",
                policy,
                "--layout",
                layout,
                "--",
                "himeno",
            ],
        );
        c.env("HIMENO_NUMA_NODES", "2")
            .env("OMPI_COMM_WORLD_LOCAL_RANK", rank)
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
        stdout_ok(&run(c))
    };
    if Command::new("numactl").arg("--show").output().is_ok() {
        assert!(
            dry("membind", "roundrobin", "3")
                .contains("numactl --cpunodebind=1 --membind=1 himeno")
        );
        assert!(
            dry("local", "packed", "1").contains("numactl --cpunodebind=0 --localalloc himeno")
        );
        assert!(
            dry("interleave", "packed", "2").contains("--cpunodebind=1 --interleave=all himeno")
        );
    }
    assert!(dry("none", "packed", "2").trim_end().ends_with("himeno"));
    // Without numactl on PATH the rank runs unbound, and says so.
    let empty = scratch("nopath");
    let mut c = Command::new("/bin/bash");
    c.current_dir(root())
        .args([
            "scripts/bind.sh",
            "--policy",
            "membind",
            "--",
            "/usr/bin/env",
        ])
        .env("PATH", &empty);
    let o = run(c);
    assert!(
        stdout(&o).contains("HIMENO_BINDING=none (numactl not found"),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("numactl not found"));
    let bad = run(bash(
        "scripts/bind.sh",
        &["--policy", "sideways", "--", "true"],
    ));
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn binding_is_recorded_in_the_result() {
    let mut c = bash(
        "scripts/bind.sh",
        &[
            "--policy",
            "local",
            "--",
            BIN,
            "--size",
            "XS",
            "--iterations",
            "2",
            "--format",
            "json",
        ],
    );
    c.env("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    let v = json_ok(&run(c));
    let b = v["binding"].as_str().expect("a binding string");
    assert!(
        b.starts_with("local roundrobin") || b.starts_with("none ("),
        "{b}"
    );
    let plain = json_ok(&run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "1",
        "--format",
        "json",
    ])));
    assert!(plain["binding"].is_null());
}

/// One real record line from a short run.
fn real_record(dir: &Path) -> String {
    let file = dir.join("one.jsonl");
    let o = run(himeno(&[
        "--size",
        "XS",
        "--iterations",
        "3",
        "--threads",
        "1",
        "--label",
        "t",
        "--format",
        "json",
        "--output",
        file.to_str().unwrap(),
    ]));
    json_ok(&o);
    std::fs::read_to_string(&file).unwrap().trim().to_string()
}

#[test]
fn report_flags_incomplete_and_failed_runs_and_skips_malformed_lines() {
    let dir = scratch("report");
    let good = real_record(&dir);
    let incomplete = good.replace("\"complete\":true", "\"complete\":false");
    let failed = good.replace("\"verified\":true", "\"verified\":false");
    assert_ne!(incomplete, good);
    let file = dir.join("mixed.jsonl");
    let truncated = &good[..good.len() / 2];
    std::fs::write(
        &file,
        format!(
            "{good}\nnot json at all\n{incomplete}\n{truncated}\n{}\n",
            failed
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = run(himeno(&["report", f, "--format", "json"]));
    let v = json_ok(&o);
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(v["groups"][0]["rows"].as_array().unwrap().len(), 1);
    assert_eq!(v["groups"][0]["rows"][0]["speedup"], 1.0);
    let reasons: Vec<&str> = v["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["reason"].as_str().unwrap())
        .collect();
    let expected_failed = if failed == good { 1 } else { 2 };
    assert_eq!(reasons.len(), expected_failed, "{reasons:?}");
    assert_eq!(reasons[0], "incomplete (stopped early)");
    let lines: Vec<u64> = v["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["source"]["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [2, 4]);
    assert!(stderr(&o).contains(&format!("{f}:2")), "{}", stderr(&o));
    let text = run(himeno(&["report", f]));
    let t = stdout_ok(&text);
    assert!(t.contains("set aside") && t.contains("incomplete"), "{t}");
    assert!(t.contains("2 line(s) skipped"));
    let csv = stdout_ok(&run(himeno(&["report", f, "--format", "csv"])));
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let missing = run(himeno(&["report", "/nonexistent/results.jsonl"]));
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("cannot read results file"));
}

#[test]
fn model_matches_a_hand_computed_case() {
    // 12^3 grid on 2x1x1: 500 points per rank at 34 MFLOPS = 500 us; one
    // 12x12-value face (576 B) at 1 us + 576 B / 1 GB/s; allreduce 1 us.
    let v = json_ok(&run(himeno(&[
        "model",
        "--grid",
        "12x12x12",
        "--procs",
        "2x1x1",
        "--rate-mflops",
        "34",
        "--latency-us",
        "1",
        "--bandwidth-gbs",
        "1",
        "--format",
        "json",
    ])));
    let p = &v["prediction"];
    let total = p["total_s"].as_f64().unwrap();
    assert!((total - 502.576e-6).abs() < 1e-12, "{v}");
    assert!((p["halo_s"].as_f64().unwrap() - 1.576e-6).abs() < 1e-15);
    // The same rate given as seconds per iteration of one rank.
    let v = json_ok(&run(himeno(&[
        "model",
        "--grid",
        "12x12x12",
        "--ranks",
        "1",
        "--seconds-per-iteration",
        "0.001",
        "--format",
        "json",
    ])));
    assert!((v["rate_mflops"].as_f64().unwrap() - 34.0).abs() < 1e-9);
    let o = run(himeno(&["model", "--size", "S", "--ranks", "4"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--rate-mflops"), "{}", stderr(&o));
}

#[test]
fn pingpong_needs_two_ranks() {
    let o = run(himeno(&["bench", "pingpong", "--max-bytes", "64"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at least 2 ranks"), "{}", stderr(&o));
}

#[test]
fn small_real_sweep_writes_results_tables_and_plots() {
    let dir = scratch("sweep");
    let ranks = "1 2";
    let study = dir.join("tiny.env");
    std::fs::write(
        &study,
        format!("NAME=tiny\nKIND=strong\nSIZES=XS\nRANKS=\"{ranks}\"\nPROCS=\"\"\nITERATIONS=5\nTHREADS=1\n"),
    )
    .unwrap();
    let results = dir.join("r.jsonl");
    let plots = dir.join("plots");
    let launcher = match (MPI, hydra()) {
        (false, _) => "local".to_string(),
        (true, true) => format!("{} -n %n", launcher()),
        (true, false) => format!("{} --oversubscribe --allow-run-as-root -np %n", launcher()),
    };
    let mut c = bash(
        "scripts/sweep.sh",
        &[
            "--himeno",
            BIN,
            "--launcher",
            &launcher,
            "--results",
            results.to_str().unwrap(),
            "--plots",
            plots.to_str().unwrap(),
            study.to_str().unwrap(),
        ],
    );
    c.env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    let out = stdout_ok(&run(c));
    let n = ranks.split(' ').count();
    assert_eq!(
        std::fs::read_to_string(&results).unwrap().lines().count(),
        n
    );
    assert!(
        out.contains("strong scaling, grid 32x32x64 (XS) [tiny]"),
        "{out}"
    );
    let mut pictures = 0;
    for e in std::fs::read_dir(&plots).unwrap() {
        let p = e.unwrap().path();
        assert!(
            std::fs::metadata(&p).unwrap().len() > 1000,
            "{} is nearly empty",
            p.display()
        );
        pictures += 1;
    }
    assert_eq!(
        pictures, 6,
        "speed-up, efficiency and phases, as SVG and PNG"
    );
}

#[test]
fn report_keeps_emulated_gpu_runs_in_groups_of_their_own() {
    let dir = scratch("emulated");
    let cpu = real_record(&dir);
    let mut gpu: serde_json::Value = serde_json::from_str(&cpu).unwrap();
    gpu["backend"] = "gpu".into();
    let mut emulated = gpu.clone();
    for r in emulated["per_rank"].as_array_mut().unwrap() {
        r["emulated"] = true.into();
        r["emulator"] = "himeno CUDA emulator (host CPU, seed 7, lazy streams)".into();
    }
    let file = dir.join("gpu.jsonl");
    std::fs::write(&file, format!("{gpu}\n{emulated}\n")).unwrap();
    let f = file.to_str().unwrap();
    let v = json_ok(&run(himeno(&["report", f, "--format", "json"])));
    let groups = v["groups"].as_array().unwrap();
    let got: Vec<(&str, bool)> = groups
        .iter()
        .map(|g| (g["backend"].as_str().unwrap(), g["emulated"] == true))
        .collect();
    assert_eq!(got, [("gpu", false), ("gpu-emulated", true)], "{v}");
    let text = stdout_ok(&run(himeno(&["report", f])));
    assert!(
        text.contains("== EMULATED GPU (not GPU performance): strong scaling"),
        "{text}"
    );
    let plots = dir.join("plots");
    let o = run(himeno(&["report", f, "--plot", plots.to_str().unwrap()]));
    stdout_ok(&o);
    let names: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.contains("gpu-emulated")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.contains("-gpu-t") && !n.contains("emulated")),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Every shell script under `scripts/` (any depth): the files that start
/// with `#!`.
fn all_scripts() -> Vec<PathBuf> {
    fn walk(dir: &Path, v: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("script folder") {
            let path = e.expect("entry").path();
            if path.is_dir() {
                walk(&path, v);
            } else if std::fs::read(&path).is_ok_and(|b| b.starts_with(b"#!")) {
                v.push(path);
            }
        }
    }
    let mut v = Vec::new();
    walk(&root().join("scripts"), &mut v);
    v.sort();
    v
}

/// A script's header: the comment lines after `#!`, up to the first line
/// that is not a `# ` comment (a scheduler directive ends it too).
fn header(script: &Path) -> String {
    let text = std::fs::read_to_string(script).unwrap();
    let mut out = String::new();
    for line in text.lines().skip(1) {
        let Some(rest) = line.strip_prefix('#') else {
            break;
        };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            break;
        }
        out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        out.push('\n');
    }
    out
}

#[test]
fn every_script_prints_its_whole_header_for_help_and_does_nothing_else() {
    let dir = scratch("help");
    // Stand-ins for every program a script's real work starts: running
    // one leaves a mark.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mark = dir.join("ran");
    let programs = "cargo apt-get sudo mpirun mpiexec srun sbatch qsub python3 pip g++ ip munged \
                    slurmctld slurmd nsenter unshare numactl rustup nproc dd mktemp";
    for p in programs.split_whitespace() {
        let f = bin.join(p);
        write_executable(
            &f,
            &format!("#!/bin/sh\necho {p} >> '{}'\nexit 97\n", mark.display()),
        );
    }
    let cwd = dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let scripts = all_scripts();
    assert!(scripts.len() >= 11, "{scripts:?}");
    for s in &scripts {
        let want = header(s);
        assert!(
            want.lines().count() >= 5,
            "{}: header {want:?}",
            s.display()
        );
        for flag in ["--help", "-h"] {
            let mut c = Command::new("bash");
            c.current_dir(&cwd)
                .arg(s)
                .arg(flag)
                .env("PATH", &path)
                .env("HIMENO_CLUSTER_DIR", dir.join("state"))
                .env("HIMENO_NVRTC_DIR", dir.join("nvrtc"))
                .env("HIMENO_EMU_DIR", dir.join("emu"))
                .env("XDG_CACHE_HOME", dir.join("cache"))
                .env_remove("SLURM_JOB_ID")
                .env_remove("PBS_JOBID");
            let o = run(c);
            let what = format!("{} {flag}", s.display());
            assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(&o));
            assert_eq!(stdout(&o), want, "{what}");
            assert_eq!(stderr(&o), "", "{what}");
            assert!(
                !mark.exists(),
                "{what} ran {:?}",
                std::fs::read_to_string(&mark)
            );
            for made in ["state", "nvrtc", "emu", "cache"] {
                assert!(!dir.join(made).exists(), "{what} made {made}");
            }
            assert_eq!(
                std::fs::read_dir(&cwd).unwrap().count(),
                0,
                "{what} wrote in its folder"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_option_value_is_a_usage_error_of_the_script() {
    for (script, options) in [
        (
            "scripts/sweep.sh",
            &[
                "--results",
                "--plots",
                "--himeno",
                "--launcher",
                "--bind",
                "--layout",
                "--max-ranks",
                "--extra",
                "--report-args",
            ][..],
        ),
        ("scripts/bind.sh", &["--policy", "--layout"][..]),
        (
            "scripts/bench-cpu.sh",
            &[
                "--sizes",
                "--threads",
                "--temporal",
                "--tile-rows",
                "--seconds",
                "--iterations",
                "--repeats",
                "--bind",
                "--bin",
            ][..],
        ),
        ("scripts/local-cluster.sh", &["up --nodes", "up --cpus"][..]),
        (
            "scripts/bench-trace.sh",
            &[
                "--sizes",
                "--ranks",
                "--repeats",
                "--iterations",
                "--launcher",
                "--bin",
            ][..],
        ),
    ] {
        let name = script.trim_start_matches("scripts/");
        for words in options {
            let args: Vec<&str> = words.split(' ').collect();
            let o = run(bash(script, &args));
            let what = format!("{script} {words}");
            assert_eq!(o.status.code(), Some(2), "{what}: {}", stderr(&o));
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(
                err.starts_with(&format!("{name}: ")) && err.contains(args[args.len() - 1]),
                "{what}: {err}"
            );
            assert!(stdout(&o).is_empty(), "{what}: {}", stdout(&o));
        }
    }
    // Scripts without options refuse any argument at once instead of
    // running the whole job.
    for script in [
        "scripts/test.sh",
        "scripts/install-nvrtc.sh",
        "scripts/install-reframe.sh",
    ] {
        let o = run(bash(script, &["--frobnicate"]));
        assert_eq!(o.status.code(), Some(2), "{script}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{script}: {}", stderr(&o));
    }
}

#[test]
fn sweep_reads_max_ranks_in_base_10_and_refuses_what_is_not_a_count() {
    let dir = scratch("maxranks");
    let study = dir.join("wide.env");
    std::fs::write(
        &study,
        "NAME=wide\nKIND=strong\nSIZES=XS\nRANKS=\"1 8 9 16\"\nITERATIONS=2\nTHREADS=1\n",
    )
    .unwrap();
    let sweep = |max: &str| {
        run(bash(
            "scripts/sweep.sh",
            &[
                "--dry-run",
                "--himeno",
                BIN,
                "--launcher",
                "mpirun -np %n",
                "--max-ranks",
                max,
                study.to_str().unwrap(),
            ],
        ))
    };
    for max in ["08", "8", "0008"] {
        let out = stdout_ok(&sweep(max));
        let counts: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("mpirun -np "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(counts, ["1", "8"], "--max-ranks {max}:\n{out}");
    }
    for bad in ["0", "x", "-3", "8.0", "99999999999999999999", " 8"] {
        let o = sweep(bad);
        assert_eq!(
            o.status.code(),
            Some(2),
            "--max-ranks {bad:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).starts_with("sweep.sh: --max-ranks"),
            "{bad:?}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty());
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_stop_signal_ends_the_sweep_with_the_partial_record_and_a_report() {
    use crate::common::signals::{Running, kill};
    // To the sweep's shell (sbatch --signal=B:USR1, a time limit's
    // SIGTERM, a closed terminal), or to the run only (sbatch --signal=USR1
    // warns the job steps, not the batch shell).
    for (sig, to_run, said) in [
        ("USR1", false, "stopped by SIGUSR1"),
        ("TERM", false, "stopped by SIGTERM"),
        ("HUP", false, "stopped by SIGHUP"),
        ("INT", false, "stopped by SIGINT"),
        ("USR1", true, "stopped by a stop signal to the run"),
    ] {
        let what = format!("SIG{sig} to the {}", if to_run { "run" } else { "sweep" });
        let dir = scratch(&format!("stop-{sig}-{to_run}"));
        let study = dir.join("long.env");
        std::fs::write(
            &study,
            "NAME=long\nKIND=strong\nSIZES=\"XS S\"\nRANKS=1\nITERATIONS=100000000\nTHREADS=1\n",
        )
        .unwrap();
        let results = dir.join("r.jsonl");
        let c = bash(
            "scripts/sweep.sh",
            &[
                "--himeno",
                BIN,
                "--launcher",
                "local",
                "--extra",
                "-v",
                "--results",
                results.to_str().unwrap(),
                study.to_str().unwrap(),
            ],
        );
        let sweep = Running::start(c);
        // The first run's log, once its timed loop has begun.
        let first_log = || {
            let logs = std::fs::read_dir(dir.join("r-logs")).ok()?;
            let log = logs
                .flatten()
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().contains("long-XS-n1-1x1x1."))?;
            std::fs::read_to_string(log).ok()
        };
        let started = std::time::Instant::now();
        while !first_log().is_some_and(|l| l.contains("rehearsal done")) {
            assert!(
                started.elapsed().as_secs() < 60,
                "{what}: the first run did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let shell = sweep.child.id();
        if to_run {
            let run = children(shell);
            assert_eq!(run.len(), 1, "{what}: {run:?}");
            kill(sig, run[0]);
        } else {
            kill(sig, shell);
        }
        let ended = sweep.finish();
        assert_eq!(ended.status.code(), Some(2), "{what}: {}", ended.stderr);
        assert!(ended.stderr.contains(said), "{what}: {}", ended.stderr);
        assert!(
            ended
                .stderr
                .contains("0 run(s) finished, 1 stopped, 1 not started"),
            "{what}: {}",
            ended.stderr
        );
        let logs = std::fs::read_dir(dir.join("r-logs")).unwrap().count();
        assert_eq!(logs, 1, "{what}: a second run started");
        let recs = std::fs::read_to_string(&results).unwrap();
        assert_eq!(recs.lines().count(), 1, "{what}: {recs}");
        assert!(recs.contains("\"complete\":false"), "{what}: {recs}");
        assert!(
            ended.stdout.contains("incomplete"),
            "{what}: no report:\n{}",
            ended.stdout
        );
        assert!(dir.join("r-plots").is_dir(), "{what}: no plots");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn pbs_template_submits_itself_with_every_setting_intact() {
    let dir = scratch("pbs");
    // A stand-in qsub that does what PBS does with -v: split the list at
    // commas, start the job with those variables only (no other
    // environment), in a job (PBS_JOBID), here as a dry run.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let qsub = bin.join("qsub");
    write_executable(
        &qsub,
        &format!(
            "#!/bin/bash\nvars=()\nwhile (($# > 1)); do\n  case $1 in\n    \
             -v) IFS=, read -r -a list <<< \"$2\"; vars+=(\"${{list[@]}}\"); shift 2 ;;\n    \
             -N) shift 2 ;;\n    *) shift ;;\n  esac\ndone\n\
             exec env -i PATH=\"$PATH\" PBS_JOBID=7.stub PBS_O_WORKDIR='{}' DRY_RUN=1 \
             \"${{vars[@]}}\" bash \"$1\"\n",
            root().display()
        ),
    );
    let results = dir.join("r,1 'x'.jsonl");
    let settings = [
        ("STUDY", "inputs/studies/weak-M.env"),
        ("HIMENO", BIN),
        ("BIND", "interleave"),
        ("LAYOUT", "packed"),
        ("LAUNCHER", "mpiexec --map-by ppr:1:node,pe=1 -n %n"),
        ("EXTRA", "--label a,b --threads 1"),
        ("REPORT_ARGS", "--model-pingpong p,q.json"),
        ("RESULTS", results.to_str().unwrap()),
    ];
    let mut c = bash("scripts/pbs/study.pbs", &["-l", "walltime=00:10:00"]);
    c.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    )
    .env_remove("PBS_JOBID")
    .env_remove("DRY_RUN");
    for (k, v) in settings {
        c.env(k, v);
    }
    // The dry run's commands, shell-quoted: commas and quotes unquoted
    // again for comparison.
    let out = stdout_ok(&run(c))
        .replace("\\,", ",")
        .replace("\\ ", " ")
        .replace("\\'", "'");
    let r = results.to_str().unwrap();
    assert!(
        out.contains(&format!(
            "mpiexec --map-by ppr:1:node,pe=1 -n 2 {}/scripts/bind.sh --policy interleave \
             --layout packed -- {BIN} --grid 254x128x256 --procs 2x1x1",
            root().display()
        )),
        "{out}"
    );
    assert!(
        out.lines()
            .filter(|l| l.contains("--procs"))
            .all(|l| l.contains(&format!("--output {r} --label a,b --threads 1"))),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "report {r} --plot {} --model-pingpong p,q.json",
            r.trim_end_matches(".jsonl").to_string() + "-plots"
        )),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_crashed_run_is_a_failure_of_the_sweep_not_a_stop() {
    // A launcher reports a crashed rank with the crash's status, while the
    // ranks it then stops may say they were stopped: the sweep goes on.
    let dir = scratch("crash");
    let fake = dir.join("himeno");
    write_executable(
        &fake,
        &format!(
            "#!/bin/bash\nfor a in \"$@\"; do\n  if [[ $a == S ]]; then\n    \
             echo 'himeno: stopped by a signal after 1 of 2 iterations' >&2\n    exit 139\n  \
             fi\ndone\nexec '{BIN}' \"$@\"\n"
        ),
    );
    let study = dir.join("two.env");
    std::fs::write(
        &study,
        "NAME=two\nKIND=strong\nSIZES=\"S XS\"\nRANKS=1\nITERATIONS=2\nTHREADS=1\n",
    )
    .unwrap();
    let results = dir.join("r.jsonl");
    let o = run(bash(
        "scripts/sweep.sh",
        &[
            "--himeno",
            fake.to_str().unwrap(),
            "--launcher",
            "local",
            "--results",
            results.to_str().unwrap(),
            study.to_str().unwrap(),
        ],
    ));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("[1] two size S") && err.contains("FAILED (exit 139"),
        "{err}"
    );
    assert!(
        err.contains("[2] two size XS") && err.contains("ok"),
        "{err}"
    );
    assert!(
        !err.contains("STOPPED") && !err.contains("stopped by"),
        "{err}"
    );
    assert!(err.contains("2 run(s), 1 failed"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&results).unwrap().lines().count(),
        1
    );
    assert_eq!(std::fs::read_dir(dir.join("r-logs")).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn counts_with_leading_zeros_are_read_in_base_10_by_every_script() {
    let mut c = bash("scripts/run-job.sh", &[]);
    c.env("NP", "08").env("DRY_RUN", "1");
    let out = stdout_ok(&run(c));
    assert!(
        out.starts_with("mpirun ") && out.contains(" -np 8 "),
        "{out}"
    );
    for bad in ["x", "0", "-1", ""] {
        let mut c = bash("scripts/run-job.sh", &[]);
        c.env("NP", bad).env("DRY_RUN", "1");
        let o = run(c);
        // An empty NP is the default.
        let want = if bad.is_empty() { 0 } else { 2 };
        assert_eq!(o.status.code(), Some(want), "NP={bad:?}: {}", stderr(&o));
    }
    let bind = |nodes: &str, rank: &str| {
        let mut c = bash(
            "scripts/bind.sh",
            &["--dry-run", "--policy", "local", "--", "true"],
        );
        c.env("HIMENO_NUMA_NODES", nodes)
            .env("OMPI_COMM_WORLD_LOCAL_RANK", rank);
        run(c)
    };
    if Command::new("numactl").arg("--show").output().is_ok() {
        let out = stdout_ok(&bind("08", "09"));
        assert!(
            out.contains("rank\\ 9\\ on\\ NUMA\\ node\\ 1\\ of\\ 8"),
            "{out}"
        );
    }
    for (nodes, rank) in [("x", "0"), ("0", "0"), ("2", "one")] {
        let o = bind(nodes, rank);
        assert_eq!(o.status.code(), Some(2), "{nodes} {rank}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("bind.sh: "), "{}", stderr(&o));
    }
}

#[test]
fn a_plot_name_planted_as_a_link_is_replaced_never_written_through() {
    let dir = scratch("planted-plot");
    let f = dir.join("r.jsonl");
    std::fs::write(&f, real_record(&dir) + "\n").unwrap();
    let f = f.to_str().unwrap();
    let plots = dir.join("plots");
    stdout_ok(&run(himeno(&[
        "report",
        f,
        "--plot",
        plots.to_str().unwrap(),
    ])));
    let names: Vec<PathBuf> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    for p in &names {
        std::fs::remove_file(p).unwrap();
        std::os::unix::fs::symlink(&victim, p).unwrap();
    }
    stdout_ok(&run(himeno(&[
        "report",
        f,
        "--plot",
        plots.to_str().unwrap(),
    ])));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    for p in &names {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert!(m.is_file() && m.len() > 0, "{}", p.display());
    }
    // Nothing but the pictures: no temporary file is left.
    assert_eq!(std::fs::read_dir(&plots).unwrap().count(), names.len());
}
