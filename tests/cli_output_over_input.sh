#!/usr/bin/env bash
# An output that is one of the command's own inputs (by the same name, another path to it, or a
# symbolic link) is refused with one line, exit 2, and the input stays as it was: writing it
# would replace what was read. Also: nested-too-deep XML is refused, not a crash.
# Usage: cli_output_over_input.sh DLSIM DLCALIBRATE DLVALIDATE SOURCE_DIR
set -u
dlsim=$1 dlcal=$2 dlval=$3 src=$4
fx=$src/tests/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0

# same_file "substring" INPUT_COPY program args...: INPUT_COPY must be unchanged afterwards.
same_file() {
  local want=$1 input=$2
  shift 2
  cp "$input" "$tmp/before"
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" ||
     ! cmp -s "$tmp/before" "$input"; then
    echo "FAIL: ${*##*/} (exit $rc, input $(cmp -s "$tmp/before" "$input" && echo kept || echo CHANGED))"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}

cd "$tmp" || exit 1
cp "$fx/calibrate/nccl_tests_allreduce_2x4.txt" n.txt
ln -s n.txt link.txt
same_file "n.txt: is also an input of this command" n.txt "$dlcal" import nccl-tests n.txt -o n.txt
same_file "link.txt: is the input n.txt" n.txt "$dlcal" import nccl-tests n.txt -o link.txt
same_file "./n.txt: is the input n.txt" n.txt "$dlcal" import nccl-tests n.txt -o ./n.txt
cp "$fx/calibrate/osu_allreduce.txt" o.txt
same_file "o.txt: is also an input" o.txt "$dlcal" import osu o.txt -o o.txt
cp "$fx/calibrate/nccl_topo_dgx1.xml" topo.yaml
same_file "topo.yaml: is also an input" topo.yaml "$dlcal" import nccl-topo topo.yaml -o topo.yaml
cp "$fx/calibrate/results_one_allreduce.jsonl" r.jsonl
same_file "r.jsonl: is also an input" r.jsonl "$dlcal" show r.jsonl -o r.jsonl
cp r.jsonl r.yaml
same_file "r.yaml: is also an input" r.yaml "$dlcal" fit r.yaml -o r.yaml
cp "$fx/validate/logs/tf_cnn_benchmarks_1gpu.log" t.log
same_file "t.log: is also an input" t.log "$dlval" import t.log -o t.log
cp "$fx/validate/logs/timeline_closed.json" tl.json
same_file "tl.json: is also an input" tl.json "$dlval" timeline tl.json -o tl.json
same_file "tl.json: is also an input" tl.json "$dlval" timeline tl.json --json tl.json
cp "$src/tests/hardware/fat-tree-40.yaml" fat-tree-40.yaml
same_file "fat-tree-40.yaml: is also an input" fat-tree-40.yaml "$dlsim" predict --model resnet50 --gpus 8 --cluster fat-tree-40.yaml -o fat-tree-40.yaml
same_file "fat-tree-40.yaml: is also an input" fat-tree-40.yaml "$dlsim" compare --model resnet50 --gpus 16 --cluster fat-tree-40.yaml -o fat-tree-40.yaml
same_file "fat-tree-40.yaml: is also an input" fat-tree-40.yaml "$dlsim" hardware show fat-tree-40.yaml -o fat-tree-40.yaml

# A results file of a Slurm job's node is an input of collect, not a place for its merge.
mkdir -p cr/300
cp "$fx/calibrate/results_one_allreduce.jsonl" cr/300/cpu-node1.jsonl
same_file "is a node's results file of the job" cr/300/cpu-node1.jsonl \
  "$dlcal" collect 300 --dir cr -o cr/300/cpu-node1.jsonl

# XML nested far deeper than any topology dump: one line, no output.
python3 -c "print('<system version=\"1\">' + '<pci busid=\"0\">' * 30000 + '</pci>' * 30000 + '</system>')" >deep.xml
"$dlcal" import nccl-topo deep.xml -o deep.yaml >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
checked=$((checked + 1))
if [ "$rc" -ne 2 ] || ! grep -qF "deep.xml:1: elements nested more than 64 deep" "$tmp/stderr" ||
   [ -e deep.yaml ]; then
  echo "FAIL: import nccl-topo deep.xml (exit $rc)"
  sed 's/^/  got:    /' "$tmp/stderr"
  failures=$((failures + 1))
fi

echo "$checked outputs over inputs checked, $failures failed"
[ "$failures" -eq 0 ]
