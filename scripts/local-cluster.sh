#!/usr/bin/env bash
# A virtual Slurm cluster on this machine, to try multi-host MPI runs and
# batch jobs before going to a real cluster.
#
# Usage: scripts/local-cluster.sh COMMAND
#   up [--nodes N] [--cpus C]  bring up N hosts (default 2) of C CPUs each
#                              (default 2), a controller and munge
#   status                     show the hosts, daemons and sinfo; exit 1 if down
#   down                       stop this cluster's daemons and jobs, remove
#                              its namespaces, bridge and state folder
#   exec HOST CMD...           run CMD (one shell command line, as ssh does)
#                              on HOST: ctl, node1, node2, ...
#   mpirun ARGS...             mpirun across the nodes (hostfile, launch agent
#                              and network set): Open MPI's, or MPICH's with
#                              HIMENO_MPIRUN=mpiexec.mpich
#   HOST CMD...                as exec: the script is mpirun's launch agent
#
# Each host is a network namespace (own address on a bridge) with its own
# host name (UTS namespace) and mount namespace (private /tmp and /etc/hosts,
# an empty cgroup tree for slurmd). One slurmctld runs on host ctl, one
# slurmd on each node; one munged serves all. Jobs see the machine's file
# system, as on a cluster with a shared file system. Run as root.
#
# Environment: HIMENO_CLUSTER_DIR (state folder, default /run/himeno-cluster;
# `up` creates it and refuses a path that exists, `down` removes only a
# folder that `up` made; letters, digits and ._+- only, at most 60
# characters),
# HIMENO_CLUSTER_NET (first three octets of the /24 network, default 10.77.0),
# HIMENO_CLUSTER_MPI (srun's default --mpi, default pmix),
# HIMENO_CLUSTER_SHARE (folders under /tmp the hosts see as the machine's,
# colon-separated; the repository and CARGO_TARGET_DIR always are).
# After `up`, sbatch/srun/sinfo work from the shell as usual: slurm.conf is
# linked at /etc/slurm/slurm.conf unless a real one is there (then
# `export SLURM_CONF=$HIMENO_CLUSTER_DIR/slurm.conf`).
# Several clusters may be up at once, each with its own state folder and
# network: the namespaces, links and bridge of one are named after its
# state folder, and `down` ends only those, its daemons and its folder.
set -euo pipefail

