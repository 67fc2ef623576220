// The fused attention kernels (cuda/attention.cuh) on the host, looping over
// each CUDA launch's index space, and scaled_dot_product_attention on the
// stand-in device against the CPU at model-like shapes: causal, a sliding
// window, key padding, T != S, views, and one gradient at a time.
#include <limits>
#include <string>
#include <vector>

#include "fake_device.h"
#include "host_kernels.h"
#include "tmem/cuda/attention.cuh"
#include "tmem/ops/attention.h"
#include "tmem/ops/shape.h"

namespace tmem::test {

void host::attention_forward(int, const AttentionArgs& a, const float* q, const float* k, const float* v,
                             const float* mask, float* out, float* lse) {
  for (int64_t i = 0; i < a.B * a.H * a.T; ++i) cuda::attention_forward_one(a, q, k, v, mask, out, lse, i);
}

void host::attention_backward(int, const AttentionArgs& a, const float* q, const float* k, const float* v,
                              const float* mask, const float* out, const float* lse, const float* gout,
                              float* gq, float* gk, float* gv) {
  std::vector<float> delta(static_cast<size_t>(a.B * a.H * a.T));
  for (int64_t i = 0; i < a.B * a.H * a.T; ++i)
    cuda::attention_backward_q_one(a, q, k, v, mask, out, lse, gout, delta.data(), gq, i);
  if (gk || gv)
    for (int64_t j = 0; j < a.B * a.H * a.S; ++j)
      cuda::attention_backward_kv_one(a, q, k, v, mask, lse, gout, delta.data(), gk, gv, j);
}

}  // namespace tmem::test

using namespace tmem;

namespace {

using V = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor t = rand(shape, -1.0, 1.0, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

V qkv(int64_t B, int64_t H, int64_t T, int64_t S, int64_t Dh, int64_t Dv) {
  return {input({B, H, T, Dh}, 81), input({B, H, S, Dh}, 82), input({B, H, S, Dv}, 83)};
}

// A key padding mask [B, 1, 1, S]: the last `pad` keys of item 1 hidden.
Tensor key_padding(int64_t B, int64_t S, int64_t pad, Device dev) {
  Tensor m = zeros({B, 1, 1, S});
  for (int64_t s = S - pad; s < S; ++s) m.data<float>()[1 * S + s] = -std::numeric_limits<float>::infinity();
  return m.to(dev);
}

}  // namespace

TEST_CASE("device kernels: fused attention matches the CPU at model shapes, causal, window, key padding") {
  test::FakeCuda fake(&test::host_op_kernels());
  test::check_parity("causal B=2 H=4 T=S=70 Dh=16",
                     [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), true); },
                     qkv(2, 4, 70, 70, 16, 16), 1e-4);
  test::check_parity("window 9, T=S=40",
                     [](const V& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), false, 9); },
                     qkv(2, 2, 40, 40, 8, 8), 1e-4);
  test::check_parity("key padding, T=33 S=70, Dv=5",
                     [](const V& v) {
                       return scaled_dot_product_attention(v[0], v[1], v[2], key_padding(2, 70, 6, v[0].device()));
                     },
                     qkv(2, 3, 33, 70, 8, 5), 1e-4);
  test::check_parity("q and k transposed views (MultiheadAttention's layout)",
                     [](const V& v) {
                       return scaled_dot_product_attention(transpose(v[0], 1, 2), transpose(v[1], 1, 2), v[2],
                                                           Tensor(), true);
                     },
                     V{input({2, 20, 4, 8}, 84), input({2, 20, 4, 8}, 85), input({2, 4, 20, 8}, 86)}, 1e-4);
  for (size_t k = 0; k < 3; ++k) {
    V v = qkv(2, 2, 20, 20, 8, 8);
    for (size_t i = 0; i < v.size(); ++i)
      if (i != k) v[i] = v[i].detach();
    test::check_parity("a gradient for input " + std::to_string(k) + " only",
                       [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true); }, v,
                       1e-4);
  }
}

TEST_CASE("device kernels: fused attention makes a NaN row of a NaN score or a +inf mask, as the CPU") {
  test::FakeCuda fake(&test::host_op_kernels());
  Tensor mask = zeros({4, 5});
  mask.data<float>()[1 * 5 + 2] = std::numeric_limits<float>::quiet_NaN();
  mask.data<float>()[2 * 5 + 0] = std::numeric_limits<float>::infinity();
  V v = qkv(1, 1, 4, 5, 4, 2);
  const Tensor cpu = scaled_dot_product_attention(v[0], v[1], v[2], mask);
  for (int64_t t = 0; t < 4; ++t)
    for (double x : slice(cpu, 2, t, t + 1).to_vector()) CHECK(std::isnan(x) == (t == 1 || t == 2));
  test::check_parity("a NaN and a +inf in the mask",
                     [&mask](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], mask.to(x[0].device())); },
                     v, 1e-4);
}
