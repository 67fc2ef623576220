// Whole models on the stand-in "cuda" device (fake_device.h) running the
// host build of the CUDA kernels (host_kernels.h): `tmem train --device cuda`
// must give the CPU's losses step for step, which checks that every tensor a
// model makes lands on its device and that the optimizer runs there.
#include "core/device_backend.h"
#include "fake_device.h"
#include "host_kernels.h"
#include "models/trainer.h"

using namespace tmem;

namespace {

models::TrainConfig tiny(const std::string& method, const std::string& device) {
  models::TrainConfig c;
  c.model.method = method;
  c.steps = 3;
  c.batch = 4;
  c.eval_batches = 1;
  c.task_cfg.W = 5;
  c.device = device;
  return c;
}

}  // namespace

TEST_CASE("device kernels: coord-binding trains on the device with the CPU's losses, every method") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const char* method : {"base", "slots", "tensor"}) {
    INFO(method);
    const models::TrainResult cpu = models::train_diagnostic(tiny(method, "cpu"));
    const models::TrainResult dev = models::train_diagnostic(tiny(method, "cuda"));
    test::check_close(dev.losses, cpu.losses, 1e-4, 1e-4);
    CHECK(dev.eval_accuracy == doctest::Approx(cpu.eval_accuracy).epsilon(0.02));
    test::check_close(dev.gates, cpu.gates, 1e-5, 1e-5);
  }
}

TEST_CASE("device kernels: the other diagnostic tasks train on the device with the CPU's losses") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const char* task : {"map-building", "occlusion"}) {
    INFO(task);
    models::TrainConfig c = tiny("tensor", "cpu");
    c.task = task;
    c.task_cfg.T = 8;
    c.task_cfg.L = 2;
    const models::TrainResult cpu = models::train_diagnostic(c);
    c.device = "cuda";
    test::check_close(models::train_diagnostic(c).losses, cpu.losses, 1e-4, 1e-4);
  }
}

TEST_CASE("device: parse_device takes PyTorch's device strings and rejects others") {
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:2") == Device::cuda(2));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CUDA", "cuda:-1", ""})
    CHECK_THROWS_WITH_AS(parse_device(bad), doctest::Contains("device: expected cpu, cuda or cuda:<index>"),
                         ValueError);
}

TEST_CASE("device: training on a device that is not there fails before any work, naming it") {
  test::FakeCuda fake(&test::host_op_kernels());  // one stand-in device: cuda:0
  CHECK_THROWS_WITH_AS(models::train_diagnostic(tiny("base", "cuda:1")),
                       doctest::Contains("train: cuda:1 is not available"), DeviceError);
}

TEST_CASE("device: training on a device whose backend has no kernels names the first op it needs") {
  test::FakeCuda fake;  // a stand-in device without op kernels: the model must not fall back to the CPU
  CHECK_THROWS_WITH_AS(models::train_diagnostic(tiny("base", "cuda")), doctest::Contains("not implemented on cuda yet"),
                       DeviceError);
}
