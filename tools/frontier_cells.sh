#!/usr/bin/env bash
# Keeps the finished cells of `tmem frontier` runs across machines: runs/ is
# not versioned, so each finished cell's result.json (a few kB: config,
# accuracies, curve) is saved under docs/frontier/<name>/ and restored from
# there before `tmem frontier ... --resume`, which then reuses it. A cell
# still training keeps its latest checkpoint, gzip-compressed, under
# docs/frontier/<name>/partial/<cell>.safetensors.gz when that is at most
# 2 MB (the repository's limit for a file), so that a fresh machine's
# --resume continues it instead of starting it again; a larger one is named
# and not kept (that cell starts again on a fresh machine). A partial is
# dropped once its cell has finished; one that grows past the limit leaves
# the earlier kept one in place. A result.json that is not valid JSON is not
# kept, and a partial that cannot be read back is named and skipped. The
# run's config.json (the options its cells were trained with, which
# `tmem frontier --with` reads) is kept as run/config.json and restored
# where the run has none.
# TMEM_RUNS and TMEM_FRONTIER_KEPT replace runs/ and docs/frontier/ (paths
# from the repository's root; the test uses them).
# Usage: tools/frontier_cells.sh save|restore NAME   (e.g. frontier-mqar)
set -euo pipefail
cd "$(dirname "$0")/.."
max_partial=2000000  # bytes

if [[ $# -ne 2 || ( "$1" != save && "$1" != restore ) ]]; then
  echo "usage: $0 save|restore NAME" >&2
  exit 2
fi
name=$2
if [[ -z $name || $name == . || $name == .. || $name == */* ]]; then
  echo "frontier_cells: NAME must be a run name (a folder of runs/), but got '$name'" >&2
  exit 2
fi
runs=${TMEM_RUNS:-runs}/$name
kept=${TMEM_FRONTIER_KEPT:-docs/frontier}/$name

case $1 in
  save)
    [[ -d $runs ]] || { echo "frontier_cells: no $runs to save" >&2; exit 1; }
    mkdir -p "$kept"
    n=0
    for f in "$runs"/*/result.json; do
      [[ -e $f ]] || continue
      cell=$(basename "$(dirname "$f")")
      if ! /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" 2> /dev/null; then
        echo "frontier_cells: $f is not valid JSON: not kept" >&2
        continue
      fi
      if ! cmp -s "$f" "$kept/$cell.json"; then
        cp "$f" "$kept/$cell.json.tmp" && mv "$kept/$cell.json.tmp" "$kept/$cell.json"
        n=$((n + 1))
      fi
    done
    p=0
    for f in "$runs"/*/checkpoint.safetensors; do
      [[ -e $f ]] || continue
      cell=$(basename "$(dirname "$f")")
      [[ -e $runs/$cell/result.json ]] && continue
      mkdir -p "$kept/partial"
      gz=$kept/partial/$cell.safetensors.gz
      gzip -n -c "$f" > "$gz.tmp"
      if (( $(stat -c %s "$gz.tmp") > max_partial )); then
        if [[ -e $gz ]]; then
          echo "frontier_cells: not keeping $cell's checkpoint ($(stat -c %s "$gz.tmp") bytes compressed > $max_partial): the earlier kept one stays"
        else
          echo "frontier_cells: not keeping $cell's checkpoint ($(stat -c %s "$gz.tmp") bytes compressed > $max_partial): it restarts on a fresh machine"
        fi
        rm -f "$gz.tmp"
      elif cmp -s "$gz.tmp" "$gz"; then
        rm "$gz.tmp"
      else
        gzip -t "$gz.tmp" && mv "$gz.tmp" "$gz"
        p=$((p + 1))
      fi
      rm -f "$kept/partial/$cell.safetensors"  # kept uncompressed by an earlier version
    done
    for f in "$kept"/partial/*.safetensors "$kept"/partial/*.safetensors.gz; do
      [[ -e $f ]] || continue
      cell=$(basename "$(basename "$f" .gz)" .safetensors)
      [[ -e $kept/$cell.json ]] && rm "$f"
    done
    if [[ -e $runs/config.json ]] && ! cmp -s "$runs/config.json" "$kept/run/config.json"; then
      if /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$runs/config.json" 2> /dev/null; then
        mkdir -p "$kept/run"
        cp "$runs/config.json" "$kept/run/config.json.tmp" && mv "$kept/run/config.json.tmp" "$kept/run/config.json"
      else
        echo "frontier_cells: $runs/config.json is not valid JSON: not kept" >&2
      fi
    fi
    echo "frontier_cells: saved $n new or changed cells and $p checkpoints of cells in progress to $kept"
    ;;
  restore)
    [[ -d $kept ]] || { echo "frontier_cells: nothing kept in $kept"; exit 0; }
    n=0
    for f in "$kept"/*.json; do
      [[ -e $f ]] || continue
      cell=$(basename "$f" .json)
      if [[ ! -e $runs/$cell/result.json ]]; then
        mkdir -p "$runs/$cell"
        cp "$f" "$runs/$cell/result.json"
        n=$((n + 1))
      fi
    done
    p=0
    for f in "$kept"/partial/*.safetensors "$kept"/partial/*.safetensors.gz; do
      [[ -e $f ]] || continue
      cell=$(basename "$(basename "$f" .gz)" .safetensors)
      if [[ ! -e $runs/$cell/checkpoint.safetensors && ! -e $runs/$cell/result.json ]]; then
        mkdir -p "$runs/$cell"
        tmp=$runs/$cell/checkpoint.safetensors.tmp
        if { [[ $f == *.gz ]] && gzip -d -c "$f" > "$tmp"; } || { [[ $f != *.gz ]] && cp "$f" "$tmp"; }; then
          mv "$tmp" "$runs/$cell/checkpoint.safetensors"
          p=$((p + 1))
        else
          echo "frontier_cells: $f cannot be read back: $cell starts from step 0" >&2
          rm -f "$tmp"
          rmdir --ignore-fail-on-non-empty "$runs/$cell"
        fi
      fi
    done
    if [[ -e $kept/run/config.json && ! -e $runs/config.json ]]; then
      mkdir -p "$runs"
      cp "$kept/run/config.json" "$runs/config.json.tmp" && mv "$runs/config.json.tmp" "$runs/config.json"
    fi
    echo "frontier_cells: restored $n cells and $p checkpoints of cells in progress from $kept to $runs"
    ;;
esac
