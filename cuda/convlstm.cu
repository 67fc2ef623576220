// The ConvLSTM3D cell's entries (ops/kernel_list.h TMEM_CONVLSTM_KERNELS):
// cuda/convlstm_cell.h composes them from this backend's kernels (the
// depthwise stages, the 1x1x1 conv as a batched GEMM) and the gate kernels
// here, whose arithmetic is cuda/convlstm.cuh's; one thread per state
// element (b, ch, voxel).
#include "tmem/cuda/check.h"
#include "tmem/cuda/convlstm.cuh"
#include "tmem/cuda/convlstm_cell.h"
#include "tmem/cuda/kernels.h"

namespace tmem::cuda {

namespace {

// ---- kernels ----

__global__ void gates_forward_kernel(int64_t C, int64_t S, const float* P, const float* pb, const float* c,
                                     float* gates, float* cn, float* hn, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    convlstm3d_gates_forward_one(C, S, P, pb, c, gates, cn, hn, i);
}

__global__ void gates_backward_kernel(int64_t C, int64_t S, const float* gates, const float* c, const float* cn,
                                      const float* ghn, const float* gcn, float* dP, float* dc, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    convlstm3d_gates_backward_one(C, S, gates, c, cn, ghn, gcn, dP, dc, i);
}

// ---- launchers ----

void gates_forward(int device, int64_t B, int64_t C, int64_t S, const float* P, const float* pb, const float* c,
                   float* gates, float* cn, float* hn) {
  const int64_t n = B * C * S;
  if (n == 0) return;
  DeviceGuard guard(device);
  gates_forward_kernel<<<blocks_for(n), kThreads>>>(C, S, P, pb, c, gates, cn, hn, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

void gates_backward(int device, int64_t B, int64_t C, int64_t S, const float* gates, const float* c,
                    const float* cn, const float* ghn, const float* gcn, float* dP, float* dc) {
  const int64_t n = B * C * S;
  if (n == 0 || (!dP && !dc)) return;
  DeviceGuard guard(device);
  gates_backward_kernel<<<blocks_for(n), kThreads>>>(C, S, gates, c, cn, ghn, gcn, dP, dc, n);
  TMEM_CUDA_CHECK_LAUNCH();
}

constexpr ConvLstmGateKernels kGates{&gates_forward, &gates_backward};

}  // namespace

// ---- entries ----

int64_t convlstm3d_cell_gates_row(int, const ConvLstmArgs& a) { return a.S(); }

void convlstm3d_cell_forward(int device, const ConvLstmArgs& a, const ConvLstmWeights<float>& w, const float* x,
                             const float* h, const float* c, float* gates, float* cn, float* hn) {
  DeviceGuard guard(device);
  convlstm_cell_forward(backend(), kGates, device, a, w, x, h, c, gates, cn, hn);
}

void convlstm3d_cell_backward(int device, const ConvLstmArgs& a, const ConvLstmWeights<float>& w, const float* x,
                              const float* h, const float* c, const float* cn, const float* gates,
                              const float* ghn, const float* gcn, const ConvLstmGrads<float>& g) {
  DeviceGuard guard(device);
  convlstm_cell_backward(backend(), kGates, device, a, w, x, h, c, cn, gates, ghn, gcn, g);
}

}  // namespace tmem::cuda
