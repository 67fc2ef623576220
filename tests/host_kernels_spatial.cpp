// The spatial kernels (cuda/grid_sample.cuh, gaussian_splat.cuh, conv3d.cuh,
// convlstm.cuh) on the host, looping over each CUDA launch's index space
// (the cell's entries composed by cuda/convlstm_cell.h as on CUDA), and
// grid_sample, gaussian_splat, conv3d_depthwise and convlstm3d_cell on
// the stand-in device against the CPU: larger shapes than the op table's
// gradcheck cases, the Tensor Memory shapes, edge cases (empty tensors,
// non-contiguous inputs, non-finite grid points, tiny and huge sigma, partial
// gradients) and the same errors on both devices.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tmem/cuda/conv3d.cuh"
#include "tmem/cuda/convlstm.cuh"
#include "tmem/cuda/convlstm_cell.h"
#include "tmem/cuda/gaussian_splat.cuh"
#include "tmem/cuda/grid_sample.cuh"
#include "fake_device.h"
#include "host_kernels.h"
#include "host_rows.h"
#include "tmem/ops/conv3d.h"
#include "tmem/ops/convlstm.h"
#include "tmem/ops/gaussian_splat.h"
#include "tmem/ops/grid_sample.h"
#include "tmem/ops/shape.h"

