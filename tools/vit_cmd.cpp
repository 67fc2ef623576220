#include "tmem/tools/vit_cmd.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tmem/core/device_backend.h"
#include "tmem/core/parallel.h"
#include "tmem/models/vit_trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

struct FashionArgs {
  std::vector<models::ViTMethod> methods = models::vit_methods();
  std::string name, data_dir = kFashionMnistDir;
  int threads = 0;
  int64_t train_images = 0, test_images = 0;  // 0: all
  models::ViTTrainConfig cfg;  DebugArgs debug;
  bool distributed = false;  // --distributed (also detected from mpirun or srun)
};

// The defaults of a task (see the help text): classify trains a d=96 ViT
// (4 layers, 3 heads) for 5 epochs; mae the small preset of docs/DESIGN.md §7
// (encoder d=192 / 4 layers / 3 heads, decoder 96 / 2 / 3) for 5 epochs, with
// memory chunk 4 instead of 16: at mask 0.75 the encoder sees 12 patches,
// which chunk 16 would make one chunk whose read sees only the zero state.
models::ViTTrainConfig task_defaults(const std::string& task) {
  models::ViTTrainConfig c;
  c.task = task;
  models::ViTConfig& e = c.model.encoder;
  e.patch = 4;
  e.dim = task == "mae" ? 192 : 96;
  e.layers = 4;
  e.heads = 3;
  if (task == "mae") e.memory.chunk = 4;
  c.model.decoder_dim = 96;
  c.model.decoder_layers = 2;
  c.model.decoder_heads = 3;
  c.batch = 64;
  c.epochs = 5;
  c.lr = 1e-3;
  c.min_lr = 1e-5;
  c.warmup = 200;
  return c;
}

// The value of --task in argv ("classify" when absent), read before parsing
// so the other flags can default to that task's values.
std::string task_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--task" && i + 1 < argc) return argv[i + 1];
    if (s.rfind("--task=", 0) == 0) return s.substr(7);
  }
  return "classify";
}

// The progress line of a method; a training line's ETA covers the rest of the run (eta).
void print_progress(const std::string& method, const std::string& task, const models::ViTTrainProgress& p,
                    const RunEta& eta, bool tty) {
  const std::string metric = task == "classify"     ? fmt::format("acc {:>5.1f}%", 100 * p.metric)
                             : std::isnan(p.metric) ? "PSNR -"  // no mask ratio finished yet
                                                    : fmt::format("PSNR {:.2f} dB", p.metric);
  const bool train = p.phase == "train";
  const std::string label = fmt::format("{:<9}", method) + (train ? "" : " test");
  const std::string fields =
      train ? fmt::format("loss {:.4f}  {}  lr {:.2e}  {:.0f} img/s", p.loss, metric, p.lr, p.images_per_second)
            : fmt::format("{}  {:.0f} img/s", metric, p.images_per_second);
  print_progress_line(label, train ? "step" : "batch", p.step, p.steps, fields, p.seconds, tty, train ? 50 : 4,
                      train ? &eta : nullptr, p.start);
}

void print_table(const FashionArgs& a, const std::vector<models::ViTTrainResult>& results, int64_t steps) {
  const bool mae = a.cfg.task == "mae";
  fmt::print("\nFashion-MNIST {}, {} steps x batch {}\n", mae ? "masked patch reconstruction" : "classification",
             steps, a.cfg.batch);
  fmt::print("{:<10} {:>11}", "method", "parameters");
  if (mae)
    for (double r : a.cfg.eval_ratios) {
      const std::string psnr_h = fmt::format("PSNR@{:.2f}", r), ssim_h = fmt::format("SSIM@{:.2f}", r);
      fmt::print("  {:>10} {:>9}", psnr_h, ssim_h);
    }
  else
    fmt::print(" {:>9}", "test acc");
  fmt::print(" {:>8} {:>9}\n", "img/s", "time");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    fmt::print("{:<10} {:>11}", to_string(a.methods[i]), r.parameters);
    if (mae)
      for (const auto& s : r.reconstruction) fmt::print("  {:>10.2f} {:>9.4f}", s.psnr, s.ssim);
    else
      fmt::print(" {:>8.2f}%", 100 * r.test_accuracy);
    fmt::print(" {:>8.0f} {:>9}\n", r.images_per_second, fmt_time(r.seconds));
  }
  if (mae)
    fmt::print("(PSNR in dB over every pixel of the test composites - visible patches from the input, masked ones "
               "predicted and clamped to [0, 1]; SSIM 7x7 Gaussian window, mean over images; the same masks for "
               "every method)\n");
}

