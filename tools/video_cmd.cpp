#include "tmem/tools/video_cmd.h"

#include <unistd.h>

#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tmem/core/device_backend.h"
#include "tmem/core/parallel.h"
#include "tmem/models/video_trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

struct VideoArgs {
  std::vector<models::VideoMethod> methods = models::video_methods();
  std::vector<std::string> occlusion = {"off", "on"};
  std::string name, data_dir = kFashionMnistDir;
  int threads = 0;
  models::VideoTrainConfig cfg;  DebugArgs debug;
  bool distributed = false;  // --distributed (also detected from mpirun or srun)
};

// The defaults (see the help text).
models::VideoTrainConfig defaults() {
  models::VideoTrainConfig c;
  c.data.frames = c.model.frames = 10;
  c.model.dim = 64;
  c.model.layers = 4;
  c.model.heads = 4;
  c.steps = 1000;
  c.batch = 32;
  c.lr = 1e-3;
  c.min_lr = 1e-5;
  c.warmup = 100;
  return c;
}

// One training cell: a method with the occluder off or on.
struct Cell {
  models::VideoMethod method;
  bool occlusion;
  models::VideoTrainResult result;
};

std::string cell_label(const std::string& method, bool occlusion) {
  return method + (occlusion ? ", occlusion" : ", no occlusion");
}

// The progress line of a cell; a training line's ETA covers the rest of the run (eta).
void print_progress(const std::string& label, const models::VideoTrainProgress& p, const RunEta& eta, bool tty) {
  const bool train = p.phase == "train";
  const std::string fields =
      train ? fmt::format("loss {:.4f}  acc {:>5.1f}%  lr {:.2e}  {:.1f} clips/s", p.loss, 100 * p.metric, p.lr,
                          p.clips_per_second)
            : fmt::format("acc {:>5.1f}%  {:.1f} clips/s", 100 * p.metric, p.clips_per_second);
  print_progress_line(train ? label : label + " test", train ? "step" : "batch", p.step, p.steps, fields, p.seconds,
                      tty, train ? 50 : 4, train ? &eta : nullptr, p.start);
}

// "51.30%" (the set accuracy, or the occluded item's) for a finished cell, "-" for one not run.
std::string percent_or_dash(const Cell* c, bool occluded_item) {
  if (!c) return "-";
  return fmt::format("{:.2f}%", 100 * (occluded_item ? c->result.test.occluded_item : c->result.test.accuracy));
}

void print_table(const VideoArgs& a, const std::vector<Cell>& cells) {
  const auto& c = a.cfg;
  fmt::print("\nMoving Fashion-MNIST: which {} items are in the clip - set accuracy on {} test clips; {} frames "
             "of {}x{}, patch {}, {} steps x batch {}\n",
             c.data.items, c.eval_clips,
             c.data.frames, c.data.size,
             c.data.size, c.model.patch, c.steps, c.batch);
  fmt::print("{:<10} {:>11} {:>13} {:>10} {:>14} {:>8}\n", "method", "parameters", "no occlusion", "occlusion",
             "occluded item", "clips/s");
  for (const auto m : a.methods) {
    const Cell *off = nullptr, *on = nullptr;
    double rate = 0;
    int runs = 0;
    for (const Cell& cell : cells)
      if (cell.method == m) {
        (cell.occlusion ? on : off) = &cell;
        rate += cell.result.clips_per_second;
        ++runs;
      }
    if (!runs) continue;
    fmt::print("{:<10} {:>11} {:>13} {:>10} {:>14} {:>8.1f}\n", to_string(m),
               (off ? off : on)->result.parameters, percent_or_dash(off, false),
               percent_or_dash(on, false), percent_or_dash(on, true), rate / runs);
  }
  fmt::print("(set accuracy: the top-2 classes equal the two items' classes, or the top-1 class when they share "
             "one; occluded item: how often the class of the item hidden by the occluder is among them; clips/s: "
             "training)\n");
}