namespace tmem::test {

namespace {

// ---- the host kernels ----

struct PlusAdd {
  void operator()(float* p, float v) const { *p += v; }
};

}  // namespace

void host::grid_sample_forward(int, const GridSampleArgs& a, const float* input, const float* grid,
                               float* out) {
  for (int64_t i = 0; i < a.N * a.C * a.P; ++i) {
    if (a.K == 2)
      cuda::grid_sample_forward_one<2>(a, input, grid, out, i);
    else
      cuda::grid_sample_forward_one<3>(a, input, grid, out, i);
  }
}

void host::grid_sample_backward(int, const GridSampleArgs& a, const float* input, const float* grid,
                                const float* gout, float* ginput, float* ggrid) {
  if (ginput) {
    if (!a.accumulate) std::fill(ginput, ginput + a.N * a.C * a.size[0] * a.size[1] * a.size[2], 0.0f);
    for (int64_t i = 0; i < a.N * a.C * a.P; ++i) {
      if (a.K == 2)
        cuda::grid_sample_backward_input_one<2>(a, grid, gout, ginput, i, PlusAdd{});
      else
        cuda::grid_sample_backward_input_one<3>(a, grid, gout, ginput, i, PlusAdd{});
    }
  }
  if (ggrid && !a.nearest)
    for (int64_t j = 0; j < a.N * a.P; ++j) {
      if (a.K == 2)
        cuda::grid_sample_backward_grid_one<2>(a, input, grid, gout, ggrid, j);
      else
        cuda::grid_sample_backward_grid_one<3>(a, input, grid, gout, ggrid, j);
    }
}

void host::gaussian_splat_forward(int, const SplatArgs& a, const float* content, const float* mu,
                                  const float* sigma, float* vol) {
  for (int64_t i = 0; i < a.B * a.C * a.D * a.H * a.W; ++i) cuda::splat_forward_one(a, content, mu, sigma, vol, i);
}

void host::gaussian_splat_backward(int, const SplatArgs& a, const float* content, const float* mu,
                                   const float* sigma, const float* gvol, float* gcontent, float* gmu, float* gsigma) {
  const int64_t S = a.D * a.H * a.W;
  if (gcontent && a.C > 0) run_rows(a.B * a.C, S, cuda::SplatContentRows{a, mu, sigma, gvol, gcontent});
  if (gmu || gsigma) run_rows(a.B, S, cuda::SplatGeometryRows{a, content, mu, sigma, gvol, gmu, gsigma});
}

void host::conv3d_depthwise_forward(int, const Conv3dArgs& a, const float* input, const float* weight,
                                    const float* bias, float* out) {
  for (int64_t i = 0; i < a.B * a.C * a.out[0] * a.out[1] * a.out[2]; ++i)
    cuda::conv3d_forward_one(a, input, weight, bias, out, i);
}

void host::conv3d_depthwise_backward_input(int, const Conv3dArgs& a, const float* gout, const float* weight,
                                           float* ginput) {
  for (int64_t i = 0; i < a.B * a.C * a.size[0] * a.size[1] * a.size[2]; ++i)
    cuda::conv3d_backward_input_one(a, gout, weight, ginput, i);
}

void host::conv3d_depthwise_backward_params(int device, const Conv3dArgs& a, const float* gout,
                                            const float* input, float* gweight, float* gbias) {
  const int64_t taps = a.kernel[0] * a.kernel[1] * a.kernel[2];
  if (gweight) {
    std::vector<float> wpart(static_cast<size_t>(a.C * taps * a.B));
    for (int64_t j = 0; j < a.C * taps * a.B; ++j) cuda::conv3d_backward_weight_one(a, gout, input, wpart.data(), j);
    host::sum_rows(device, wpart.data(), gweight, a.C * taps, a.B, 1.0);
  }
  if (gbias) {
    std::vector<float> bpart(static_cast<size_t>(a.C * a.B));
    for (int64_t j = 0; j < a.C * a.B; ++j) cuda::conv3d_backward_bias_one(a, gout, bpart.data(), j);
    host::sum_rows(device, bpart.data(), gbias, a.C, a.B, 1.0);
  }
}

namespace {

void gates_forward(int, int64_t B, int64_t C, int64_t S, const float* P, const float* pb, const float* c,
                   float* gates, float* cn, float* hn) {
  for (int64_t i = 0; i < B * C * S; ++i) cuda::convlstm3d_gates_forward_one(C, S, P, pb, c, gates, cn, hn, i);
}

void gates_backward(int, int64_t B, int64_t C, int64_t S, const float* gates, const float* c, const float* cn,
                    const float* ghn, const float* gcn, float* dP, float* dc) {
  if (!dP && !dc) return;
  for (int64_t i = 0; i < B * C * S; ++i)
    cuda::convlstm3d_gates_backward_one(C, S, gates, c, cn, ghn, gcn, dP, dc, i);
}

constexpr cuda::ConvLstmGateKernels kGates{&gates_forward, &gates_backward};

// The stand-in backend over the host-built kernels, as cuda/convlstm.cu's
// entries use the CUDA backend.
const DeviceBackend& host_backend() {
  static const DeviceBackend b = fake_backend(&host_op_kernels());
  return b;
}

}  // namespace

int64_t host::convlstm3d_cell_gates_row(int, const ConvLstmArgs& a) { return a.S(); }

void host::convlstm3d_cell_forward(int device, const ConvLstmArgs& a, const ConvLstmWeights<float>& w,
                                   const float* x, const float* h, const float* c, float* gates, float* cn,
                                   float* hn) {
  cuda::convlstm_cell_forward(host_backend(), kGates, device, a, w, x, h, c, gates, cn, hn);
}

void host::convlstm3d_cell_backward(int device, const ConvLstmArgs& a, const ConvLstmWeights<float>& w,
                                    const float* x, const float* h, const float* c, const float* cn,
                                    const float* gates, const float* ghn, const float* gcn,
                                    const ConvLstmGrads<float>& g) {
  cuda::convlstm_cell_backward(host_backend(), kGates, device, a, w, x, h, c, cn, gates, ghn, gcn, g);
}

}  // namespace tmem::test

using namespace tmem;

