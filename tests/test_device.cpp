// The device plumbing, checked without a GPU: the backend hook, Tensor::to,
// Module::to, the op dispatch (its not-implemented errors, and the launch
// arguments ops/ builds for the GEMM and row-sum kernels) and the op table's
// device lists. A stand-in backend keeps "cuda" tensors in host memory, so
// everything but the CUDA kernels themselves runs here; tests/cuda_tests.cpp
// checks those on a GPU.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <map>
#include <string>

#include "core/device_backend.h"
#include "core/safetensors.h"
#include "nn/linear.h"
#include "nn/optim.h"
#include "ops/dispatch.h"
#include "test_util.h"

using namespace tmem;

namespace {

// ---- the stand-in backend: "cuda:0" in host memory, no op kernels ----

AllocatorStats g_fake_stats;

int fake_count() { return 1; }
void* fake_allocate(int, size_t n) {
  g_fake_stats.in_use += n;
  g_fake_stats.peak_in_use = std::max(g_fake_stats.peak_in_use, g_fake_stats.in_use);
  return std::malloc(n > 0 ? n : 1);
}
void fake_release(int, void* p, size_t n) noexcept {
  g_fake_stats.in_use -= n;
  std::free(p);
}
void fake_memcpy(int, void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void fake_copy_between(int, void* dst, int, const void* src, size_t n) { std::memcpy(dst, src, n); }

double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::Float32: return static_cast<const float*>(p)[i];
    case DType::Float64: return static_cast<const double*>(p)[i];
    default: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
}
void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::Float32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::Float64: static_cast<double*>(p)[i] = v; break;
    default: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
  }
}
// f(offsets) for every element of a, as a device kernel would visit them.
template <size_t N, class F>
void each(const StridedArgs<N>& a, F f) {
  for (int64_t i = 0; i < a.numel; ++i) {
    int64_t off[N] = {}, r = i;
    for (int d = a.ndim - 1; d >= 0; --d) {
      const int64_t idx = r % a.shape[d];
      r /= a.shape[d];
      for (size_t j = 0; j < N; ++j) off[j] += idx * a.strides[j][d];
    }
    f(off);
  }
}
void fake_copy(int, const StridedArgs<2>& a, DType dt, DType st) {
  each(a, [&](const int64_t* o) { store(a.data[0], dt, o[0], load(a.data[1], st, o[1])); });
}
void fake_fill(int, const StridedArgs<1>& a, DType t, double v) {
  each(a, [&](const int64_t* o) { store(a.data[0], t, o[0], v); });
}
void fake_accumulate(int, const StridedArgs<2>& a, DType t) {
  each(a, [&](const int64_t* o) {
    store(a.data[0], t, o[0], load(a.data[0], t, o[0]) + load(a.data[1], t, o[1]));
  });
}
void fake_sync(int) {}
AllocatorStats fake_stats(int) { return g_fake_stats; }
void fake_reset_peak(int) { g_fake_stats.peak_in_use = g_fake_stats.in_use; }
void fake_empty_cache(int) {}

// Host versions of the kernels matmul, sum and mean use, reading the launch
// arguments exactly as OpKernels documents them.
void fake_unary_forward(int, OpId op, UnaryParams p, const StridedArgs<2>& a) {
  REQUIRE(op == OpId::MulScalar);
  each(a, [&](const int64_t* o) {
    static_cast<float*>(a.data[0])[o[0]] = static_cast<const float*>(a.data[1])[o[1]] * static_cast<float>(p.a);
  });
}
void fake_sum_rows(int, const float* x, float* out, int64_t rows, int64_t len, double scale) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < len; ++j) s += x[r * len + j];
    out[r] = static_cast<float>(s * scale);
  }
}
void fake_gemm(const GemmArgs& g) {
  REQUIRE(g.lda >= (g.a_col_major ? g.m : g.k));
  REQUIRE(g.ldb >= (g.b_col_major ? g.k : g.n));
  auto at = [](const float* p, bool col_major, int64_t ld, int64_t r, int64_t q) {
    return col_major ? p[r + q * ld] : p[r * ld + q];
  };
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t q = 0; q < g.n; ++q) {
        double s = 0;
        for (int64_t k = 0; k < g.k; ++k)
          s += static_cast<double>(at(g.a + i * g.stride_a, g.a_col_major, g.lda, r, k)) *
               at(g.b + i * g.stride_b, g.b_col_major, g.ldb, k, q);
        g.c[i * g.m * g.n + r * g.n + q] = static_cast<float>(s);
      }
}

