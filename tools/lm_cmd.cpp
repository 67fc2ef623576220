#include "tmem/tools/lm_cmd.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tmem/core/device_backend.h"
#include "tmem/core/parallel.h"
#include "tmem/data/brown.h"
#include "tmem/models/lm_trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

// The defaults are LMTrainConfig's and LMConfig's (see the help text).
struct BrownArgs {
  std::vector<models::LMMethod> methods = models::lm_methods();
  std::string name, data_dir = "data/cache/brown";
  int threads = 0;
  models::LMTrainConfig cfg;  DebugArgs debug;
  bool distributed = false;  // --distributed (also detected from mpirun or srun)
};

// The progress line of a method; a training line's ETA covers the rest of the
// run (eta), an evaluation line's only its own pass.
void print_progress(const std::string& method, const models::LMTrainProgress& p, const RunEta& eta, bool tty) {
  const bool train = p.phase == "train";
  const std::string fields = train ? fmt::format("loss {:.4f}  lr {:.2e}  {:.0f} tok/s", p.loss, p.lr,
                                                 p.tokens_per_second)
                                   : fmt::format("ppl {:.2f}  {:.0f} tok/s", std::exp(p.loss), p.tokens_per_second);
  print_progress_line(fmt::format("{:<6}", method) + (train ? "" : " " + p.phase), train ? "step" : "segment",
                      p.step, p.steps, fields, p.seconds, tty, train ? 50 : 5, train ? &eta : nullptr, p.start);
}

