#!/usr/bin/env bash
# Installs what building and testing himeno needs on Debian/Ubuntu; installs
# only what is missing; without root or apt it says what to install.
#
# Usage: scripts/install-deps.sh [build] [cluster] [mpich]
#   build    (the default) a C and C++ toolchain, OpenMPI (mpicc at build time,
#            mpirun at run time), libclang (rsmpi generates its bindings with
#            it), the tools the test suite uses (headless chromium among
#            them), and checks for cargo
#   cluster  what scripts/local-cluster.sh needs: Slurm (slurmctld, slurmd,
#            client), munge, PMIx, iproute2 and util-linux (nsenter, unshare)
#   mpich    MPICH (mpicc.mpich, mpiexec.mpich), beside Open MPI, which stays
#            the default MPI (scripts/test.sh selects MPICH with MPI=mpich)
set -euo pipefail

# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac

groups=("$@")
((${#groups[@]})) || groups=(build)

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

# (Not `ldconfig -p | grep -q`: under pipefail that fails when grep leaves
# at its match and ldconfig dies writing the rest.)
have_lib() { grep -q "$1" <<< "$(ldconfig -p 2> /dev/null)"; }

need=()
services=0
for group in "${groups[@]}"; do
  case $group in
    build)
      command -v cc >/dev/null 2>&1 || need+=(build-essential)
      # The emulated CUDA driver the GPU tests run on is C++ (scripts/cuda-emu.sh).
      command -v g++ >/dev/null 2>&1 || need+=(g++)
      command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
      command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
      have_libclang || need+=(libclang-dev)
      command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
      command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
      command -v numactl >/dev/null 2>&1 || need+=(numactl)
      command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
      # ReFrame goes into a virtual environment of its own (install-reframe.sh).
      python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
      # Plots (himeno report --plot) render text with a TrueType font.
      [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
      # The system tier opens the page of `himeno report --html` in it.
      command -v chromium >/dev/null 2>&1 || need+=(chromium)
      ;;
    cluster)
      command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
      command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
      command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
      command -v munged >/dev/null 2>&1 || need+=(munge)
      have_lib libpmix.so.2 || need+=(libpmix2)
      command -v ip >/dev/null 2>&1 || need+=(iproute2)
      command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
      services=1
      ;;
    mpich)
      command -v mpicc.mpich >/dev/null 2>&1 || need+=(libmpich-dev)
      command -v mpiexec.mpich >/dev/null 2>&1 || need+=(mpich)
      ;;
    *)
      echo "install-deps.sh: unknown group '$group' (build, cluster or mpich)" >&2
      exit 2
      ;;
  esac
done

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
  # Debian starts munge and Slurm's daemons on install; scripts/local-cluster.sh
  # runs its own, so keep the system's stopped while installing (unless the
  # machine already has a policy).
  policy=/usr/sbin/policy-rc.d
  if ((services)) && [ ! -e "$policy" ]; then
    trap '$sudo rm -f "$policy"' EXIT
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
  fi
  echo "himeno: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [[ " ${groups[*]} " == *" build "* ]] && ! command -v cargo >/dev/null 2>&1; then
  echo "himeno: cargo not found: install Rust (https://rustup.rs) and re-run" >&2
  exit 2
fi
