#!/usr/bin/env bash
# CPU benchmark table: for each thread count, `himeno bench stream` (triad
# and sum13) and then the solver at each size, in the same run, so the
# solver's effective bandwidth (56 bytes/point) is compared with the stream
# triad measured with the same threads and binding, stream and solver runs
# interleaved. sum13 moves the solver's 56 bytes/point as 14 plain streams
# with no arithmetic: what the memory system gives to that many streams,
# which can sit below the triad's. Each figure is the best of
# --repeats runs (a shared machine only ever slows runs down); stream's own
# figures are its best repetitions. The paired columns are the median over
# repeats of the solver's GB/s divided by the triad (sum13) of the same
# repeat: on a machine whose memory bandwidth drifts between runs, the best
# solver run and the best stream run may come from different states, while
# a repeat's stream and solver runs, seconds apart, share one.
#
# Usage: scripts/bench-cpu.sh [--sizes "S M L"] [--threads "1 2"]
#          [--seconds 0.5 | --iterations N] [--repeats 5] [--bind none|cores]
#          [--bin target/release/himeno]
# Needs the release binary: cargo build --release (it is built if missing).
set -euo pipefail

sizes="S M L"
threads=""
seconds=0.5
iterations=""
repeats=5
bind=none
bin=target/release/himeno

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
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
# 100 * a / b, with one decimal.
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", 100 * a / b }'; }
# The median of the numbers given as arguments, with one decimal.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }

if [[ -n "$iterations" ]]; then
    length=(--iterations "$iterations")
else
    length=(--seconds "$seconds")
fi

echo "# himeno CPU benchmark: $(uname -n), $(nproc) CPUs, bind $bind, best of $repeats (stream and solver runs interleaved)"
echo "# $("$bin" --version); solver run length: ${length[*]}; GB/s counts 56 bytes/point; stream triad counts 24 bytes/element"
echo "# sum13: the solver's 56 bytes/point as 14 plain streams, no arithmetic (himeno bench stream)"
echo "# paired: median over repeats of GB/s / triad (sum13) of the same repeat"
printf "%-5s %7s %12s %10s %12s %8s %8s %12s %8s %8s\n" size threads MFLOPS GB/s \
    triad_GB/s %triad paired sum13_GB/s %sum13 paired
for t in $threads; do
    declare -A mf=() gb=() pairs=() pairs13=()
    triad=""
    sum13=""
    # Interleaved, so that stream and solver see the same machine state.
    for _ in $(seq "$repeats"); do
        st=$("$bin" bench stream --threads "$t" --bind "$bind" --format json)
        triad_r=$(field triad_gbytes_per_s <<<"$st")
        sum13_r=$(field sum13_gbytes_per_s <<<"$st")
        triad=$(best "$triad" "$triad_r")
        sum13=$(best "$sum13" "$sum13_r")
        for s in $sizes; do
            out=$("$bin" --size "$s" --threads "$t" --bind "$bind" "${length[@]}" --format json)
            m=$(field mflops <<<"$out")
            g=$(field gbytes_per_s <<<"$out")
            pairs[$s]+=" $(pct "$g" "$triad_r")"
            pairs13[$s]+=" $(pct "$g" "$sum13_r")"
            if [[ -z "${mf[$s]:-}" ]] || awk -v a="$m" -v b="${mf[$s]}" 'BEGIN { exit !(a > b) }'; then
                mf[$s]=$m
                gb[$s]=$g
            fi
        done
    done
    for s in $sizes; do
        # shellcheck disable=SC2086 # the lists split into their numbers
        printf "%-5s %7s %12.1f %10.2f %12.2f %8s %8s %12.2f %8s %8s\n" "$s" "$t" "${mf[$s]}" \
            "${gb[$s]}" "$triad" "$(pct "${gb[$s]}" "$triad")" "$(median ${pairs[$s]})" \
            "$sum13" "$(pct "${gb[$s]}" "$sum13")" "$(median ${pairs13[$s]})"
    done
done
