//! NCCL and CUDA-aware MPI on the emulated device (issue 40): `--halo
//! nccl` in-process (every process grid of up to four ranks, some with
//! padded rows) and under `mpirun`, and `--halo mpi-device` forced under a
//! plain MPI with host-addressable device memory (both on every process
//! grid of two to four ranks), bitwise the CPU's and
//! VALID, each grid with and without `--overlap` and the two kinds of
//! seed (synchronisation-only and worker-thread) taking turns over both;
//! the refusals of a machine without NCCL and of an
//! MPI that is not CUDA-aware; and the binding of `src/backend/gpu/nccl.rs`
//! alone against the emulator's stand-in NCCL (`tests/cuda_emu/nccl.cpp`),
//! with ranks in one process and in two. The emulator's times are the
//! host's; nothing here looks at them.
//!
//! The binding runs in a child process of this test binary (the `child`
//! test, ignored unless its parent starts it): the emulated driver must be
//! the process's `libcuda` from its start, which this test process's is
//! not.

use crate::common::*;
use crate::emulated_gpu::{assert_answer_like_cpu, cpu_reference, emulator, gpu_args};
use std::process::Command;

/// The grid and iterations of the halo runs: uneven blocks on every grid.
const GRID: (&str, &str) = ("23x19x29", "3");

/// The variable and folder of one NVRTC cache for the runs of this test
/// process: the kernels compile once, not once per process (as `himeno
/// gpu-check` does for its runs); compiling dominated each run's time.
fn nvrtc_cache() -> (&'static str, String) {
    let dir = temp_file("nvrtc-cache", "gpu_nccl");
    std::fs::create_dir_all(&dir).unwrap();
    ("HIMENO_NVRTC_CACHE", dir.to_str().unwrap().to_string())
}

/// Asserts that an emulated run is VALID with the CPU's fingerprint and
/// gosa, each rank labelled emulated (`assert_answer_like_cpu`), and that
/// the record names `path`
/// as its halo path; for nccl, that no rank waited on the host more than
/// once an iteration (gosa's read) or copied more than gosa's 8 bytes.
fn assert_path(o: &std::process::Output, cpu: &serde_json::Value, path: &str, what: &str) {
    let r = assert_answer_like_cpu(o, cpu, what);
    assert_eq!(r["halo_path"], path, "{what}: {r}");
    if path == "nccl" {
        for rank in r["per_rank"].as_array().unwrap() {
            let waits = rank["host_waits_per_iteration"].as_u64();
            let bytes = rank["host_device_bytes_per_iteration"].as_u64();
            assert!(
                waits.is_some_and(|w| w <= 1) && bytes.is_some_and(|b| b <= 8),
                "{what}: {rank}"
            );
        }
    }
}

#[test]
fn gpu_nccl_in_process_ranks_are_bitwise_the_cpu() {
    let Some(emu) = emulator("gpu_nccl_in_process_ranks_are_bitwise_the_cpu") else {
        return;
    };
    let cpu = cpu_reference(GRID.0, GRID.1);
    let (cache, dir) = nvrtc_cache();
    // Every process grid of up to four ranks, with and without overlap.
    // Seed 3 runs stream work only when the host synchronises, 4 on
    // worker threads; the seed in turn over the grids and the two overlap
    // settings (each setting meets both), and every third grid with
    // padded rows.
    let grids = PROCESS_GRIDS.into_iter().filter(|(np, _)| *np <= 4);
    let runs = grids
        .enumerate()
        .flat_map(|(g, grid)| [(g, grid, false), (g, grid, true)]);
    for (g, (np, procs), overlap) in runs {
        let seed = [3, 4][(g + usize::from(overlap)) % 2];
        let layout = if g % 3 == 1 { "padded" } else { "exact" };
        let n = np.to_string();
        let mut args = [
            gpu_args(GRID.0, GRID.1),
            vec!["--local-ranks", &n, "--procs", procs, "--halo", "nccl"],
            vec!["--gpu-layout", layout],
        ]
        .concat();
        if overlap {
            args.push("--overlap");
        }
        let o = emu.himeno(seed, &[("HIMENO_EMU_DEVICES", "2"), (cache, &dir)], &args);
        assert_path(
            &o,
            &cpu,
            "nccl",
            &format!("{procs} in-process, seed {seed}, overlap {overlap}, layout {layout}"),
        );
    }
}

