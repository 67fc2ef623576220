// Elementwise kernels (ops/elementwise.cpp's device half): one templated
// strided kernel (cuda/strided.cuh) with broadcasting, instantiated with one
// device lambda per op for the forward and one for the backward; the formulas
// are the CPU functors' (PyTorch's definitions). float32. Shapes: any, every
// operand broadcast to the output's shape.
#include <cmath>
#include <string>

#include "core/device_backend.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/strided.cuh"

namespace tmem::cuda {

namespace {

// GELU tanh form: 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi).
constexpr float kK = 0.7978845608028654f;
constexpr float kC = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// x ** p with 0 ** 0 = 1, as std::pow and PyTorch.
__device__ __forceinline__ float pw(float x, float p) { return p == 0.0f ? 1.0f : powf(x, p); }

// out = f(x); args {out, x}.
template <class F>
void map1(int device, const StridedArgs<2>& args, F f) {
  launch_strided(device, args, [f] __device__(const StridedArgs<2>& a, const int64_t(&o)[2]) {
    static_cast<float*>(a.data[0])[o[0]] = f(static_cast<const float*>(a.data[1])[o[1]]);
  });
}

// out = f(u, v); args {out, u, v}.
template <class F>
void map2(int device, const StridedArgs<3>& args, F f) {
  launch_strided(device, args, [f] __device__(const StridedArgs<3>& a, const int64_t(&o)[3]) {
    static_cast<float*>(a.data[0])[o[0]] = f(static_cast<const float*>(a.data[1])[o[1]],
                                             static_cast<const float*>(a.data[2])[o[2]]);
  });
}

[[noreturn]] void no_kernel(const char* what, OpId op, int device) {
  throw_not_implemented((std::string(op_name(op)) + " (" + what + ")").c_str(), Device::cuda(device));
}

}  // namespace

void unary_forward(int device, OpId op, UnaryParams p, const StridedArgs<2>& args) {
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  switch (op) {
    case OpId::AddScalar: return map1(device, args, [a] __device__(float x) { return x + a; });
    case OpId::MulScalar: return map1(device, args, [a] __device__(float x) { return x * a; });
    case OpId::PowScalar: return map1(device, args, [a] __device__(float x) { return pw(x, a); });
    case OpId::Neg: return map1(device, args, [] __device__(float x) { return -x; });
    case OpId::Exp: return map1(device, args, [] __device__(float x) { return expf(x); });
    case OpId::Log: return map1(device, args, [] __device__(float x) { return logf(x); });
    case OpId::Sqrt: return map1(device, args, [] __device__(float x) { return sqrtf(x); });
    case OpId::Rsqrt: return map1(device, args, [] __device__(float x) { return 1.0f / sqrtf(x); });
    case OpId::Reciprocal: return map1(device, args, [] __device__(float x) { return 1.0f / x; });
    case OpId::Abs: return map1(device, args, [] __device__(float x) { return fabsf(x); });
    case OpId::Relu: return map1(device, args, [] __device__(float x) { return x < 0.0f ? 0.0f : x; });
    case OpId::GeluTanh:
      return map1(device, args, [] __device__(float x) {
        return 0.5f * x * (1.0f + tanhf(kK * (x + kC * x * x * x)));
      });
    case OpId::GeluErf:
      return map1(device, args, [] __device__(float x) { return x * 0.5f * (1.0f + erff(x * kSqrtHalf)); });
    case OpId::Silu: return map1(device, args, [] __device__(float x) { return x / (1.0f + expf(-x)); });
    case OpId::Sigmoid: return map1(device, args, [] __device__(float x) { return 1.0f / (1.0f + expf(-x)); });
    case OpId::Tanh: return map1(device, args, [] __device__(float x) { return tanhf(x); });
    case OpId::Softplus:
      return map1(device, args, [] __device__(float x) { return x > 20.0f ? x : log1pf(expf(x)); });
    case OpId::Clamp:
      return map1(device, args, [a, b] __device__(float x) { return x < a ? a : (x > b ? b : x); });
    default: no_kernel("unary forward", op, device);
  }
}

// s is the input x, the output y or g itself, as OpKernels::unary_backward lists.
void unary_backward(int device, OpId op, UnaryParams p, const StridedArgs<3>& args) {
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  switch (op) {
    case OpId::AddScalar: return map2(device, args, [] __device__(float, float g) { return g; });
    case OpId::MulScalar: return map2(device, args, [a] __device__(float, float g) { return g * a; });
    case OpId::PowScalar:
      return map2(device, args, [a] __device__(float x, float g) {
        return a == 0.0f ? 0.0f : g * a * pw(x, a - 1.0f);
      });
    case OpId::Neg: return map2(device, args, [] __device__(float, float g) { return -g; });
    case OpId::Exp: return map2(device, args, [] __device__(float y, float g) { return g * y; });
    case OpId::Log: return map2(device, args, [] __device__(float x, float g) { return g / x; });
    case OpId::Sqrt: return map2(device, args, [] __device__(float y, float g) { return g / (2.0f * y); });
    case OpId::Rsqrt:
      return map2(device, args, [] __device__(float y, float g) { return -0.5f * g * y * y * y; });
    case OpId::Reciprocal: return map2(device, args, [] __device__(float y, float g) { return -g * y * y; });
    case OpId::Abs:
      return map2(device, args, [] __device__(float x, float g) {
        return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f);
      });
    case OpId::Relu: return map2(device, args, [] __device__(float y, float g) { return y > 0.0f ? g : 0.0f; });
    case OpId::GeluTanh:
      return map2(device, args, [] __device__(float x, float g) {
        const float t = tanhf(kK * (x + kC * x * x * x));
        return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kK * (1.0f + 3.0f * kC * x * x));
      });
    case OpId::GeluErf:
      return map2(device, args, [] __device__(float x, float g) {
        const float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
        const float pdf = expf(-0.5f * x * x) * kInvSqrt2Pi;
        return g * (cdf + x * pdf);
      });
    case OpId::Silu:
      return map2(device, args, [] __device__(float x, float g) {
        const float s = 1.0f / (1.0f + expf(-x));
        return g * s * (1.0f + x * (1.0f - s));
      });
    case OpId::Sigmoid: return map2(device, args, [] __device__(float y, float g) { return g * y * (1.0f - y); });
    case OpId::Tanh: return map2(device, args, [] __device__(float y, float g) { return g * (1.0f - y * y); });
    case OpId::Softplus:
      return map2(device, args, [] __device__(float x, float g) {
        if (x > 20.0f) return g;
        const float z = expf(x);
        return g * z / (z + 1.0f);
      });
    case OpId::Clamp:
      return map2(device, args, [a, b] __device__(float x, float g) { return x < a || x > b ? 0.0f : g; });
    default: no_kernel("unary backward", op, device);
  }
}

