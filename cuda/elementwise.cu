// Elementwise kernels (ops/elementwise.cpp's device half): one templated
// strided kernel (cuda/strided.cuh) with broadcasting, instantiated with one
// device lambda per op for the forward and one for the backward; the formulas
// are cuda/elementwise.cuh's. float32. Shapes: any, every
// operand broadcast to the output's shape.
#include <cmath>
#include <string>

#include "tmem/core/device_backend.h"
#include "tmem/cuda/check.h"
#include "tmem/cuda/elementwise.cuh"
#include "tmem/cuda/kernels.h"
#include "tmem/cuda/strided.cuh"

namespace tmem::cuda {

namespace {

// out = U::f(x, a, b); args {out, x}.
template <class U>
void map_unary(int device, const StridedArgs<2>& args, float a, float b) {
  launch_strided(device, args, [a, b] __device__(const StridedArgs<2>& s, const int64_t(&o)[2]) {
    static_cast<float*>(s.data[0])[o[0]] = U::f(static_cast<const float*>(s.data[1])[o[1]], a, b);
  });
}

// gx = U::d(s, g, a, b); args {gx, s, g}.
template <class U>
void map_unary_grad(int device, const StridedArgs<3>& args, float a, float b) {
  launch_strided(device, args, [a, b] __device__(const StridedArgs<3>& s, const int64_t(&o)[3]) {
    static_cast<float*>(s.data[0])[o[0]] =
        U::d(static_cast<const float*>(s.data[1])[o[1]], static_cast<const float*>(s.data[2])[o[2]], a, b);
  });
}

// out = B::f(u, v); args {out, u, v}.
template <class B>
void map_binary(int device, const StridedArgs<3>& args) {
  launch_strided(device, args, [] __device__(const StridedArgs<3>& s, const int64_t(&o)[3]) {
    static_cast<float*>(s.data[0])[o[0]] =
        B::f(static_cast<const float*>(s.data[1])[o[1]], static_cast<const float*>(s.data[2])[o[2]]);
  });
}

[[noreturn]] void no_kernel(const char* what, OpId op, int device) {
  throw_not_implemented((std::string(op_name(op)) + " (" + what + ")").c_str(), Device::cuda(device));
}

}  // namespace

void unary_forward(int device, OpId op, UnaryParams p, const StridedArgs<2>& args) {
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  if (!ew::visit_unary(op, [&](auto u) { map_unary<decltype(u)>(device, args, a, b); }))
    no_kernel("unary forward", op, device);
}

// s is the input x, the output y or g itself, as OpKernels::unary_backward lists.
void unary_backward(int device, OpId op, UnaryParams p, const StridedArgs<3>& args) {
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  if (!ew::visit_unary(op, [&](auto u) { map_unary_grad<decltype(u)>(device, args, a, b); }))
    no_kernel("unary backward", op, device);
}

void binary_forward(int device, OpId op, const StridedArgs<3>& args) {
  if (!ew::visit_binary(op, [&](auto f) { map_binary<decltype(f)>(device, args); }))
    no_kernel("binary forward", op, device);
}

void pow_backward(int device, int input, const StridedArgs<5>& args) {
  launch_strided(device, args, [input] __device__(const StridedArgs<5>& s, const int64_t(&o)[5]) {
    static_cast<float*>(s.data[0])[o[0]] = ew::pow_grad(
        input, static_cast<const float*>(s.data[1])[o[1]], static_cast<const float*>(s.data[2])[o[2]],
        static_cast<const float*>(s.data[3])[o[3]], static_cast<const float*>(s.data[4])[o[4]]);
  });
}

void where_forward(int device, const StridedArgs<4>& args) {
  launch_strided(device, args, [] __device__(const StridedArgs<4>& s, const int64_t(&o)[4]) {
    static_cast<float*>(s.data[0])[o[0]] =
        ew::where_value(static_cast<const float*>(s.data[1])[o[1]], static_cast<const float*>(s.data[2])[o[2]],
                        static_cast<const float*>(s.data[3])[o[3]]);
  });
}

}  // namespace tmem::cuda
