// Elementwise ops. Shapes: any; binary ops broadcast (NumPy rules). One body
// per op over the kernel tables (ops/dispatch.h): the CPU's kernels are
// ops/cpu/elementwise_kernel.cpp (one inlined SIMD functor per op), the
// CUDA's cuda/elementwise.cu, with the same formulas.
#include "tmem/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tmem/core/autograd.h"
#include "tmem/core/profiler.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/op_table.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"

namespace tmem {

namespace {

using Grads = std::vector<Tensor>;

const char* nm(OpId id) { return op_name(id).data(); }

void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  check<DtypeError>(a.dtype() == b.dtype(), op, ": expected operands of one dtype, but got ",
                    dtype_name(a.dtype()), a.str().substr(6), " and ", dtype_name(b.dtype()),
                    b.str().substr(6));
  check<DeviceError>(a.device() == b.device(), op, ": expected operands on one device, but got ",
                     a.device().str(), " and ", b.device().str());
}

// What a unary op's backward reads besides the output gradient g.
enum class Uses { Input, Output, Nothing };

// y = f(x) by the unary_forward kernel, dx by unary_backward from s = x, y
// or g (per `uses`, as ops/kernel_list.h lists): every unary op saves only
// what its backward reads. `prm` holds the op's scalars.
Tensor unary(OpId id, const Tensor& a, Uses uses, UnaryParams prm = {}) {
  const OpRange range(id);
  const char* name = nm(id);
  Tensor y = empty(a.shape(), a.dtype(), a.device());
  dispatch_kernels(id, a, [&]<class T>(const KernelTable<T>& k) {
    k.unary_forward(a.device().index, id, prm, elementwise_args<2>(y, {a}, name));
  });
  std::vector<Tensor> saved;
  if (uses != Uses::Nothing) saved.push_back(uses == Uses::Input ? a : y);
  record(id, {a}, {y}, saved, [name, id, prm](const Node& n, const Grads& g) {
    const Tensor& s = n.saved.empty() ? g[0] : n.saved_tensor(0);
    Tensor gx = empty(g[0].shape(), g[0].dtype(), g[0].device());
    dispatch_kernels(id, gx, [&]<class T>(const KernelTable<T>& k) {
      k.unary_backward(gx.device().index, id, prm, elementwise_args<3>(gx, {s, g[0]}, name));
    });
    return Grads{gx};
  });
  return y;
}

// a itself, or an int64 a as float32: the input of an op whose values are
// not integers (exp, sqrt, sin, ...), as PyTorch promotes it.
Tensor floating(const Tensor& a) { return is_floating(a.dtype()) ? a : to_dtype(a, DType::Float32); }

// out = a (op) b broadcast; the backward is written with ops (run without grad).
Tensor binary_forward(OpId id, const Tensor& a, const Tensor& b) {
  const char* name = nm(id);
  check_pair(a, b, name);
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), a.dtype(), a.device());
  dispatch_kernels(id, a, [&]<class T>(const KernelTable<T>& k) {
    k.binary_forward(a.device().index, id, elementwise_args<3>(out, {a, b}, name));
  });
  return out;
}

// pow's gradient for input 0 (the base x) or 1 (the exponent p) at the
// broadcast shape of y = x ** p, before summing back to the input's shape.
Tensor pow_grad(int input, const Tensor& g, const Tensor& x, const Tensor& p, const Tensor& y) {
  Tensor d = empty(y.shape(), y.dtype(), y.device());
  dispatch_kernels(OpId::Pow, d, [&]<class T>(const KernelTable<T>& k) {
    k.pow_backward(d.device().index, input, elementwise_args<5>(d, {g, x, p, y}, "pow"));
  });
  return d;
}

// out = c != 0 ? a : b broadcast to `shape` (c of a's dtype), by where_forward.
Tensor where_data(OpId id, const Shape& shape, const Tensor& c, const Tensor& a, const Tensor& b) {
  Tensor out = empty(shape, a.dtype(), a.device());
  dispatch_kernels(id, a, [&]<class T>(const KernelTable<T>& k) {
    k.where_forward(a.device().index, elementwise_args<4>(out, {c, a, b}, nm(id)));
  });
  return out;
}

