#!/usr/bin/env bash
# Installs what building and testing himeno needs on Debian/Ubuntu: a C
# toolchain, OpenMPI (mpicc at build time, mpirun at run time), libclang
# (rsmpi generates its bindings with it) and the tools the test suite uses.
# Installs only what is missing; without root or apt it says what to install.
set -euo pipefail

need=()
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
# bindgen loads libclang.so or libclang-N.so; libclang-cpp (pulled in by other
# LLVM tools) is a different library and does not count.
have_libclang() {
  local f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
    /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
}
have_libclang || need+=(libclang-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v numactl >/dev/null 2>&1 || need+=(numactl)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
# Plots (himeno report --plot) render text with a TrueType font.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "himeno: please install: ${need[*]} (apt-get install ${need[*]})" >&2
      exit 2
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "himeno: no apt-get here; install the equivalents of: ${need[*]}" >&2
    exit 2
  fi
  echo "himeno: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "himeno: cargo not found: install Rust (https://rustup.rs) and re-run" >&2
  exit 2
fi
