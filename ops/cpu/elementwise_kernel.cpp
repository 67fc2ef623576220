// The elementwise ops' CPU kernels (ops/kernel_list.h TMEM_ELEMENTWISE_KERNELS).
// Each op is a functor written once as a template over V, serving both the
// xsimd batch body (V = xsimd::batch<T>) and the scalar tail (V = T) of
// cpu::apply; a kernel switches on the op once, outside the loop, and runs
// that op's functor inlined in the loop. The formulas are PyTorch's
// definitions; cuda/elementwise.cuh has the same in float32.
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <type_traits>

#include "tmem/core/strided.h"
#include "tmem/ops/cpu/kernels.h"
#include "tmem/ops/cpu/simd.h"

namespace tmem::cpu {

namespace {

// GELU tanh form: 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi).
constexpr double k = 0.7978845608028654;
constexpr double c = 0.044715;

// x ** p with 0 ** 0 = 1, as std::pow and PyTorch.
template <class V>
V pw(V x, V p) {
  using xsimd::pow;
  using std::pow;
  return sel(p == V(0), V(1), V(pow(x, p)));
}

// std::fmod lane by lane: exact. xsimd's fmod is x - trunc(x / y) y, which
// rounds for large quotients.
template <class V>
V exact_fmod(V x, V y) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::fmod(x, y);
  } else {
    alignas(64) std::array<typename V::value_type, V::size> xs, ys;
    x.store_aligned(xs.data());
    y.store_aligned(ys.data());
    for (size_t i = 0; i < V::size; ++i) xs[i] = std::fmod(xs[i], ys[i]);
    return V::load_aligned(xs.data());
  }
}

// x - y floor(x / y) from fmod, exact as PyTorch's remainder (the sign of y;
// x / y itself rounds for large quotients).
template <class V>
V floored_remainder(V x, V y) {
  const V r = exact_fmod(x, y);
  return sel((r != V(0)) & ((r < V(0)) != (y < V(0))), r + y, r);
}

// floor(x / y) as PyTorch's div_floor_floating: the quotient of x minus its
// fmod remainder, rounded to the nearest whole number; x / y where y is 0.
template <class V>
V floor_divide(V x, V y) {
  using std::floor; using xsimd::floor;
  using std::copysign; using xsimd::copysign;
  const V mod = exact_fmod(x, y);
  V div = (x - mod) / y;
  div = sel((mod != V(0)) & ((y < V(0)) != (mod < V(0))), div - V(1), div);
  V whole = floor(div);
  whole = sel(div - whole > V(0.5), whole + V(1), whole);
  whole = sel(div == V(0), V(copysign(V(0), x / y)), whole);
  return sel(y == V(0), x / y, whole);
}

[[noreturn]] void no_kernel(const char* what, OpId op) {
  throw ValueError(std::string(op_name(op)) + ": the CPU has no " + what + " kernel for this op");
}

}  // namespace

