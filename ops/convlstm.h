// The ConvLSTM3D cell (docs/DESIGN.md §7): the Tensor Memory update, one
// fused op (one node on the tape) with a hand-written backward.
#pragma once
#include "tmem/core/tensor.h"

namespace tmem {

/// Weights of convlstm3d_cell, with Cz = Cx + C input channels of z = cat(x, h)
/// and C state channels, all in the input's dtype (PyTorch layouts: docs/OPS.md §3):
///   dw_d, dw_h, dw_w [Cz,3]: the depthwise taps along D, H, W; db_d, db_h, db_w [Cz].
///   pw [4C,Cz]: the 1x1x1 conv, rows 0..C-1 gate i, then f, o, g; pb [4C].
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

/// One ConvLSTM3D step with a factorised 3-D operator (the Tensor Memory
/// update, Swain et al. 2026; gates of Shi et al. 2015; formula, memory and
/// kernels: docs/OPS.md §3): z = cat(x, h) through depthwise kernel-3 convs
/// along D, H, W and a 1x1x1 conv to gates i, f, o, g;
/// c' = f c + i g, h' = o tanh(c'). x [B,Cx,D,H,W], h and c [B,C,D,H,W];
/// returns {h', c'}, each [B,C,D,H,W] (empty for an empty grid, whose
/// weight gradients are 0). One fused tape node. Throws ShapeError
/// (the shapes at fault) when x, h or c is not 5-D, their batch or spatial
/// dims differ, h and c differ, or a weight does not have the shape above;
/// DtypeError for mixed or non-floating dtypes (float32 on a device);
/// DeviceError for mixed devices or a backend without the kernel.
ConvLSTM3DState convlstm3d_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                const ConvLSTM3DWeights& w);

}  // namespace tmem
