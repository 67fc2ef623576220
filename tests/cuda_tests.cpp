// CUDA backend tests, a program of their own so CTest can report them as
// skipped (exit code 77) with a visible reason when the build has no CUDA
// backend or the machine has no GPU. Parity tests run each op on random CPU
// inputs and on their CUDA copies and compare the outputs and every input's
// gradient: |cuda - cpu| <= 1e-4 + 1e-4 |cpu|.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#ifdef TMEM_WITH_CUDA
#include "tmem/core/device_backend.h"
#include "tmem/cuda/runtime.h"
#include "tmem/nn/linear.h"
#include "tmem/ops/dispatch.h"
#include "test_util.h"
#endif

namespace {
constexpr int kSkip = 77;
}

#ifdef TMEM_WITH_CUDA
using namespace tmem;

namespace {

const Device kCuda = Device::cuda(0);
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A float32 tensor of U[lo, hi) values that requires grad.
Tensor input(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float32, gen);
  t.requires_grad_();
  return t;
}

// f on fresh CPU leaves with the inputs' values and on CUDA copies of them:
// outputs and the gradients of every input that requires grad must agree
// (fresh leaves, so inputs shared by several checks start without a
// gradient). The output must be on the device unless `any_device`.
void check_parity(const std::string& what, const Fn& f, const std::vector<Tensor>& inputs,
                  bool any_device = false) {
  INFO(what);
  std::vector<Tensor> cpu, dev;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {  // an absent optional input (a bias)
      cpu.push_back(t);
      dev.push_back(t);
      continue;
    }
    Tensor c = t.detach(), d = t.detach().to(kCuda);
    if (t.requires_grad()) {
      c.requires_grad_();
      d.requires_grad_();
    }
    cpu.push_back(c);
    dev.push_back(d);
  }
  Tensor yc = f(cpu), yd = f(dev);
  if (!any_device) REQUIRE(yd.device() == kCuda);
  CHECK(yd.shape() == yc.shape());
  test::check_close(yd.to_vector(), yc.to_vector(), 1e-4, 1e-4);
  if (!yc.requires_grad()) return;
  Generator gen(99);
  Tensor go = rand(yc.shape(), -1.0, 1.0, DType::Float32, gen);
  yc.backward(go);
  yd.backward(go.to(yd.device()));
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].defined() || !cpu[i].requires_grad()) continue;
    INFO("gradient of input " << i);
    REQUIRE(cpu[i].grad().defined());
    REQUIRE(dev[i].grad().defined());
    CHECK(dev[i].grad().device() == kCuda);
    test::check_close(dev[i].grad().to_vector(), cpu[i].grad().to_vector(), 1e-4, 1e-4);
  }
}

using test::error_of;

}  // namespace

TEST_CASE("cuda: the backend is registered and sees the device") {
  REQUIRE(registered_device_backend(Device::Kind::CUDA) != nullptr);
  CHECK(device_count(Device::Kind::CUDA) == cuda::device_count());
  CHECK(device_implements(Device::Kind::CUDA, OpId::Matmul));
}

TEST_CASE("cuda: to and cpu round trip every dtype and layout") {
  Tensor x = permute(reshape(arange(0, 60), {3, 4, 5}), {2, 0, 1});
  Tensor d = x.to(kCuda);
  CHECK(d.device() == kCuda);
  CHECK(d.is_contiguous());
  CHECK(d.to(kCuda).impl_ptr() == d.impl_ptr());
  CHECK(d.cpu().to_vector() == x.to_vector());
  Tensor dt = transpose(d, 0, 2);  // a strided device view copied to the host
  CHECK(dt.cpu().to_vector() == transpose(x, 0, 2).to_vector());
  CHECK(contiguous(dt).to_vector() == transpose(x, 0, 2).to_vector());
  Tensor i = tensor_int({3, -4, int64_t{1} << 40}, {3});
  CHECK(i.to(kCuda).to_int_vector() == i.to_int_vector());
  Tensor f64 = tensor({0.1, -0.2, 1e300}, {3}, DType::Float64);
  CHECK(f64.to(kCuda).to_vector() == f64.to_vector());
  CHECK(to_dtype(i.to(kCuda), DType::Float32).to_vector() == to_dtype(i, DType::Float32).to_vector());
  CHECK(empty({0, 3}).to(kCuda).cpu().numel() == 0);
  CHECK(full({}, 2.5).to(kCuda).item() == 2.5);
  CHECK(zeros({5}, DType::Float32, kCuda).to_vector() == std::vector<double>(5, 0.0));
  CHECK(full({2, 2}, -3.0, DType::Int64, kCuda).to_int_vector() == std::vector<int64_t>(4, -3));
  synchronize(kCuda);
}

