// Layer norm over the last dim: the checks and the one body over the kernel
// tables (ops/cpu/layer_norm_kernel.cpp, cuda/layer_norm.cu). Shapes: x[N, C]
// (leading dims flattened into N rows), weight[C], bias[C]; saved for
// backward: x, mean[N], rstd[N] and (when defined) weight.
#include "tmem/ops/layer_norm.h"

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
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

// A T pointer to t's data, or null when t is undefined.
template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
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
  const Device dev = x.device();
  Tensor xc = contiguous_data(x);
  Tensor wc = weight.defined() ? contiguous_data(weight) : Tensor();
  Tensor bc = bias.defined() ? contiguous_data(bias) : Tensor();
  Tensor y = empty(x.shape(), x.dtype(), dev);
  Tensor mean = empty({N}, x.dtype(), dev);
  Tensor rstd = empty({N}, x.dtype(), dev);
  dispatch_kernels(OpId::LayerNorm, x, [&]<class T>(const KernelTable<T>& k) {
    k.layer_norm_forward(dev.index, xc.data<T>(), data_or_null<T>(wc), data_or_null<T>(bc),
                         y.data<T>(), mean.data<T>(), rstd.data<T>(), N, C, eps);
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
           const Device d = xs.device();
           Tensor go = contiguous_data(g[0]);
           Tensor gx, gw, gb;
           if (n.needs_input_grad(0)) gx = empty(xs.shape(), xs.dtype(), d);
           if (n.needs_input_grad(1)) gw = empty({C}, xs.dtype(), d);
           if (n.needs_input_grad(2)) gb = empty({C}, xs.dtype(), d);
           dispatch_kernels(OpId::LayerNorm, xs, [&]<class T>(const KernelTable<T>& k) {
             if (gx.defined())
               k.layer_norm_backward_input(d.index, xs.data<T>(), go.data<T>(),
                                           data_or_null<T>(ws), ms.data<T>(), rs.data<T>(),
                                           gx.data<T>(), N, C);
             if (gw.defined() || gb.defined())
               k.layer_norm_backward_params(d.index, xs.data<T>(), go.data<T>(), ms.data<T>(),
                                            rs.data<T>(), data_or_null<T>(gw),
                                            data_or_null<T>(gb), N, C);
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