int run(VideoArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  std::vector<bool> occlusion;
  for (const auto& o : a.occlusion) {
    check<ValueError>(o == "off" || o == "on", "tmem train moving-fmnist: --occlusion takes off and on, but got \"", o,
                      "\"");
    occlusion.push_back(o == "on");
  }
  a.cfg.model.frames = a.cfg.data.frames;
  check_batch_splits(a.cfg.batch);  // before the data loads
  const Device device = parse_device(a.cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a missing GPU fails before the images load
  check<ValueError>(!a.cfg.resume || !a.name.empty(), "train moving-fmnist: --resume needs --name (the run to continue)");
  if (a.name.empty()) a.name = timestamped_name("moving-fmnist");
  const std::string root = run_dir(a.name);  // so does a bad --name
  // Build every method's model before loading and training, so a bad option fails now.
  std::vector<int64_t> params;
  for (const auto m : a.methods) {
    models::VideoTrainConfig c = a.cfg;
    c.model.method = m;
    models::check_video_train_config(c);
    params.push_back(models::video_parameters(c));
  }
  fmt::print("loading Fashion-MNIST from {}\n", a.data_dir);
  std::fflush(stdout);
  const ImageDataset train = load_fashion_mnist(a.data_dir, true);
  const ImageDataset test = load_fashion_mnist(a.data_dir, false);
  MovingFashionMNIST{train, a.cfg.data};  // throws for bad clip options before any run starts
  RunRecorder rec(a.name, "train moving-fmnist", models::video_config_to_json(a.cfg));
  if (a.cfg.resume) rec.check_resume({"method", "occlusion", "steps"});
  const auto& c = a.cfg;
  fmt::print("tmem train moving-fmnist: methods {} x occlusion settings {}, {} frames of {}x{}, patch {} "
             "({} patches per frame), d={}, {} layers, {} heads, batch {}, {} steps ({} training "
             "clips), lr {:g}, {} test clips, on {}, {} -> {}\n",
             a.methods.size(), occlusion.size(), c.data.frames,
             c.data.size, c.data.size,
             c.model.patch, models::video_patches(c.model),
             c.model.dim, c.model.layers,
             c.model.heads, c.batch, c.steps,
             c.steps * c.batch, c.lr, c.eval_clips,
             device.str(), threads_and_ranks(), root);
  for (size_t i = 0; i < a.methods.size(); ++i)
    fmt::print("  {:<9} {} parameters\n", to_string(a.methods[i]), params[i]);

  const bool tty = isatty(fileno(stdout));
  json runs = json::array();
  std::vector<Cell> cells;
  // The cells in training order, one kind per method (occlusion does not change the cost of a step).
  std::vector<RunEta::Part> parts;
  for (size_t o = 0; o < occlusion.size(); ++o)
    for (const auto video_method : a.methods) parts.push_back({to_string(video_method), a.cfg.steps});
  RunEta eta(std::move(parts));
  for (bool occ : occlusion)
    for (const auto video_method : a.methods) {
      const std::string method = to_string(video_method);
      models::VideoTrainConfig cc = a.cfg;
      cc.model.method = video_method;
      cc.data.occlusion = occ;
      const std::string label = cell_label(method, occ);
      const std::string cell = method + (occ ? "_occlusion" : "");
      rec.place(cc, cell);
      const std::string padded = fmt::format("{:<23}", label);
      models::VideoTrainResult r = models::train_video(
          cc, train, test, [&](const models::VideoTrainProgress& p) { print_progress(padded, p, eta, tty); });
      eta.finish(static_cast<int64_t>(r.losses.size()), r.seconds);
      fmt::print("{}: set accuracy {:.2f}%", label, 100 * r.test.accuracy);
      if (occ) fmt::print(", occluded item {:.2f}%", 100 * r.test.occluded_item);
      fmt::print("; {} params, {:.1f} clips/s, {}", r.parameters, r.clips_per_second, fmt_time(r.seconds));
      for (size_t l = 0; l < r.gates.size(); ++l) fmt::print("{}{:.3f}", l ? " " : ", gates ", r.gates[l]);
      if (r.skipped_steps)
        fmt::print(", {} steps skipped (non-finite gradients)", r.skipped_steps);
      fmt::print("\n");
      auto clips = [&](size_t i) { return static_cast<double>((i + 1) * static_cast<size_t>(cc.batch)) / 1000.0; };
      rec.add_curve("loss", {"Moving Fashion-MNIST: training loss (moving average)", "training clips (thousands)",
                             "set cross-entropy (nats)"}, smoothed_curve(label, r.losses, clips));
      std::vector<double> percent = r.metrics;
      for (double& m : percent) m *= 100;
      rec.add_curve("accuracy", {"Moving Fashion-MNIST: training set accuracy (moving average)",
                                 "training clips (thousands)", "set accuracy (%)"},
                    smoothed_curve(label, percent, clips));
      runs.push_back({{"method", method}, {"occlusion", occ}, {"config", models::video_config_to_json(cc)},
                      {"parameters", r.parameters}, {"test_accuracy", r.test.accuracy},
                      {"occluded_item_accuracy", occ ? json(r.test.occluded_item) : json(nullptr)},
                      {"test_clips", r.test.clips}, {"occluded_clips", r.test.occluded_clips},
                      {"train_seconds", r.seconds}, {"clips_per_second", r.clips_per_second}, {"gates", r.gates},
                      {"skipped_steps", r.skipped_steps}, {"losses", r.losses}, {"train_metrics", r.metrics}});
      cells.push_back({video_method, occ, r});
      // Written after every cell, so a stopped run keeps what finished.
      json all = {{"task", "moving-fmnist-classify"},
                  {"data", {{"dir", a.data_dir}, {"train", "clips drawn afresh every step from the 60,000 training "
                                                           "images"},
                            {"test", "a fixed set of clips from the 10,000 test images"}}},
                  {"train_metric", "set accuracy of the training batch"},
                  {"eval_protocol", "set accuracy: the top-k classes equal the clip's item classes (k = the number "
                                    "of distinct classes among the items); occluded item: the occluded item's class "
                                    "is among the top-k. Clip i of the test set is drawn from its own generator, so "
                                    "it has the same items and motion with occlusion off and on"},
                  {"runs", a.cfg.resume ? rec.with_earlier("results.json", "runs", {"method", "occlusion"}, runs,
                                                                  occ == occlusion.back() &&
                                                                      video_method == a.methods.back())
                                        : runs}};
      rec.write_json("results.json", all);
      rec.draw();
    }
  print_table(a, cells);
  fmt::print("results written to {}/results.json, training curves to {}/loss.svg and accuracy.svg\n", root, root);
  return 0;
}

}  // namespace

