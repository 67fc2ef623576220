// The reduction and shape kernels of cuda/reduction.cu and cuda/shape.cu built
// for the host: the same TMEM_HD arithmetic (cuda/reduction.cuh,
// cuda/shape.cuh) over the same index space and with the same short-row /
// block-per-row split as the launchers, the block's shared-memory tree
// replayed in a loop and atomicAdd replaced by +=. Then parity tests of max,
// min, var, index_select, gather, cat and pad on the stand-in device at
// shapes and layouts the op table's gradcheck cases do not reach, and their
// errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tmem/cuda/reduction.cuh"
#include "tmem/cuda/shape.cuh"
#include "fake_device.h"
#include "host_kernels.h"
#include "tmem/ops/ops.h"

namespace tmem::test {

namespace {

using cuda::Extreme;
using cuda::kReduceThreads;
using cuda::kReduceShortRow;

// One block's reduction of a long row: thread t's partial(t), combined as the
// kernel's shared-memory tree combines them.
template <class T, class Partial, class Combine>
T block_reduce(Partial partial, Combine combine) {
  std::vector<T> part(kReduceThreads);
  for (int t = 0; t < kReduceThreads; ++t) part[t] = partial(t);
  for (int h = kReduceThreads / 2; h > 0; h >>= 1)
    for (int t = 0; t < h; ++t) part[t] = combine(part[t], part[t + h]);
  return part[0];
}

void plain_add(float* p, float v) { *p += v; }

}  // namespace

void host::extreme_rows(int, const float* x, float* values, int64_t* indices, int64_t O, int64_t R, bool is_max) {
  for (int64_t r = 0; r < O; ++r) {
    const float* row = x + r * R;
    const Extreme e =
        R <= kReduceShortRow
            ? cuda::extreme_scan(row, 0, R, 1, is_max)
            : block_reduce<Extreme>([&](int t) { return cuda::extreme_scan(row, t, R, kReduceThreads, is_max); },
                                    [&](Extreme a, Extreme b) { return cuda::extreme_combine(a, b, is_max); });
    values[r] = e.v;
    indices[r] = e.i;
  }
}

void host::extreme_rows_backward(int, const float* g, const int64_t* indices, float* rows, int64_t O, int64_t R) {
  for (int64_t r = 0; r < O; ++r) cuda::extreme_backward_one(g, indices, rows, r, R);
}

void host::var_rows(int, const float* x, float* out, float* mean, int64_t O, int64_t R, double denom) {
  auto add = [](double a, double b) { return a + b; };
  for (int64_t r = 0; r < O; ++r) {
    const float* row = x + r * R;
    if (R <= kReduceShortRow) {
      const float m = cuda::row_mean(cuda::row_partial_sum(row, 0, R, 1), R);
      mean[r] = m;
      out[r] = cuda::row_var(cuda::row_partial_sq_dev(row, 0, R, 1, m), denom);
      continue;
    }
    const float m = cuda::row_mean(
        block_reduce<double>([&](int t) { return cuda::row_partial_sum(row, t, R, kReduceThreads); }, add), R);
    mean[r] = m;
    out[r] = cuda::row_var(
        block_reduce<double>([&](int t) { return cuda::row_partial_sq_dev(row, t, R, kReduceThreads, m); }, add),
        denom);
  }
}

void host::var_backward(int, const StridedArgs<4>& args, double scale) {
  each(args, [&](const int64_t* o) { cuda::var_backward_one(args, o, static_cast<float>(scale)); });
}

bool host::index_select_forward(int, const float* a, const int64_t* index, float* out, int64_t P, int64_t N,
                                int64_t Q, int64_t K) {
  for (int64_t i = 0; i < P * K * Q; ++i) cuda::index_select_one(a, index, out, i, N, K, Q);
  return true;
}

void host::index_select_backward(int, const float* g, const int64_t* index, float* ga, int64_t P, int64_t N,
                                 int64_t Q, int64_t K) {
  for (int64_t i = 0; i < P * K * Q; ++i) cuda::index_select_backward_one(g, index, ga, i, N, K, Q, plain_add);
}

bool host::gather_forward(int, const StridedArgs<3>& args, int64_t step, int64_t) {
  each(args, [&](const int64_t* o) { cuda::gather_one(args, o, step); });
  return true;
}

void host::gather_backward(int, const StridedArgs<3>& args, int64_t step) {
  each(args, [&](const int64_t* o) { cuda::gather_backward_one(args, o, step, plain_add); });
}

namespace {

// A float32 tensor of U[lo, hi) values that requires grad.
Tensor input(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

using test::error_of;

}  // namespace

}  // namespace tmem::test

using namespace tmem;
using test::check_parity;
using test::error_of;
using test::input;
using V = std::vector<Tensor>;

TEST_CASE("device kernels: max and min match the CPU on short and long rows, views, ties and NaN") {
  test::FakeCuda fake(&test::host_op_kernels());
  // Values (and their gradient) through check_parity; indices compared here.
  const auto both = [](const std::string& what, const std::function<ValuesIndices(const Tensor&)>& f,
                       const Tensor& x) {
    check_parity(what, [&](const V& v) { return f(v[0]).values; }, V{x});
    INFO(what);
    const ValuesIndices d = f(x.detach().to(Device::cuda()));
    CHECK(d.indices.device() == Device::cuda());
    CHECK(d.indices.to_int_vector() == f(x.detach()).indices.to_int_vector());
  };
  both("max dim -1, short rows [300,7]", [](const Tensor& t) { return max(t, -1); }, input({300, 7}));
  both("min dim 0, long rows [1000,3]", [](const Tensor& t) { return min(t, 0); }, input({1000, 3}));
  both("max dim 1 of [4,777,5]", [](const Tensor& t) { return max(t, 1); }, input({4, 777, 5}));
  both("min of a transposed view, keepdim", [](const Tensor& t) { return min(transpose(t, 0, 1), 1, true); },
       input({70, 9}));
  both("max of [0,5] along dim 1 (no rows)", [](const Tensor& t) { return max(t, 1); }, input({0, 5}));
  check_parity("max of all 5000 elements", [](const V& v) { return max(v[0]); }, V{input({50, 100})});
  check_parity("min of all 9 elements", [](const V& v) { return min(v[0]); }, V{input({3, 3})});
  // Ties: the first index wins however a row is split among threads.
  const auto ties = [] {
    Tensor t = full({2, 600}, 0.5);
    for (int64_t k : {599, 300, 301}) copy_data(slice(t, 1, k, k + 1), full({2, 1}, 2.0));
    return t.requires_grad_();
  };
  both("max with ties in long rows", [](const Tensor& t) { return max(t, 1); }, ties());
  both("min with ties in short rows", [](const Tensor& t) { return min(t, 0); }, ties());
  // NaN counts as the maximum and as the minimum: the first NaN wins.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t len : {int64_t{40}, int64_t{500}}) {
    std::vector<double> vals(2 * len, 1.0);
    vals[7] = -3.0;
    vals[9] = 4.0;
    vals[len - 7] = nan;
    vals[len - 3] = nan;
    vals[len + 20] = nan;
    const Tensor x = tensor(vals, {2, len});
    for (bool is_max : {true, false}) {
      INFO("len " << len << (is_max ? " max" : " min"));
      const ValuesIndices r = is_max ? max(x.to(Device::cuda()), 1) : min(x.to(Device::cuda()), 1);
      CHECK(r.indices.to_int_vector() == std::vector<int64_t>{len - 7, 20});
      const std::vector<double> v = r.values.to_vector();
      CHECK((std::isnan(v[0]) && std::isnan(v[1])));
    }
  }
}

