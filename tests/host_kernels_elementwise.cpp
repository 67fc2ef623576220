// The elementwise kernels (cuda/elementwise.cuh) on the host, visiting every
// element of the launch arguments as cuda/strided.cuh does; with the stand-in
// GEMM and row sums (fake_device.h) they make the host table run every op the
// CUDA backend registered before the op families, so whole models run on the
// stand-in device.
#include "tmem/cuda/elementwise.cuh"
#include "fake_device.h"
#include "host_kernels.h"

namespace tmem::test {

namespace {

float& at(void* p, int64_t off) { return static_cast<float*>(p)[off]; }

void host_unary_forward(int, OpId op, UnaryParams p, const StridedArgs<2>& a) {
  const float x = static_cast<float>(p.a), y = static_cast<float>(p.b);
  const bool known = cuda::ew::visit_unary(op, [&](auto u) {
    each(a, [&](const int64_t* o) { at(a.data[0], o[0]) = decltype(u)::f(at(a.data[1], o[1]), x, y); });
  });
  REQUIRE(known);
}

void host_unary_backward(int, OpId op, UnaryParams p, const StridedArgs<3>& a) {
  const float x = static_cast<float>(p.a), y = static_cast<float>(p.b);
  const bool known = cuda::ew::visit_unary(op, [&](auto u) {
    each(a, [&](const int64_t* o) {
      at(a.data[0], o[0]) = decltype(u)::d(at(a.data[1], o[1]), at(a.data[2], o[2]), x, y);
    });
  });
  REQUIRE(known);
}

void host_binary_forward(int, OpId op, const StridedArgs<3>& a) {
  const bool known = cuda::ew::visit_binary(op, [&](auto b) {
    each(a, [&](const int64_t* o) { at(a.data[0], o[0]) = decltype(b)::f(at(a.data[1], o[1]), at(a.data[2], o[2])); });
  });
  REQUIRE(known);
}

void host_pow_backward(int, int input, const StridedArgs<5>& a) {
  each(a, [&](const int64_t* o) {
    at(a.data[0], o[0]) =
        cuda::ew::pow_grad(input, at(a.data[1], o[1]), at(a.data[2], o[2]), at(a.data[3], o[3]), at(a.data[4], o[4]));
  });
}

void host_where_forward(int, const StridedArgs<4>& a) {
  each(a, [&](const int64_t* o) {
    at(a.data[0], o[0]) = cuda::ew::where_value(at(a.data[1], o[1]), at(a.data[2], o[2]), at(a.data[3], o[3]));
  });
}

}  // namespace

void add_elementwise_host_kernels(OpKernels& k) {
  for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Neg, OpId::Exp, OpId::Log, OpId::Sqrt,
                  OpId::Rsqrt, OpId::Pow, OpId::Abs, OpId::Relu, OpId::GeluTanh, OpId::GeluErf, OpId::Silu,
                  OpId::Sigmoid, OpId::Tanh, OpId::Softplus, OpId::Clamp, OpId::Where, OpId::MaskedFill,
                  OpId::AddScalar, OpId::MulScalar, OpId::PowScalar, OpId::Reciprocal, OpId::Cast,
                  OpId::ToDevice, OpId::Sum, OpId::Mean, OpId::Matmul, OpId::Reshape, OpId::Permute,
                  OpId::Slice, OpId::Expand, OpId::Contiguous, OpId::RepeatInterleave})
    k.implemented[static_cast<size_t>(op)] = true;
  k.unary_forward = &host_unary_forward;
  k.unary_backward = &host_unary_backward;
  k.binary_forward = &host_binary_forward;
  k.pow_backward = &host_pow_backward;
  k.where_forward = &host_where_forward;
}

}  // namespace tmem::test
