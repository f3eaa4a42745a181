#!/usr/bin/env bash
# Ping-pong between two MPI ranks on this host: `himeno bench pingpong`
# beside an independent Intel MPI Benchmarks style PingPong
# (tests/c_peer/pingpong_peer.c, compiled here with mpicc), in interleaved
# rounds, so that both see the same machine state. Each round is one
# round of `himeno report --compare`; for each size it prints the best,
# median and worst over rounds of the one-way time in microseconds of:
#   peer-imb     the peer with IMB's buffers (separate send and receive
#                buffers, page-aligned, written before the first message);
#   peer-single  the peer with one never-written 64 MiB calloc buffer for
#                both directions, as himeno's bench had it;
#   pingpong     `himeno bench pingpong` (default --max-bytes 64MiB, so its
#                buffers are as large as in a default run),
# each label followed by the size (peer-imb/8), and the ratio
# pingpong/peer-imb of the best times and the median of the rounds' ratios.
# himeno should agree with peer-imb; the gap to peer-single is what the
# buffers cost.
#
# Usage: scripts/bench-pingpong.sh [--sizes "8 1024 65536 4194304"]
#          [--rounds 7] [--bin target/release/himeno]
# Needs an MPI build of himeno (cargo build --release --features mpi) and
# Open MPI's mpirun and mpicc (MPICH: HIMENO_MPIRUN=mpiexec.mpich,
# MPICC=mpicc.mpich).
set -euo pipefail

sizes="8 1024 65536 4194304"
rounds=7
bin=target/release/himeno

die() { echo "bench-pingpong.sh: $*" >&2; exit 2; }
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Option $1 needs a value ($2, the next word).
value() { if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs a value (see --help)"; fi; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes|--rounds|--bin) value "$@" ;;&
        --sizes) sizes="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds '$rounds' is not a whole number above 0"
for s in $sizes; do
    [[ $s =~ ^[1-9][0-9]*$ ]] || die "--sizes: '$s' is not a byte count above 0"
done
cd "$(dirname "$0")/.."
[[ -x $bin ]] || die "no himeno at '$bin': cargo build --release --features mpi"
mapfile -t launcher < <(scripts/mpirun-for 2)
((${#launcher[@]})) || die "no MPI launcher"
peer=$(mktemp -d)/pingpong_peer
trap 'rm -rf "$(dirname "$peer")"' EXIT
"${MPICC:-mpicc}" -O2 -o "$peer" tests/c_peer/pingpong_peer.c || die "mpicc failed"

# round FILE: every size once from each contender into the round's file:
# the peer's times as {"label", "value"} measurements, himeno's report as
# it prints it.
round() {
    local s mode us
    for s in $sizes; do
        for mode in imb single; do
            read -r _ _ us < <("${launcher[@]}" "$peer" "$s" "$mode")
            [[ -n $us ]] || die "the peer printed no time for $s bytes ($mode)"
            printf '{"label":"peer-%s/%s","value":%s,"better":"lower"}\n' "$mode" "$s" "$us" >> "$1"
        done
    done
    local max=64MiB
    "${launcher[@]}" "$bin" bench pingpong --format json --max-bytes "$max" >> "$1"
}
files=()
for ((r = 0; r < rounds; r++)); do
    files+=("$(dirname "$peer")/round-$r.jsonl")
    round "${files[r]}"
done
echo "one-way time over $rounds interleaved rounds (us), $(hostname), ${launcher[0]}"
only=()
ratios=()
for s in $sizes; do
    only+=(--only "peer-imb/$s" --only "peer-single/$s" --only "pingpong/$s")
    ratios+=(--ratio "pingpong/$s:peer-imb/$s")
done
"$bin" report --compare "${only[@]}" "${ratios[@]}" "${files[@]}"
