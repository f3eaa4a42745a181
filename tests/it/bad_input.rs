//! Outputs that name one file by two aliases, or name an input, are refused
//! before anything is written (the bad-input table itself, whose rows run
//! on each tier's launcher, is `tests/both/bad_input.rs`).

use crate::common::*;
use std::path::{Path, PathBuf};

/// Every file under `dir` with its bytes (links as their target), sorted.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_symlink() {
            let to = std::fs::read_link(&p).unwrap();
            all.push((p, to.into_os_string().into_encoded_bytes()));
        } else if m.is_dir() {
            all.extend(contents(&p));
        } else {
            all.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    all.sort();
    all
}

/// Runs `args` in `dir`: it must be refused with exit 2, one `himeno:`
/// line saying `word`, nothing on stdout, and every file in `dir` as it
/// was.
fn refused_in(dir: &Path, args: &[&str], word: &str) {
    let before = contents(dir);
    let mut cmd = himeno(args);
    cmd.current_dir(dir).env_remove("HIMENO_FAULT");
    let o = run(cmd);
    let lines = himeno_lines(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert_eq!(lines.len(), 1, "{args:?}: {}", stderr(&o));
    assert!(lines[0].contains(word), "{args:?}: {}", lines[0]);
    assert!(o.stdout.is_empty(), "{args:?}: {}", stdout(&o));
    assert_eq!(contents(dir), before, "{args:?} changed the folder");
}

#[test]
fn outputs_that_are_one_file_by_any_alias_or_an_input_are_refused_before_anything_is_written() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("himeno-bad-{}-aliases", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let tiny = ["--grid", "9x9x9", "--iterations", "2"];
    let mut first = himeno(&tiny);
    first
        .args(["--output", "r.jsonl", "--trace", "t.json"])
        .current_dir(&dir);
    stdout_ok(&run(first));
    std::os::unix::fs::symlink("r.jsonl", dir.join("soft.jsonl")).unwrap();
    std::fs::hard_link(dir.join("r.jsonl"), dir.join("hard.jsonl")).unwrap();
    std::os::unix::fs::symlink("new.json", dir.join("dangling.json")).unwrap();
    std::os::unix::fs::symlink("sub", dir.join("linkdir")).unwrap();
    let same = "are the same file";
    for (output, trace) in [
        ("r.jsonl", "r.jsonl"),
        ("r.jsonl", "soft.jsonl"),
        ("r.jsonl", "hard.jsonl"),
        ("r.jsonl", "./sub/../r.jsonl"),
        ("new.json", "dangling.json"),
        ("sub/x.jsonl", "linkdir/x.jsonl"),
    ] {
        let mut args = tiny.to_vec();
        args.extend(["--output", output, "--trace", trace]);
        refused_in(&dir, &args, same);
    }
    // A trace or results file in the folder the run's checkpoints own.
    for (opt, file) in [("--trace", "ck/t.json"), ("--output", "ck/r.jsonl")] {
        let mut args = tiny.to_vec();
        args.extend(["--checkpoint-dir", "ck", opt, file]);
        refused_in(&dir, &args, "checkpoints own");
    }
    // `report`: a picture that is a results file it reads, or the trace
    // it draws, by name, link or hard link.
    let plots = dir.join("plots");
    let mut cmd = himeno(&["report", "r.jsonl", "--plot", plots.to_str().unwrap()]);
    cmd.current_dir(&dir);
    stdout_ok(&run(cmd));
    let picture = std::fs::read_dir(&plots)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with("-speedup.svg"))
        .expect("a speed-up picture");
    std::fs::remove_dir_all(&plots).unwrap();
    std::fs::create_dir(&plots).unwrap();
    std::fs::hard_link(dir.join("r.jsonl"), plots.join(&picture)).unwrap();
    refused_in(
        &dir,
        &["report", "r.jsonl", "--plot", "plots"],
        "same file as the input",
    );
    std::fs::remove_file(plots.join(&picture)).unwrap();
    std::os::unix::fs::symlink("../r.jsonl", plots.join(&picture)).unwrap();
    refused_in(
        &dir,
        &["report", "soft.jsonl", "--plot", "plots"],
        "same file as the input",
    );
    std::fs::remove_dir_all(&plots).unwrap();
    std::fs::copy(dir.join("t.json"), dir.join("timeline.svg")).unwrap();
    refused_in(
        &dir,
        &["report", "--timeline", "timeline.svg", "--plot", "."],
        "same file as the input",
    );
    // Beside the trace (no --plot): `t-timeline.png` is a hard link of it.
    std::fs::hard_link(dir.join("t.json"), dir.join("t-timeline.png")).unwrap();
    refused_in(
        &dir,
        &["report", "--timeline", "t.json"],
        "same file as the input",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
