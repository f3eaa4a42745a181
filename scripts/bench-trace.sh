#!/usr/bin/env bash
# Overhead of `--trace`: the solver's loop time with and without a trace,
# at each size on the same ranks, runs interleaved (off, on, then on, off:
# every pair shares the machine's state of the moment). A pair's ratio is
# the traced run's wall_s over the untraced one's; the table gives each
# side's best wall_s, their ratio (a shared machine only ever slows runs
# down, so the best runs are the least disturbed), and the median of the
# pairs' ratios as the overhead.
# The loop time is what the trace must not slow down; writing the file
# after the loop is not in it (its size is shown). A tiny grid (--sizes
# 3x3x3, one rank) shows the recorder's own cost per iteration, which the
# presets' iterations hide in the noise of a shared machine.
# The last columns are the deterministic side: the events a rank records
# per timed iteration (the most of any rank, from the last trace) and the
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

# run SIZE ITERATIONS OUT [--trace FILE]: one run, its JSON report in OUT.
run() {
    local size=$1 n=$2 out=$3
    shift 3
    local shape=(--size "$size")
    [[ $size == *x*x* ]] && shape=(--grid "$size")
    local args=("${shape[@]}" --iterations "$n" --threads 1 --format json "$@")
    if [[ $launcher == mpirun ]]; then
        OMPI_MCA_mpi_yield_when_idle=1 "${mpirun[@]}" "$bin" "${args[@]}" > "$out"
    else
        "$bin" --local-ranks "$ranks" "${args[@]}" > "$out"
    fi
}

# The cost of recording one event, in ns (the worse of keep and ring).
record_ns=$("$bin" bench trace | awk '/^recording_ns_per_event/ {
    split($2, k, "="); split($3, r, "="); print (k[2] > r[2] ? k[2] : r[2]) }')
echo "recording one event: $record_ns ns (himeno bench trace)"
printf '%-5s %5s %6s %12s %12s %13s %13s %9s %12s %11s %9s\n' size ranks iters off_best_s on_best_s best_on/off median_on/off overhead trace_bytes events/iter bound
for size in $sizes; do
    n=$(count "$size")
    ratios=()
    off=()
    on=()
    bytes=0
    for ((r = 0; r < repeats; r++)); do
        # Alternate which goes first, so a drift of the machine's speed
        # favours neither.
        order=(off on)
        ((r % 2)) && order=(on off)
        for mode in "${order[@]}"; do
            if [[ $mode == on ]]; then
                run "$size" "$n" "$work/on.json" --trace "$work/t.json"
                bytes=$(stat -c %s "$work/t.json")
            else
                run "$size" "$n" "$work/off.json"
            fi
        done
        pair=$(python3 -c '
import json, sys
off = json.load(open(sys.argv[1])); on = json.load(open(sys.argv[2]))
assert off["verified"] is not False and on["verified"] is not False, "a run failed verification"
print(off["wall_s"], on["wall_s"], on["wall_s"] / off["wall_s"])' "$work/off.json" "$work/on.json")
        read -r o t q <<< "$pair"
        off+=("$o")
        on+=("$t")
        ratios+=("$q")
    done
    python3 -c '
import collections, json, statistics, sys
size, ranks, n, bytes_, trace, record_ns = sys.argv[1:7]
k = int(sys.argv[7])
vals = [float(v) for v in sys.argv[8:]]
timed = collections.Counter(e["pid"] for e in json.load(open(trace))["traceEvents"]
                            if e.get("ph") == "X" and e.get("cat") == "timed")
per_iter = max(timed.values()) / int(n)
off, on, ratios = vals[:k], vals[k:2 * k], vals[2 * k:]
med = statistics.median(ratios)
best = min(on) / min(off)
bound = per_iter * float(record_ns) * 1e-9 / (min(off) / int(n))
print(f"{size:<5} {ranks:>5} {n:>6} {min(off):>12.4f} {min(on):>12.4f} {best:>13.4f} {med:>13.4f} {100 * (med - 1):>8.2f}% {bytes_:>12} {per_iter:>11.1f} {100 * bound:>8.4f}%")
' "$size" "$ranks" "$n" "$bytes" "$work/t.json" "$record_ns" "$repeats" "${off[@]}" "${on[@]}" "${ratios[@]}"
done