void binary_forward(int device, OpId op, const StridedArgs<3>& args) {
  switch (op) {
    case OpId::Add: return map2(device, args, [] __device__(float x, float y) { return x + y; });
    case OpId::Sub: return map2(device, args, [] __device__(float x, float y) { return x - y; });
    case OpId::Mul: return map2(device, args, [] __device__(float x, float y) { return x * y; });
    case OpId::Div: return map2(device, args, [] __device__(float x, float y) { return x / y; });
    case OpId::Pow: return map2(device, args, [] __device__(float x, float y) { return pw(x, y); });
    default: no_kernel("binary forward", op, device);
  }
}

void pow_backward(int device, int input, const StridedArgs<5>& args) {
  launch_strided(device, args, [input] __device__(const StridedArgs<5>& s, const int64_t(&o)[5]) {
    const float g = static_cast<const float*>(s.data[1])[o[1]];
    const float x = static_cast<const float*>(s.data[2])[o[2]];
    const float p = static_cast<const float*>(s.data[3])[o[3]];
    float d;
    if (input == 0) {
      d = p == 0.0f ? 0.0f : g * p * pw(x, p - 1.0f);
    } else {
      const float y = static_cast<const float*>(s.data[4])[o[4]];
      d = x == 0.0f && p >= 0.0f ? 0.0f : g * y * logf(x);
    }
    static_cast<float*>(s.data[0])[o[0]] = d;
  });
}

void where_forward(int device, const StridedArgs<4>& args) {
  launch_strided(device, args, [] __device__(const StridedArgs<4>& s, const int64_t(&o)[4]) {
    const float c = static_cast<const float*>(s.data[1])[o[1]];
    static_cast<float*>(s.data[0])[o[0]] = c != 0.0f ? static_cast<const float*>(s.data[2])[o[2]]
                                                     : static_cast<const float*>(s.data[3])[o[3]];
  });
}

}  // namespace tmem::cuda
