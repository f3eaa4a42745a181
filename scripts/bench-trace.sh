#!/usr/bin/env bash
# Overhead of `--trace`: the solver's loop time with and without a trace,
# at each size on the same ranks, runs interleaved (off, on, then on, off:
# every pair shares the machine's state of the moment). Each repeat is one
# round of `himeno report --compare`, the runs labelled SIZE/off and
# SIZE/on: its table gives each side's best, median and worst wall_s (a
# shared machine only ever slows runs down, so the best runs are the least
# disturbed) and whether every answer passed, and per size the ratio
# on/off of the best runs and the median of the rounds' ratios (the
# overhead).
# The loop time is what the trace must not slow down; writing the file
# after the loop is not in it (its size is shown). A tiny grid (--sizes
# 3x3x3, one rank) shows the recorder's own cost per iteration, which the
# presets' iterations hide in the noise of a shared machine.
# The last table is the deterministic side: the events a rank records per
# timed iteration (the most of any rank, from the last trace) and the
# bound they give with `himeno bench trace`'s cost of recording one event
# (the worse of its two modes): events x cost / (best untraced wall_s per
# iteration).
#
# Usage: scripts/bench-trace.sh [--sizes "M L 3x3x3"] [--ranks 4] [--repeats 5]
#          [--iterations "M=100 L=20"] [--launcher mpirun|local]
#          [--bin target/release/himeno]
# Needs the release binary with MPI for --launcher mpirun (the default):
# cargo build --release --features mpi (it is built if missing).
set -euo pipefail

sizes="M L"
ranks=4
repeats=5
iterations="XS=200 S=200 M=100 L=20 XL=5"
launcher=mpirun
bin=target/release/himeno

die() { echo "bench-trace.sh: $*" >&2; exit 2; }
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Option $1 needs a value ($2, the next word).
value() { if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs a value (see --help)"; fi; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes|--ranks|--repeats|--iterations|--launcher|--bin) value "$@" ;;&
        --sizes) sizes="$2"; shift 2 ;;
        --ranks) ranks="$2"; shift 2 ;;
        --repeats) repeats="$2"; shift 2 ;;
        --iterations) iterations="$2 $iterations"; shift 2 ;;
        --launcher) launcher="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || die "--ranks '$ranks' is not a whole number above 0"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats '$repeats' is not a whole number above 0"
case $launcher in mpirun|local) ;; *) die "--launcher '$launcher': use mpirun or local" ;; esac
cd "$(dirname "$0")/.."
[[ $launcher == mpirun ]] && mapfile -t mpirun < <(HIMENO_MPIRUN=mpirun scripts/mpirun-for "$ranks")
if [[ ! -x $bin ]]; then
    cargo build --release --features mpi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The iteration count for size $1 from the "SIZE=N" list (first match).
count() {
    local kv
    for kv in $iterations; do
        [[ ${kv%%=*} == "$1" ]] && { echo "${kv#*=}"; return; }
    done
    echo 20
}

# run SIZE ITERATIONS ROUND LABEL [--trace FILE]: one run, its record
# appended to the round's file with its label.
run() {
    local size=$1 n=$2 round=$3 label=$4
    shift 4
    local shape=(--size "$size")
    [[ $size == *x*x* ]] && shape=(--grid "$size")
    local args=("${shape[@]}" --iterations "$n" --threads 1 --label "$label"
        --output "$round" "$@")
    if [[ $launcher == mpirun ]]; then
        OMPI_MCA_mpi_yield_when_idle=1 "${mpirun[@]}" "$bin" "${args[@]}" > /dev/null
    else
        "$bin" --local-ranks "$ranks" "${args[@]}" > /dev/null
    fi
}

# The cost of recording one event, in ns (the worse of keep and ring).
record_ns=$("$bin" bench trace | awk '/^recording_ns_per_event/ {
    split($2, k, "="); split($3, r, "="); print (k[2] > r[2] ? k[2] : r[2]) }')
echo "recording one event: $record_ns ns (himeno bench trace); $ranks ranks"
rounds=()
for ((r = 0; r < repeats; r++)); do
    rounds+=("$work/round-$r.jsonl")
done
ratios=()
deterministic=()
for size in $sizes; do
    n=$(count "$size")
    ratios+=(--ratio "$size/on:$size/off")
    bytes=0
    for ((r = 0; r < repeats; r++)); do
        # Alternate which goes first, so a drift of the machine's speed
        # favours neither.
        order=(off on)
        ((r % 2)) && order=(on off)
        for mode in "${order[@]}"; do
            if [[ $mode == on ]]; then
                run "$size" "$n" "${rounds[r]}" "$size/on" --trace "$work/t.json"
                bytes=$(stat -c %s "$work/t.json")
            else
                run "$size" "$n" "${rounds[r]}" "$size/off"
            fi
        done
    done
    # The most timed spans of any rank in the last trace (one event per
    # span and iteration: a count, read from the trace's fixed layout).
    events=$(grep -o '"cat":"timed","ph":"X","pid":[0-9]*' "$work/t.json" | sort | uniq -c |
        sort -rn | head -n 1 | { read -r c _ && echo "$c"; })
    deterministic+=("$size $n $bytes ${events:-0}")
done
echo "wall_s per run (each repeat one round):"
"$bin" report --compare --metric wall_s "${ratios[@]}" "${rounds[@]}"
# The bound needs the best untraced wall_s of each size.
best_off() {
    "$bin" report --compare --metric wall_s --only "$1/off" "${rounds[@]}" |
        { read -r _ && read -r _ _ best _ && echo "$best"; }
}
printf '%-10s %6s %12s %11s %9s\n' size iters trace_bytes events/iter bound
for row in "${deterministic[@]}"; do
    read -r size n bytes events <<< "$row"
    # events per iteration x ns per event over the untraced s per iteration
    awk -v s="$size" -v n="$n" -v b="$bytes" -v e="$events" -v ns="$record_ns" \
        -v off="$(best_off "$size")" 'BEGIN {
        per = e / n; printf "%-10s %6d %12d %11.1f %8.4f%%\n", s, n, b, per, 100 * per * ns * 1e-9 / (off / n) }'
done
