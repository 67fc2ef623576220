// Scaled dot-product attention: one fused op (one tape node) without dropout,
// else a composite of differentiable ops; causal linear attention, a
// composite. Shapes: q[B,H,T,Dh], k[B,H,S,Dh], v[B,H,S,Dv]; scores/weights
// [B,H,T,S]; out [B,H,T,Dv]; lse [B,H,T].
//
// The fused CPU kernels (FlashAttention, Dao et al. 2022, on the CPU): the
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
#include "tmem/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <omp.h>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/cpu/scratch.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/dropout.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"
#include "tmem/ops/softmax.h"

namespace tmem {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// 1 where query t may not see key s (causal and/or sliding window), else 0.
Tensor band_mask(int64_t T, int64_t S, bool is_causal, int64_t window, DType dtype) {
  Tensor m = zeros({T, S}, dtype);
  dispatch_floating(dtype, kOp, [&]<class D>() {
    D* p = m.data<D>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < S; ++s) {
        bool hidden = (is_causal || window > 0) && s > t;
        if (window > 0 && s <= t - window) hidden = true;
        p[t * S + s] = hidden ? D(1) : D(0);
      }
  });
  return m;
}


// ---- the fused op ----

using Args = OpKernels::AttentionArgs;
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
  using B = cpu::Batch<S>;
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
  cpu::ThreadScratch<S> kt_s(kOp, Dh * kKeyBlock), sc_s(kOp, kKeyBlock), qs_s(kOp, Dh),
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
        const S mx = cpu::row_max(srow + jl, jh - jl);
        if (mx == neg_inf) continue;  // every key of the block masked out
        const S m_new = std::max(m[i], mx);
        const S alpha = std::exp(m[i] - m_new);  // 0 while m is -inf
        const S sum = cpu::sum_exp(srow + jl, m_new, jh - jl, srow + jl);
        S* ai = acc + i * Dv;
        if (alpha != S(1))
          for (int64_t c = 0; c < Dv; ++c) ai[c] *= alpha;
        for (int64_t j = jl; j < jh; ++j) cpu::axpy(srow[j], vh + (s0 + j) * Dv, ai, Dv);
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
// sc is the scale in S (a.scale is its float32 rounding, for devices).
template <class S>
void fused_backward(const Args& a, S sc, const S* q, const S* k, const S* v, const S* mask, const S* out,
                    const S* lse, const S* gout, S* gq, S* gk, S* gv) {
  const int64_t BH = a.B * a.H, Dh = a.Dh, Dv = a.Dv, T = a.T;
  cpu::ThreadScratch<S> kt_s(kOp, Dh * kKeyBlock), vt_s(kOp, Dv * kKeyBlock), sc_s(kOp, 2 * kKeyBlock),
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
    for (int64_t t = 0; t < T; ++t) delta[t] = cpu::row_dot(goh + t * Dv, out + (bh * T + t) * Dv, Dv);
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
          if (gvh) cpu::axpy(p[j], go, gvh + (s0 + j) * Dv, Dv);
          const S ds = p[j] * (dp[j] - delta[t]) * sc;
          if (gqh) cpu::axpy(ds, kh + (s0 + j) * Dh, gqh + t * Dh, Dh);
          if (gkh) cpu::axpy(ds, qt, gkh + (s0 + j) * Dh, Dh);
        }
      }
    }
  }
}

// The fused op's launch arguments; the mask (or undefined) broadcast to
// [B,H,T,S] through its strides.
Args fused_args(const Shape& qs, const Shape& ks, const Shape& vs, const Tensor& mask, bool is_causal,
                int64_t window, double scale) {
  Args a;
  a.B = qs[0];
  a.H = qs[1];
  a.T = qs[2];
  a.S = ks[2];
  a.Dh = qs[3];
  a.Dv = vs[3];
  a.scale = static_cast<float>(scale);
  a.causal = is_causal;
  a.window = window;
  if (mask.defined()) {
    const Shape st = cpu::broadcast_strides(mask, Shape{a.B, a.H, a.T, a.S});
    a.mb = st[0];
    a.mh = st[1];
    a.mt = st[2];
    a.ms = st[3];
  }
  return a;
}