TEST_CASE("cuda: the caching allocator reuses blocks and reports bytes in use, peak and cached") {
  synchronize(kCuda);
  empty_cache(kCuda);
  const AllocatorStats s0 = allocator_stats(kCuda);
  CHECK(s0.cached == 0);
  const void* first = nullptr;
  {
    Tensor a = empty({1000}, DType::Float32, kCuda);  // 4000 bytes: the 4096 class
    first = a.raw_data();
    CHECK(allocator_stats(kCuda).in_use == s0.in_use + 4096);
  }
  AllocatorStats s1 = allocator_stats(kCuda);
  CHECK(s1.in_use == s0.in_use);
  CHECK(s1.cached == 4096);
  CHECK(s1.peak_in_use >= s0.in_use + 4096);
  {
    Tensor b = empty({1024}, DType::Float32, kCuda);  // same class: the cached block
    CHECK(b.raw_data() == first);
    CHECK(allocator_stats(kCuda).cached == 0);
    Tensor big = empty({3 << 20}, DType::Float32, kCuda);  // 12 MiB: MiB multiples
    CHECK(allocator_stats(kCuda).in_use == s0.in_use + 4096 + (size_t{12} << 20));
  }
  allocator_reset_peak(kCuda);
  CHECK(allocator_stats(kCuda).peak_in_use == allocator_stats(kCuda).in_use);
  empty_cache(kCuda);
  CHECK(allocator_stats(kCuda).cached == 0);
}

TEST_CASE("cuda: every op the op table lists for cuda matches the CPU on its gradcheck cases") {
  // ggml's test-backend-ops habit: an op that gains a CUDA kernel is compared
  // here without a new test. The float64 gradcheck inputs run in float32.
  for (const OpInfo& info : op_table()) {
    if (std::find(info.devices.begin(), info.devices.end(), "cuda") == info.devices.end()) continue;
    for (const OpCase& c : info.cases) {
      const std::string what = std::string(info.name()) + ": " + c.label;
      try {  // an op that throws fails here and the other ops are still compared
        check_parity(what, c.fn, test::float32_inputs(c), info.id == OpId::ToDevice);
      } catch (const std::exception& e) {
        FAIL_CHECK(what << " threw: " << e.what());
      }
    }
  }
}

TEST_CASE("cuda: unary ops match the CPU, forward and gradient") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"neg", [](const Tensor& a) { return neg(a); }, -1, 1},
      {"exp", [](const Tensor& a) { return exp(a); }, -2, 2},
      {"log", [](const Tensor& a) { return log(a); }, 0.2, 3},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, 0.2, 3},
      {"rsqrt", [](const Tensor& a) { return rsqrt(a); }, 0.2, 3},
      {"reciprocal", [](const Tensor& a) { return reciprocal(a); }, 0.5, 2},
      {"abs", [](const Tensor& a) { return abs(a); }, -1, 1},
      {"relu", [](const Tensor& a) { return relu(a); }, -1, 1},
      {"gelu", [](const Tensor& a) { return gelu(a); }, -3, 3},
      {"gelu_tanh", [](const Tensor& a) { return gelu(a, true); }, -3, 3},
      {"silu", [](const Tensor& a) { return silu(a); }, -3, 3},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }, -3, 3},
      {"tanh", [](const Tensor& a) { return tanh(a); }, -2, 2},
      {"softplus", [](const Tensor& a) { return softplus(a); }, -25, 25},
      {"clamp", [](const Tensor& a) { return clamp(a, -0.5, 0.5); }, -1, 1},
      {"add_scalar", [](const Tensor& a) { return add(a, 2.5); }, -1, 1},
      {"mul_scalar", [](const Tensor& a) { return mul(a, -1.5); }, -1, 1},
      {"pow_scalar", [](const Tensor& a) { return pow(a, 3.0); }, -2, 2},
      {"pow_scalar 0", [](const Tensor& a) { return pow(a, 0.0); }, -2, 2},
      {"pow_scalar 0.5", [](const Tensor& a) { return pow(a, 0.5); }, 0.2, 2},
  };
  for (const Case& c : cases) {
    check_parity(std::string(c.name) + " [37,129]", [&](const std::vector<Tensor>& v) { return c.f(v[0]); },
                 {input({37, 129}, c.lo, c.hi)});
    check_parity(std::string(c.name) + " of a transposed view",
                 [&](const std::vector<Tensor>& v) { return c.f(transpose(v[0], 0, 1)); },
                 {input({5, 7}, c.lo, c.hi, 2)});
  }
}

