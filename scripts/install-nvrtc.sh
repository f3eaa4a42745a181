#!/usr/bin/env bash
# Installs NVRTC 12 and 13 from PyPI (no GPU or CUDA toolkit needed) for the
# tests that compile the GPU kernels with both and look for NVRTC the way a
# CUDA machine lays it out: nvidia-cuda-nvrtc-cu12 (NVRTC 12.9) and
# nvidia-cuda-nvrtc (13.0, as on the project's CUDA 13 GPU machine), each
# unpacked with `pip install --target` into its own folder of
#   ${HIMENO_NVRTC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/himeno-nvrtc}/{cu12,cu13}
# (where the tests look). Uses python3's pip, or a virtual environment's
# when the system pip is missing or refuses. Installed once; later runs only
# check.
#
# With CI set, a failure is an error (exit 1): the kernel compile checks
# must not skip in CI. Otherwise it prints a note and exits 0, and the tests
# that need NVRTC skip with a reason. HIMENO_SKIP_NVRTC=1 skips the install.
set -euo pipefail
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
if (($#)); then
    case $1 in
        -h|--help) usage; exit 0 ;;
        *) echo "install-nvrtc.sh: takes no arguments, only --help (got '$1')" >&2; exit 2 ;;
    esac
fi
export PIP_ROOT_USER_ACTION=ignore

DIR=${HIMENO_NVRTC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/himeno-nvrtc}
# folder, package==version, the library file the tests load.
WHEELS=(
    "cu12 nvidia-cuda-nvrtc-cu12==12.9.86 nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
    "cu13 nvidia-cuda-nvrtc==13.0.88 nvidia/cu13/lib/libnvrtc.so.13"
)

fail() {
    if [ -n "${CI:-}" ]; then
        echo "install-nvrtc: $*" >&2
        exit 1
    fi
    echo "note: install-nvrtc: $*; the NVRTC tests will skip" >&2
    exit 0
}

if [ -n "${HIMENO_SKIP_NVRTC:-}" ]; then
    echo "note: HIMENO_SKIP_NVRTC is set: NVRTC not installed" >&2
    [ -z "${CI:-}" ] || echo "note: in CI the NVRTC tests will fail without it" >&2
    exit 0
fi

# pip_install TARGET SPEC: `pip install --target` with the first pip that
# works (--target is outside any environment, so PEP 668 does not refuse it).
pip_install() {
    local target=$1 spec=$2 venv="$DIR/venv"
    if python3 -m pip --version > /dev/null 2>&1 &&
        python3 -m pip install -q --disable-pip-version-check --no-deps --target "$target" "$spec"; then
        return 0
    fi
    if [ ! -x "$venv/bin/pip" ]; then
        python3 -m venv "$venv" > /dev/null 2>&1 || return 1
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$target" "$spec"
}

command -v python3 > /dev/null || fail "python3 is missing (apt-get install python3 python3-pip)"
mkdir -p "$DIR"
for w in "${WHEELS[@]}"; do
    read -r folder spec lib <<< "$w"
    if [ -e "$DIR/$folder/$lib" ]; then
        continue
    fi
    tmp="$DIR/$folder.partial"
    rm -rf "$tmp"
    pip_install "$tmp" "$spec" || fail "could not install $spec"
    [ -e "$tmp/$lib" ] || fail "$spec has no $lib"
    rm -rf "${DIR:?}/$folder"
    mv "$tmp" "$DIR/$folder"
    echo "install-nvrtc: $spec in $DIR/$folder" >&2
done
