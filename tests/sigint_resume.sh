#!/usr/bin/env bash
# Ctrl-C during `tmem train` (tools/tmem.cpp, models::request_stop): the run
# stops between two steps with its checkpoint saved and says how to continue,
# naming the run name it generated (no --name is given); `--name <it>
# --resume` then continues from that step. 1000 steps, so that the resumed
# run ends well inside the timeout under ASan on 2 busy cores (at 4000 it
# took over 300 s there). With SIGNAL TERM (as kill, timeout and job
# schedulers send) the run stops the same way; the resume is then not
# repeated. With a LAUNCHER (mpirun and its options) the run is data-parallel
# and the signal goes to the launcher: SIGUSR1, which mpirun forwards to every
# rank, stops all of them after the same step, and rank 0 alone reports it.
# Usage: sigint_resume.sh TMEM [INT|TERM|USR1] [LAUNCHER...]
set -euo pipefail
tmem=$1
signal=${2:-INT}
launcher=("${@:3}")
args=(train no-harm --method base --batch 4 --eval-batches 1 --dim 16 --layers 1 --heads 2 --threads 1
      --steps 1000)
log=$(mktemp)
name=
trap 'rm -f "$log"; [[ -z $name ]] || rm -rf "runs/$name"' EXIT
"${launcher[@]}" "$tmem" "${args[@]}" > "$log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -Eq "step [1-9][0-9]{2}/1000" "$log" && break; sleep 0.1; done
kill -"$signal" "$pid"
rc=0
wait "$pid" || rc=$?
cat "$log"
[[ $rc -eq 130 ]] || { echo "FAIL: the interrupted run exited with $rc, not 130"; exit 1; }
[[ $(grep -c "stopping after this step" "$log") -eq 1 ]] || { echo "FAIL: not one notice of the stop"; exit 1; }
[[ $(grep -c "interrupted after step" "$log") -eq 1 ]] || { echo "FAIL: not one report of where it stopped"; exit 1; }
grep -Eq "interrupted after step [0-9]+ of 1000; the checkpoint .*checkpoint.safetensors holds it: run the same command with --resume" "$log" ||
  { echo "FAIL: no resume hint"; exit 1; }
name=$(grep -Eo "this run's generated name is no-harm-[0-9]{8}-[0-9]{6}, so add --name no-harm-[0-9]{8}-[0-9]{6}" "$log" |
       grep -Eo -m1 "no-harm-[0-9]{8}-[0-9]{6}" | head -1) || { echo "FAIL: no generated run name in the hint"; exit 1; }
step=$(grep -Eo "interrupted after step [0-9]+" "$log" | grep -Eo "[0-9]+$")
[[ $step -ge 100 && $step -lt 1000 ]] || { echo "FAIL: stopped at step $step"; exit 1; }
[[ -f runs/$name/base_length32_seed42/checkpoint.safetensors ]] || { echo "FAIL: no checkpoint"; exit 1; }
if [[ $signal == TERM ]]; then echo "$name stopped at step $step on SIG$signal"; exit 0; fi
"${launcher[@]}" "$tmem" "${args[@]}" --name "$name" --resume > "$log" 2>&1
resumed=$(grep -Eo '"resumed_from": *[0-9]+' "runs/$name"/*/result.json | grep -Eo "[0-9]+$")
[[ $resumed -eq $step ]] || { echo "FAIL: resumed from $resumed, not $step"; exit 1; }
echo "$name stopped at step $step, resumed from it"
