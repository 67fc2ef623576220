// Layer norm over the last dim: forward and backward side by side.
// Shapes: x[N, C] (leading dims flattened into N rows), weight[C], bias[C];
// saved for backward: x, mean[N], rstd[N] and (when defined) weight. On a
// device the backend's layer_norm kernels (ops/dispatch.h) compute the same
// from contiguous copies, forward and backward.
#include "tmem/ops/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

void check_param(const Tensor& p, const Tensor& x, int64_t C, const char* what) {
  if (!p.defined()) return;
  check<DeviceError>(p.device() == x.device(),
                     "layer_norm: expected operands on one device, but got ", x.device().str(),
                     " and ", p.device().str());
  check<ShapeError>(p.shape() == Shape{C}, "layer_norm: expected ", what, " of shape [", C,
                    "] (the last dim of input), but got ", what, shape_str(p.shape()), " for input",
                    shape_str(x.shape()));
  check<DtypeError>(p.dtype() == x.dtype(), "layer_norm: expected ", what, " of dtype ",
                    dtype_name(x.dtype()), " (the input's), but got ", dtype_name(p.dtype()));
}

// sum (x - mu)^2: the second pass of the two-pass variance.
template <class T>
T sum_sq_dev(const T* x, T mu, int64_t n) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B d = B::load_unaligned(x + i) - B(mu);
    acc += d * d;
  }
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += (x[i] - mu) * (x[i] - mu);
  return s;
}

