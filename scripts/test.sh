#!/usr/bin/env bash
# The whole test suite: installs what is missing, then checks formatting and
# lints, and runs the tests of the fallback build and the full build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# NVRTC from PyPI lets the kernel-compilation test run without a GPU.
if [ -z "${HIMENO_SKIP_NVRTC:-}" ]; then
  python3 -m pip install -q nvidia-cuda-nvrtc-cu12 >/dev/null 2>&1 \
    || echo "note: could not install nvidia-cuda-nvrtc-cu12; the NVRTC test will skip" >&2
fi
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

# The bad-input table against a debug build too: overflow checks are on
# there, so arithmetic on a number the user typed that would wrap in
# release panics here instead of passing unnoticed.
cargo test --features mpi --test it bad_input