TEST_CASE("device kernels: var matches the CPU on short and long rows, all dims, offsets and views") {
  test::FakeCuda fake(&test::host_op_kernels());
  check_parity("dim -1, short rows [200,9]", [](const V& v) { return var(v[0], {-1}); }, V{input({200, 9})});
  check_parity("dim 0, long rows [3000,2]", [](const V& v) { return var(v[0], {0}); }, V{input({3000, 2})});
  check_parity("all 4096 elements, correction 0", [](const V& v) { return var(v[0], {}, 0); },
               V{input({64, 64})});
  check_parity("dims {0,2} keepdim", [](const V& v) { return var(v[0], {0, 2}, 1, true); }, V{input({9, 4, 11})});
  check_parity("offset by 1000 (long rows)", [](const V& v) { return var(v[0], {1}); },
               V{input({3, 700}, 999, 1001)});
  check_parity("of a permuted view", [](const V& v) { return var(permute(v[0], {2, 0, 1}), {1}); },
               V{input({5, 6, 7})});
  check_parity("no rows [0,4]", [](const V& v) { return var(v[0], {1}); }, V{input({0, 4})});
}

TEST_CASE("device kernels: sum and mean over leading dims (sum_columns) match the CPU") {
  test::FakeCuda fake(&test::host_op_kernels());
  check_parity("sum dim 0 of [300,37]", [](const V& v) { return sum(v[0], {0}); }, V{input({300, 37})});
  check_parity("mean dims {0,1} of [4,50,9]", [](const V& v) { return mean(v[0], {0, 1}); }, V{input({4, 50, 9})});
  check_parity("sum dim 0 keepdim of [1,5]", [](const V& v) { return sum(v[0], {0}, true); }, V{input({1, 5})});
  check_parity("sum dim 0 of no rows [0,4]", [](const V& v) { return sum(v[0], {0}); }, V{input({0, 4})});
  // The gradient of a broadcast add is a sum over the leading dims.
  check_parity("add's gradient for a [9] bias of [4,6,9]", [](const V& v) { return add(v[0], v[1]); },
               V{input({4, 6, 9}), input({9}, -1, 1, 2)});
}