// where_data for int64 a and b on the CPU (c of any dtype), by a host loop.
Tensor where_int64(OpId id, const Shape& shape, const Tensor& c, const Tensor& a, const Tensor& b) {
  check_int64_on_cpu(b, nm(id));  // a may be masked_fill's value
  Tensor out = empty(shape, DType::Int64);
  const StridedArgs<4> args = elementwise_args<4>(out, {c, a, b}, nm(id));
  auto* o = static_cast<int64_t*>(args.data[0]);
  const auto* pa = static_cast<const int64_t*>(args.data[2]);
  const auto* pb = static_cast<const int64_t*>(args.data[3]);
  dispatch_all(c.dtype(), [&]<class C>() {
    const auto* pc = static_cast<const C*>(args.data[1]);
    for_each_element(args, [&](std::array<int64_t, 4> i) { o[i[0]] = pc[i[1]] != C(0) ? pa[i[2]] : pb[i[3]]; });
  });
  return out;
}

Tensor scalar_like(const Tensor& t, double v) { return full({}, v, t.dtype(), t.device()); }

Tensor cast_data(const Tensor& t, DType dtype) {
  Tensor out = empty(t.shape(), dtype, t.device());
  copy_data(out, t);
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Add);
  Tensor out = binary_forward(OpId::Add, a, b);
  record(OpId::Add, {a, b}, {out}, {}, [sa = a.shape(), sb = b.shape()](const Node& n, const Grads& g) {
    return Grads{n.needs_input_grad(0) ? sum_to(g[0], sa) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(g[0], sb) : Tensor()};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Sub);
  Tensor out = binary_forward(OpId::Sub, a, b);
  record(OpId::Sub, {a, b}, {out}, {}, [sa = a.shape(), sb = b.shape()](const Node& n, const Grads& g) {
    return Grads{n.needs_input_grad(0) ? sum_to(g[0], sa) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(neg(g[0]), sb) : Tensor()};
  });
  return out;
}

namespace {
// a * b, whose backward reads a's values from a_values: mul_ passes a copy of
// the a it then overwrites (PyTorch's original_self).
Tensor mul_saving(const Tensor& a, const Tensor& b, const Tensor& a_values) {
  const OpRange range(OpId::Mul);
  Tensor out = binary_forward(OpId::Mul, a, b);
  // Only what a gradient reads is saved, as PyTorch does: y * 3 keeps no
  // copy of y, so a later in-place op on y stays legal.
  record(OpId::Mul, {a, b}, {out}, {b.requires_grad() ? a_values : Tensor(), a.requires_grad() ? b : Tensor()},
         [](const Node& n, const Grads& g) {
           const Tensor &x = n.saved_tensor(0), &y = n.saved_tensor(1);
           return Grads{n.needs_input_grad(0) ? sum_to(mul(g[0], y), n.input_shapes[0]) : Tensor(),
                        n.needs_input_grad(1) ? sum_to(mul(g[0], x), n.input_shapes[1]) : Tensor()};
         });
  return out;
}
}  // namespace

Tensor mul(const Tensor& a, const Tensor& b) { return mul_saving(a, b, a); }

Tensor div(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Div);
  Tensor out = binary_forward(OpId::Div, a, b);
  record(OpId::Div, {a, b}, {out}, {b.requires_grad() ? a : Tensor(), b}, [](const Node& n, const Grads& g) {
    const Tensor &x = n.saved_tensor(0), &y = n.saved_tensor(1);  // x only for b's gradient
    return Grads{n.needs_input_grad(0) ? sum_to(div(g[0], y), n.input_shapes[0]) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(neg(div(mul(g[0], x), mul(y, y))), n.input_shapes[1])
                                       : Tensor()};
  });
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Pow);
  Tensor out = binary_forward(OpId::Pow, a, b);
  record(OpId::Pow, {a, b}, {out}, {a, b, out}, [](const Node& n, const Grads& g) {
    const Tensor &x = n.saved_tensor(0), &p = n.saved_tensor(1), &y = n.saved_tensor(2);
    return Grads{n.needs_input_grad(0) ? sum_to(pow_grad(0, g[0], x, p, y), x.shape()) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(pow_grad(1, g[0], x, p, y), p.shape()) : Tensor()};
  });
  return out;
}