OpKernels make_fake_ops() {
  OpKernels k{};
  for (OpId op : {OpId::Matmul, OpId::Sum, OpId::Mean}) k.implemented[static_cast<size_t>(op)] = true;
  k.unary_forward = &fake_unary_forward;
  k.sum_rows = &fake_sum_rows;
  k.gemm = &fake_gemm;
  return k;
}
const OpKernels kFakeOps = make_fake_ops();

constexpr DeviceBackend fake_backend(const OpKernels* ops) {
  return {"cuda",         &fake_count,      &fake_allocate,   &fake_release,
          &fake_memcpy,   &fake_memcpy,     &fake_copy_between, &fake_copy,
          &fake_fill,     &fake_accumulate, &fake_sync,       &fake_stats,
          &fake_reset_peak, &fake_empty_cache, ops};
}
const DeviceBackend kFake = fake_backend(nullptr);
const DeviceBackend kFakeWithKernels = fake_backend(&kFakeOps);

// Installs a stand-in for its lifetime, then restores the real backend.
struct FakeCuda {
  const DeviceBackend* prev;
  explicit FakeCuda(const DeviceBackend* b = &kFake) : prev(register_device_backend(Device::Kind::CUDA, b)) {}
  ~FakeCuda() { register_device_backend(Device::Kind::CUDA, prev); }
};

// f on float32 CPU inputs and on "cuda" copies of them: outputs and input
// gradients must agree.
void check_parity(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                  const std::vector<Shape>& shapes) {
  INFO(what);
  std::vector<Tensor> cpu, dev;
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Generator gen(seed++);
    Tensor t = rand(s, -1.0, 1.0, DType::Float32, gen);
    Tensor d = t.to(Device::cuda());
    t.requires_grad_();
    d.requires_grad_();
    cpu.push_back(t);
    dev.push_back(d);
  }
  Tensor yc = f(cpu), yd = f(dev);
  CHECK(yd.device() == Device::cuda());
  test::check_close(yd.to_vector(), yc.to_vector(), 1e-5, 1e-5);
  Generator gen(99);
  Tensor go = rand(yc.shape(), -1.0, 1.0, DType::Float32, gen);
  yc.backward(go);
  yd.backward(go.to(Device::cuda()));
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(dev[i].grad().defined());
    CHECK(dev[i].grad().device() == Device::cuda());
    test::check_close(dev[i].grad().to_vector(), cpu[i].grad().to_vector(), 1e-5, 1e-5);
  }
}

// The message of the Error f throws ("" when it throws none).
template <class E, class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#ifdef TMEM_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

}  // namespace

TEST_CASE("device: the CUDA backend is registered exactly when the build has one") {
  // A dropped registration object (the linker discarding cuda/backend.cu)
  // would leave a CUDA build without its backend.
  CHECK((registered_device_backend(Device::Kind::CUDA) != nullptr) == kCudaBuild);
  CHECK(device_count(Device::Kind::CPU) == 1);
}

TEST_CASE("device: without a usable CUDA device, CUDA tensors throw DeviceError naming the op") {
  if (device_count(Device::Kind::CUDA) > 0) {
    MESSAGE("a CUDA device is present: tests/cuda_tests.cpp covers it");
    return;
  }
  const std::string expect = kCudaBuild ? "no cuda device was found" : "this build has no cuda backend";
  std::string e = error_of<DeviceError>([] { empty({2}, DType::Float32, Device::cuda()); });
  INFO(e);
  CHECK(contains(e, "empty: cuda:0 is not available"));
  CHECK(contains(e, expect));
  e = error_of<DeviceError>([] { ones({2, 3}).to(Device::cuda()); });
  CHECK(contains(e, "to: cuda:0 is not available"));
  CHECK(contains(error_of<DeviceError>([] { zeros({1}, DType::Float32, Device::cuda(1)); }), "cuda:1"));
  CHECK(contains(error_of<DeviceError>([] { allocator_stats(Device::cuda()); }), "allocator_stats"));
  nn::Linear lin(3, 2);
  CHECK(contains(error_of<DeviceError>([&] { lin.to(Device::cuda()); }), "cuda:0 is not available"));
  CHECK(lin.weight.device().is_cpu());
}

