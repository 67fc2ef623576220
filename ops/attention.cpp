// Scaled dot-product attention: one fused op (one tape node) without dropout,
// else a composite of differentiable ops; causal linear attention, a
// composite. Shapes: q[B,H,T,Dh], k[B,H,S,Dh], v[B,H,S,Dv]; scores/weights
// [B,H,T,S]; out [B,H,T,Dv]; lse [B,H,T].
// The fused op is one body over the kernel tables
// (ops/cpu/attention_kernel.cpp, cuda/attention.cu).
#include "tmem/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
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

// The fused op's launch arguments; the mask (or undefined) broadcast to
// [B,H,T,S] through its strides.
AttentionArgs fused_args(const Shape& qs, const Shape& ks, const Shape& vs, const Tensor& mask, bool is_causal,
                int64_t window, double scale) {
  AttentionArgs a;
  a.B = qs[0];
  a.H = qs[1];
  a.T = qs[2];
  a.S = ks[2];
  a.Dh = qs[3];
  a.Dv = vs[3];
  a.scale = scale;
  a.causal = is_causal;
  // A window of T or more hides only what causality hides (query t < T sees
  // (t - T, t]); capped, the kernels' index sums (key + window) cannot overflow.
  a.window = std::min(window, a.T);
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
  const AttentionArgs a = fused_args(q.shape(), k.shape(), v.shape(), mask, is_causal, window, scale);
  Tensor out = empty({a.B, a.H, a.T, a.Dv}, q.dtype(), dev), lse = empty({a.B, a.H, a.T}, q.dtype(), dev);
  dispatch_kernels(OpId::ScaledDotProductAttention, q, [&]<class S>(const KernelTable<S>& kern) {
    kern.attention_forward(dev.index, a, qc.data<S>(), kc.data<S>(), vc.data<S>(), ptr_or_null<S>(mask),
                           out.data<S>(), lse.data<S>());
  });
  record(OpId::ScaledDotProductAttention, {q, k, v, attn_mask}, {out}, {qc, kc, vc, mask, out, lse},
         [a](const Node& n, const std::vector<Tensor>& g) {
           const Tensor &qs = n.saved_tensor(0), &ks = n.saved_tensor(1), &vs = n.saved_tensor(2),
                        &ms = n.saved_tensor(3), &os = n.saved_tensor(4), &ls = n.saved_tensor(5);
           const Device d = qs.device();
           const Tensor go = contiguous_data(g[0]);
           std::vector<Tensor> grads(4);
           for (int i = 0; i < 3; ++i)
             if (n.needs_input_grad(i)) grads[i] = empty(n.input_shapes[i], n.input_dtypes[i], d);
           dispatch_kernels(OpId::ScaledDotProductAttention, qs, [&]<class S>(const KernelTable<S>& kern) {
             kern.attention_backward(d.index, a, qs.data<S>(), ks.data<S>(), vs.data<S>(), ptr_or_null<S>(ms),
                                     os.data<S>(), ls.data<S>(), go.data<S>(), ptr_or_null<S>(grads[0]),
                                     ptr_or_null<S>(grads[1]), ptr_or_null<S>(grads[2]));
           });
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
  check<ValueError>(!scale || std::isfinite(*scale), kOp, ": expected a finite scale, but got scale ",
                    scale.value_or(0.0));
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
  if (T == 0) return mul(v, 0.0);  // [B,H,0,Dv], on v's tape
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
// (dropout, causal linear attention) are in tests/test_attention.cpp and
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
