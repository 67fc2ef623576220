// The selective_scan kernels (cuda/selective_scan.cuh) on the host, looping
// over each CUDA launch's index space, and selective_scan on the stand-in
// device against the CPU: model-sized shapes, gradients from one output,
// partial gradients, an undefined h0, views, empty sizes, and the same
// errors on both devices.
#include <string>
#include <vector>

#include "tmem/cuda/selective_scan.cuh"
#include "fake_device.h"
#include "host_kernels.h"
#include "tmem/ops/selective_scan.h"
#include "tmem/ops/shape.h"

namespace tmem::test {

// ---- the host kernels: cuda/selective_scan.cu's entries over the index
// spaces of its launches ----

void host::selective_scan_forward(int, const ScanArgs& a, const float* u, const float* delta, const float* A,
                                  const float* Bm, const float* Cm, const float* D, const float* h0, float* y,
                                  float* h) {
  for (int64_t i = 0; i < a.B * a.E; ++i)
    cuda::selective_scan_forward_one(a, u, delta, A, Bm, Cm, D, h0, y, h, nullptr, i);
}

void host::selective_scan_backward(int device, const ScanArgs& a, const float* u, const float* delta,
                                   const float* A, const float* Bm, const float* Cm, const float* D,
                                   const float* h0, const float* gy, const float* gh, float* gu, float* gdelta,
                                   float* gA, float* gBm, float* gCm, float* gD, float* gh0) {
  const int64_t chains = a.B * a.E, points = a.B * a.T * a.N;
  std::vector<float> states(static_cast<size_t>(chains * a.T * a.N));
  auto reduce = [&](const float* c1, const float* c2, float* out) {
    for (int64_t i = 0; i < points; ++i) cuda::selective_scan_reduce_one(a, c1, c2, states.data(), out, i);
  };
  for (int64_t i = 0; i < chains; ++i)
    cuda::selective_scan_forward_one(a, u, delta, A, Bm, Cm, D, h0, nullptr, nullptr, states.data(), i);
  if (gCm) reduce(gy, nullptr, gCm);
  if (!(gu || gdelta || gA || gBm || gD || gh0)) return;
  std::vector<float> part_a(static_cast<size_t>(gA ? a.E * a.N * a.B : 0));
  std::vector<float> part_d(static_cast<size_t>(gD ? a.E * a.B : 0));
  for (int64_t i = 0; i < chains; ++i)
    cuda::selective_scan_backward_one(a, u, delta, A, Bm, Cm, D, h0, gy, gh, states.data(), gu, gdelta,
                                      gA ? part_a.data() : nullptr, gD ? part_d.data() : nullptr, gh0, i);
  if (gA) host::sum_rows(device, part_a.data(), gA, a.E * a.N, a.B, 1.0);
  if (gD) host::sum_rows(device, part_d.data(), gD, a.E, a.B, 1.0);
  if (gBm) reduce(delta, u, gBm);
}

}  // namespace tmem::test

using namespace tmem;

namespace {

using V = std::vector<Tensor>;

// A float32 tensor of U[lo, hi) values that requires grad.
Tensor input(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

// u, delta, A, Bm, Cm, D, h0 with delta > 0 and A < 0, as in a model.
V scan_inputs(int64_t B, int64_t T, int64_t E, int64_t N) {
  return {input({B, T, E}, -1, 1, 61),     input({B, T, E}, 0.05, 1, 62), input({E, N}, -2, -0.1, 63),
          input({B, T, N}, -1, 1, 64),     input({B, T, N}, -1, 1, 65),   input({E}, -1, 1, 66),
          input({B, E, N}, -1, 1, 67)};
}

SelectiveScanResult scan(const V& v) { return selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], v[6]); }

// y and h side by side, so the parity check's gradient reaches both.
Tensor both(const V& v) {
  const SelectiveScanResult r = scan(v);
  return cat({reshape(r.y, {-1}), reshape(r.h, {-1})}, 0);
}

