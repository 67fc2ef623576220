// Whole models on the stand-in "cuda" device (fake_device.h) running the
// host build of the CUDA kernels (host_kernels.h): `tmem train --device cuda`
// (the diagnostic tasks, brown, fashion-mnist, moving-fmnist) must give the
// CPU's losses step for step and its evaluation figures, which checks that
// every tensor a model makes lands on its device and that the optimizer runs
// there; a backend without kernels must fail, never fall back to the CPU.
#include "tmem/core/device_backend.h"
#include "fake_device.h"
#include "host_kernels.h"
#include "model_fixtures.h"
#include "tmem/models/lm_trainer.h"
#include "tmem/models/trainer.h"
#include "tmem/models/video_trainer.h"
#include "tmem/models/vit_trainer.h"

using namespace tmem;

namespace {

models::TrainConfig tiny(models::BackboneMethod method, const std::string& device) {
  models::TrainConfig c;
  c.model.method = method;
  c.steps = 3;
  c.batch = 4;
  c.eval_batches = 1;
  c.task_cfg.W = 5;
  // Small enough that the host build of the kernels runs it in seconds under
  // the sanitizer job too.
  c.model.dim = 32;
  c.model.memory.channels = 8;
  c.model.memory.D = c.model.memory.H = c.model.memory.W = 4;
  c.device = device;
  return c;
}

}  // namespace

TEST_CASE("device kernels: coord-binding trains on the device with the CPU's losses, every method") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const auto method : {models::BackboneMethod::base, models::BackboneMethod::slots, models::BackboneMethod::tensor}) {
    INFO(to_string(method));
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
    models::TrainConfig c = tiny(models::BackboneMethod::tensor, "cpu");
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
  CHECK(parse_device("cpu:0") == Device::cpu());  // torch's too; it was refused
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:2") == Device::cuda(2));
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CUDA", "cuda:-1", "", "cpu:1"})
    CHECK_THROWS_WITH_AS(parse_device(bad), doctest::Contains("device: expected cpu, cpu:0, cuda or cuda:<index>"),
                         ValueError);
}

TEST_CASE("device: training on a device that is not there fails before any work, naming it") {
  test::FakeCuda fake(&test::host_op_kernels());  // one stand-in device: cuda:0
  CHECK_THROWS_WITH_AS(models::train_diagnostic(tiny(models::BackboneMethod::base, "cuda:1")),
                       doctest::Contains("train: cuda:1 is not available"), DeviceError);
}

TEST_CASE("device: training on a device whose backend has no kernels names the first op it needs") {
  test::FakeCuda fake;  // a stand-in device without op kernels: the model must not fall back to the CPU
  CHECK_THROWS_WITH_AS(models::train_diagnostic(tiny(models::BackboneMethod::base, "cuda")), doctest::Contains("the cuda backend has no kernel for this op"),
                       DeviceError);
}

namespace {

models::LMTrainResult train_tiny_lm(models::LMMethod method, const std::string& device) {
  const std::vector<int64_t> stream = test::periodic_stream(200);
  return models::train_lm(test::tiny_lm_run(method, device), stream, std::vector<int64_t>(stream.begin(), stream.begin() + 60),
                          std::vector<int64_t>(stream.begin() + 60, stream.begin() + 100));
}

models::ViTTrainResult train_tiny_vit(const std::string& task, models::ViTMethod method, const std::string& device) {
  return models::train_vit(test::tiny_vit_run(task, method, device), test::halves(24, 12, 20), test::halves(12, 12, 21));
}

models::VideoTrainResult train_tiny_video(models::VideoMethod method, const std::string& device) {
  const ImageDataset items = test::pattern_items(8);
  return models::train_video(test::tiny_video_run(method, device), items, items);
}

}  // namespace

TEST_CASE("device kernels: the language models train and evaluate on the device with the CPU's figures") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const auto method : models::lm_methods()) {
    INFO(to_string(method));
    const models::LMTrainResult cpu = train_tiny_lm(method, "cpu"), dev = train_tiny_lm(method, "cuda");
    REQUIRE(cpu.losses.size() == 3);
    test::check_close(dev.losses, cpu.losses, 1e-4, 1e-4);
    CHECK(dev.valid.tokens == cpu.valid.tokens);
    CHECK(dev.test.tokens == cpu.test.tokens);
    test::check_close({dev.valid.nll(), dev.test.nll()}, {cpu.valid.nll(), cpu.test.nll()}, 1e-4, 1e-4);
    test::check_close(dev.gates, cpu.gates, 1e-5, 1e-5);
    CHECK(dev.skipped_steps == 0);
  }
  CHECK(models::lm_config_to_json(test::tiny_lm_run(models::LMMethod::base, "cuda"))["device"] == "cuda");
}

TEST_CASE("device kernels: evaluate_perplexity runs on the model's device with the CPU's result") {
  test::FakeCuda fake(&test::host_op_kernels());
  const std::vector<int64_t> stream = test::periodic_stream(100);
  for (const auto method : {models::LMMethod::xl, models::LMMethod::tensor}) {
    INFO(to_string(method));
    Generator gen(3);
    models::TransformerLM model(test::tiny_lm_run(method, "cpu").model, gen);
    const models::PerplexityResult cpu = models::evaluate_perplexity(model, stream, 3);
    model.to(Device::cuda());
    const models::PerplexityResult dev = models::evaluate_perplexity(model, stream, 3);
    CHECK(dev.tokens == cpu.tokens);
    CHECK(dev.nll() == doctest::Approx(cpu.nll()).epsilon(1e-5));
  }
}

