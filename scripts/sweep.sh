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
#                      what scripts/mpirun-for prints: mpirun -np %n with
#                      the options this machine needs); "local" runs the
#                      ranks as threads of one process (--local-ranks, no MPI)
#   --bind POLICY      NUMA binding through scripts/bind.sh: none (default),
#                      local, membind or interleave
#   --layout LAYOUT    bind.sh layout: roundrobin (default) or packed
#   --max-ranks N      skip rank counts above N (e.g. the job's allocation)
#   --extra "ARGS"     more himeno options for every run
#   --report-args "ARGS"  more `himeno report` options (e.g. --model-pingpong F)
#   --checkpoints DIR  give every run a checkpoint folder of its own below DIR
#                      (--checkpoint-dir; a fresh one per run, so runs of
#                      concurrent jobs never share one); a run stopped by a
#                      signal then leaves a checkpoint, which its folder,
#                      named in the log, restarts from (--restart latest)
#   --dry-run          print the commands instead of running them
#
# A stop: SIGUSR1 (the scheduler's warning, e.g. sbatch --signal=B:USR1@120),
# SIGTERM, SIGINT or SIGHUP to this script, or a run that exits 2 saying a
# stop signal ended it (sbatch --signal=USR1@120 warns the job steps, not
# the batch shell). The run going gets the signal too (SIGTERM for INT and
# HUP), stops after its current iteration and writes an incomplete record;
# no further run starts, the report is made from the records there are, and
# the script exits 2. Each run's output goes to a log file of its own.
#
# A study file is data (KEY=VALUE lines: NAME, KIND = strong, weak or shape,
# SIZES, RANKS, PROCS, ITERATIONS, THREADS, TEMPORAL); `himeno plan` reads it and
# resolves every run's grid and process grid as a run does (for KIND=weak
# each size is the per-rank block), so this script keeps no copy of them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results="" plots="" dry_run=0 bind=none layout=roundrobin max_ranks=""
himeno=${HIMENO:-target/release/himeno}
launcher=${HIMENO_LAUNCHER:-}
extra="" report_args="" checkpoints=""
studies=()

die() { echo "sweep.sh: $*" >&2; exit 2; }
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Option $1 needs a value ($2, the next word): a word that may be empty
# (value_or_empty) or not (value).
value_or_empty() { (($# >= 2)) || die "$1 needs a value (see --help)"; }
value() { value_or_empty "$@"; [[ -n $2 ]] || die "$1 needs a value, not an empty word (see --help)"; }

while (($#)); do
  case $1 in
    --results) value "$@"; results=$2; shift 2 ;;
    --plots) value "$@"; plots=$2; shift 2 ;;
    --himeno) value "$@"; himeno=$2; shift 2 ;;
    --launcher) value "$@"; launcher=$2; shift 2 ;;
    --bind) value "$@"; bind=$2; shift 2 ;;
    --layout) value "$@"; layout=$2; shift 2 ;;
    --max-ranks) value "$@"; max_ranks=$2; shift 2 ;;
    --extra) value_or_empty "$@"; extra=$2; shift 2 ;;
    --report-args) value_or_empty "$@"; report_args=$2; shift 2 ;;
    --checkpoints) value "$@"; checkpoints=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) studies+=("$1"); shift ;;
  esac
