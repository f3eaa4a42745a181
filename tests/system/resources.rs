//! Memory limits: an address-space limit (`ulimit -v`) and a memory cgroup
//! refuse what the buffers would take before allocating, and the memory
//! estimate holds what the buffers take, within a tenth of the peak at
//! sizes S and M.

use crate::common::hostile::*;
use crate::common::limits::*;
use crate::common::*;

#[test]
fn an_address_space_limit_is_refused_before_allocating() {
    let dir = scratch("ulimit");
    let file = dir.join("r.jsonl");
    let f = file.to_str().unwrap();
    const TWO_GB: u64 = 2_000_000 * 1024;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--size", "L", "--iterations", "1", "--output", f],
            "grid 256x256x512",
        ),
        (
            vec!["selftest", "--grid", "1000x1000x1000"],
            "grid 1000x1000x1000",
        ),
        (
            vec!["bench", "stream", "--elements", "100000000"],
            "bench stream",
        ),
        (
            vec!["--grid", "300x300x300", "--iterations", "1", "--verify"],
            "grid 300x300x300",
        ),
    ];
    for (args, what) in cases {
        let o = run_with_limit(with_address_limit(himeno(&args), TWO_GB), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[what]);
        assert!(e.stderr.contains("ulimit -v"), "{}", e.stderr);
        assert!(o.stdout.is_empty());
    }
    assert!(!file.exists(), "nothing ran, nothing is recorded");
    if MPI {
        let mut cmd = mpirun(2, &["--size", "L", "--procs", "1x1x2", "--iterations", "1"]);
        cmd.env_remove("HIMENO_FAULT");
        let o = run_with_limit(with_address_limit(cmd, TWO_GB / 2), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &["ulimit -v"]);
    }
}

#[test]
fn the_memory_estimate_holds_what_the_buffers_take() {
    // (arguments, whether its big buffers ask for huge pages). A huge page
    // the kernel cannot find is a base page: the estimate then counts more
    // than is taken, so it is held to the lower bound only where the huge
    // pages were granted or none were asked for.
    let cases: [(&[&str], bool); 5] = [
        (&["--size", "S"], true),
        // The wavefront's per-thread buffers beside the fields.
        (&["--size", "M", "--temporal", "8", "--threads", "2"], true),
        // Mostly those buffers: four threads' worth over small fields.
        (
            &["--grid", "200x4x200", "--temporal", "8", "--threads", "4"],
            false,
        ),
        // In-process ranks share one process, its baseline and peak.
        (
            &["--local-ranks", "4", "--size", "S", "--threads", "2"],
            false,
        ),
        (&["--local-ranks", "64", "--grid", "22x22x22"], false),
    ];
    for (args, huge) in cases {
        let mut all = args.to_vec();
        all.extend(["--iterations", "3", "--format", "json"]);
        let r = json_ok(&run_with_limit(himeno(&all), LIMIT));
        let ranks = r["per_rank"].as_array().unwrap();
        let mem = |r: &serde_json::Value, k: &str| r["memory"][k].as_f64().unwrap();
        let estimate: f64 = ranks.iter().map(|x| mem(x, "estimated_bytes")).sum();
        let taken = mem(&ranks[0], "peak_bytes") - mem(&ranks[0], "baseline_bytes");
        let granted = ranks[0]["huge_pages"].as_f64().unwrap_or(0.0) >= 0.75;
        // Many in-process ranks allocate and free their small buffers from
        // many threads at once, and glibc's per-thread arenas fragment:
        // 64 ranks of 22^3 (16.1 MiB estimated) took 16.5-23 MiB in six
        // concurrent runs on a loaded 2-core machine, once 32 MiB under a
        // full test suite. The allocator's share is not the estimate's to
        // model, so it gets a quarter MiB per rank beyond the first.
        let slack = 3.0 * MIB + 0.25 * MIB * (ranks.len() - 1) as f64;
        assert!(
            taken <= 1.15 * estimate + slack,
            "{args:?}: took {:.1} MiB, estimated {:.1} MiB",
            taken / MIB,
            estimate / MIB
        );
        if !huge || granted {
            assert!(
                taken >= 0.85 * estimate - slack,
                "{args:?}: took {:.1} MiB, estimated {:.1} MiB",
                taken / MIB,
                estimate / MIB
            );
        }
    }
}

