#!/usr/bin/env bash
# GPU check of himeno: one call of a few minutes on a GPU machine that proves
# the GPU path and measures it.
#   0. setup: `ldd` of the binary, the NVRTC libraries on the machine, the
#      one the binary finds by itself, a first GPU run;
#   1. correctness: GPU vs CPU (p fingerprint equal = bitwise equal field,
#      gosa within 1e-9 relative) on 1, 2 and 4 in-process ranks
#      (--local-ranks, sharing the GPU), pinned and pageable staging,
#      --overlap, the --gpu-occupancy variants, on grids with odd and
#      one-point-wide blocks;
#   2. timing: bench transfer (host<->device and device copy bandwidth), XL
#      GFLOPS and effective GB/s beside the device copy bandwidth for every
#      --gpu-occupancy variant, and the phase split per iteration of pinned
#      vs pageable staging, with and without --overlap, on 2 and 4 ranks.
#
# Usage: scripts/gpu-check.sh [--dry-run] [path/to/himeno]
#   The binary defaults to $HIMENO, else target/release/himeno. Build it with
#   `cargo build --release --features cuda` (no MPI needed: the halo checks
#   run the ranks in one process).
# Output: four files in $OUT (if set) or /tmp/himeno-gpu-check:
#   gpu-check.txt   this report;
#   results.jsonl   every run's JSON record, each with its "check" label;
#   transfer.json   the bench transfer record;
#   details.tar.gz  each run's command line, stdout and stderr, ldd, nvidia-smi.
# Exit status: 0 PASS (every part ran and passed), 1 FAIL (a correctness
#   check failed), 2 setup error (no binary, GPU or NVRTC), 3 PARTIAL (a part
#   could not run, e.g. a binary without --local-ranks, or a timing run or
#   the binary's own NVRTC search failed).
# --dry-run (for CI, with a stub binary): no GPU expected; `ldd` may fail;
#   the system folders searched for NVRTC are under $GPU_CHECK_ROOT (a fake
#   tree) and python3 is not asked for its site folders.
# Knobs: GPU_CHECK_ITERATIONS (correctness, 20), GPU_CHECK_XL_ITERATIONS
#   (200), GPU_CHECK_L_ITERATIONS (100), GPU_CHECK_RUN_LIMIT (seconds per
#   run, 180).
set -euo pipefail

DRY=0
if [ "${1:-}" = --dry-run ]; then
    DRY=1
    shift
fi
BIN=${1:-${HIMENO:-target/release/himeno}}
DEST=${OUT:-/tmp/himeno-gpu-check}
ROOT=/
if [ "$DRY" = 1 ]; then ROOT=${GPU_CHECK_ROOT:-/}; fi
ROOT="${ROOT%/}/"
ITER=${GPU_CHECK_ITERATIONS:-20}
XL_ITER=${GPU_CHECK_XL_ITERATIONS:-200}
L_ITER=${GPU_CHECK_L_ITERATIONS:-100}
RUN_LIMIT=${GPU_CHECK_RUN_LIMIT:-180}

mkdir -p "$DEST"
rm -f "$DEST/gpu-check.txt" "$DEST/results.jsonl" "$DEST/transfer.json" "$DEST/details.tar.gz"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/himeno-gpu-check.XXXXXX")
mkdir -p "$WORK/runs"
RESULTS="$DEST/results.jsonl"
: > "$RESULTS"
# tee -p: a reader of stdout that goes away must not cut the report short.
exec > >(tee -p "$DEST/gpu-check.txt") 2>&1
TEE_PID=$!
# On any exit: archive the details, let tee finish the report (the caller
# collects $DEST right away), remove the scratch folder.
# shellcheck disable=SC2317  # run by the EXIT trap
finish() {
    local rc=$?
    tar -czf "$DEST/details.tar.gz" -C "$WORK" . 2> /dev/null || true
    exec >&- 2>&-
    wait "$TEE_PID" 2> /dev/null || true
    rm -rf "$WORK"
    exit "$rc"
}
trap finish EXIT