// t's data, or null for an undefined tensor (no mask, no gradient wanted).
template <class S>
S* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<S>() : nullptr;
}

// The fused op on q's device: one tape node saving q, k, v, the mask, out
// and lse. The CPU runs the kernels above in q's dtype; another device runs
// its kernel table's, in float32.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal,
                       int64_t window, double scale) {
  const OpRange range(OpId::ScaledDotProductAttention);
  const Device dev = q.device();
  const Tensor qc = contiguous_data(q), kc = contiguous_data(k), vc = contiguous_data(v);
  const Tensor mask = attn_mask.defined() ? attn_mask.detach() : Tensor();
  const Args a = fused_args(q.shape(), k.shape(), v.shape(), mask, is_causal, window, scale);
  Tensor out = empty({a.B, a.H, a.T, a.Dv}, q.dtype(), dev), lse = empty({a.B, a.H, a.T}, q.dtype(), dev);
  if (dev.is_cpu()) {
    dispatch_floating(q.dtype(), kOp, [&]<class S>() {
      fused_forward<S>(a, static_cast<S>(scale), qc.data<S>(), kc.data<S>(), vc.data<S>(), ptr_or_null<S>(mask), out.data<S>(),
                       lse.data<S>());
    });
  } else {
    device_kernels(OpId::ScaledDotProductAttention, q)
        .attention_forward(dev.index, a, qc.data<float>(), kc.data<float>(), vc.data<float>(),
                           ptr_or_null<float>(mask), out.data<float>(), lse.data<float>());
  }
  record(OpId::ScaledDotProductAttention, {q, k, v, attn_mask}, {out}, {qc, kc, vc, mask, out, lse},
         [a, scale](const Node& n, const std::vector<Tensor>& g) {
           const Tensor &qs = n.saved_tensor(0), &ks = n.saved_tensor(1), &vs = n.saved_tensor(2),
                        &ms = n.saved_tensor(3), &os = n.saved_tensor(4), &ls = n.saved_tensor(5);
           const Device d = qs.device();
           const Tensor go = contiguous_data(g[0]);
           std::vector<Tensor> grads(4);
           for (int i = 0; i < 3; ++i)
             if (n.needs_input_grad(i)) grads[i] = empty(n.input_shapes[i], n.input_dtypes[i], d);
           if (d.is_cpu()) {
             dispatch_floating(qs.dtype(), kOp, [&]<class S>() {
               fused_backward<S>(a, static_cast<S>(scale), qs.data<S>(), ks.data<S>(), vs.data<S>(), ptr_or_null<S>(ms), os.data<S>(),
                                 ls.data<S>(), go.data<S>(), ptr_or_null<S>(grads[0]), ptr_or_null<S>(grads[1]),
                                 ptr_or_null<S>(grads[2]));
             });
           } else {
             const OpKernels& kern = device_kernels(OpId::ScaledDotProductAttention, qs);
             Tensor delta = empty({a.B, a.H, a.T}, DType::Float32, d);
             kern.attention_backward_q(d.index, a, qs.data<float>(), ks.data<float>(), vs.data<float>(),
                                       ptr_or_null<float>(ms), os.data<float>(), ls.data<float>(), go.data<float>(),
                                       delta.data<float>(), ptr_or_null<float>(grads[0]));
             if (grads[1].defined() || grads[2].defined())
               kern.attention_backward_kv(d.index, a, qs.data<float>(), ks.data<float>(), vs.data<float>(),
                                          ptr_or_null<float>(ms), ls.data<float>(), go.data<float>(),
                                          delta.data<float>(), ptr_or_null<float>(grads[1]), ptr_or_null<float>(grads[2]));
           }
           return grads;
         });
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, bool is_causal, int64_t window,
                                    double dropout_p, std::optional<double> scale, Generator& gen) {
  check<ShapeError>(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOp,
                    ": expected 4-D q[B,H,T,Dh], k[B,H,S,Dh], v[B,H,S,Dv], but got q",
                    shape_str(q.shape()), " k", shape_str(k.shape()), " v", shape_str(v.shape()));
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  check<ShapeError>(qs[0] == ks[0] && qs[1] == ks[1] && qs[3] == ks[3], kOp,
                    ": expected q[B,H,T,Dh] and k[B,H,S,Dh] with equal B, H and Dh, but got q",
                    shape_str(qs), " k", shape_str(ks));
  check<ShapeError>(ks[0] == vs[0] && ks[1] == vs[1] && ks[2] == vs[2], kOp,
                    ": expected k[B,H,S,Dh] and v[B,H,S,Dv] with equal B, H and S, but got k",
                    shape_str(ks), " v", shape_str(vs));
  check<DtypeError>(q.dtype() == k.dtype() && q.dtype() == v.dtype(), kOp,
                    ": expected q, k, v of one dtype, but got ", dtype_name(q.dtype()), ", ",
                    dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  check<ValueError>(window >= 0, kOp, ": expected window >= 0 (0 = unlimited), but got ", window);
  check<ValueError>(dropout_p >= 0.0 && dropout_p <= 1.0, kOp,
                    ": expected dropout_p in [0, 1], but got ", dropout_p);
  const int64_t T = qs[2], S = ks[2];
  const Shape score_shape{qs[0], qs[1], T, S};
  if (attn_mask.defined()) {
    bool fits = attn_mask.dim() <= 4;
    for (int64_t i = 1; fits && i <= attn_mask.dim(); ++i) {
      const int64_t m = attn_mask.shape()[attn_mask.dim() - i];
      fits = m == 1 || m == score_shape[4 - i];
    }
    check<ShapeError>(fits, kOp, ": expected attn_mask to broadcast to the scores [B,H,T,S] = ",
                      shape_str(score_shape), ", but got attn_mask", shape_str(attn_mask.shape()));
    check<DtypeError>(attn_mask.dtype() == q.dtype(), kOp,
                      ": expected an additive attn_mask of dtype ", dtype_name(q.dtype()),
                      " (q's), but got ", dtype_name(attn_mask.dtype()));
  }
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(qs[3]));
  // The fused op unless dropout or a mask's own gradient needs the weights.
  const bool mask_grad = attn_mask.defined() && needs_grad({attn_mask});
  if (dropout_p == 0.0 && !mask_grad && device_implements(q.device().kind, OpId::ScaledDotProductAttention))
    return fused_attention(q, k, v, attn_mask, is_causal, window, sc);
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), sc);
  if (attn_mask.defined()) scores = add(scores, attn_mask);
  if (is_causal || window > 0)
    scores = masked_fill(scores, band_mask(T, S, is_causal, window, q.dtype()).to(q.device()),
                         -std::numeric_limits<double>::infinity());
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true, gen);
  return matmul(weights, v);
}