TEST_CASE("device kernels: index_select of int64 data is slice copies on the device") {
  test::FakeCuda fake(&test::host_op_kernels());
  const Tensor labels = tensor_int({10, 11, 12, 13, 14, 15}, {3, 2});
  const Tensor got = index_select(labels.to(Device::cuda()), 0, tensor_int({2, 0, 2}, {3}));
  CHECK(got.device() == Device::cuda());
  CHECK(got.dtype() == DType::Int64);
  CHECK(got.cpu().to_int_vector() == std::vector<int64_t>{14, 15, 10, 11, 14, 15});
}

TEST_CASE("device kernels: index_select and gather match the CPU, repeated indices summed in the gradient") {
  test::FakeCuda fake(&test::host_op_kernels());
  const Tensor rows = tensor_int({4, 0, 4, 4, 9, 1, 0}, {7});
  check_parity("index_select dim 1 of [3,10,17], CPU index",
               [&](const V& v) { return index_select(v[0], 1, rows); }, V{input({3, 10, 17})});
  check_parity("index_select dim 0, device index", [](const V& v) { return index_select(v[0], 0, v[1]); },
               V{input({10, 33}), rows});
  check_parity("index_select last dim of a transposed view",
               [&](const V& v) { return index_select(transpose(v[0], 0, 1), 1, rows); }, V{input({10, 6})});
  check_parity("index_select of an index slice (strided)",
               [&](const V& v) { return index_select(v[0], 0, slice(rows, 0, 0, 7, 2)); }, V{input({10, 4})});
  check_parity("index_select of an empty index", [](const V& v) { return index_select(v[0], 1, v[1]); },
               V{input({3, 5}), tensor_int({}, {0})});
  Generator gen(5);
  const Tensor idx = randint({6, 8, 7}, 9, gen);
  check_parity("gather dim 1 of [6,9,7], index [6,8,7]", [](const V& v) { return gather(v[0], 1, v[1]); },
               V{input({6, 9, 7}), idx});
  check_parity("gather dim 1 with a transposed index",
               [](const V& v) { return gather(v[0], 1, transpose(v[1], 0, 2)); },
               V{input({7, 9, 6}), idx});
  check_parity("gather dim -1, smaller index", [](const V& v) { return gather(v[0], -1, v[1]); },
               V{input({6, 8, 12}), idx});
  check_parity("gather of an empty index", [](const V& v) { return gather(v[0], 0, v[1]); },
               V{input({3, 5}), tensor_int({}, {0, 5})});
}

TEST_CASE("device kernels: cat, stack and pad on the device are the backend's copy and fill") {
  test::FakeCuda fake(&test::host_op_kernels());
  check_parity("cat dim 1 of three, one a view",
               [](const V& v) { return cat({v[0], transpose(v[1], 0, 1), v[2]}, 1); },
               V{input({4, 3}, -1, 1, 1), input({5, 4}, -1, 1, 2), input({4, 1}, -1, 1, 3)});
  check_parity("cat dim 0 with an empty piece", [](const V& v) { return cat({v[0], v[1]}, 0); },
               V{input({0, 3}, -1, 1, 1), input({2, 3}, -1, 1, 2)});
  check_parity("stack dim 2", [](const V& v) { return stack({v[0], v[1]}, 2); },
               V{input({3, 4}, -1, 1, 1), input({3, 4}, -1, 1, 2)});
  check_parity("pad the last three dims", [](const V& v) { return pad(v[0], {1, 2, 0, 3, 2, 0}, -1.5); },
               V{input({2, 3, 4, 5})});
  check_parity("pad a permuted view", [](const V& v) { return pad(permute(v[0], {1, 0}), {0, 0, 1, 1}); },
               V{input({3, 4})});
  check_parity("pad with negative pads (cropping)", [](const V& v) { return pad(v[0], {-1, 2, 1, -2}, 0.5); },
               V{input({3, 4})});
  const Tensor i = tensor_int({1, 2, 3}, {3}).to(Device::cuda());
  CHECK(cat({i, i}, 0).to_int_vector() == std::vector<int64_t>{1, 2, 3, 1, 2, 3});
  CHECK(pad(i, {1, 0}, 7).to_int_vector() == std::vector<int64_t>{7, 1, 2, 3});
}

