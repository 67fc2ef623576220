// The optimizer kernels (cuda/optim.cuh) on the host, and AdamW, SGD and
// clip_grad_norm_ on the stand-in device against the same optimizers on the
// CPU: several steps from the same weights and gradients give the same
// parameters.
#include <cmath>

#include "tmem/cuda/optim.cuh"
#include "fake_device.h"
#include "host_kernels.h"
#include "tmem/nn/optim.h"

namespace tmem::test {

void host::adamw_step(int, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  for (int64_t k = 0; k < n; ++k)
    cuda::adamw_update(p, m, v, g[k], k, float(s.beta1), float(1.0 - s.beta1), float(s.beta2), float(1.0 - s.beta2),
                       float(s.decay), float(s.step_size), float(s.bc2_sqrt), float(s.eps));
}

void host::sgd_step(int, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  for (int64_t k = 0; k < n; ++k)
    cuda::sgd_update(p, buf, g[k], k, float(s.lr), float(s.momentum), float(s.weight_decay), s.first);
}

double host::abs_max(int, const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t k = 0; k < n; ++k) m = cuda::max_magnitude(m, std::fabs(x[k]));
  return m;
}

double host::sum_squares(int, const float* x, int64_t n, double scale, double acc) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += cuda::scaled_square(x[k], scale);
  return acc + s;
}

void host::scale_inplace(int, float* x, int64_t n, double coef) {
  for (int64_t k = 0; k < n; ++k) x[k] *= float(coef);
}

}  // namespace tmem::test

using namespace tmem;

namespace {

// Two parameters and, per step, gradients drawn from a seeded generator.
struct Run {
  std::vector<Tensor> params;
  explicit Run(Device d) {
    Generator gen(5);
    for (const Shape& s : {Shape{3, 4}, Shape{5}}) {
      Tensor p = rand(s, -1.0, 1.0, DType::Float32, gen).to(d);
      p.requires_grad_();
      params.push_back(p);
    }
  }
  void set_grads(int step, double magnitude) {
    Generator gen(100 + step);
    for (Tensor& p : params) {
      Tensor g = rand(p.shape(), -magnitude, magnitude, DType::Float32, gen).to(p.device());
      p.zero_grad();
      p.backward(g);
    }
  }
};

template <class Opt>
void check_same_steps(Run& cpu, Run& dev, Opt& oc, Opt& od, double clip) {
  for (int step = 0; step < 4; ++step) {
    cpu.set_grads(step, 3.0);
    dev.set_grads(step, 3.0);
    if (clip > 0) {
      const double nc = nn::clip_grad_norm_(cpu.params, clip), nd = nn::clip_grad_norm_(dev.params, clip);
      CHECK(nd == doctest::Approx(nc).epsilon(1e-6));
    }
    oc.step();
    od.step();
  }
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    CHECK(dev.params[i].device() == Device::cuda());
    test::check_close(dev.params[i].to_vector(), cpu.params[i].to_vector(), 1e-6, 1e-6);
  }
}

}  // namespace

TEST_CASE("device kernels: AdamW and clip_grad_norm_ on the device equal the CPU step for step") {
  test::FakeCuda fake(&test::host_op_kernels());
  Run cpu(Device::cpu()), dev(Device::cuda());
  nn::AdamW oc(cpu.params, 1e-2, 0.9, 0.999, 1e-8, 0.1), od(dev.params, 1e-2, 0.9, 0.999, 1e-8, 0.1);
  check_same_steps(cpu, dev, oc, od, 1.0);
}

TEST_CASE("device kernels: SGD with momentum and weight decay on the device equals the CPU") {
  test::FakeCuda fake(&test::host_op_kernels());
  Run cpu(Device::cpu()), dev(Device::cuda());
  nn::SGD oc(cpu.params, 0.1, 0.9, 0.01), od(dev.params, 0.1, 0.9, 0.01);
  check_same_steps(cpu, dev, oc, od, 0.0);
}

