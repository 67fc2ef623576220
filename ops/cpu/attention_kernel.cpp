// scaled_dot_product_attention's fused CPU kernels (ops/kernel_list.h
// TMEM_ATTENTION_KERNELS; FlashAttention, Dao et al. 2022, on the CPU): the
// forward runs tasks (head, block of kQueryBlock queries) and walks the keys
// in blocks of kKeyBlock, transposing each block once so a score row is a
// run of fused multiply-adds along the keys, with an online softmax (running
// max m, normaliser l, unnormalised output); it keeps lse = m + log l per
// query. The backward runs one task per head, recomputing
// p = exp(score - lse) block by block: gv += p gout, dp = gout v^T,
// ds = p (dp - delta) scale with delta = gout . out, gq += ds k,
// gk += ds q. No [T, S] buffer exists on either pass, and every value is
// written by one task in an order fixed by the shapes, so results do not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using Args = AttentionArgs;
constexpr int64_t kQueryBlock = 32;
constexpr int64_t kKeyBlock = 64;

// The keys query t sees: [lo, hi).
inline void visible_keys(const Args& a, int64_t t, int64_t& lo, int64_t& hi) {
  lo = a.window > 0 ? std::max<int64_t>(0, t - a.window + 1) : 0;
  hi = (a.causal || a.window > 0) ? std::min(a.S, t + 1) : a.S;
}

// cols[c * ld + j] = rows[j * n_cols + c] for j < n_rows: a block of key (or
// value) rows, transposed.
template <class S>
void transpose_block(const S* rows, int64_t n_rows, int64_t n_cols, S* cols, int64_t ld) {
  for (int64_t j = 0; j < n_rows; ++j)
    for (int64_t c = 0; c < n_cols; ++c) cols[c * ld + j] = rows[j * n_cols + c];
}

// out[j] = sum_c x[c] m[c * ld + j] for j < n: one row times a transposed block.
template <class S>
void row_times_block(const S* x, const S* m, int64_t ld, int64_t n, int64_t K, S* out) {
  using B = Batch<S>;
  constexpr int64_t W = B::size;
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    B a0(S(0)), a1(S(0));
    for (int64_t c = 0; c < K; ++c) {
      const B xc(x[c]);
      a0 = xsimd::fma(xc, B::load_unaligned(m + c * ld + j), a0);
      a1 = xsimd::fma(xc, B::load_unaligned(m + c * ld + j + W), a1);
    }
    a0.store_unaligned(out + j);
    a1.store_unaligned(out + j + W);
  }
  for (; j + W <= n; j += W) {
    B a0(S(0));
    for (int64_t c = 0; c < K; ++c) a0 = xsimd::fma(B(x[c]), B::load_unaligned(m + c * ld + j), a0);
    a0.store_unaligned(out + j);
  }
  for (; j < n; ++j) {
    S acc = 0;
    for (int64_t c = 0; c < K; ++c) acc += x[c] * m[c * ld + j];
    out[j] = acc;
  }
}

// The scores of query row t against keys s0 + [jl, jh) of head bh into
// sc[jl, jh): (q_t scale) . k_s + mask. qs holds q_t scale; kt the key block
// transposed (leading dimension kKeyBlock).
template <class S>
void block_scores(const Args& a, const S* qs, const S* kt, const S* mask, int64_t bh, int64_t t, int64_t s0,
                  int64_t jl, int64_t jh, S* sc) {
  row_times_block(qs, kt + jl, kKeyBlock, jh - jl, a.Dh, sc + jl);
  if (mask) {
    const S* mr = mask + (bh / a.H) * a.mb + (bh % a.H) * a.mh + t * a.mt;
    for (int64_t j = jl; j < jh; ++j) sc[j] += mr[(s0 + j) * a.ms];
  }
}

