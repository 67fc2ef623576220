// convlstm3d_cell's fused CPU kernels (ops/cpu/convlstm_kernel.cpp), called
// by ops/convlstm.cpp's CPU body. The cell's device body is still composed
// in ops/convlstm.cpp from the device's kernels; moving that composition
// into the kernel tables (docs/DESIGN.md §5) makes these table entries.
#pragma once
#include <cstdint>

namespace tmem::cpu {

/// The sizes of one call: x [B, Cx, D, H, W], h and c [B, C, D, H, W].
struct ConvLstmDims {
  int64_t B, Cx, C, D, H, W;
  int64_t Cz() const { return Cx + C; }
  int64_t S() const { return D * H * W; }
};

/// The cell's weights: per axis (D, H, W) the depthwise taps dw[a] [Cz, 3]
/// and biases db[a] [Cz]; the pointwise pw [4C, Cz] and pb [4C].
template <class T>
struct ConvLstmWeights {
  const T *dw[3], *db[3], *pw, *pb;
};

/// The gradients of one call, in the inputs' order (null: not needed).
template <class T>
struct ConvLstmGrads {
  T *x, *h, *c, *dw[3], *db[3], *pw, *pb;
};

/// The row length of the gates buffer [B, 4C, row]: S padded to whole SIMD
/// batches of T.
template <class T>
int64_t convlstm_gates_row(const ConvLstmDims& dm);

/// h' and c' [B, C, D, H, W] and, where gates is not null, the activated
/// gates [B, 4C, convlstm_gates_row] that the backward reads.
template <class T>
void convlstm_forward(const ConvLstmDims& dm, const ConvLstmWeights<T>& w, const T* x, const T* h,
                      const T* c, T* gates, T* cn, T* hn);

/// The gradients gr (each where not null, written) from ghn and gcn, the
/// gradients of h' and c', with the inputs, c' and the forward's gates (w.pb
/// unused).
template <class T>
void convlstm_backward(const ConvLstmDims& dm, const ConvLstmWeights<T>& w, const T* x, const T* h,
                       const T* c, const T* cn, const T* gates, const T* ghn, const T* gcn,
                       const ConvLstmGrads<T>& gr);

}  // namespace tmem::cpu