TEST_CASE("cuda: binary ops with broadcasting match the CPU") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -1, 1},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, -1, 1},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, -1, 1},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, 0.5, 2},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2},
  };
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{33, 65}, {33, 65}}, {{4, 1, 5}, {3, 1}}, {{2, 3}, {}}, {{1}, {6, 7}}, {{8, 1, 300}, {1, 9, 300}}};
  for (const Case& c : cases)
    for (const auto& [sa, sb] : shapes)
      check_parity(std::string(c.name) + " " + shape_str(sa) + " " + shape_str(sb),
                   [&](const std::vector<Tensor>& v) { return c.f(v[0], v[1]); },
                   {input(sa, c.lo, c.hi, 1), input(sb, c.lo, c.hi, 2)});
  check_parity("pow with zero exponents and bases",
               [](const std::vector<Tensor>& v) { return pow(v[0], v[1]); },
               {tensor({0, 0, 2, 1.5}, {4}), tensor({0, 2, 0, -1}, {4})});
  check_parity("add of 2^22 + 3 elements (many blocks)",
               [](const std::vector<Tensor>& v) { return v[0] + v[1]; },
               {input({(1 << 22) + 3}, -1, 1, 1), input({(1 << 22) + 3}, -1, 1, 2)});
}

TEST_CASE("cuda: where, masked_fill and to_dtype match the CPU") {
  Tensor cond = tensor({1, 0, 1}, {3, 1});
  check_parity("where", [&](const std::vector<Tensor>& v) { return where(v[2], v[0], v[1]); },
               {input({3, 4}, -1, 1, 1), input({4}, -1, 1, 2), cond});
  check_parity("where with an int64 cond",
               [](const std::vector<Tensor>& v) { return where(v[2], v[0], v[1]); },
               {input({2, 3}, -1, 1, 1), input({2, 3}, -1, 1, 2), tensor_int({0, 1, 1, 0, 0, 1}, {2, 3})});
  check_parity("masked_fill", [](const std::vector<Tensor>& v) { return masked_fill(v[0], v[1], -7.0); },
               {input({3, 4}), tensor({0, 1, 0, 1}, {4})});
  check_parity("to_dtype float32 -> float64 -> float32",
               [](const std::vector<Tensor>& v) { return to_dtype(to_dtype(v[0], DType::Float64), DType::Float32); },
               {input({3, 4})});
}

TEST_CASE("cuda: sum and mean over dims with keepdim match the CPU") {
  struct Case {
    const char* name;
    Fn f;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"sum all", [](const std::vector<Tensor>& v) { return sum(v[0]); }, {3, 4, 5}},
      {"sum dims {0,2} keepdim", [](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}, true); }, {3, 4, 5}},
      {"sum dim -1 (short rows)", [](const std::vector<Tensor>& v) { return sum(v[0], {-1}); }, {1000, 7}},
      {"sum dim 0 (long rows)", [](const std::vector<Tensor>& v) { return sum(v[0], {0}); }, {5000, 3}},

      {"sum of a permuted view", [](const std::vector<Tensor>& v) { return sum(permute(v[0], {2, 0, 1}), {1}); }, {3, 4, 5}},
      {"mean dim 1", [](const std::vector<Tensor>& v) { return mean(v[0], {1}); }, {3, 400, 5}},
      {"mean all keepdim", [](const std::vector<Tensor>& v) { return mean(v[0], {}, true); }, {6, 7}},
      {"sum of an empty dim", [](const std::vector<Tensor>& v) { return sum(v[0], {1}); }, {3, 0}},
  };
  for (const Case& c : cases) check_parity(c.name, c.f, {input(c.shape)});
  // Positive terms: over U[-1, 1) the float32 sums of 10^6 terms in the two
  // devices' orders differ by ~1e-8 of sum|x| (both that close to the float64
  // sum), which is beyond the tolerance relative to the cancelled result.
  check_parity("sum all of 10^6", [](const std::vector<Tensor>& v) { return sum(v[0]); },
               {input({1000, 1000}, 0, 1)});
}