#[test]
fn gpu_nccl_and_mpi_device_under_mpirun_are_bitwise_the_cpu() {
    if !mpi_or_skip("gpu_nccl_and_mpi_device_under_mpirun_are_bitwise_the_cpu") {
        return;
    }
    let Some(emu) = emulator("gpu_nccl_and_mpi_device_under_mpirun_are_bitwise_the_cpu") else {
        return;
    };
    let cpu = cpu_reference(GRID.0, GRID.1);
    let (cache, dir) = nvrtc_cache();
    // mpi-device needs a CUDA-aware MPI: the emulator's device memory is
    // host memory the test's plain MPI can read, and the refusal is
    // overridden.
    let device_direct = [
        ("HIMENO_EMU_HOST_ADDRESSABLE", "1"),
        ("HIMENO_MPI_CUDA_AWARE", "1"),
        (cache, &dir),
    ];
    // Both paths on every process grid of two to four ranks, each with
    // and without overlap, the seed in turn (each path and overlap
    // setting meets both kinds).
    let grids = PROCESS_GRIDS
        .into_iter()
        .filter(|(np, _)| (2..=4).contains(np));
    let runs = grids.enumerate().flat_map(|(g, (np, procs))| {
        [
            ("nccl", false),
            ("nccl", true),
            ("mpi-device", false),
            ("mpi-device", true),
        ]
        .into_iter()
        .enumerate()
        .map(move |(i, (path, overlap))| (path, np, procs, [3, 4][(g + i / 2 + i) % 2], overlap))
    });
    for (path, np, procs, seed, overlap) in runs {
        let mut args = [
            gpu_args(GRID.0, GRID.1),
            vec!["--procs", procs, "--halo", path],
        ]
        .concat();
        if overlap {
            args.push("--overlap");
        }
        let env: &[(&str, &str)] = if path == "mpi-device" {
            &device_direct
        } else {
            &device_direct[2..]
        };
        let o = run(emu.wrap(mpirun(np, &args), seed, env));
        assert_path(
            &o,
            &cpu,
            path,
            &format!("{path} {procs} under mpirun, seed {seed}, overlap {overlap}"),
        );
    }
}

