// scaled_dot_product_attention's fused CPU kernels (ops/kernel_list.h
// TMEM_ATTENTION_KERNELS; FlashAttention, Dao et al. 2022, on the CPU). Both
// passes work on tiles of kQueryBlock queries x kKeyBlock keys, each product
// a small register-blocked GEMM (cpu::gemm, serial inside a task), so no
// [T, S] buffer exists. The forward runs tasks (head, query block) and walks
// the key blocks with an online softmax (running max m, normaliser l,
// unnormalised output), keeping lse = m + log l per query. The backward runs
// one task per head and, per key block and query block, recomputes
// P = exp(S - lse): dV += P^T dO, dP = dO V^T, dS = P (dP - delta) scale with
// delta = dO . O, dQ += dS K, dK += dS^T Q. Every value is written by one
// task in an order fixed by the shapes, so results do not depend on the
// thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/ops/cpu/gemm.h"
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

// qs[nq, Dh] = the queries [t0, t0 + nq) of head bh times the scale.
template <class S>
void scaled_queries(const Args& a, const S* q, S sc, int64_t bh, int64_t t0, int64_t nq, S* qs) {
  const S* src = q + (bh * a.T + t0) * a.Dh;
  for (int64_t i = 0; i < nq * a.Dh; ++i) qs[i] = src[i] * sc;
}

// The scores of queries [t0, t0 + nq) against keys [s0, s0 + nk) of head bh,
// with the additive mask, as rows of p (leading dimension kKeyBlock). Sets
// [jl[i], jh[i]) to the keys of the block row i sees (empty: jl = jh = 0).
template <class S>
void block_scores(const Args& a, const S* qs, const S* kh, const S* mask, int64_t bh, int64_t t0, int64_t nq,
                  int64_t s0, int64_t nk, S* p, int64_t* jl, int64_t* jh) {
  gemm<S>(nq, nk, a.Dh, qs, a.Dh, 1, kh + s0 * a.Dh, 1, a.Dh, p, kKeyBlock, false, false);
  for (int64_t i = 0; i < nq; ++i) {
    int64_t lo, hi;
    visible_keys(a, t0 + i, lo, hi);
    jl[i] = std::clamp<int64_t>(lo - s0, 0, nk);
    jh[i] = std::clamp<int64_t>(hi - s0, 0, nk);
    if (jl[i] >= jh[i]) jl[i] = jh[i] = 0;
    if (mask && jl[i] < jh[i]) {
      const S* mr = mask + (bh / a.H) * a.mb + (bh % a.H) * a.mh + (t0 + i) * a.mt;
      for (int64_t j = jl[i]; j < jh[i]; ++j) p[i * kKeyBlock + j] += mr[(s0 + j) * a.ms];
    }
  }
}

// Zeroes row[0, jl) and row[jh, nk): the keys a query does not see.
template <class S>
void zero_outside(S* row, int64_t jl, int64_t jh, int64_t nk) {
  std::fill(row, row + jl, S(0));
  std::fill(row + jh, row + nk, S(0));
}

template <class S>
void fused_forward(const Args& a, S sc, const S* q, const S* k, const S* v, const S* mask, S* out, S* lse) {
  const int64_t BH = a.B * a.H, Dh = a.Dh, Dv = a.Dv;
  const int64_t nqb = (a.T + kQueryBlock - 1) / kQueryBlock, tasks = BH * nqb;
  ThreadScratch<S> qs_s(kOp, kQueryBlock * Dh), p_s(kOp, kQueryBlock * kKeyBlock), acc_s(kOp, kQueryBlock * Dv),
      ml_s(kOp, 2 * kQueryBlock);
  ThreadScratch<int64_t> j_s(kOp, 2 * kQueryBlock);
  const S neg_inf = -std::numeric_limits<S>::infinity();
#pragma omp parallel for schedule(dynamic) if (tasks > 1 && a.T * a.S * Dh * BH > (int64_t{1} << 16))
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t bh = task / nqb, t0 = (task % nqb) * kQueryBlock, t1 = std::min(a.T, t0 + kQueryBlock);
    const int64_t nq = t1 - t0;
    S *qs = qs_s.slot(), *p = p_s.slot(), *acc = acc_s.slot(), *m = ml_s.slot();
    S* l = m + kQueryBlock;
    int64_t *jl = j_s.slot(), *jh = jl + kQueryBlock;
    std::fill(acc, acc + nq * Dv, S(0));
    std::fill(m, m + nq, neg_inf);
    std::fill(l, l + nq, S(0));
    scaled_queries(a, q, sc, bh, t0, nq, qs);
    int64_t lo0, hi0, lo1, hi1;
    visible_keys(a, t0, lo0, hi0);
    visible_keys(a, t1 - 1, lo1, hi1);
    const S* kh = k + bh * a.S * Dh;
    const S* vh = v + bh * a.S * Dv;
    for (int64_t s0 = lo0; s0 < hi1; s0 += kKeyBlock) {
      const int64_t nk = std::min(hi1, s0 + kKeyBlock) - s0;
      block_scores(a, qs, kh, mask, bh, t0, nq, s0, nk, p, jl, jh);
      for (int64_t i = 0; i < nq; ++i) {
        S* row = p + i * kKeyBlock;
        const S mx = jl[i] < jh[i] ? row_max(row + jl[i], jh[i] - jl[i]) : neg_inf;
        if (mx == neg_inf) {  // sees no key of this block (or every one masked out), or only NaN
          // row_max skips NaN: a NaN score makes the row NaN (as PyTorch), not a query that sees nothing.
          if (std::any_of(row + jl[i], row + jh[i], [](S x) { return std::isnan(x); }))
            l[i] = std::numeric_limits<S>::quiet_NaN();
          std::fill(row, row + nk, S(0));
          continue;
        }
        const S m_new = std::max(m[i], mx);
        const S alpha = std::exp(m[i] - m_new);  // 0 while m is -inf
        const S sum = sum_exp(row + jl[i], m_new, jh[i] - jl[i], row + jl[i]);
        zero_outside(row, jl[i], jh[i], nk);
        if (alpha != S(1))
          for (int64_t c = 0; c < Dv; ++c) acc[i * Dv + c] *= alpha;
        l[i] = l[i] * alpha + sum;
        m[i] = m_new;
      }
      gemm<S>(nq, Dv, nk, p, kKeyBlock, 1, vh + s0 * Dv, Dv, 1, acc, Dv, true, false);
    }
    for (int64_t i = 0; i < nq; ++i) {
      S* o = out + (bh * a.T + t0 + i) * Dv;
      if (l[i] > S(0)) {
        const S inv = S(1) / l[i];
        for (int64_t c = 0; c < Dv; ++c) o[c] = acc[i * Dv + c] * inv;
        lse[bh * a.T + t0 + i] = m[i] + std::log(l[i]);
      } else if (l[i] == S(0)) {  // a query that sees no key: a zero row, and zero gradients
        std::fill(o, o + Dv, S(0));
        lse[bh * a.T + t0 + i] = std::numeric_limits<S>::infinity();
      } else {  // a NaN score, or +inf in the mask (inf - inf): a NaN row and NaN gradients
        std::fill(o, o + Dv, std::numeric_limits<S>::quiet_NaN());
        lse[bh * a.T + t0 + i] = std::numeric_limits<S>::quiet_NaN();
      }
    }
  }
}