TEST_CASE("cuda: matmul through cuBLAS matches the CPU") {
  auto mm = [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); };
  auto mm_bt = [](const std::vector<Tensor>& v) { return matmul(v[0], transpose(v[1], -1, -2)); };
  auto mm_at = [](const std::vector<Tensor>& v) { return matmul(transpose(v[0], -1, -2), v[1]); };
  check_parity("2-D [5,7]@[7,3]", mm, {input({5, 7}, -1, 1, 1), input({7, 3}, -1, 1, 2)});
  check_parity("2-D [65,33]@[33,129]", mm, {input({65, 33}, -1, 1, 1), input({33, 129}, -1, 1, 2)});
  check_parity("batch broadcast [2,1,3,4]@[3,4,2]", mm, {input({2, 1, 3, 4}, -1, 1, 1), input({3, 4, 2}, -1, 1, 2)});
  check_parity("3-D @ 2-D (folded), transposed b", mm_bt, {input({2, 3, 4}, -1, 1, 1), input({5, 4}, -1, 1, 2)});
  check_parity("transposed a", mm_at, {input({4, 6}, -1, 1, 1), input({4, 3}, -1, 1, 2)});
  check_parity("bmm [8,33,65]@[8,65,17]", [](const std::vector<Tensor>& v) { return bmm(v[0], v[1]); },
               {input({8, 33, 65}, -1, 1, 1), input({8, 65, 17}, -1, 1, 2)});
  check_parity("batched, transposed b [4,5,6]@[4,7,6]^T", mm_bt, {input({4, 5, 6}, -1, 1, 1), input({4, 7, 6}, -1, 1, 2)});
  check_parity("1-D @ 2-D", mm, {input({4}, -1, 1, 1), input({4, 3}, -1, 1, 2)});
  check_parity("2-D @ 1-D", mm, {input({3, 4}, -1, 1, 1), input({4}, -1, 1, 2)});
  check_parity("1-D @ 1-D", mm, {input({4}, -1, 1, 1), input({4}, -1, 1, 2)});
  check_parity("K = 0", mm, {input({2, 0}), input({0, 3})});
  check_parity("an expanded operand", [](const std::vector<Tensor>& v) { return matmul(expand(v[0], {3, 4}), v[1]); },
               {input({1, 4}, -1, 1, 1), input({4, 5}, -1, 1, 2)});
}

TEST_CASE("cuda: view ops and their gradients match the CPU") {
  const Shape s = {2, 3, 4};
  check_parity("reshape", [](const std::vector<Tensor>& v) { return reshape(v[0], {4, -1}); }, {input(s)});
  check_parity("reshape of a transposed view",
               [](const std::vector<Tensor>& v) { return reshape(transpose(v[0], 0, 2), {-1}); }, {input(s)});
  check_parity("permute", [](const std::vector<Tensor>& v) { return permute(v[0], {2, 0, 1}); }, {input(s)});
  check_parity("slice", [](const std::vector<Tensor>& v) { return slice(v[0], 2, 1, 4, 2); }, {input(s)});
  check_parity("expand", [](const std::vector<Tensor>& v) { return expand(v[0], {2, 3, 4}); }, {input({3, 1})});
  check_parity("contiguous", [](const std::vector<Tensor>& v) { return contiguous(permute(v[0], {1, 2, 0})); },
               {input(s)});
  check_parity("squeeze and unsqueeze",
               [](const std::vector<Tensor>& v) { return unsqueeze(squeeze(v[0], 1), 0); }, {input({3, 1, 2})});
  check_parity("repeat_interleave", [](const std::vector<Tensor>& v) { return repeat_interleave(v[0], 3, 1); },
               {input(s)});
  check_parity("to and back", [](const std::vector<Tensor>& v) { return mul(v[0].cpu().to(v[0].device()), 2.0); },
               {input(s)});
}