#[test]
fn the_memory_estimate_is_within_a_tenth_of_the_peak_at_sizes_s_and_m() {
    // Issue 20.4's matrix: sizes S and M, T = 1 and 8, 1 to 4 threads. The
    // fields ask for huge pages; where the kernel did not grant them the
    // estimate (which counts them whole) may exceed what was taken, so the
    // lower bound holds only where they were granted.
    for size in ["S", "M"] {
        for temporal in ["1", "8"] {
            for threads in ["1", "2", "3", "4"] {
                let args = [
                    "--size",
                    size,
                    "--temporal",
                    temporal,
                    "--threads",
                    threads,
                    "--iterations",
                    "2",
                    "--format",
                    "json",
                ];
                let r = json_ok(&run_with_limit(himeno(&args), LIMIT));
                let rank = &r["per_rank"][0];
                let mem = |k: &str| rank["memory"][k].as_f64().unwrap();
                let (estimate, taken) = (
                    mem("estimated_bytes"),
                    mem("peak_bytes") - mem("baseline_bytes"),
                );
                let granted = rank["huge_pages"].as_f64().unwrap_or(0.0) >= 0.75;
                let ratio = taken / estimate;
                assert!(
                    ratio <= 1.10 && (!granted || ratio >= 0.90),
                    "{args:?}: took {:.1} MiB, estimated {:.1} MiB (ratio {ratio:.3}, huge pages granted: {granted})",
                    taken / MIB,
                    estimate / MIB
                );
            }
        }
    }
}

#[test]
fn a_cgroup_limit_refuses_what_the_buffers_would_take_before_allocating() {
    const MIB: u64 = 1 << 20;
    let refused: [(&[&str], u64, &str); 3] = [
        // The wavefront's buffers: 12 GiB, once counted as 0.22 GiB.
        (
            &[
                "--temporal",
                "32",
                "--threads",
                "16",
                "--grid",
                "1000x4x1000",
                "--iterations",
                "2",
            ],
            256 * MIB,
            "grid 1000x4x1000 needs",
        ),
        // Tiny ranks whose fields took a 2 MiB huge page each.
        (
            &[
                "--local-ranks",
                "1024",
                "--grid",
                "22x22x22",
                "--iterations",
                "2",
                "--threads",
                "1",
            ],
            64 * MIB,
            "grid 22x22x22 needs",
        ),
        (
            &[
                "bench",
                "stream",
                "--local-ranks",
                "1024",
                "--elements",
                "1000",
            ],
            64 * MIB,
            "bench stream with 1000 elements per array needs",
        ),
    ];
    for (n, (args, limit, what)) in refused.into_iter().enumerate() {
        let cg = match MemoryCgroup::new(&format!("refused-{n}"), limit) {
            Ok(cg) => cg,
            Err(why) => {
                eprintln!("skipping: {why}");
                return;
            }
        };
        let o = run_with_limit(cg.himeno(args), LIMIT);
        let e = Ended {
            status: o.status,
            stderr: stderr(&o),
        };
        assert_told(&e, 2, &[what]);
        assert!(e.stderr.contains("cgroup"), "{}", e.stderr);
    }
    // What the estimate says fits does fit: counted short, the ranks would
    // outgrow the limit and the kernel would kill the process.
    let cg = MemoryCgroup::new("fits", 128 * MIB).expect("made above");
    let o = run_with_limit(
        cg.himeno(&[
            "--local-ranks",
            "256",
            "--grid",
            "22x22x22",
            "--iterations",
            "2",
            "--threads",
            "1",
        ]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
