#!/usr/bin/env bash
# The emulated CUDA driver: test infrastructure, never linked into or
# shipped with himeno. It builds a stand-in libcuda.so.1 (also reached as
# libnvidia-ml.so.1, whose energy counter it emulates, and as libnccl.so.2,
# a stand-in NCCL on the emulated streams) from
# tests/cuda_emu/ and the real src/backend/gpu/kernels.cu compiled for the
# host, so that an unchanged `--features cuda` himeno runs --backend gpu on
# a machine without a GPU (docs/testing.md: "The emulated GPU"). Its times are the
# host CPU's and never GPU performance.
#
# Usage:
#   scripts/cuda-emu.sh build            build (or rebuild when stale) and
#                                        print the library's folder
#   scripts/cuda-emu.sh run -- CMD ...   run CMD against the emulated driver
#   scripts/cuda-emu.sh selftest         build and run the emulator's own checks
#                                        (tests/cuda_emu/selftest.cpp)
#   scripts/cuda-emu.sh --help
# The library goes to $HIMENO_EMU_DIR (default: ${CARGO_TARGET_DIR:-target}/cuda-emu).
# `run` puts it first on LD_LIBRARY_PATH, points HIMENO_NVRTC_LIB at the
# NVRTC 13 wheel of scripts/install-nvrtc.sh when it is unset, and gives
# the command a fresh HIMENO_EMU_STATE_DIR (removed afterwards) unless one
# is set. The HIMENO_EMU_* variables that configure the device are listed in
# docs/testing.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# The comment block at the top of this file, whole.
usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

out=${HIMENO_EMU_DIR:-${CARGO_TARGET_DIR:-$repo/target}/cuda-emu}
case $out in /*) ;; *) out=$PWD/$out ;; esac
src=$repo/tests/cuda_emu
kernels=$repo/src/backend/gpu/kernels.cu
launch=$repo/src/backend/gpu/launch.rs

# The value of `pub const NAME: u32 = V;` in launch.rs: the launch
# constants kernels.cu is compiled with (one home, as for NVRTC).
constant() {
    local v
    v=$(sed -n "s/^pub const $1: u32 = \([0-9_]*\);.*/\1/p" "$launch" | tr -d _)
    [ -n "$v" ] || { echo "cuda-emu.sh: no constant $1 in $launch" >&2; exit 2; }
    echo "$v"
}

build() {
    local lib=$out/libcuda.so.1
    local newest
    newest=$(find "$src" "$kernels" "$launch" "$0" -newer "$lib" 2> /dev/null | head -n 1 || true)
    if [ -e "$lib" ] && [ -z "$newest" ]; then
        echo "$out"
        return
    fi
    command -v g++ > /dev/null || { echo "cuda-emu.sh: g++ is needed (apt-get install g++)" >&2; exit 2; }
    mkdir -p "$out"
    local names list=""
    names=$(sed -n 's/^extern "C" __global__ void \([A-Z_]* \)\{0,1\}\([a-z_][a-z_0-9]*\)(.*/\2/p' \
        "$kernels" "$src/selftest_kernels.cu")
    [ -n "$names" ] || { echo "cuda-emu.sh: no kernels found in $kernels" >&2; exit 2; }
    for n in $names; do list+="EMU_KERNEL($n) "; done
    local tmp
    tmp=$(mktemp "$out/libcuda.XXXXXX")
    # -ffp-contract=off: no multiply-add contraction, as NVRTC's --fmad=false.
    # No _FORTIFY_SOURCE: a fault in a kernel jumps from a fiber's stack back
    # to the launching one (fiber.cpp), which its longjmp check refuses.
    g++ -std=c++17 -O2 -g -fPIC -shared -pthread -ffp-contract=off -fno-fast-math -U_FORTIFY_SOURCE \
        -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
        -include "$src/shim.h" -I "$src" \
        -DHIMENO_WARP="$(constant WARP)" -DHIMENO_SWEEP_THREADS="$(constant SWEEP_THREADS)" \
        -DHIMENO_SWEEP_MIN_BLOCKS=4 -DHIMENO_MAX_WARPS="$(constant MAX_WARPS)" \
        -DHIMENO_REDUCE_THREADS="$(constant REDUCE_THREADS)" \
        -DHIMENO_KERNELS_CU="\"$kernels\"" -DEMU_KERNELS="$list" \
        -Wl,-soname,libcuda.so.1 -Wl,--version-script="$src/exports.map" -Wl,-Bsymbolic -o "$tmp" \
        "$src"/config.cpp "$src"/memory.cpp "$src"/image.cpp "$src"/launch.cpp "$src"/fiber.cpp \
        "$src"/sched.cpp "$src"/driver.cpp "$src"/kernels_host.cpp "$src"/nvml.cpp "$src"/nccl.cpp
    mv -f "$tmp" "$lib"
    # Both names cudarc asks for, so a real driver elsewhere on the search
    # path is never picked up instead.
    ln -sf libcuda.so.1 "$out/libcuda.so"
    # NVML's name for the same file: the loader maps it once, so the NVML
    # calls it exports (nvml.cpp) see the devices the driver runs work on.
    ln -sf libcuda.so.1 "$out/libnvidia-ml.so.1"
    # NCCL's name for it too (nccl.cpp): NCCL work runs on the same
    # emulated streams; HIMENO_NCCL_LIB may point at this link.
    ln -sf libcuda.so.1 "$out/libnccl.so.2"
    echo "$out"
}

case ${1:-} in
    build)
        build
        ;;
    run)
        shift
        [ "${1:-}" = -- ] && shift
        [ $# -gt 0 ] || { echo "cuda-emu.sh: run -- CMD ...: no command" >&2; exit 2; }
        dir=$(build)
        export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        if [ -z "${HIMENO_NVRTC_LIB:-}" ]; then
            wheel=${HIMENO_NVRTC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/himeno-nvrtc}/cu13/nvidia/cu13/lib/libnvrtc.so.13
            [ -e "$wheel" ] && export HIMENO_NVRTC_LIB=$wheel
        fi
        if [ -z "${HIMENO_EMU_STATE_DIR:-}" ]; then
            HIMENO_EMU_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/himeno-emu.XXXXXX")
            export HIMENO_EMU_STATE_DIR
            trap 'rm -rf "$HIMENO_EMU_STATE_DIR"' EXIT
            "$@"
        else
            exec "$@"
        fi
        ;;
    selftest)
        dir=$(build)
        g++ -std=c++17 -O1 -g -pthread -I "$src" -o "$dir/selftest" "$src/selftest.cpp" \
            -L "$dir" -Wl,-rpath,"$dir" -l:libcuda.so.1
        # Work runs only when the host synchronises: the poisoning checks
        # look at a copy before it ran.
        # Two devices: the peer copy checks.
        HIMENO_EMU_WORKERS=0 HIMENO_EMU_DEVICES=2 "$dir/selftest"
        ;;
    -h|--help|help)
        usage
        ;;
    *)
        echo "cuda-emu.sh: use build, run -- CMD ..., selftest or --help" >&2
        exit 2
        ;;
esac