TEST_CASE("device kernels: the ViTs train on the device with the CPU's losses and test accuracy") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const auto method : models::vit_methods()) {
    INFO(to_string(method));
    const models::ViTTrainResult cpu = train_tiny_vit("classify", method, "cpu");
    const models::ViTTrainResult dev = train_tiny_vit("classify", method, "cuda");
    REQUIRE(cpu.losses.size() == 3);
    test::check_close(dev.losses, cpu.losses, 1e-4, 1e-4);
    test::check_close(dev.metrics, cpu.metrics, 1e-12, 0);
    CHECK(dev.test_accuracy == cpu.test_accuracy);
    test::check_close(dev.gates, cpu.gates, 1e-5, 1e-5);
  }
  CHECK(models::vit_config_to_json(test::tiny_vit_run("classify", models::ViTMethod::vit, "cuda"), 24)["device"] == "cuda");
}

TEST_CASE("device kernels: the MAE trains on the device with the CPU's losses, PSNR and SSIM") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const auto method : {models::ViTMethod::local, models::ViTMethod::spatial}) {
    INFO(to_string(method));
    const models::ViTTrainResult cpu = train_tiny_vit("mae", method, "cpu");
    const models::ViTTrainResult dev = train_tiny_vit("mae", method, "cuda");
    REQUIRE(cpu.losses.size() == 3);
    test::check_close(dev.losses, cpu.losses, 1e-4, 1e-4);
    test::check_close(dev.metrics, cpu.metrics, 1e-4, 1e-4);  // the training batches' PSNR
    REQUIRE(dev.reconstruction.size() == cpu.reconstruction.size());
    for (size_t r = 0; r < cpu.reconstruction.size(); ++r) {
      INFO("mask ratio " << cpu.reconstruction[r].ratio);
      test::check_close({dev.reconstruction[r].psnr, dev.reconstruction[r].ssim},
                        {cpu.reconstruction[r].psnr, cpu.reconstruction[r].ssim}, 1e-4, 1e-4);
    }
  }
  // The trainers make the composites on the host; on the device it is the same image.
  Generator gen(5);
  const Tensor images = test::halves(3, 12, 22).images, pred = rand({3, 9, 16}, -0.5, 1.5, DType::Float32, gen);
  const models::PatchMask mask = models::random_patch_mask(3, 9, 0.5, gen);
  const Tensor dev = models::mae_composite(images.to(Device::cuda()), pred.to(Device::cuda()), mask, 4);
  CHECK(dev.device() == Device::cuda());
  test::check_close(dev.to_vector(), models::mae_composite(images, pred, mask, 4).to_vector(), 0, 0);
}

TEST_CASE("device kernels: the video models train on the device with the CPU's losses and scores") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (const auto method : models::video_methods()) {
    INFO(to_string(method));
    const models::VideoTrainResult cpu = train_tiny_video(method, "cpu"), dev = train_tiny_video(method, "cuda");
    REQUIRE(cpu.losses.size() == 3);
    test::check_close(dev.losses, cpu.losses, 1e-4, 1e-4);
    test::check_close(dev.metrics, cpu.metrics, 1e-12, 0);
    CHECK(dev.test.clips == cpu.test.clips);
    CHECK(dev.test.occluded_clips == cpu.test.occluded_clips);
    CHECK(dev.test.accuracy == cpu.test.accuracy);
    CHECK(dev.test.occluded_item == cpu.test.occluded_item);
    test::check_close(dev.gates, cpu.gates, 1e-5, 1e-5);
  }
  CHECK(models::video_config_to_json(test::tiny_video_run(models::VideoMethod::joint, "cuda"))["device"] == "cuda");
}

TEST_CASE("device: the LM, ViT and video trainers fail on a device that is not there before any work") {
  test::FakeCuda fake(&test::host_op_kernels());  // one stand-in device: cuda:0
  CHECK_THROWS_WITH_AS(train_tiny_lm(models::LMMethod::tensor, "cuda:1"), doctest::Contains("train: cuda:1 is not available"),
                       DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_vit("classify", models::ViTMethod::spatial, "cuda:1"),
                       doctest::Contains("train: cuda:1 is not available"), DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_vit("mae", models::ViTMethod::vit, "cuda:1"), doctest::Contains("train: cuda:1 is not available"),
                       DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_video(models::VideoMethod::tensor, "cuda:1"), doctest::Contains("train: cuda:1 is not available"),
                       DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_lm(models::LMMethod::base, "gpu"), doctest::Contains("device: expected cpu, cpu:0, cuda or cuda:<index>"),
                       ValueError);
}

TEST_CASE("device: the LM, ViT and video trainers on a backend without kernels name the op, never fall back") {
  test::FakeCuda fake;  // a stand-in device without op kernels: the models must not fall back to the CPU
  CHECK_THROWS_WITH_AS(train_tiny_lm(models::LMMethod::tensor, "cuda"), doctest::Contains("the cuda backend has no kernel for this op"), DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_vit("classify", models::ViTMethod::spatial, "cuda"), doctest::Contains("the cuda backend has no kernel for this op"),
                       DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_vit("mae", models::ViTMethod::vit, "cuda"), doctest::Contains("the cuda backend has no kernel for this op"),
                       DeviceError);
  CHECK_THROWS_WITH_AS(train_tiny_video(models::VideoMethod::joint, "cuda"), doctest::Contains("the cuda backend has no kernel for this op"),
                       DeviceError);
}
