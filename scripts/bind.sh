#!/usr/bin/env bash
# NUMA binding helper, placed between the launcher and himeno:
#   mpirun -np 8 scripts/bind.sh --policy membind -- target/release/himeno ...
#   srun -n 8 --cpu-bind=none scripts/bind.sh --policy local -- himeno ...
#
# Each rank is placed on one NUMA node, chosen from its node-local rank
# (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID):
#   --layout roundrobin  node = local rank mod nodes (default)
#   --layout packed      consecutive local ranks fill one node, then the next
#                        (needs the node-local rank count from the launcher)
# and its memory follows a numactl policy:
#   --policy local       CPUs of the node, memory allocated locally
#   --policy membind     CPUs of the node, memory only from that node
#   --policy interleave  CPUs of the node, memory interleaved over all nodes
#   --policy none        no binding
# Defaults come from HIMENO_BIND_POLICY and HIMENO_BIND_LAYOUT. The choice is
# exported as HIMENO_BINDING, which himeno records in its result (field
# "binding", rank 0's value). Without numactl, or where it may not bind, the
# rank runs unbound and the record says so. --dry-run prints the command.
set -euo pipefail

policy=${HIMENO_BIND_POLICY:-local}
layout=${HIMENO_BIND_LAYOUT:-roundrobin}
dry_run=0

die() { echo "bind.sh: $*" >&2; exit 2; }
# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# Option $1 needs a value ($2, the next word).
value() { if (($# < 2)) || [[ -z $2 ]]; then die "$1 needs a value (see --help)"; fi; }

while (($#)); do
  case $1 in
    --policy) value "$@"; policy=$2; shift 2 ;;
    --layout) value "$@"; layout=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
(($#)) || die "no command given: bind.sh [options] -- himeno ..."
case $policy in local|membind|interleave|none) ;; *) die "--policy '$policy': use local, membind, interleave or none" ;; esac
case $layout in roundrobin|packed) ;; *) die "--layout '$layout': use roundrobin or packed" ;; esac

local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-${MPI_LOCALRANKID:-0}}}
local_size=${OMPI_COMM_WORLD_LOCAL_SIZE:-${MPI_LOCALNRANKS:-${SLURM_NTASKS_PER_NODE:-}}}
local_size=${local_size%%(*}
# Counts in base 10 whatever their leading zeros (bash reads 08 as octal).
[[ $local_rank =~ ^[0-9]{1,9}$ ]] || die "node-local rank '$local_rank' from the launcher is not a number"
local_rank=$((10#$local_rank))

# Only one rank per node speaks, so warnings are not repeated N times.
say() { if ((local_rank == 0)); then echo "bind.sh: $*" >&2; fi; }

# NUMA node count: HIMENO_NUMA_NODES (for tests and odd systems), else sysfs.
nodes=${HIMENO_NUMA_NODES:-}
if [[ -z $nodes ]]; then
  nodes=0
  for d in /sys/devices/system/node/node[0-9]*; do
    [[ -d $d ]] && nodes=$((nodes + 1))
  done
  ((nodes > 0)) || nodes=1
fi
[[ $nodes =~ ^0*[1-9][0-9]{0,5}$ ]] || die "NUMA node count '$nodes' (HIMENO_NUMA_NODES) is not a positive number"
nodes=$((10#$nodes))

run() {
  if ((dry_run)); then
    printf 'HIMENO_BINDING=%q ' "$HIMENO_BINDING"
    printf '%q ' "$@"
    printf '\n'
    exit 0
  fi
  exec "$@"
}

if [[ $policy == none ]]; then
  export HIMENO_BINDING="none"
  run "$@"
fi

if [[ $layout == packed ]]; then
  if [[ $local_size =~ ^0*[1-9][0-9]{0,8}$ ]]; then
    local_size=$((10#$local_size))
    per=$(((local_size + nodes - 1) / nodes))
    node=$((local_rank / per))
  else
    say "the launcher did not give the node-local rank count: using --layout roundrobin"
    layout=roundrobin
  fi
fi
[[ $layout == roundrobin ]] && node=$((local_rank % nodes))

case $policy in
  local) mem=(--localalloc) ;;
  membind) mem=(--membind="$node") ;;
  interleave) mem=(--interleave=all) ;;
esac
numa=(numactl --cpunodebind="$node" "${mem[@]}")
export HIMENO_BINDING="$policy $layout: local rank $local_rank on NUMA node $node of $nodes"

if ! command -v numactl > /dev/null 2>&1; then
  say "numactl not found: running unbound (install the numactl package)"
  export HIMENO_BINDING="none (numactl not found; asked for $policy $layout)"
  run "$@"
fi
if ((!dry_run)) && ! "${numa[@]}" true > /dev/null 2>&1; then
  say "numactl cannot apply '${numa[*]}' here: running unbound"
  export HIMENO_BINDING="none (numactl refused $policy $layout on node $node)"
  run "$@"
fi
run "${numa[@]}" "$@"