int run(FashionArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  models::check_vit_task(a.cfg.task);
  check_batch_splits(a.cfg.batch);  // before the images load
  const Device device = parse_device(a.cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a missing GPU fails before the images load
  check<ValueError>(!a.cfg.resume || !a.name.empty(), "train fashion-mnist: --resume needs --name (the run to continue)");
  if (a.name.empty()) a.name = timestamped_name("fashion-mnist-" + a.cfg.task);
  const std::string root = run_dir(a.name);  // so does a bad --name
  // Build every method's model before loading and training, so a bad option fails now.
  std::vector<int64_t> params;
  for (const auto m : a.methods) {
    models::ViTTrainConfig c = a.cfg;
    c.model.encoder.method = m;
    params.push_back(models::vit_parameters(c));
  }
  fmt::print("loading Fashion-MNIST from {}\n", a.data_dir);
  std::fflush(stdout);
  ImageDataset train = load_fashion_mnist(a.data_dir, true), test = load_fashion_mnist(a.data_dir, false);
  if (a.train_images > 0) train = take_first(train, a.train_images);
  if (a.test_images > 0) test = take_first(test, a.test_images);
  const int64_t n_train = train.images.shape()[0], n_test = test.images.shape()[0];
  const int64_t steps = models::vit_train_steps(a.cfg, n_train);
  RunRecorder rec(a.name, "train fashion-mnist", models::vit_config_to_json(a.cfg, n_train));
  if (a.cfg.resume) rec.check_resume({"method", "steps", "epochs"});
  const auto& e = a.cfg.model.encoder;
  fmt::print("tmem train fashion-mnist --task {}: methods {}, {} train / {} test images, patch {} ({} "
             "patches), d={}, {} layers, {} heads",
             a.cfg.task, a.methods.size(), n_train, n_test,
             e.patch, models::vit_patches(e), e.dim, e.layers, e.heads);
  if (a.cfg.task == "mae")
    fmt::print(", decoder d={} / {} layers / {} heads, mask {:.2f}", a.cfg.model.decoder_dim,
               a.cfg.model.decoder_layers, a.cfg.model.decoder_heads, a.cfg.mask_ratio);
  fmt::print(", batch {}, {} steps ({:.2f} epochs), lr {:g}, on {}, {} -> {}\n",
             a.cfg.batch, steps,
             static_cast<double>(steps * a.cfg.batch) / static_cast<double>(n_train), a.cfg.lr, device.str(),
             threads_and_ranks(), root);
  for (size_t i = 0; i < a.methods.size(); ++i)
    fmt::print("  {:<9} {} parameters\n", to_string(a.methods[i]), params[i]);

  const bool tty = isatty(fileno(stdout));
  const bool mae = a.cfg.task == "mae";
  json methods = json::array();
  std::vector<models::ViTTrainResult> results;
  std::vector<RunEta::Part> parts;
  for (const auto vit_method : a.methods) parts.push_back({to_string(vit_method), steps});
  RunEta eta(std::move(parts));
  for (const auto vit_method : a.methods) {
    const std::string method = to_string(vit_method);
    models::ViTTrainConfig c = a.cfg;
    c.model.encoder.method = vit_method;
    rec.place(c, method);
    models::ViTTrainResult r = models::train_vit(
        c, train, test, [&](const models::ViTTrainProgress& p) { print_progress(method, c.task, p, eta, tty); });
    eta.finish(static_cast<int64_t>(r.losses.size()), r.seconds);
    fmt::print("{}:", method);
    if (mae)
      for (const auto& s : r.reconstruction)
        fmt::print(" mask {:.2f} PSNR {:.2f} dB SSIM {:.4f};", s.ratio, s.psnr, s.ssim);
    else
      fmt::print(" test accuracy {:.2f}%;", 100 * r.test_accuracy);
    fmt::print(" {} params, {:.0f} img/s, {}", r.parameters, r.images_per_second, fmt_time(r.seconds));
    for (size_t l = 0; l < r.gates.size(); ++l) fmt::print("{}{:.3f}", l ? " " : ", gates ", r.gates[l]);
    if (r.skipped_steps)
      fmt::print(", {} steps skipped (non-finite gradients)", r.skipped_steps);
    fmt::print("\n");
    auto epochs = [&](size_t i) {
      return static_cast<double>((i + 1) * static_cast<size_t>(c.batch)) / static_cast<double>(n_train);
    };
    const std::string task_title = std::string("Fashion-MNIST ") + (mae ? "MAE" : "classification");
    rec.add_curve("loss", {task_title + ": training loss (moving average)", "epochs",
                           mae ? "MSE on masked patches" : "cross-entropy (nats)"},
                  smoothed_curve(method, r.losses, epochs));
    std::vector<double> metric = r.metrics;
    if (!mae)
      for (double& m : metric) m *= 100;
    rec.add_curve(mae ? "psnr" : "accuracy",
                  {task_title + (mae ? ": training PSNR (moving average)" : ": training accuracy (moving average)"),
                   "epochs", mae ? "composite PSNR (dB)" : "accuracy (%)"},
                  smoothed_curve(method, metric, epochs));
    json m = {{"method", method}, {"config", models::vit_config_to_json(c, n_train)}, {"parameters", r.parameters},
              {"train_seconds", r.seconds}, {"images_per_second", r.images_per_second}, {"gates", r.gates},
              {"skipped_steps", r.skipped_steps}, {"losses", r.losses}, {"train_metrics", r.metrics}};
    if (mae) {
      m["reconstruction"] = json::array();
      for (const auto& sc : r.reconstruction)
        m["reconstruction"].push_back({{"mask_ratio", sc.ratio}, {"psnr", sc.psnr}, {"ssim", sc.ssim}});
    } else {
      m["test_accuracy"] = r.test_accuracy;
    }
    methods.push_back(m);
    results.push_back(r);
    // Written after every method, so a stopped run keeps what finished.
    json all = {{"task", "fashion-mnist-" + a.cfg.task},
                {"data", {{"dir", a.data_dir}, {"train_images", n_train}, {"test_images", n_test}}},
                {"train_metric", mae ? "PSNR (dB) of the training batch's composite" : "training batch accuracy"},
                {"methods", a.cfg.resume ? rec.with_earlier("results.json", "methods", {"method"}, methods,
                                                                       vit_method == a.methods.back())
                                          : methods}};
    if (mae)
      all["eval_protocol"] = "test images in order, masks from random_patch_mask with one Generator(mask_seed) per "
                             "ratio; composite = visible patches of the input + predicted masked patches clamped to "
                             "[0, 1]; PSNR over every pixel of every composite, SSIM (7x7 Gaussian, sigma 1.5) mean "
                             "over images";
    rec.write_json("results.json", all);
    rec.draw();
  }
  print_table(a, results, steps);
  fmt::print("results written to {}/results.json, training curves to {}/loss.svg\n", root, root);
  return 0;
}

}  // namespace

