#!/bin/bash
# A real two-node Slurm cluster on this machine, for trying and testing `dlcalibrate slurm`
# (docs/slurm-local.md). Run as root:
#
#   tests/slurm/local_cluster.sh [start]   munged, slurmctld and slurmd node1 and node2; waits
#                                          until sinfo shows both idle in partition debug
#   tests/slurm/local_cluster.sh stop      kills the daemons (and any job still running),
#                                          deletes the namespaces and the state directory
#   tests/slurm/local_cluster.sh status    sinfo and squeue
#   tests/slurm/local_cluster.sh env       prints "export SLURM_CONF=..." for eval
#   tests/slurm/local_cluster.sh shape RATE  shapes every node's link at RATE (1gbit, 2gbit,
#                                          4gbit, 10gbit or none) in both directions, as
#                                          validate/cluster/emulated_cluster.sh does
#
# Each slurmd runs in its own network namespace (10.77.0.2 and .3, bridged to the controller at
# 10.77.0.1), UTS namespace (hostname node1/node2, so results name their node) and mount
# namespace (a private /etc/hosts naming the cluster). Where network namespaces cannot be made,
# both slurmd run on the host, on ports 16818 and 16819 (said loudly). The configuration and
# everything the daemons write stay under $DLSIM_SLURM_DIR (default /tmp/dlsim-slurm); the
# host's /etc/slurm and /etc/munge are not touched. Fake GPUs: 2 gres gpu per node (device
# files that act as /dev/null). No cgroups: proctrack/linuxproc, task/none.
# DLSIM_SLURM_NO_NETNS=1 forces the fallback; DLSIM_SLURM_TIMEOUT (s, default 60) bounds the wait;
# DLSIM_SLURM_RATE (default none) shapes the links from the start.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=validate/cluster/shaping.sh
source "$HERE/../../validate/cluster/shaping.sh"

DIR=${DLSIM_SLURM_DIR:-/tmp/dlsim-slurm}
CONF=$DIR/slurm.conf
NODE_TMP=/run/dlsim-slurm-node-tmp # bound to $DIR/<node>/tmp in each node's mount namespace
NODES=(node1 node2)
ADDRS=(10.77.0.2 10.77.0.3)
CTL_ADDR=10.77.0.1
BRIDGE=dlsim-br0
CTL_PORT=16817
SLURMD_PORT=16818
TIMEOUT_S=${DLSIM_SLURM_TIMEOUT:-60}
export SLURM_CONF=$CONF

say() { echo "local_cluster: $*"; }
die() {
  echo "local_cluster: error: $*" >&2
  exit 1
}

