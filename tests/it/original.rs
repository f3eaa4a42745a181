//! What the original Himeno codes print and choose, kept: the default size
//! of a job unless a size is named, and the number formats of the original
//! report lines.

use crate::common::*;
use std::path::Path;
use std::process::Command;

#[test]
fn run_job_keeps_its_default_size_unless_the_size_is_named() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/run-job.sh");
    let cases: [(&[&str], &str); 5] = [
        (&[], "himeno --size L"),
        (&["--seconds", "20"], "himeno --size L --seconds 20"),
        (
            &["--size", "M", "--seconds", "10"],
            "himeno --size M --seconds 10",
        ),
        (&["--grid=9x9x9"], "himeno --grid=9x9x9"),
        (
            &["run", "--seconds", "5"],
            "himeno run --size L --seconds 5",
        ),
    ];
    for (args, want) in cases {
        let mut cmd = Command::new("bash");
        cmd.arg(&script).args(args).env("DRY_RUN", "1");
        let out = stdout_ok(&run(cmd));
        assert!(out.trim_end().ends_with(want), "{args:?}: {out}");
    }
}

#[test]
fn the_original_lines_have_the_original_number_formats() {
    let out = stdout_ok(&run(himeno(&["--size", "XS", "--iterations", "3"])));
    let line = |head: &str| {
        out.lines()
            .find(|l| l.starts_with(head))
            .unwrap_or_else(|| panic!("no '{head}' in {out}"))
            .to_string()
    };
    // printf(" Gosa : %e \n"), (" MFLOPS measured : %f\tcpu : %f\n"),
    // (" Score based on Pentium III 600MHz : %f\n").
    let gosa = line(" Gosa : ");
    let value = gosa.strip_prefix(" Gosa : ").unwrap();
    let (mantissa, exp) = value.trim_end().split_once('e').unwrap();
    assert!(gosa.ends_with(' '), "{gosa:?}");
    assert_eq!(mantissa.split_once('.').unwrap().1.len(), 6, "{gosa}");
    assert!(
        exp.len() == 3 && (exp.starts_with('-') || exp.starts_with('+')),
        "{gosa}"
    );
    let mflops = line(" MFLOPS measured : ");
    let (m, cpu) = mflops.split_once("\tcpu : ").unwrap();
    for v in [m.rsplit(' ').next().unwrap(), cpu] {
        assert_eq!(v.split_once('.').unwrap().1.len(), 6, "{mflops}");
    }
    let score = line(" Score based on Pentium III 600MHz : ");
    assert_eq!(score.rsplit_once('.').unwrap().1.len(), 6, "{score}");
}
