// Dropout: the mask drawing and the one body over the kernel tables
// (ops/cpu/dropout_kernel.cpp, cuda/dropout.cu). Shapes: x[...] -> y[...];
// saved for backward: mask[...] (x's dtype). The mask is drawn on the host
// by one loop over the Generator (so a seed gives one mask on every device)
// and copied to x's device; dropout_apply multiplies by it, forward and
// backward.
#include "tmem/ops/dropout.h"

#include <algorithm>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"

namespace tmem {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  const OpRange range(OpId::Dropout);
  check<ValueError>(p >= 0.0 && p <= 1.0, "dropout: expected a probability p in [0, 1], but got ",
                    p);
  check<DtypeError>(is_floating(x.dtype()),
                    "dropout: expected a floating dtype (float32 or float64), but got ",
                    dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
  Tensor host_mask = empty(x.shape(), x.dtype());
  dispatch_floating(x.dtype(), "dropout", [&]<class T>() {
    T* m = host_mask.data<T>();
    const int64_t n = host_mask.numel();
    if (p == 1.0) {
      std::fill(m, m + n, T(0));
      return;
    }
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    for (int64_t i = 0; i < n; ++i) m[i] = gen.uniform() < p ? T(0) : keep;
  });
  const Device dev = x.device();
  Tensor mask = host_mask.to(dev);
  Tensor xc = contiguous_data(x);
  Tensor out = empty(x.shape(), x.dtype(), dev);
  dispatch_kernels(OpId::Dropout, x, [&]<class T>(const KernelTable<T>& k) {
    k.dropout_apply(dev.index, xc.data<T>(), mask.data<T>(), out.data<T>(), out.numel());
  });
  record(OpId::Dropout, {x}, {out}, {mask}, [](const Node& n, const std::vector<Tensor>& g) {
    const Tensor& m = n.saved_tensor(0);
    Tensor go = contiguous_data(g[0]);
    Tensor gx = empty(m.shape(), m.dtype(), m.device());
    dispatch_kernels(OpId::Dropout, m, [&]<class T>(const KernelTable<T>& k) {
      k.dropout_apply(m.device().index, go.data<T>(), m.data<T>(), gx.data<T>(), gx.numel());
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