// y = (x - mu) * rstd * w + b (w, b may be null).
template <class T>
void normalize_row(T* y, const T* x, T mu, T rstd, const T* w, const T* b, int64_t n) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B v = (B::load_unaligned(x + i) - B(mu)) * B(rstd);
    if (w) v *= B::load_unaligned(w + i);
    if (b) v += B::load_unaligned(b + i);
    v.store_unaligned(y + i);
  }
  for (; i < n; ++i) {
    T v = (x[i] - mu) * rstd;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

// dx for one row: dxhat = g * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <class T>
void input_grad_row(T* gx, const T* x, const T* g, const T* w, T mu, T rstd, int64_t n) {
  using B = cpu::Batch<T>;
  constexpr int64_t W = B::size;
  B a(T(0)), c(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B dxh = B::load_unaligned(g + i);
    if (w) dxh *= B::load_unaligned(w + i);
    a += dxh;
    c += dxh * ((B::load_unaligned(x + i) - B(mu)) * B(rstd));
  }
  T sa = xsimd::hadd(a), sc = xsimd::hadd(c);
  for (; i < n; ++i) {
    T dxh = w ? g[i] * w[i] : g[i];
    sa += dxh;
    sc += dxh * (x[i] - mu) * rstd;
  }
  const T ma = sa / static_cast<T>(n), mc = sc / static_cast<T>(n);
  for (i = 0; i + W <= n; i += W) {
    B dxh = B::load_unaligned(g + i);
    if (w) dxh *= B::load_unaligned(w + i);
    B xh = (B::load_unaligned(x + i) - B(mu)) * B(rstd);
    (B(rstd) * (dxh - B(ma) - xh * B(mc))).store_unaligned(gx + i);
  }
  for (; i < n; ++i) {
    T dxh = w ? g[i] * w[i] : g[i];
    gx[i] = rstd * (dxh - ma - (x[i] - mu) * rstd * mc);
  }
}

// A float32 pointer to t's data, or null when t is undefined.
float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// layer_norm of x [N, C] on a device, with its backward (checks done).
Tensor layer_norm_device(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                         int64_t N, int64_t C) {
  const OpKernels& k = device_kernels(OpId::LayerNorm, x);
  const Device dev = x.device();
  Tensor xc = contiguous_data(x);
  Tensor wc = weight.defined() ? contiguous_data(weight) : Tensor();
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  Tensor mean = empty({N}, x.dtype(), dev);
  Tensor rstd = empty({N}, x.dtype(), dev);
  k.layer_norm_forward(dev.index, xc.data<float>(), data_or_null(wc), data_or_null(bc),
                       y.data<float>(), mean.data<float>(), rstd.data<float>(), N, C, eps);
  std::vector<Tensor> saved{xc, mean, rstd};
  if (wc.defined()) saved.push_back(wc);
  record(OpId::LayerNorm, {x, weight, bias}, {y}, saved,
         [C, N, has_w = wc.defined()](const Node& n, const Grads& g) {
           const Tensor& xs = n.saved_tensor(0);
           const Tensor& ms = n.saved_tensor(1);
           const Tensor& rs = n.saved_tensor(2);
           const Tensor ws = has_w ? n.saved_tensor(3) : Tensor();
           const OpKernels& kb = device_kernels(OpId::LayerNorm, xs);
           const Device d = xs.device();
           Tensor go = contiguous_data(g[0]);
           Tensor gx, gw, gb;
           if (n.needs_input_grad(0)) {
             gx = empty(xs.shape(), xs.dtype(), d);
             kb.layer_norm_backward_input(d.index, xs.data<float>(), go.data<float>(),
                                          data_or_null(ws), ms.data<float>(), rs.data<float>(),
                                          gx.data<float>(), N, C);
           }
           if (n.needs_input_grad(1)) gw = empty({C}, xs.dtype(), d);
           if (n.needs_input_grad(2)) gb = empty({C}, xs.dtype(), d);
           if (gw.defined() || gb.defined())
             kb.layer_norm_backward_params(d.index, xs.data<float>(), go.data<float>(),
                                           ms.data<float>(), rs.data<float>(), data_or_null(gw),
                                           data_or_null(gb), N, C);
           return Grads{gx, gw, gb};
         });
  return y;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const OpRange range(OpId::LayerNorm);
  check<ShapeError>(x.dim() >= 1,
                    "layer_norm: expected an input with at least 1 dim [..., C], but got ",
                    shape_str(x.shape()));
  check<ValueError>(eps >= 0, "layer_norm: expected eps >= 0, but got ", eps);
  const int64_t C = x.shape().back();
  const int64_t N = C ? x.numel() / C : 0;
  check_param(weight, x, C, "weight");
  check_param(bias, x, C, "bias");
  if (!x.device().is_cpu()) return layer_norm_device(x, weight, bias, eps, N, C);
  Tensor xc = contiguous_data(x);
  Tensor wc = weight.defined() ? contiguous_data(weight) : Tensor();
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor y = empty(x.shape(), x.dtype());
  Tensor mean = empty({N}, x.dtype());
  Tensor rstd = empty({N}, x.dtype());
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const T* xp = xc.data<T>();
    const T* wp = wc.defined() ? wc.data<T>() : nullptr;
    const T* bp = bc.defined() ? bc.data<T>() : nullptr;
    T* yp = y.data<T>();
    T* mp = mean.data<T>();
    T* rp = rstd.data<T>();
    const T e = static_cast<T>(eps);
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
    for (int64_t i = 0; i < N; ++i) {
      const T* row = xp + i * C;
      const T mu = cpu::row_sum(row, C) / static_cast<T>(C);
      const T var = sum_sq_dev(row, mu, C) / static_cast<T>(C);
      const T r = T(1) / std::sqrt(var + e);
      mp[i] = mu;
      rp[i] = r;
      normalize_row(yp + i * C, row, mu, r, wp, bp, C);
    }
  });
  // The weight is saved only when defined (it is the 4th saved tensor then).
  std::vector<Tensor> saved{xc, mean, rstd};
  if (wc.defined()) saved.push_back(wc);
  record(OpId::LayerNorm, {x, weight, bias}, {y}, saved,
         [C, N, has_w = wc.defined()](const Node& n, const Grads& g) {
           const Tensor& xs = n.saved_tensor(0);
           const Tensor& ms = n.saved_tensor(1);
           const Tensor& rs = n.saved_tensor(2);
           const Tensor ws = has_w ? n.saved_tensor(3) : Tensor();
           Tensor go = contiguous_data(g[0]);
           Tensor gx, gw, gb;
           if (n.needs_input_grad(0)) gx = empty(xs.shape(), xs.dtype());
           if (n.needs_input_grad(1)) gw = empty({C}, xs.dtype());
           if (n.needs_input_grad(2)) gb = empty({C}, xs.dtype());
           dispatch_floating(xs.dtype(), "layer_norm_backward", [&]<class T>() {
             using B = cpu::Batch<T>;
             constexpr int64_t W = B::size;
             const T* xp = xs.data<T>();
             const T* gp = go.data<T>();
             const T* wp = ws.defined() ? ws.data<T>() : nullptr;
             const T* mp = ms.data<T>();
             const T* rp = rs.data<T>();
             if (gx.defined()) {
               T* gxp = gx.data<T>();
#pragma omp parallel for if (N * C >= kParallelGrain && N > 1)
               for (int64_t i = 0; i < N; ++i)
                 input_grad_row(gxp + i * C, xp + i * C, gp + i * C, wp, mp[i], rp[i], C);
             }
             if (!gw.defined() && !gb.defined()) return;
             // dweight, dbias: column sums over rows; threads own column blocks.
             T* gwp = gw.defined() ? gw.data<T>() : nullptr;
             T* gbp = gb.defined() ? gb.data<T>() : nullptr;
             constexpr int64_t CB = 16 * W;
             const int64_t blocks = (C + CB - 1) / CB;
#pragma omp parallel for if (N * C >= kParallelGrain && blocks > 1)
             for (int64_t blk = 0; blk < blocks; ++blk) {
               const int64_t c0 = blk * CB, c1 = std::min(C, c0 + CB);
               if (gwp) std::fill(gwp + c0, gwp + c1, T(0));
               if (gbp) std::fill(gbp + c0, gbp + c1, T(0));
               for (int64_t i = 0; i < N; ++i) {
                 const T* xr = xp + i * C;
                 const T* gr = gp + i * C;
                 const T mu = mp[i], r = rp[i];
                 int64_t c = c0;
                 for (; c + W <= c1; c += W) {
                   B gv = B::load_unaligned(gr + c);
                   if (gwp) {
                     B xh = (B::load_unaligned(xr + c) - B(mu)) * B(r);
                     (B::load_unaligned(gwp + c) + gv * xh).store_unaligned(gwp + c);
                   }
                   if (gbp) (B::load_unaligned(gbp + c) + gv).store_unaligned(gbp + c);
                 }
                 for (; c < c1; ++c) {
                   if (gwp) gwp[c] += gr[c] * (xr[c] - mu) * r;
                   if (gbp) gbp[c] += gr[c];
                 }
               }
             }
           });
           return Grads{gx, gw, gb};
         });
  return y;
}

