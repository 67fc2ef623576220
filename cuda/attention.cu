// Fused scaled_dot_product_attention (ops/attention.cpp's device half),
// forward and backward; the arithmetic is cuda/attention.cuh's. One thread per
// query row for the forward and for delta and gq, one per key row for gk and
// gv, so every gradient is written by one thread and no result depends on
// timing. No [T, S] buffer is made.
#include "tmem/cuda/attention.cuh"
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

__global__ void attention_forward_kernel(const AttentionArgs a, const float* q, const float* k, const float* v,
                                         const float* mask, float* out, float* lse, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    attention_forward_one(a, q, k, v, mask, out, lse, i);
}

__global__ void attention_backward_q_kernel(const AttentionArgs a, const float* q, const float* k, const float* v,
                                            const float* mask, const float* out, const float* lse,
                                            const float* gout, float* delta, float* gq, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    attention_backward_q_one(a, q, k, v, mask, out, lse, gout, delta, gq, i);
}

__global__ void attention_backward_kv_kernel(const AttentionArgs a, const float* q, const float* k,
                                             const float* v, const float* mask, const float* lse,
                                             const float* gout, const float* delta, float* gk, float* gv,
                                             int64_t n) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(blockDim.x) * gridDim.x)
    attention_backward_kv_one(a, q, k, v, mask, lse, gout, delta, gk, gv, j);
}

}  // namespace

void attention_forward(int device, const AttentionArgs& a, const float* q, const float* k, const float* v,
                       const float* mask, float* out, float* lse) {
  const int64_t n = a.B * a.H * a.T;
  if (n == 0) return;
  DeviceGuard guard(device);
  attention_forward_kernel<<<blocks_for(n), kThreads>>>(a, q, k, v, mask, out, lse, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void attention_backward_q(int device, const AttentionArgs& a, const float* q, const float* k, const float* v,
                          const float* mask, const float* out, const float* lse, const float* gout, float* delta,
                          float* gq) {
  const int64_t n = a.B * a.H * a.T;
  if (n == 0) return;
  DeviceGuard guard(device);
  attention_backward_q_kernel<<<blocks_for(n), kThreads>>>(a, q, k, v, mask, out, lse, gout, delta, gq, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void attention_backward_kv(int device, const AttentionArgs& a, const float* q, const float* k, const float* v,
                           const float* mask, const float* lse, const float* gout, const float* delta, float* gk,
                           float* gv) {
  const int64_t n = a.B * a.H * a.S;
  if (n == 0) return;
  DeviceGuard guard(device);
  attention_backward_kv_kernel<<<blocks_for(n), kThreads>>>(a, q, k, v, mask, lse, gout, delta, gk, gv, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tmem::cuda