# The comment block at the top of this file, without its '#'s.
usage() { awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
here=$(dirname "$self")

die() { echo "local-cluster.sh: $*" >&2; exit 2; }
say() { echo "local-cluster.sh: $*" >&2; }

# The state folder, absolute (the daemons, slurm.conf and mpirun's launch
# agent use it from other folders), checked before anything is done: the
# paths in slurm.conf and munged's options cannot hold spaces, and munged's
# socket and slurmd's step sockets under it must fit a socket address (108
# bytes).
state=${HIMENO_CLUSTER_DIR:-/run/himeno-cluster}
state=$(realpath -m -s -- "$state")
if [[ ! $state =~ ^(/[A-Za-z0-9._+-]+)+$ || $state =~ /\.\.?(/|$) ]]; then
  die "HIMENO_CLUSTER_DIR='$state': use a path of letters, digits and . _ + - only (no spaces)"
fi
((${#state} <= 60)) || die "HIMENO_CLUSTER_DIR='$state' is longer than 60 characters (socket paths under it must fit)"
# What `up` writes into the state folder first: `down` removes a folder
# only when it holds this file.
marker=$state/.local-cluster-state
# This cluster's names, from its state folder: namespaces himeno-TAG-HOST,
# links hmTAG-N and hmTAG-Np, bridge hmTAG-br (interface names have at most
# 15 characters).
tag=$(printf '%s' "$state" | cksum | awk '{printf "%08x", $1}')
ns_prefix=himeno-$tag-
bridge=hm$tag-br
net=${HIMENO_CLUSTER_NET:-10.77.0}
mpi_default=${HIMENO_CLUSTER_MPI:-pmix}
# Folders in the machine's /tmp that the hosts see too (each host has its
# own /tmp): the repository, the cargo target folder and any listed in
# HIMENO_CLUSTER_SHARE (colon-separated), when they live under /tmp.
shared_tmp=()
IFS=: read -r -a share_list <<< "$(dirname "$here"):${CARGO_TARGET_DIR:-}:${HIMENO_CLUSTER_SHARE:-}"
for d in "${share_list[@]}"; do
  [[ -n $d && -d $d ]] || continue
  d=$(cd "$d" && pwd -P)
  [[ $d == /tmp/?* ]] && shared_tmp+=("$d")
done
system_conf=/etc/slurm/slurm.conf

need_root() {
  ((EUID == 0)) || die "needs root (network namespaces, bridge, daemons): run it with sudo"
}

# Installs the cluster's packages when one of its programs is missing.
install_missing() {
  local p
  for p in slurmctld slurmd sbatch munged ip nsenter unshare; do
    command -v "$p" > /dev/null 2>&1 || { "$here/install-deps.sh" cluster; return; }
  done
}

# Host names, controller first, from the state folder.
hosts() { [[ -r $state/hosts.list ]] && cat "$state/hosts.list"; }

# Pid of the process holding HOST's namespaces, if it is alive.
holder() { alive "$state/hosts/$1/holder.pid" sleep; }

# Runs a command inside HOST's namespaces.
in_host() {
  local host=$1 pid
  shift
  pid=$(holder "$host") || die "host '$host' is not up (see: $0 status)"
  nsenter -t "$pid" --net --uts --mount -- "$@"
}

# Pid from a pid file if that process is alive and is `$2`.
alive() {
  local pid
  pid=$(cat "$1" 2> /dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ && -d /proc/$pid && $(cat "/proc/$pid/comm" 2> /dev/null) == "$2" ]] && echo "$pid"
}

# Waits up to $1 seconds for the command after it to succeed. The command
# runs in a subshell, whose output alone goes to /dev/null: a stop signal's
# trap that runs meanwhile still reaches stderr.
wait_for() {
  local secs=$1 t=0
  shift
  until ("$@") > /dev/null 2>&1; do
    ((t >= secs * 5)) && return 1
    sleep 0.2
    t=$((t + 1))
  done
}

# Ends processes: SIGTERM, up to 5 s grace, then SIGKILL.
stop_pids() {
  (($#)) || return 0
  kill -TERM "$@" 2> /dev/null || true
  local t
  for ((t = 0; t < 25; t++)); do
    local left=()
    local p
    for p in "$@"; do [[ -d /proc/$p ]] && left+=("$p"); done
    ((${#left[@]})) || return 0
    sleep 0.2
  done
  kill -KILL "$@" 2> /dev/null || true
}

# Slurm client call with a bound: against a stopped controller they block.
slurm() { timeout 15 "$@"; }

# Whether the state folder is one that `up` made (a folder, not a link,
# holding the marker).
owned() { [[ -d $state && ! -L $state && -f $marker && ! -L $marker ]]; }

# This cluster's namespaces.
namespaces() { ip netns list 2> /dev/null | awk -v p="$ns_prefix" 'index($1, p) == 1 {print $1}'; }

# This cluster's munged: by its pid file, else (state folder lost) by its
# socket option, which names this state folder.
munged_pids() {
  local pid p arg
  if pid=$(alive "$state/munge/munged.pid" munged); then echo "$pid"; return; fi
  for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2> /dev/null) == munged ]] || continue
    while IFS= read -r -d '' arg; do
      if [[ $arg == "--socket=$state/munge/munge.socket" ]]; then echo "${p#/proc/}"; break; fi
    done 2> /dev/null < "$p/cmdline" || true
  done
}

cmd_down() {
  need_root
  if [[ -e $state || -L $state ]] && ! owned; then
    die "down: $state is not a state folder of this script (no $marker): nothing removed"
  fi
  local ns pids=() spaces found=0
  mapfile -t spaces < <(namespaces)
  # Every process in one of this cluster's network namespaces is the
  # cluster's: its holder, slurmd or slurmctld, job steps and what they
  # started. All get SIGTERM at once, then share one grace period.
  for ns in "${spaces[@]}"; do
    found=1
    mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2> /dev/null)
  done
  mapfile -t -O "${#pids[@]}" pids < <(munged_pids)
  stop_pids "${pids[@]}"
  for ns in "${spaces[@]}"; do ip netns delete "$ns" 2> /dev/null || true; done
  if ip link show "$bridge" > /dev/null 2>&1; then
    found=1
    ip link delete "$bridge"
  fi
  if [[ -L $system_conf && $(readlink "$system_conf") == "$state/slurm.conf" ]]; then
    rm -f "$system_conf"
  fi
  if owned; then
    found=1
    rm -rf --one-file-system "$state"
  fi
  if [[ -n $(namespaces) ]]; then
    die "down: namespaces are left: $(namespaces | xargs)"
  fi
  if ((found)); then say "down: namespaces, daemons and $state removed"; else say "down: nothing was up"; fi
}

cmd_status() {
  if ! owned || [[ ! -r $state/hosts.list ]]; then say "down (no cluster state in $state)"; return 1; fi
  local host ok=1 pid
  printf '%-8s %-14s %-10s %s\n' host address holder daemon
  while read -r host addr; do
    local daemon=slurmd
    [[ $host == ctl ]] && daemon=slurmctld
    local h=down d=down
    pid=$(holder "$host" 2> /dev/null) && h=$pid
    if [[ $host == ctl ]]; then
      pid=$(alive "$state/ctl/slurmctld.pid" slurmctld) && d="$daemon $pid"
    else
      pid=$(alive "$state/hosts/$host/slurmd.pid" slurmd) && d="$daemon $pid"
    fi
    [[ $h == down || $d == down ]] && ok=0
    printf '%-8s %-14s %-10s %s\n' "$host" "$addr" "$h" "$d"
  done < "$state/hosts.addr"
  if pid=$(alive "$state/munge/munged.pid" munged); then echo "munged $pid"; else echo "munged down"; ok=0; fi
  SLURM_CONF=$state/slurm.conf slurm sinfo -N -o '%N %T %c' || ok=0
  ((ok)) || { say "the cluster is not (fully) up"; return 1; }
}

# Writes the config files from the templates in scripts/cluster.
write_config() {
  local nodes=$1 cpus=$2 i lines=""
  {
    echo "ctl $net.10"
    for ((i = 1; i <= nodes; i++)); do echo "node$i $net.$((10 + i))"; done
  } > "$state/hosts.addr"
  awk '{print $1}' "$state/hosts.addr" > "$state/hosts.list"
  echo "$net" > "$state/net"
  for ((i = 1; i <= nodes; i++)); do
    lines+="NodeName=node$i NodeAddr=$net.$((10 + i)) NodeHostname=node$i CPUs=$cpus State=UNKNOWN"$'\n'
  done
  local tpl
  tpl=$(< "$here/cluster/slurm.conf.in")
  tpl=${tpl//@STATE@/$state}
  tpl=${tpl//@CTL_ADDR@/$net.10}
  tpl=${tpl//@MPI@/$mpi_default}
  tpl=${tpl//@NODES@/$lines}
  printf '%s\n' "$tpl" > "$state/slurm.conf"
  cp "$here/cluster/cgroup.conf" "$state/cgroup.conf"
  cp "$here/cluster/mpi.conf" "$state/mpi.conf"
  {
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    while read -r host addr; do echo "$addr $host"; done < "$state/hosts.addr"
    # The machine itself, where mpirun/mpiexec may run, by its bridge address.
    echo "$net.1 $(hostname)"
  } > "$state/etc-hosts"
  for ((i = 1; i <= nodes; i++)); do echo "node$i slots=$cpus"; done > "$state/hostfile"
  for ((i = 1; i <= nodes; i++)); do echo "node$i:$cpus"; done > "$state/hostfile.hydra"
}

# Creates HOST's namespaces, its link to the bridge and its holder process.
make_host() {
  local host=$1 addr=$2 ns=$ns_prefix$1 veth=hm$tag-${1#node}
  [[ $host == ctl ]] && veth=hm$tag-0
  mkdir -p "$state/hosts/$host/spool"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name "${veth}p"
  ip link set "${veth}p" netns "$ns"
  ip link set "$veth" master "$bridge" up
  ip netns exec "$ns" ip link set "${veth}p" name eth0
  ip netns exec "$ns" ip addr add "$addr/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
  # The holder: a sleeping process in the host's own UTS and mount
  # namespaces; daemons and the mpirun agent join it with nsenter.
  # `ip netns exec` gives it a fresh /sys without the cgroup mounts. Its
  # copy of /run/netns goes: a mount namespace that holds another
  # cluster's namespace files keeps `ip netns delete` from removing them.
  # The host's /tmp is its own, but the folders the jobs need from the
  # machine's /tmp (the repository and the cargo target folder, when a
  # checkout lives there, as CI's may) are moved into it at the same
  # paths: each is bound to a mount point under the state folder before
  # the new /tmp hides it, then moved (the mount point is empty again).
  local under=$state/hosts/$host/shared
  mkdir -p "$under"
  # shellcheck disable=SC2016 # $1.. are the inner shell's arguments
  setsid ip netns exec "$ns" unshare --uts --mount --propagation private -- /bin/sh -c '
    host=$1 hosts=$2 under=$3 && shift 3 &&
    hostname "$host" &&
    n=0 && for d in "$@"; do
      n=$((n + 1)) && mkdir -p "$under/$n" && mount --bind "$d" "$under/$n" || exit 1
    done &&
    mount -t tmpfs -o mode=1777 tmpfs /tmp &&
    n=0 && for d in "$@"; do
      n=$((n + 1)) && mkdir -p "$d" && mount --move "$under/$n" "$d" || exit 1
    done &&
    mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup &&
    mount --bind "$hosts" /etc/hosts &&
    { umount -l /run/netns 2> /dev/null || true; } &&
    exec sleep infinity' sh "$host" "$state/etc-hosts" "$under" "${shared_tmp[@]}" \
    < /dev/null > /dev/null 2>&1 &
  echo $! > "$state/hosts/$host/holder.pid"
  wait_for 10 host_named "$host" || die "host $host did not come up"
}

host_named() {
  local pid
  pid=$(holder "$1") && [[ $(nsenter -t "$pid" --uts hostname 2> /dev/null) == "$1" ]]
}

# Prints the last lines of the daemons' logs (after a failure).
show_logs() {
  local f
  for f in "$state"/ctl/*.log "$state"/hosts/*/*.log "$state"/munge/munged.log; do
    [[ -s $f ]] || continue
    echo "---- $f" >&2
    tail -n 15 "$f" >&2
  done
}

# On a failed `up`: show the logs, then take down what was brought up.
up_failed() {
  local rc=$?
  ((rc != 0)) || return 0
  trap '' INT TERM HUP
  say "up failed (exit $rc); logs:"
  show_logs
  cmd_down
  exit "$rc"
}

# A stop signal during `up` (Ctrl-C, a closed terminal, kill): take down
# what was brought up, shielded from a second signal, and end as the
# signal asks.
up_signalled() {
  trap '' INT TERM HUP
  trap - EXIT
  say "up: stopped by SIG$1: taking down what was brought up"
  cmd_down || say "up: take-down incomplete: run $0 down"
  exit "$2"
}

cmd_up() {
  local nodes=2 cpus=2
  while (($#)); do
    case $1 in
      --nodes|--cpus) (($# >= 2)) || die "up: $1 needs a number (see --help)" ;;&
      --nodes) nodes=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      *) die "up: unknown option $1 (see --help)" ;;
    esac
  done
  if [[ ! $nodes =~ ^[1-9][0-9]?$ ]] || ((nodes > 60)); then die "--nodes '$nodes': use 1 to 60"; fi
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus '$cpus' is not a positive number"
  if [[ ! $net =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] \
    || ((BASH_REMATCH[1] > 255 || BASH_REMATCH[2] > 255 || BASH_REMATCH[3] > 255)); then
    die "HIMENO_CLUSTER_NET='$net' is not the first three numbers of an IPv4 /24 (e.g. 10.77.0)"
  fi
  need_root
  if [[ -e $state || -L $state ]] && ! owned; then
    die "$state exists and is not a state folder of this script: name a new folder (up creates it)"
  fi
  install_missing
  if owned; then
    if cmd_status > /dev/null 2>&1; then die "already up (scripts/local-cluster.sh status; down first)"; fi
    say "removing the remains of an earlier cluster in $state"
    cmd_down
  elif [[ -n $(namespaces) ]] || ip link show "$bridge" > /dev/null 2>&1; then
    say "removing the remains of an earlier cluster of $state"
    cmd_down
  fi
  # Another cluster (or anything else) on this network would share its
  # addresses: refuse before anything is made.
  local used
  used=$(ip -4 -o addr show to "$net.0/24" 2> /dev/null | awk '{print $2}' | xargs)
  [[ -z $used ]] || die "HIMENO_CLUSTER_NET=$net is in use here ($used): choose another, e.g. HIMENO_CLUSTER_NET=10.78.0"
  if [[ -e $system_conf && ! -L $system_conf ]]; then
    say "note: $system_conf is a real config: use export SLURM_CONF=$state/slurm.conf"
  fi
  # From here on, any failure or stop signal takes everything down again.
  trap up_failed EXIT
  trap 'up_signalled INT 130' INT
  trap 'up_signalled TERM 143' TERM
  trap 'up_signalled HUP 129' HUP
  mkdir -p "$(dirname "$state")"
  # mkdir without -p: the folder must be new (a folder made meanwhile by
  # someone else is not taken over).
  mkdir -m 755 "$state" || die "cannot create $state"
  echo "state folder of scripts/local-cluster.sh; down removes it" > "$marker"
  mkdir -p "$state"/{ctl/state,munge,hosts}
  chmod 755 "$state/munge"
  write_config "$nodes" "$cpus"

  # One munge key and one munged for all hosts; the key is never readable
  # by others, not even for a moment.
  (umask 077 && dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none)
  chmod 400 "$state/munge/munge.key"
  munged --force --socket="$state/munge/munge.socket" --key-file="$state/munge/munge.key" \
    --pid-file="$state/munge/munged.pid" --log-file="$state/munge/munged.log" \
    --seed-file="$state/munge/munged.seed" < /dev/null > /dev/null 2>&1 \
    || die "munged did not start (see $state/munge/munged.log)"
  wait_for 10 alive "$state/munge/munged.pid" munged || die "munged did not start"

  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  ip link set "$bridge" up
  local host addr
  while read -r host addr; do make_host "$host" "$addr"; done < "$state/hosts.addr"

  if [[ ! -e $system_conf ]]; then
    mkdir -p "$(dirname "$system_conf")"
    ln -s "$state/slurm.conf" "$system_conf"
  fi
  export SLURM_CONF=$state/slurm.conf
  in_host ctl slurmctld -f "$SLURM_CONF" < /dev/null > "$state/ctl/start.log" 2>&1 \
    || die "slurmctld did not start (see $state/ctl/slurmctld.log)"
  wait_for 20 slurm scontrol ping || die "slurmctld does not answer (see $state/ctl/slurmctld.log)"
  for host in $(tail -n +2 "$state/hosts.list"); do
    in_host "$host" slurmd -f "$SLURM_CONF" -N "$host" < /dev/null > "$state/hosts/$host/start.log" 2>&1 \
      || die "slurmd on $host did not start (see $state/hosts/$host/slurmd.log)"
  done
  wait_for 60 all_idle "$nodes" || die "the nodes did not become idle: $(slurm sinfo -h -N -o '%N=%T' | xargs)"
  trap - EXIT INT TERM HUP
  say "up: $nodes node(s) of $cpus CPU(s), controller ctl at $net.10, state in $state"
  [[ -L $system_conf ]] || say "use: export SLURM_CONF=$state/slurm.conf"
}

all_idle() {
  local n
  n=$(slurm sinfo -h -N -t idle -o '%N' | sort -u | wc -l)
  ((n == $1))
}

# The launch agent of mpirun/mpiexec: they call it as ssh, `AGENT [-x] HOST
# COMMAND...`, and the command words form one shell command line.
cmd_exec() {
  # ssh options before the host (MPICH's hydra passes -x) do not apply.
  while [[ ${1:-} == -* ]]; do shift; done
  (($# >= 2)) || die "exec needs a host and a command"
  local host=$1 pid
  shift
  pid=$(holder "$host") || die "host '$host' is not up (see: $0 status)"
  exec nsenter -t "$pid" --net --uts --mount -- /bin/sh -c "$*"
}

# mpirun across the nodes: Open MPI's, or MPICH's hydra when the launcher
# ($HIMENO_MPIRUN, default mpirun) is one; this script is the launch agent.
cmd_mpirun() {
  [[ -r $state/hostfile ]] || die "the cluster is not up: scripts/local-cluster.sh up"
  # The network this cluster was brought up on, whatever HIMENO_CLUSTER_NET says now.
  net=$(< "$state/net")
  local launcher=${HIMENO_MPIRUN:-mpirun} args base
  # The launch agent (this script) finds the cluster from any folder.
  export HIMENO_CLUSTER_DIR=$state
  command -v "$launcher" > /dev/null || die "no $launcher here: install Open MPI or MPICH"
  # Output captured first: under pipefail, `cmd | grep -q` fails when grep
  # leaves at its match and cmd then dies writing the rest (SIGPIPE).
  if [[ $("$launcher" --version 2>&1) == *HYDRA* ]]; then
    args=(-launcher ssh -launcher-exec "$self" -f "$state/hostfile.hydra")
  else
    args=(--hostfile "$state/hostfile" --mca plm_rsh_agent "$self"
      --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24")
  fi
  # The launcher and the options this machine needs (no rank count: the
  # caller's -np comes with its arguments).
  mapfile -t base < <("$(dirname "$self")/mpirun-for")
  exec "${base[@]}" "${args[@]}" "$@"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) shift; need_root; cmd_exec "$@" ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  # Called by mpirun/mpiexec as their ssh: `local-cluster.sh [-x] HOST CMD...`.
  -x) need_root; cmd_exec "$@" ;;
  *)
    if [[ -n ${1:-} ]] && grep -qxF -- "$1" <<< "$(hosts)"; then
      need_root
      cmd_exec "$@"
    fi
    die "usage: scripts/local-cluster.sh up|status|down|exec HOST CMD|mpirun ARGS (see --help)" ;;
esac
