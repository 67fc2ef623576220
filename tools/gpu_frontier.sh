#!/usr/bin/env bash
# Frontier lanes on a lent GPU (issue 22): one GPU session's minutes train
# cells that would take the CPU lanes (tools/frontier_lanes.sh) hours. Every
# lane of the table below runs at once, one process each, as `tmem frontier
# ... --device cuda --threads 1 --resume`; a cell's device is recorded in its
# result.json, and a cell finished or checkpointed there is reused or
# continued on the CPU.
#
#   PREBUILT=.gpu/bundle.tgz bash tools/gpu_frontier.sh run SECONDS [OUT_DIR]   # on the GPU machine
#   bash tools/gpu_frontier.sh import DIR                                        # here, lanes stopped
#
# run: runs the CUDA parity tests (tests/cuda_tests.cpp: no lane runs on
# kernels that do not match the CPU's), restores the kept cells
# (tools/frontier_cells.sh restore), starts the
# lanes, sends them SIGINT after SECONDS (each saves its checkpoint and
# exits; SIGKILL 60 s later), then packs what they made into OUT_DIR
# (default $OUT): frontier-cells.tgz, the result.json and losses.json of every
# cell finished in this run, and frontier-ckpt.tgz.NN, the checkpoints of
# the cells in progress, in parts of at most 15 MB (files come back from the
# GPU machine in pieces of at most 16 MiB, 8 at most). Lane logs go to
# OUT_DIR/gpu_frontier.log.
# import: unpacks DIR's files into runs/: a cell finished there is added
# unless one finished here already (its checkpoint here goes); a checkpoint
# from there replaces one here only when it is further along. Then
# frontier_cells.sh save keeps them in docs/frontier/. Refused while a CPU
# lane runs (tools/frontier_lanes.sh stop first).
# Environment: PREBUILT (the bundle; else TMEM, default build/tools/tmem),
# DEVICE (default cuda; cpu for a dry run), EXTRA_ARGS (more frontier
# options for every lane, e.g. the test's --steps 3), TMEM_RUNS (a folder
# named runs, default runs/) and TMEM_FRONTIER_KEPT (default docs/frontier/),
# as for frontier_cells.sh; the test uses them.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${TMEM_RUNS:-runs}

# run name | frontier arguments. One lane per method of each run, so lanes
# sharing a run take disjoint cells. The mqar runs are not here: their cells
# all come from one pinned CPU binary (tools/frontier_lanes.sh).
table=(
  "frontier-coord-recall|coord-recall --methods linear"
  "frontier-coord-recall|coord-recall --methods ssm"
  "frontier-coord-recall|coord-recall --methods xl"
  "frontier-coord-recall|coord-recall --methods rmt"
  "frontier-coord-recall|coord-recall --methods tensor"
  "frontier-map-recall|map-recall --methods linear"
  "frontier-map-recall|map-recall --methods ssm"
  "frontier-map-recall|map-recall --methods xl"
  "frontier-map-recall|map-recall --methods rmt"
  "frontier-map-recall|map-recall --methods tensor"
  "frontier-coord-recall-fb3|coord-recall --methods tensor --memory-forget-bias 3 --lr 1e-3"
  "frontier-map-recall-fb3|map-recall --methods tensor --memory-forget-bias 3 --lr 1e-3"
)
run_names() { printf '%s\n' "${table[@]}" | cut -d'|' -f1 | sort -u; }

# The step in a checkpoint's header (-1 when it cannot be read).
checkpoint_step() {
  /usr/bin/python3 - "$1" <<'PY' 2> /dev/null || echo -1
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    print(int(json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]["step"]))
PY
}