#[test]
fn gpu_nccl_without_nccl_is_one_line_and_exit_2() {
    let Some(emu) = emulator("gpu_nccl_without_nccl_is_one_line_and_exit_2") else {
        return;
    };
    let args = [
        gpu_args(GRID.0, GRID.1),
        vec!["--local-ranks", "2", "--halo", "nccl"],
    ]
    .concat();
    let o = emu.himeno(
        3,
        &[("HIMENO_NCCL_LIB", "/nonexistent/libnccl.so.2")],
        &args,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_clean_error(
        &o,
        &["HIMENO_NCCL_LIB=/nonexistent/libnccl.so.2", "libnccl.so.2"],
    );
}

#[test]
fn gpu_mpi_device_on_an_mpi_that_is_not_cuda_aware_is_one_line_and_exit_2() {
    if !mpi_or_skip("gpu_mpi_device_on_an_mpi_that_is_not_cuda_aware_is_one_line_and_exit_2") {
        return;
    }
    let Some(emu) =
        emulator("gpu_mpi_device_on_an_mpi_that_is_not_cuda_aware_is_one_line_and_exit_2")
    else {
        return;
    };
    // The test's MPI is built without CUDA: it says so when asked.
    let args = [
        gpu_args(GRID.0, GRID.1),
        vec!["--procs", "2x1x1", "--halo", "mpi-device"],
    ]
    .concat();
    let o = run(emu.wrap(mpirun(2, &args), 3, &[("HIMENO_EMU_HOST_ADDRESSABLE", "1")]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_clean_error(
        &o,
        &[
            "--halo mpi-device needs a CUDA-aware MPI",
            "HIMENO_MPI_CUDA_AWARE=1",
        ],
    );
}

/// The variable that tells the `child` test what to do.
const ROLE: &str = "HIMENO_TEST_NCCL_ROLE";

/// Runs the `child` test in a fresh process of this binary against the
/// emulator (two devices), as `role`, with interleaving `seed`.
fn start_child(
    emu: &crate::emulated_gpu::Emulator,
    seed: u64,
    role: &str,
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "gpu_nccl::child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    let mut all = vec![("HIMENO_EMU_DEVICES", "2"), (ROLE, role)];
    all.extend_from_slice(env);
    emu.wrap(cmd, seed, &all)
}

fn assert_child_ok(o: &std::process::Output, what: &str) {
    assert!(
        o.status.success() && stdout(o).contains("1 passed"),
        "{what}: {}\n{}\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

#[test]
fn gpu_nccl_binding_moves_faces_in_stream_order_in_one_process() {
    let Some(emu) = emulator("gpu_nccl_binding_moves_faces_in_stream_order_in_one_process") else {
        return;
    };
    // One sync-only seed and one with worker threads.
    for seed in [3, 4] {
        for role in ["all", "threads"] {
            let o = run_with_limit(
                start_child(&emu, seed, role, &[]),
                std::time::Duration::from_secs(60),
            );
            assert_child_ok(&o, &format!("seed {seed} role {role}"));
        }
    }
}

#[test]
fn gpu_nccl_binding_moves_faces_between_processes() {
    let Some(emu) = emulator("gpu_nccl_binding_moves_faces_between_processes") else {
        return;
    };
    for seed in [5] {
        let id = temp_file("nccl-id", &format!("seed{seed}"));
        let _ = std::fs::remove_file(&id);
        let id = id.to_str().unwrap().to_string();
        // One state folder for both, as cuda-emu.sh run gives the processes
        // of one mpirun.
        let state = temp_file("nccl-state", &format!("seed{seed}"));
        std::fs::create_dir_all(&state).unwrap();
        let state = state.to_str().unwrap().to_string();
        let kids: Vec<_> = ["0", "1"]
            .iter()
            .map(|r| {
                let role = format!("process:{r}:{id}");
                let mut c = start_child(&emu, seed, &role, &[("HIMENO_EMU_STATE_DIR", &state)]);
                c.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        for (r, k) in kids.into_iter().enumerate() {
            let o = k.wait_with_output().unwrap();
            assert_child_ok(&o, &format!("seed {seed} process rank {r}"));
        }
    }
}

/// The binding's checks, run by the tests above in a process whose
/// `libcuda` and `libnccl` are the emulator's.
#[test]
#[ignore = "started by the gpu_nccl_binding_* tests in a process with the emulated driver"]
fn child() {
    let role = std::env::var(ROLE).expect("started by a gpu_nccl_binding_* test");
    binding::run(&role);
}

#[cfg(feature = "cuda")]
mod binding {
    use cudarc::driver::{CudaContext, result, sys};
    use himeno::backend::gpu::nccl::{Comm, Nccl, Transfer, UniqueId};
    use std::path::Path;
    use std::sync::Arc;

    /// Elements per face.
    const N: usize = 1000;

    /// One rank's device, stream and buffers.
    struct Rank {
        ctx: Arc<CudaContext>,
        stream: sys::CUstream,
        mine: u64,
        got: u64,
        forwarded: u64,
        sum: u64,
    }

    fn values(rank: usize) -> Vec<f32> {
        (0..N).map(|i| (rank * 10_000 + i) as f32 + 0.5).collect()
    }

    impl Rank {
        fn new(ordinal: usize, rank: usize) -> Rank {
            let ctx = CudaContext::new(ordinal).unwrap();
            ctx.bind_to_thread().unwrap();
            // SAFETY: the context is current; buffers live until the end.
            unsafe {
                let stream =
                    result::stream::create(result::stream::StreamKind::NonBlocking).unwrap();
                let mine = result::malloc_sync(N * 4).unwrap();
                result::memcpy_htod_sync(mine, &values(rank)).unwrap();
                let sum = result::malloc_sync(8).unwrap();
                result::memcpy_htod_sync(sum, &[rank as f64 + 1.0]).unwrap();
                Rank {
                    ctx,
                    stream,
                    mine,
                    got: result::malloc_sync(N * 4).unwrap(),
                    forwarded: result::malloc_sync(N * 4).unwrap(),
                    sum,
                }
            }
        }

        /// Queues two dependent steps: swap `mine` with the other rank,
        /// then send back what was received, which only stream order
        /// makes right; then the all-reduce of `sum`.
        fn queue(&self, comm: &mut Comm) {
            self.ctx.bind_to_thread().unwrap();
            let peer = 1 - comm.rank();
            let bytes = N * 4;
            // SAFETY: device buffers of this rank, live until `check`.
            unsafe {
                comm.exchange(
                    &[
                        Transfer::Send {
                            ptr: self.mine,
                            bytes,
                            peer,
                        },
                        Transfer::Recv {
                            ptr: self.got,
                            bytes,
                            peer,
                        },
                    ],
                    self.stream,
                )
                .unwrap();
                comm.exchange(
                    &[
                        Transfer::Send {
                            ptr: self.got,
                            bytes,
                            peer,
                        },
                        Transfer::Recv {
                            ptr: self.forwarded,
                            bytes,
                            peer,
                        },
                    ],
                    self.stream,
                )
                .unwrap();
                comm.sum_f64(self.sum, self.sum, 1, self.stream).unwrap();
            }
        }

        fn check(&self, rank: usize) {
            self.ctx.bind_to_thread().unwrap();
            let mut got = vec![0f32; N];
            let mut back = vec![0f32; N];
            let mut sum = [0f64];
            // SAFETY: host buffers of the right sizes; the stream is
            // synchronised first.
            unsafe {
                result::stream::synchronize(self.stream).unwrap();
                result::memcpy_dtoh_sync(&mut got, self.got).unwrap();
                result::memcpy_dtoh_sync(&mut back, self.forwarded).unwrap();
                result::memcpy_dtoh_sync(&mut sum, self.sum).unwrap();
            }
            assert_eq!(got, values(1 - rank), "rank {rank}: the face received");
            assert_eq!(
                back,
                values(rank),
                "rank {rank}: the face sent back after it arrived"
            );
            assert_eq!(sum[0], 3.0, "rank {rank}: 1 + 2 summed");
        }
    }

    pub fn run(role: &str) {
        let nccl: &'static Nccl =
            Box::leak(Box::new(Nccl::open(Path::new("libnccl.so.2")).unwrap()));
        assert!(nccl.is_emulated(), "the emulator's stand-in NCCL");
        assert!(nccl.version >= 2700, "{}", nccl.version_string());
        let parts: Vec<&str> = role.splitn(3, ':').collect();
        match parts[0] {
            // Both ranks from one thread, ncclCommInitAll.
            "all" => {
                let ranks = [Rank::new(0, 0), Rank::new(1, 1)];
                let mut comms = Comm::init_all(nccl, &[0, 1]).unwrap();
                for (r, c) in comms.iter_mut().enumerate() {
                    ranks[r].queue(c);
                }
                for (r, k) in ranks.iter().enumerate() {
                    k.check(r);
                }
            }
            // A thread per rank, both on device 0, ncclCommInitRank.
            "threads" => {
                let id = nccl.unique_id().unwrap();
                std::thread::scope(|s| {
                    for r in 0..2 {
                        s.spawn(move || {
                            let k = Rank::new(0, r);
                            let mut c = Comm::init_rank(nccl, 2, &id, r).unwrap();
                            k.queue(&mut c);
                            k.check(r);
                        });
                    }
                });
            }
            // One rank of two processes; rank 0 hands the id over a file.
            "process" => {
                let r: usize = parts[1].parse().unwrap();
                let path = Path::new(parts[2]);
                let k = Rank::new(0, r);
                let id = if r == 0 {
                    let id = nccl.unique_id().unwrap();
                    let tmp = path.with_extension("part");
                    std::fs::write(&tmp, id.0).unwrap();
                    std::fs::rename(&tmp, path).unwrap();
                    id
                } else {
                    let t = std::time::Instant::now();
                    while !path.exists() {
                        assert!(t.elapsed().as_secs() < 30, "rank 0 never wrote the id");
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    UniqueId::from_bytes(&std::fs::read(path).unwrap()).unwrap()
                };
                let mut c = Comm::init_rank(nccl, 2, &id, r).unwrap();
                k.queue(&mut c);
                k.check(r);
            }
            other => panic!("unknown role {other}"),
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod binding {
    pub fn run(_: &str) {
        panic!("a build without the cuda feature has no NCCL binding");
    }
}
