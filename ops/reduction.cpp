// Reductions. Shapes: input any rank; the reduced dims are moved last and made
// contiguous, so every kernel reduces rows [O, R] (O kept elements, R reduced);
// the sum of a contiguous input over its leading dims reads it in place as
// columns [R, O] instead (sum_columns). One body per op over the kernel
// tables (ops/dispatch.h; CPU kernels in ops/cpu/reduction_kernel.cpp).
#include "tmem/ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

struct Plan {
  Shape in, keep, out, perm;  // perm: kept dims then reduced dims
  int64_t O = 1, R = 1;
  int64_t reduced = 0;  // how many dims are reduced
};

Plan make_plan(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  Plan p;
  p.in = a.shape();
  const int64_t r = a.dim();
  std::vector<bool> red(r, dims.empty());
  for (int64_t d : dims) {
    check<IndexError>(r > 0 || d == 0 || d == -1, op, ": dim ", d, " is out of range for a 0-d tensor");
    if (r == 0) continue;
    int64_t k = normalize_dim(d, r, op);
    check<ValueError>(!red[k], op, ": dim ", d, " appears more than once in dims");
    red[k] = true;
  }
  for (int64_t i = 0; i < r; ++i) {
    p.keep.push_back(red[i] ? 1 : p.in[i]);
    if (!red[i]) {
      p.perm.push_back(i);
      p.O *= p.in[i];
    }
  }
  for (int64_t i = 0; i < r; ++i)
    if (red[i]) {
      p.perm.push_back(i);
      p.R *= p.in[i];
      ++p.reduced;
    }
  for (int64_t i = 0; i < r; ++i)
    if (!red[i] || keepdim) p.out.push_back(p.keep[i]);
  return p;
}

// The input's data as contiguous rows [O, R].
Tensor rows_of(const Tensor& a, const Plan& p) {
  Shape shape, strides;
  for (int64_t d : p.perm) {
    shape.push_back(a.shape()[d]);
    strides.push_back(a.strides()[d]);
  }
  return contiguous_data(make_view(a, shape, strides, a.offset()));
}

// g (shape p.out or p.keep) broadcast to the input's shape, times `scale`:
// the backward of sum (op Sum) and mean (op Mean).
Tensor expand_grad(OpId id, const Tensor& g, const Plan& p, double scale) {
  Tensor gk = reshape_data(g, p.keep);
  Tensor out = empty(p.in, g.dtype(), g.device());
  dispatch_kernels(id, g, [&]<class T>(const KernelTable<T>& k) {
    k.unary_forward(out.device().index, OpId::MulScalar, {scale},
                    elementwise_args<2>(out, {gk}, op_name(id).data()));
  });
  return out;
}

// Whether a is contiguous and its reduced dims are its leading ones, so that
// it is rows [R, O] as it lies (a bias gradient summed over B and T, any
// broadcast operand's gradient): sum_columns then reads it in place.
bool leading_dims_reduced(const Tensor& a, const Plan& p) {
  const auto r = static_cast<int64_t>(p.perm.size()), kept = r - p.reduced;
  if (p.reduced == 0 || kept == 0 || !a.is_contiguous()) return false;
  for (int64_t i = 0; i < r; ++i)
    if (p.perm[i] != (i < kept ? p.reduced + i : i - kept)) return false;
  return true;
}

Tensor reduce_sum(OpId id, const Tensor& a, const Plan& p, double scale) {
  Tensor out = empty(p.out, a.dtype(), a.device());
  const bool columns = leading_dims_reduced(a, p);
  dispatch_kernels(id, a, [&]<class T>(const KernelTable<T>& k) {
    if (columns) {
      k.sum_columns(a.device().index, a.template data<T>(), out.template data<T>(), p.R, p.O, scale);
      return;
    }
    Tensor rows = rows_of(a, p);
    k.sum_rows(a.device().index, rows.template data<T>(), out.template data<T>(), p.O, p.R, scale);
  });
  return out;
}