int run_train_moving_fmnist(int argc, char** argv) {
  VideoArgs a;
  a.cfg = defaults();
  auto& c = a.cfg;
  auto& m = c.model;
  CLI::App app{
      "Train the video models on Moving Fashion-MNIST (2 Fashion-MNIST items bouncing in 64x64 frames; training "
      "clips from the 60,000 training images, drawn afresh every step; a fixed set of test clips from the 10,000 "
      "test images) to say which two items are in the clip, with the occluder off and on (on: a grey bar hides "
      "one item during the last 6 frames), and report the set accuracy per method and setting.\n"
      "Methods: joint (one transformer over all frames' patch tokens, space + time positions), registers (frame by "
      "frame, 4 register tokens carried from frame to frame), tensor (frame by frame, Tensor Memory carried from "
      "frame to frame: C=16, 4^3, chunk 4 = 4 memory steps per frame, gamma_init -2, in every block). joint and "
      "registers get wider MLPs so all three have about the same parameter count. The frame-recurrent methods "
      "classify from the last frame's output, so under occlusion they must remember the hidden item.\n"
      "Defaults: 10 frames, patch 16 (16 patches per frame), d=64, 4 layers, 4 heads, batch 32, 1000 steps, lr 1e-3 "
      "-> 1e-5 (100 warmup steps, cosine), weight decay 0.05, clip 1; 1000 test clips; about 304,000 parameters per "
      "method. Measured on 2 cores (shared with another job): joint ~155, registers ~75, tensor ~60 training "
      "clips/s, so about 3.5, 7 and 9 minutes per cell (32,000 training clips) plus a few seconds of testing; the "
      "six cells take about 40 minutes.",
      "tmem train moving-fmnist"};
  add_method_option(app, "--method", a.methods, models::parse_video_method,
                    "Methods, comma-separated: joint, registers, tensor");
  app.add_option("--occlusion", a.occlusion, "Occluder settings, comma-separated: off, on")
      ->delimiter(',')->capture_default_str();
  app.add_option("--frames", c.data.frames, "Frames per clip T")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--occluded-frames", c.data.occluded_frames, "Occlusion on: the last frames the occluder is shown in")
      ->capture_default_str()
      ->check(int_range(0, 1024));
  app.add_option("--dim", m.dim, "Width d")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--layers", m.layers, "Layers")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--heads", m.heads, "Attention heads")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--registers", m.registers, "registers: register tokens R")->capture_default_str()
      ->check(int_range(0, 65536));
  app.add_option("--mem-channels", m.memory.channels, "tensor: memory channels C")->capture_default_str()
      ->check(int_range(1, 4096));
  app.add_option("--mem-grid", m.memory.D, "tensor: memory grid size (D = H = W)")->capture_default_str()
      ->check(int_range(1, 256))
      ->each([&m](const std::string&) { m.memory.H = m.memory.W = m.memory.D; });
  app.add_option("--chunk", m.memory.chunk, "tensor: patches per memory step K")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--memory-every", m.memory_every, "tensor: a memory layer in every n-th block")->capture_default_str()
      ->check(int_range(1, 1024));
  app.add_option("--steps", c.steps, "Optimizer steps (one fresh batch of clips each)")->capture_default_str()
      ->check(int_range(0, 1000000000));
  app.add_option("--batch", c.batch, "Clips per step")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--lr", c.lr, "Peak AdamW learning rate")->capture_default_str()->check(real_range(0, 10));
  app.add_option("--min-lr", c.min_lr, "Learning rate at the end of the cosine decay")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--warmup", c.warmup, "Linear warmup steps")->capture_default_str()->check(int_range(0, 1000000000));
  app.add_option("--weight-decay", c.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--clip", c.clip, "Gradient-norm clip")->capture_default_str()->check(real_range(0, 1e9, true));
  app.add_option("--eval-clips", c.eval_clips, "Test clips (a fixed set)")->capture_default_str()
      ->check(int_range(1, 1000000));
  app.add_option("--eval-seed", c.eval_seed, "Seed of the test clips")->capture_default_str()->check(kNonNegative);
  app.add_option("--eval-batch", c.eval_batch, "Clips per test batch")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--seed", c.seed, "Seed (initialisation; seed + 1: the training clips and their images' order)")
      ->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--device", c.device, "Train on cpu, cuda or cuda:<index>")->capture_default_str();
  add_run_options(app, a.threads, a.name, a.data_dir, "moving-fmnist-date-time", kFashionMnistDirHelp);
  add_checkpoint_options(app, a.cfg,
                         "Continue each run from its checkpoint under runs/<name>/<method>[_occlusion]/ (written "
                         "with --checkpoint-every or --resume)");
  add_debug_options(app, a.debug);
  add_distributed_option(app, a.distributed);
  return parse_and_run(app, argc, argv,
                       [&] { return run_training("train moving-fmnist", a.distributed, a.debug, [&] { return run(a); }); });
}

}  // namespace tmem::tools
