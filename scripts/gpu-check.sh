#!/usr/bin/env bash
# GPU check of himeno, in one call of a few minutes on a GPU machine:
#   1. correctness: GPU vs CPU on XS and S (p fingerprint equal = bitwise
#      equal field, gosa within 1e-9 relative), pinned and pageable staging,
#      --overlap; on 2 and 4 ranks too when the binary has MPI and mpirun is
#      there (overlap bitwise equal to non-overlap);
#   2. timing: host<->device and device copy bandwidth (bench transfer),
#      M/L/XL single-rank GFLOPS and effective GB/s next to the device copy
#      bandwidth, and pinned vs pageable staging cost per iteration on 2
#      ranks (under mpirun when available).
#
# Usage: scripts/gpu-check.sh [path/to/himeno]   (default target/release/himeno,
#        or $HIMENO). Results go to $OUT (if set) or /tmp/himeno-gpu-check.
# NVRTC: uses $HIMENO_NVRTC_LIB, else the nvidia-cuda-nvrtc-cu12 wheel, else
# a system libnvrtc (a non-.12 one is linked under the name cudarc loads).
# Exit status: 0 all checks passed, 1 a correctness check failed, 2 setup.
set -uo pipefail

BIN=${1:-${HIMENO:-target/release/himeno}}
DEST=${OUT:-/tmp/himeno-gpu-check}
mkdir -p "$DEST"
REPORT="$DEST/gpu-check.txt"
exec > >(tee "$REPORT") 2>&1
TEE_PID=$!
# The report must be complete when the script returns (the caller collects
# $DEST right away): close our end of the pipe and wait for tee.
# shellcheck disable=SC2317  # run by the EXIT trap
finish() { exec >&- 2>&-; wait "$TEE_PID" 2>/dev/null; }
trap finish EXIT

die() { echo "gpu-check: $*"; exit 2; }
[ -x "$BIN" ] || die "no himeno binary at $BIN (build: cargo build --release --features cuda[,mpi])"

# --- NVRTC -----------------------------------------------------------------
find_nvrtc() {
    if [ -n "${HIMENO_NVRTC_LIB:-}" ]; then echo "$HIMENO_NVRTC_LIB"; return; fi
    local d
    d=$(python3 -c 'import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0])' 2>/dev/null) &&
        [ -e "$d/lib/libnvrtc.so.12" ] && { echo "$d/lib/libnvrtc.so.12"; return; }
    for f in $(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ && !/builtins/ {print $NF}') \
             /usr/local/cuda*/lib64/libnvrtc.so.* /usr/local/cuda*/targets/*/lib/libnvrtc.so.*; do
        case "$f" in *builtins*|*alt*) continue ;; esac
        [ -e "$f" ] && { echo "$f"; return; }
    done
}
NVRTC=$(find_nvrtc)
if [ -n "$NVRTC" ]; then
    case "$NVRTC" in
        *libnvrtc.so.12) export HIMENO_NVRTC_LIB="$NVRTC" ;;
        *)  # cudarc (cuda-12080 bindings) looks for libnvrtc.so.12 by name.
            LINKS="$DEST/nvrtc-link"; mkdir -p "$LINKS"
            ln -sf "$NVRTC" "$LINKS/libnvrtc.so.12"
            NVRTC_DIR=$(dirname "$NVRTC")
            export LD_LIBRARY_PATH="$LINKS:$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
    echo "NVRTC: $NVRTC"
else
    echo "NVRTC: none found; relying on the default library path"
fi

echo "== himeno GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
"$BIN" --version
nvidia-smi --query-gpu=name,pci.bus_id,uuid,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
THREADS=$(nproc)
"$BIN" --backend gpu --size XS --iterations 1 > /dev/null 2> "$DEST/probe.err" ||
    die "no usable GPU: $(grep -m1 . "$DEST/probe.err")"

# col FILE NAME: the value of column NAME in a two-line CSV report.
col() { awk -F, -v name="$2" 'NR==1{for(i=1;i<=NF;i++) if($i==name) c=i} NR==2{print $c}' "$1"; }

# run NAME ARGS...: one run with a CSV report kept as $DEST/NAME.csv.
run() {
    local name=$1; shift
    if ! "$@" --format csv > "$DEST/$name.csv" 2> "$DEST/$name.err"; then
        echo "FAILED $name: $(grep -m1 'himeno:' "$DEST/$name.err" || tail -n 2 "$DEST/$name.err" | tr '\n' ' ')"
        return 1
    fi
}

FAIL=0
# same NAME REF: fingerprints equal and gosa within 1e-9 relative.
same() {
    local a b ga gb
    a=$(col "$DEST/$1.csv" p_fingerprint); b=$(col "$DEST/$2.csv" p_fingerprint)
    ga=$(col "$DEST/$1.csv" gosa); gb=$(col "$DEST/$2.csv" gosa)
    if [ -n "$a" ] && [ "$a" = "$b" ] &&
        awk -v x="$ga" -v y="$gb" 'BEGIN{d=x-y; if(d<0)d=-d; exit !(d <= 1e-9*(y<0?-y:y))}'; then
        printf '  ok    %-34s fingerprint %s gosa %s\n' "$1" "$a" "$ga"
    else
        printf '  FAIL  %-34s fingerprint %s vs %s, gosa %s vs %s\n' "$1" "$a" "$b" "$ga" "$gb"
        FAIL=1
    fi
}

