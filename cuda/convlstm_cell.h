// convlstm3d_cell on a device, composed from the device's kernels: z =
// cat(x, h) by two copies, the depthwise stages a1, a2, a3 by the
// conv3d_depthwise kernels, the 1x1x1 conv as a batched GEMM P[b] = pw a3[b],
// then the gate kernel (bias, activations, c', h'). The backward runs the
// pieces transposed: the gate kernel's dP and dL/dc; dpb and dpw = sum_b
// dP[b] a3[b]^T by row sums and GEMMs; da3[b] = pw^T dP[b]; then down the
// stack (W, H, D) with the depthwise kernels' input and parameter gradients.
// Like the CPU backward it recomputes a1, a2, a3 instead of saving them.
//
// Plain C++17 over a DeviceBackend (its allocator for the intermediate
// buffers, copy, fill and op table) and the gate kernels, so that the CUDA
// entries (cuda/convlstm.cu) and their host build (tests/
// host_kernels_spatial.cpp) run this one composition. Every pointer is
// contiguous device memory; sizes and layouts as ops/kernel_list.h's
// TMEM_CONVLSTM_KERNELS.
#pragma once
#include <cstdint>
#include <utility>

#include "tmem/core/device_backend.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// The cell's gate kernels (cuda/convlstm.cuh has their arithmetic), over S
/// voxels per channel. forward: from the 1x1x1 conv's products P [B, 4C, S]
/// (rows i, f, o, g) plus its bias pb [4C] and the state c [B, C, S], the
/// gates [B, 4C, S] = (sigmoid(i), sigmoid(f), sigmoid(o), tanh(g)) (null:
/// not kept), c' = f c + i g and h' = o tanh(c'), each [B, C, S]. backward:
/// from the saved gates, c and c' and the gradients ghn, gcn of h' and c',
/// dP [B, 4C, S] (the pre-activation gradients) and dc [B, C, S] (either
/// null: not computed).
struct ConvLstmGateKernels {
  void (*forward)(int device, int64_t B, int64_t C, int64_t S, const float* P, const float* pb, const float* c,
                  float* gates, float* cn, float* hn);
  void (*backward)(int device, int64_t B, int64_t C, int64_t S, const float* gates, const float* c,
                   const float* cn, const float* ghn, const float* gcn, float* dP, float* dc);
};