// The values and indices of max or min along dim, without a tape node
// (in the caller's OpRange).
ValuesIndices extreme_values(const Tensor& a, const Plan& p, OpId id, bool is_max) {
  const char* name = op_name(id).data();
  check<ShapeError>(p.R > 0, name, ": cannot reduce an empty dim of shape ", shape_str(a.shape()));
  Tensor rows = rows_of(a, p);
  Tensor values = empty(p.out, a.dtype(), a.device());
  Tensor indices = empty(p.out, DType::Int64, a.device());
  dispatch_kernels(id, a, [&]<class T>(const KernelTable<T>& k) {
    k.extreme_rows(a.device().index, rows.template data<T>(), values.template data<T>(),
                   indices.data<int64_t>(), p.O, p.R, is_max);
  });
  return {values, indices};
}

ValuesIndices extreme(const Tensor& a, int64_t dim, bool keepdim, bool is_max) {
  OpId id = is_max ? OpId::Max : OpId::Min;
  const OpRange range(id);
  const Plan p = make_plan(a, {dim}, keepdim, op_name(id).data());
  auto [values, indices] = extreme_values(a, p, id, is_max);
  record(id, {a}, {values}, {indices}, [id, p](const Node& n, const Grads& g) {
    const Tensor& ix = n.saved_tensor(0);
    Shape perm_shape;
    for (int64_t d : p.perm) perm_shape.push_back(p.in[d]);
    Tensor rows = zeros(perm_shape, g[0].dtype(), g[0].device());
    Tensor gc = contiguous_data(g[0]);
    dispatch_kernels(id, gc, [&]<class T>(const KernelTable<T>& k) {
      k.extreme_rows_backward(gc.device().index, gc.template data<T>(), ix.data<int64_t>(),
                              rows.template data<T>(), p.O, p.R);
    });
    std::vector<int64_t> inv(p.perm.size());
    for (size_t k = 0; k < p.perm.size(); ++k) inv[p.perm[k]] = static_cast<int64_t>(k);
    return Grads{contiguous_data(permute(rows, inv))};
  });
  return {values, indices};
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const OpRange range(OpId::Sum);
  Plan p = make_plan(a, dims, keepdim, "sum");
  Tensor out = reduce_sum(OpId::Sum, a, p, 1.0);
  record(OpId::Sum, {a}, {out}, {}, [p](const Node& n, const Grads& g) {
    return Grads{expand_grad(OpId::Sum, g[0], p, 1.0)};
  });
  return out;
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const OpRange range(OpId::Mean);
  Plan p = make_plan(a, dims, keepdim, "mean");
  double scale = 1.0 / static_cast<double>(p.R);
  Tensor out = reduce_sum(OpId::Mean, a, p, scale);
  record(OpId::Mean, {a}, {out}, {}, [p, scale](const Node& n, const Grads& g) {
    return Grads{expand_grad(OpId::Mean, g[0], p, scale)};
  });
  return out;
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  const OpRange range(OpId::Var);
  Plan p = make_plan(a, dims, keepdim, "var");
  // As PyTorch: the divisor is max(N - correction, 0), so correction >= N
  // gives inf (NaN for a constant row), never a negative variance.
  const double denom = std::max(static_cast<double>(p.R) - static_cast<double>(correction), 0.0);
  Tensor rows = rows_of(a, p);
  Tensor out = empty(p.out, a.dtype(), a.device());
  Tensor mu = empty(p.keep, a.dtype(), a.device());
  dispatch_kernels(OpId::Var, a, [&]<class T>(const KernelTable<T>& k) {
    k.var_rows(a.device().index, rows.template data<T>(), out.template data<T>(), mu.template data<T>(), p.O,
               p.R, denom);
  });
  record(OpId::Var, {a}, {out}, {a, mu}, [p, denom](const Node& n, const Grads& g) {
    Tensor gk = reshape_data(g[0], p.keep);
    Tensor gx = empty(p.in, gk.dtype(), gk.device());
    dispatch_kernels(OpId::Var, gk, [&]<class T>(const KernelTable<T>& k) {
      k.var_backward(gk.device().index,
                     elementwise_args<4>(gx, {n.saved_tensor(0), n.saved_tensor(1), gk}, "var"), 2.0 / denom);
    });
    return Grads{gx};
  });
  return out;
}

ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim) { return extreme(a, dim, keepdim, true); }
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim) { return extreme(a, dim, keepdim, false); }
namespace {

// The max or min of every element; its gradient is shared evenly among the
// elements equal to it (every NaN when it is NaN), as torch 1.13's
// evenly_distribute_backward. The shares are counted on the host.
Tensor extreme_all(const Tensor& a, bool is_max) {
  const OpId id = is_max ? OpId::Max : OpId::Min;
  const OpRange range(id);
  const Tensor flat = reshape(a.detach(), {-1});
  const Tensor value = extreme_values(flat, make_plan(flat, {0}, false, op_name(id).data()), id, is_max).values;
  record(id, {a}, {value}, {a.detach(), value}, [](const Node& n, const Grads& g) {
    const Tensor& x = n.saved_tensor(0);
    const double m = n.saved_tensor(1).item();
    std::vector<double> share = x.to_vector();
    double count = 0;
    for (double& s : share) {
      s = std::isnan(m) ? std::isnan(s) : s == m;
      count += s;
    }
    for (double& s : share) s /= count;
    return Grads{mul(g[0], tensor(share, x.shape(), g[0].dtype()).to(g[0].device()))};
  });
  return value;
}

}  // namespace

