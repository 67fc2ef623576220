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

#include "tmem/core/device_backend.h"
#include "tmem/core/safetensors.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/optim.h"
#include "tmem/ops/dispatch.h"
#include "fake_device.h"
#include "test_util.h"

using namespace tmem;

namespace {

using test::FakeCuda;
using test::g_fake_stats;
using test::check_parity;

using test::error_of;

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
  auto msg = [](const std::string& op) { return op + ": the cuda backend has no kernel for this op (got a tensor on cuda:0)"; };
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
  FakeCuda fake(&test::kFakeOps);
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
  check_parity("permuted [2,4,5,3] @ [2,4,3,6] (two batch levels, no copy)",
               [](const std::vector<Tensor>& v) {
                 return matmul(permute(v[0], {0, 2, 1, 3}), permute(v[1], {0, 2, 3, 1}));
               },
               {{2, 5, 4, 3}, {2, 6, 4, 3}});
  check_parity("three batch levels (operands copied)",
               [](const std::vector<Tensor>& v) { return matmul(permute(v[0], {0, 2, 1, 3, 4}), v[1]); },
               {{2, 2, 3, 4, 5}, {2, 3, 2, 5, 3}});
  check_parity("sum all", [](const std::vector<Tensor>& v) { return sum(v[0]); }, {{3, 4, 5}});
  check_parity("sum dims {0,2} keepdim", [](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}, true); },
               {{3, 4, 5}});
  check_parity("mean dim 1 of a permuted view",
               [](const std::vector<Tensor>& v) { return mean(permute(v[0], {2, 0, 1}), {1}); }, {{3, 4, 5}});
  check_parity("sum over the leading dims {0,1} (sum_columns)",
               [](const std::vector<Tensor>& v) { return sum(v[0], {0, 1}); }, {{3, 4, 5}});
  check_parity("mean over dim 0 keepdim (sum_columns)",
               [](const std::vector<Tensor>& v) { return mean(v[0], {0}, true); }, {{6, 7}});
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
        "optimizer step: the cuda backend has no kernel for this op (got a tensor on cuda:0)");
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

TEST_CASE("device: set_data checks the shape, floating data for a tensor that requires grad, and a leaf") {
  Tensor a = ones({2, 3});
  CHECK_THROWS_AS(a.set_data(ones({3, 2})), ShapeError);
  Tensor b = ones({2, 3});
  b.requires_grad_();
  Tensor c = mul(b, 2.0);
  CHECK_THROWS_AS(c.set_data(ones({2, 3})), ValueError);
  CHECK(error_of<DtypeError>([&] { b.set_data(zeros({2, 3}, DType::Int64)); }) ==
        "set_data: a tensor that requires grad needs floating data, but got int64");
  CHECK(b.dtype() == DType::Float32);
  a.set_data(full({2, 3}, 4.0));
  CHECK(a.to_vector() == std::vector<double>(6, 4.0));
}

TEST_CASE("device: set_data takes the dtype of its source, and backward refuses a gradient of the old dtype") {
  Tensor a = tensor({1.5, -2}, {2});
  a.set_data(tensor({0.1, 3}, {2}, DType::Float64));
  CHECK(a.dtype() == DType::Float64);
  CHECK(a.to_vector() == std::vector<double>{0.1, 3});
  a.set_data(zeros({2}, DType::Int64));
  CHECK(a.dtype() == DType::Int64);

  // A graph recorded in float32 ends at a leaf that is float64 by backward.
  Tensor w = tensor({1, 2}, {2});
  w.requires_grad_();
  Tensor loss = sum(mul(w, w));
  const auto saved = w.to_vector();
  w.set_data(to_dtype(w.detach(), DType::Float64));
  CHECK(contains(error_of<DtypeError>([&] { loss.backward(); }), "a float32 gradient for a leaf of dtype float64"));
  CHECK(!w.grad().defined());
  CHECK(w.to_vector() == saved);
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
    CHECK(with_cuda > 0);
  } else {
    CHECK(with_cuda == 0);
  }
}

TEST_CASE("device: int64 where, masked_fill, clamp and matmul run on the CPU only, and say so") {
  FakeCuda fake;  // (gather's gate comes first: this backend has no gather kernel)
  const Tensor i = tensor_int({1, 2}, {2}).to(Device::cuda());
  const std::string tail = ": int64 data runs on the CPU only, but got an int64 tensor on cuda:0; cast it to float32 "
                           "(to_dtype) or move it to the CPU";
  CHECK(error_of<DtypeError>([&] { where(i, i, i); }) == "where" + tail);
  CHECK(error_of<DtypeError>([&] { masked_fill(i, i, 1); }) == "masked_fill" + tail);
  CHECK(error_of<DtypeError>([&] { clamp(i, 0, 1); }) == "clamp" + tail);
  CHECK(error_of<DtypeError>([&] { matmul(i, i); }) == "matmul" + tail);
}