die() {
    echo "gpu-check: SETUP ERROR: $*"
    exit 2
}

# jget FILE KEY...: the values at the dotted paths KEY (list indices are
# numbers) of the JSON document in FILE, on one line, space-separated
# (empty fields as "-").
jget() {
    python3 - "$@" << 'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
out = []
for path in sys.argv[2:]:
    v = doc
    for k in path.split("."):
        if isinstance(v, list) and k.isdigit() and int(k) < len(v):
            v = v[int(k)]
        elif isinstance(v, dict):
            v = v.get(k)
        else:
            v = None
    out.append("-" if v is None else v if isinstance(v, str) else json.dumps(v))
print(" ".join(out))
EOF
}

# Parts of the check and their outcome: ok, fail or "not run: why".
declare -A PART
PARTS=(setup nvrtc_search correctness_1_rank correctness_2_ranks correctness_4_ranks
    staging overlap occupancy transfer xl_timing phase_split)
for p in "${PARTS[@]}"; do PART[$p]="not run"; done
CORRECTNESS=(correctness_1_rank correctness_2_ranks correctness_4_ranks staging overlap occupancy)
# mark PART OUTCOME: a failure sticks; "not run" never replaces a result.
mark() {
    case "${PART[$1]}:$2" in
        fail:*) ;;
        *:fail) PART[$1]=fail ;;
        "not run"*:ok) PART[$1]=ok ;;
        "not run"*:*) PART[$1]=$2 ;;
    esac
}

echo "== himeno GPU check$([ "$DRY" = 1 ] && echo " (DRY RUN: stub binary, no GPU)"), $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
[ -x "$BIN" ] || die "no himeno binary at $BIN (build: cargo build --release --features cuda)"
echo "binary: $BIN ($("$BIN" --version 2>&1 | head -n 1))"
command -v python3 > /dev/null || die "python3 is needed to read the JSON reports"

# --- 0. setup ------------------------------------------------------------
echo
echo "== 0. setup"
LDD_RC=0
ldd "$BIN" > "$WORK/ldd.txt" 2>&1 || LDD_RC=$?
sed 's/^/  ldd: /' "$WORK/ldd.txt"
if grep -q "not found" "$WORK/ldd.txt"; then
    die "the binary needs libraries this machine lacks (see ldd above); build it with \
--features cuda alone (no MPI) for a machine without MPI"
fi
if [ "$LDD_RC" != 0 ] && [ "$DRY" = 0 ]; then
    die "ldd cannot read $BIN"
fi
if grep -q "libmpi" "$WORK/ldd.txt"; then
    echo "  note: the binary links MPI; the checks below run ranks in one process all the same"