int run_train_fashion_mnist(int argc, char** argv) {
  FashionArgs a;
  const std::string task = task_of(argc, argv);
  a.cfg = task_defaults(task == "mae" ? "mae" : "classify");
  a.cfg.task = task;
  auto& c = a.cfg;
  auto& e = c.model.encoder;
  CLI::App app{
      "Train the ViT family on Fashion-MNIST (28x28, 60,000 train / 10,000 test images) and report, per method, "
      "the test accuracy (--task classify) or the PSNR and SSIM of the composite reconstruction at mask ratios "
      "0.25, 0.5 and 0.75 (--task mae).\n"
      "Methods: vit (plain ViT), local (each patch attends to a window x window neighbourhood of patches), "
      "registers (R learned register tokens, discarded at the output), spatial (Tensor Memory every 2 layers, "
      "scanning the patches in raster order; causal over chunks). vit, local and registers get wider MLPs so all "
      "four have about the same parameter count.\n"
      "Defaults (classify): patch 4, d=96, 4 layers, 3 heads, batch 64, 5 epochs (4,685 steps), lr 1e-3 -> 1e-5 "
      "(200 warmup steps, cosine), weight decay 0.05, clip 1, window 3, 4 registers, memory C=16 4^3 chunk 16 "
      "gamma_init -2; 0.76M parameters per method. Measured on 2 busy cores: vit ~250, local ~285, registers "
      "~245, spatial ~360 training images/s, so 14-20 minutes per method plus ~15 s of testing.\n"
      "Defaults (mae): the small preset - encoder patch 4, d=192, 4 layers, 3 heads; decoder d=96, "
      "2 layers, 3 heads - mask 0.75, memory chunk 4 (the 12 visible patches make 3 chunks; 16 would make one, "
      "which reads only the zero state), the other settings as classify; 2.36M parameters per method. Measured on "
      "one thread per method, two side by side on 2 cores: vit 478, local 549, registers 411, spatial 550 "
      "images/s, so 9-12 minutes per method plus ~1 minute of testing (3 mask ratios x 10,000 images).",
      "tmem train fashion-mnist"};
  app.add_option("--task", c.task, "classify or mae")->capture_default_str();
  add_method_option(app, "--method", a.methods, models::parse_vit_method,
                    "Methods, comma-separated: vit, local, registers, spatial");
  app.add_option("--patch", e.patch, "Patch size (4: 49 patches, 7: 16)")->capture_default_str()
      ->check(int_range(1, 28));
  app.add_option("--dim", e.dim, "Encoder width d")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--layers", e.layers, "Encoder layers")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--heads", e.heads, "Encoder attention heads")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--window", e.window, "local: the odd side of the patch neighbourhood")->capture_default_str()
      ->check(int_range(1, 1048576));
  app.add_option("--registers", e.registers, "registers: register tokens R")->capture_default_str()
      ->check(int_range(0, 65536));
  app.add_option("--mem-channels", e.memory.channels, "spatial: memory channels C")->capture_default_str()
      ->check(int_range(1, 4096));
  app.add_option("--mem-grid", e.memory.D, "spatial: memory grid size (D = H = W)")->capture_default_str()
      ->check(int_range(1, 256))
      ->each([&e](const std::string&) { e.memory.H = e.memory.W = e.memory.D; });
  app.add_option("--chunk", e.memory.chunk, "spatial: patches per memory step K")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--memory-every", e.memory_every, "spatial: a memory layer in every n-th block")->capture_default_str()
      ->check(int_range(1, 1024));
  app.add_option("--dropout", e.dropout, "Dropout")->capture_default_str()->check(real_range(0, 1));
  app.add_option("--dec-dim", c.model.decoder_dim, "mae: decoder width")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--dec-layers", c.model.decoder_layers, "mae: decoder layers")->capture_default_str()
      ->check(int_range(1, 1024));
  app.add_option("--dec-heads", c.model.decoder_heads, "mae: decoder heads")->capture_default_str()
      ->check(int_range(1, 1024));
  app.add_option("--mask-ratio", c.mask_ratio, "mae: training mask ratio")->capture_default_str()
      ->check(real_range(0, 1, true));
  app.add_option("--mask-seed", c.mask_seed, "mae: seed of the test masks")->capture_default_str()->check(kNonNegative);
  app.add_option("--epochs", c.epochs, "Passes over the training images (steps = epochs * 60000 / batch)")
      ->capture_default_str()
      ->check(int_range(0, 1000000));
  app.add_option("--steps", c.steps, "Optimizer steps (overrides --epochs)")->capture_default_str()
      ->check(int_range(0, 1000000000));
  app.add_option("--batch", c.batch, "Images per step")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--lr", c.lr, "Peak AdamW learning rate")->capture_default_str()->check(real_range(0, 10));
  app.add_option("--min-lr", c.min_lr, "Learning rate at the end of the cosine decay")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--warmup", c.warmup, "Linear warmup steps")->capture_default_str()->check(int_range(0, 1000000000));
  app.add_option("--weight-decay", c.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--clip", c.clip, "Gradient-norm clip")->capture_default_str()->check(real_range(0, 1e9, true));
  app.add_option("--eval-batch", c.eval_batch, "Images per test batch")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--train-images", a.train_images, "Use only the first n training images (0: all 60,000)")
      ->capture_default_str()
      ->check(int_range(0, 60000));
  app.add_option("--test-images", a.test_images, "Use only the first n test images (0: all 10,000)")
      ->capture_default_str()
      ->check(int_range(0, 10000));
  app.add_option("--seed", c.seed, "Seed (initialisation, data order, training masks)")->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--device", c.device, "Train on cpu, cuda or cuda:<index>")->capture_default_str();
  add_run_options(app, a.threads, a.name, a.data_dir, "fashion-mnist-<task>-date-time", kFashionMnistDirHelp);
  add_checkpoint_options(app, c,
                         "Continue each method from its checkpoint under runs/<name>/<method>/ (written with "
                         "--checkpoint-every or --resume)");
  add_debug_options(app, a.debug);
  add_distributed_option(app, a.distributed);
  return parse_and_run(app, argc, argv,
                       [&] { return run_training("train fashion-mnist", a.distributed, a.debug, [&] { return run(a); }); });
}

}  // namespace tmem::tools
