// selective_scan (ops/selective_scan.cpp's device half), forward and
// backward; the arithmetic is cuda/selective_scan.cuh's. The forward and the
// reverse sweep run one thread per chain (b, e), looping over T and N; the
// gradients of Bm and Cm, sums over e, run one thread per element (b, t, n),
// and the parts of A's and D's gradients are summed over b by sum_rows, so
// no gradient depends on timing.
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
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

// ---- launchers ----

void selective_scan_forward(int device, const ScanArgs& a, const float* u, const float* delta, const float* A,
                            const float* Bm, const float* Cm, const float* D, const float* h0, float* y, float* h,
                            float* states) {
  const int64_t n = a.B * a.E;
  if (n == 0) return;
  DeviceGuard guard(device);
  scan_forward_kernel<<<blocks_for(n), kThreads>>>(a, u, delta, A, Bm, Cm, D, h0, y, h, states, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void selective_scan_backward(int device, const ScanArgs& a, const float* u, const float* delta, const float* A,
                             const float* Bm, const float* Cm, const float* D, const float* h0, const float* gy,
                             const float* gh, float* states, float* gu, float* gdelta, float* gApart, float* gDpart,
                             float* gh0) {
  const int64_t n = a.B * a.E;
  if (n == 0) return;
  DeviceGuard guard(device);
  scan_backward_kernel<<<blocks_for(n), kThreads>>>(a, u, delta, A, Bm, Cm, D, h0, gy, gh, states, gu, gdelta,
                                                    gApart, gDpart, gh0, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void selective_scan_reduce(int device, const ScanArgs& a, const float* c1, const float* c2, const float* x,
                           float* out) {
  const int64_t n = a.B * a.T * a.N;
  if (n == 0) return;
  DeviceGuard guard(device);
  scan_reduce_kernel<<<blocks_for(n), kThreads>>>(a, c1, c2, x, out, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
