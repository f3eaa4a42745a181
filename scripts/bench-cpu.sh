#!/usr/bin/env bash
# CPU benchmark table: for each thread count, `himeno bench stream` (triad)
# and then the solver at each size, in the same run, so the solver's
# effective bandwidth (56 bytes/point) is compared with the stream triad
# measured just before it with the same threads and binding. Each figure is
# the best of --repeats runs (a shared machine only ever slows runs down).
#
# Usage: scripts/bench-cpu.sh [--sizes "S M L"] [--threads "1 2"]
#          [--seconds 2 | --iterations N] [--repeats 3] [--bind none|cores]
#          [--bin target/release/himeno]
# Needs the release binary: cargo build --release (it is built if missing).
set -euo pipefail

sizes="S M L"
threads=""
seconds=2
iterations=""
repeats=3
bind=none
bin=target/release/himeno

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) sizes="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --iterations) iterations="$2"; shift 2 ;;
        --repeats) repeats="$2"; shift 2 ;;
        --bind) bind="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "bench-cpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [[ -z "$threads" ]]; then
    threads=$(seq -s ' ' 1 "$(nproc)")
fi
if [[ ! -x "$bin" ]]; then
    cargo build --release --quiet
fi

# The number after `"field":` in a JSON report (the first occurrence).
field() { sed -n "s/^ *\"$1\": *\([-0-9.eE+]*\),*$/\1/p" | head -n 1; }
# The larger of two numbers (empty counts as nothing).
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 > a + 0) print b; else print a }'; }

if [[ -n "$iterations" ]]; then
    length=(--iterations "$iterations")
else
    length=(--seconds "$seconds")
fi

echo "# himeno CPU benchmark: $(uname -n), $(nproc) CPUs, bind $bind, best of $repeats"
echo "# $("$bin" --version)"
printf "%-5s %7s %12s %10s %12s %10s\n" size threads MFLOPS GB/s triad_GB/s %triad
for t in $threads; do
    triad=""
    for _ in $(seq "$repeats"); do
        g=$("$bin" bench stream --threads "$t" --bind "$bind" --format json | field triad_gbytes_per_s)
        triad=$(best "$triad" "$g")
    done
    for s in $sizes; do
        mf="" gb=""
        for _ in $(seq "$repeats"); do
            out=$("$bin" --size "$s" --threads "$t" --bind "$bind" "${length[@]}" \
                --stream-gbs "$triad" --format json)
            m=$(field mflops <<<"$out")
            if [[ -z "$mf" ]] || awk -v a="$m" -v b="$mf" 'BEGIN { exit !(a > b) }'; then
                mf=$m
                gb=$(field gbytes_per_s <<<"$out")
            fi
        done
        pct=$(awk -v g="$gb" -v t="$triad" 'BEGIN { printf "%.1f", 100 * g / t }')
        printf "%-5s %7s %12.1f %10.2f %12.2f %10s\n" "$s" "$t" "$mf" "$gb" "$triad" "$pct"
    done
done
