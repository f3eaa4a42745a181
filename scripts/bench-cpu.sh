#!/usr/bin/env bash
# CPU benchmark table: for each thread count, `himeno bench stream` (triad
# and sum13) and then the solver at each size, in the same run, so the
# solver's effective bandwidth (56 bytes/point) is compared with the stream
# triad measured with the same threads and binding, stream and solver runs
# interleaved. sum13 moves the solver's 56 bytes/point as 14 plain streams
# with no arithmetic: what the memory system gives to that many streams,
# which can sit below the triad's. Each repeat is one round of `himeno
# report --compare` (the solver's runs labelled SIZE/T), which prints the
# tables: each figure's best of --repeats runs (a shared machine only ever
# slows runs down), median and worst; stream's own figures are its best
# repetitions. The ratios to stream/triad and stream/sum13 give the best
# GB/s over the best triad (%triad) and the median over repeats of the
# solver's GB/s divided by the triad (sum13) of the same repeat (paired):
# on a machine whose memory bandwidth drifts between runs, the best solver
# run and the best stream run may come from different states, while a
# repeat's stream and solver runs, seconds apart, share one.
#
# T is the solver's --temporal: sweeps per halo exchange, run as a
# cache-blocked wavefront that reads memory once per T iterations, so its
# GB/s (still 56 bytes per point and iteration) may exceed the triad. Its
# answer is the classic one: `answers` is the runs' verification against
# the known answers (or the reference with --verify): passed, FAILED in
# any repeat, or - where some were not checked; a T > 1 score is not
# comparable with classic Himeno scores. T = auto lets the run choose (from
# the caches, and by timing the candidates before the rehearsal when they
# cannot tell); its `chosen` column lists the T each repeat took.
#
# The classic sweep's software prefetch (--prefetch, default auto: timed
# against no prefetch before the rehearsal when the fields exceed half the
# last-level cache) and its stores (--stores, default auto: streaming timed
# against cached when they exceed the whole of it) show in `chosen` too:
# for each repeat whose run timed them, `pf` or `nopf` and `nt` (streaming)
# or `ca` (cached) for the variant it kept, e.g. `nopf+ca` (after the T, as
# `1/nopf+ca`, for T = auto). --prefetch on|off and --stores
# streaming|cached fix them for the T = 1 and auto rows (the wavefront of
# T > 1 always prefetches, and streams beyond the cache). The wavefront
# times its tile heights instead (unless --tile-rows gives one): `r16` for
# tiles of 16 rows (`8/r16` for T = auto).
#
# The stream/triad row's spread (worst against best, in % of the best) is
# the machine's own run-to-run noise, against which a %triad difference is
# to be read (on a shared cloud guest it has been 15-25 % within one run).
#
# --sizes takes presets and custom grids (NIxNJxNK), e.g. an in-cache grid
# beside the presets: "S M L 34x66x130".
#
# --base BIN runs a second binary (a build of another commit, another
# compiler) right after each run of --bin, with the same options, labelled
# base/SIZE/T: the MFLOPS table gains its rows and the ratio SIZE/T over
# base/SIZE/T (the speed-up), so that the two are compared on the same
# machine state. A T that the base does not know (e.g. auto in a build
# before it) has no rows.
#
# Usage: scripts/bench-cpu.sh [--sizes "S M L"] [--threads "1 2"]
#          [--temporal "1 2 4 8 auto"] [--seconds 0.5 | --iterations N]
#          [--repeats 5] [--bind none|cores] [--tile-rows R] [--verify]
#          [--prefetch auto|on|off] [--stores auto|streaming|cached]
#          [--bin target/release/himeno] [--base BIN]
# Needs the release binary: cargo build --release (it is built if missing).
set -euo pipefail

sizes="S M L"
threads=""
temporal="1 2 4 8 auto"
extra=()
tile=()
prefetch=()
seconds=0.5
iterations=""
repeats=5
bind=none
bin=target/release/himeno
base=""

