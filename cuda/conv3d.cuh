// The per-thread arithmetic of the depthwise 3-D convolution kernels
// (cuda/conv3d.cu), built for the device by nvcc and for the host by g++
// (cuda/hd.h), so tests/host_kernels_spatial.cpp runs it without a GPU.
// Shapes as Conv3dArgs (ops/device_kernels.h): input [B, C, D, H,
// W], weight [C, kD kH kW], bias [C], output [B, C, Do, Ho, Wo], contiguous
// float32. Formula: ops/conv3d.h (PyTorch's conv3d with groups = C). Every
// function is a gather (one thread sums everything its element receives),
// so the results do not depend on timing.
#pragma once
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// The output positions o of an axis whose input position o s - p + tap lies
/// inside [0, n): lo <= o < hi (ops/conv3d.cpp Axis).
struct ConvRange {
  int64_t lo, hi;
};

TMEM_HD ConvRange conv_range(const Conv3dArgs& a, int ax, int64_t tap) {
  const int64_t s = a.stride[ax], p = a.padding[ax], n = a.size[ax];
  // floor((n - 1 + p - tap) / s) + 1 and ceil((p - tap) / s), for s > 0.
  const int64_t num_hi = n - 1 + p - tap, num_lo = p - tap;
  const int64_t hi = (num_hi >= 0 ? num_hi / s : -((-num_hi + s - 1) / s)) + 1;
  const int64_t lo = num_lo <= 0 ? -((-num_lo) / s) : (num_lo + s - 1) / s;
  return {lo > 0 ? lo : 0, hi < a.out[ax] ? hi : a.out[ax]};
}

/// Output element i of [B, C, Do, Ho, Wo]: bias plus the taps inside the
/// input, in tap order (i, j, k).
TMEM_HD void conv3d_forward_one(const Conv3dArgs& a, const float* input, const float* weight, const float* bias,
                                float* out, int64_t i) {
  const int64_t Wo = a.out[2], Ho = a.out[1], Do = a.out[0];
  const int64_t ow = i % Wo, oh = (i / Wo) % Ho, od = (i / (Wo * Ho)) % Do, bc = i / (Wo * Ho * Do);
  const int64_t c = bc % a.C, H = a.size[1], W = a.size[2];
  const float* x = input + bc * a.size[0] * H * W;
  const float* w = weight + c * a.kernel[0] * a.kernel[1] * a.kernel[2];
  float acc = bias ? bias[c] : 0.0f;
  for (int64_t ki = 0; ki < a.kernel[0]; ++ki) {
    const int64_t id = od * a.stride[0] - a.padding[0] + ki;
    if (id < 0 || id >= a.size[0]) continue;
    for (int64_t kj = 0; kj < a.kernel[1]; ++kj) {
      const int64_t ih = oh * a.stride[1] - a.padding[1] + kj;
      if (ih < 0 || ih >= H) continue;
      for (int64_t kk = 0; kk < a.kernel[2]; ++kk) {
        const int64_t iw = ow * a.stride[2] - a.padding[2] + kk;
        if (iw < 0 || iw >= W) continue;
        acc += w[(ki * a.kernel[1] + kj) * a.kernel[2] + kk] * x[(id * H + ih) * W + iw];
      }
    }
  }
  out[i] = acc;
}

/// Input-gradient element i of [B, C, D, H, W]: the sum over the taps and
/// outputs that read input position i of weight times gout.
TMEM_HD void conv3d_backward_input_one(const Conv3dArgs& a, const float* gout, const float* weight,
                                       float* ginput, int64_t i) {
  const int64_t W = a.size[2], H = a.size[1], D = a.size[0];
  const int64_t iw = i % W, ih = (i / W) % H, id = (i / (W * H)) % D, bc = i / (W * H * D);
  const int64_t c = bc % a.C, Ho = a.out[1], Wo = a.out[2];
  const float* g = gout + bc * a.out[0] * Ho * Wo;
  const float* w = weight + c * a.kernel[0] * a.kernel[1] * a.kernel[2];
  float acc = 0.0f;
  for (int64_t ki = 0; ki < a.kernel[0]; ++ki) {
    const int64_t td = id + a.padding[0] - ki;
    if (td < 0 || td % a.stride[0] != 0 || td / a.stride[0] >= a.out[0]) continue;
    for (int64_t kj = 0; kj < a.kernel[1]; ++kj) {
      const int64_t th = ih + a.padding[1] - kj;
      if (th < 0 || th % a.stride[1] != 0 || th / a.stride[1] >= Ho) continue;
      for (int64_t kk = 0; kk < a.kernel[2]; ++kk) {
        const int64_t tw = iw + a.padding[2] - kk;
        if (tw < 0 || tw % a.stride[2] != 0 || tw / a.stride[2] >= Wo) continue;
        acc += w[(ki * a.kernel[1] + kj) * a.kernel[2] + kk] *
               g[((td / a.stride[0]) * Ho + th / a.stride[1]) * Wo + tw / a.stride[2]];
      }
    }
  }
  ginput[i] = acc;
}

/// Weight-gradient part j of [C, taps, B]: the sum over sample b's outputs
/// of gout times the input that tap reads.
TMEM_HD void conv3d_backward_weight_one(const Conv3dArgs& a, const float* gout, const float* input,
                                        float* wpart, int64_t j) {
  const int64_t taps = a.kernel[0] * a.kernel[1] * a.kernel[2];
  const int64_t b = j % a.B, tap = (j / a.B) % taps, c = j / (a.B * taps);
  const int64_t kk = tap % a.kernel[2], kj = (tap / a.kernel[2]) % a.kernel[1], ki = tap / (a.kernel[2] * a.kernel[1]);
  const int64_t H = a.size[1], W = a.size[2], Ho = a.out[1], Wo = a.out[2];
  const float* x = input + (b * a.C + c) * a.size[0] * H * W;
  const float* g = gout + (b * a.C + c) * a.out[0] * Ho * Wo;
  const ConvRange rd = conv_range(a, 0, ki), rh = conv_range(a, 1, kj), rw = conv_range(a, 2, kk);
  float acc = 0.0f;
  for (int64_t od = rd.lo; od < rd.hi; ++od) {
    const int64_t id = od * a.stride[0] - a.padding[0] + ki;
    for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
      const int64_t ih = oh * a.stride[1] - a.padding[1] + kj;
      const float* grow = g + (od * Ho + oh) * Wo;
      const float* xrow = x + (id * H + ih) * W;
      for (int64_t ow = rw.lo; ow < rw.hi; ++ow) acc += grow[ow] * xrow[ow * a.stride[2] - a.padding[2] + kk];
    }
  }
  wpart[j] = acc;
}

/// Bias-gradient part j of [C, B]: the sum of sample b's gout in channel c.
TMEM_HD void conv3d_backward_bias_one(const Conv3dArgs& a, const float* gout, float* bpart, int64_t j) {
  const int64_t b = j % a.B, c = j / a.B, plane = a.out[0] * a.out[1] * a.out[2];
  const float* g = gout + (b * a.C + c) * plane;
  float acc = 0.0f;
  for (int64_t v = 0; v < plane; ++v) acc += g[v];
  bpart[j] = acc;
}

}  // namespace tmem::cuda