Tensor max(const Tensor& a) { return extreme_all(a, true); }
Tensor min(const Tensor& a) { return extreme_all(a, false); }

namespace {
Tensor arg_extreme(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  NoGradGuard no_grad;
  if (dim) return extreme(a, *dim, keepdim, is_max).indices;
  Tensor ix = extreme(reshape(a, {-1}), 0, false, is_max).indices;
  return keepdim ? reshape(ix, Shape(a.shape().size(), 1)) : ix;
}
}  // namespace

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(a, dim, keepdim, true); }
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(a, dim, keepdim, false); }

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  check<ShapeError>(shape.size() <= g.shape().size() &&
                        broadcast_shapes(shape, g.shape(), "sum_to") == g.shape(),
                    "sum_to: shape ", shape_str(shape), " does not broadcast to ",
                    shape_str(g.shape()));
  std::vector<int64_t> dims;
  size_t lead = g.shape().size() - shape.size();
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) dims.push_back(static_cast<int64_t>(i));
  return reshape(sum(g, dims, true), shape);
}

void register_reduction_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  auto in = [] { return V{gc_input({3, 4, 5})}; };
  t.push_back({OpId::Sum, {"cpu"}, {"input"},
               {{"all", in, [](const V& v) { return sum(v[0]); }},
                {"dims {0,2} keepdim", in, [](const V& v) { return sum(v[0], {0, 2}, true); }}}});
  t.push_back({OpId::Mean, {"cpu"}, {"input"},
               {{"dim -1", in, [](const V& v) { return mean(v[0], {-1}); }}}});
  t.push_back({OpId::Var, {"cpu"}, {"input"},
               {{"dim 1 unbiased", in, [](const V& v) { return var(v[0], {1}); }},
                {"all, correction 0", in, [](const V& v) { return var(v[0], {}, 0); }}}});
  t.push_back({OpId::Max, {"cpu"}, {"input"},
               {{"dim 1", in, [](const V& v) { return max(v[0], 1).values; }},
                {"all", in, [](const V& v) { return max(v[0]); }}}});
  t.push_back({OpId::Min, {"cpu"}, {"input"},
               {{"dim 0 keepdim", in, [](const V& v) { return min(v[0], 0, true).values; }}}});
}

}  // namespace tmem