int run(BrownArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  check_batch_splits(a.cfg.batch);  // before the data loads
  const int64_t steps = models::lm_train_steps(a.cfg);
  const Device device = parse_device(a.cfg.device);
  if (!device.is_cpu()) device_backend(device, "train");  // a missing GPU fails before the corpus loads
  check<ValueError>(!a.cfg.resume || !a.name.empty(), "train brown: --resume needs --name (the run to continue)");
  if (a.name.empty()) a.name = timestamped_name("brown");
  const std::string root = run_dir(a.name);  // so does a bad --name
  fmt::print("loading the Brown corpus from {}\n", a.data_dir);
  std::fflush(stdout);
  BrownCorpus corpus = load_brown(a.data_dir);
  a.cfg.model.vocab = static_cast<int64_t>(corpus.vocab.size());
  fmt::print("Brown corpus: {} train / {} valid / {} test tokens, |V| = {} (words seen <= 3 times in train -> <unk>)\n",
             corpus.train.size(), corpus.valid.size(), corpus.test.size(), a.cfg.model.vocab);
  // Build every method's model before training, so a bad option fails now.
  std::vector<int64_t> params;
  for (const auto m : a.methods) {
    models::LMConfig mc = a.cfg.model;
    mc.method = m;
    Generator gen(0);
    params.push_back(models::TransformerLM(mc, gen).num_parameters());
  }
  RunRecorder rec(a.name, "train brown", models::lm_config_to_json(a.cfg));
  if (a.cfg.resume) rec.check_resume({"method", "steps"});
  const auto& m = a.cfg.model;
  fmt::print("tmem train brown: methods {}, d={}, {} layers, {} heads, seq {}, batch {}, {} steps "
             "({:.2f}M tokens), lr {:g}, on {}, {} -> {}\n",
             a.methods.size(), m.dim, m.layers,
             m.heads, m.seq, a.cfg.batch,
             steps, static_cast<double>(steps * a.cfg.batch * m.seq) / 1e6, a.cfg.lr,
             device.str(), threads_and_ranks(), root);
  for (size_t i = 0; i < a.methods.size(); ++i)
    fmt::print("  {:<6} {} parameters\n", to_string(a.methods[i]), params[i]);

  const bool tty = isatty(fileno(stdout));
  json methods = json::array();
  std::vector<models::LMTrainResult> results;
  const double tokens_per_step = static_cast<double>(a.cfg.batch * m.seq);
  std::vector<RunEta::Part> parts;
  for (const auto lm_method : a.methods) parts.push_back({to_string(lm_method), steps});
  RunEta eta(std::move(parts));
  for (const auto lm_method : a.methods) {
    const std::string method = to_string(lm_method);
    models::LMTrainConfig c = a.cfg;
    c.model.method = lm_method;
    rec.place(c, method);
    models::LMTrainResult r = models::train_lm(c, corpus.train, corpus.valid, corpus.test,
                                               [&](const models::LMTrainProgress& p) { print_progress(method, p, eta, tty); });
    eta.finish(static_cast<int64_t>(r.losses.size()), r.seconds);
    fmt::print("{}: valid ppl {:.2f}, test ppl {:.2f}, {} params, {:.0f} tok/s, {}", method,
               r.valid.perplexity(), r.test.perplexity(), r.parameters, r.tokens_per_second, fmt_time(r.seconds));
    for (size_t l = 0; l < r.gates.size(); ++l) fmt::print("{}{:.3f}", l ? " " : ", gates ", r.gates[l]);
    if (r.skipped_steps) fmt::print(", {} steps skipped (non-finite gradients)", r.skipped_steps);
    fmt::print("\n");
    rec.add_curve("loss", {"Brown corpus: training loss (moving average)", "training tokens (millions)",
                           "cross-entropy (nats per token)"},
                  smoothed_curve(method, r.losses,
                             [&](size_t i) { return tokens_per_step * static_cast<double>(i + 1) / 1e6; }));
    methods.push_back({{"method", method}, {"config", models::lm_config_to_json(c)},
                       {"parameters", r.parameters}, {"valid_perplexity", r.valid.perplexity()},
                       {"valid_nll", r.valid.nll()}, {"valid_tokens", r.valid.tokens},
                       {"test_perplexity", r.test.perplexity()}, {"test_nll", r.test.nll()},
                       {"test_tokens", r.test.tokens}, {"train_seconds", r.seconds},
                       {"tokens_per_second", r.tokens_per_second}, {"gates", r.gates},
                       {"skipped_steps", r.skipped_steps}, {"losses", r.losses}});
    results.push_back(r);
    // Written after every method, so a stopped run keeps what finished.
    json all = {{"task", "brown"},
                {"corpus", {{"train_tokens", corpus.train.size()}, {"valid_tokens", corpus.valid.size()},
                            {"test_tokens", corpus.test.size()}, {"vocab", a.cfg.model.vocab}}},
                {"eval_protocol", "perplexity per token over the whole stream in eval_batch parallel rows, "
                                  "segment by segment; xl / tensor / leaky carry their state across segments, "
                                  "base / local / linear evaluate each segment on its own"},
                {"methods", a.cfg.resume ? rec.with_earlier("results.json", "methods", {"method"}, methods,
                                                                       lm_method == a.methods.back())
                                          : methods}};
    rec.write_json("results.json", all);
    rec.draw();
  }
  fmt::print("\nBrown corpus perplexity per token (|V| = {}), {} steps x {} tokens\n", a.cfg.model.vocab, steps,
             a.cfg.batch * m.seq);
  fmt::print("{:<8} {:>11} {:>10} {:>10} {:>9} {:>9}\n", "method", "parameters", "valid ppl", "test ppl", "tok/s",
             "time");
  for (size_t i = 0; i < results.size(); ++i)
    fmt::print("{:<8} {:>11} {:>10.2f} {:>10.2f} {:>9.0f} {:>9}\n", to_string(a.methods[i]),
               results[i].parameters, results[i].valid.perplexity(),
               results[i].test.perplexity(), results[i].tokens_per_second, fmt_time(results[i].seconds));
  fmt::print("(Bengio et al. 2003, |V| = 16,383: trigram 336, Kneser-Ney 5-gram 321, neural LM 268, "
             "neural LM + trigram 252; leaky is not causal, so its perplexity is not a valid LM score)\n");
  fmt::print("results written to {}/results.json, training curves to {}/loss.svg\n", root, root);
  return 0;
}

}  // namespace