Tensor add(const Tensor& a, double s) { return unary(OpId::AddScalar, a, Uses::Nothing, {s}); }
Tensor mul(const Tensor& a, double s) { return unary(OpId::MulScalar, a, Uses::Nothing, {s}); }
Tensor pow(const Tensor& a, double p) { return unary(OpId::PowScalar, a, Uses::Input, {p}); }
Tensor neg(const Tensor& a) { return unary(OpId::Neg, a, Uses::Nothing); }
Tensor exp(const Tensor& a) { return unary(OpId::Exp, floating(a), Uses::Output); }
Tensor log(const Tensor& a) { return unary(OpId::Log, floating(a), Uses::Input); }
Tensor sqrt(const Tensor& a) { return unary(OpId::Sqrt, floating(a), Uses::Output); }
Tensor rsqrt(const Tensor& a) { return unary(OpId::Rsqrt, floating(a), Uses::Output); }
Tensor reciprocal(const Tensor& a) { return unary(OpId::Reciprocal, floating(a), Uses::Output); }
Tensor abs(const Tensor& a) { return unary(OpId::Abs, a, Uses::Input); }
Tensor relu(const Tensor& a) { return unary(OpId::Relu, a, Uses::Output); }
Tensor gelu(const Tensor& a, bool approximate) {
  return unary(approximate ? OpId::GeluTanh : OpId::GeluErf, a, Uses::Input);
}
Tensor silu(const Tensor& a) { return unary(OpId::Silu, a, Uses::Input); }
Tensor sigmoid(const Tensor& a) { return unary(OpId::Sigmoid, floating(a), Uses::Output); }
Tensor tanh(const Tensor& a) { return unary(OpId::Tanh, floating(a), Uses::Output); }
Tensor softplus(const Tensor& a) { return unary(OpId::Softplus, a, Uses::Input); }
Tensor sin(const Tensor& a) { return unary(OpId::Sin, floating(a), Uses::Input); }
Tensor cos(const Tensor& a) { return unary(OpId::Cos, floating(a), Uses::Input); }
Tensor log1p(const Tensor& a) { return unary(OpId::Log1p, floating(a), Uses::Input); }
Tensor expm1(const Tensor& a) { return unary(OpId::Expm1, floating(a), Uses::Output); }

namespace {
// A rounding op: its kernel on a floating a; an int64 a is whole already (a copy).
Tensor rounding(OpId id, const Tensor& a) {
  if (is_floating(a.dtype())) return unary(id, a, Uses::Nothing);
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  copy_data(out, a);
  return out;
}
}  // namespace

Tensor floor(const Tensor& a) { return rounding(OpId::Floor, a); }
Tensor ceil(const Tensor& a) { return rounding(OpId::Ceil, a); }
Tensor round(const Tensor& a) { return rounding(OpId::Round, a); }
Tensor trunc(const Tensor& a) { return rounding(OpId::Trunc, a); }
Tensor floor_divide(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::FloorDivide);
  Tensor out = binary_forward(OpId::FloorDivide, a, b);
  record(OpId::FloorDivide, {a, b}, {out}, {}, [](const Node& n, const Grads& g) {  // piecewise constant
    return Grads{n.needs_input_grad(0) ? zeros(n.input_shapes[0], g[0].dtype(), g[0].device()) : Tensor(),
                 n.needs_input_grad(1) ? zeros(n.input_shapes[1], g[0].dtype(), g[0].device()) : Tensor()};
  });
  return out;
}

Tensor remainder(const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Remainder);
  Tensor out = binary_forward(OpId::Remainder, a, b);
  record(OpId::Remainder, {a, b}, {out}, {b.requires_grad() ? a : Tensor(), b.requires_grad() ? b : Tensor()},
         [](const Node& n, const Grads& g) {
           return Grads{n.needs_input_grad(0) ? sum_to(g[0], n.input_shapes[0]) : Tensor(),
                        n.needs_input_grad(1)
                            ? sum_to(neg(mul(g[0], floor_divide(n.saved_tensor(0), n.saved_tensor(1)))),
                                     n.input_shapes[1])
                            : Tensor()};
         });
  return out;
}