namespace {

using V = std::vector<Tensor>;
using P = GridSamplePadding;

// A float32 tensor of U[lo, hi) values that requires grad.
Tensor input(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

// The convlstm3d_cell inputs for x [B,Cx,D,H,W] and C state channels
// (order x, h, c, dw_d, dw_h, dw_w, db_d, db_h, db_w, pw, pb).
V cell_inputs(int64_t B, int64_t Cx, int64_t C, int64_t D, int64_t H, int64_t W) {
  const int64_t Cz = Cx + C;
  return {input({B, Cx, D, H, W}, -1, 1, 31), input({B, C, D, H, W}, -1, 1, 32), input({B, C, D, H, W}, -1, 1, 33),
          input({Cz, 3}, -1, 1, 34),          input({Cz, 3}, -1, 1, 35),          input({Cz, 3}, -1, 1, 36),
          input({Cz}, -0.5, 0.5, 37),         input({Cz}, -0.5, 0.5, 38),         input({Cz}, -0.5, 0.5, 39),
          input({4 * C, Cz}, -0.6, 0.6, 40),  input({4 * C}, -0.5, 0.5, 41)};
}

ConvLSTM3DWeights cell_weights(const V& v) { return {v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]}; }

// "<error type>: <message>" of what f throws ("" when nothing).
template <class F>
std::string typed_error_of(F f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return std::string("ShapeError: ") + e.what();
  } catch (const DtypeError& e) {
    return std::string("DtypeError: ") + e.what();
  } catch (const ValueError& e) {
    return std::string("ValueError: ") + e.what();
  } catch (const DeviceError& e) {
    return std::string("DeviceError: ") + e.what();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  }
  return "";
}

// f throws the same error on the CPU inputs and on device copies of them.
void check_same_error(const std::string& what, const std::function<void(const V&)>& f, const V& cpu) {
  INFO(what);
  V dev;
  for (const Tensor& t : cpu) dev.push_back(t.defined() ? t.detach().to(Device::cuda()) : t);
  const std::string ec = typed_error_of([&] { f(cpu); }), ed = typed_error_of([&] { f(dev); });
  CHECK(!ec.empty());
  CHECK(ed == ec);
}

}  // namespace

TEST_CASE("device kernels: grid_sample matches the CPU on larger grids, every mode and padding") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (P pad : {P::Zeros, P::Border, P::Reflection})
    for (bool align : {false, true}) {
      const std::string tail = std::string(grid_sample_padding_name(pad)) + (align ? " align_corners" : "");
      for (GridSampleMode mode : {GridSampleMode::Bilinear, GridSampleMode::Nearest}) {
        auto f = [=](const V& v) { return grid_sample(v[0], v[1], mode, pad, align); };
        const std::string m = grid_sample_mode_name(mode);
        test::check_parity("5-D " + m + " " + tail, f,
                           V{input({3, 4, 5, 6, 7}, -1, 1, 1), input({3, 4, 3, 5, 3}, -1.3, 1.3, 2)});
        test::check_parity("4-D " + m + " " + tail, f,
                           V{input({3, 4, 6, 7}, -1, 1, 3), input({3, 9, 8, 2}, -1.3, 1.3, 4)});
      }
    }
}

