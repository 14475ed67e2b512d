#!/bin/bash
# An emulated multi-node cluster on this one machine, for MPI runs over shaped links: the SLICES
# Virtual Wall experiment (nodes on 1 Gbit/s Ethernet against faster links) in miniature
# (docs/emulated-cluster.md). Run as root:
#
#   emulated_cluster.sh up --nodes N [--rate 1gbit|2gbit|4gbit|10gbit|none] [--dir D]
#       N network namespaces dlsim-emu-1..N (host names emu1..emuN), each with a veth pair whose
#       host end is on the bridge dlsim-emu-br (10.78.0.1); node i is 10.78.0.(i+1)/24. Each link
#       is shaped with tbf at the rate in both directions. Writes the state directory D
#       (default /tmp/dlsim-emu): hostfile, rankfile, the rsh agent for Open MPI, env.
#   emulated_cluster.sh mpirun [--dir D] [mpirun args...] -- PROGRAM ARGS...
#       Open MPI's mpirun with one rank per node, each inside its node's namespace, over TCP only
#       (no shared memory between nodes), each rank pinned to its own core.
#   emulated_cluster.sh status [--dir D]    nodes, addresses and qdiscs
#   emulated_cluster.sh down [--dir D]      removes namespaces, bridge, qdiscs and D (idempotent)
#
# Bad input (unknown command or rate, N < 1, not root, no network namespaces): one line on stderr
# and exit code 2. For measurements, DLSIM_EMU_GSO, DLSIM_EMU_TSQ, DLSIM_EMU_BURST and
# DLSIM_EMU_LIMIT (bytes) replace the shaping parameters of validate/cluster/shaping.sh.
set -euo pipefail

PREFIX=dlsim-emu
BRIDGE=$PREFIX-br
SUBNET=10.78.0.0/24 # tests/slurm/local_cluster.sh has 10.77.0.0/24 on dlsim-br0
HOST_ADDR=10.78.0.1
MAX_NODES=200
DEFAULT_DIR=/tmp/dlsim-emu
PROG=${0##*/}

say() { echo "$PROG: $*"; }
usage_error() {
  echo "$PROG: error: $*" >&2
  exit 2
}
die() {
  echo "$PROG: error: $*" >&2
  exit 1
}

netns_of() { echo "$PREFIX-$1"; }  # node index -> namespace
host_of() { echo "emu$1"; }        # node index -> host name
veth_of() { echo "$PREFIX-v$1"; }  # node index -> host end of its veth pair
addr_of() { echo "10.78.0.$(($1 + 1))"; }

# shaping_rate_bps, shaping and shape_link: how a node's link is shaped.
# shellcheck source=validate/cluster/shaping.sh
source "$(dirname "$(realpath "$0")")/shaping.sh"

rate_bps() { shaping_rate_bps "$1" || usage_error "unknown rate '$1' ($SHAPING_RATES)"; }

need_root() { [[ $(id -u) -eq 0 ]] || usage_error "run as root (it makes network namespaces)"; }

need_netns() {
  command -v ip >/dev/null || usage_error "'ip' (iproute2) is not installed"
  command -v tc >/dev/null || usage_error "'tc' (iproute2) is not installed"
  ip netns add "$PREFIX-probe" 2>/dev/null ||
    usage_error "network namespaces are not available here (ip netns add failed)"
  ip netns delete "$PREFIX-probe"
}

# Everything named $PREFIX-*, whether or not a state directory says so (a failed up leaves no
# state directory). Processes still in a namespace are killed with it.
teardown() {
  local dir=$1 ns pid link
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
    grep "^$PREFIX-v[0-9]*$" || true); do
    ip link delete "$link" 2>/dev/null || true
  done
  ip link delete "$BRIDGE" 2>/dev/null || true
  # Only a directory this script wrote (it has the marker), never an arbitrary --dir.
  if [[ -f $dir/.dlsim-emu ]]; then rm -rf "$dir"; fi
}