// "<error type>: <message>" of what f throws ("" when nothing).
template <class F>
std::string typed_error_of(F f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return std::string("ShapeError: ") + e.what();
  } catch (const DtypeError& e) {
    return std::string("DtypeError: ") + e.what();
  } catch (const DeviceError& e) {
    return std::string("DeviceError: ") + e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("device kernels: selective_scan matches the CPU on model shapes, from either output and with partial gradients") {
  test::FakeCuda fake(&test::host_op_kernels());
  test::check_parity("B=4 T=64 E=32 N=16, y and h", both, scan_inputs(4, 64, 32, 16), 1e-4);
  test::check_parity("B=3 T=7 E=5 N=4, y only", [](const V& v) { return scan(v).y; }, scan_inputs(3, 7, 5, 4), 1e-4);
  test::check_parity("B=3 T=7 E=5 N=4, h only", [](const V& v) { return scan(v).h; }, scan_inputs(3, 7, 5, 4), 1e-4);
  V no_h0 = scan_inputs(2, 6, 3, 5);
  no_h0[6] = Tensor();
  test::check_parity("h0 undefined", both, no_h0, 1e-4);
  // One input at a time needs a gradient: the skipped work must not change it.
  for (size_t k = 0; k < 7; ++k) {
    V v = scan_inputs(2, 6, 3, 5);
    for (size_t i = 0; i < v.size(); ++i)
      if (i != k) v[i] = v[i].detach();
    test::check_parity("a gradient for input " + std::to_string(k) + " only", both, v, 1e-4);
  }
}

TEST_CASE("device kernels: selective_scan matches the CPU on views and empty sizes") {
  test::FakeCuda fake(&test::host_op_kernels());
  test::check_parity("u and Cm transposed views",
                     [](const V& v) {
                       return selective_scan(transpose(v[0], 1, 2), v[1], v[2], v[3], transpose(v[4], 1, 2), v[5],
                                             v[6]).y;
                     },
                     [] {
                       V v = scan_inputs(2, 5, 3, 4);
                       v[0] = input({2, 3, 5}, -1, 1, 71);
                       v[4] = input({2, 4, 5}, -1, 1, 72);
                       return v;
                     }(),
                     1e-4);
  test::check_parity("T=0: h = h0", both, scan_inputs(2, 0, 3, 4));
  test::check_parity("an empty batch", both, scan_inputs(0, 5, 3, 4));
  test::check_parity("no channels", both, scan_inputs(2, 5, 0, 4));
  test::check_parity("no state (N=0): y = D u", both, scan_inputs(2, 5, 3, 0));
}

TEST_CASE("device kernels: selective_scan raises the same errors on the stand-in device as on the CPU") {
  test::FakeCuda fake(&test::host_op_kernels());
  auto same = [](const std::string& what, const V& cpu) {
    INFO(what);
    V dev;
    for (const Tensor& t : cpu) dev.push_back(t.defined() ? t.detach().to(Device::cuda()) : t);
    const std::string ec = typed_error_of([&] { scan(cpu); }), ed = typed_error_of([&] { scan(dev); });
    CHECK(!ec.empty());
    CHECK(ed == ec);
  };
  V v = scan_inputs(2, 5, 3, 4);
  v[2] = input({3, 5}, -1, 0, 1);
  same("A of the wrong shape", v);
  v = scan_inputs(2, 5, 3, 4);
  v[6] = input({2, 4, 3}, -1, 1, 1);
  same("h0 transposed", v);
  v = scan_inputs(2, 5, 3, 4);
  v[3] = input({2, 5}, -1, 1, 1);
  same("a 2-D Bm", v);
  V x = scan_inputs(1, 2, 3, 4);
  V mixed{x[0].detach().to(Device::cuda()), x[1], x[2], x[3], x[4], x[5], x[6]};
  CHECK(typed_error_of([&] { scan(mixed); }) ==
        "DeviceError: selective_scan: expected every input on u's device cuda:0, but delta is on cpu");
  V f64;
  for (const Tensor& t : x) f64.push_back(to_dtype(t.detach(), DType::Float64).to(Device::cuda()));
  CHECK(typed_error_of([&] { scan(f64); }) == "DtypeError: selective_scan: cuda kernels take float32, but got float64");
}