Tensor sign(const Tensor& a) {
  if (is_floating(a.dtype())) return unary(OpId::Sign, a, Uses::Nothing);
  return to_dtype(unary(OpId::Sign, to_dtype(a, DType::Float64), Uses::Nothing), DType::Int64);  // -1, 0, 1: exact
}

Tensor clamp(const Tensor& a, double lo, double hi) {
  check<ValueError>(lo <= hi, "clamp: expected min <= max, but got min ", lo, " max ", hi);
  if (is_floating(a.dtype())) return unary(OpId::Clamp, a, Uses::Input, {lo, hi});
  // A bound of an int64 clamp is a whole number in int64's range, or an
  // infinity (no bound): torch's int64 result for integer bounds.
  const auto bound = [&](double v) -> std::optional<int64_t> {
    if (std::isinf(v)) return std::nullopt;
    check<ValueError>(v == std::trunc(v) && v >= -0x1p63 && v < 0x1p63, "clamp: an int64 tensor takes whole-number "
                      "bounds in int64's range, but got min ", lo, " max ", hi, "; cast it to a floating dtype first");
    return static_cast<int64_t>(v);
  };
  return clamp(a, bound(lo), bound(hi));
}

Tensor clamp(const Tensor& a, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const OpRange range(OpId::Clamp);
  check<DtypeError>(a.dtype() == DType::Int64, "clamp: int64 bounds take an int64 tensor, but got ",
                    dtype_name(a.dtype()));
  check<ValueError>(!lo || !hi || *lo <= *hi, "clamp: expected min <= max, but got min ", *lo, " max ", *hi);
  check_int64_on_cpu(a, "clamp");
  const int64_t l = lo.value_or(std::numeric_limits<int64_t>::min()), h = hi.value_or(std::numeric_limits<int64_t>::max());
  Tensor out = empty(a.shape(), DType::Int64);
  const StridedArgs<2> args = elementwise_args<2>(out, {a}, "clamp");
  auto* o = static_cast<int64_t*>(args.data[0]);
  const auto* x = static_cast<const int64_t*>(args.data[1]);
  for_each_element(args, [&](std::array<int64_t, 2> i) { o[i[0]] = std::clamp(x[i[1]], l, h); });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const OpRange range(OpId::Where);
  const char* name = nm(OpId::Where);
  check_pair(a, b, name);
  check<DeviceError>(cond.device() == a.device(), name, ": expected cond on the operands' device ",
                     a.device().str(), ", but got ", cond.device().str());
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), name), b.shape(), name);
  if (a.dtype() == DType::Int64) return where_int64(OpId::Where, shape, cond, a, b);
  Tensor c = cond.dtype() == a.dtype() ? cond : cast_data(cond, a.dtype());
  Tensor out = where_data(OpId::Where, shape, c, a, b);
  record(OpId::Where, {a, b}, {out}, {c}, [sa = a.shape(), sb = b.shape()](const Node& n, const Grads& g) {
    const Tensor& cv = n.saved_tensor(0);
    Tensor zero = scalar_like(g[0], 0.0);
    return Grads{n.needs_input_grad(0) ? sum_to(where(cv, g[0], zero), sa) : Tensor(),
                 n.needs_input_grad(1) ? sum_to(where(cv, zero, g[0]), sb) : Tensor()};
  });
  return out;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  if (a.dtype() == DType::Int64) {
    // As torch: the value rounded toward zero, one beyond int64 refused.
    check_int64_value(value, nm(OpId::MaskedFill));
    return masked_fill(a, mask, full_int({}, static_cast<int64_t>(value), a.device()));
  }
  const OpRange range(OpId::MaskedFill);
  const char* name = nm(OpId::MaskedFill);
  check<DeviceError>(mask.device() == a.device(), name, ": expected the mask on the input's device ",
                     a.device().str(), ", but got ", mask.device().str());
  // The input and the mask broadcast together, as in torch.masked_fill (a
  // larger mask gives a larger result).
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), name);
  Tensor m = mask.dtype() == a.dtype() ? mask : cast_data(mask, a.dtype());
  Tensor out = where_data(OpId::MaskedFill, shape, m, scalar_like(a, value), a);
  record(OpId::MaskedFill, {a}, {out}, {m}, [in = a.shape()](const Node& n, const Grads& g) {
    return Grads{sum_to(where(n.saved_tensor(0), scalar_like(g[0], 0.0), g[0]), in)};
  });
  return out;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value) {
  const char* name = nm(OpId::MaskedFill);
  check<ShapeError>(value.dim() == 0, name, ": expected a 0-d value tensor, but got shape ", shape_str(value.shape()));
  check<DtypeError>(value.dtype() == a.dtype(), name, ": expected a value of the input's dtype ", dtype_name(a.dtype()),
                    ", but got ", dtype_name(value.dtype()));
  check<DeviceError>(value.device() == a.device(), name, ": expected a value on the input's device ",
                     a.device().str(), ", but got ", value.device().str());
  check<DeviceError>(mask.device() == a.device(), name, ": expected the mask on the input's device ",
                     a.device().str(), ", but got ", mask.device().str());
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), name);
  // A floating value is where's operand, so its gradient flows too.
  if (a.dtype() != DType::Int64) return where(mask, value, a);
  const OpRange range(OpId::MaskedFill);
  return where_int64(OpId::MaskedFill, shape, mask, value, a);
}