TEST_CASE("device: to(cpu) of a CPU tensor is the tensor itself") {
  Tensor x = ones({2, 3});
  CHECK(x.to(Device::cpu()).impl_ptr() == x.impl_ptr());
  CHECK(x.cpu().impl_ptr() == x.impl_ptr());
  synchronize(Device::cpu());
}

TEST_CASE("device: to and cpu round trip through a device backend, any layout and dtype") {
  FakeCuda fake;
  Tensor x = permute(reshape(arange(0, 24), {2, 3, 4}), {2, 0, 1});  // not contiguous
  Tensor d = x.to(Device::cuda());
  CHECK(d.device() == Device::cuda());
  CHECK(d.is_contiguous());
  CHECK(d.shape() == x.shape());
  CHECK(d.to(Device::cuda()).impl_ptr() == d.impl_ptr());
  Tensor back = d.cpu();
  CHECK(back.device().is_cpu());
  CHECK(back.to_vector() == x.to_vector());
  CHECK(d.to_vector() == x.to_vector());  // read through the host
  CHECK(reshape(slice(d, 0, 1, 2), {-1}).to_vector() == reshape(slice(x, 0, 1, 2), {-1}).to_vector());
  Tensor i = tensor_int({5, -7, 1LL << 40}, {3}).to(Device::cuda());
  CHECK(i.to_int_vector() == std::vector<int64_t>{5, -7, 1LL << 40});
  Tensor f64 = tensor({0.1, 0.2}, {2}, DType::Float64).to(Device::cuda());
  CHECK(f64.dtype() == DType::Float64);
  CHECK(f64.to_vector() == std::vector<double>{0.1, 0.2});
  CHECK(to_dtype(i, DType::Float32).to_vector() == std::vector<double>{5, -7, static_cast<double>(1LL << 40)});
  Tensor z = zeros({2, 2}, DType::Float32, Device::cuda());
  copy_data(z, ones({2, 2}));  // across devices
  CHECK(z.to_vector() == std::vector<double>{1, 1, 1, 1});
  CHECK(allocator_stats(Device::cuda()).in_use == g_fake_stats.in_use);
}

TEST_CASE("device: ops without a kernel on the device throw the one not-implemented DeviceError") {
  FakeCuda fake;  // a backend with no op kernels at all
  Tensor x = ones({2, 3}).to(Device::cuda());
  Tensor w = ones({3, 2}).to(Device::cuda());
  auto msg = [](const std::string& op) { return op + ": not implemented on cuda yet (got a tensor on cuda:0)"; };
  CHECK(error_of<DeviceError>([&] { add(x, x); }) == msg("add"));
  CHECK(error_of<DeviceError>([&] { exp(x); }) == msg("exp"));
  CHECK(error_of<DeviceError>([&] { mul(x, 2.0); }) == msg("mul_scalar"));
  CHECK(error_of<DeviceError>([&] { sum(x); }) == msg("sum"));
  CHECK(error_of<DeviceError>([&] { mean(x, {1}); }) == msg("mean"));
  CHECK(error_of<DeviceError>([&] { matmul(x, w); }) == msg("matmul"));
  CHECK(error_of<DeviceError>([&] { where(x, x, x); }) == msg("where"));
  CHECK(error_of<DeviceError>([&] { softmax(x, -1); }) == msg("softmax"));
  CHECK(error_of<DeviceError>([&] { var(x, {1}); }) == msg("var"));
  CHECK(error_of<DeviceError>([&] { max(x, 1); }) == msg("max"));
  CHECK(error_of<DeviceError>([&] { layer_norm(x, Tensor(), Tensor()); }) == msg("layer_norm"));
  CHECK(error_of<DeviceError>([&] { cat({x, x}, 0); }) == msg("cat"));
  CHECK(contains(error_of<DeviceError>([&] { add(x, ones({2, 3})); }),
                 "add: expected operands on one device, but got cuda:0 and cpu"));
  CHECK(contains(error_of<DeviceError>([&] { matmul(ones({2, 3}), w); }),
                 "matmul: expected operands on one device"));
  // Views need no kernel: they work on any device.
  CHECK(transpose(x, 0, 1).device() == Device::cuda());
}

