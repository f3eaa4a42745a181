#!/usr/bin/env bash
# The quick start's main job: installs what is missing, builds himeno with
# MPI and runs the benchmark on 4 ranks (size L, the original's 60 s run).
# Extra arguments go to himeno, e.g. `scripts/run-job.sh --size M --seconds 10`.
# NP=8 sets the rank count.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release --features mpi
np="${NP:-4}"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--size L)
launcher=(mpirun -np "$np")
# Open MPI refuses root and more ranks than cores unless told.
if [ "$(id -u)" -eq 0 ]; then launcher+=(--allow-run-as-root); fi
launcher+=(--oversubscribe)
exec "${launcher[@]}" target/release/himeno "${args[@]}"