Tensor to_dtype(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  const OpRange range(OpId::Cast);
  // To int64 (torch's .long()): rounded toward zero by the copy, which
  // refuses NaN, infinities and values beyond int64 before writing any;
  // nothing is recorded, as an integer tensor carries no gradient.
  if (!is_floating(dtype)) {
    try {
      return cast_data(a, dtype);
    } catch (const ValueError& e) {
      throw ValueError(std::string("to_dtype: ") + e.what());
    }
  }
  Tensor out = cast_data(a, dtype);
  record(OpId::Cast, {a}, {out}, {}, [from = a.dtype()](const Node& n, const Grads& g) {
    return Grads{cast_data(g[0], from)};
  });
  return out;
}

Tensor& add_(Tensor& a, const Tensor& b) { commit_inplace(a, add(a, b), "add_"); return a; }
Tensor& add_(Tensor& a, double s) { commit_inplace(a, add(a, s), "add_"); return a; }
Tensor& mul_(Tensor& a, double s) { commit_inplace(a, mul(a, s), "mul_"); return a; }
Tensor& mul_(Tensor& a, const Tensor& b) {
  Tensor a_values = a;
  if (grad_enabled() && b.requires_grad()) {  // b's gradient must not read the values commit_inplace overwrites
    a_values = empty_like(a);
    copy_data(a_values, a);
  }
  commit_inplace(a, mul_saving(a, b, a_values), "mul_");
  return a;
}
Tensor& fill_(Tensor& a, double value) {
  // A non-leaf that needs grad stays in the graph, its history getting a zero
  // gradient (torch's FillBackward): a masked_fill under an all-true mask.
  const bool keep = grad_enabled() && a.requires_grad();
  commit_inplace(a, keep ? masked_fill(a, ones(a.shape(), a.dtype(), a.device()), value)
                         : full(a.shape(), value, a.dtype(), a.device()), "fill_");
  return a;
}
Tensor& zero_(Tensor& a) { return fill_(a, 0.0); }
Tensor& copy_(Tensor& a, const Tensor& src) {
  // a's new history must end in a's dtype and device; an int64 a gets none (PyTorch).
  // Checked here, so the error names copy_, not the add or expand below.
  check<ShapeError>(broadcast_shapes(a.shape(), src.shape(), "copy_") == a.shape(), "copy_: the source of shape ",
                    shape_str(src.shape()), " does not broadcast to the tensor of shape ", shape_str(a.shape()),
                    " it would be written into");
  Tensor s = src.to(a.device());
  if (!is_floating(a.dtype())) {
    // No arithmetic (add refuses int64): a fresh copy of src's values (cast
    // by copy_data: truncated, range-checked), broadcast to a's shape.
    Tensor v = empty(s.shape(), a.dtype(), a.device());
    copy_data(v, s);
    commit_inplace(a, expand(v, a.shape()), "copy_");
    return a;
  }
  // An all-false where: src's values broadcast to a's shape, a zero gradient to
  // a's history (torch's CopyBackwards) and src's to src.
  commit_inplace(a, where(zeros(a.shape(), a.dtype(), a.device()), a, to_dtype(s, a.dtype())), "copy_");
  return a;
}