TEST_CASE("device kernels: grid_sample at the Tensor Memory read, on views, empty and non-finite grids") {
  test::FakeCuda fake(&test::host_op_kernels());
  auto read = [](const V& v) {
    return grid_sample(v[0], v[1], GridSampleMode::Bilinear, P::Border, true);
  };
  test::check_parity("[128,16,6,6,6] at one point per item", read,
                     V{input({128, 16, 6, 6, 6}, -1, 1, 5), input({128, 1, 1, 1, 3}, -1, 1, 6)});
  // Many points per cell: the input gradient's scatter adds into shared cells.
  test::check_parity("200 points on a 2x2x2 input", read,
                     V{input({2, 3, 2, 2, 2}, -1, 1, 7), input({2, 200, 1, 1, 3}, -1.2, 1.2, 8)}, 1e-4);
  test::check_parity("a permuted input and a sliced grid",
                     [](const V& v) {
                       return grid_sample(permute(v[0], {1, 0, 2, 3}), slice(v[1], 2, 0, 5, 2),
                                          GridSampleMode::Bilinear, P::Reflection, false);
                     },
                     V{input({3, 2, 5, 6}, -1, 1, 9), input({2, 4, 5, 2}, -1.5, 1.5, 10)}, 1e-4);
  test::check_parity("an empty batch", read, V{input({0, 4, 3, 3, 3}), input({0, 2, 1, 1, 3})});
  // s * s, made later, leaves s's gradient pending: the scatter adds into it.
  test::check_parity("the input's gradient pending",
                     [read](const V& v) {
                       Tensor s = v[0] * 1.5;
                       return sum(read(V{s, v[1]})) + sum(s * s);
                     },
                     V{input({4, 3, 2, 3, 2}, -1, 1, 12), input({4, 5, 1, 1, 3}, -1.2, 1.2, 13)}, 1e-4);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (P pad : {P::Zeros, P::Border, P::Reflection})
    for (bool align : {false, true}) {
      // Non-finite, huge, border and out-of-range coordinates.
      Tensor g = tensor({nan, 0.2, 0.1, inf, -0.3, 0.5, -inf, 1.0, -1.0, 1e30, -1e30, 0.0, 1.0, 1.0, 1.0,
                         -1.0, -1.0, -1.0, 3.5, -2.5, 0.7, 0.25, nan, inf},
                        {1, 8, 1, 1, 3});
      g.requires_grad_();
      test::check_parity(std::string("special coordinates, ") + grid_sample_padding_name(pad) +
                             (align ? " align_corners" : ""),
                         [=](const V& v) { return grid_sample(v[0], v[1], GridSampleMode::Bilinear, pad, align); },
                         V{input({1, 2, 3, 4, 5}, -1, 1, 11), g}, 1e-4);
    }
}

TEST_CASE("device kernels: gaussian_splat matches the CPU at the Tensor Memory write and edge cases") {
  test::FakeCuda fake(&test::host_op_kernels());
  auto splat = [](double truncate) {
    return [truncate](const V& v) { return gaussian_splat(v[0], v[1], v[2], 6, 6, 6, truncate); };
  };
  auto tm = [] { return V{input({128, 16}, -1, 1, 1), input({128, 3}, -1, 1, 2), input({128}, 0.05, 0.8, 3)}; };
  test::check_parity("B=128 C=16 grid 6x6x6", splat(0.0), tm(), 1e-4);
  test::check_parity("B=128 C=16 grid 6x6x6 truncate 2", splat(2.0), tm(), 1e-4);
  test::check_parity("grid 1x4x7, sigma tiny and huge",
                     [](const V& v) { return gaussian_splat(v[0], v[1], v[2], 1, 4, 7); },
                     V{input({3, 5}), input({3, 3}), tensor({1e-4, 1e4, 0.3}, {3}).requires_grad_()}, 1e-4);
  test::check_parity("a transposed content", [](const V& v) { return gaussian_splat(transpose(v[0], 0, 1), v[1], v[2], 3, 4, 5); },
                     V{input({4, 3}), input({3, 3}, -1, 1, 2), input({3}, 0.2, 0.9, 3)}, 1e-4);
  test::check_parity("an empty batch", splat(0.0), V{input({0, 4}), input({0, 3}), input({0}, 0.2, 0.9)});
  test::check_parity("no channels", splat(0.0), V{input({2, 0}), input({2, 3}), input({2}, 0.2, 0.9)});
}

