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
    cuda::adamw_update(p, m, v, g[k], k, float(s.beta1), float(s.beta2), float(s.decay), float(s.step_size),
                       float(s.bc2_sqrt), float(s.eps));
}

void host::sgd_step(int, float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  for (int64_t k = 0; k < n; ++k)
    cuda::sgd_update(p, buf, g[k], k, float(s.lr), float(s.momentum), float(s.weight_decay), s.first);
}

double host::sum_squares(int, const float* x, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * x[k];
  return s;
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
