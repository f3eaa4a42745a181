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
# T is the solver's --temporal: sweeps per halo exchange, run as a
# cache-blocked wavefront that reads memory once per T iterations, so its
# GB/s (still 56 bytes per point and iteration) may exceed the triad. Its
# answer is the classic one: `valid` is the run's verification against the
# known answers (or the reference with --verify); a T > 1 score is not
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
# After each thread count's rows, a line gives the triad's range over the
# repeats and its spread (max - min, in % of the best): the machine's own
# run-to-run noise, against which a %triad difference is to be read (on a
# shared cloud guest it has been 15-25 % within one run).
#
# --sizes takes presets and custom grids (NIxNJxNK), e.g. an in-cache grid
# beside the presets: "S M L 34x66x130".
#
# --base BIN runs a second binary (a build of another commit, another
# compiler) right after each run of --bin, with the same options: the
# table gains its best MFLOPS and the speed-up (MFLOPS / base MFLOPS), so
# that the two are compared on the same machine state. A T that the base
# does not know (e.g. auto in a build before it) shows "-".
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

# A top-level field of the JSON report on standard input (numbers as
# written, true/false/null as words), read by scripts/json-get.
json_get=$(dirname "${BASH_SOURCE[0]}")/json-get
field() { "$json_get" "$1"; }
# The larger of two numbers (empty counts as nothing).
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 > a + 0) print b; else print a }'; }
# The smaller of two numbers (empty counts as nothing).
least() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
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
echo "# $("$bin" --version); solver run length: ${length[*]} ${extra[*]} ${tile[*]} ${prefetch[*]}; GB/s counts 56 bytes/point; stream triad counts 24 bytes/element"
echo "# sum13: the solver's 56 bytes/point as 14 plain streams, no arithmetic (himeno bench stream)"
echo "# paired: median over repeats of GB/s / triad (sum13) of the same repeat; T: sweeps per halo exchange (--temporal)"
[[ -z $base ]] || echo "# base: $("$base" --version) ($base), run after each run of the binary above; speedup = MFLOPS / base"
printf "%-10s %7s %4s %12s %10s %12s %8s %8s %12s %8s %8s %6s" size threads T MFLOPS GB/s \
    triad_GB/s %triad paired sum13_GB/s %sum13 paired valid
[[ -z $base ]] || printf " %12s %8s" base_MFLOPS speedup
printf ' chosen\n'
for t in $threads; do
    declare -A mf=() gb=() pairs=() pairs13=() valid=() chosen=() basemf=()
    triad=""
    triad_low=""
    sum13=""
    # Interleaved, so that stream and solver see the same machine state.
    for _ in $(seq "$repeats"); do
        st=$("$bin" bench stream --threads "$t" --bind "$bind" --format json)
        triad_r=$(field triad_gbytes_per_s <<<"$st")
        sum13_r=$(field sum13_gbytes_per_s <<<"$st")
        triad=$(best "$triad" "$triad_r")
        triad_low=$(least "$triad_low" "$triad_r")
        sum13=$(best "$sum13" "$sum13_r")
        for s in $sizes; do
            if [[ "$s" == *x* ]]; then
                problem=(--grid "$s")
            else
                problem=(--size "$s")
            fi
            for tt in $temporal; do
                key="$s/$tt"
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
                    "${length[@]}" "${extra[@]}" "${tiles[@]}" "${kernel[@]}" --format json)
                out=$("$bin" "${opts[@]}")
                m=$(field mflops <<<"$out")
                g=$(field gbytes_per_s <<<"$out")
                v=$(field verified <<<"$out")
                c=""
                if [[ "$tt" == auto ]]; then
                    c=$(field temporal <<<"$out")
                fi
                k=$(field kernel_choice.chosen <<<"$out")
                if [[ -n $k && $k != null ]]; then
                    # "no prefetch, cached stores" -> nopf+ca
                    k=${k//no prefetch/nopf}
                    k=${k//prefetch/pf}
                    k=${k//streaming stores/nt}
                    k=${k//cached stores/ca}
                    # "tiles of 16 rows" -> r16
                    k=${k//tiles of /r}
                    k=${k// rows/}
                    c+="${c:+/}${k//, /+}"
                fi
                if [[ -n $c ]]; then
                    chosen[$key]+="${chosen[$key]:+,}$c"
                fi
                # A failed verification in any repeat marks the row.
                if [[ "${valid[$key]:-true}" != false ]]; then
                    valid[$key]=$v
                fi
                # The base, same options, on the same machine state; a T
                # it refuses is no figure.
                if [[ -n $base ]]; then
                    if out=$("$base" "${opts[@]}" 2> /dev/null); then
                        basemf[$key]=$(best "${basemf[$key]:-}" "$(field mflops <<<"$out")")
                        if [[ "$(field verified <<<"$out")" == false ]]; then
                            valid[$key]=false
                        fi
                    fi
                fi
                pairs[$key]+=" $(pct "$g" "$triad_r")"
                pairs13[$key]+=" $(pct "$g" "$sum13_r")"
                if [[ -z "${mf[$key]:-}" ]] || awk -v a="$m" -v b="${mf[$key]}" 'BEGIN { exit !(a > b) }'; then
                    mf[$key]=$m
                    gb[$key]=$g
                fi
            done
        done
    done
    for s in $sizes; do
        for tt in $temporal; do
            key="$s/$tt"
            # shellcheck disable=SC2086 # the lists split into their numbers
            printf "%-10s %7s %4s %12.1f %10.2f %12.2f %8s %8s %12.2f %8s %8s %6s" "$s" "$t" "$tt" \
                "${mf[$key]}" "${gb[$key]}" "$triad" "$(pct "${gb[$key]}" "$triad")" \
                "$(median ${pairs[$key]})" "$sum13" "$(pct "${gb[$key]}" "$sum13")" \
                "$(median ${pairs13[$key]})" "${valid[$key]}"
            if [[ -n ${basemf[$key]:-} ]]; then
                printf " %12.1f %8s" "${basemf[$key]}" \
                    "$(awk -v a="${mf[$key]}" -v b="${basemf[$key]}" 'BEGIN { printf "%.2f", a / b }')"
            elif [[ -n $base ]]; then
                printf " %12s %8s" - -
            fi
            printf ' %s\n' "${chosen[$key]:--}"
        done
    done
    spread=$(awk -v a="$triad" -v b="$triad_low" 'BEGIN { printf "%.1f", 100 * (a - b) / a }')
    printf '# threads %s: triad %.2f-%.2f GB/s over %s repeats, spread %s%% of the best\n' "$t" \
        "$triad_low" "$triad" "$repeats" "$spread"
done