// The gradients (each where not null) from gout; gq, gk, gv are zeroed here.
template <class S>
void fused_backward(const Args& a, S sc, const S* q, const S* k, const S* v, const S* mask, const S* out,
                    const S* lse, const S* gout, S* gq, S* gk, S* gv) {
  const int64_t BH = a.B * a.H, Dh = a.Dh, Dv = a.Dv, T = a.T;
  ThreadScratch<S> qs_s(kOp, kQueryBlock * Dh), p_s(kOp, 2 * kQueryBlock * kKeyBlock), delta_s(kOp, T);
  ThreadScratch<int64_t> j_s(kOp, 2 * kQueryBlock);
#pragma omp parallel for schedule(dynamic) if (BH > 1 && T * a.S * Dh * BH > (int64_t{1} << 16))
  for (int64_t bh = 0; bh < BH; ++bh) {
    S *qs = qs_s.slot(), *p = p_s.slot(), *delta = delta_s.slot();
    S* ds = p + kQueryBlock * kKeyBlock;  // dP, then dS in place
    int64_t *jl = j_s.slot(), *jh = jl + kQueryBlock;
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
      const int64_t nk = std::min(a.S, s0 + kKeyBlock) - s0;
      // The queries that see a key of [s0, s0 + nk).
      const int64_t t_lo = (a.causal || a.window > 0) ? std::min(s0, T) : 0;
      const int64_t t_hi = a.window > 0 ? std::min(T, s0 + nk - 1 + a.window) : T;
      for (int64_t t0 = t_lo; t0 < t_hi; t0 += kQueryBlock) {
        const int64_t nq = std::min(t_hi, t0 + kQueryBlock) - t0;
        scaled_queries(a, q, sc, bh, t0, nq, qs);
        block_scores(a, qs, kh, mask, bh, t0, nq, s0, nk, p, jl, jh);
        bool any = false;
        for (int64_t i = 0; i < nq; ++i) {
          S* row = p + i * kKeyBlock;
          const S lt = lh[t0 + i];
          if (lt == std::numeric_limits<S>::infinity()) jl[i] = jh[i] = 0;  // sees no key at all
          for (int64_t j = jl[i]; j < jh[i]; ++j) row[j] = std::exp(row[j] - lt);
          zero_outside(row, jl[i], jh[i], nk);
          any = any || jl[i] < jh[i];
        }
        if (!any) continue;
        if (gvh) gemm<S>(nk, Dv, nq, p, 1, kKeyBlock, goh + t0 * Dv, Dv, 1, gvh + s0 * Dv, Dv, true, false);
        if (!gqh && !gkh) continue;
        gemm<S>(nq, nk, Dv, goh + t0 * Dv, Dv, 1, vh + s0 * Dv, 1, Dv, ds, kKeyBlock, false, false);
        for (int64_t i = 0; i < nq; ++i) {
          const S di = delta[t0 + i];
          S *dr = ds + i * kKeyBlock, *pr = p + i * kKeyBlock;
          for (int64_t j = 0; j < nk; ++j) dr[j] = pr[j] * (dr[j] - di) * sc;
        }
        if (gqh) gemm<S>(nq, Dh, nk, ds, kKeyBlock, 1, kh + s0 * Dh, Dh, 1, gqh + t0 * Dh, Dh, true, false);
        if (gkh) gemm<S>(nk, Dh, nq, ds, 1, kKeyBlock, qh + t0 * Dh, Dh, 1, gkh + s0 * Dh, Dh, true, false);
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