make_network() {
  local nodes=$1 rate=$2 i ns veth
  ip link add "$BRIDGE" type bridge
  ip addr add "$HOST_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 1; i <= nodes; i++)); do
    ns=$(netns_of "$i")
    veth=$(veth_of "$i")
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    [[ $rate == none ]] || shape_link "$ns" "$veth" "$rate"
  done
}

write_state() {
  local dir=$1 nodes=$2 rate=$3 i cores slot
  cores=$(nproc)
  mkdir -p "$dir"
  touch "$dir/.dlsim-emu"
  : >"$dir/hostfile"
  : >"$dir/rankfile"
  for ((i = 1; i <= nodes; i++)); do
    echo "$(host_of "$i") slots=1" >>"$dir/hostfile"
    # Node i's rank on core (i-1) mod cores: every "node" sees the whole machine, so Open MPI's own
    # binding would put every node's first rank on core 0.
    slot=$(((i - 1) % cores))
    echo "rank $((i - 1))=$(host_of "$i") slot=$slot" >>"$dir/rankfile"
  done
  # Open MPI's rsh agent: "AGENT HOST COMMAND..." where COMMAND is for a remote shell. It runs in
  # the node's network namespace and in a UTS namespace of its own, whose host name is the node's
  # (MPI_Get_processor_name, Open MPI's session directories). The node name decides the namespace,
  # so only names from this hostfile are accepted.
  cat >"$dir/rsh" <<EOF
#!/bin/bash
set -euo pipefail
host=\$1
shift
[[ \$host =~ ^emu([0-9]+)\$ ]] || { echo "dlsim-emu rsh: unknown node '\$host'" >&2; exit 2; }
exec ip netns exec "$PREFIX-\${BASH_REMATCH[1]}" unshare --uts sh -c 'hostname "\$0"; eval "\$1"' "\$host" "\$*"
EOF
  chmod 755 "$dir/rsh"
  local yield=0
  ((nodes <= cores)) || yield=1
  cat >"$dir/env" <<EOF
# Written by $PROG up: source it to run Open MPI on the emulated cluster directly, e.g.
#   . $dir/env && mpirun -np $nodes --rankfile $dir/rankfile PROGRAM
DLSIM_EMU_DIR=$dir
DLSIM_EMU_NODES=$nodes
DLSIM_EMU_RATE=$rate
DLSIM_EMU_SUBNET=$SUBNET
DLSIM_EMU_CORES=$cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$dir/rsh
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_orte_default_hostfile=$dir/hostfile
export OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=$SUBNET
export OMPI_MCA_oob_tcp_if_include=$SUBNET
export OMPI_MCA_btl_tcp_links=4
export OMPI_MCA_btl_tcp_rdma_pipeline_frag_size=1048576
export OMPI_MCA_mpi_yield_when_idle=$yield
EOF
  echo "$nodes" >"$dir/nodes"
  echo "$rate" >"$dir/rate"
}

cmd_up() {
  local nodes="" rate=1gbit dir=$DEFAULT_DIR
  while (($#)); do
    case $1 in
      --nodes | --rate | --dir)
        (($# >= 2)) || usage_error "$1 needs a value"
        case $1 in
          --nodes) nodes=$2 ;;
          --rate) rate=$2 ;;
          --dir) dir=$2 ;;
        esac
        shift 2
        ;;
      *) usage_error "unknown option '$1' for up (--nodes N, --rate R, --dir D)" ;;
    esac
  done
  [[ -n $nodes ]] || usage_error "up needs --nodes N"
  [[ $nodes =~ ^[0-9]+$ ]] || usage_error "--nodes must be a whole number, got '$nodes'"
  ((nodes >= 1 && nodes <= MAX_NODES)) ||
    usage_error "--nodes must be from 1 to $MAX_NODES, got $nodes"
  [[ $rate == none ]] || rate_bps "$rate" >/dev/null
  [[ -n $dir && $dir != / ]] || usage_error "--dir must name a directory"
  if [[ -e $dir && ! -f $dir/.dlsim-emu ]] && [[ -n $(ls -A "$dir" 2>/dev/null) ]]; then
    usage_error "--dir $dir exists and was not written by $PROG"
  fi
  need_root
  need_netns
  teardown "$dir"
  # A command that fails half way (ip, tc) takes down what was made, with one line after its own.
  set -E
  trap 'teardown "$dir"; die "the cluster could not be built (see the error above)"' ERR
  make_network "$nodes" "$rate"
  write_state "$dir" "$nodes" "$rate"
  trap - ERR
  set +E
  say "$nodes node(s) up at rate $rate; state in $dir"
  if ((nodes > $(nproc))); then
    say "note: $nodes nodes on $(nproc) cores: ranks share cores (oversubscribed; they yield when idle)"
  fi
}

