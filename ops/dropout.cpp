// Dropout: mask drawing, forward and backward side by side.
// Shapes: x[...] -> y[...]; saved for backward: mask[...] (x's dtype).
// On a device the mask is still drawn here on the host, by the same loop over
// the same Generator as the CPU path (so a seed gives one mask on every
// device), copied to the device, and the backend's dropout_apply kernel
// (ops/dispatch.h) multiplies by it, forward and backward.
#include "tmem/ops/dropout.h"

#include <algorithm>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/cpu/simd.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

namespace {

// y = x * mask on x's device with kernels k (mask: the host-drawn mask,
// copied there), with its backward.
Tensor dropout_device(const OpKernels& k, const Tensor& x, const Tensor& host_mask) {
  const Device dev = x.device();
  Tensor mask = empty(host_mask.shape(), host_mask.dtype(), dev);
  copy_data(mask, host_mask);
  Tensor xc = contiguous_data(x);
  Tensor out = empty(x.shape(), x.dtype(), dev);
  k.dropout_apply(dev.index, xc.data<float>(), mask.data<float>(), out.data<float>(), out.numel());
  record(OpId::Dropout, {x}, {out}, {mask}, [](const Node& n, const std::vector<Tensor>& g) {
    const Tensor& m = n.saved_tensor(0);
    Tensor go = contiguous_data(g[0]);
    Tensor gx = empty(m.shape(), m.dtype(), m.device());
    device_kernels(OpId::Dropout, m)
        .dropout_apply(m.device().index, go.data<float>(), m.data<float>(), gx.data<float>(),
                       gx.numel());
    return std::vector<Tensor>{gx};
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  const OpRange range(OpId::Dropout);
  check<ValueError>(p >= 0.0 && p <= 1.0, "dropout: expected a probability p in [0, 1], but got ",
                    p);
  check<DtypeError>(is_floating(x.dtype()),
                    "dropout: expected a floating dtype (float32 or float64), but got ",
                    dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
  const OpKernels* kernels = x.device().is_cpu() ? nullptr : &device_kernels(OpId::Dropout, x);
  Tensor mask = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "dropout", [&]<class T>() {
    T* m = mask.data<T>();
    const int64_t n = mask.numel();
    if (p == 1.0) {
      std::fill(m, m + n, T(0));
      return;
    }
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    for (int64_t i = 0; i < n; ++i) m[i] = gen.uniform() < p ? T(0) : keep;
  });
  if (kernels) return dropout_device(*kernels, x, mask);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "dropout", [&]<class T>() {
    cpu::apply<T>(out, [](auto a, auto b) { return a * b; }, x, mask);
  });
  record(OpId::Dropout, {x}, {out}, {mask}, [](const Node& n, const std::vector<Tensor>& g) {
    const Tensor& m = n.saved_tensor(0);
    Tensor gx = empty(m.shape(), m.dtype());
    dispatch_floating(m.dtype(), "dropout_backward", [&]<class T>() {
      cpu::apply<T>(gx, [](auto a, auto b) { return a * b; }, g[0], m);
    });
    return std::vector<Tensor>{gx};
  });
  return out;
}

void register_dropout_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  // A fresh generator per call: every evaluation draws the same mask.
  t.push_back({OpId::Dropout, {"cpu"}, {"input"},
               {{"p 0.5, fixed seed", [] { return V{gc_input({4, 19})}; },
                 [](const V& v) {
                   Generator gen(7);
                   return dropout(v[0], 0.5, true, gen);
                 }},
                {"p 0.2 on [2,3,4], fixed seed", [] { return V{gc_input({2, 3, 4}, -1, 1, 2)}; },
                 [](const V& v) {
                   Generator gen(11);
                   return dropout(v[0], 0.2, true, gen);
                 }},
                {"p 1 (all dropped)", [] { return V{gc_input({3, 4}, -1, 1, 3)}; },
                 [](const V& v) {
                   Generator gen(3);
                   return dropout(v[0], 1.0, true, gen);
                 }}}});
}

}  // namespace tmem
