#!/usr/bin/env bash
# The GPU check (issue 5): builds tmem with the CUDA backend, runs the CUDA
# parity tests (tests/cuda_tests.cpp) and the host-built kernel tests, times
# the Tensor Memory kernels and coord-binding steps (bench/bench_cuda.cpp),
# checks that a CUDA run's gradient dump matches the CPU's (`tmem grads diff`)
# and trains the tensor model on CUDA for the accuracy comparison; a 1-rank
# NCCL smoke test of tmem::dist. Everything goes to a log; budget: under 8
# minutes on one H200 (it passed in 189 s there, 2026-12-04, with PREBUILT).
#
#   bash tools/gpu_check.sh [LOG_DIR]        (default: $OUT, else gpu_check/)
#
# Beside tmem's step, the same model in the GPU machine's PyTorch
# (bench/peer/coord_peer.py --device cuda) for the side-by-side step time.
#
# Environment: CUDA_ARCH (default 90: H100/H200), TRAIN_STEPS (default 2000;
# 0 skips the accuracy run), JOBS (default: all cores), BUILD (default build-gpu),
# PREBUILT (a file made by tools/gpu_bundle.sh: run its programs instead of
# building, on a machine without tmem's dependencies), PYTHON (default python3,
# for the PyTorch peer).
set -uo pipefail
cd "$(dirname "$0")/.."
LOG_DIR=${1:-${OUT:-gpu_check}}
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/gpu_check.log"
exec > >(tee "$LOG") 2>&1
START=$(date +%s)
FAILED=()
section() { echo; echo "==== $* ($(($(date +%s) - START)) s)"; }
run() {  # run NAME CMD...: runs CMD, records NAME as failed on a non-zero status
  local name=$1; shift
  "$@" || { echo "FAILED: $name (status $?)"; FAILED+=("$name"); }
}

section "machine"
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "nvidia-smi not available"
lscpu | grep -E "Model name|^CPU\(s\)" || true
git rev-parse --short HEAD 2>/dev/null || true

MPIRUN=mpirun
if [ -n "${PREBUILT:-}" ]; then
  section "prebuilt programs from $PREBUILT"
  source tools/gpu_prebuilt.sh
  unpack_prebuilt || exit 1
  if ldd "$BUILD/tests/tmem_cuda_tests" "$BUILD/tests/tmem_dist_tests" | grep "not found"; then
    echo "FAILED: libraries missing"; FAILED+=(libraries)
  fi
else
  section "build (CUDA_ARCH=${CUDA_ARCH:-90})"
  BUILD=${BUILD:-build-gpu}
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTMEM_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > "$LOG_DIR/cmake.log" 2>&1 ||
    { tail -30 "$LOG_DIR/cmake.log"; echo "FAILED: configure"; exit 1; }
  cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target tmem tmem_tests tmem_cuda_tests tmem_dist_tests bench_cuda \
    > "$LOG_DIR/build.log" 2>&1 || { grep -E "error|FAILED" "$LOG_DIR/build.log" | head -40; echo "FAILED: build"; exit 1; }
  echo "built in $(($(date +%s) - START)) s"
fi

section "CUDA parity tests"
run cuda_tests "$BUILD/tests/tmem_cuda_tests"

section "NCCL: collectives and DDP on CUDA tensors, 1 rank (NCCL refuses two ranks on one GPU)"
run nccl_smoke env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  "$MPIRUN" -np 1 "$BUILD/tests/tmem_dist_tests" -tc="NCCL*" -s

section "kernel bandwidth and coord-binding steps"
run bench_cuda "$BUILD/bench/bench_cuda" --steps 20

section "PyTorch peer: the same coord-binding tensor step on this GPU (bench/peer/coord_peer.py)"
run torch_peer "${PYTHON:-python3}" bench/peer/coord_peer.py --method tensor --time --device cuda --reps 50 --warmup 5

section "gradient dumps: CUDA against the CPU (3 steps, tensor model)"
rm -rf runs/gpu_check_grads_cpu runs/gpu_check_grads_cuda runs/gpu_check_train
TMEM="$BUILD/tools/tmem"
for dev in cpu cuda; do
  run "dump_$dev" "$TMEM" train coord-binding --method tensor --steps 3 --eval-batches 1 --device "$dev" \
    --dump-grads grads.json --dump-every 1 --name "gpu_check_grads_$dev"
done
# float32 sums in another order: agreement to 1e-3 after 3 steps.
run grads_diff "$TMEM" grads diff --rtol 1e-3 runs/gpu_check_grads_cpu/*/grads.json \
  runs/gpu_check_grads_cuda/*/grads.json

if [ "${TRAIN_STEPS:-2000}" -gt 0 ]; then
  section "accuracy: coord-binding tensor on CUDA, ${TRAIN_STEPS:-2000} steps, seed 42"
  echo "CPU reference (docs/RESULTS.md, same seed): tensor 97.7% eval accuracy"
  run train_cuda "$TMEM" train coord-binding --method tensor --steps "${TRAIN_STEPS:-2000}" --device cuda \
    --name gpu_check_train
  cp runs/gpu_check_train/results.json "$LOG_DIR/train_results.json" 2>/dev/null || true
fi

# Last: these run the host build of the kernels on the CPU (as CI does); a
# stand-in block of threads per launch makes them slow on a loaded machine.
section "host-built kernel and device tests"
run device_tests "$BUILD/tests/tmem_tests" -tc="device*"

section "done"
if [ ${#FAILED[@]} -eq 0 ]; then
  echo "gpu_check: PASSED in $(($(date +%s) - START)) s"
else
  echo "gpu_check: FAILED: ${FAILED[*]} ($(($(date +%s) - START)) s)"
  exit 1
fi