TEST_CASE("device: matmul, sum and mean hand device kernels launch arguments that mean the CPU's result") {
  FakeCuda fake(&kFakeWithKernels);
  auto mm = [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); };
  auto mm_bt = [](const std::vector<Tensor>& v) { return matmul(v[0], transpose(v[1], -1, -2)); };
  auto mm_at = [](const std::vector<Tensor>& v) { return matmul(transpose(v[0], -1, -2), v[1]); };
  check_parity("2-D", mm, {{5, 7}, {7, 3}});
  check_parity("batch broadcast [2,1,3,4]@[3,4,2]", mm, {{2, 1, 3, 4}, {3, 4, 2}});
  check_parity("3-D @ 2-D folded, transposed b", mm_bt, {{2, 3, 4}, {5, 4}});
  check_parity("transposed a", mm_at, {{4, 6}, {4, 3}});
  check_parity("batched, transposed b", mm_bt, {{4, 5, 6}, {4, 7, 6}});
  check_parity("batched, transposed a", mm_at, {{3, 6, 5}, {3, 6, 2}});
  check_parity("1-D @ 2-D", mm, {{4}, {4, 3}});
  check_parity("2-D @ 1-D", mm, {{3, 4}, {4}});
  check_parity("1-D @ 1-D", mm, {{4}, {4}});
  check_parity("a row and a column", mm, {{1, 4}, {4, 1}});
  check_parity("K = 0", mm, {{2, 0}, {0, 3}});
  check_parity("an expanded operand", [](const std::vector<Tensor>& v) { return matmul(expand(v[0], {3, 4}), v[1]); },
               {{1, 4}, {4, 5}});
  check_parity("a strided slice", [](const std::vector<Tensor>& v) { return matmul(slice(v[0], 1, 0, 6, 2), v[1]); },
               {{3, 6}, {3, 2}});
  check_parity("sum all", [](const std::vector<Tensor>& v) { return sum(v[0]); }, {{3, 4, 5}});
  check_parity("sum dims {0,2} keepdim", [](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}, true); },
               {{3, 4, 5}});
  check_parity("mean dim 1 of a permuted view",
               [](const std::vector<Tensor>& v) { return mean(permute(v[0], {2, 0, 1}), {1}); }, {{3, 4, 5}});
}

TEST_CASE("device: gradients flow through to, device views and device leaves") {
  FakeCuda fake;
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  x.requires_grad_();
  Tensor w = tensor({1, -1, 2, 0.5, 3, -2}, {2, 3});
  Tensor y = x.to(Device::cuda());
  CHECK(y.requires_grad());
  CHECK(!y.is_leaf());
  sum(mul(y.cpu(), w)).backward();
  CHECK(x.grad().device().is_cpu());
  CHECK(x.grad().to_vector() == w.to_vector());

  // A leaf on the device: two gradients meet in accumulate_grad, and a
  // slice's backward scatters into device zeros.
  Tensor d = tensor({1, 2, 3, 4}, {4}).to(Device::cuda());
  d.requires_grad_();
  Tensor loss = add(sum(d.cpu()), sum(mul(slice(d, 0, 1, 3).cpu(), 2.0)));
  loss.backward();
  REQUIRE(d.grad().defined());
  CHECK(d.grad().device() == Device::cuda());
  CHECK(d.grad().to_vector() == std::vector<double>{1, 3, 3, 1});
  sum(d.cpu()).backward();  // accumulates into the existing device gradient
  CHECK(d.grad().to_vector() == std::vector<double>{2, 4, 4, 2});
  CHECK(contains(error_of<DeviceError>([&] { accumulate_grad(d.impl(), ones({4}), "test"); }),
                 "accumulate_grad: test produced a gradient on cpu for a leaf on cuda:0"));
  Tensor bad = tensor({1, NAN}, {2}).to(Device::cuda());
  CHECK(contains(error_of<ValueError>([&] { check_finite(bad, "bad"); }), "bad has NaN"));
}

