// Scaled dot-product attention and causal linear attention as composites of
// differentiable ops.
// Shapes: q[B,H,T,Dh], k[B,H,S,Dh], v[B,H,S,Dv]; scores/weights [B,H,T,S];
// out [B,H,T,Dv].
#include "tmem/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

// Attention is a composite with no OpId of its own: every op it is made of
// has its own entry and gradcheck cases, and the composites' gradchecks
// (causal, additive mask, window; causal linear attention) live in
// tests/test_nn_ops.cpp and tests/test_lm.cpp. Nothing is added to the table.
void register_attention_ops(std::vector<OpInfo>&) {}

}  // namespace tmem