void register_layer_norm_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  t.push_back({OpId::LayerNorm, {"cpu"}, {"input", "weight", "bias"},
               {{"[2,3,5] weight and bias",
                 [] {
                   return V{gc_input({2, 3, 5}, -2, 2), gc_input({5}, 0.5, 1.5, 2),
                            gc_input({5}, -1, 1, 3)};
                 },
                 [](const V& v) { return layer_norm(v[0], v[1], v[2]); }},
                {"[3,19] (vector body + tail)",
                 [] {
                   return V{gc_input({3, 19}, -2, 2, 4), gc_input({19}, 0.5, 1.5, 5),
                            gc_input({19}, -1, 1, 6)};
                 },
                 [](const V& v) { return layer_norm(v[0], v[1], v[2]); }},
                {"weight and bias undefined", [] { return V{gc_input({4, 6}, -2, 2, 7)}; },
                 [](const V& v) { return layer_norm(v[0], Tensor(), Tensor()); }},
                {"weight only, rows offset by 100",
                 [] { return V{gc_input({3, 4}, 99, 101, 8), gc_input({4}, 0.5, 1.5, 9)}; },
                 [](const V& v) { return layer_norm(v[0], v[1], Tensor()); }},
                {"bias only, eps 0.1",
                 [] { return V{gc_input({3, 4}, -1, 1, 10), gc_input({4}, -1, 1, 11)}; },
                 [](const V& v) { return layer_norm(v[0], Tensor(), v[1], 0.1); }}}});
}

}  // namespace tmem
