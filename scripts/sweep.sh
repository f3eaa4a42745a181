#!/usr/bin/env bash
# Runs scaling studies: for every study definition (inputs/studies/*.env),
# every size, rank count and process grid, one himeno run appending its JSON
# record to one results file; then `himeno report` with tables and plots.
#
# Usage: scripts/sweep.sh [options] STUDY.env...
#   --results FILE     results file (default: results/<first study NAME>.jsonl)
#   --plots DIR        plot folder (default: <results file without .jsonl>-plots)
#   --himeno BIN       himeno binary (default: $HIMENO or target/release/himeno)
#   --launcher CMD     launcher, %n = rank count (default: $HIMENO_LAUNCHER or
#                      "mpirun -np %n", adding --allow-run-as-root as root and
#                      --oversubscribe beyond the cores); "local" runs the
#                      ranks as threads of one process (--local-ranks, no MPI)
#   --bind POLICY      NUMA binding through scripts/bind.sh: none (default),
#                      local, membind or interleave
#   --layout LAYOUT    bind.sh layout: roundrobin (default) or packed
#   --max-ranks N      skip rank counts above N (e.g. the job's allocation)
#   --extra "ARGS"     more himeno options for every run
#   --report-args "ARGS"  more `himeno report` options (e.g. --model-pingpong F)
#   --dry-run          print the commands instead of running them
#
# A study file is data (KEY=VALUE lines: NAME, KIND = strong, weak or shape,
# SIZES, RANKS, PROCS, ITERATIONS, THREADS, TEMPORAL); `himeno plan` reads it and
# resolves every run's grid and process grid as a run does (for KIND=weak
# each size is the per-rank block), so this script keeps no copy of them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results="" plots="" dry_run=0 bind=none layout=roundrobin max_ranks=0
himeno=${HIMENO:-target/release/himeno}
launcher=${HIMENO_LAUNCHER:-}
extra="" report_args=""
studies=()

die() { echo "sweep.sh: $*" >&2; exit 2; }

while (($#)); do
  case $1 in
    --results) results=${2:?--results needs a file}; shift 2 ;;
    --plots) plots=${2:?--plots needs a folder}; shift 2 ;;
    --himeno) himeno=${2:?--himeno needs a path}; shift 2 ;;
    --launcher) launcher=${2:?--launcher needs a command}; shift 2 ;;
    --bind) bind=${2:?--bind needs a policy}; shift 2 ;;
    --layout) layout=${2:?--layout needs roundrobin or packed}; shift 2 ;;
    --max-ranks) max_ranks=${2:?--max-ranks needs a number}; shift 2 ;;
    --extra) extra=${2?--extra needs arguments}; shift 2 ;;
    --report-args) report_args=${2?--report-args needs arguments}; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) studies+=("$1"); shift ;;
  esac
done
((${#studies[@]})) || die "no study given: pass a definition such as inputs/studies/local-strong.env"
[[ $max_ranks =~ ^[0-9]+$ ]] || die "--max-ranks '$max_ranks' is not a number"
case $bind in none|local|membind|interleave) ;; *) die "--bind '$bind': use none, local, membind or interleave" ;; esac
case $layout in roundrobin|packed) ;; *) die "--layout '$layout': use roundrobin or packed" ;; esac
if [[ ! -x $himeno ]]; then
  die "himeno binary '$himeno' not found: build it (cargo build --release --features mpi) or pass --himeno"
fi
for study in "${studies[@]}"; do
  [[ -r $study ]] || die "cannot read study definition '$study'"
done

cores=$(nproc 2>/dev/null || echo 1)

# Prints the launcher words for $1 ranks, one per line (none for "local").
launcher_for() {
  local np=$1 words
  if [[ $launcher == local ]]; then
    return 0
  elif [[ -n $launcher ]]; then
    read -r -a words <<< "${launcher//%n/$np}"
  else
    words=(mpirun)
    ((EUID == 0)) && words+=(--allow-run-as-root)
    ((np > cores)) && words+=(--oversubscribe)
    words+=(-np "$np")
  fi
  printf '%s\n' "${words[@]}"
}

# Prints a command, shell-quoted.
show() { printf '%q ' "$@"; printf '\n'; }

plan_args=()
((max_ranks)) && plan_args+=(--max-ranks "$max_ranks")
plan=$("$himeno" plan "${plan_args[@]}" "${studies[@]}") || exit 2

runs=0 failed=0
while IFS=$'\t' read -r name size np pg options; do
  [[ -n $name ]] || continue
  [[ -n $results ]] || results=results/$name.jsonl
  [[ -n $plots ]] || plots=${results%.jsonl}-plots
  logdir=${results%.jsonl}-logs
  ((dry_run)) || mkdir -p "$(dirname "$results")" "$logdir"
  mapfile -t cmd < <(launcher_for "$np")
  if [[ $bind != none ]]; then
    cmd+=("$here/bind.sh" --policy "$bind" --layout "$layout" --)
  fi
  read -r -a opts <<< "$options"
  cmd+=("$himeno" "${opts[@]}" --output "$results")
  [[ $launcher == local ]] && cmd+=(--local-ranks "$np")
  if [[ -n $extra ]]; then
    read -r -a more <<< "$extra"
    cmd+=("${more[@]}")
  fi
  runs=$((runs + 1))
  if ((dry_run)); then
    show "${cmd[@]}"
    continue
  fi
  log=$logdir/$name-$size-n$np-$pg.log
  printf 'sweep.sh: [%d] %s size %s, %d rank(s), procs %s ... ' "$runs" "$name" "$size" "$np" "$pg" >&2
  if "${cmd[@]}" > "$log" 2>&1 < /dev/null; then
    echo "ok" >&2
  else
    rc=$?
    failed=$((failed + 1))
    echo "FAILED (exit $rc, see $log)" >&2
  fi
done <<< "$plan"
((runs)) || die "the studies have no run (check RANKS, PROCS and --max-ranks)"

report=("$himeno" report "$results" --plot "$plots")
if [[ -n $report_args ]]; then
  read -r -a more <<< "$report_args"
  report+=("${more[@]}")
fi
if ((dry_run)); then
  show "${report[@]}"
  echo "sweep.sh: dry run: $runs run(s) would append to $results" >&2
  exit 0
fi
"${report[@]}"
echo "sweep.sh: $runs run(s), $failed failed; results in $results, plots in $plots" >&2
((failed == 0)) || exit 1
