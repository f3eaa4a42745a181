#!/usr/bin/env bash
# The whole test suite: installs what is missing, then checks formatting and
# lints, and runs the fast tier (`tests/it`, which a plain `cargo test`
# runs) of the fallback build and both tiers (the fast one and the system
# tier, `tests/system`) of the full build, in the `ci` profile: the release
# build with overflow checks.
#
# MPI=openmpi (default), mpich or all: the MPI libraries the MPI tests run
# against. Open MPI is Debian's default MPI; MPICH builds in its own target
# folder (${CARGO_TARGET_DIR:-target}/mpich) with MPICC=mpicc.mpich and runs
# under HIMENO_MPIRUN=mpiexec.mpich.
# As root, the multi-host and Slurm tests run on a virtual cluster that this
# script brings up (scripts/local-cluster.sh) and takes down at the end
# (it sets HIMENO_CLUSTER=1, which asks for them); without root they skip,
# saying so.
set -euo pipefail
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
if (($#)); then
  case $1 in
    -h|--help) usage; exit 0 ;;
    *) echo "test.sh: takes no arguments, only --help (got '$1'); MPI= chooses the MPI" >&2; exit 2 ;;
  esac
fi
cd "$(dirname "$0")/.."
mpi=${MPI:-openmpi}
case $mpi in
  openmpi|mpich|all) ;;
  *) echo "test.sh: MPI='$mpi': use openmpi, mpich or all" >&2; exit 2 ;;
esac
groups=(build)
[[ $mpi == openmpi ]] || groups+=(mpich)
((EUID == 0)) && groups+=(cluster)
scripts/install-deps.sh "${groups[@]}"
# NVRTC 12 and 13 from PyPI: the tests compile the kernels with both, no
# GPU needed (a hard failure in CI).
scripts/install-nvrtc.sh
# ReFrame 4.10 in a virtual environment of its own (never system-wide):
# the tests run the checks of reframe/ with it.
scripts/install-reframe.sh > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The test jobs' Open MPI session folders (tests/common/mod.rs,
# own_session_dir), removed however this script ends, as is the virtual
# cluster when this script brought it up.
HIMENO_TEST_SESSIONS=$(mktemp -d)
export HIMENO_TEST_SESSIONS
cluster_up=0
cleanup() {
  rm -rf "$HIMENO_TEST_SESSIONS"
  if ((cluster_up)); then
    scripts/local-cluster.sh down
  fi
}
trap cleanup EXIT

# Prints how long the step named $1 took since the previous call.
step_start=$SECONDS
took() {
  echo "test.sh: $1 took $((SECONDS - step_start)) s" >&2
  step_start=$SECONDS
}

cargo fmt --all -- --check
# `--all-targets` leaves out the targets marked `test = false`, even beside
# `--test system`: the system tier is linted on its own. Lints only check,
# so the four feature sets link nothing.
for features in "" "--features mpi" "--features cuda" "--features mpi,cuda"; do
  # shellcheck disable=SC2086
  cargo clippy --profile ci --all-targets $features -- -D warnings
  # shellcheck disable=SC2086
  cargo clippy --profile ci --test system $features -- -D warnings
done
took "formatting and lints"
# The single-node fallback (no MPI, no CUDA): the fast tier, which runs
# every decomposition as in-process ranks. The system tier runs once, in the
# full build below: its single-process tests differ between the builds
# only in the communicator, which the fast tier runs in both; the rest need
# mpirun, the emulated GPU or the cluster.
cargo test --profile ci
took "the fallback build's tests"

# The virtual cluster for the multi-host tests: reuse one that is up,
# else bring one up and take it down however this script ends.
if ((EUID == 0)); then
  export HIMENO_CLUSTER=1
  export HIMENO_CLUSTER_DIR=${HIMENO_CLUSTER_DIR:-/run/himeno-cluster}
  if ! scripts/local-cluster.sh status > /dev/null 2>&1; then
    cluster_up=1
    scripts/local-cluster.sh up
  elif ! scripts/local-cluster.sh exec node1 "test -f $(printf %q "$PWD/Cargo.toml")"; then
    # Each host has its own /tmp: one brought up from another checkout
    # does not show this one if it lives there, and every test on it
    # would fail for that alone.
    echo "test.sh: the virtual cluster at $HIMENO_CLUSTER_DIR does not show this checkout ($PWD) to its hosts: it was brought up from another; take it down (scripts/local-cluster.sh down) or set HIMENO_CLUSTER_DIR to a free path" >&2
    exit 2
  fi
  took "bringing the virtual cluster up"
fi

# The full build with Open MPI: real mpirun runs, the multi-host and Slurm
# tests, and the GPU path on the emulated CUDA driver (scripts/cuda-emu.sh:
# the real kernels on the host; NVRTC compiles them); the tests that need
# a real GPU skip with a printed reason.
if [[ $mpi != mpich ]]; then
  cargo test --profile ci --features mpi,cuda
  cargo test --profile ci --features mpi,cuda --test system
  took "the full build's tests (Open MPI)"
fi

# The MPI tests against MPICH: every test that starts ranks under a
# launcher, the emulated GPU under mpiexec, and the multi-host runs (the
# Slurm job tests, which check the templates and Slurm rather than the MPI
# library, ran above). They are all in the system tier: the fast tier's
# ranks are in-process, which the MPI library does not change.
if [[ $mpi != openmpi ]]; then
  MPICC=mpicc.mpich HIMENO_MPIRUN=mpiexec.mpich \
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/mpich" \
    cargo test --profile ci --features mpi,cuda --test system -- \
    ranks:: signals:: failures:: append:: c_peer:: bad_input:: rehearsal:: stream:: study:: \
    outputs:: inputs:: resources:: stopping:: launch:: original:: \
    emulated_gpu::emulated_gpu_under_mpirun emulated_gpu::emulated_exclusive_process \
    cluster::mpirun cluster::srun cluster::pingpong
  took "the MPI tests (MPICH)"
fi

# The one timed comparison, alone on the machine: bench stream's triad
# against a plain C/OpenMP STREAM triad (tests/system/stream.rs says why it
# cannot run beside the other tests).
cargo test --profile ci --features mpi,cuda --test system -- --ignored --test-threads 1 \
  stream::stream_triad_agrees_with_a_plain_c_openmp_triad
took "the stream comparison (alone)"