TEST_CASE("device kernels: optimizer state follows parameters moved after the optimizer was made") {
  test::FakeCuda fake(&test::host_op_kernels());
  Run cpu(Device::cpu()), dev(Device::cpu());
  nn::AdamW oc(cpu.params, 1e-2), od(dev.params, 1e-2);
  for (Tensor& p : dev.params) p.set_data(p.detach().to(Device::cuda()));
  check_same_steps(cpu, dev, oc, od, 0.5);
  const auto state = od.state_dict();
  CHECK(state.at("m.0").device() == Device::cuda());
}

TEST_CASE("device kernels: clip_grad_norm_ on the device rejects a non-finite gradient and leaves it unchanged") {
  test::FakeCuda fake(&test::host_op_kernels());
  Tensor p = zeros({3}).to(Device::cuda());
  p.requires_grad_();
  p.backward(tensor({1.0, std::nan(""), 2.0}, {3}).to(Device::cuda()));
  CHECK_THROWS_WITH_AS(nn::clip_grad_norm_({p}, 1.0),
                       doctest::Contains("clip_grad_norm_: the total gradient norm is non-finite"), ValueError);
  CHECK(p.grad().to_vector()[2] == 2.0);
}

TEST_CASE("device kernels: clip_grad_norm_'s kernels give exact values on the CPU and on the host build") {
  const float x[] = {3.0f, -4.0f, 0.0f};
  const float nan_at_end[] = {1.0f, 7.0f, std::nanf("")}, nan_first[] = {std::nanf(""), 7.0f};
  for (const KernelTable<float>* table : {&cpu::kernels<float>(), static_cast<const KernelTable<float>*>(&test::host_op_kernels())}) {
    const KernelTable<float>& k = *table;
    CHECK(k.abs_max(0, x, 3) == 4.0);
    CHECK(k.abs_max(0, x, 0) == 0.0);
    CHECK(std::isnan(k.abs_max(0, nan_at_end, 3)));
    CHECK(std::isnan(k.abs_max(0, nan_first, 2)));
    CHECK(k.sum_squares(0, x, 3, 4.0, 1.0) == 2.5625);  // 1 + 9/16 + 16/16
    float y[] = {3.0f, -4.0f};
    k.scale_inplace(0, y, 2, 0.5);
    CHECK(y[0] == 1.5f);
    CHECK(y[1] == -2.0f);
  }
}

TEST_CASE("device kernels: clip_grad_norm_ over CPU and device gradients together equals it over CPU ones") {
  test::FakeCuda fake(&test::host_op_kernels());
  Run cpu(Device::cpu()), mixed(Device::cpu());
  mixed.params[1].set_data(mixed.params[1].detach().to(Device::cuda()));
  cpu.set_grads(0, 3.0);
  mixed.set_grads(0, 3.0);
  const double nc = nn::clip_grad_norm_(cpu.params, 0.5), nm = nn::clip_grad_norm_(mixed.params, 0.5);
  CHECK(nm == doctest::Approx(nc).epsilon(1e-12));
  for (size_t i = 0; i < cpu.params.size(); ++i)
    test::check_close(mixed.params[i].grad().to_vector(), cpu.params[i].grad().to_vector(), 1e-7, 1e-7);
}

TEST_CASE("device kernels: clip_grad_norm_ rejects a NaN behind a larger finite gradient, on each device") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (Device d : {Device::cpu(), Device::cuda()}) {
    INFO(d.str());
    Tensor a = zeros({2}).to(d), b = zeros({2}).to(d);
    a.requires_grad_();
    b.requires_grad_();
    a.backward(tensor({100.0, -200.0}, {2}).to(d));
    b.backward(tensor({std::nan(""), 1.0}, {2}).to(d));
    CHECK_THROWS_WITH_AS(nn::clip_grad_norm_({a, b}, 1.0),
                         doctest::Contains("clip_grad_norm_: the total gradient norm is non-finite"), ValueError);
    CHECK(a.grad().to_vector() == std::vector<double>{100.0, -200.0});
  }
}