load_state() {
  local dir=$1
  [[ -f $dir/env && -f $dir/.dlsim-emu ]] ||
    usage_error "no emulated cluster in $dir (run: $PROG up --nodes N)"
  # shellcheck disable=SC1091
  . "$dir/env"
}

cmd_mpirun() {
  local dir=$DEFAULT_DIR args=() seen_sep=0
  if [[ ${1-} == --dir ]]; then
    dir=${2-}
    shift 2 || usage_error "--dir needs a directory"
  fi
  while (($#)); do
    if [[ $1 == -- ]]; then
      seen_sep=1
      shift
      break
    fi
    args+=("$1")
    shift
  done
  ((seen_sep && $# > 0)) || usage_error "mpirun needs '-- PROGRAM [ARGS...]'"
  need_root
  load_state "$dir"
  command -v mpirun >/dev/null || usage_error "mpirun (Open MPI) is not installed"
  local cmd=(mpirun -np "$DLSIM_EMU_NODES" --rankfile "$dir/rankfile" --report-bindings
    "${args[@]}" "$@")
  if ((DLSIM_EMU_NODES > DLSIM_EMU_CORES)); then
    say "note: $DLSIM_EMU_NODES ranks on $DLSIM_EMU_CORES cores: oversubscribed (mpi_yield_when_idle=1)" >&2
  fi
  say "$(grep '^export OMPI_MCA' "$dir/env" | sed 's/^export //' | tr '\n' ' ')${cmd[*]}" >&2
  exec "${cmd[@]}"
}

cmd_status() {
  local dir=$DEFAULT_DIR ns i
  if [[ ${1-} == --dir ]]; then dir=${2-}; fi
  need_root
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    say "down (no bridge $BRIDGE)"
    return 0
  fi
  say "bridge $BRIDGE: $(ip -o -4 addr show dev "$BRIDGE" | awk '{print $4}')"
  [[ -f $dir/env ]] && say "state: $dir ($(cat "$dir/nodes") nodes, rate $(cat "$dir/rate"))"
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-[0-9]*$" | sort -t- -k3 -n); do
    i=${ns##*-}
    echo "node $(host_of "$i")  netns $ns  $(ip -n "$ns" -o -4 addr show dev eth0 | awk '{print $4}')" \
      " gso_max_size $(ip -n "$ns" -d link show dev eth0 | grep -o 'gso_max_size [0-9]*' | cut -d' ' -f2)" \
      " tcp_limit_output_bytes $(ip netns exec "$ns" sysctl -n net.ipv4.tcp_limit_output_bytes)"
    echo "  node end  eth0:          $(tc -n "$ns" qdisc show dev eth0 | head -n 1)"
    echo "  host end  $(veth_of "$i"): $(tc qdisc show dev "$(veth_of "$i")" | head -n 1)"
  done
}

cmd_down() {
  local dir=$DEFAULT_DIR
  if [[ ${1-} == --dir ]]; then
    dir=${2-}
    [[ -n $dir ]] || usage_error "--dir needs a directory"
  fi
  need_root
  teardown "$dir"
  say "down; $dir removed"
}

command=${1-}
(($#)) && shift
case $command in
  up) cmd_up "$@" ;;
  mpirun) cmd_mpirun "$@" ;;
  status) cmd_status "$@" ;;
  down) cmd_down "$@" ;;
  "") usage_error "a command is needed: up, mpirun, status or down" ;;
  *) usage_error "unknown command '$command' (up, mpirun, status or down)" ;;
esac
