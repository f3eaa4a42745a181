//! Scheduler signals to long runs: SIGUSR1 and SIGINT mark the text and CSV
//! reports incomplete, SIGUSR1 to `mpirun` stops every rank, and SIGTERM to
//! every rank stops the job as Slurm does at a time limit.

use crate::both::signals::*;
use crate::common::signals::*;
use crate::common::*;

#[test]
fn sigusr1_and_sigint_mark_the_text_and_csv_reports_incomplete() {
    for (sig, format) in [("USR1", "text"), ("INT", "csv")] {
        let mut args = LONG.to_vec();
        args.extend(["3", "--format", format]);
        let e = stop_after(himeno(&args), "rehearsal done", sig);
        assert_eq!(e.status.code(), Some(2), "{sig}: {}", e.stderr);
        if format == "text" {
            assert!(
                e.stdout.contains("(INCOMPLETE: stopped by a signal"),
                "{}",
                e.stdout
            );
        } else {
            let rows: Vec<Vec<&str>> = e.stdout.lines().map(|l| l.split(',').collect()).collect();
            let col = rows[0]
                .iter()
                .position(|h| *h == "complete")
                .expect("complete column");
            assert_eq!(rows[1][col], "false", "{}", e.stdout);
        }
        assert!(
            !e.stdout.contains("VALID"),
            "{sig}: {}",
            e.stdout.replace("NOT CHECKED", "")
        );
    }
}

#[test]
fn sigusr1_to_mpirun_stops_every_rank() {
    if mpi_or_skip("sigusr1_to_mpirun_stops_every_rank") {
        four_ranks_stop_on(Launcher::Mpirun, "USR1");
    }
}

#[test]
fn sigterm_to_every_rank_stops_the_job_as_under_slurm() {
    if !mpi_or_skip("sigterm_to_every_rank_stops_the_job_as_under_slurm") {
        return;
    }
    let file = temp_file("sig", "mpirun-term.jsonl");
    let mut args = LONG.to_vec();
    args.extend(["3", "--format", "json", "--output", file.to_str().unwrap()]);
    let run = Running::start(mpirun(4, &args));
    run.wait_for("rehearsal done");
    let ranks = ranks_of(run.child.id());
    assert_eq!(ranks.len(), 4, "mpirun's ranks: {ranks:?}");
    for pid in ranks {
        kill("TERM", pid);
    }
    assert_incomplete_json(&run.finish(), &file);
}

/// The himeno processes below `launcher`: its children under Open MPI's
/// mpirun, its grandchildren under MPICH's mpiexec (a proxy in between).
fn ranks_of(launcher: u32) -> Vec<u32> {
    let mut ranks = Vec::new();
    let mut level = vec![launcher];
    while !level.is_empty() && ranks.is_empty() {
        level = level.into_iter().flat_map(children).collect();
        ranks = level
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e == std::path::Path::new(BIN))
            })
            .collect();
    }
    ranks
}
