// conv3d_depthwise (ops/conv3d.cpp): values and gradients against PyTorch
// fixtures (tools/fixtures/spatial.py), an exact small case, the gradients
// asked for, a float64 gradcheck and shape errors.
#include <string>

#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::fixture_tensor;
using tmem::test::fixture_values;
using tmem::test::require_gradcheck;
using tmem::test::contains;
using tmem::test::spatial_fixture;
using tmem::test::leaf;
using tmem::test::arr3;
using tmem::test::shape_error;
using tmem::test::kAtol32;
using tmem::test::kRtol32;

namespace {

using V = std::vector<Tensor>;

}  // namespace

TEST_CASE("conv3d_depthwise matches PyTorch F.conv3d(groups=C): values and gradients") {
  const auto& fx = spatial_fixture();
  for (const char* name : {"conv3d_k311", "conv3d_k131", "conv3d_k113", "conv3d_k333",
                           "conv3d_k333_s2", "conv3d_k325_s123_nobias", "conv3d_k531_s211"}) {
    const auto& c = fx.at(name);
    for (DType dt : {DType::Float32, DType::Float64}) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      const double atol = dt == DType::Float32 ? kAtol32 : 1e-9;
      const double rtol = dt == DType::Float32 ? kRtol32 : 1e-8;
      Tensor x = leaf(c["input"], dt), w = leaf(c["weight"], dt);
      Tensor b = c.contains("bias") ? leaf(c["bias"], dt) : Tensor();
      Tensor out = conv3d_depthwise(x, w, b, arr3(c["stride"]), arr3(c["padding"]));
      CHECK(out.shape() == c["out"]["shape"].get<Shape>());
      check_close(out, fixture_values(c["out"]), atol, rtol);
      sum(out * fixture_tensor(c["w_out"], dt)).backward();
      check_close(x.grad(), fixture_values(c["grad_input"]), atol, rtol);
      check_close(w.grad(), fixture_values(c["grad_weight"]), atol, rtol);
      if (b.defined()) check_close(b.grad(), fixture_values(c["grad_bias"]), atol, rtol);
    }
  }
}

TEST_CASE("conv3d_depthwise weight gradient, exact: ones 6x6, 3x3 ones, stride 2, padding 1") {
  // 24 channels, a 6x6 input of ones as depth 1, kernel (1,3,3), stride (1,2,2),
  // padding (0,1,1), grad_output of ones: each tap sees 2 or 3 valid rows times
  // 2 or 3 valid columns.
  Tensor x = ones({1, 24, 1, 6, 6});
  Tensor w = ones({24, 1, 1, 3, 3});
  w.requires_grad_();
  Tensor out = conv3d_depthwise(x, w, Tensor(), {1, 2, 2}, {0, 1, 1});
  REQUIRE(out.shape() == Shape{1, 24, 1, 3, 3});
  out.backward(ones(out.shape()));
  std::vector<double> want;
  for (int c = 0; c < 24; ++c)
    for (double v : {4, 6, 6, 6, 9, 9, 6, 9, 9}) want.push_back(v);
  check_close(w.grad(), want, 0, 0);
}

TEST_CASE("conv3d_depthwise: only the gradients asked for - non-contiguous input") {
  Generator gen(5);
  Tensor x = rand({2, 3, 4, 5, 6}, -1, 1, DType::Float32, gen);
  Tensor w = rand({3, 1, 3, 3, 3}, -1, 1, DType::Float32, gen);
  Tensor b = rand({3}, -1, 1, DType::Float32, gen);
  b.requires_grad_();
  Tensor out = conv3d_depthwise(x, w, b, {1, 1, 1}, {1, 1, 1});
  sum(out).backward();
  CHECK(!x.grad().defined());
  CHECK(!w.grad().defined());
  check_close(b.grad(), std::vector<double>(3, 2 * 4 * 5 * 6), 1e-3, 1e-6);

  // The same data read through a permuted (non-contiguous) view.
  Tensor xt = contiguous(permute(x, {0, 1, 2, 4, 3}));
  Tensor xv = permute(xt, {0, 1, 2, 4, 3});
  REQUIRE(!xv.is_contiguous());
  check_close(conv3d_depthwise(xv, w, Tensor(), {2, 1, 1}, {0, 1, 1}),
              conv3d_depthwise(x, w, Tensor(), {2, 1, 1}, {0, 1, 1}).to_vector(), 0, 0);
}

TEST_CASE("conv3d_depthwise gradcheck, float64: even kernel, padding wider than the kernel") {
  require_gradcheck(
      [](const V& v) { return conv3d_depthwise(v[0], v[1], v[2], {2, 1, 3}, {1, 2, 0}); },
      {gc_input({1, 2, 3, 4, 7}, -1, 1, 1), gc_input({2, 1, 2, 1, 4}, -1, 1, 2),
       gc_input({2}, -1, 1, 3)});
}

TEST_CASE("conv3d_depthwise: bad shapes raise ShapeError with both shapes - bad options ValueError") {
  Tensor x = zeros({2, 3, 4, 5, 6});
  Tensor w = zeros({3, 1, 3, 3, 3});
  std::string m = shape_error([&] { conv3d_depthwise(zeros({3, 4, 5, 6}), w, Tensor()); });
  CHECK(contains(m, "conv3d_depthwise"));
  CHECK(contains(m, "[3,4,5,6]"));
  CHECK(contains(m, "[3,1,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({4, 1, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[4,1,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[3,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 2, 3, 3, 3}), Tensor()); });
  CHECK(contains(m, "[3,2,3,3,3]"));
  m = shape_error([&] { conv3d_depthwise(x, w, zeros({4})); });
  CHECK(contains(m, "[4]"));
  CHECK(contains(m, "[2,3,4,5,6]"));
  m = shape_error([&] { conv3d_depthwise(x, zeros({3, 1, 7, 1, 1}), Tensor()); });
  CHECK(contains(m, "[2,3,4,5,6]"));
  CHECK(contains(m, "[3,1,7,1,1]"));
  CHECK_THROWS_AS(conv3d_depthwise(x, w, Tensor(), {0, 1, 1}, {1, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv3d_depthwise(x, w, Tensor(), {1, 1, 1}, {-1, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv3d_depthwise(x, zeros({3, 1, 3, 3, 3}, DType::Float64), Tensor()), DtypeError);
}

TEST_CASE("conv3d_depthwise: a padding whose padded size overflows int64 is named, not wrapped") {
  // D + 2 * padding wrapped (signed overflow) and was reported as a padded
  // input smaller than the kernel.
  Tensor x = zeros({1, 2, 3, 3, 3});
  Tensor w = zeros({2, 1, 3, 3, 3});
  const int64_t big = (int64_t{1} << 62) + (int64_t{1} << 61);
  std::string m = shape_error([&] { conv3d_depthwise(x, w, Tensor(), {1, 1, 1}, {big, 0, 0}); });
  CHECK(contains(m, "conv3d_depthwise: padding 6917529027641081856 on axis 0"));
  CHECK(contains(m, "larger than an int64 holds"));
  m = shape_error([&] { conv3d_depthwise(x, w, Tensor(), {1, 1, 1}, {0, 0, INT64_MAX}); });
  CHECK(contains(m, "on axis 2"));
}