done
((${#studies[@]})) || die "no study given: pass a definition such as inputs/studies/local-strong.env"
# Base 10 whatever the leading zeros (bash reads 08 as a bad octal number),
# and at most 18 digits, which bash's arithmetic holds.
if [[ -n $max_ranks ]]; then
  if [[ $max_ranks =~ ^0*([1-9][0-9]{0,17})$ ]]; then
    max_ranks=$((10#${BASH_REMATCH[1]}))
  else
    die "--max-ranks '$max_ranks' is not a positive whole number of ranks"
  fi
fi
case $bind in none|local|membind|interleave) ;; *) die "--bind '$bind': use none, local, membind or interleave" ;; esac
case $layout in roundrobin|packed) ;; *) die "--layout '$layout': use roundrobin or packed" ;; esac
if [[ ! -x $himeno ]]; then
  die "himeno binary '$himeno' not found: build it (cargo build --release --features mpi) or pass --himeno"
fi
for study in "${studies[@]}"; do
  [[ -r $study ]] || die "cannot read study definition '$study'"
done

# Prints the launcher words for $1 ranks, one per line (none for "local").
launcher_for() {
  local np=$1 words
  if [[ $launcher == local ]]; then
    return 0
  elif [[ -n $launcher ]]; then
    read -r -a words <<< "${launcher//%n/$np}"
  else
    # Open MPI's mpirun unless --launcher says otherwise (HIMENO_MPIRUN
    # names the tests' launcher).
    mapfile -t words < <(HIMENO_MPIRUN=mpirun "$here/mpirun-for" "$np")
  fi
  printf '%s\n' "${words[@]}"
}

# Prints a command, shell-quoted.
show() { printf '%q ' "$@"; printf '\n'; }

# The stop signal that came, if one did, and the run going, if there is one.
stop="" child=""
on_signal() {
  stop=$1
  if [[ -n $child ]]; then
    local to=TERM
    [[ $1 == USR1 ]] && to=USR1
    kill -s "$to" "$child" 2> /dev/null || true
  fi
}
for sig in USR1 TERM INT HUP; do
  # shellcheck disable=SC2064 # the signal's name is fixed now
  trap "on_signal $sig" "$sig"
done

plan_args=()
[[ -n $max_ranks ]] && plan_args+=(--max-ranks "$max_ranks")
plan=$("$himeno" plan "${plan_args[@]}" "${studies[@]}") || exit 2

planned=$(grep -c . <<< "$plan" || true)
runs=0 failed=0 stopped=0
while IFS=$'\t' read -r name size np pg options; do
  [[ -n $name ]] || continue
  [[ -z $stop ]] || break
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
    [[ -z $checkpoints ]] || cmd+=(--checkpoint-dir "$checkpoints/$name-$size-n$np-$pg.XXXXXX")
    show "${cmd[@]}"
    continue
  fi
  # A file of its own: a study may repeat a run, and jobs that share the
  # results file share its log folder.
  log=$(mktemp --suffix=.log "$logdir/$name-$size-n$np-$pg.XXXXXX")
  ckpt=""
  if [[ -n $checkpoints ]]; then
    # A folder of its own, for the same reasons.
    mkdir -p "$checkpoints"
    ckpt=$(mktemp -d "$checkpoints/$name-$size-n$np-$pg.XXXXXX")
    cmd+=(--checkpoint-dir "$ckpt")
  fi
  printf 'sweep.sh: [%d] %s size %s, %d rank(s), procs %s ... ' "$runs" "$name" "$size" "$np" "$pg" >&2
  # In the background, so that a signal's trap runs while the run goes
  # (bash runs traps only between commands); `wait` returns early when a
  # trapped signal comes, so it waits again until the run has ended.
  "${cmd[@]}" > "$log" 2>&1 < /dev/null &
  child=$!
  [[ -z $stop ]] || on_signal "$stop"
  while :; do
    wait "$child" && rc=0 || rc=$?
    kill -0 "$child" 2> /dev/null || break
  done
  child=""
  if ((rc == 0)); then
    echo "ok" >&2
    # A run that ended without a stop wrote no checkpoint unless asked
    # for periodic ones (--extra "--checkpoint-every N"): keep no empty
    # folder.
    [[ -z $ckpt ]] || rmdir "$ckpt" 2> /dev/null || true
  # A run that a stop signal ended exits 2 and says so; a launcher that
  # reports a crashed rank exits otherwise, even when the survivors it
  # then stops say they were stopped.
  elif [[ -n $stop ]] || { ((rc == 2)) && grep -q 'stopped by a signal\|after a stop signal' "$log"; }; then
    [[ -n $stop ]] || stop="a stop signal to the run"
    stopped=1
    echo "STOPPED (exit $rc, see $log${ckpt:+; checkpoint in $ckpt})" >&2
  else
    failed=$((failed + 1))
    echo "FAILED (exit $rc, see $log)" >&2
  fi
done <<< "$plan"
report=("$himeno" report "$results" --plot "$plots")
if [[ -n $report_args ]]; then
  read -r -a more <<< "$report_args"
  report+=("${more[@]}")
fi
if [[ -n $stop ]]; then
  case $stop in USR1|TERM|INT|HUP) stop=SIG$stop ;; esac
  echo "sweep.sh: stopped by $stop: $((runs - stopped)) run(s) finished, $stopped stopped," \
    "$((planned - runs)) not started" >&2
  # The report of what exists; the stop decides the exit code.
  if [[ -s $results ]]; then
    "${report[@]}" || true
    echo "sweep.sh: partial results in $results, plots in $plots" >&2
  else
    echo "sweep.sh: no record was written: no report" >&2
  fi
  exit 2
fi
((runs)) || die "the studies have no run (check RANKS, PROCS and --max-ranks)"

if ((dry_run)); then
  show "${report[@]}"
  echo "sweep.sh: dry run: $runs run(s) would append to $results" >&2
  exit 0
fi
"${report[@]}"
echo "sweep.sh: $runs run(s), $failed failed; results in $results, plots in $plots" >&2
((failed == 0)) || exit 1