TEST_CASE("cuda: a Linear layer moved with Module::to matches the CPU") {
  nn::Linear cpu_layer(16, 8), dev_layer(16, 8);
  dev_layer.load_state_dict(cpu_layer.state_dict());
  const TensorImpl* w = dev_layer.weight.impl_ptr().get();
  dev_layer.to(kCuda);
  CHECK(dev_layer.weight.impl_ptr().get() == w);
  Tensor x = input({4, 5, 16});
  Tensor lc = mean(gelu(cpu_layer.forward(x)));
  Tensor ld = mean(gelu(dev_layer.forward(x.detach().to(kCuda))));
  CHECK(ld.item() == doctest::Approx(lc.item()).epsilon(1e-4));
  lc.backward();
  ld.backward();
  test::check_close(dev_layer.weight.grad().to_vector(), cpu_layer.weight.grad().to_vector(), 1e-4, 1e-4);
  test::check_close(dev_layer.bias.grad().to_vector(), cpu_layer.bias.grad().to_vector(), 1e-4, 1e-4);
}

TEST_CASE("cuda: errors are DeviceErrors naming the op") {
  Tensor x = ones({2, 3}).to(kCuda);
  const std::string bad_index = error_of([&] { embedding(ones({4, 3}), tensor_int({1, 4}, {2})); });
  CHECK(bad_index.find("embedding: index 4 ") == 0);
  CHECK(error_of([&] { embedding(ones({4, 3}).to(kCuda), tensor_int({1, 4}, {2}).to(kCuda)); }) == bad_index);
  CHECK(error_of([&] { add(x, ones({2, 3})); }).find("add: expected operands on one device") == 0);
  CHECK(error_of([&] { add(x.to(Device::cpu()), x); }).find("add: expected operands on one device") == 0);
  CHECK(error_of([&] { exp(to_dtype(x, DType::Float64)); }) == "exp: cuda kernels take float32, but got float64");
  const int n = cuda::device_count();
  CHECK(error_of([&] { ones({1}).to(Device::cuda(n)); }).find("to: cuda:" + std::to_string(n) + " is not available") == 0);
  CHECK_THROWS_AS(empty({int64_t{1} << 50}, DType::Float32, kCuda), DeviceError);  // out of memory
}

// ---- reductions and shape ops parity tests ----

TEST_CASE("cuda: max, min and var match the CPU on short rows, long rows and all elements") {
  // Values and gradients through check_parity; max/min indices compared here.
  const auto both = [](const std::string& what, const std::function<ValuesIndices(const Tensor&)>& f,
                       const Tensor& x) {
    check_parity(what, [&](const std::vector<Tensor>& v) { return f(v[0]).values; }, {x});
    INFO(what);
    const ValuesIndices d = f(x.detach().to(kCuda));
    CHECK(d.indices.device() == kCuda);
    CHECK(d.indices.to_int_vector() == f(x.detach()).indices.to_int_vector());
  };
  both("max dim -1 of [4096,32] (short rows)", [](const Tensor& t) { return max(t, -1); }, input({4096, 32}));
  both("min dim 1 of [128,1000] (long rows)", [](const Tensor& t) { return min(t, 1); }, input({128, 1000}));
  both("max dim 0 of [3000,7] (long strided rows)", [](const Tensor& t) { return max(t, 0, true); },
       input({3000, 7}));
  check_parity("max of all 10^6", [](const std::vector<Tensor>& v) { return max(v[0]); }, {input({1000, 1000})});
  check_parity("var dim -1 of [256,384]", [](const std::vector<Tensor>& v) { return var(v[0], {-1}); },
               {input({256, 384})});
  check_parity("var dim -1 of [4096,16] (short rows)", [](const std::vector<Tensor>& v) { return var(v[0], {-1}); },
               {input({4096, 16})});
  check_parity("var of all 10^6, correction 0", [](const std::vector<Tensor>& v) { return var(v[0], {}, 0); },
               {input({1000, 1000})});
  check_parity("var dims {0,2} keepdim, offset 1000",
               [](const std::vector<Tensor>& v) { return var(v[0], {0, 2}, 1, true); },
               {input({16, 33, 40}, 999, 1001)});
}