Tensor causal_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, double eps,
                               int64_t chunk) {
  constexpr const char* op = "causal_linear_attention";
  check<ShapeError>(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                    ": expected 4-D q[B,H,T,Dh], k[B,H,T,Dh], v[B,H,T,Dv], but got q",
                    shape_str(q.shape()), " k", shape_str(k.shape()), " v", shape_str(v.shape()));
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  check<ShapeError>(qs == ks && vs[0] == qs[0] && vs[1] == qs[1] && vs[2] == qs[2], op,
                    ": expected q[B,H,T,Dh] == k[B,H,T,Dh] and v[B,H,T,Dv] with the same B, H, T, but got q",
                    shape_str(qs), " k", shape_str(ks), " v", shape_str(vs));
  check<DtypeError>(q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
                    ": expected q, k, v of one dtype, but got ", dtype_name(q.dtype()), ", ",
                    dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  check<ValueError>(chunk >= 1 && eps >= 0, op, ": expected chunk >= 1 and eps >= 0, but got chunk ",
                    chunk, " eps ", eps);
  const int64_t T = qs[2];
  Tensor S, z;  // running sum_s k[s]^T v[s] [B,H,Dh,Dv] and sum_s k[s] [B,H,1,Dh] of earlier chunks
  std::vector<Tensor> outs;
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t t1 = std::min(T, t0 + chunk), c = t1 - t0;
    Tensor qc = slice(q, 2, t0, t1), kc = slice(k, 2, t0, t1), vc = slice(v, 2, t0, t1);
    Tensor lower = ones({c, c}, q.dtype());  // 1 where key s <= query t inside the chunk
    dispatch_floating(q.dtype(), op, [&]<class D>() {
      D* p = lower.data<D>();
      for (int64_t t = 0; t < c; ++t)
        for (int64_t s = t + 1; s < c; ++s) p[t * c + s] = D(0);
    });
    lower = lower.to(q.device());
    Tensor a = mul(matmul(qc, transpose(kc, -2, -1)), lower);  // [B,H,c,c]
    Tensor num = matmul(a, vc);
    Tensor den = sum(a, {-1}, true);
    if (S.defined()) {
      num = add(num, matmul(qc, S));
      den = add(den, matmul(qc, transpose(z, -2, -1)));
    }
    outs.push_back(div(num, add(den, eps)));
    Tensor kv = matmul(transpose(kc, -2, -1), vc), ksum = sum(kc, {2}, true);
    S = S.defined() ? add(S, kv) : kv;
    z = z.defined() ? add(z, ksum) : ksum;
  }
  return outs.size() == 1 ? outs[0] : cat(outs, 2);
}

