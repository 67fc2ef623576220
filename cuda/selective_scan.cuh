// The per-thread arithmetic of the selective_scan kernels
// (cuda/selective_scan.cu), built for the device by nvcc and for the host by
// g++ (cuda/hd.h), so tests/host_kernels_scan.cpp runs it without a GPU.
// Shapes as ScanArgs (ops/device_kernels.h): u, delta, y
// [B, T, E], A [E, N], Bm, Cm [B, T, N], D [E], h0, h [B, E, N], states
// [B, E, T, N], contiguous float32. Formula: ops/selective_scan.h (Gu & Dao
// 2023); the backward's recurrences: ops/selective_scan.cpp. Chain
// i = b E + e is one thread's work.
#pragma once
#include <cmath>
#include <cstdint>

#include "tmem/cuda/hd.h"
#include "tmem/ops/device_kernels.h"

namespace tmem::cuda {

/// Chain i forward from h0 (null: zeros): y[b, :, e] (when y is not null),
/// the final state h[b, e, :] (when h is not null) and the state after each
/// step in states[b, e, :, :] (when states is not null). h or states must
/// not be null: the running state lives in states, else in h.
TMEM_HD void selective_scan_forward_one(const ScanArgs& a, const float* u, const float* delta, const float* A,
                                        const float* Bm, const float* Cm, const float* D, const float* h0, float* y,
                                        float* h, float* states, int64_t i) {
  const int64_t T = a.T, E = a.E, N = a.N, b = i / E, e = i % E;
  const float* Ae = A + e * N;
  float* hr = h ? h + i * N : nullptr;
  const float* prev = h0 ? h0 + i * N : nullptr;  // the state before step t (null: zeros)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t j = (b * T + t) * E + e;
    const float dt = delta[j], x = u[j], dx = dt * x;
    const float* Bt = Bm + (b * T + t) * N;
    const float* Ct = Cm + (b * T + t) * N;
    float* cur = states ? states + (i * T + t) * N : hr;
    float acc = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
      const float v = std::exp(dt * Ae[n]) * (prev ? prev[n] : 0.0f) + dx * Bt[n];
      cur[n] = v;
      acc += Ct[n] * v;
    }
    if (y) y[j] = acc + D[e] * x;
    prev = cur;
  }
  if (hr && prev != hr)
    for (int64_t n = 0; n < N; ++n) hr[n] = prev ? prev[n] : 0.0f;
}

/// Chain i backward, t from T-1 down to 0, from gy and gh (either null:
/// zero) and the states of selective_scan_forward_one, each replaced by its
/// adjoint g_t = dL/d(state after step t) = a_{t+1} g_{t+1} + gy_t Cm_t
/// (gh in place of a_T g_T), a_t = exp(delta_t A[e]). Writes, where not
/// null: gu[b, t, e] = gy_t D + delta_t sum_n g_t Bm_t;
/// gdelta[b, t, e] = sum_n g_t (A a_t h_{t-1} + Bm_t u_t); gh0 = a_0 g_0;
/// the item's parts gApart[e, n, b] = sum_t delta_t g_t a_t h_{t-1} and
/// gDpart[e, b] = sum_t gy_t u_t.
TMEM_HD void selective_scan_backward_one(const ScanArgs& a, const float* u, const float* delta, const float* A,
                                         const float* Bm, const float* Cm, const float* D, const float* h0,
                                         const float* gy, const float* gh, float* states, float* gu, float* gdelta,
                                         float* gApart, float* gDpart, float* gh0, int64_t i) {
  const int64_t B = a.B, T = a.T, E = a.E, N = a.N, b = i / E, e = i % E;
  const float* Ae = A + e * N;
  float* rows = states + i * T * N;
  if (gApart)
    for (int64_t n = 0; n < N; ++n) gApart[(e * N + n) * B + b] = 0.0f;
  float gD = 0.0f;
  for (int64_t t = T - 1; t >= 0; --t) {
    const int64_t j = (b * T + t) * E + e;
    const float gyt = gy ? gy[j] : 0.0f, dt = delta[j], x = u[j];
    const float* Bt = Bm + (b * T + t) * N;
    const float* Ct = Cm + (b * T + t) * N;
    const float* prev = t > 0 ? rows + (t - 1) * N : (h0 ? h0 + i * N : nullptr);
    float* cur = rows + t * N;
    float su = 0.0f, sd = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
      const float carry = t == T - 1 ? (gh ? gh[i * N + n] : 0.0f) : std::exp(delta[j + E] * Ae[n]) * cur[n + N];
      const float gn = carry + gyt * Ct[n];
      const float gah = gn * std::exp(dt * Ae[n]) * (prev ? prev[n] : 0.0f);
      sd += gah * Ae[n] + gn * Bt[n] * x;
      if (gApart) gApart[(e * N + n) * B + b] += gah * dt;
      su += gn * Bt[n];
      cur[n] = gn;
    }
    gD += gyt * x;
    if (gu) gu[j] = gyt * D[e] + dt * su;
    if (gdelta) gdelta[j] = sd;
  }
  if (gDpart) gDpart[e * B + b] = gD;
  if (gh0)
    for (int64_t n = 0; n < N; ++n)
      gh0[i * N + n] = T > 0 ? std::exp(delta[b * T * E + e] * Ae[n]) * rows[n] : (gh ? gh[i * N + n] : 0.0f);
}

/// Element i = (b T + t) N + n of out [B, T, N]: the sum over e of
/// c1[b, t, e] c2[b, t, e] x[b, e, t, n] (c1 null: 0, c2 null: 1).
TMEM_HD void selective_scan_reduce_one(const ScanArgs& a, const float* c1, const float* c2, const float* x,
                                       float* out, int64_t i) {
  const int64_t T = a.T, E = a.E, N = a.N, n = i % N, t = (i / N) % T, b = i / (T * N);
  float s = 0.0f;
  if (c1)
    for (int64_t e = 0; e < E; ++e) {
      const int64_t j = (b * T + t) * E + e;
      s += c1[j] * (c2 ? c2[j] : 1.0f) * x[((b * E + e) * T + t) * N + n];
    }
  out[i] = s;
}

}  // namespace tmem::cuda
