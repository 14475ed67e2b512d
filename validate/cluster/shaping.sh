# shellcheck shell=bash
# How an emulated node's link is shaped (docs/emulated-cluster.md has the measurements behind
# the parameters). Sourced by validate/cluster/emulated_cluster.sh (MPI nodes) and
# tests/slurm/local_cluster.sh (Slurm nodes); each node is a network namespace whose eth0 is one
# end of a veth pair, the other end on a bridge.
#
# The four parameters scale with the rate. At 1 Gbit/s:
# - TCP segments of at most 16 KiB (gso_max_size of the node's eth0, 131 us at the rate): tbf
#   sends whole segments, and a 64 KiB one (the default) holds a small message back 0.5 ms;
# - at most 32 KiB of each socket's data waiting in the qdisc (tcp_limit_output_bytes in the node,
#   4 MiB by default): TCP then stops before tbf's queue is full instead of losing packets in it,
#   so a saturated link delays a small message by a few hundred microseconds, not the whole queue;
# - a bucket of 256 KiB (2 ms at the rate): the qdisc runs late when the CPU is busy (2 cores, other
#   work) and a small bucket loses that time for good. With 64 KiB one TCP stream got 0.44-0.83
#   Gbit/s on this machine; with 128 KiB MPI got 0.87 of the rate at a load average of 4-5, and
#   0.94 with 256 KiB;
# - a queue of 256 KiB (2 ms): only several sockets together (btl_tcp_links) or several senders to
#   one node reach it.
# Segments stay at most 64 KiB (the kernel's largest GSO size without BIG TCP) at any rate.
# DLSIM_EMU_GSO, DLSIM_EMU_TSQ, DLSIM_EMU_BURST and DLSIM_EMU_LIMIT (bytes) replace them.

# shellcheck disable=SC2034 # read by the scripts that source this file
SHAPING_RATES="1gbit, 2gbit, 4gbit, 10gbit or none"

# The rate in bit/s, or non-zero for a rate this file does not know.
shaping_rate_bps() {
  case $1 in
    1gbit) echo 1000000000 ;;
    2gbit) echo 2000000000 ;;
    4gbit) echo 4000000000 ;;
    10gbit) echo 10000000000 ;;
    *) return 1 ;;
  esac
}

# Sets SHAPE_GSO, SHAPE_TSQ, SHAPE_BURST and SHAPE_LIMIT for rate $1.
shaping() {
  local bps scale gso
  bps=$(shaping_rate_bps "$1") || return 1
  scale=$((bps / 1000000000))
  gso=$((16384 * scale))
  ((gso <= 65536)) || gso=65536
  SHAPE_GSO=${DLSIM_EMU_GSO:-$gso}
  SHAPE_TSQ=${DLSIM_EMU_TSQ:-$((32768 * scale))}
  SHAPE_BURST=${DLSIM_EMU_BURST:-$((262144 * scale))}
  SHAPE_LIMIT=${DLSIM_EMU_LIMIT:-$((262144 * scale))}
}

# shape_link NETNS HOST_VETH RATE: tbf at RATE in both directions of the node's link (node ->
# bridge on the node's eth0, bridge -> node on the host's end), replacing any earlier shaping;
# RATE none removes it.
shape_link() {
  local ns=$1 veth=$2 rate=$3
  if [[ $rate == none ]]; then
    tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
    tc qdisc del dev "$veth" root 2>/dev/null || true
    ip -n "$ns" link set dev eth0 gso_max_size 65536
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_limit_output_bytes=4194304 # the kernel default
    return 0
  fi
  shaping "$rate" || return 1
  local tbf=(rate "$rate" burst "$SHAPE_BURST" limit "$SHAPE_LIMIT")
  ip -n "$ns" link set dev eth0 gso_max_size "$SHAPE_GSO"
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_limit_output_bytes="$SHAPE_TSQ"
  tc -n "$ns" qdisc replace dev eth0 root tbf "${tbf[@]}" # node -> bridge
  tc qdisc replace dev "$veth" root tbf "${tbf[@]}"       # bridge -> node
}