TEST_CASE("device kernels: conv3d_depthwise matches the CPU on larger shapes, views and empty inputs") {
  test::FakeCuda fake(&test::host_op_kernels());
  using A3 = std::array<int64_t, 3>;
  auto conv = [](A3 stride, A3 padding) {
    return [=](const V& v) { return conv3d_depthwise(v[0], v[1], v[2], stride, padding); };
  };
  test::check_parity("[4,6,7,8,9] kernel (3,3,3) padding 1", conv({1, 1, 1}, {1, 1, 1}),
                     V{input({4, 6, 7, 8, 9}), input({6, 1, 3, 3, 3}, -1, 1, 2), input({6}, -1, 1, 3)}, 1e-4);
  test::check_parity("kernel (2,3,4) stride (2,1,3) padding (0,2,1)", conv({2, 1, 3}, {0, 2, 1}),
                     V{input({3, 5, 6, 5, 9}), input({5, 1, 2, 3, 4}, -1, 1, 2), input({5}, -1, 1, 3)}, 1e-4);
  test::check_parity("the Tensor Memory stage along W, B=128 Cz=32 6x6x6", conv({1, 1, 1}, {0, 0, 1}),
                     V{input({128, 32, 6, 6, 6}), input({32, 1, 1, 1, 3}, -1, 1, 2), input({32}, -1, 1, 3)}, 1e-4);
  test::check_parity("a permuted input, no bias",
                     [](const V& v) {
                       return conv3d_depthwise(permute(v[0], {1, 0, 2, 3, 4}), v[1], Tensor(), {1, 1, 1}, {1, 0, 1});
                     },
                     V{input({4, 2, 5, 6, 7}), input({4, 1, 3, 2, 3}, -1, 1, 2)}, 1e-4);
  test::check_parity("an empty batch", conv({1, 1, 1}, {1, 1, 1}),
                     V{input({0, 3, 4, 4, 4}), input({3, 1, 3, 3, 3}, -1, 1, 2), input({3}, -1, 1, 3)});
}

TEST_CASE("device kernels: convlstm3d_cell matches the CPU at the Tensor Memory shapes and with partial gradients") {
  test::FakeCuda fake(&test::host_op_kernels());
  auto h_of = [](const V& v) { return convlstm3d_cell(v[0], v[1], v[2], cell_weights(v)).h; };
  auto c_of = [](const V& v) { return convlstm3d_cell(v[0], v[1], v[2], cell_weights(v)).c; };
  test::check_parity("h' of B=4 Cx=16 C=16 grid 6x6x6", h_of, cell_inputs(4, 16, 16, 6, 6, 6), 1e-4);
  test::check_parity("c' of B=3 Cx=2 C=5 grid 3x4x5", c_of, cell_inputs(3, 2, 5, 3, 4, 5), 1e-4);
  // Only the weights need gradients, then only x: the skipped stages must
  // not change the rest.
  V weights_only = cell_inputs(2, 3, 4, 4, 3, 5);
  for (int i = 0; i < 3; ++i) weights_only[i] = weights_only[i].detach();
  test::check_parity("h' with gradients for the weights only", h_of, weights_only, 1e-4);
  V x_only = cell_inputs(2, 3, 4, 4, 3, 5);
  for (size_t i = 1; i < x_only.size(); ++i) x_only[i] = x_only[i].detach();
  test::check_parity("h' with a gradient for x only", h_of, x_only, 1e-4);
  V pw_only = cell_inputs(2, 3, 4, 4, 3, 5);
  for (size_t i = 0; i < pw_only.size(); ++i)
    if (i != 9) pw_only[i] = pw_only[i].detach();
  test::check_parity("c' with a gradient for pw only", c_of, pw_only, 1e-4);
  test::check_parity("a permuted x", [](const V& v) {
    return convlstm3d_cell(permute(v[0], {0, 1, 2, 4, 3}), v[1], v[2], cell_weights(v)).h;
  }, [] {
    V v = cell_inputs(2, 3, 4, 4, 3, 5);
    v[0] = input({2, 3, 4, 5, 3}, -1, 1, 31);
    return v;
  }(), 1e-4);
  test::check_parity("an empty batch", h_of, cell_inputs(0, 2, 3, 3, 3, 3));
}