// The fused scaled_dot_product_attention's gradcheck cases (without dropout
// and with a mask that needs no gradient it is one node); the composite's
// (dropout, causal linear attention) are in tests/test_nn_ops.cpp and
// tests/test_lm.cpp.
void register_attention_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // B=2, H=2, T=5, S=5 (S=4 without the band), Dh=3, Dv=4.
  auto qkv = [](int64_t S) {
    return [S] { return V{gc_input({2, 2, 5, 3}, -1, 1, 71), gc_input({2, 2, S, 3}, -1, 1, 72),
                          gc_input({2, 2, S, 4}, -1, 1, 73)}; };
  };
  // An additive [T, S] mask with one key hidden from query 2 and a key
  // padding mask [B, 1, 1, S] hiding the last key of batch item 1.
  auto mask_ts = [] {
    Tensor m = zeros({5, 4}, DType::Float64);
    m.data<double>()[2 * 4 + 1] = -std::numeric_limits<double>::infinity();
    m.data<double>()[3 * 4 + 0] = 0.7;
    return m;
  };
  auto key_padding = [] {
    Tensor m = zeros({2, 1, 1, 5}, DType::Float64);
    m.data<double>()[5 + 4] = -std::numeric_limits<double>::infinity();
    return m;
  };
  // A mask in the dtype and on the device of q (the device parity tests run
  // these cases in float32 on the stand-in device).
  auto like_q = [](const Tensor& m, const Tensor& q) { return to_dtype(m, q.dtype()).to(q.device()); };
  t.push_back({OpId::ScaledDotProductAttention, {"cpu"}, {"q", "k", "v"},
               {{"causal, B=2 H=2 T=S=5", qkv(5),
                 [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), true); }},
                {"no mask, T=5 S=4", qkv(4),
                 [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }},
                {"additive [T,S] mask, T=5 S=4", qkv(4),
                 [mask_ts, like_q](const V& v) {
                   return scaled_dot_product_attention(v[0], v[1], v[2], like_q(mask_ts(), v[0]));
                 }},
                {"window 2 and key padding, scale 0.7", qkv(5),
                 [key_padding, like_q](const V& v) {
                   return scaled_dot_product_attention(v[0], v[1], v[2], like_q(key_padding(), v[0]),
                                                       false, 2, 0.0, 0.7);
                 }}}});
}

}  // namespace tmem