template <class S>
void fused_forward(const Args& a, S sc, const S* q, const S* k, const S* v, const S* mask, S* out, S* lse) {
  const int64_t BH = a.B * a.H, Dh = a.Dh, Dv = a.Dv;
  const int64_t nqb = (a.T + kQueryBlock - 1) / kQueryBlock, tasks = BH * nqb;
  ThreadScratch<S> kt_s(kOp, Dh * kKeyBlock), sc_s(kOp, kKeyBlock), qs_s(kOp, Dh),
      acc_s(kOp, kQueryBlock * Dv), ml_s(kOp, 2 * kQueryBlock);
  const S neg_inf = -std::numeric_limits<S>::infinity();
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && a.T * a.S * Dh * BH > (int64_t{1} << 16))
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t bh = task / nqb, t0 = (task % nqb) * kQueryBlock, t1 = std::min(a.T, t0 + kQueryBlock);
    S *kt = kt_s.slot(), *srow = sc_s.slot(), *qs = qs_s.slot(), *acc = acc_s.slot(), *m = ml_s.slot();
    S* l = m + kQueryBlock;
    std::fill(acc, acc + (t1 - t0) * Dv, S(0));
    std::fill(m, m + (t1 - t0), neg_inf);
    std::fill(l, l + (t1 - t0), S(0));
    int64_t lo0, hi0, lo1, hi1;
    visible_keys(a, t0, lo0, hi0);
    visible_keys(a, t1 - 1, lo1, hi1);
    const S* kh = k + bh * a.S * Dh;
    const S* vh = v + bh * a.S * Dv;
    for (int64_t s0 = lo0; s0 < hi1; s0 += kKeyBlock) {
      const int64_t s1 = std::min(hi1, s0 + kKeyBlock);
      transpose_block(kh + s0 * Dh, s1 - s0, Dh, kt, kKeyBlock);
      for (int64_t t = t0; t < t1; ++t) {
        int64_t lo, hi;
        visible_keys(a, t, lo, hi);
        const int64_t jl = std::max(lo, s0) - s0, jh = std::min(hi, s1) - s0;
        if (jl >= jh) continue;
        const S* qt = q + (bh * a.T + t) * Dh;
        for (int64_t c = 0; c < Dh; ++c) qs[c] = qt[c] * sc;
        block_scores(a, qs, kt, mask, bh, t, s0, jl, jh, srow);
        const int64_t i = t - t0;
        const S mx = row_max(srow + jl, jh - jl);
        if (mx == neg_inf) continue;  // every key of the block masked out
        const S m_new = std::max(m[i], mx);
        const S alpha = std::exp(m[i] - m_new);  // 0 while m is -inf
        const S sum = sum_exp(srow + jl, m_new, jh - jl, srow + jl);
        S* ai = acc + i * Dv;
        if (alpha != S(1))
          for (int64_t c = 0; c < Dv; ++c) ai[c] *= alpha;
        for (int64_t j = jl; j < jh; ++j) axpy(srow[j], vh + (s0 + j) * Dv, ai, Dv);
        l[i] = l[i] * alpha + sum;
        m[i] = m_new;
      }
    }
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t - t0;
      S* o = out + (bh * a.T + t) * Dv;
      if (l[i] > S(0)) {
        const S inv = S(1) / l[i];
        for (int64_t c = 0; c < Dv; ++c) o[c] = acc[i * Dv + c] * inv;
        lse[bh * a.T + t] = m[i] + std::log(l[i]);
      } else {  // a query that sees no key: a zero row, and zero gradients
        std::fill(o, o + Dv, S(0));
        lse[bh * a.T + t] = std::numeric_limits<S>::infinity();
      }
    }
  }
}