fi
nvidia-smi > "$WORK/nvidia-smi.txt" 2>&1 || true
DRIVER_CUDA=$(sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\.\([0-9]*\).*/\1.\2/p' "$WORK/nvidia-smi.txt" | head -n 1)
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv,noheader \
    2> /dev/null | sed 's/^/  GPU: /' || echo "  GPU: nvidia-smi not available"
echo "  driver's CUDA version: ${DRIVER_CUDA:-unknown}"
MAJOR=${DRIVER_CUDA%%.*}

# nvrtc_files: every NVRTC 12 or 13 library on this machine, in the order
# the binary searches (toolkit folders, then wheels, then the ldconfig
# cache), one "major path" per line.
nvrtc_files() {
    local roots=() sites=() d v f nvcc
    for v in CUDA_HOME CUDA_PATH CUDA_ROOT CUDA_TOOLKIT_ROOT_DIR; do
        if [ -n "${!v:-}" ]; then roots+=("${!v}"); fi
    done
    if nvcc=$(command -v nvcc 2> /dev/null); then
        roots+=("$(dirname "$(dirname "$nvcc")")" "$(dirname "$(dirname "$(readlink -f "$nvcc")")")")
    fi
    for d in "${ROOT}usr/local/cuda" "${ROOT}"usr/local/cuda-* "${ROOT}opt/cuda"; do
        if [ -d "$d" ]; then roots+=("$d"); fi
    done
    for v in VIRTUAL_ENV CONDA_PREFIX; do
        if [ -n "${!v:-}" ]; then
            for d in "${!v}"/lib/python3*/site-packages; do sites+=("$d"); done
        fi
    done
    if [ "$DRY" = 0 ]; then
        while IFS= read -r d; do sites+=("$d"); done < <(python3 -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p]))' 2> /dev/null || true)
    fi
    for d in "${ROOT}"usr/local/lib/python3*/dist-packages "${ROOT}"usr/lib/python3*/dist-packages \
        "${ROOT}"usr/local/lib/python3*/site-packages "${ROOT}"opt/*/.venv/lib/python3*/site-packages; do
        sites+=("$d")
    done
    {
        for d in "${roots[@]}"; do
            for f in "$d"/lib64/libnvrtc.so.1[23] "$d"/lib/libnvrtc.so.1[23] "$d"/targets/*/lib/libnvrtc.so.1[23]; do
                if [ -f "$f" ]; then echo "${f##*.so.} $f"; fi
            done
        done
        for d in "${sites[@]}"; do
            for f in "$d"/nvidia/cu13/lib/libnvrtc.so.13 "$d"/nvidia/cu12/lib/libnvrtc.so.12 \
                "$d"/nvidia/cuda_nvrtc/lib/libnvrtc.so.12; do
                if [ -f "$f" ]; then echo "${f##*.so.} $f"; fi
            done
        done
        if [ "$DRY" = 0 ]; then
            ldconfig -p 2> /dev/null | awk '/libnvrtc\.so\.1[23] / {n = $NF; sub(/.*\.so\./, "", n); print n, $NF}'
        fi
    } | awk '!seen[$2]++'
}
nvrtc_files > "$WORK/nvrtc.txt"
echo "  NVRTC libraries on this machine:"
if [ -s "$WORK/nvrtc.txt" ]; then
    sed 's/^\([0-9]*\) /    NVRTC \1: /' "$WORK/nvrtc.txt"
else
    echo "    none found"
fi
# The preferred one: the driver's major version, else the newest not newer.
CHOSEN=$(awk -v m="${MAJOR:-99}" '$1 == m {print $2; exit}' "$WORK/nvrtc.txt")
if [ -z "$CHOSEN" ]; then
    CHOSEN=$(sort -k1,1nr "$WORK/nvrtc.txt" | awk -v m="${MAJOR:-99}" '$1 <= m {print $2; exit}')
fi
echo "  NVRTC this script would choose: ${CHOSEN:-none}"

# The binary's own search (as users run it), then a first GPU run.
PROBE=(--backend gpu --grid 3x3x3 --iterations 1 --warmup 0 --format json)
SELF_RC=0
env -u HIMENO_NVRTC_LIB "$BIN" -v "${PROBE[@]}" > "$WORK/probe.json" 2> "$WORK/probe.err" || SELF_RC=$?
SELF=$(sed -n 's/.*NVRTC \([0-9.]*\) loaded from \(.*\)$/\1 \2/p' "$WORK/probe.err" | head -n 1)
if [ -n "$SELF" ]; then
    echo "  the binary's own NVRTC search found: NVRTC $SELF"
    mark nvrtc_search ok
else
    echo "  the binary's own NVRTC search FAILED: $(grep -m1 'error' "$WORK/probe.err" || true)"
    mark nvrtc_search fail
    if [ -n "$CHOSEN" ]; then
        echo "  using HIMENO_NVRTC_LIB=$CHOSEN for the runs below"
        export HIMENO_NVRTC_LIB="$CHOSEN"
        LD_LIBRARY_PATH="$(dirname "$CHOSEN")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LD_LIBRARY_PATH
        SELF_RC=0
        "$BIN" -v "${PROBE[@]}" > "$WORK/probe.json" 2> "$WORK/probe.err" || SELF_RC=$?
    fi
fi
if [ "$SELF_RC" != 0 ]; then
    die "no GPU run works: $(grep -m1 'error' "$WORK/probe.err" || tail -n 1 "$WORK/probe.err")"
fi
mark setup ok
read -r DEVICE_LINE < <(jget "$WORK/probe.json" per_rank.0.placement) || true
echo "  first GPU run: ${DEVICE_LINE}"
read -r SOFTWARE < <(jget "$WORK/probe.json" provenance.gpu_software) || true
echo "  GPU software in the record: $SOFTWARE"

LOCAL=0
if "$BIN" --local-ranks 2 --backend cpu --grid 5x5x5 --iterations 1 --warmup 0 --format json \
    > "$WORK/local-probe.json" 2> "$WORK/local-probe.err"; then
    LOCAL=1
else
    WHY_LOCAL="this binary cannot run in-process ranks: $(grep -m1 . "$WORK/local-probe.err" || true)"
    echo "  NOTE: $WHY_LOCAL"
fi

# run NAME ARGS...: one run of the binary with a JSON report kept as
# $WORK/runs/NAME.json and appended to results.jsonl with its label.
run() {
    local name=$1 rc=0
    shift
    printf '%q ' "$BIN" "$@" > "$WORK/runs/$name.cmd"
    timeout "$RUN_LIMIT" "$BIN" "$@" --format json > "$WORK/runs/$name.json" 2> "$WORK/runs/$name.err" || rc=$?
    if [ "$rc" != 0 ]; then
        local why
        why=$(grep -m1 'error' "$WORK/runs/$name.err" || tail -n 1 "$WORK/runs/$name.err")
        [ "$rc" = 124 ] && why="no result after ${RUN_LIMIT} s"
        printf '  FAILED %-40s exit %s: %s\n' "$name" "$rc" "$why"
        return 1
    fi
    python3 - "$name" "$WORK/runs/$name.json" >> "$RESULTS" << 'EOF'
import json, sys
doc = json.load(open(sys.argv[2]))
print(json.dumps({"check": sys.argv[1], **doc}))
EOF
}

# same NAME REF: fingerprints equal, gosa within 1e-9, not failed verification.
same() {
    local fp gosa ver rfp rgosa
    read -r fp gosa ver < <(jget "$WORK/runs/$1.json" p_fingerprint gosa verified)
    read -r rfp rgosa < <(jget "$WORK/runs/$2.json" p_fingerprint gosa)
    if [ "$fp" != - ] && [ "$fp" = "$rfp" ] && [ "$ver" != false ] &&
        awk -v x="$gosa" -v y="$rgosa" 'BEGIN{d=x-y; if(d<0)d=-d; exit !(d <= 1e-9*(y<0?-y:y))}'; then
        printf '  ok    %-44s fingerprint %s gosa %s\n' "$1" "$fp" "$gosa"
        return 0
    fi
    printf '  FAIL  %-44s fingerprint %s vs %s, gosa %s vs %s, verified %s\n' \
        "$1" "$fp" "$rfp" "$gosa" "$rgosa" "$ver"
    return 1
}

# check PART NAME REF RANKS ARGS...: a GPU run on RANKS in-process ranks
# compared with the CPU run REF; its outcome counts for PART.
check() {
    local part=$1 name=$2 ref=$3 ranks=$4
    shift 4
    local extra=()
    if [ "$ranks" -gt 1 ]; then
        if [ "$LOCAL" = 0 ]; then
            mark "$part" "not run: $WHY_LOCAL"
            return 0
        fi
        extra=(--local-ranks "$ranks")
    fi
    if run "$name" --backend gpu "${extra[@]}" "$@" && same "$name" "$ref"; then
        mark "$part" ok
    else
        mark "$part" fail
    fi
}

# --- 1. correctness ------------------------------------------------------
echo
echo "== 1. correctness: GPU vs CPU, $ITER iterations (fingerprint equal, gosa within 1e-9)"
# Grids: S; an odd one (odd blocks on every split); a thin one whose k
# split leaves one-point-wide blocks.
for grid in 64x64x128 33x35x37 9x10x5; do
    base=(--grid "$grid" --iterations "$ITER" --warmup 2)
    ref="cpu-$grid"
    if ! run "$ref" "${base[@]}" --backend cpu; then
        for p in "${CORRECTNESS[@]}"; do mark "$p" fail; done
        continue
    fi
    if [ "$grid" = 9x10x5 ]; then
        check overlap "gpu-$grid-r2-1x1x2-overlap" "$ref" 2 "${base[@]}" --procs 1x1x2 --overlap
        check overlap "gpu-$grid-r4-2x1x2-overlap" "$ref" 4 "${base[@]}" --procs 2x1x2 --overlap
        check staging "gpu-$grid-r4-1x2x2-pageable" "$ref" 4 "${base[@]}" --procs 1x2x2 --staging pageable
        continue
    fi
    check correctness_1_rank "gpu-$grid-r1" "$ref" 1 "${base[@]}"
    check overlap "gpu-$grid-r1-overlap" "$ref" 1 "${base[@]}" --overlap
    check occupancy "gpu-$grid-r1-occ4" "$ref" 1 "${base[@]}" --gpu-occupancy 4
    check occupancy "gpu-$grid-r1-occ5" "$ref" 1 "${base[@]}" --gpu-occupancy 5
    for rp in "2 2x1x1" "2 1x1x2" "4 1x2x2" "4 2x2x1"; do
        read -r ranks procs <<< "$rp"
        part=correctness_${ranks}_ranks
        check "$part" "gpu-$grid-r$ranks-$procs-pinned" "$ref" "$ranks" "${base[@]}" --procs "$procs" --staging pinned
        check staging "gpu-$grid-r$ranks-$procs-pageable" "$ref" "$ranks" "${base[@]}" --procs "$procs" --staging pageable
        check overlap "gpu-$grid-r$ranks-$procs-overlap" "$ref" "$ranks" "${base[@]}" --procs "$procs" --overlap
    done
    check occupancy "gpu-$grid-r4-1x2x2-all" "$ref" 4 "${base[@]}" --procs 1x2x2 --overlap \
        --staging pageable --gpu-occupancy 5
done

# --- 2. timing -----------------------------------------------------------
echo
echo "== 2. timing"
D2D=""
if run transfer bench transfer --max-bytes $((1 << 30)); then
    cp "$WORK/runs/transfer.json" "$DEST/transfer.json"
    read -r D2D H2D_PIN H2D_PAGE D2H_PIN D2H_PAGE LAT < <(jget "$DEST/transfer.json" \
        'peak_gbytes_per_s.d2d/device' 'peak_gbytes_per_s.h2d/pinned' 'peak_gbytes_per_s.h2d/pageable' \
        'peak_gbytes_per_s.d2h/pinned' 'peak_gbytes_per_s.d2h/pageable' 'latency_us.h2d/pinned') || true
    awk -v d="$D2D" -v a="$H2D_PIN" -v b="$H2D_PAGE" -v c="$D2H_PIN" -v e="$D2H_PAGE" -v l="$LAT" 'BEGIN{
        printf "bench transfer (peak GB/s): device copy %.0f (read + write); h2d pinned %.1f, pageable %.1f; d2h pinned %.1f, pageable %.1f; h2d pinned latency %.1f us\n", d, a, b, c, e, l}'
    mark transfer ok
else
    mark transfer fail
fi

echo
echo "XL (512x512x1024) on one rank, $XL_ITER iterations, per --gpu-occupancy variant:"
printf '  %-9s %8s %10s %12s %14s %14s\n' occupancy iters GFLOPS "eff. GB/s" "% of d2d copy" "compute share"
XL_FP=""
for occ in auto 4 5; do
    name="time-XL-occ$occ"
    if run "$name" --backend gpu --size XL --iterations "$XL_ITER" --warmup 5 --gpu-occupancy "$occ"; then
        read -r it mf gb share fp < <(jget "$WORK/runs/$name.json" iterations mflops gbytes_per_s compute_share p_fingerprint) || true
        awk -v o="$occ" -v it="$it" -v mf="$mf" -v gb="$gb" -v d="${D2D:-0}" -v s="$share" 'BEGIN{
            printf "  %-9s %8d %10.1f %12.1f %14s %13.1f%%\n", o, it, mf/1000, gb,
                (d > 0 ? sprintf("%.1f%%", 100*gb/d) : "-"), 100*s}'
        mark xl_timing ok
        if [ -z "$XL_FP" ]; then
            XL_FP=$fp
        elif [ "$fp" = "$XL_FP" ]; then
            mark occupancy ok
        else
            echo "  FAIL  XL fingerprint $fp differs from occupancy auto's $XL_FP"
            mark occupancy fail
        fi
    else
        mark xl_timing fail
    fi
done

echo
echo "L (256x256x512), $L_ITER iterations, ranks sharing the GPU: ms per iteration, slowest rank"
printf '  %-5s %-7s %-9s %-7s %8s %8s %8s %8s %8s %9s %8s\n' \
    ranks procs staging overlap compute pack transfer comm unpack allreduce GFLOPS
L_FP=""
if [ "$LOCAL" = 0 ]; then
    mark phase_split "not run: $WHY_LOCAL"
else
    for rp in "2 2x1x1" "4 1x2x2"; do
        read -r ranks procs <<< "$rp"
        for st in pinned pageable; do
            for ov in off on; do
                name="split-L-r$ranks-$procs-$st-overlap$ov"
                args=(--backend gpu --local-ranks "$ranks" --procs "$procs" --size L
                    --iterations "$L_ITER" --warmup 5 --staging "$st")
                [ "$ov" = on ] && args+=(--overlap)
                if run "$name" "${args[@]}"; then
                    read -r it slow mf fp < <(jget "$WORK/runs/$name.json" iterations slowest_rank mflops p_fingerprint) || true
                    read -r c p t m u a < <(jget "$WORK/runs/$name.json" \
                        "per_rank.$slow.phases_s.compute" "per_rank.$slow.phases_s.pack" \
                        "per_rank.$slow.phases_s.transfer" "per_rank.$slow.phases_s.comm" \
                        "per_rank.$slow.phases_s.unpack" "per_rank.$slow.phases_s.allreduce") || true
                    awk -v r="$ranks" -v pr="$procs" -v s="$st" -v o="$ov" -v n="$it" -v c="$c" -v p="$p" \
                        -v t="$t" -v m="$m" -v u="$u" -v a="$a" -v g="$mf" 'BEGIN{k = 1000 / n
                        printf "  %-5s %-7s %-9s %-7s %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f %8.1f\n",
                            r, pr, s, o, c*k, p*k, t*k, m*k, u*k, a*k, g/1000}'
                    mark phase_split ok
                    if [ -z "$L_FP" ]; then
                        L_FP=$fp
                    elif [ "$fp" != "$L_FP" ]; then
                        echo "  FAIL  $name: fingerprint $fp differs from $L_FP"
                        mark staging fail
                    fi
                else
                    mark phase_split fail
                fi
            done
        done
    done
fi

# --- verdict -------------------------------------------------------------
echo
echo "== parts"
FAILED=0
PARTIAL=0
for p in "${PARTS[@]}"; do
    printf '  %-22s %s\n' "$p" "${PART[$p]}"
    case "${PART[$p]}" in
        ok) ;;
        fail)
            if grep -qx -- "$p" <<< "$(printf '%s\n' "${CORRECTNESS[@]}")"; then FAILED=1; else PARTIAL=1; fi
            ;;
        *) PARTIAL=1 ;;
    esac
done
echo "results: $DEST (gpu-check.txt, results.jsonl, transfer.json, details.tar.gz)"
if [ "$FAILED" = 1 ]; then
    echo "gpu-check: FAIL (a GPU result differs from the CPU's; see FAIL lines above)"
    exit 1
elif [ "$PARTIAL" = 1 ]; then
    echo "gpu-check: PARTIAL (every check that ran passed, but not every part ran or passed)"
    exit 3
fi
echo "gpu-check: PASS (every part ran; every GPU result equals the CPU's)"
exit 0