TEST_CASE("device kernels: the spatial ops raise the same errors on the stand-in device as on the CPU") {
  test::FakeCuda fake(&test::host_op_kernels());
  check_same_error("grid_sample: a grid of the wrong last dim",
                   [](const V& v) { grid_sample(v[0], v[1]); }, V{input({1, 2, 3, 3, 3}), input({1, 2, 2, 2, 2})});
  check_same_error("grid_sample: batch sizes differ",
                   [](const V& v) { grid_sample(v[0], v[1]); }, V{input({2, 2, 3, 3}), input({1, 2, 2, 2})});
  check_same_error("gaussian_splat: mu of the wrong shape",
                   [](const V& v) { gaussian_splat(v[0], v[1], v[2], 4, 4, 4); },
                   V{input({2, 3}), input({2, 2}), input({2}, 0.1, 0.5)});
  check_same_error("gaussian_splat: a sigma that is not positive",
                   [](const V& v) { gaussian_splat(v[0], v[1], v[2], 4, 4, 4); },
                   V{input({2, 3}), input({2, 3}), tensor({0.5, -0.25}, {2})});
  check_same_error("gaussian_splat: a negative truncation",
                   [](const V& v) { gaussian_splat(v[0], v[1], v[2], 4, 4, 4, -1.0); },
                   V{input({2, 3}), input({2, 3}), input({2}, 0.1, 0.5)});
  check_same_error("conv3d_depthwise: weight channels differ from the input's",
                   [](const V& v) { conv3d_depthwise(v[0], v[1], v[2]); },
                   V{input({2, 3, 4, 4, 4}), input({2, 1, 3, 3, 3}), input({3})});
  check_same_error("conv3d_depthwise: the kernel is larger than the padded input",
                   [](const V& v) { conv3d_depthwise(v[0], v[1], v[2]); },
                   V{input({2, 3, 2, 4, 4}), input({3, 1, 3, 3, 3}), input({3})});
  check_same_error("convlstm3d_cell: pw of the wrong shape", [](const V& v) {
    convlstm3d_cell(v[0], v[1], v[2], cell_weights(v));
  }, [] {
    V v = cell_inputs(2, 2, 3, 3, 3, 3);
    v[9] = input({12, 4});
    return v;
  }());
  check_same_error("convlstm3d_cell: h and c differ", [](const V& v) {
    convlstm3d_cell(v[0], v[1], v[2], cell_weights(v));
  }, [] {
    V v = cell_inputs(2, 2, 3, 3, 3, 3);
    v[2] = input({2, 3, 3, 3, 4});
    return v;
  }());
  // Mixed devices and float64 on the device.
  Tensor x = input({1, 2, 3, 3, 3}), g = input({1, 2, 2, 2, 3});
  CHECK(typed_error_of([&] { grid_sample(x.detach().to(Device::cuda()), g); }) ==
        "DeviceError: grid_sample: expected input and grid on one device, but got cuda:0 and cpu");
  CHECK(typed_error_of([&] {
          conv3d_depthwise(x.detach().to(Device::cuda()), input({2, 1, 3, 3, 3}), input({2}));
        }) == "DeviceError: conv3d_depthwise: expected input, weight and bias on one device, but got cuda:0, "
              "cpu and cpu");
  CHECK(typed_error_of([&] {
          gaussian_splat(input({2, 3}).detach().to(Device::cuda()), input({2, 3}), input({2}, 0.1, 0.5), 3, 3, 3);
        }) == "DeviceError: gaussian_splat: expected content, mu and sigma on one device, but got cuda:0, cpu "
              "and cpu");
  V cell = cell_inputs(1, 2, 3, 3, 3, 3);
  CHECK(typed_error_of([&] {
          convlstm3d_cell(cell[0].detach().to(Device::cuda()), cell[1], cell[2], cell_weights(cell));
        }) == "DeviceError: convlstm3d_cell: expected every input on x's device cuda:0, but h is on cpu");
  CHECK(typed_error_of([&] {
          const Tensor x64 = to_dtype(x.detach(), DType::Float64).to(Device::cuda());
          grid_sample(x64, to_dtype(g.detach(), DType::Float64).to(Device::cuda()));
        }) == "DtypeError: grid_sample: cuda kernels take float32, but got float64");
}
