// The everyday tensor API of issue 16: printing (operator<<, checked against
// PyTorch's repr), tensors from vectors and borrowed memory, arange, linspace,
// argmax / argmin and the thread count.
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "tmem/core/parallel.h"
#include "test_util.h"

using namespace tmem;

namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

DType dtype_named(const std::string& s) {
  if (s == "float64") return DType::Float64;
  if (s == "int64") return DType::Int64;
  return DType::Float32;
}

}  // namespace

TEST_CASE("operator<< prints small, 0-d and empty tensors as PyTorch's repr") {
  CHECK(printed(tensor({1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(printed(tensor({3.5}, {})) == "tensor(3.5000)");
  CHECK(printed(tensor_int({7}, {})) == "tensor(7)");
  CHECK(printed(tensor({0.1, -2.5, 3.14159}, {3})) == "tensor([ 0.1000, -2.5000,  3.1416])");
  CHECK(printed(tensor({1e-5, 1.0, 12345.678}, {3})) == "tensor([1.0000e-05, 1.0000e+00, 1.2346e+04])");
  CHECK(printed(tensor({1.5, 2.25}, {2}, DType::Float64)) == "tensor([1.5000, 2.2500], dtype=torch.float64)");
  CHECK(printed(zeros({2, 0})) == "tensor([], size=(2, 0))");
  CHECK(printed(zeros({0}, DType::Int64)) == "tensor([], dtype=torch.int64)");
  CHECK(printed(Tensor()) == "tensor(undefined)");
  Tensor w = ones({2});
  w.requires_grad_();
  CHECK(printed(w) == "tensor([1., 1.], requires_grad=True)");
  CHECK(printed(mul(w, 2.0)) == "tensor([2., 2.], grad_fn=<mul_scalar>)");
  // A view taken before an in-place op on its base prints its re-based history.
  Tensor c = zeros({2});
  Tensor cv = slice(c, 0, 1, 2);
  add_(c, w);
  CHECK(printed(cv) == "tensor([1.], grad_fn=<slice>)");
  Tensor y = mul(w, 2.0);
  Tensor yv = slice(y, 0, 1, 2);
  fill_(y, 7.0);
  CHECK(printed(yv) == "tensor([7.], grad_fn=<slice>)");
  // A view prints its own elements.
  CHECK(printed(transpose(reshape(arange(0, 6), {2, 3}), 0, 1)) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
}

TEST_CASE("operator<< summarizes a tensor of more than 1000 elements with 3 edge items") {
  CHECK(printed(arange(0, 2000)) ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03], size=(2000,))");
  CHECK(printed(reshape(arange(0, 1001, 1, DType::Int64), {1001, 1})) ==
        "tensor([[   0],\n        [   1],\n        [   2],\n        ...,\n"
        "        [ 998],\n        [ 999],\n        [1000]], size=(1001, 1))");
  // 1000 elements are printed whole.
  const std::string all = printed(arange(0, 1000, 1, DType::Int64));
  CHECK(all.find("...") == std::string::npos);
  CHECK(all.substr(all.size() - 6) == " 999])");
}

TEST_CASE("operator<< matches torch 1.13's repr on the tensor_repr fixtures") {
  const auto cases = test::load_fixture("tensor_repr");
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    const std::string name = it.key();
    const nlohmann::json& c = it.value();
    INFO(name);
    Tensor t = test::fixture_tensor(c.at("tensor"), dtype_named(c.at("dtype")));
    if (c.at("requires_grad").get<bool>()) t.requires_grad_();
    // tmem also names the size of a summarized tensor ("tmem": torch's repr
    // with that suffix, placed by torch's own suffix layout).
    CHECK(printed(t) == c.value("tmem", c.at("repr").get<std::string>()));
  }
}

TEST_CASE("tensor() from std::vector<float> and std::vector<int64_t> copies with a shape") {
  std::vector<float> f{1.5f, -2.0f, 0.25f, 8.0f, 3.0f, -1.0f};
  Tensor a = tensor(f, {2, 3});
  CHECK(a.dtype() == DType::Float32);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.to_vector() == std::vector<double>{1.5, -2.0, 0.25, 8.0, 3.0, -1.0});
  f[0] = 99.0f;  // a copy: the tensor keeps its value
  CHECK(a.to_vector()[0] == 1.5);
  std::vector<int64_t> i{std::numeric_limits<int64_t>::min(), 0, 42};
  Tensor b = tensor(i);
  CHECK(b.dtype() == DType::Int64);
  CHECK(b.shape() == Shape{3});
  CHECK(b.to_int_vector() == i);
  CHECK(tensor(std::vector<float>{}).shape() == Shape{0});
  CHECK_THROWS_WITH_AS(tensor(f, {4}), "tensor: got 6 values for shape [4]", ShapeError);
  // A braced list still means the float64-valued overload (float32 by default).
  CHECK(tensor({1, 2}, {2}).dtype() == DType::Float32);
}

TEST_CASE("from_blob borrows the caller's memory without a copy") {
  std::vector<float> buf{1, 2, 3, 4, 5, 6};
  {
    Tensor t = from_blob(buf.data(), {2, 3});
    CHECK(t.data<float>() == buf.data());
    CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
    buf[4] = 50;  // the caller's writes show through ...
    CHECK(t.to_vector()[4] == 50);
    Tensor row = slice(t, 0, 1, 2);
    mul_(row, 2.0);  // ... and the tensor's writes land in the buffer
    CHECK(buf == std::vector<float>{1, 2, 3, 8, 100, 12});
    Tensor s = sum(t);  // ops read it as any tensor
    CHECK(s.item() == 126);
  }
  // The tensor is gone and the buffer, never freed by tmem, is intact.
  CHECK(buf == std::vector<float>{1, 2, 3, 8, 100, 12});
  int64_t ids[3] = {5, 6, 7};
  CHECK(from_blob(ids, {3}, DType::Int64).to_int_vector() == std::vector<int64_t>{5, 6, 7});
  CHECK(from_blob(nullptr, {0}).numel() == 0);
  CHECK_THROWS_WITH_AS(from_blob(nullptr, {2}), "from_blob: null data for shape [2]", ValueError);
  CHECK_THROWS_AS(from_blob(buf.data(), {-1}), ShapeError);
}

TEST_CASE("arange and linspace as PyTorch") {
  CHECK(arange(5).to_vector() == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(4, DType::Int64).to_int_vector() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(arange(1, 2.5, 0.5).to_vector() == std::vector<double>{1, 1.5, 2});
  CHECK(arange(3, 0, -1).to_vector() == std::vector<double>{3, 2, 1});
  CHECK(arange(0).numel() == 0);
  CHECK_THROWS_AS(arange(0, 1, 0), ValueError);
  // arange_int is exact where a double is not (2^60 + 1 rounds to 2^60).
  const int64_t big = int64_t{1} << 60, lo = std::numeric_limits<int64_t>::min();
  CHECK(arange_int(big, big + 3).to_int_vector() == std::vector<int64_t>{big, big + 1, big + 2});
  CHECK(arange_int(7, 0, -3).to_int_vector() == std::vector<int64_t>{7, 4, 1});
  CHECK(arange_int(0, 5, 9).to_int_vector() == std::vector<int64_t>{0});
  CHECK(arange_int(5, 5).numel() == 0);
  CHECK(arange_int(0, 5, -1).numel() == 0);
  // end - start overflows int64: 4 values.
  CHECK(arange_int(lo, std::numeric_limits<int64_t>::max(), int64_t{1} << 62).to_int_vector() ==
        std::vector<int64_t>{lo, -(int64_t{1} << 62), 0, int64_t{1} << 62});
  CHECK_THROWS_WITH_AS(arange_int(0, 1, 0), "arange: step must be non-zero", ValueError);
  CHECK_THROWS_WITH_AS(arange_int(lo, std::numeric_limits<int64_t>::max()),
                       "arange: start -9223372036854775808, end 9223372036854775807, step 1 give 1.84467e+19 "
                       "values of int64, more bytes than an int64 can count",
                       ValueError);
  // torch.linspace values (torch 1.13); float32 may differ in the last bit
  // (PyTorch computes it in float32 vector lanes), the ends are exact.
  CHECK(linspace(0, 1, 5).to_vector() == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(linspace(3, -2, 3).to_vector() == std::vector<double>{3, 0.5, -2});
  CHECK(linspace(0, 10, 5, DType::Int64).to_int_vector() == std::vector<int64_t>{0, 2, 5, 7, 10});
  CHECK(linspace(2, 7, 1).to_vector() == std::vector<double>{2});
  CHECK(linspace(0, 1, 0).numel() == 0);
  Tensor l = linspace(0.1, 0.7, 100);
  const std::vector<double> v = l.to_vector();
  CHECK(v.front() == static_cast<double>(0.1f));
  CHECK(v.back() == static_cast<double>(0.7f));
  // torch.linspace(0.1, 0.7, 100)[10], [50]: within one float32 ulp.
  const double torch_v[2] = {0.16060607135295868, 0.40303027629852295};
  for (int k = 0; k < 2; ++k) {
    const auto want = static_cast<float>(torch_v[k]);
    const double got = v[k == 0 ? 10 : 50];
    CHECK(std::abs(got - want) <= std::nextafter(want, 1.0f) - want);
  }
  CHECK_THROWS_WITH_AS(linspace(0, 1, -1), "linspace: expected steps >= 0, but got -1", ValueError);
}

TEST_CASE("arange: non-finite arguments and counts too large to allocate raise ValueError naming arange") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(arange(0, nan), "arange: expected finite start, end and step, but got start 0, end nan, step 1",
                       ValueError);
  CHECK_THROWS_WITH_AS(arange(nan, 5), doctest::Contains("but got start nan, end 5, step 1"), ValueError);
  CHECK_THROWS_WITH_AS(arange(0, 5, nan), doctest::Contains("step nan"), ValueError);
  CHECK_THROWS_WITH_AS(arange(0, inf), doctest::Contains("arange: expected finite start, end and step"), ValueError);
  CHECK_THROWS_WITH_AS(arange(-inf, 0, -1), doctest::Contains("start -inf"), ValueError);
  CHECK_THROWS_WITH_AS(arange(0, 0x1p62), "arange: start 0, end 4.61169e+18, step 1 give 4.61169e+18 values of "
                       "float32, more bytes than an int64 can count", ValueError);
  // end - start overflows double to inf: still the count check, not a cast of inf.
  CHECK_THROWS_WITH_AS(arange(-1e308, 1e308, 1e-300), doctest::Contains("more bytes than an int64 can count"),
                       ValueError);
  CHECK_THROWS_WITH_AS(arange(0, 1e30, 1e10, DType::Int64), doctest::Contains("arange:"), ValueError);
  CHECK_THROWS_WITH_AS(arange(1e19, 2e19, 1e19, DType::Int64), "arange: values from 1e+19 to 1e+19 do not fit int64",
                       ValueError);
  // The limits leave ordinary ranges alone; an empty range stays empty.
  CHECK(arange(5, 0).numel() == 0);
  CHECK(arange(0, 1e300, 1e299).numel() == 10);
  CHECK(arange(-3, 3, 2, DType::Int64).to_int_vector() == std::vector<int64_t>{-3, -1, 1});
}

TEST_CASE("argmax and argmin: with dim and keepdim, over the flattened tensor, ties to the first index") {
  Tensor a = tensor({1, 5, 5, 0,
                     7, 2, 7, -1,
                     3, 3, 3, 3}, {3, 4});
  CHECK(argmax(a).dtype() == DType::Int64);
  CHECK(argmax(a).dim() == 0);
  CHECK(argmax(a).to_int_vector() == std::vector<int64_t>{4});  // the first 7
  CHECK(argmin(a).to_int_vector() == std::vector<int64_t>{7});
  CHECK(argmax(a, 1).to_int_vector() == std::vector<int64_t>{1, 0, 0});
  CHECK(argmin(a, 1).to_int_vector() == std::vector<int64_t>{3, 3, 0});
  CHECK(argmax(a, 0).to_int_vector() == std::vector<int64_t>{1, 0, 1, 2});
  CHECK(argmax(a, -1, true).shape() == Shape{3, 1});
  CHECK(argmax(a, std::nullopt, true).shape() == Shape{1, 1});
  CHECK(argmax(a, std::nullopt, true).to_int_vector() == std::vector<int64_t>{4});
  // NaN counts as the maximum and the minimum (PyTorch).
  Tensor n = tensor({1, std::nan(""), 3}, {3});
  CHECK(argmax(n).to_int_vector() == std::vector<int64_t>{1});
  CHECK(argmin(n).to_int_vector() == std::vector<int64_t>{1});
  // Not differentiable: no graph is recorded.
  Tensor w = tensor({1, 2}, {2});
  w.requires_grad_();
  CHECK_FALSE(argmax(w).requires_grad());
  CHECK_THROWS_AS(argmax(a, 2), IndexError);
  CHECK_THROWS_AS(argmax(zeros({0})), ShapeError);
}

TEST_CASE("set_num_threads sets the OpenMP thread count get_num_threads reports") {
  const int before = get_num_threads();
  set_num_threads(3);
  CHECK(get_num_threads() == 3);
  set_num_threads(1);
  CHECK(get_num_threads() == 1);
  CHECK_THROWS_WITH_AS(set_num_threads(0), "set_num_threads: expected n in [1, 1024], but got 0", ValueError);
  CHECK_THROWS_WITH_AS(set_num_threads(100000), "set_num_threads: expected n in [1, 1024], but got 100000", ValueError);
  set_num_threads(before);
  CHECK(get_num_threads() == before);
}

TEST_CASE("set_flush_denormal makes denormal results and inputs 0 on every kernel thread, and off restores them") {
  const int before = get_num_threads();
  set_num_threads(2);
  const int64_t n = 1 << 20;  // large enough for the kernels' OpenMP threads
  const Tensor tiny = full({n}, 1e-30f), small = full({n}, 1e-10f);
  const Tensor denormal = full({n}, 1e-40f), big = full({n}, 1e30f);
  auto all_equal = [](const Tensor& t, float v) {
    for (double x : t.to_vector())
      if (static_cast<float>(x) != v) return false;
    return true;
  };
  const float product = 1e-30f * 1e-10f;  // 1e-40: denormal, not 0
  REQUIRE(product > 0);
  CHECK(all_equal(mul(tiny, small), product));
  CHECK(all_equal(mul(denormal, big), 1e-40f * 1e30f));
#if defined(__x86_64__)
  CHECK(set_flush_denormal(true));
  CHECK(all_equal(mul(tiny, small), 0.0f));    // a denormal result is flushed (FTZ)
  CHECK(all_equal(mul(denormal, big), 0.0f));  // a denormal input reads as 0 (DAZ)
  CHECK(all_equal(mul(big, small), 1e30f * 1e-10f));  // normal floats are untouched
#endif
  set_flush_denormal(false);
  CHECK(all_equal(mul(tiny, small), product));
  CHECK(all_equal(mul(denormal, big), 1e-40f * 1e30f));
  set_num_threads(before);
}

TEST_CASE("set_flush_denormal without the pool sets the calling thread, and threads it starts inherit the mode") {
  // Each std::thread has an OpenMP pool of its own; one thread keeps the ops serial.
  auto product = [] {
    set_num_threads(1);
    return (mul(full({4}, 1e-30f), full({4}, 1e-10f))).to_vector()[0];
  };
  double own = -1, inherited = -1, other = -1;
  std::thread flushed([&] {
#if defined(__x86_64__)
    CHECK(set_flush_denormal(true, false));
#endif
    own = product();
    std::thread child([&] { inherited = product(); });
    child.join();
  });
  flushed.join();
  std::thread plain([&] { other = product(); });
  plain.join();
#if defined(__x86_64__)
  CHECK(own == 0.0);
  CHECK(inherited == 0.0);
#endif
  CHECK(other == static_cast<double>(1e-30f * 1e-10f));  // the process's other threads keep IEEE underflow
}

TEST_CASE("int64 and float32 tensors refuse a fill or value they cannot hold, instead of an undefined cast or inf") {
  for (const double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}, 0x1p63, -0x1p64}) {
    INFO(bad);
    CHECK_THROWS_WITH_AS(full({2}, bad, DType::Int64), doctest::Contains("fill: value"), ValueError);
    CHECK_THROWS_WITH_AS(tensor({1.0, bad}, {2}, DType::Int64), doctest::Contains("cannot be converted to int64"),
                         ValueError);
    // A copy checks every value before it writes any.
    Tensor dst = tensor_int({7, 7}, {2});
    CHECK_THROWS_WITH_AS(copy_data(dst, tensor({1.0, bad}, {2}, DType::Float64)),
                         doctest::Contains("copy: value"), ValueError);
    CHECK(dst.to_int_vector() == std::vector<int64_t>{7, 7});
  }
  Tensor dst = tensor_int({7, 7}, {2});
  copy_data(dst, tensor({-2.9, 5.0}, {2}));
  CHECK(dst.to_int_vector() == std::vector<int64_t>{-2, 5});  // truncated, as PyTorch casts
  CHECK(full({1}, -0x1p63, DType::Int64).to_int_vector()[0] == std::numeric_limits<int64_t>::min());
  // float32, as torch.full: a finite value beyond its range is refused; inf
  // and float32's largest are values.
  for (const double bad : {1e300, -3.5e38})
    CHECK_THROWS_WITH_AS(full({2}, bad), doctest::Contains("cannot be converted to float32 without overflow"),
                         ValueError);
  CHECK(std::isinf(full({1}, INFINITY).item()));
  CHECK(full({1}, -double{std::numeric_limits<float>::max()}).item() == -double{std::numeric_limits<float>::max()});
  CHECK(full({1}, 1e300, DType::Float64).item() == 1e300);
  CHECK(full({2}, 3.0, DType::Int64).to_int_vector() == std::vector<int64_t>{3, 3});
}