// The gradients (each where not null) from gout; gq, gk, gv are zeroed here.
template <class S>
void fused_backward(const Args& a, S sc, const S* q, const S* k, const S* v, const S* mask, const S* out,
                    const S* lse, const S* gout, S* gq, S* gk, S* gv) {
  const int64_t BH = a.B * a.H, Dh = a.Dh, Dv = a.Dv, T = a.T;
  ThreadScratch<S> kt_s(kOp, Dh * kKeyBlock), vt_s(kOp, Dv * kKeyBlock), sc_s(kOp, 2 * kKeyBlock),
      qs_s(kOp, Dh), delta_s(kOp, T);
#pragma omp parallel for schedule(dynamic) if (BH > 1 && T * a.S * Dh * BH > (int64_t{1} << 16))
  for (int64_t bh = 0; bh < BH; ++bh) {
    S *kt = kt_s.slot(), *vt = vt_s.slot(), *p = sc_s.slot(), *qs = qs_s.slot(), *delta = delta_s.slot();
    S* dp = p + kKeyBlock;
    const S *qh = q + bh * T * Dh, *kh = k + bh * a.S * Dh, *vh = v + bh * a.S * Dv, *goh = gout + bh * T * Dv;
    const S* lh = lse + bh * T;
    S* gqh = gq ? gq + bh * T * Dh : nullptr;
    S* gkh = gk ? gk + bh * a.S * Dh : nullptr;
    S* gvh = gv ? gv + bh * a.S * Dv : nullptr;
    if (gqh) std::fill(gqh, gqh + T * Dh, S(0));
    if (gkh) std::fill(gkh, gkh + a.S * Dh, S(0));
    if (gvh) std::fill(gvh, gvh + a.S * Dv, S(0));
    for (int64_t t = 0; t < T; ++t) delta[t] = row_dot(goh + t * Dv, out + (bh * T + t) * Dv, Dv);
    for (int64_t s0 = 0; s0 < a.S; s0 += kKeyBlock) {
      const int64_t s1 = std::min(a.S, s0 + kKeyBlock);
      // The queries that see a key of [s0, s1).
      const int64_t t_lo = (a.causal || a.window > 0) ? std::min(s0, T) : 0;
      const int64_t t_hi = a.window > 0 ? std::min(T, s1 - 1 + a.window) : T;
      if (t_lo >= t_hi) continue;
      transpose_block(kh + s0 * Dh, s1 - s0, Dh, kt, kKeyBlock);
      transpose_block(vh + s0 * Dv, s1 - s0, Dv, vt, kKeyBlock);
      for (int64_t t = t_lo; t < t_hi; ++t) {
        if (lh[t] == std::numeric_limits<S>::infinity()) continue;  // sees no key at all
        int64_t lo, hi;
        visible_keys(a, t, lo, hi);
        const int64_t jl = std::max(lo, s0) - s0, jh = std::min(hi, s1) - s0;
        if (jl >= jh) continue;
        const S* qt = qh + t * Dh;
        const S* go = goh + t * Dv;
        for (int64_t c = 0; c < Dh; ++c) qs[c] = qt[c] * sc;
        block_scores(a, qs, kt, mask, bh, t, s0, jl, jh, p);
        for (int64_t j = jl; j < jh; ++j) p[j] = std::exp(p[j] - lh[t]);
        row_times_block(go, vt + jl, kKeyBlock, jh - jl, Dv, dp + jl);
        for (int64_t j = jl; j < jh; ++j) {
          if (gvh) axpy(p[j], go, gvh + (s0 + j) * Dv, Dv);
          const S ds = p[j] * (dp[j] - delta[t]) * sc;
          if (gqh) axpy(ds, kh + (s0 + j) * Dh, gqh + t * Dh, Dh);
          if (gkh) axpy(ds, qt, gkh + (s0 + j) * Dh, Dh);
        }
      }
    }
  }
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::attention_forward(int, const AttentionArgs& a, const T* q, const T* k, const T* v,
                                        const T* mask, T* out, T* lse) {
  fused_forward<T>(a, static_cast<T>(a.scale), q, k, v, mask, out, lse);
}

template <class Scalar>
void Kernels<Scalar>::attention_backward(int, const AttentionArgs& a, const T* q, const T* k, const T* v,
                                         const T* mask, const T* out, const T* lse, const T* gout, T* gq,
                                         T* gk, T* gv) {
  fused_backward<T>(a, static_cast<T>(a.scale), q, k, v, mask, out, lse, gout, gq, gk, gv);
}

TMEM_ATTENTION_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
