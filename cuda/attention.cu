// Fused scaled_dot_product_attention's CUDA kernels (ops/kernel_list.h
// TMEM_ATTENTION_KERNELS), forward and backward; the arithmetic is cuda/attention.cuh's. One thread per
// query row for the forward and for delta and gq, one per key row for gk and
// gv, so every gradient is written by one thread and no result depends on
// timing. No [T, S] buffer is made.
#include "tmem/cuda/attention.cuh"
#include "tmem/cuda/check.h"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/scratch.h"

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

void attention_backward(int device, const AttentionArgs& a, const float* q, const float* k, const float* v,
                        const float* mask, const float* out, const float* lse, const float* gout, float* gq,
                        float* gk, float* gv) {
  const int64_t nq = a.B * a.H * a.T, nk = a.B * a.H * a.S;
  if (nq == 0 && nk == 0) return;
  DeviceGuard guard(device);
  // delta = gout . out per query, written by the query pass for the key pass.
  Scratch delta(device, static_cast<size_t>(nq) * sizeof(float));
  if (nq > 0) {
    attention_backward_q_kernel<<<blocks_for(nq), kThreads>>>(a, q, k, v, mask, out, lse, gout, delta.data(), gq,
                                                              nq);
    TMEM_CUDA_CHECK_LAUNCH();
  }
  if ((gk || gv) && nk > 0) {
    attention_backward_kv_kernel<<<blocks_for(nk), kThreads>>>(a, q, k, v, mask, lse, gout, delta.data(), gk, gv,
                                                               nk);
    TMEM_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace tmem::cuda