die() { echo "bench-cpu.sh: $*" >&2; exit 2; }
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Option $1 needs a value ($2, the next word).
value() { if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs a value (see --help)"; fi; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes|--threads|--temporal|--tile-rows|--prefetch|--stores|--seconds|--iterations|--repeats|--bind|--bin|--base)
            value "$@" ;;&
        --sizes) sizes="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --temporal) temporal="$2"; shift 2 ;;
        --tile-rows) tile=(--tile-rows "$2"); shift 2 ;;
        --prefetch) prefetch=(--prefetch "$2"); shift 2 ;;
        --stores) extra+=(--stores "$2"); shift 2 ;;
        --verify) extra+=(--verify); shift ;;
        --seconds) seconds="$2"; shift 2 ;;
        --iterations) iterations="$2"; shift 2 ;;
        --repeats) repeats="$2"; shift 2 ;;
        --bind) bind="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        --base) base="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ $repeats =~ ^[1-9][0-9]{0,5}$ ]] || die "--repeats '$repeats' is not a positive whole number"
if [[ -n $iterations && ! $iterations =~ ^[1-9][0-9]{0,17}$ ]]; then
    die "--iterations '$iterations' is not a positive whole number"
fi
if [[ -z "$threads" ]]; then
    threads=$(seq -s ' ' 1 "$(nproc)")
fi
if [[ ! -x "$bin" ]]; then
    cargo build --release --quiet
fi
[[ -z $base || -x $base ]] || die "--base '$base' is not an executable file"

if [[ -n "$iterations" ]]; then
    length=(--iterations "$iterations")
else
    length=(--seconds "$seconds")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# himeno CPU benchmark: $(uname -n), $(nproc) CPUs, bind $bind, $repeats repeats (stream and solver runs interleaved)"
echo "# $("$bin" --version); solver run length: ${length[*]} ${extra[*]} ${tile[*]} ${prefetch[*]}; GB/s counts 56 bytes/point; stream triad counts 24 bytes/element"
echo "# sum13: the solver's 56 bytes/point as 14 plain streams, no arithmetic (himeno bench stream)"
echo "# paired: median over repeats of GB/s / triad (sum13) of the same repeat; T: sweeps per halo exchange (--temporal)"
[[ -z $base ]] || echo "# base: $("$base" --version) ($base), run after each run of the binary above; speedup = MFLOPS / base"
for t in $threads; do
    rounds=()
    # Interleaved, so that stream and solver see the same machine state.
    for ((r = 0; r < repeats; r++)); do
        round="$work/threads-$t-round-$r.jsonl"
        rounds+=("$round")
        "$bin" bench stream --threads "$t" --bind "$bind" --format json >> "$round"
        for s in $sizes; do
            if [[ "$s" == *x* ]]; then
                problem=(--grid "$s")
            else
                problem=(--size "$s")
            fi
            for tt in $temporal; do
                # Tiles belong to the wavefront, which T = 1 does not run
                # (himeno refuses --tile-rows there), the prefetch choice to
                # the classic sweep (refused with a fixed T > 1).
                tiles=()
                kernel=("${prefetch[@]}")
                if [[ "$tt" != 1 && "$tt" != auto ]]; then
                    tiles=("${tile[@]}")
                    kernel=()
                fi
                opts=("${problem[@]}" --threads "$t" --bind "$bind" --temporal "$tt"
                    "${length[@]}" "${extra[@]}" "${tiles[@]}" "${kernel[@]}" --output "$round")
                "$bin" "${opts[@]}" --label "$s/$tt" > /dev/null
                # The base, same options, on the same machine state; a T
                # it refuses is no figure.
                if [[ -n $base ]]; then
                    "$base" "${opts[@]}" --label "base/$s/$tt" > /dev/null 2>&1 || true
                fi
            done
        done
    done
    solver=()
    stream=()
    speedup=()
    for s in $sizes; do
        for tt in $temporal; do
            solver+=(--only "$s/$tt")
            stream+=(--ratio "$s/$tt:stream/triad" --ratio "$s/$tt:stream/sum13")
            # Only where the base gave a record in some repeat.
            if [[ -n $base ]] && grep -qF "\"label\":\"base/$s/$tt\"" "${rounds[@]}"; then
                solver+=(--only "base/$s/$tt")
                speedup+=(--ratio "$s/$tt:base/$s/$tt")
            fi
        done
    done
    echo "# threads $t: MFLOPS${base:+ and the speed-up over the base}"
    "$bin" report --compare --metric mflops "${solver[@]}" "${speedup[@]}" "${rounds[@]}"
    echo "# threads $t: GB/s, against the stream triad and sum13 (best/best: %triad / 100; median: paired)"
    "$bin" report --compare --metric gbytes_per_s "${stream[@]}" "${rounds[@]}"
done
