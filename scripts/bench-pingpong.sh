#!/usr/bin/env bash
# Ping-pong between two MPI ranks on this host: `himeno bench pingpong`
# beside an independent Intel MPI Benchmarks style PingPong
# (tests/c_peer/pingpong_peer.c, compiled here with mpicc), in interleaved
# rounds, so that both see the same machine state. For each size it prints
# the median over rounds of the one-way time in microseconds of:
#   peer-imb     the peer with IMB's buffers (separate send and receive
#                buffers, page-aligned, written before the first message);
#   peer-single  the peer with one never-written 64 MiB calloc buffer for
#                both directions, as himeno's bench had it;
#   himeno       `himeno bench pingpong` (default --max-bytes 64MiB, so its
#                buffers are as large as in a default run).
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

# One round: every size once from each contender, one line per result:
# "contender bytes microseconds".
round() {
    local s
    for s in $sizes; do
        "${launcher[@]}" "$peer" "$s" imb | awk -v s="$s" '{ print "peer-imb", s, $3 }'
        "${launcher[@]}" "$peer" "$s" single | awk -v s="$s" '{ print "peer-single", s, $3 }'
    done
    local max=64MiB
    "${launcher[@]}" "$bin" bench pingpong --format json --max-bytes "$max" |
        python3 -c '
import json, sys
wanted = set(sys.argv[1].split())
for size in json.load(sys.stdin)["pairs"][0]["sizes"]:
    if str(size["bytes"]) in wanted:
        print("himeno", size["bytes"], size["latency_us"])
' "$sizes"
}
results=$(for ((r = 0; r < rounds; r++)); do round; done)
echo "one-way time, median of $rounds interleaved rounds (us), $(hostname), ${launcher[0]}"
python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    who, size, us = line.split()
    rows.setdefault(int(size), {}).setdefault(who, []).append(float(us))
names = ["peer-imb", "peer-single", "himeno"]
print("%10s" % "bytes" + "".join("%13s" % n for n in names) + "%12s" % "himeno/imb")
for size in sorted(rows):
    med = {n: statistics.median(rows[size][n]) for n in names if n in rows[size]}
    ratio = med["himeno"] / med["peer-imb"] if "himeno" in med and "peer-imb" in med else float("nan")
    print("%10d" % size + "".join("%13.2f" % med.get(n, float("nan")) for n in names) + "%12.2f" % ratio)
' <<< "$results"