TEST_CASE("cuda: index_select, gather, cat and pad match the CPU") {
  Generator gen(7);
  const Tensor rows = randint({512}, 2000, gen);  // repeated: the backward's atomics collide
  check_parity("index_select dim 0 of [2000,384], device index",
               [](const std::vector<Tensor>& v) { return index_select(v[0], 0, v[1]); }, {input({2000, 384}), rows});
  check_parity("index_select dim 1 of [8,2000,3], CPU index",
               [&](const std::vector<Tensor>& v) { return index_select(v[0], 1, rows); }, {input({8, 2000, 3})});
  check_parity("gather dim 2 of [64,128,50]",
               [](const std::vector<Tensor>& v) { return gather(v[0], 2, v[1]); },
               {input({64, 128, 50}), randint({64, 128, 10}, 50, gen)});
  check_parity("gather dim 0 of a transposed view",
               [](const std::vector<Tensor>& v) { return gather(transpose(v[0], 0, 1), 0, v[1]); },
               {input({300, 200}), randint({150, 300}, 200, gen)});
  check_parity("cat dim 1 of [8,64,384] pieces",
               [](const std::vector<Tensor>& v) { return cat({v[0], v[1], v[0]}, 1); },
               {input({8, 64, 384}, -1, 1, 1), input({8, 16, 384}, -1, 1, 2)});
  check_parity("stack dim 1", [](const std::vector<Tensor>& v) { return stack({v[0], v[1]}, 1); },
               {input({32, 96}, -1, 1, 1), input({32, 96}, -1, 1, 2)});
  check_parity("pad the token dim of [2,100,64]",
               [](const std::vector<Tensor>& v) { return pad(v[0], {0, 0, 0, 12}); }, {input({2, 100, 64})});
  check_parity("pad three dims with a value",
               [](const std::vector<Tensor>& v) { return pad(v[0], {1, 1, 2, 0, 0, 3}, -2.0); },
               {input({2, 5, 6, 7})});
  CHECK(error_of([&] { index_select(input({3, 4}).to(kCuda), 1, tensor_int({0, 4}, {2})); }) ==
        "index_select: index 4 is out of range for a dim of size 4");
  CHECK(error_of([&] { gather(input({3, 4}).to(kCuda), 0, tensor_int({0, 3}, {1, 2}).to(kCuda)); }) ==
        "gather: index 3 is out of range for a dim of size 3");
}

// ---- nn ops parity tests ----

TEST_CASE("cuda: softmax, log_softmax and layer_norm match the CPU on transformer shapes") {
  using Vs = std::vector<Tensor>;
  Tensor masked = input({64, 300}, -4, 4, 2);  // rows 3 and 40 fully masked
  for (int64_t r : {3, 40})
    for (int64_t j = 0; j < 300; ++j) masked.data<float>()[r * 300 + j] = -INFINITY;
  for (bool log : {false, true}) {
    const auto sm = [log](const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); };
    const std::string op = log ? "log_softmax" : "softmax";
    check_parity(op + " of attention scores [4,8,256,256]", [&](const Vs& v) { return sm(v[0], -1); },
                 {input({4, 8, 256, 256}, -6, 6)});
    check_parity(op + " of short rows [8192,16]", [&](const Vs& v) { return sm(v[0], -1); },
                 {input({8192, 16}, -6, 6, 3)});
    check_parity(op + " dim 1 of [16,300,32]", [&](const Vs& v) { return sm(v[0], 1); },
                 {input({16, 300, 32}, -6, 6, 4)});
    check_parity(op + " with fully masked rows", [&](const Vs& v) { return sm(v[0], -1); }, {masked});
  }
  check_parity("layer_norm [8,512,384] with weight and bias",
               [](const Vs& v) { return layer_norm(v[0], v[1], v[2]); },
               {input({8, 512, 384}, -2, 2), input({384}, 0.5, 1.5, 2), input({384}, -1, 1, 3)});
  check_parity("layer_norm [4096,16] without weight and bias",
               [](const Vs& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {input({4096, 16}, 99, 101, 4)});
}

