// The ConvLSTM3D cell (docs/DESIGN.md §7): the Tensor Memory update, one
// fused op (one node on the tape) with a hand-written backward.
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// Weights of convlstm3d_cell, with Cz = Cx + C input channels of z = cat(x, h)
/// and C state channels. All share the input's dtype.
///   dw_d, dw_h, dw_w [Cz,3]: the depthwise 1-D taps along D, H, W. Row c is
///     PyTorch's Conv3d(Cz, Cz, k, padding=..., groups=Cz).weight[c,0] for
///     k = (3,1,1), (1,3,1), (1,1,3) flattened; reshape to [Cz,1,3,1,1],
///     [Cz,1,1,3,1], [Cz,1,1,1,3] for conv3d_depthwise.
///   db_d, db_h, db_w [Cz]: their biases.
///   pw [4C,Cz]: the pointwise 1x1x1 conv (PyTorch weight [4C,Cz,1,1,1]
///     flattened); rows 0..C-1 make gate i, then f, o, g.
///   pb [4C]: its bias.
struct ConvLSTM3DWeights {
  Tensor dw_d, dw_h, dw_w;
  Tensor db_d, db_h, db_w;
  Tensor pw, pb;
};

/// The cell's output state (h', c').
struct ConvLSTM3DState {
  Tensor h;  // [B,C,D,H,W]
  Tensor c;  // [B,C,D,H,W]
};

/// One ConvLSTM3D step with a factorised 3-D operator:
///
///   z  = cat(x, h) along channels                          [B,Cz,D,H,W]
///   a1 = conv_D(z) + db_d,  conv_D: depthwise, kernel 3 along D, zero pad 1
///   a2 = conv_H(a1) + db_h, a3 = conv_W(a2) + db_w         (the same along H, W)
///   p  = pw @ a3 + pb  (1x1x1 conv Cz -> 4C at every voxel) [B,4C,D,H,W]
///   i, f, o = sigmoid(p[:, 0:C]), sigmoid(p[:, C:2C]), sigmoid(p[:, 2C:3C])
///   g = tanh(p[:, 3C:4C])
///   c' = f * c + i * g,   h' = o * tanh(c')
///
/// x [B,Cx,D,H,W], h and c [B,C,D,H,W]; returns {h', c'}, each [B,C,D,H,W].
/// conv_D(z)[d] = dw_d[:,0] z[d-1] + dw_d[:,1] z[d] + dw_d[:,2] z[d+1] (PyTorch
/// cross-correlation order), likewise along H and W. Source: the Tensor
/// Memory update (Swain et al. 2026; docs/DESIGN.md §7), gates as in Shi et
/// al. 2015, "Convolutional LSTM Network". The fused op equals the same cell
/// composed from cat, conv3d_depthwise, matmul, sigmoid, tanh, mul and add
/// (tests/test_spatial_ops.cpp).
///
/// Forward and backward are fused: one tape node with gradients w.r.t. x, h, c
/// and every weight. It saves x, h, c and the weights (alive anyway), c' (an
/// output, so changing it in place before backward is reported) and the four
/// activated gates [B,4C,D,H,W], the only extra memory; the depthwise stages
/// a1, a2, a3 (9 multiply-adds per element) are recomputed in backward rather
/// than stored. On the CPU, batch items run on OpenMP threads and the 1x1x1
/// conv is cpu::tile_kernel (ops/cpu/gemm.h) over a weight packed once per
/// call; on CUDA the same node runs the depthwise stages with the
/// conv3d_depthwise kernels, the 1x1x1 conv as a batched GEMM and the gates in
/// one kernel (cuda/convlstm.cu).
///
/// Throws ShapeError (naming the op and both shapes at fault) when x, h or c
/// is not 5-D, when their batch or spatial dims differ, when h and c differ,
/// or when a weight does not have the shape listed above for Cx and C;
/// DtypeError for mixed or non-floating dtypes (float32 on a device);
/// DeviceError when the inputs are on different devices or the device's
/// backend has no kernel for this op.
ConvLSTM3DState convlstm3d_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                const ConvLSTM3DWeights& w);

}  // namespace tmem
