#!/usr/bin/env bash
# tools/frontier_cells.sh: save, then restore into an empty runs/, gives back
# every finished cell's result.json and the checkpoint of a cell in progress
# byte for byte (kept gzip-compressed in between); a checkpoint over 2 MB
# compressed is named and not kept; a partial goes once its cell finished;
# the run's config.json is kept and restored where the run has none.
# Usage: frontier_cells_test.sh path/to/tools/frontier_cells.sh
set -euo pipefail
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMEM_RUNS=$tmp/runs TMEM_FRONTIER_KEPT=$tmp/kept
runs=$TMEM_RUNS/fr kept=$TMEM_FRONTIER_KEPT/fr
mkdir -p "$runs/done" "$runs/going" "$runs/big"
echo '{"eval_accuracy": 0.5}' > "$runs/done/result.json"
# 1.5 MB of random bytes and 1 MB of zeros: 2.5 MB, under 2 MB compressed.
{ head -c 1500000 /dev/urandom; head -c 1000000 /dev/zero; } > "$runs/going/checkpoint.safetensors"
head -c 2100000 /dev/urandom > "$runs/big/checkpoint.safetensors"
cp "$runs/going/checkpoint.safetensors" "$tmp/going.orig"
echo '{"command": "frontier mqar", "config": {"cell": {"batch": 64}}}' > "$runs/config.json"

out=$(bash "$script" save fr)
echo "$out"
grep -q "not keeping big's checkpoint" <<< "$out"
grep -q "saved 1 new or changed cells and 1 checkpoints" <<< "$out"
[[ -f $kept/done.json && -f $kept/partial/going.safetensors.gz && ! -e $kept/partial/big.safetensors.gz ]]
# Saving again changes nothing.
grep -q "saved 0 new or changed cells and 0 checkpoints" <<< "$(bash "$script" save fr)"

rm -rf "$TMEM_RUNS"
out=$(bash "$script" restore fr)
echo "$out"
grep -q "restored 1 cells and 1 checkpoints" <<< "$out"
cmp "$runs/done/result.json" "$kept/done.json"
cmp "$runs/going/checkpoint.safetensors" "$tmp/going.orig"
cmp "$runs/config.json" "$kept/run/config.json"
[[ ! -e $runs/big ]]

# A partial that cannot be read back is named and skipped; the rest restore.
echo "not gzip" > "$kept/partial/torn.safetensors.gz"
rm -rf "$TMEM_RUNS"
out=$(bash "$script" restore fr 2>&1)
echo "$out"
grep -q "torn.safetensors.gz cannot be read back: torn starts from step 0" <<< "$out"
grep -q "restored 1 cells and 1 checkpoints" <<< "$out"
[[ ! -e $runs/torn ]]
cmp "$runs/going/checkpoint.safetensors" "$tmp/going.orig"
rm "$kept/partial/torn.safetensors.gz"

# A torn result.json is not kept over a good one; a bad NAME is refused.
mkdir -p "$runs/torn"
printf '{"eval_acc' > "$runs/torn/result.json"
grep -q "is not valid JSON: not kept" <<< "$(bash "$script" save fr 2>&1)"
[[ ! -e $kept/torn.json ]]
rm -r "$runs/torn"
for bad in "" . .. a/b; do
  if bash "$script" save "$bad" 2> /dev/null; then echo "NAME '$bad' was accepted"; exit 1; fi
done

echo '{"eval_accuracy": 0.7}' > "$runs/going/result.json"
bash "$script" save fr
[[ -f $kept/going.json && ! -e $kept/partial/going.safetensors.gz ]]
echo "frontier_cells: save and restore round trip ok"
