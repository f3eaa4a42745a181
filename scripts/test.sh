#!/usr/bin/env bash
# The whole test suite: installs what is missing, then checks formatting and
# lints, and runs the tests of the fallback build and the full build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# NVRTC 12 and 13 from PyPI: the tests compile the kernels with both, no
# GPU needed (a hard failure in CI).
scripts/install-nvrtc.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cargo fmt --all -- --check
for features in "" "--features mpi" "--features cuda" "--features mpi,cuda"; do
  # shellcheck disable=SC2086
  cargo clippy --release --all-targets $features -- -D warnings
done
# The single-node fallback (no MPI, no CUDA), then the full build: real
# mpirun runs, and every GPU-side check that needs no GPU (NVRTC compiles
# the kernels; device tests skip with a printed reason).
cargo test --release
cargo test --release --features mpi,cuda