TEST_CASE("cuda: embedding, cross_entropy and dropout match the CPU on language-model shapes") {
  using Vs = std::vector<Tensor>;
  Generator gen(5);
  Tensor tokens = randint({8, 512}, 16384, gen);
  check_parity("embedding [16384,384] table, [8,512] tokens",
               [](const Vs& v) { return embedding(v[0], v[1]); }, {input({16384, 384}), tokens});
  Tensor target = randint({1024}, 16384, gen);
  for (int64_t i = 0; i < 1024; i += 7) target.data<int64_t>()[i] = -100;
  for (const char* red : {"mean", "sum", "none"})
    check_parity(std::string("cross_entropy [1024,16384], label smoothing 0.1, ") + red,
                 [red](const Vs& v) { return cross_entropy(v[0], v[1], -100, 0.1, red); },
                 {input({1024, 16384}, -8, 8, 6), target});
  check_parity("cross_entropy [4096,10] (short rows)", [](const Vs& v) { return cross_entropy(v[0], v[1]); },
               {input({4096, 10}, -4, 4, 7), randint({4096}, 10, gen)});
  check_parity("dropout p 0.2 on [8,512,384], one Generator state on both devices",
               [](const Vs& v) {
                 Generator g(11);
                 return dropout(v[0], 0.2, true, g);
               },
               {input({8, 512, 384})});
}

// ---- spatial ops parity tests ----

TEST_CASE("cuda: grid_sample matches the CPU at the Tensor Memory read and in every mode") {
  using Pad = GridSamplePadding;
  check_parity("trilinear border align_corners, [128,16,6,6,6] at one point per item",
               [](const std::vector<Tensor>& v) { return grid_sample(v[0], v[1], GridSampleMode::Bilinear, Pad::Border, true); },
               {input({128, 16, 6, 6, 6}, -1, 1, 1), input({128, 1, 1, 1, 3}, -1, 1, 2)});
  for (Pad pad : {Pad::Zeros, Pad::Border, Pad::Reflection})
    for (bool align : {false, true})
      for (GridSampleMode mode : {GridSampleMode::Bilinear, GridSampleMode::Nearest}) {
        const std::string tail = std::string(grid_sample_mode_name(mode)) + " " + grid_sample_padding_name(pad) +
                                 (align ? " align_corners" : "");
        auto f = [=](const std::vector<Tensor>& v) { return grid_sample(v[0], v[1], mode, pad, align); };
        check_parity("5-D " + tail, f, {input({4, 16, 6, 6, 6}, -1, 1, 3), input({4, 3, 4, 5, 3}, -1.3, 1.3, 4)});
        check_parity("4-D " + tail, f, {input({4, 8, 9, 10}, -1, 1, 5), input({4, 7, 6, 2}, -1.3, 1.3, 6)});
      }
  // Many points per cell: the input gradient's atomicAdd scatter.
  check_parity("2000 points on a 2x2x2 input",
               [](const std::vector<Tensor>& v) { return grid_sample(v[0], v[1], GridSampleMode::Bilinear, Pad::Zeros, false); },
               {input({2, 3, 2, 2, 2}, -1, 1, 7), input({2, 2000, 1, 1, 3}, -1.2, 1.2, 8)});
  CHECK(error_of([] { grid_sample(ones({1, 2, 3, 3, 3}).to(kCuda), ones({1, 1, 1, 1, 3})); })
            .find("grid_sample: expected input and grid on one device") == 0);
}

TEST_CASE("cuda: gaussian_splat matches the CPU at the Tensor Memory write") {
  for (double truncate : {0.0, 2.0})
    check_parity("B=128 C=16 grid 6x6x6 truncate " + std::to_string(truncate),
                 [truncate](const std::vector<Tensor>& v) { return gaussian_splat(v[0], v[1], v[2], 6, 6, 6, truncate); },
                 {input({128, 16}, -1, 1, 1), input({128, 3}, -1, 1, 2), input({128}, 0.05, 0.8, 3)});
}

TEST_CASE("cuda: conv3d_depthwise matches the CPU at the Tensor Memory stages") {
  using A3 = std::array<int64_t, 3>;
  struct Case {
    A3 kernel, stride, padding;
  };
  for (const Case& c : {Case{{3, 1, 1}, {1, 1, 1}, {1, 0, 0}}, Case{{1, 3, 1}, {1, 1, 1}, {0, 1, 0}},
                        Case{{1, 1, 3}, {1, 1, 1}, {0, 0, 1}}, Case{{3, 3, 3}, {2, 2, 2}, {1, 1, 1}}})
    check_parity("B=128 C=32 6x6x6 kernel " + shape_str({c.kernel[0], c.kernel[1], c.kernel[2]}) + " stride " +
                     shape_str({c.stride[0], c.stride[1], c.stride[2]}),
                 [c](const std::vector<Tensor>& v) { return conv3d_depthwise(v[0], v[1], v[2], c.stride, c.padding); },
                 {input({128, 32, 6, 6, 6}, -1, 1, 1), input({32, 1, c.kernel[0], c.kernel[1], c.kernel[2]}, -1, 1, 2),
                  input({32}, -1, 1, 3)});
}

