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
#                      --oversubscribe beyond the cores)
#   --bind POLICY      NUMA binding through scripts/bind.sh: none (default),
#                      local, membind or interleave
#   --layout LAYOUT    bind.sh layout: roundrobin (default) or packed
#   --max-ranks N      skip rank counts above N (e.g. the job's allocation)
#   --extra "ARGS"     more himeno options for every run
#   --report-args "ARGS"  more `himeno report` options (e.g. --model-pingpong F)
#   --dry-run          print the commands instead of running them
#
# A study file is KEY=VALUE lines read by bash: NAME, KIND (strong, weak or
# shape), SIZES, RANKS, PROCS, ITERATIONS, THREADS. For KIND=weak each size is
# the per-rank block: the global grid and process grid are derived from it.
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
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) studies+=("$1"); shift ;;
  esac
done
((${#studies[@]})) || die "no study given: pass a definition such as inputs/studies/local-strong.env"
[[ $max_ranks =~ ^[0-9]+$ ]] || die "--max-ranks '$max_ranks' is not a number"
case $bind in none|local|membind|interleave) ;; *) die "--bind '$bind': use none, local, membind or interleave" ;; esac
case $layout in roundrobin|packed) ;; *) die "--layout '$layout': use roundrobin or packed" ;; esac
if ((!dry_run)) && [[ ! -x $himeno ]]; then
  die "himeno binary '$himeno' not found: build it (cargo build --release --features mpi) or pass --himeno"
fi

cores=$(nproc 2>/dev/null || echo 1)

# Prints the launcher words for $1 ranks, one per line.
launcher_for() {
  local np=$1 words
  if [[ -n $launcher ]]; then
    read -r -a words <<< "${launcher//%n/$np}"
  else
    words=(mpirun)
    ((EUID == 0)) && words+=(--allow-run-as-root)
    ((np > cores)) && words+=(--oversubscribe)
    words+=(-np "$np")
  fi
  printf '%s\n' "${words[@]}"
}

# Prints "NI NJ NK" of a preset or an NIxNJxNK grid.
grid_of() {
  case ${1^^} in
    XS) echo "32 32 64" ;;
    S) echo "64 64 128" ;;
    M) echo "128 128 256" ;;
    L) echo "256 256 512" ;;
    XL) echo "512 512 1024" ;;
    *)
      [[ $1 =~ ^([0-9]+)[xX]([0-9]+)[xX]([0-9]+)$ ]] || die "size '$1' is neither a preset nor NIxNJxNK"
      echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" ;;
  esac
}

# Weak scaling: prints "GRID PROCS" for $2 ranks with per-rank size $1. Each
# prime factor of the rank count (largest first) multiplies the dimension
# whose global interior is smallest so far, so blocks stay compact and every
# rank owns exactly the per-rank interior.
weak_layout() {
  local size=$1 np=$2 n p f d best factors=()
  read -r -a n <<< "$(grid_of "$size")"
  local in=($((n[0] - 2)) $((n[1] - 2)) $((n[2] - 2)))
  p=(1 1 1)
  local rest=$np
  for ((f = 2; f * f <= rest; f++)); do
    while ((rest % f == 0)); do factors=("$f" "${factors[@]}"); rest=$((rest / f)); done
  done
  ((rest > 1)) && factors=("$rest" "${factors[@]}")
  for f in "${factors[@]}"; do
    best=0
    for d in 1 2; do
      ((p[d] * in[d] < p[best] * in[best])) && best=$d
    done
    p[best]=$((p[best] * f))
  done
  echo "$((p[0] * in[0] + 2))x$((p[1] * in[1] + 2))x$((p[2] * in[2] + 2)) ${p[0]}x${p[1]}x${p[2]}"
}

# Product of a PIxPJxPK process grid.
procs_product() {
  local a b c
  IFS=xX read -r a b c <<< "$1"
  echo $((a * b * c))
}

# Prints a command, shell-quoted.
show() { printf '%q ' "$@"; printf '\n'; }

runs=0 failed=0
for study in "${studies[@]}"; do
  [[ -r $study ]] || die "cannot read study definition '$study'"
  NAME="" KIND=strong SIZES="" RANKS="" PROCS="" ITERATIONS=100 THREADS=1
  # shellcheck source=/dev/null
  source "$study"
  [[ -n $NAME && -n $SIZES && -n $RANKS ]] || die "$study must set NAME, SIZES and RANKS"
  case $KIND in strong|weak|shape) ;; *) die "$study: KIND '$KIND' must be strong, weak or shape" ;; esac
  [[ -n $results ]] || results=results/$NAME.jsonl
  [[ -n $plots ]] || plots=${results%.jsonl}-plots
  logdir=${results%.jsonl}-logs
  ((dry_run)) || mkdir -p "$(dirname "$results")" "$logdir"
  for size in $SIZES; do
    grid_of "$size" > /dev/null
    for np in $RANKS; do
      [[ $np =~ ^[1-9][0-9]*$ ]] || die "$study: rank count '$np' is not a positive number"
      if ((max_ranks && np > max_ranks)); then
        echo "sweep.sh: skipping $np ranks (more than --max-ranks $max_ranks)" >&2
        continue
      fi
      shapes=()
      if [[ $KIND == weak ]]; then
        read -r wgrid wprocs <<< "$(weak_layout "$size" "$np")"
        shapes=("$wprocs")
      elif [[ -z $PROCS ]]; then
        shapes=(auto)
      else
        for pg in $PROCS; do
          [[ $pg =~ ^[0-9]+[xX][0-9]+[xX][0-9]+$ ]] || die "$study: process grid '$pg' is not PIxPJxPK"
          (($(procs_product "$pg") == np)) && shapes+=("$pg")
        done
      fi
      for pg in "${shapes[@]}"; do
        mapfile -t cmd < <(launcher_for "$np")
        if [[ $bind != none ]]; then
          cmd+=("$here/bind.sh" --policy "$bind" --layout "$layout" --)
        fi
        cmd+=("$himeno")
        if [[ $KIND == weak ]]; then
          cmd+=(--grid "$wgrid")
        elif [[ $size =~ ^[0-9]+[xX][0-9]+[xX][0-9]+$ ]]; then
          cmd+=(--grid "$size")
        else
          cmd+=(--size "$size")
        fi
        [[ $pg == auto ]] || cmd+=(--procs "$pg")
        cmd+=(--iterations "$ITERATIONS" --threads "$THREADS" --label "$NAME" --output "$results")
        if [[ -n $extra ]]; then
          read -r -a more <<< "$extra"
          cmd+=("${more[@]}")
        fi
        runs=$((runs + 1))
        if ((dry_run)); then
          show "${cmd[@]}"
          continue
        fi
        log=$logdir/$NAME-$size-n$np-$pg.log
        printf 'sweep.sh: [%d] %s size %s, %d rank(s), procs %s ... ' "$runs" "$NAME" "$size" "$np" "$pg" >&2
        if "${cmd[@]}" > "$log" 2>&1; then
          echo "ok" >&2
        else
          rc=$?
          failed=$((failed + 1))
          echo "FAILED (exit $rc, see $log)" >&2
        fi
      done
    done
  done
done

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