namespace convlstm_cell {

/// n floats from the backend's allocator for the life of one entry (none
/// for n = 0).
class Buffer {
 public:
  Buffer(const DeviceBackend& b, int device, int64_t n)
      : b_(b), device_(device), bytes_(static_cast<size_t>(n) * sizeof(float)),
        p_(n > 0 ? static_cast<float*>(b.allocate(device, bytes_)) : nullptr) {}
  ~Buffer() {
    if (p_) b_.release(device_, p_, bytes_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() const { return p_; }

 private:
  const DeviceBackend& b_;
  int device_;
  size_t bytes_;
  float* p_;
};

/// `rows` rows of `width` floats: dst (rows dst_pitch apart) = src (rows
/// src_pitch apart).
inline void copy_rows(const DeviceBackend& b, int device, float* dst, int64_t dst_pitch, const float* src,
                      int64_t src_pitch, int64_t width, int64_t rows) {
  if (rows * width == 0) return;
  StridedArgs<2> a;
  a.ndim = 2;
  a.numel = rows * width;
  a.shape[0] = rows;
  a.shape[1] = width;
  a.data[0] = dst;
  a.data[1] = const_cast<float*>(src);
  a.strides[0][0] = dst_pitch;
  a.strides[0][1] = 1;
  a.strides[1][0] = src_pitch;
  a.strides[1][1] = 1;
  b.copy(device, a, DType::Float32, DType::Float32);
}

/// p[0 .. n) = value.
inline void fill(const DeviceBackend& b, int device, float* p, int64_t n, double value) {
  if (n == 0) return;
  StridedArgs<1> a;
  a.ndim = 1;
  a.numel = n;
  a.shape[0] = n;
  a.data[0] = p;
  a.strides[0][0] = 1;
  b.fill(device, a, DType::Float32, value);
}

/// One GEMM operand as GemmArgs takes it.
struct Operand {
  const float* p;
  bool col_major;
  int64_t ld, stride;
};

/// c[i] = a[i] b[i] for i < batch, a[i] [m, kk], b[i] [kk, n], c[i] [m, n]
/// (m, n, kk > 0).
inline void gemm(const OpKernels& k, int device, int64_t batch, int64_t m, int64_t n, int64_t kk, Operand a,
                 Operand b, float* c) {
  GemmArgs<float> g;
  g.device = device;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = kk;
  g.a = a.p;
  g.a_col_major = a.col_major;
  g.lda = a.ld;
  g.stride_a = a.stride;
  g.b = b.p;
  g.b_col_major = b.col_major;
  g.ldb = b.ld;
  g.stride_b = b.stride;
  g.c = c;
  k.gemm(g);
}

/// out[j] = sum over i < rows of m[i, j] for m [rows, cols] (rows, cols >
/// 0): ones[1, rows] @ m.
inline void column_sums(const DeviceBackend& b, int device, const float* m, float* out, int64_t rows,
                        int64_t cols) {
  const Buffer ones(b, device, rows);
  fill(b, device, ones.data(), rows, 1.0);
  gemm(*b.ops, device, 1, 1, cols, rows, {ones.data(), false, rows, 0}, {m, false, cols, 0}, out);
}

/// The depthwise stage along axis ax (0: D, 1: H, 2: W) as the
/// conv3d_depthwise kernels take it: Cz channels, kernel 3 and zero padding
/// 1 along ax, an output the size of the input. dw[ax] [Cz, 3] is the
/// kernels' weight layout [Cz, taps].
inline Conv3dArgs stage_args(const ConvLstmArgs& dm, int ax) {
  Conv3dArgs a;
  a.B = dm.B;
  a.C = dm.Cz();
  const int64_t n[3] = {dm.D, dm.H, dm.W};
  for (int k = 0; k < 3; ++k) {
    a.size[k] = a.out[k] = n[k];
    a.kernel[k] = k == ax ? 3 : 1;
    a.padding[k] = k == ax ? 1 : 0;
  }
  return a;
}

/// z = cat(x, h) and the depthwise stages a[0], a[1], a[2], each
/// [B, Cz, D, H, W].
inline void stages(const DeviceBackend& b, int device, const ConvLstmArgs& dm, const ConvLstmWeights<float>& w,
                   const float* x, const float* h, float* z, float* const a[3]) {
  const int64_t S = dm.S(), Cz = dm.Cz();
  copy_rows(b, device, z, Cz * S, x, dm.Cx * S, dm.Cx * S, dm.B);
  copy_rows(b, device, z + dm.Cx * S, Cz * S, h, dm.C * S, dm.C * S, dm.B);
  const float* in = z;
  for (int ax = 0; ax < 3; ++ax) {
    b.ops->conv3d_depthwise_forward(device, stage_args(dm, ax), in, w.dw[ax], w.db[ax], a[ax]);
    in = a[ax];
  }
}

}  // namespace convlstm_cell

/// convlstm3d_cell_forward (ops/kernel_list.h) on b's device, gates
/// [B, 4C, S].
inline void convlstm_cell_forward(const DeviceBackend& b, const ConvLstmGateKernels& gk, int device,
                                  const ConvLstmArgs& dm, const ConvLstmWeights<float>& w, const float* x,
                                  const float* h, const float* c, float* gates, float* cn, float* hn) {
  using namespace convlstm_cell;
  const int64_t C4 = 4 * dm.C, Cz = dm.Cz(), S = dm.S(), zn = dm.B * Cz * S;
  if (dm.B * dm.C * S == 0) return;
  const Buffer z(b, device, zn), a1(b, device, zn), a2(b, device, zn), a3(b, device, zn);
  float* const a[3] = {a1.data(), a2.data(), a3.data()};
  stages(b, device, dm, w, x, h, z.data(), a);
  // P[b] = pw [4C, Cz] @ a3[b] [Cz, S].
  const Buffer P(b, device, dm.B * C4 * S);
  gemm(*b.ops, device, dm.B, C4, S, Cz, {w.pw, false, Cz, 0}, {a3.data(), false, S, Cz * S}, P.data());
  gk.forward(device, dm.B, dm.C, S, P.data(), w.pb, c, gates, cn, hn);
}

/// convlstm3d_cell_backward (ops/kernel_list.h) on b's device, from the
/// gates convlstm_cell_forward kept.
inline void convlstm_cell_backward(const DeviceBackend& b, const ConvLstmGateKernels& gk, int device,
                                   const ConvLstmArgs& dm, const ConvLstmWeights<float>& w, const float* x,
                                   const float* h, const float* c, const float* cn, const float* gates,
                                   const float* ghn, const float* gcn, const ConvLstmGrads<float>& g) {
  using namespace convlstm_cell;
  const OpKernels& k = *b.ops;
  const int64_t B = dm.B, C = dm.C, C4 = 4 * dm.C, Cz = dm.Cz(), S = dm.S(), zn = B * Cz * S;
  if (B * C * S == 0) {
    const std::pair<float*, int64_t> all[] = {
        {g.x, B * dm.Cx * S}, {g.h, B * C * S}, {g.c, B * C * S}, {g.dw[0], Cz * 3}, {g.dw[1], Cz * 3},
        {g.dw[2], Cz * 3},    {g.db[0], Cz},    {g.db[1], Cz},    {g.db[2], Cz},     {g.pw, C4 * Cz},
        {g.pb, C4}};
    for (const auto& [p, n] : all)
      if (p) fill(b, device, p, n, 0.0);
    return;
  }
  const bool need_dz = g.x || g.h;
  const bool need_a1 = need_dz || g.dw[0] || g.db[0];
  const bool need_a2 = need_a1 || g.dw[1] || g.db[1];
  const bool need_a3 = need_a2 || g.dw[2] || g.db[2];
  const bool need_p = need_a3 || g.pw || g.pb;
  const bool recompute = g.pw || g.dw[0] || g.dw[1] || g.dw[2];
  const Buffer dP(b, device, need_p ? B * C4 * S : 0);
  gk.backward(device, B, C, S, gates, c, cn, ghn, gcn, dP.data(), g.c);
  if (!need_p) return;
  if (g.pb) {
    const Buffer rows(b, device, B * C4);
    k.sum_rows(device, dP.data(), rows.data(), B * C4, S, 1.0);
    column_sums(b, device, rows.data(), g.pb, B, C4);
  }
  const int64_t sn = recompute ? zn : 0;
  const Buffer z(b, device, sn), a1(b, device, sn), a2(b, device, sn), a3(b, device, sn);
  float* const a[3] = {a1.data(), a2.data(), a3.data()};
  if (recompute) stages(b, device, dm, w, x, h, z.data(), a);
  if (g.pw) {
    // dpw = sum_b dP[b] [4C, S] @ a3[b]^T [S, Cz] (a column-major view of a3[b]).
    const Buffer per_item(b, device, B * C4 * Cz);
    gemm(k, device, B, C4, Cz, S, {dP.data(), false, S, C4 * S}, {a3.data(), true, S, Cz * S}, per_item.data());
    column_sums(b, device, per_item.data(), g.pw, B, C4 * Cz);
  }
  if (!need_a3) return;
  // da3[b] = pw^T [Cz, 4C] (a column-major view of pw) @ dP[b] [4C, S]; then
  // down the stack, the gradient alternating between two buffers.
  const Buffer grad(b, device, zn), below(b, device, zn);
  float* cur = grad.data();
  float* next = below.data();
  gemm(k, device, B, Cz, S, C4, {w.pw, true, Cz, 0}, {dP.data(), false, S, C4 * S}, cur);
  const bool need_below[3] = {need_dz, need_a1, need_a2};
  const float* stage_in[3] = {z.data(), a1.data(), a2.data()};
  for (int ax = 2; ax >= 0; --ax) {
    const Conv3dArgs sa = stage_args(dm, ax);
    if (g.dw[ax] || g.db[ax])
      k.conv3d_depthwise_backward_params(device, sa, cur, g.dw[ax] ? stage_in[ax] : nullptr, g.dw[ax], g.db[ax]);
    if (!need_below[ax]) break;
    k.conv3d_depthwise_backward_input(device, sa, cur, w.dw[ax], next);
    std::swap(cur, next);
  }
  // cur is now dL/dz: its first Cx channels are dL/dx, the rest dL/dh.
  if (g.x) copy_rows(b, device, g.x, dm.Cx * S, cur, Cz * S, dm.Cx * S, B);
  if (g.h) copy_rows(b, device, g.h, C * S, cur + dm.Cx * S, Cz * S, C * S, B);
}

}  // namespace tmem::cuda
