#include "tmem/tools/stream_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tmem/core/device_backend.h"
#include "tmem/core/parallel.h"
#include "tmem/models/lm.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

namespace {

using nlohmann::json;

struct StreamArgs {
  std::vector<std::string> methods{"tensor", "kv-cache"};
  int64_t tokens = 1'000'000;
  std::vector<int64_t> report_at{1'000, 10'000, 100'000, 1'000'000};
  double max_minutes = 20;
  int64_t vocab = 16'383;  // Brown's |V| (Bengio et al. 2003)
  models::LMConfig model;
  std::string device = "cpu";
  uint64_t seed = 42;
  int threads = 0;
  std::string name;
  DebugArgs debug;
};

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// The LM of a stream method: an LM method, or kv-cache (xl keeping every
// earlier token: a transformer with a growing KV cache).
models::LMConfig stream_model(const StreamArgs& a, const std::string& method) {
  models::LMConfig c = a.model;
  c.vocab = a.vocab;
  c.dropout = 0.0;
  if (method == "kv-cache") {
    c.method = models::LMMethod::xl;
    c.cache_len = -1;
    return c;
  }
  try {
    c.method = models::parse_lm_method(method);
  } catch (const ValueError&) {
    throw ValueError("stream: unknown method \"" + printable(method) +
                     "\" (expected kv-cache or a language-model method: base, local, linear, xl, tensor, leaky)");
  }
  return c;
}

// Every check a stream can fail before it runs: the device, the methods
// (known, no repeats), the report points and the time limit, and each
// method's model (built once and dropped), so a bad option never leaves a
// run directory or fails after an earlier method streamed.
void check_args(const StreamArgs& a, Device device) {
  if (!device.is_cpu()) device_backend(device, "stream");
  check<ValueError>(!a.methods.empty(), "stream: --method names no method");
  for (size_t i = 0; i < a.methods.size(); ++i)
    check<ValueError>(std::find(a.methods.begin(), a.methods.begin() + i, a.methods[i]) == a.methods.begin() + i,
                      "stream: --method names \"", a.methods[i], "\" twice");
  for (int64_t m : a.report_at)
    check<ValueError>(m >= 1, "stream: --report-at expects token counts >= 1, but got ", m);
  check<ValueError>(a.max_minutes > 0, "stream: --max-minutes expects a positive number, but got ", a.max_minutes);
  for (const std::string& method : a.methods) {
    Generator gen(a.seed);
    models::TransformerLM probe(stream_model(a, method), gen);
  }
}

int run(const StreamArgs& a) {
  if (a.threads > 0) set_num_threads(a.threads);
  const Device device = parse_device(a.device);
  check_args(a, device);
  RunRecorder rec(a.name.empty() ? timestamped_name("stream") : a.name, "stream",
                  {{"methods", a.methods}, {"tokens", a.tokens}, {"report_at", a.report_at},
                   {"max_minutes", a.max_minutes}, {"vocab", a.vocab}, {"dim", a.model.dim},
                   {"layers", a.model.layers}, {"heads", a.model.heads}, {"seq", a.model.seq}, {"device", a.device},
                   {"seed", a.seed}});
  const std::string& root = rec.dir();
  fmt::print("streaming {} tokens (one stream, segments of {}, random ids over V = {}, seed {}) on {}, "
             "{} threads -> {}\n",
             a.tokens, a.model.seq,
             a.vocab, a.seed, device.str(), get_num_threads(), root);
  json out = json::array();
  std::vector<std::string> table;
  for (const std::string& method : a.methods) {
    const models::LMConfig cfg = stream_model(a, method);
    Generator gen(a.seed);
    models::TransformerLM model(cfg, gen);
    model.to(device);
    std::vector<int64_t> marks;
    for (int64_t m : a.report_at)
      if (m <= a.tokens) marks.push_back(m);
    std::sort(marks.begin(), marks.end());
    if (marks.empty() || marks.back() != a.tokens) marks.push_back(a.tokens);
    size_t next = 0;
    json points = json::array();
    bool stopped = false;
    const bool tty = isatty(fileno(stdout));
    auto record = [&](const models::StreamReport& r) {
      points.push_back({{"tokens", r.tokens}, {"seconds", r.seconds}, {"state_bytes", r.state_bytes},
                        {"bytes_in_use", r.bytes_in_use}, {"peak_bytes", r.peak_bytes}});
      table.push_back(fmt::format("| {} | {} | {:.2f} | {:.1f} | {:.1f} | {:.0f} |", method, r.tokens,
                                  mib(r.state_bytes), mib(r.bytes_in_use), mib(r.peak_bytes),
                                  r.tokens / std::max(r.seconds, 1e-9)));
    };
    models::stream_lm(model, a.tokens, a.seed, [&](const models::StreamReport& r) {
      print_progress_line(method, "tokens", r.tokens, a.tokens,
                          "state " + std::to_string(static_cast<int64_t>(mib(r.state_bytes))) + " MiB", r.seconds,
                          tty, 20);
      bool recorded = false;
      for (; next < marks.size() && r.tokens >= marks[next]; ++next) recorded = true;
      if (recorded) record(r);
      if (r.seconds > a.max_minutes * 60 && r.tokens < a.tokens) {
        stopped = true;
        if (!recorded) record(r);  // the last point reached
        fmt::print("\n{}: stopped after {} tokens: over --max-minutes {:g}\n", method, r.tokens, a.max_minutes);
        return false;
      }
      return true;
    });
    PlotSeries curve{method, {}, {}};
    for (const json& p : points) {
      curve.x.push_back(p.at("tokens").get<double>());
      curve.y.push_back(mib(p.at("state_bytes").get<double>()));
    }
    rec.add_curve("state", {"Streaming: state held against tokens streamed", "tokens", "state (MiB)"}, curve);
    out.push_back({{"method", method}, {"config", {{"lm_method", cfg.method}, {"cache_len", cfg.cache_len},
                                                    {"dim", cfg.dim}, {"layers", cfg.layers}, {"heads", cfg.heads},
                                                    {"seq", cfg.seq}, {"vocab", cfg.vocab}}},
                   {"parameters", model.num_parameters()}, {"points", points}, {"stopped_early", stopped}});
  }
  fmt::print("\n| method | tokens | state MiB | tensors held MiB | peak MiB | tokens/s |\n"
             "| --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& l : table) fmt::print("{}\n", l);
  rec.write_json("results.json", {{"command", "stream"}, {"device", device.str()}, {"tokens", a.tokens},
                                  {"seed", a.seed}, {"threads", get_num_threads()}, {"methods", out}});
  rec.draw();
  fmt::print("results written to {}/results.json, the state curves to {}/state.svg\n", root, root);
  return 0;
}

}  // namespace

std::function<int()> add_stream_command(CLI::App& app) {
  auto a = std::make_shared<StreamArgs>();
  CLI::App* s = app.add_subcommand(
      "stream", "Stream a language model over a long token stream and report the memory it holds");
  s->add_option("--method", a->methods,
                "Methods, comma-separated: tensor, kv-cache (xl keeping every token), or any LM method")
      ->delimiter(',')
      ->capture_default_str();
  s->add_option("--tokens", a->tokens, "Tokens to stream")->capture_default_str()->check(int_range(1, 1000000000000));
  s->add_option("--report-at", a->report_at, "Token counts to report, comma-separated (those past --tokens are dropped)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(int_range(1, 1000000000000));
  s->add_option("--max-minutes", a->max_minutes, "Stop a method's stream after this long (a growing cache slows)")
      ->capture_default_str()
      ->check(real_range(0, 1e6, true));
  s->add_option("--vocab", a->vocab, "Vocabulary size V")->capture_default_str()->check(int_range(1, 16777216));
  s->add_option("--dim", a->model.dim, "Model width C")->capture_default_str()->check(int_range(1, 65536));
  s->add_option("--layers", a->model.layers, "Layers")->capture_default_str()->check(int_range(1, 1024));
  s->add_option("--heads", a->model.heads, "Attention heads")->capture_default_str()->check(int_range(1, 1024));
  s->add_option("--seq", a->model.seq, "Segment length T")->capture_default_str()->check(int_range(1, 1048576));
  s->add_option("--chunk", a->model.memory.chunk, "tensor: tokens per memory step K (at most --seq)")
      ->capture_default_str()
      ->check(int_range(1, 1048576));
  s->add_option("--device", a->device, "cpu, cuda or cuda:<index>")->capture_default_str();
  s->add_option("--seed", a->seed, "Seed of the weights and the token ids")->capture_default_str()->check(kNonNegative);
  s->add_option("--threads", a->threads, "OpenMP threads (default: all cores)")->check(int_range(0, kMaxThreads));
  s->add_option("--name", a->name, "Run name: results go to runs/<name>/ (default: stream-date-time)");
  add_debug_options(*s, a->debug, false);
  return [s, a]() -> int {
    if (!*s) return -1;
    return run_with_debug(a->debug, [&] { return run(*a); });
  };
}

}  // namespace tmem::tools
