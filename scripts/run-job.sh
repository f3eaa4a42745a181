#!/usr/bin/env bash
# The quick start's main job: installs what is missing, builds himeno with
# MPI and runs the benchmark on 4 ranks (size L, the original's 60 s run).
# Extra arguments go to himeno and are added to the default --size L, which
# only --size or --grid replaces: `scripts/run-job.sh --seconds 20` runs size
# L for 20 s, `scripts/run-job.sh --size M --seconds 10` size M.
# NP=8 sets the rank count; DRY_RUN=1 prints the command instead of
# installing, building and running.
set -euo pipefail
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Only as the first word: later ones are himeno's (its own --help).
case ${1:-} in -h|--help) usage; exit 0 ;; esac
cd "$(dirname "$0")/.."
dry_run=${DRY_RUN:-0}
# Checked before anything is installed or built.
np="${NP:-4}"
[[ $np =~ ^0*[1-9][0-9]{0,8}$ ]] || { echo "run-job.sh: NP='$np' is not a positive number of ranks" >&2; exit 2; }
np=$((10#$np))
if [[ $dry_run != 1 ]]; then
  scripts/install-deps.sh
  cargo build --release --features mpi
fi
# The default problem (size L) stays unless the user names one: other
# options (--seconds 20, --output FILE) are added to it, not put in its
# place. A subcommand (selftest, bench ...) gets the arguments as given.
args=("$@")
names_problem=false
for a in "$@"; do
  case "$a" in
    --size|--size=*|--grid|--grid=*) names_problem=true ;;
  esac
done
if ! $names_problem; then
  if [[ $# -eq 0 || $1 == -* ]]; then
    args=(--size L "${args[@]}")
  elif [[ $1 == run ]]; then
    args=(run --size L "${args[@]:1}")
  fi
fi
# Open MPI's mpirun, which the build above links against (HIMENO_MPIRUN
# names the tests' launcher, not this job's).
mapfile -t launcher < <(HIMENO_MPIRUN=mpirun scripts/mpirun-for "$np")
((${#launcher[@]})) || exit 2
if [[ $dry_run == 1 ]]; then
  echo "${launcher[*]} target/release/himeno ${args[*]}"
  exit 0
fi
exec "${launcher[@]}" target/release/himeno "${args[@]}"