echo
echo "== 1. correctness (GPU vs CPU, 20 iterations)"
for size in XS S; do
    base=(--size "$size" --iterations 20)
    run "cpu-$size" "$BIN" "${base[@]}" --backend cpu --threads "$THREADS" || FAIL=1
    for variant in "pinned" "pageable" "pinned --overlap"; do
        tag="gpu-$size-${variant// /}"
        # shellcheck disable=SC2086  # $variant holds options
        run "$tag" "$BIN" "${base[@]}" --backend gpu --staging $variant && same "$tag" "cpu-$size" || FAIL=1
    done
done

MPI=0
if command -v mpirun > /dev/null; then
    MPIRUN=(mpirun --oversubscribe --allow-run-as-root)
    if "${MPIRUN[@]}" -np 2 "$BIN" selftest --size XS > "$DEST/mpi-probe.txt" 2>&1; then
        MPI=1
    else
        echo "  (multi-rank checks skipped: $(tail -n 1 "$DEST/mpi-probe.txt"))"
    fi
else
    echo "  (multi-rank checks skipped: no mpirun)"
fi
if [ "$MPI" = 1 ]; then
    for size in XS S; do
        for np_procs in "2 2x1x1" "2 1x1x2" "4 2x2x1" "4 1x2x2"; do
            # shellcheck disable=SC2086  # two words: ranks and process grid
            set -- $np_procs
            for ov in "" "--overlap"; do
                tag="gpu-$size-np$1-$2${ov:+-overlap}"
                # shellcheck disable=SC2086
                run "$tag" "${MPIRUN[@]}" -np "$1" "$BIN" --size "$size" --iterations 20 \
                    --backend gpu --procs "$2" $ov && same "$tag" "cpu-$size" || FAIL=1
            done
        done
    done
fi

echo
echo "== 2. timing"
"$BIN" bench transfer --max-bytes $((1 << 30)) > "$DEST/transfer.txt" 2> "$DEST/transfer.err" ||
    echo "FAILED bench transfer: $(tail -n 2 "$DEST/transfer.err")"
cat "$DEST/transfer.txt"
D2D=$(awk '/^ *peak GB\/s/ {print $NF}' "$DEST/transfer.txt")
echo
echo "Single rank, 5 s runs; device copy bandwidth (d2d, read + write) ${D2D:-?} GB/s"
printf '%-5s %10s %10s %12s %14s\n' size iters GFLOPS "eff. GB/s" "% of d2d copy"
for size in M L XL; do
    if run "time-$size" "$BIN" --size "$size" --seconds 5 --warmup 10 --backend gpu; then
        f="$DEST/time-$size.csv"
        awk -v it="$(col "$f" iterations)" -v mf="$(col "$f" mflops)" -v gb="$(col "$f" gbytes_per_s)" \
            -v d="${D2D:-0}" -v s="$size" 'BEGIN{printf "%-5s %10d %10.1f %12.1f %14s\n", s, it, mf/1000, gb,
            (d>0 ? sprintf("%.1f%%", 100*gb/d) : "-")}'
    fi
done

echo
if [ "$MPI" = 1 ]; then
    echo "2 ranks (procs 2x1x1), size L, 200 iterations: staging cost per iteration (slowest rank, ms)"
    printf '%-22s %9s %9s %9s %9s %9s %10s\n' staging compute pack transfer comm unpack "GFLOPS"
    for st in pinned pageable; do
        for ov in "" "--overlap"; do
            tag="stage-$st${ov:+-overlap}"
            # shellcheck disable=SC2086
            if run "$tag" "${MPIRUN[@]}" -np 2 "$BIN" --size L --iterations 200 --backend gpu \
                --procs 2x1x1 --staging "$st" $ov; then
                f="$DEST/$tag.csv"; it=$(col "$f" iterations)
                awk -v n="$it" -v c="$(col "$f" compute_max_s)" -v p="$(col "$f" pack_max_s)" \
                    -v t="$(col "$f" transfer_max_s)" -v m="$(col "$f" comm_max_s)" \
                    -v u="$(col "$f" unpack_max_s)" -v g="$(col "$f" mflops)" -v s="$st${ov:+ overlap}" \
                    'BEGIN{k=1000/n; printf "%-22s %9.3f %9.3f %9.3f %9.3f %9.3f %10.1f\n", s, c*k, p*k, t*k, m*k, u*k, g/1000}'
            fi
        done
    done
else
    echo "pinned vs pageable staging on 2 ranks skipped (no MPI build or mpirun)"
fi

echo
if [ "$FAIL" = 0 ]; then echo "gpu-check: all correctness checks passed"; else echo "gpu-check: CORRECTNESS FAILURES above"; fi
echo "results in $DEST"
exit "$FAIL"