netns_name() { echo "dlsim-$1"; }

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Kills the process whose id is in pid file $1, and waits for it (TERM, then KILL after 10 s).
kill_pidfile() {
  local file=$1 pid
  [[ -f $file ]] || return 0
  pid=$(cat "$file")
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

need_root() { [[ $(id -u) -eq 0 ]] || die "run as root (it starts daemons and namespaces)"; }

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v nsenter >/dev/null || missing+=(util-linux)
  ((${#missing[@]} == 0)) && return 0
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian's packages may start their own munged and slurm daemons (with /etc's configuration);
  # this cluster runs its own, so those are left alone but must not hold our ports.
}

show_logs() {
  local f
  for f in "$DIR"/log/*.log; do
    [[ -f $f ]] || continue
    echo "----- $f (last 25 lines)" >&2
    tail -n 25 "$f" >&2
  done
}

stop_cluster() {
  local node ns pid
  for node in "${NODES[@]}"; do
    kill_pidfile "$DIR/$node/slurmd.pid"
    ns=$(netns_name "$node")
    if [[ -e /run/netns/$ns ]]; then
      # Whatever still runs in the node (slurmstepd, job tasks) goes with it.
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip netns delete "$ns" 2>/dev/null || true
    fi
    ip link delete "veth-$node" 2>/dev/null || true
  done
  kill_pidfile "$DIR/slurmctld.pid"
  kill_pidfile "$DIR/munge/munged.pid"
  ip link delete "$BRIDGE" 2>/dev/null || true
  rm -rf "$DIR"
}

# Bridge at 10.77.0.1, one veth pair per node into its namespace. Returns non-zero where the
# container does not allow network namespaces (the caller then falls back to ports).
make_network() {
  local i node ns
  [[ ${DLSIM_SLURM_NO_NETNS:-0} == 1 ]] && return 1 # to try the fallback where netns work
  ip netns add dlsim-probe 2>/dev/null || return 1
  ip netns delete dlsim-probe
  ip link add "$BRIDGE" type bridge || return 1
  ip addr add "$CTL_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for i in "${!NODES[@]}"; do
    node=${NODES[$i]}
    ns=$(netns_name "$node")
    ip netns add "$ns"
    ip link add "veth-$node" type veth peer name eth0 netns "$ns" || return 1
    ip link set "veth-$node" master "$BRIDGE"
    ip link set "veth-$node" up
    ip -n "$ns" addr add "${ADDRS[$i]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  shape_nodes "${DLSIM_SLURM_RATE:-none}"
}

# Shapes every node's link at rate $1 (validate/cluster/shaping.sh).
shape_nodes() {
  local node
  shaping_rate_bps "$1" >/dev/null || [[ $1 == none ]] ||
    die "unknown rate '$1' ($SHAPING_RATES)"
  for node in "${NODES[@]}"; do shape_link "$(netns_name "$node")" "veth-$node" "$1"; done
}

write_config() {
  local mode=$1 ctl_host i topo
  ctl_host=$(hostname -s)
  # The node's real topology (slurmd -C), so that slurmd does not drain it as "low cores".
  topo=$(slurmd -C | head -n 1 | grep -o 'CPUs=[0-9]* .*ThreadsPerCore=[0-9]*')
  mkdir -p "$DIR/ctld" "$DIR/log" "$DIR/munge"
  cat >"$CONF" <<EOF
# Written by tests/slurm/local_cluster.sh ($mode mode): a two-node cluster on one machine.
ClusterName=dlsim-local
SlurmctldHost=$ctl_host($([[ $mode == netns ]] && echo "$CTL_ADDR" || echo 127.0.0.1))
SlurmctldPort=$CTL_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/%n/spool
# Each node's temporary directory (PMIx puts its per-step directories there): one path that every
# slurmd's mount namespace binds to a directory of its own, so two nodes on one machine do not
# collide in one /tmp.
TmpFS=$NODE_TMP
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/%n/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
EOF
  for i in "${!NODES[@]}"; do
    if [[ $mode == netns ]]; then
      echo "NodeName=${NODES[$i]} NodeAddr=${ADDRS[$i]} NodeHostname=${NODES[$i]} $topo RealMemory=1024 Gres=gpu:2 State=UNKNOWN" >>"$CONF"
    else
      echo "NodeName=${NODES[$i]} NodeAddr=127.0.0.1 NodeHostname=${NODES[$i]} Port=$((SLURMD_PORT + i)) $topo RealMemory=1024 Gres=gpu:2 State=UNKNOWN" >>"$CONF"
    fi
  done
  echo "PartitionName=debug Nodes=$(
    IFS=,
    echo "${NODES[*]}"
  ) Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  # Fake GPUs: Slurm drops a GPU without a device file, so each is a character device that
  # behaves as /dev/null (a plain file where mknod is not allowed: slurmd then logs an error
  # but still counts it).
  mkdir -p "$DIR/dev"
  for i in 0 1; do
    mknod "$DIR/dev/gpu$i" c 1 3 2>/dev/null || touch "$DIR/dev/gpu$i"
  done
  cat >"$DIR/gres.conf" <<EOF
AutoDetect=off
NodeName=$(
    IFS=,
    echo "${NODES[*]}"
  ) Name=gpu File=$DIR/dev/gpu[0-1]
EOF
  # A private /etc/hosts for each node's mount namespace: the cluster's names.
  {
    echo "127.0.0.1 localhost"
    if [[ $mode == netns ]]; then
      echo "$CTL_ADDR $ctl_host"
      for i in "${!NODES[@]}"; do echo "${ADDRS[$i]} ${NODES[$i]}"; done
    else
      echo "127.0.0.1 $ctl_host ${NODES[*]}"
    fi
  } >"$DIR/hosts"
}

start_munge() {
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 700 "$DIR/munge"
  chmod 400 "$DIR/munge/munge.key"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed" ||
    {
      show_logs
      die "munged did not start"
    }
}

start_slurmd() {
  local mode=$1 node=$2 ns
  mkdir -p "$DIR/$node/spool" "$DIR/$node/tmp" "$NODE_TMP"
  ns=$(netns_name "$node")
  # The inner script is fixed; the node name, directory and config come in as arguments.
  # shellcheck disable=SC2016 # expanded by the inner sh
  local inner='node=$1 dir=$2 conf=$3 tmp=$4
hostname "$node"
mount --bind "$dir/hosts" /etc/hosts
mount --bind "$dir/$node/tmp" "$tmp"
exec slurmd -f "$conf" -N "$node"'
  if [[ $mode == netns ]]; then
    nsenter --net="/run/netns/$ns" unshare --uts --mount sh -c "$inner" sh "$node" "$DIR" "$CONF" \
      "$NODE_TMP"
  elif unshare --uts --mount true 2>/dev/null; then
    unshare --uts --mount sh -c "$inner" sh "$node" "$DIR" "$CONF" "$NODE_TMP"
  else
    slurmd -f "$CONF" -N "$node"
  fi
}

wait_idle() {
  local deadline=$((SECONDS + TIMEOUT_S)) idle=0 out=""
  while ((SECONDS < deadline)); do
    out=$(sinfo -h -N -p debug -o '%N %t' 2>&1 || true)
    idle=$(grep -cE '^node[12] idle$' <<<"$out" || true)
    ((idle == 2)) && return 0
    sleep 1
  done
  echo "local_cluster: error: the nodes are not idle after ${TIMEOUT_S} s; sinfo says:" >&2
  echo "$out" >&2
  sinfo -h -R 2>&1 | sed 's/^/  reason: /' >&2 || true
  show_logs
  exit 1
}

usage() {
  cat <<EOF

The local Slurm cluster is up ($1 mode): partition debug with node1 and node2 (2 fake GPUs each).
Use it from this shell with:

  export SLURM_CONF=$CONF
  sinfo
  dlcalibrate slurm --nodes 2 --partition debug --time 00:05:00 --output-dir /tmp/calib \\
      --cpu-args "--ops copy,triad -b 64KiB -e 1MiB" --submit --wait
  dlcalibrate collect JOBID --dir /tmp/calib -o merged.jsonl

Logs: $DIR/log/. Stop it with: $0 stop
EOF
}

start_cluster() {
  need_root
  install_packages
  if pid_alive "$DIR/slurmctld.pid" && sinfo -h -p debug >/dev/null 2>&1; then
    say "already running (state in $DIR)"
    wait_idle
    usage "$(cat "$DIR/mode")"
    return 0
  fi
  stop_cluster # whatever a failed start left
  mkdir -p "$DIR"
  chmod 700 "$DIR"
  local mode=netns
  if ! make_network; then
    mode=ports
    ip link delete "$BRIDGE" 2>/dev/null || true
    for node in "${NODES[@]}"; do ip netns delete "$(netns_name "$node")" 2>/dev/null || true; done
    cat >&2 <<EOF
local_cluster: ************************************************************************
local_cluster: WARNING: network namespaces cannot be made here (ip netns add failed).
local_cluster: FALLING BACK: both slurmd run on the host, on ports $SLURMD_PORT and $((SLURMD_PORT + 1)).
local_cluster: ************************************************************************
EOF
  fi
  echo "$mode" >"$DIR/mode"
  write_config "$mode"
  start_munge
  slurmctld -f "$CONF" -i || {
    show_logs
    die "slurmctld did not start"
  }
  for node in "${NODES[@]}"; do
    start_slurmd "$mode" "$node" || {
      show_logs
      die "slurmd $node did not start"
    }
  done
  wait_idle
  sinfo -N -p debug
  usage "$mode"
}

case ${1:-start} in
  start) start_cluster ;;
  stop)
    need_root
    stop_cluster
    say "stopped; $DIR removed"
    ;;
  status)
    sinfo -N
    squeue
    ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  shape)
    need_root
    [[ $# -eq 2 ]] || die "shape needs a rate ($SHAPING_RATES)"
    [[ $(cat "$DIR/mode" 2>/dev/null) == netns ]] ||
      die "the cluster is not running with network namespaces: nothing to shape"
    shape_nodes "$2"
    say "links of ${NODES[*]} shaped: $2"
    ;;
  *) die "unknown command '$1' (start, stop, status, env or shape)" ;;
esac