template <class Scalar>
void Kernels<Scalar>::unary_forward(int, OpId op, UnaryParams p, const StridedArgs<2>& args) {
  const double s = p.a, lo = p.a, hi = p.b;
  switch (op) {
    case OpId::AddScalar: return apply<T>(args, [s](auto x) { return x + decltype(x)(s); });
    case OpId::MulScalar: return apply<T>(args, [s](auto x) { return x * decltype(x)(s); });
    case OpId::PowScalar: return apply<T>(args, [s](auto x) { return pw(x, decltype(x)(s)); });
    case OpId::Neg: return apply<T>(args, [](auto x) { return -x; });
    case OpId::Exp: return apply<T>(args, [](auto x) { return decltype(x)(vexp(x)); });
    case OpId::Log:
      return apply<T>(args, [](auto x) { using std::log; using xsimd::log; return decltype(x)(log(x)); });
    case OpId::Sqrt:
      return apply<T>(args, [](auto x) { using std::sqrt; using xsimd::sqrt; return decltype(x)(sqrt(x)); });
    case OpId::Rsqrt:
      return apply<T>(args, [](auto x) {
        using std::sqrt; using xsimd::sqrt;
        return decltype(x)(1) / decltype(x)(sqrt(x));
      });
    case OpId::Reciprocal: return apply<T>(args, [](auto x) { return decltype(x)(1) / x; });
    case OpId::Abs:
      return apply<T>(args, [](auto x) { using std::abs; using xsimd::abs; return decltype(x)(abs(x)); });
    case OpId::Relu: return apply<T>(args, [](auto x) { using V = decltype(x); return sel(x < V(0), V(0), x); });
    case OpId::GeluTanh:
      return apply<T>(args, [](auto x) {
        using V = decltype(x);
        using std::tanh; using xsimd::tanh;
        V t = tanh(V(k) * (x + V(c) * x * x * x));
        return V(0.5) * x * (V(1) + t);
      });
    case OpId::GeluErf:
      return apply<T>(args, [](auto x) {
        using V = decltype(x);
        using std::erf; using xsimd::erf;
        return x * V(0.5) * (V(1) + V(erf(x * V(std::numbers::sqrt2 / 2))));
      });
    case OpId::Silu:
      return apply<T>(args, [](auto x) { using V = decltype(x); return x / (V(1) + V(vexp(-x))); });
    case OpId::Sigmoid:
      return apply<T>(args, [](auto x) { using V = decltype(x); return V(1) / (V(1) + V(vexp(-x))); });
    case OpId::Tanh:
      return apply<T>(args, [](auto x) { using std::tanh; using xsimd::tanh; return decltype(x)(tanh(x)); });
    case OpId::Softplus:
      return apply<T>(args, [](auto x) {
        using V = decltype(x);
        using std::log1p; using xsimd::log1p;
        return sel(x > V(20), x, V(log1p(V(vexp(sel(x > V(20), V(0), x))))));
      });
    case OpId::Sin:
      return apply<T>(args, [](auto x) { using std::sin; using xsimd::sin; return decltype(x)(sin(x)); });
    case OpId::Cos:
      return apply<T>(args, [](auto x) { using std::cos; using xsimd::cos; return decltype(x)(cos(x)); });
    case OpId::Log1p:
      return apply<T>(args, [](auto x) { using std::log1p; using xsimd::log1p; return decltype(x)(log1p(x)); });
    case OpId::Expm1:
      return apply<T>(args, [](auto x) { using std::expm1; using xsimd::expm1; return decltype(x)(expm1(x)); });
    case OpId::Floor:
      return apply<T>(args, [](auto x) { using std::floor; using xsimd::floor; return decltype(x)(floor(x)); });
    case OpId::Ceil:
      return apply<T>(args, [](auto x) { using std::ceil; using xsimd::ceil; return decltype(x)(ceil(x)); });
    case OpId::Round:  // half to even
      return apply<T>(args, [](auto x) {
        using std::nearbyint; using xsimd::nearbyint;
        return decltype(x)(nearbyint(x));
      });
    case OpId::Trunc:
      return apply<T>(args, [](auto x) { using std::trunc; using xsimd::trunc; return decltype(x)(trunc(x)); });
    case OpId::Sign:
      return apply<T>(args, [](auto x) {
        using V = decltype(x);
        return sel(x > V(0), V(1), sel(x < V(0), V(-1), V(0)));
      });
    case OpId::Clamp:
      return apply<T>(args, [lo, hi](auto x) {
        using V = decltype(x);
        return sel(x < V(lo), V(lo), sel(x > V(hi), V(hi), x));
      });
    default: no_kernel("unary forward", op);
  }
}