TEST_CASE("device kernels: reductions and shape ops raise the CPU's errors on the device") {
  test::FakeCuda fake(&test::host_op_kernels());
  const Tensor x = input({3, 4});
  const Tensor d = x.detach().to(Device::cuda());
  const auto same = [](const std::string& what, const std::function<void(const Tensor&)>& f, const Tensor& c,
                       const Tensor& g) {
    INFO(what);
    const std::string e = error_of<Error>([&] { f(c); });
    CHECK(!e.empty());
    CHECK(error_of<Error>([&] { f(g); }) == e);
  };
  same("index_select out of range", [](const Tensor& t) { index_select(t, 1, tensor_int({0, 4}, {2})); }, x, d);
  same("index_select negative index", [](const Tensor& t) { index_select(t, 0, tensor_int({-1}, {1})); }, x, d);
  same("gather out of range", [](const Tensor& t) { gather(t, 0, tensor_int({0, 1, 3, 0}, {1, 4})); }, x, d);
  std::vector<int64_t> big(40 * 300);
  for (size_t k = 0; k < big.size(); ++k) big[k] = static_cast<int64_t>(k * 7 % 300);
  big[6001] = 300;
  big[11999] = -1;
  const Tensor wide = input({40, 300});
  same("gather out of range in the middle and at the end of a large index",
       [&](const Tensor& t) { gather(t, 1, tensor_int(big, {40, 300})); }, wide, wide.to(Device::cuda()));
  same("index_select out of range in the middle and at the end of a large index",
       [&](const Tensor& t) { index_select(t, 1, tensor_int(big, {12000})); }, wide, wide.to(Device::cuda()));
  same("gather index larger than the input",
       [](const Tensor& t) { gather(t, 0, tensor_int({0, 0, 0, 0, 0}, {1, 5})); }, x, d);
  same("max of an empty dim", [](const Tensor& t) { max(t, 1); }, empty({2, 0}),
       empty({2, 0}, DType::Float32, Device::cuda()));
  same("cat of mismatched shapes", [](const Tensor& t) { cat({t, slice(t, 1, 0, 2)}, 0); }, x, d);
  same("pad cropping more than a dim holds", [](const Tensor& t) { pad(t, {-5, 0}); }, x, d);
  CHECK_THROWS_AS(index_select(d, 1, tensor_int({0, 4}, {2})), IndexError);
  CHECK_THROWS_AS(gather(d, 0, tensor_int({0, 1, 3, 0}, {1, 4}).to(Device::cuda())), IndexError);
  CHECK(error_of<DeviceError>([&] { cat({d, x}, 0); }) ==
        "cat: expected every tensor on one device, but got cuda:0 and cpu (tensor 1)");
  CHECK(error_of<DeviceError>([&] { index_select(x, 0, tensor_int({0}, {1}).to(Device::cuda())); }) ==
        "index_select: expected the index on the CPU or on the input's device cpu, but got cuda:0");
  CHECK(error_of<DtypeError>([&] { var(to_dtype(d, DType::Float64)); }) ==
        "var: cuda kernels take float32, but got float64");
}

TEST_CASE("device: reductions and shape ops without kernels on the device throw the not-implemented error") {
  test::FakeCuda fake;  // a backend with no op kernels at all
  const Tensor d = ones({2, 3}).to(Device::cuda());
  const Tensor i = tensor_int({0}, {1});
  auto msg = [](const std::string& op) { return op + ": the cuda backend has no kernel for this op (got a tensor on cuda:0)"; };
  CHECK(error_of<DeviceError>([&] { min(d, 0); }) == msg("min"));
  CHECK(error_of<DeviceError>([&] { max(d); }) == msg("max"));
  CHECK(error_of<DeviceError>([&] { index_select(d, 0, i); }) == msg("index_select"));
  CHECK(error_of<DeviceError>([&] { gather(d, 0, reshape(i, {1, 1})); }) == msg("gather"));
  CHECK(error_of<DeviceError>([&] { pad(d, {1, 1}); }) == msg("pad"));
  CHECK(error_of<DeviceError>([&] { stack({d, d}, 0); }) == msg("cat"));
}
