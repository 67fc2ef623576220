// The per-element arithmetic of the elementwise kernels (cuda/elementwise.cu),
// shared with their host build (tests/host_kernels_elementwise.cpp; cuda/hd.h).
// One struct per op: f(x, a, b) is the op's value at x (a, b its scalars as
// OpKernels' UnaryParams), d(s, g, a, b) its input gradient from s (what the op
// saves: x or y, as OpKernels::unary_backward lists) and the output gradient
// g. The formulas are the CPU functors' (PyTorch's definitions), in float32.
#pragma once
#include <cmath>

#include "tmem/core/op_id.h"
#include "tmem/cuda/hd.h"

namespace tmem::cuda::ew {

// GELU tanh form: 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi).
constexpr float kK = 0.7978845608028654f;
constexpr float kC = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// x ** p with 0 ** 0 = 1, as std::pow and PyTorch.
TMEM_HD float pw(float x, float p) { return p == 0.0f ? 1.0f : std::pow(x, p); }

struct AddScalar {
  static TMEM_HD float f(float x, float a, float) { return x + a; }
  static TMEM_HD float d(float, float g, float, float) { return g; }
};
struct MulScalar {
  static TMEM_HD float f(float x, float a, float) { return x * a; }
  static TMEM_HD float d(float, float g, float a, float) { return g * a; }
};
struct PowScalar {
  static TMEM_HD float f(float x, float a, float) { return pw(x, a); }
  static TMEM_HD float d(float x, float g, float a, float) { return a == 0.0f ? 0.0f : g * a * pw(x, a - 1.0f); }
};
struct Neg {
  static TMEM_HD float f(float x, float, float) { return -x; }
  static TMEM_HD float d(float, float g, float, float) { return -g; }
};
struct Exp {
  static TMEM_HD float f(float x, float, float) { return std::exp(x); }
  static TMEM_HD float d(float y, float g, float, float) { return g * y; }
};
struct Log {
  static TMEM_HD float f(float x, float, float) { return std::log(x); }
  static TMEM_HD float d(float x, float g, float, float) { return g / x; }
};
struct Sqrt {
  static TMEM_HD float f(float x, float, float) { return std::sqrt(x); }
  static TMEM_HD float d(float y, float g, float, float) { return g / (2.0f * y); }
};
struct Rsqrt {
  static TMEM_HD float f(float x, float, float) { return 1.0f / std::sqrt(x); }
  static TMEM_HD float d(float y, float g, float, float) { return -0.5f * g * y * y * y; }
};
struct Reciprocal {
  static TMEM_HD float f(float x, float, float) { return 1.0f / x; }
  static TMEM_HD float d(float y, float g, float, float) { return -g * y * y; }
};
struct Abs {
  static TMEM_HD float f(float x, float, float) { return std::fabs(x); }
  static TMEM_HD float d(float x, float g, float, float) { return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f); }
};
struct Relu {
  static TMEM_HD float f(float x, float, float) { return x < 0.0f ? 0.0f : x; }
  static TMEM_HD float d(float y, float g, float, float) { return y > 0.0f ? g : 0.0f; }
};
struct GeluTanh {
  static TMEM_HD float f(float x, float, float) { return 0.5f * x * (1.0f + std::tanh(kK * (x + kC * x * x * x))); }
  static TMEM_HD float d(float x, float g, float, float) {
    const float t = std::tanh(kK * (x + kC * x * x * x));
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kK * (1.0f + 3.0f * kC * x * x));
  }
};
struct GeluErf {
  static TMEM_HD float f(float x, float, float) { return x * 0.5f * (1.0f + std::erf(x * kSqrtHalf)); }
  static TMEM_HD float d(float x, float g, float, float) {
    const float cdf = 0.5f * (1.0f + std::erf(x * kSqrtHalf));
    const float pdf = std::exp(-0.5f * x * x) * kInvSqrt2Pi;
    return g * (cdf + x * pdf);
  }
};
struct Silu {
  static TMEM_HD float f(float x, float, float) { return x / (1.0f + std::exp(-x)); }
  static TMEM_HD float d(float x, float g, float, float) {
    const float s = 1.0f / (1.0f + std::exp(-x));
    return g * s * (1.0f + x * (1.0f - s));
  }
};
struct Sigmoid {
  static TMEM_HD float f(float x, float, float) { return 1.0f / (1.0f + std::exp(-x)); }
  static TMEM_HD float d(float y, float g, float, float) { return g * y * (1.0f - y); }
};
struct Tanh {
  static TMEM_HD float f(float x, float, float) { return std::tanh(x); }
  static TMEM_HD float d(float y, float g, float, float) { return g * (1.0f - y * y); }
};
struct Softplus {
  static TMEM_HD float f(float x, float, float) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
  static TMEM_HD float d(float x, float g, float, float) {
    if (x > 20.0f) return g;
    const float z = std::exp(x);
    return g * z / (z + 1.0f);
  }
};
struct Sin {
  static TMEM_HD float f(float x, float, float) { return std::sin(x); }
  static TMEM_HD float d(float x, float g, float, float) { return g * std::cos(x); }
};
struct Cos {
  static TMEM_HD float f(float x, float, float) { return std::cos(x); }
  static TMEM_HD float d(float x, float g, float, float) { return -g * std::sin(x); }
};
struct Log1p {
  static TMEM_HD float f(float x, float, float) { return std::log1p(x); }
  static TMEM_HD float d(float x, float g, float, float) { return g / (1.0f + x); }
};
struct Expm1 {
  static TMEM_HD float f(float x, float, float) { return std::expm1(x); }
  static TMEM_HD float d(float y, float g, float, float) { return g * (y + 1.0f); }
};
// The rounding ops and sign: a gradient of 0 (times g, so NaN stays NaN).
struct Floor {
  static TMEM_HD float f(float x, float, float) { return std::floor(x); }
  static TMEM_HD float d(float, float g, float, float) { return g * 0.0f; }
};
struct Ceil {
  static TMEM_HD float f(float x, float, float) { return std::ceil(x); }
  static TMEM_HD float d(float, float g, float, float) { return g * 0.0f; }
};
struct Round {
  static TMEM_HD float f(float x, float, float) { return std::nearbyint(x); }  // half to even
  static TMEM_HD float d(float, float g, float, float) { return g * 0.0f; }
};
struct Trunc {
  static TMEM_HD float f(float x, float, float) { return std::trunc(x); }
  static TMEM_HD float d(float, float g, float, float) { return g * 0.0f; }
};
struct Sign {
  static TMEM_HD float f(float x, float, float) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
  static TMEM_HD float d(float, float g, float, float) { return g * 0.0f; }
};
struct Clamp {
  static TMEM_HD float f(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
  static TMEM_HD float d(float x, float g, float lo, float hi) { return x < lo || x > hi ? 0.0f : g; }
};

/// Calls v(U{}) with the struct U of unary op `op`; false (and no call) when
/// `op` is not a unary elementwise op.
template <class V>
bool visit_unary(OpId op, V&& v) {
  switch (op) {
    case OpId::AddScalar: v(AddScalar{}); return true;
    case OpId::MulScalar: v(MulScalar{}); return true;
    case OpId::PowScalar: v(PowScalar{}); return true;
    case OpId::Neg: v(Neg{}); return true;
    case OpId::Exp: v(Exp{}); return true;
    case OpId::Log: v(Log{}); return true;
    case OpId::Sqrt: v(Sqrt{}); return true;
    case OpId::Rsqrt: v(Rsqrt{}); return true;
    case OpId::Reciprocal: v(Reciprocal{}); return true;
    case OpId::Abs: v(Abs{}); return true;
    case OpId::Relu: v(Relu{}); return true;
    case OpId::GeluTanh: v(GeluTanh{}); return true;
    case OpId::GeluErf: v(GeluErf{}); return true;
    case OpId::Silu: v(Silu{}); return true;
    case OpId::Sigmoid: v(Sigmoid{}); return true;
    case OpId::Tanh: v(Tanh{}); return true;
    case OpId::Softplus: v(Softplus{}); return true;
    case OpId::Clamp: v(Clamp{}); return true;
    case OpId::Sin: v(Sin{}); return true;
    case OpId::Cos: v(Cos{}); return true;
    case OpId::Log1p: v(Log1p{}); return true;
    case OpId::Expm1: v(Expm1{}); return true;
    case OpId::Floor: v(Floor{}); return true;
    case OpId::Ceil: v(Ceil{}); return true;
    case OpId::Round: v(Round{}); return true;
    case OpId::Trunc: v(Trunc{}); return true;
    case OpId::Sign: v(Sign{}); return true;
    default: return false;
  }
}

struct Add {
  static TMEM_HD float f(float x, float y) { return x + y; }
};
struct Sub {
  static TMEM_HD float f(float x, float y) { return x - y; }
};
struct Mul {
  static TMEM_HD float f(float x, float y) { return x * y; }
};
struct Div {
  static TMEM_HD float f(float x, float y) { return x / y; }
};
struct Pow {
  static TMEM_HD float f(float x, float y) { return pw(x, y); }
};
struct Remainder {  // the CPU functor's: from fmod, the sign of y
  static TMEM_HD float f(float x, float y) {
    const float r = std::fmod(x, y);
    return r != 0.0f && ((r < 0.0f) != (y < 0.0f)) ? r + y : r;
  }
};
struct FloorDivide {  // the CPU functor's (PyTorch's div_floor_floating)
  static TMEM_HD float f(float x, float y) {
    if (y == 0.0f) return x / y;
    const float mod = std::fmod(x, y);
    float div = (x - mod) / y;
    if (mod != 0.0f && ((y < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return std::copysign(0.0f, x / y);
    float whole = std::floor(div);
    if (div - whole > 0.5f) whole += 1.0f;
    return whole;
  }
};

/// Calls v(B{}) with the struct B of binary op `op`; false when there is none.
template <class V>
bool visit_binary(OpId op, V&& v) {
  switch (op) {
    case OpId::Add: v(Add{}); return true;
    case OpId::Sub: v(Sub{}); return true;
    case OpId::Mul: v(Mul{}); return true;
    case OpId::Div: v(Div{}); return true;
    case OpId::Pow: v(Pow{}); return true;
    case OpId::Remainder: v(Remainder{}); return true;
    case OpId::FloorDivide: v(FloorDivide{}); return true;
    default: return false;
  }
}

/// pow's gradient (OpKernels::pow_backward) for input 0 (x) or 1 (p), with
/// g the output gradient and y = x ** p: g p x^(p-1), 0 where p == 0; and
/// g y log(x), 0 where x == 0 and p >= 0.
TMEM_HD float pow_grad(int input, float g, float x, float p, float y) {
  if (input == 0) return p == 0.0f ? 0.0f : g * p * pw(x, p - 1.0f);
  return x == 0.0f && p >= 0.0f ? 0.0f : g * y * std::log(x);
}

/// where's value: a where c != 0, else b.
TMEM_HD float where_value(float c, float a, float b) { return c != 0.0f ? a : b; }

}  // namespace tmem::cuda::ew
