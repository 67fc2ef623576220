// The per-thread arithmetic of the ConvLSTM3D gate kernels (cuda/convlstm.cu),
// built for the device by nvcc and for the host by g++ (cuda/hd.h), so
// tests/host_kernels_spatial.cpp runs it without a GPU. One thread per state
// element (b, ch, v) of [B, C, S] (S = D H W voxels) reads its four gate rows
// i, f, o, g of [B, 4C, S]. Formulas: ops/convlstm.h (Shi et al. 2015); the
// rest of the cell (the depthwise stages and the 1x1x1 conv) runs on the
// conv3d_depthwise and GEMM kernels (cuda/convlstm_cell.h).
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"

namespace tmem::cuda {

/// 1 / (1 + e^-x).
TMEM_HD float lstm_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

/// State element i of [B, C, S]: the gates from P [B, 4C, S] + pb [4C],
/// c' = f c + i g and h' = o tanh(c'); gates [B, 4C, S] (activated) when not
/// null.
TMEM_HD void convlstm3d_gates_forward_one(int64_t C, int64_t S, const float* P, const float* pb, const float* c,
                                          float* gates, float* cn, float* hn, int64_t i) {
  const int64_t v = i % S, ch = (i / S) % C, b = i / (S * C);
  const int64_t row = (b * 4 * C + ch) * S + v, gap = C * S;
  const float gi = lstm_sigmoid(P[row] + pb[ch]);
  const float gf = lstm_sigmoid(P[row + gap] + pb[C + ch]);
  const float go = lstm_sigmoid(P[row + 2 * gap] + pb[2 * C + ch]);
  const float gg = std::tanh(P[row + 3 * gap] + pb[3 * C + ch]);
  const float c2 = gf * c[i] + gi * gg;
  cn[i] = c2;
  hn[i] = go * std::tanh(c2);
  if (gates) {
    gates[row] = gi;
    gates[row + gap] = gf;
    gates[row + 2 * gap] = go;
    gates[row + 3 * gap] = gg;
  }
}

/// State element i of [B, C, S] backward: with dc' = gcn + ghn o (1 -
/// tanh(c')^2), dc[i] = dc' f and the pre-activation gradients dP (rows i,
/// f, o, g of [B, 4C, S]); dP or dc may be null.
TMEM_HD void convlstm3d_gates_backward_one(int64_t C, int64_t S, const float* gates, const float* c,
                                           const float* cn, const float* ghn, const float* gcn, float* dP,
                                           float* dc, int64_t i) {
  const int64_t v = i % S, ch = (i / S) % C, b = i / (S * C);
  const int64_t row = (b * 4 * C + ch) * S + v, gap = C * S;
  const float gi = gates[row], gf = gates[row + gap], go = gates[row + 2 * gap], gg = gates[row + 3 * gap];
  const float tc = std::tanh(cn[i]), gh = ghn[i];
  const float dc2 = gcn[i] + gh * go * (1.0f - tc * tc);
  if (dc) dc[i] = dc2 * gf;
  if (!dP) return;
  dP[row] = dc2 * gg * gi * (1.0f - gi);
  dP[row + gap] = dc2 * c[i] * gf * (1.0f - gf);
  dP[row + 2 * gap] = gh * tc * go * (1.0f - go);
  dP[row + 3 * gap] = dc2 * gi * (1.0f - gg * gg);
}

}  // namespace tmem::cuda
