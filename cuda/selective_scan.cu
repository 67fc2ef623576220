// selective_scan's CUDA kernels (ops/kernel_list.h TMEM_SELECTIVE_SCAN_KERNELS),
// forward and backward; the arithmetic is cuda/selective_scan.cuh's. The forward and the
// reverse sweep run one thread per chain (b, e), looping over T and N; the
// gradients of Bm and Cm, sums over e, run one thread per element (b, t, n),
// and the parts of A's and D's gradients are summed over b by sum_rows, so
// no gradient depends on timing.
#include <algorithm>

#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/scratch.h"
#include "tmem/cuda/selective_scan.cuh"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void scan_forward_kernel(const ScanArgs a, const float* u, const float* delta, const float* A,
                                    const float* Bm, const float* Cm, const float* D, const float* h0, float* y,
                                    float* h, float* states, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    selective_scan_forward_one(a, u, delta, A, Bm, Cm, D, h0, y, h, states, i);
}

__global__ void scan_backward_kernel(const ScanArgs a, const float* u, const float* delta, const float* A,
                                     const float* Bm, const float* Cm, const float* D, const float* h0,
                                     const float* gy, const float* gh, float* states, float* gu, float* gdelta,
                                     float* gApart, float* gDpart, float* gh0, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    selective_scan_backward_one(a, u, delta, A, Bm, Cm, D, h0, gy, gh, states, gu, gdelta, gApart, gDpart, gh0, i);
}

__global__ void scan_reduce_kernel(const ScanArgs a, const float* c1, const float* c2, const float* x, float* out,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    selective_scan_reduce_one(a, c1, c2, x, out, i);
}

}  // namespace

// ---- the entries ----

void selective_scan_forward(int device, const ScanArgs& a, const float* u, const float* delta, const float* A,
                            const float* Bm, const float* Cm, const float* D, const float* h0, float* y, float* h) {
  const int64_t n = a.B * a.E;
  if (n == 0) return;
  DeviceGuard guard(device);
  scan_forward_kernel<<<blocks_for(n), kThreads>>>(a, u, delta, A, Bm, Cm, D, h0, y, h, nullptr, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

// The forward again keeping every state [B,E,T,N]; Cm's gradient is a sum
// over e of gy times the states; the reverse sweep overwrites the states with
// the adjoints and writes the gradients of u, delta and h0 and per-item parts
// of A's and D's (summed over b by sum_rows); Bm's gradient is a sum over e
// of delta u times the adjoints.
void selective_scan_backward(int device, const ScanArgs& a, const float* u, const float* delta, const float* A,
                             const float* Bm, const float* Cm, const float* D, const float* h0, const float* gy,
                             const float* gh, float* gu, float* gdelta, float* gA, float* gBm, float* gCm, float* gD,
                             float* gh0) {
  DeviceGuard guard(device);
  const int64_t chains = a.B * a.E, points = a.B * a.T * a.N;
  auto bytes = [](int64_t n) { return static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float); };
  Scratch states(device, bytes(chains * a.T * a.N));
  auto reduce = [&](const float* c1, const float* c2, float* out) {
    if (points == 0) return;
    scan_reduce_kernel<<<blocks_for(points), kThreads>>>(a, c1, c2, states.data(), out, points);
    TMEM_CUDA_CHECK_LAUNCH();
  };
  if (chains > 0) {
    scan_forward_kernel<<<blocks_for(chains), kThreads>>>(a, u, delta, A, Bm, Cm, D, h0, nullptr, nullptr,
                                                          states.data(), chains);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if (gCm) reduce(gy, nullptr, gCm);
  if (!(gu || gdelta || gA || gBm || gD || gh0)) return;
  Scratch part_a(device, bytes(gA ? a.E * a.N * a.B : 0)), part_d(device, bytes(gD ? a.E * a.B : 0));
  if (chains > 0) {
    scan_backward_kernel<<<blocks_for(chains), kThreads>>>(a, u, delta, A, Bm, Cm, D, h0, gy, gh, states.data(),
                                                           gu, gdelta, gA ? part_a.data() : nullptr,
                                                           gD ? part_d.data() : nullptr, gh0, chains);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if (gA) sum_rows(device, part_a.data(), gA, a.E * a.N, a.B, 1.0);
  if (gD) sum_rows(device, part_d.data(), gD, a.E, a.B, 1.0);
  if (gBm) reduce(delta, u, gBm);
}

}  // namespace tmem::cuda