int run_train_brown(int argc, char** argv) {
  BrownArgs a;
  auto& c = a.cfg;
  CLI::App app{
      "Train the language models on the Brown corpus (Bengio et al. 2003 split: 800k train, 200k valid, the rest "
      "test) and report validation and test perplexity per token for each method.\n"
      "Methods: base (full causal attention), local (sliding window), linear (ELU+1 linear attention), xl "
      "(Transformer-XL segment cache, relative positions), tensor (Tensor Memory per layer, state carried "
      "across segments), leaky (tensor with the reference code's shared state; not causal).\n"
      "Defaults: d=256, 4 layers, 4 heads, seq 256, batch 16, 4M training tokens (976 steps, 5 epochs), lr "
      "1e-3 -> 1e-4 (100 warmup steps, cosine), dropout 0.2, memory C=32 8^3 chunk 16; about 11.1M parameters "
      "per method. Measured on one thread per method, two methods side by side on 2 cores: 30-48 minutes of "
      "training (tensor 30, local 33, base 36, linear 37, xl 48; 1,400-2,300 tokens/s) plus about 3 minutes of "
      "evaluation.",
      "tmem train brown"};
  add_method_option(app, "--method", a.methods, models::parse_lm_method,
                    "Methods, comma-separated: base, local, linear, xl, tensor, leaky");
  app.add_option("--dim", c.model.dim, "Model width d")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--layers", c.model.layers, "Transformer layers")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--heads", c.model.heads, "Attention heads")->capture_default_str()->check(int_range(1, 1024));
  app.add_option("--seq", c.model.seq, "Segment length (tokens per sequence)")->capture_default_str()
      ->check(int_range(1, 1048576));
  app.add_option("--window", c.model.window, "local: attention window")->capture_default_str()
      ->check(int_range(1, 1048576));
  app.add_option("--batch", c.batch, "Parallel streams per step")->capture_default_str()->check(int_range(1, 65536));
  app.add_option("--tokens", c.tokens, "Training-token budget (steps = tokens / (batch * seq))")->capture_default_str()
      ->check(int_range(1, 1000000000000));
  app.add_option("--steps", c.steps, "Optimizer steps (overrides --tokens)")->capture_default_str()
      ->check(int_range(0, 1000000000));
  app.add_option("--lr", c.lr, "Peak AdamW learning rate")->capture_default_str()->check(real_range(0, 10));
  app.add_option("--min-lr", c.min_lr, "Learning rate at the end of the cosine decay")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--warmup", c.warmup, "Linear warmup steps")->capture_default_str()->check(int_range(0, 1000000000));
  app.add_option("--weight-decay", c.weight_decay, "AdamW weight decay (matrices and embeddings)")->capture_default_str()
      ->check(real_range(0, 10));
  app.add_option("--clip", c.clip, "Gradient-norm clip")->capture_default_str()->check(real_range(0, 1e9, true));
  app.add_option("--dropout", c.model.dropout, "Dropout")->capture_default_str()->check(real_range(0, 1));
  app.add_option("--mem-channels", c.model.memory.channels, "Memory channels C")->capture_default_str()
      ->check(int_range(1, 4096));
  app.add_option("--mem-grid", c.model.memory.D, "Memory grid size (D = H = W)")->capture_default_str()
      ->check(int_range(1, 256))
      ->each([&c](const std::string&) { c.model.memory.H = c.model.memory.W = c.model.memory.D; });
  app.add_option("--chunk", c.model.memory.chunk, "Tokens per memory step K")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--eval-batch", c.eval_batch, "Parallel streams for the perplexity evaluation")->capture_default_str()
      ->check(int_range(1, 65536));
  app.add_option("--seed", c.seed, "Seed")->capture_default_str()->check(kNonNegative);
  app.add_option("--device", c.device, "Train on cpu, cuda or cuda:<index>")->capture_default_str();
  add_run_options(app, a.threads, a.name, a.data_dir, "brown-date-time",
                  "The unpacked corpus (fetch it with bash tools/fetch_brown.sh)");
  add_checkpoint_options(app, c,
                         "Continue each method from its checkpoint under runs/<name>/<method>/ (written with "
                         "--checkpoint-every or --resume)");
  add_debug_options(app, a.debug);
  add_distributed_option(app, a.distributed);
  return parse_and_run(app, argc, argv,
                       [&] { return run_training("train brown", a.distributed, a.debug, [&] { return run(a); }); });
}

}  // namespace tmem::tools