void register_elementwise_ops(std::vector<OpInfo>& t) {
  using V = std::vector<Tensor>;
  auto un = [&](OpId id, std::function<Tensor(const Tensor&)> f, double lo, double hi) {
    t.push_back({id, {"cpu"}, {"input"},
                 {{"random", [=] { return V{gc_input({3, 4}, lo, hi)}; },
                   [f](const V& v) { return f(v[0]); }}}});
  };
  auto bin = [&](OpId id, std::function<Tensor(const Tensor&, const Tensor&)> f, double lo, double hi) {
    t.push_back({id, {"cpu"}, {"a", "b"},
                 {{"same shape", [=] { return V{gc_input({3, 4}, lo, hi, 1), gc_input({3, 4}, lo, hi, 2)}; },
                   [f](const V& v) { return f(v[0], v[1]); }},
                  {"broadcast [2,1,4]x[3,1]", [=] { return V{gc_input({2, 1, 4}, lo, hi, 3), gc_input({3, 1}, lo, hi, 4)}; },
                   [f](const V& v) { return f(v[0], v[1]); }}}});
  };
  bin(OpId::Add, [](auto& a, auto& b) { return add(a, b); }, -1, 1);
  bin(OpId::Sub, [](auto& a, auto& b) { return sub(a, b); }, -1, 1);
  bin(OpId::Mul, [](auto& a, auto& b) { return mul(a, b); }, -1, 1);
  bin(OpId::Div, [](auto& a, auto& b) { return div(a, b); }, 0.5, 2);
  bin(OpId::Pow, [](auto& a, auto& b) { return pow(a, b); }, 0.5, 2);
  // Between the steps of floor(a / b): (a + 4) / (b + 2) for a and b in [0.2, 0.3] is in
  // (1.8, 2), so remainder's gradient for b is -floor(...) = -1, and floor_divide's 0.
  bin(OpId::Remainder, [](auto& a, auto& b) { return remainder(add(a, 4.0), add(b, 2.0)); }, 0.2, 0.3);
  bin(OpId::FloorDivide, [](auto& a, auto& b) { return floor_divide(add(a, 4.0), add(b, 2.0)); }, 0.2, 0.3);
  un(OpId::AddScalar, [](auto& a) { return add(a, 2.5); }, -1, 1);
  un(OpId::MulScalar, [](auto& a) { return mul(a, -1.5); }, -1, 1);
  un(OpId::PowScalar, [](auto& a) { return pow(a, 3.0); }, -2, 2);
  un(OpId::Neg, [](auto& a) { return neg(a); }, -1, 1);
  un(OpId::Exp, [](auto& a) { return exp(a); }, -2, 2);
  un(OpId::Log, [](auto& a) { return log(a); }, 0.2, 3);
  un(OpId::Sqrt, [](auto& a) { return sqrt(a); }, 0.2, 3);
  un(OpId::Rsqrt, [](auto& a) { return rsqrt(a); }, 0.2, 3);
  un(OpId::Reciprocal, [](auto& a) { return reciprocal(a); }, 0.5, 2);
  un(OpId::Abs, [](auto& a) { return abs(a); }, -1, 1);
  un(OpId::Relu, [](auto& a) { return relu(a); }, -1, 1);
  un(OpId::GeluTanh, [](auto& a) { return gelu(a, true); }, -3, 3);
  un(OpId::GeluErf, [](auto& a) { return gelu(a); }, -3, 3);
  un(OpId::Silu, [](auto& a) { return silu(a); }, -3, 3);
  un(OpId::Sigmoid, [](auto& a) { return sigmoid(a); }, -3, 3);
  un(OpId::Tanh, [](auto& a) { return tanh(a); }, -2, 2);
  un(OpId::Softplus, [](auto& a) { return softplus(a); }, -3, 3);
  un(OpId::Clamp, [](auto& a) { return clamp(a, -0.5, 0.5); }, -1, 1);
  un(OpId::Sin, [](auto& a) { return sin(a); }, -4, 4);
  un(OpId::Cos, [](auto& a) { return cos(a); }, -4, 4);
  un(OpId::Log1p, [](auto& a) { return log1p(a); }, -0.5, 2);
  un(OpId::Expm1, [](auto& a) { return expm1(a); }, -2, 2);
  // Piecewise constant: a gradient of 0 away from the steps (inputs drawn
  // at least 0.1 from a whole number, or from 0 for sign).
  const auto steps = [&](OpId id, std::function<Tensor(const Tensor&)> f) {
    t.push_back({id, {"cpu"}, {"input"},
                 {{"between whole numbers",
                   [] {
                     return V{tensor({-1.7, -1.3, -0.6, -0.3, 0.2, 0.4, 0.7, 1.2, 1.6, 2.3, 2.8, 3.4}, {3, 4},
                                     DType::Float64).requires_grad_()};
                   },
                   [f](const V& v) { return f(v[0]); }}}});
  };
  steps(OpId::Floor, [](auto& a) { return floor(a); });
  steps(OpId::Ceil, [](auto& a) { return ceil(a); });
  steps(OpId::Round, [](auto& a) { return round(a); });
  steps(OpId::Trunc, [](auto& a) { return trunc(a); });
  steps(OpId::Sign, [](auto& a) { return sign(a); });
  // Through float32 and back: linear, so a large step is exact and rounding stays small.
  t.push_back({OpId::Cast, {"cpu"}, {"input"},
               {{"float64->float32", [] { return V{gc_input({3, 4})}; },
                 [](const V& v) { return to_dtype(v[0], DType::Float32); }, 1e-2, 1e-4, 1e-3}}});
  // On the CPU `to` returns its input itself; device transfers are checked by
  // the CPU-vs-CUDA tests.
  t.push_back({OpId::ToDevice, {"cpu"}, {"input"},
               {{"cpu -> cpu (no copy)", [] { return V{gc_input({3, 4})}; },
                 [](const V& v) { return v[0].to(Device::cpu()); }}}});
  t.push_back({OpId::Where, {"cpu"}, {"a", "b"},
               {{"broadcast cond [3,1]", [] {
                   return V{tensor({1, 0, 1}, {3, 1}, DType::Float64), gc_input({3, 4}, -1, 1, 1),
                            gc_input({4}, -1, 1, 2)};
                 }, [](const V& v) { return where(v[0], v[1], v[2]); }}}});
  // In-place ops on views of a tensor that needs grad: the base's history
  // becomes a copy_slices node (commit_inplace), checked through the base.
  t.push_back({OpId::CopySlices, {"cpu"}, {"base", "source"},
               {{"copy_ into a row", [] { return V{gc_input({3, 4}), gc_input({4}, -1, 1, 1)}; },
                 [](const V& v) {
                   Tensor y = v[0] * 1.0;
                   Tensor row = narrow(y, 0, 1, 1);
                   copy_(row, v[1]);
                   return y * y;
                 }},
                {"add_ into a transposed view, then mul_ of a strided one",
                 [] { return V{gc_input({3, 4}), gc_input({3}, -1, 1, 1)}; },
                 [](const V& v) {
                   Tensor y = v[0] * 2.0;
                   Tensor t = transpose(y, 0, 1);
                   add_(t, v[1]);
                   Tensor odd = slice(y, 1, 1, 4, 2);
                   mul_(odd, reshape(v[1], {3, 1}));
                   return y * y;
                 }}}});
  t.push_back({OpId::MaskedFill, {"cpu"}, {"input"},
               {{"row mask", [] { return V{gc_input({3, 4}), tensor({0, 1, 0, 1}, {4}, DType::Float64)}; },
                 [](const V& v) { return masked_fill(v[0], v[1], -7.0); }}}});
}

}  // namespace tmem