TEST_CASE("device: Module::to moves parameters in place and keeps their identity") {
  FakeCuda fake;
  nn::Linear lin(3, 2);
  Tensor x = tensor({0.5, -1, 2}, {1, 3});
  sum(lin.forward(x)).backward();
  std::vector<Tensor> params = lin.parameters();
  const auto w_before = lin.weight.to_vector();
  const auto g_before = lin.weight.grad().to_vector();
  const TensorImpl* w_impl = lin.weight.impl_ptr().get();
  nn::SGD sgd(params, 0.1);

  lin.to(Device::cuda());
  CHECK(lin.weight.impl_ptr().get() == w_impl);
  CHECK(params[0].impl_ptr().get() == w_impl);  // what an optimizer holds
  CHECK(params[0].device() == Device::cuda());
  CHECK(lin.bias.device() == Device::cuda());
  CHECK(lin.weight.is_leaf());
  CHECK(lin.weight.requires_grad());
  CHECK(lin.weight.to_vector() == w_before);
  CHECK(lin.weight.grad().device() == Device::cuda());
  CHECK(lin.weight.grad().to_vector() == g_before);
  CHECK(error_of<DeviceError>([&] { sgd.step(); }) ==
        "optimizer step: not implemented on cuda yet (got a tensor on cuda:0)");
  CHECK(contains(error_of<DeviceError>([&] { nn::clip_grad_norm_(params, 1.0); }), "clip_grad_norm_"));

  // A CPU checkpoint loads into the moved model.
  std::map<std::string, Tensor> state = {{"weight", zeros({2, 3})}, {"bias", ones({2})}};
  lin.load_state_dict(state);
  CHECK(lin.weight.device() == Device::cuda());
  CHECK(lin.bias.to_vector() == std::vector<double>{1, 1});
  const std::string path = test::tmp_path("tmem_device_state.safetensors");
  save_safetensors(path, lin.state_dict());
  CHECK(load_safetensors(path).tensors.at("bias").to_vector() == std::vector<double>{1, 1});

  lin.to(Device::cpu());
  CHECK(lin.weight.impl_ptr().get() == w_impl);
  CHECK(lin.weight.device().is_cpu());
  CHECK(lin.weight.grad().device().is_cpu());
  sgd.step();
  CHECK(lin.weight.to_vector() != std::vector<double>(6, 0.0));
}

TEST_CASE("device: set_data checks shape, dtype and that the tensor is a leaf") {
  Tensor a = ones({2, 3});
  CHECK_THROWS_AS(a.set_data(ones({3, 2})), ShapeError);
  CHECK_THROWS_AS(a.set_data(ones({2, 3}, DType::Float64)), DtypeError);
  Tensor b = ones({2, 3});
  b.requires_grad_();
  Tensor c = mul(b, 2.0);
  CHECK_THROWS_AS(c.set_data(ones({2, 3})), ValueError);
  a.set_data(full({2, 3}, 4.0));
  CHECK(a.to_vector() == std::vector<double>(6, 4.0));
}

TEST_CASE("device: the op table lists cuda exactly for the ops this build's backend runs") {
  int with_cuda = 0;
  for (const OpInfo& info : op_table()) {
    const bool listed = std::find(info.devices.begin(), info.devices.end(), "cuda") != info.devices.end();
    INFO(info.name());
    CHECK(listed == device_implements(Device::Kind::CUDA, info.id));
    with_cuda += listed;
  }
  if (kCudaBuild) {
    CHECK(device_implements(Device::Kind::CUDA, OpId::Add));
    CHECK(device_implements(Device::Kind::CUDA, OpId::Sum));
    CHECK(device_implements(Device::Kind::CUDA, OpId::Matmul));
    CHECK(!device_implements(Device::Kind::CUDA, OpId::Softmax));
    CHECK(with_cuda > 0);
  } else {
    CHECK(with_cuda == 0);
  }
}