TEST_CASE("cuda: convlstm3d_cell matches the CPU at the Tensor Memory update") {
  // B=128, Cx=C=16 (Cz=32), grid 6x6x6; every input differentiable.
  const int64_t B = 128, C = 16, Cz = 32;
  auto inputs = [&] {
    return std::vector<Tensor>{
        input({B, C, 6, 6, 6}, -1, 1, 31), input({B, C, 6, 6, 6}, -1, 1, 32), input({B, C, 6, 6, 6}, -1, 1, 33),
        input({Cz, 3}, -1, 1, 34),         input({Cz, 3}, -1, 1, 35),         input({Cz, 3}, -1, 1, 36),
        input({Cz}, -0.5, 0.5, 37),        input({Cz}, -0.5, 0.5, 38),        input({Cz}, -0.5, 0.5, 39),
        input({4 * C, Cz}, -0.3, 0.3, 40), input({4 * C}, -0.5, 0.5, 41)};
  };
  auto cell = [](const std::vector<Tensor>& v) {
    return convlstm3d_cell(v[0], v[1], v[2], {v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]});
  };
  check_parity("h'", [cell](const std::vector<Tensor>& v) { return cell(v).h; }, inputs());
  check_parity("c'", [cell](const std::vector<Tensor>& v) { return cell(v).c; }, inputs());
}

TEST_CASE("cuda: selective_scan matches the CPU at model shapes, from both outputs") {
  // B=8, T=128, E=64, N=16; delta > 0 (after softplus) and A < 0, as in a
  // model; y and h side by side, so the gradient reaches both.
  const int64_t B = 8, T = 128, E = 64, N = 16;
  const std::vector<Tensor> inputs{input({B, T, E}, -1, 1, 61), input({B, T, E}, 0.05, 1, 62),
                                   input({E, N}, -2, -0.1, 63), input({B, T, N}, -1, 1, 64),
                                   input({B, T, N}, -1, 1, 65), input({E}, -1, 1, 66),
                                   input({B, E, N}, -1, 1, 67)};
  check_parity("y and h",
               [](const std::vector<Tensor>& v) {
                 const SelectiveScanResult r = selective_scan(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
                 return cat({reshape(r.y, {-1}), reshape(r.h, {-1})}, 0);
               },
               inputs);
}

TEST_CASE("cuda: fused attention matches the CPU at model shapes, causal and with key padding") {
  // B=4, H=4, T=S=256, Dh=16 (the LM's heads); key padding hides the last 40
  // keys of item 1.
  constexpr int64_t B = 4, H = 4, T = 256, Dh = 16;
  const std::vector<Tensor> inputs{input({B, H, T, Dh}, -1, 1, 81), input({B, H, T, Dh}, -1, 1, 82),
                                   input({B, H, T, Dh}, -1, 1, 83)};
  check_parity("causal",
               [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), true); },
               inputs);
  check_parity("key padding",
               [](const std::vector<Tensor>& v) {
                 Tensor m = zeros({B, 1, 1, T});
                 for (int64_t s = T - 40; s < T; ++s) m.data<float>()[T + s] = -INFINITY;
                 return scaled_dot_product_attention(v[0], v[1], v[2], m.to(v[0].device()));
               },
               inputs);
}

// ---- optimizer parity tests ----
#endif

int main(int argc, char** argv) {
#ifndef TMEM_WITH_CUDA
  fmt::print("SKIPPED: built without the CUDA backend (TMEM_CUDA=OFF, or nvcc not found)\n");
  return kSkip;
#else
  if (tmem::cuda::device_count() == 0) {
    fmt::print("SKIPPED: no CUDA device on this machine\n");
    return kSkip;
  }
  fmt::print("CUDA device 0: {}\n", tmem::cuda::device_name(0));
  doctest::Context ctx(argc, argv);
  return ctx.run();
#endif
}