case ${1:-} in
  run)
    [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || { echo "usage: $0 run SECONDS [OUT_DIR]" >&2; exit 2; }
    seconds=$2 out=${3:-${OUT:-gpu_frontier}}
    mkdir -p "$out"
    exec 3>&1 > >(tee "$out/gpu_frontier.log") 2>&1
    tee_pid=$!
    if [[ -n ${PREBUILT:-} ]]; then
      source tools/gpu_prebuilt.sh
      unpack_prebuilt || exit 1
      tmem=$BUILD/tools/tmem
    else
      tmem=$(realpath "${TMEM:-build/tools/tmem}")
    fi
    nvidia-smi --query-gpu=name,memory.total --format=csv 2> /dev/null || true
    # Cells are trusted only from kernels that match the CPU's on this GPU.
    if [[ ${DEVICE:-cuda} != cpu ]]; then
      parity=$(mktemp)
      "$(dirname "$(dirname "$tmem")")/tests/tmem_cuda_tests" > "$parity" 2>&1 ||
        { tail -40 "$parity"; echo "gpu_frontier: the CUDA parity tests failed: no lanes run"; exit 1; }
      echo "gpu_frontier: CUDA parity tests passed ($(grep -m1 'test cases' "$parity"))"
    fi
    for name in $(run_names); do bash tools/frontier_cells.sh restore "$name"; done
    marker=$(mktemp)
    pids=()
    for row in "${table[@]}"; do
      IFS='|' read -r name args <<< "$row"
      # shellcheck disable=SC2086  # args is a word list
      (cd "$(dirname "$runs")" && OMP_WAIT_POLICY=passive exec timeout -s INT -k 60 "$seconds" "$tmem" frontier $args \
        --device "${DEVICE:-cuda}" --threads 1 --name "$name" --resume ${EXTRA_ARGS:-}) < /dev/null 2>&1 |
        sed -u "s|^|[$name ${args#* --methods }] |" &
      pids+=($!)
    done
    echo "gpu_frontier: ${#pids[@]} lanes for $seconds s on ${DEVICE:-cuda}"
    wait "${pids[@]}"
    # What this run made: cells finished, and checkpoints of cells in progress.
    list=$(mktemp) ckpts=$(mktemp)
    for name in $(run_names); do
      find "$runs/$name" -mindepth 2 -maxdepth 2 -newer "$marker" \( -name result.json -o -name losses.json \) \
        -printf "$name/%P\n" >> "$list"
      for c in "$runs/$name"/*/checkpoint.safetensors; do
        [[ -e $c && $c -nt $marker && ! -e $(dirname "$c")/result.json ]] && echo "$name/${c#"$runs/$name/"}" >> "$ckpts"
      done
    done
    tar -czf "$out/frontier-cells.tgz" -C "$runs" -T "$list"
    rm -f "$out"/frontier-ckpt.tgz.*
    if [[ -s $ckpts ]]; then
      tar -czf - -C "$runs" -T "$ckpts" | split -b 15000000 -d -a 2 - "$out/frontier-ckpt.tgz."
    fi
    echo "gpu_frontier: $(grep -c result.json "$list") cells finished, $(wc -l < "$ckpts") in progress:"
    sed 's|^|  |' "$list" "$ckpts" | grep -v losses.json
    parts=$(find "$out" -name 'frontier-ckpt.tgz.*' | wc -l)
    (( parts <= 6 )) || echo "gpu_frontier: $parts checkpoint parts: with the log and the cells, more than the 8 files that come back" >&2
    exec >&3 2>&3  # the log is whole when run returns
    wait "$tee_pid"
    ;;
  import)
    [[ $# -eq 2 && -f $2/frontier-cells.tgz ]] || { echo "usage: $0 import DIR (holding frontier-cells.tgz)" >&2; exit 2; }
    if [[ -z ${TMEM_RUNS:-} ]] && pgrep -f -- "lanes/bin/tmem-.* frontier" > /dev/null; then
      echo "gpu_frontier: CPU lanes are running; stop them first (tools/frontier_lanes.sh stop)" >&2
      exit 1
    fi
    set -e
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tar -xzf "$2/frontier-cells.tgz" -C "$tmp"
    if compgen -G "$2/frontier-ckpt.tgz.*" > /dev/null; then cat "$2"/frontier-ckpt.tgz.* | tar -xzf - -C "$tmp"; fi
    for cell in "$tmp"/*/*/; do
      [[ -d $cell ]] || continue
      rel=${cell#"$tmp/"} rel=${rel%/}
      here=$runs/$rel
      if [[ -e $cell/result.json ]]; then
        if [[ -e $here/result.json ]]; then
          echo "gpu_frontier: $rel finished here too: kept this machine's"
          continue
        fi
        mkdir -p "$here"
        for f in result.json losses.json; do [[ -e $cell/$f ]] && cp "$cell/$f" "$here/$f.tmp" && mv "$here/$f.tmp" "$here/$f"; done
        rm -f "$here/checkpoint.safetensors"
        echo "gpu_frontier: $rel: finished ($(/usr/bin/python3 -c 'import json, sys; print(round(100 * json.load(open(sys.argv[1]))["eval_accuracy"], 1))' "$here/result.json")%)"
      elif [[ -e $cell/checkpoint.safetensors && ! -e $here/result.json ]]; then
        there=$(checkpoint_step "$cell/checkpoint.safetensors")
        mine=$( [[ -e $here/checkpoint.safetensors ]] && checkpoint_step "$here/checkpoint.safetensors" || echo -1)
        if (( there > mine )); then
          mkdir -p "$here"
          cp "$cell/checkpoint.safetensors" "$here/checkpoint.safetensors.tmp"
          mv "$here/checkpoint.safetensors.tmp" "$here/checkpoint.safetensors"
          echo "gpu_frontier: $rel: in progress, step $there (here: $mine)"
        else
          echo "gpu_frontier: $rel: in progress, step $there; kept this machine's step $mine"
        fi
      fi
    done
    for name in $(ls "$tmp"); do bash tools/frontier_cells.sh save "$name"; done
    ;;
  *)
    echo "usage: $0 run SECONDS [OUT_DIR] | import DIR" >&2
    exit 2
    ;;
esac
