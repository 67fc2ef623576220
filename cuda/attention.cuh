// The per-thread arithmetic of the fused attention kernels (cuda/attention.cu),
// built for the device by nvcc and for the host by g++ (cuda/hd.h), so
// tests/host_kernels_attention.cpp runs it without a GPU. Shapes and options
// as AttentionArgs (ops/device_kernels.h), contiguous float32.
// Formula: ops/attention.h; the backward is FlashAttention's (Dao et al.
// 2022, Algorithm 2): p = exp(score - lse) recomputed, ds = p (dp - delta).
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// Whether query t sees key s (the causal and sliding-window band).
TMEM_HD bool attention_sees(const AttentionArgs& a, int64_t t, int64_t s) {
  if ((a.causal || a.window > 0) && s > t) return false;
  return !(a.window > 0 && s <= t - a.window);
}

/// The score of query t and key s of head bh = b H + h: q . k scale + mask.
TMEM_HD float attention_score(const AttentionArgs& a, const float* q, const float* k, const float* mask, int64_t bh,
                              int64_t t, int64_t s) {
  const float* qt = q + (bh * a.T + t) * a.Dh;
  const float* ks = k + (bh * a.S + s) * a.Dh;
  float dot = 0.0f;
  for (int64_t c = 0; c < a.Dh; ++c) dot += qt[c] * ks[c];
  float sc = dot * static_cast<float>(a.scale);
  if (mask) sc += mask[(bh / a.H) * a.mb + (bh % a.H) * a.mh + t * a.mt + s * a.ms];
  return sc;
}

/// Query row i = (b H + h) T + t: out[i, :] and lse[i] by an online softmax
/// over the keys it sees.
TMEM_HD void attention_forward_one(const AttentionArgs& a, const float* q, const float* k, const float* v,
                                   const float* mask, float* out, float* lse, int64_t i) {
  const int64_t bh = i / a.T, t = i % a.T, Dv = a.Dv;
  float* o = out + i * Dv;
  for (int64_t c = 0; c < Dv; ++c) o[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t s = 0; s < a.S; ++s) {
    if (!attention_sees(a, t, s)) continue;
    const float sc = attention_score(a, q, k, mask, bh, t, s);
    if (sc == -INFINITY) continue;
    if (sc > m) {  // a new maximum: rescale what was summed so far
      const float alpha = std::exp(m - sc);
      l *= alpha;
      for (int64_t c = 0; c < Dv; ++c) o[c] *= alpha;
      m = sc;
    }
    const float p = std::exp(sc - m);
    l += p;
    const float* vs = v + (bh * a.S + s) * Dv;
    for (int64_t c = 0; c < Dv; ++c) o[c] += p * vs[c];
  }
  if (l > 0.0f) {
    for (int64_t c = 0; c < Dv; ++c) o[c] /= l;
    lse[i] = m + std::log(l);
  } else if (l == 0.0f) {  // sees no key: a zero row, and zero gradients
    lse[i] = INFINITY;
  } else {  // a NaN score, or +inf in the mask (inf - inf): a NaN row and NaN gradients
    for (int64_t c = 0; c < Dv; ++c) o[c] = NAN;
    lse[i] = NAN;
  }
}

/// Query row i: delta[i] = gout[i] . out[i], and gq[i, :] when gq is not null.
TMEM_HD void attention_backward_q_one(const AttentionArgs& a, const float* q, const float* k, const float* v,
                                      const float* mask, const float* out, const float* lse, const float* gout,
                                      float* delta, float* gq, int64_t i) {
  const int64_t bh = i / a.T, t = i % a.T, Dh = a.Dh, Dv = a.Dv;
  const float* go = gout + i * Dv;
  float d = 0.0f;
  for (int64_t c = 0; c < Dv; ++c) d += go[c] * out[i * Dv + c];
  delta[i] = d;
  if (!gq) return;
  float* g = gq + i * Dh;
  for (int64_t c = 0; c < Dh; ++c) g[c] = 0.0f;
  for (int64_t s = 0; s < a.S; ++s) {
    if (!attention_sees(a, t, s)) continue;
    const float p = std::exp(attention_score(a, q, k, mask, bh, t, s) - lse[i]);
    if (p == 0.0f) continue;
    const float* vs = v + (bh * a.S + s) * Dv;
    float dp = 0.0f;
    for (int64_t c = 0; c < Dv; ++c) dp += go[c] * vs[c];
    const float ds = p * (dp - d) * static_cast<float>(a.scale);
    const float* ks = k + (bh * a.S + s) * Dh;
    for (int64_t c = 0; c < Dh; ++c) g[c] += ds * ks[c];
  }
}

/// Key row j = (b H + h) S + s: gk[j, :] and gv[j, :] (each when not null).
TMEM_HD void attention_backward_kv_one(const AttentionArgs& a, const float* q, const float* k, const float* v,
                                       const float* mask, const float* lse, const float* gout, const float* delta,
                                       float* gk, float* gv, int64_t j) {
  const int64_t bh = j / a.S, s = j % a.S, Dh = a.Dh, Dv = a.Dv;
  float* gks = gk ? gk + j * Dh : nullptr;
  float* gvs = gv ? gv + j * Dv : nullptr;
  if (gks)
    for (int64_t c = 0; c < Dh; ++c) gks[c] = 0.0f;
  if (gvs)
    for (int64_t c = 0; c < Dv; ++c) gvs[c] = 0.0f;
  const float* vs = v + j * Dv;
  for (int64_t t = 0; t < a.T; ++t) {
    if (!attention_sees(a, t, s)) continue;
    const int64_t i = bh * a.T + t;
    const float p = std::exp(attention_score(a, q, k, mask, bh, t, s) - lse[i]);
    if (p == 0.0f) continue;
    const float* go = gout + i * Dv;
    if (gvs)
      for (int64_t c = 0; c < Dv; ++c) gvs[c] += p * go[c];
    if (gks) {
      float dp = 0.0f;
      for (int64_t c = 0; c < Dv; ++c) dp += go[c] * vs[c];
      const float ds = p * (dp - delta[i]) * static_cast<float>(a.scale);
      const float* qt = q + i * Dh;
      for (int64_t c = 0; c < Dh; ++c) gks[c] += ds * qt[c];
    }
  }
}

}  // namespace tmem::cuda