// args {gx, s, g}: each functor is (s, g) -> gx.
template <class Scalar>
void Kernels<Scalar>::unary_backward(int, OpId op, UnaryParams p, const StridedArgs<3>& args) {
  const double s = p.a, lo = p.a, hi = p.b;
  switch (op) {
    case OpId::AddScalar: return apply<T>(args, [](auto g, auto) { return g; });
    case OpId::MulScalar: return apply<T>(args, [s](auto g, auto) { return g * decltype(g)(s); });
    case OpId::PowScalar:
      return apply<T>(args, [s](auto x, auto g) {
        using V = decltype(x);
        return s == 0.0 ? V(0) : g * V(s) * pw(x, V(s - 1.0));
      });
    case OpId::Neg: return apply<T>(args, [](auto g, auto) { return -g; });
    case OpId::Exp: return apply<T>(args, [](auto y, auto g) { return g * y; });
    case OpId::Log: return apply<T>(args, [](auto x, auto g) { return g / x; });
    case OpId::Sqrt: return apply<T>(args, [](auto y, auto g) { return g / (decltype(y)(2) * y); });
    case OpId::Rsqrt: return apply<T>(args, [](auto y, auto g) { return decltype(y)(-0.5) * g * y * y * y; });
    case OpId::Reciprocal: return apply<T>(args, [](auto y, auto g) { return -g * y * y; });
    case OpId::Abs:
      return apply<T>(args, [](auto x, auto g) {
        using V = decltype(x);
        return sel(x > V(0), g, sel(x < V(0), -g, V(0)));
      });
    case OpId::Relu:
      return apply<T>(args, [](auto y, auto g) { using V = decltype(y); return sel(y > V(0), g, V(0)); });
    case OpId::GeluTanh:
      return apply<T>(args, [](auto x, auto g) {
        using V = decltype(x);
        using std::tanh; using xsimd::tanh;
        V t = tanh(V(k) * (x + V(c) * x * x * x));
        return g * (V(0.5) * (V(1) + t) + V(0.5) * x * (V(1) - t * t) * V(k) * (V(1) + V(3 * c) * x * x));
      });
    case OpId::GeluErf:
      return apply<T>(args, [](auto x, auto g) {
        using V = decltype(x);
        using std::erf; using xsimd::erf;
        V cdf = V(0.5) * (V(1) + V(erf(x * V(std::numbers::sqrt2 / 2))));
        V pdf = V(vexp(V(-0.5) * x * x)) * V(0.3989422804014327);  // 1/sqrt(2 pi)
        return g * (cdf + x * pdf);
      });
    case OpId::Silu:
      return apply<T>(args, [](auto x, auto g) {
        using V = decltype(x);
        V sg = V(1) / (V(1) + V(vexp(-x)));
        return g * sg * (V(1) + x * (V(1) - sg));
      });
    case OpId::Sigmoid:
      return apply<T>(args, [](auto y, auto g) { using V = decltype(y); return g * y * (V(1) - y); });
    case OpId::Tanh:
      return apply<T>(args, [](auto y, auto g) { using V = decltype(y); return g * (V(1) - y * y); });
    case OpId::Softplus:
      return apply<T>(args, [](auto x, auto g) {
        using V = decltype(x);
        V z = vexp(sel(x > V(20), V(0), x));
        return sel(x > V(20), g, g * z / (z + V(1)));
      });
    case OpId::Sin:
      return apply<T>(args, [](auto x, auto g) { using std::cos; using xsimd::cos; return g * decltype(x)(cos(x)); });
    case OpId::Cos:
      return apply<T>(args, [](auto x, auto g) { using std::sin; using xsimd::sin; return -g * decltype(x)(sin(x)); });
    case OpId::Log1p: return apply<T>(args, [](auto x, auto g) { return g / (decltype(x)(1) + x); });
    case OpId::Expm1: return apply<T>(args, [](auto y, auto g) { return g * (y + decltype(y)(1)); });
    case OpId::Floor:
    case OpId::Ceil:
    case OpId::Round:
    case OpId::Trunc:
    case OpId::Sign: return apply<T>(args, [](auto g, auto) { return g * decltype(g)(0); });
    case OpId::Clamp:
      return apply<T>(args, [lo, hi](auto x, auto g) {
        using V = decltype(x);
        return sel(x < V(lo), V(0), sel(x > V(hi), V(0), g));
      });
    default: no_kernel("unary backward", op);
  }
}

template <class Scalar>
void Kernels<Scalar>::binary_forward(int, OpId op, const StridedArgs<3>& args) {
  switch (op) {
    case OpId::Add: return apply<T>(args, [](auto x, auto y) { return x + y; });
    case OpId::Sub: return apply<T>(args, [](auto x, auto y) { return x - y; });
    case OpId::Mul: return apply<T>(args, [](auto x, auto y) { return x * y; });
    case OpId::Div: return apply<T>(args, [](auto x, auto y) { return x / y; });
    case OpId::Pow: return apply<T>(args, [](auto x, auto y) { return pw(x, y); });
    case OpId::Remainder: return apply<T>(args, [](auto x, auto y) { return floored_remainder(x, y); });
    case OpId::FloorDivide: return apply<T>(args, [](auto x, auto y) { return floor_divide(x, y); });
    default: no_kernel("binary forward", op);
  }
}

// args {d, g, x, p, y}.
template <class Scalar>
void Kernels<Scalar>::pow_backward(int, int input, const StridedArgs<5>& args) {
  if (input == 0) {
    // PyTorch pow_backward_self: 0 where p == 0, else g * p * x^(p-1).
    apply<T>(args, [](auto gv, auto xv, auto pv, auto) {
      using V = decltype(xv);
      return sel(pv == V(0), V(0), gv * pv * pw(xv, pv - V(1)));
    });
  } else {
    // PyTorch pow_backward_exponent: 0 where x == 0 and p >= 0, else g * y * log(x).
    apply<T>(args, [](auto gv, auto xv, auto pv, auto yv) {
      using V = decltype(xv);
      using std::log;
      using xsimd::log;
      return sel((xv == V(0)) & (pv >= V(0)), V(0), gv * yv * V(log(xv)));
    });
  }
}

template <class Scalar>
void Kernels<Scalar>::where_forward(int, const StridedArgs<4>& args) {
  apply<T>(args, [](auto cv, auto x, auto y) { return sel(cv != decltype(x)(0), x, y); });
}

TMEM_ELEMENTWISE_KERNELS(TMEM_CPU_INSTANTIATE)

}  // namespace tmem::cpu
