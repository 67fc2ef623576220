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

}  // namespace

void host::unary_forward(int, OpId op, UnaryParams p, const StridedArgs<2>& a) {
  const float x = static_cast<float>(p.a), y = static_cast<float>(p.b);
  const bool known = cuda::ew::visit_unary(op, [&](auto u) {
    each(a, [&](const int64_t* o) { at(a.data[0], o[0]) = decltype(u)::f(at(a.data[1], o[1]), x, y); });
  });
  REQUIRE(known);
}

void host::unary_backward(int, OpId op, UnaryParams p, const StridedArgs<3>& a) {
  const float x = static_cast<float>(p.a), y = static_cast<float>(p.b);
  const bool known = cuda::ew::visit_unary(op, [&](auto u) {
    each(a, [&](const int64_t* o) {
      at(a.data[0], o[0]) = decltype(u)::d(at(a.data[1], o[1]), at(a.data[2], o[2]), x, y);
    });
  });
  REQUIRE(known);
}

void host::binary_forward(int, OpId op, const StridedArgs<3>& a) {
  const bool known = cuda::ew::visit_binary(op, [&](auto b) {
    each(a, [&](const int64_t* o) { at(a.data[0], o[0]) = decltype(b)::f(at(a.data[1], o[1]), at(a.data[2], o[2])); });
  });
  REQUIRE(known);
}

void host::pow_backward(int, int input, const StridedArgs<5>& a) {
  each(a, [&](const int64_t* o) {
    at(a.data[0], o[0]) =
        cuda::ew::pow_grad(input, at(a.data[1], o[1]), at(a.data[2], o[2]), at(a.data[3], o[3]), at(a.data[4], o[4]));
  });
}

void host::where_forward(int, const StridedArgs<4>& a) {
  each(a, [&](const int64_t* o) {
    at(a.data[0], o[0]) = cuda::ew::where_value(at(a.data[1], o[1]), at(a.data[2], o[2]), at(a.data[3], o[3]));
  });
}

}  // namespace tmem::test
