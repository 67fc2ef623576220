#!/usr/bin/env bash
# tools/gpu_frontier.sh on the CPU (DEVICE=cpu, 3-step cells): `run` starts
# every lane, stops them after a few seconds and packs the cells they
# finished; `import` adds them to another runs/ and keeps them, keeps a cell
# finished there, and takes a checkpoint only when it is further along.
# Usage: gpu_frontier_test.sh path/to/tools/gpu_frontier.sh path/to/tmem
set -euo pipefail
script=$1
export TMEM=$2 DEVICE=cpu EXTRA_ARGS="--steps 3 --batch 2 --eval-batches 1 --checkpoint-every 1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMEM_RUNS=$tmp/gpu/runs TMEM_FRONTIER_KEPT=$tmp/kept-empty
mkdir -p "$TMEM_RUNS"

bash "$script" run 15 "$tmp/out" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
grep -q "gpu_frontier: 12 lanes for 15 s on cpu" "$tmp/run.log"
grep -q "\[frontier-map-recall-fb3 tensor --memory-forget-bias 3 --lr 1e-3\] tmem frontier map-recall" "$tmp/run.log"
[[ -f $tmp/out/frontier-cells.tgz && -f $tmp/out/gpu_frontier.log ]]
listing=$(tar -tzf "$tmp/out/frontier-cells.tgz")
finished=$(grep -c result.json <<< "$listing" || true)
(( finished > 0 )) || { echo "no cell finished in 15 s"; cat "$tmp/run.log"; exit 1; }
first=$(grep -m1 result.json <<< "$listing")

# Import into another runs/: every finished cell arrives and is kept.
export TMEM_RUNS=$tmp/here/runs TMEM_FRONTIER_KEPT=$tmp/kept
mkdir -p "$TMEM_RUNS"
# A checkpoint there at step 5 replaces one here at step 2 and not one at step 7.
mk_ckpt() {  # mk_ckpt FILE STEP: a safetensors file with only a header
  mkdir -p "$(dirname "$1")"
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
h = json.dumps({"__metadata__": {"step": sys.argv[2]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
}
mkdir -p "$tmp/ck"
mk_ckpt "$tmp/ck/frontier-mqar/behind/checkpoint.safetensors" 5
mk_ckpt "$tmp/ck/frontier-mqar/ahead/checkpoint.safetensors" 5
mk_ckpt "$TMEM_RUNS/frontier-mqar/behind/checkpoint.safetensors" 2
mk_ckpt "$TMEM_RUNS/frontier-mqar/ahead/checkpoint.safetensors" 7
rm -f "$tmp/out"/frontier-ckpt.tgz.*
tar -czf - -C "$tmp/ck" frontier-mqar | split -b 100 -d -a 2 - "$tmp/out/frontier-ckpt.tgz."

bash "$script" import "$tmp/out" > "$tmp/import.log" 2>&1 || { cat "$tmp/import.log"; exit 1; }
cat "$tmp/import.log"
[[ $(grep -c ": finished (" "$tmp/import.log") -eq $finished ]]
cmp <(tar -xzOf "$tmp/out/frontier-cells.tgz" "$first") "$TMEM_RUNS/$first"
run=${first%%/*} cell=${first#*/} cell=${cell%%/*}
cmp "$TMEM_RUNS/$first" "$TMEM_FRONTIER_KEPT/$run/$cell.json"
grep -q "frontier-mqar/behind: in progress, step 5 (here: 2)" "$tmp/import.log"
grep -q "frontier-mqar/ahead: in progress, step 5; kept this machine's step 7" "$tmp/import.log"
cmp "$TMEM_RUNS/frontier-mqar/behind/checkpoint.safetensors" "$tmp/ck/frontier-mqar/behind/checkpoint.safetensors"
! cmp -s "$TMEM_RUNS/frontier-mqar/ahead/checkpoint.safetensors" "$tmp/ck/frontier-mqar/ahead/checkpoint.safetensors"

# Again: every cell is finished here now, so each is kept as it is.
bash "$script" import "$tmp/out" > "$tmp/again.log" 2>&1
[[ $(grep -c "finished here too: kept this machine's" "$tmp/again.log") -eq $finished ]]
echo "gpu_frontier_test: passed ($finished cells)"
