// Dropout: mask drawing, forward and backward side by side.
// Shapes: x[...] -> y[...]; saved for backward: mask[...] (x's dtype).
#include "ops/dropout.h"

#include <algorithm>

#include "core/autograd.h"
#include "ops/cpu/simd.h"
#include "ops/op_table.h"

namespace tmem {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check<ValueError>(p >= 0.0 && p <= 1.0, "dropout: expected a probability p in [0, 1], but got ",
                    p);
  check_cpu(x, "dropout");
  check<DtypeError>(is_floating(x.dtype()),
                    "dropout: expected a floating dtype (float32 or float64), but got ",
                    dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
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
