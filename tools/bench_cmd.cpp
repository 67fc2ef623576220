// `tmem bench` (tools/bench_cmd.h). Areas, each a program of bench/ and, where
// PyTorch has the same computation, a peer script of bench/peer/:
//   gemm     bench_gemm: tmem cpu::gemm vs OpenBLAS cblas_sgemm, once as the
//            environment configures OpenBLAS (OPENBLAS_CORETYPE=Haswell on
//            these machines) and once with its AVX-512 kernels
//   ops      bench_memory: convlstm3d_cell, grid_sample, gaussian_splat,
//            selective_scan and fused attention forward+backward vs
//            cell_peer.py, grid_splat_peer.py, scan_peer.py and
//            attention_peer.py
//   scaling  bench_memory: one Tensor Memory layer vs grid size and chunk
//   models   bench_memory: coord-binding training steps vs coord_peer.py
//   lm       bench_lm: transformer LM training steps vs lm_peer.py
// Ratios are peer time / tmem time ("tmem faster by"; for GEMM the
// throughput ratio tmem / OpenBLAS).
#include "tmem/tools/bench_cmd.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tmem/core/error.h"
#include "tmem/core/file_io.h"
#include "tmem/tools/progress.h"

namespace tmem::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BenchOptions {
  bool quick = false;
  int threads = 2;
  bool peers = true;
  bool no_append = false;
  std::string results;  // markdown file the table is appended to ("" = none)
  std::vector<std::string> areas = {"gemm", "ops", "scaling", "models", "lm"};
};

/// One timing: milliseconds per iteration and the benchmark's counters.
struct Measure {
  double ms = 0;
  std::map<std::string, double> counters;
};
/// Figures by benchmark name, in the order the program ran them.
class Measures {
 public:
  Measure& operator[](const std::string& name) {
    for (auto& [k, v] : items_)
      if (k == name) return v;
    return items_.emplace_back(name, Measure{}).second;
  }
  const Measure* find(const std::string& name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, Measure>> items_;
};

/// One table row: a tmem figure and, when there is one, its peer's.
struct Row {
  std::string area, name;
  std::optional<double> tmem_ms, peer_ms;
  std::string peer;    // who the peer is ("PyTorch 1.13", "OpenBLAS AVX-512")
  double target = 0;   // the ratio the issue asks for (0: none)
  std::string note;    // counters worth printing (GFLOP/s, peak fraction ...)
};

std::string time_str(double ms) {
  if (ms < 1) return fmt::format("{:.1f} us", ms * 1e3);
  if (ms < 100) return fmt::format("{:.2f} ms", ms);
  return fmt::format("{:.0f} ms", ms);
}

// The targets of the speed issue (ratio peer / tmem; GEMM: against
// OpenBLAS's AVX-512 kernels, the machine's fastest BLAS).
double target_of(const std::string& area, const std::string& name, const std::string& peer) {
  if (area == "gemm") return peer == "OpenBLAS AVX-512" ? 0.95 : 0;
  if (name.starts_with("convlstm3d_cell/forward_backward")) return 30;
  if (name.starts_with("grid_sample") || name.starts_with("gaussian_splat")) return 3;
  if (name.starts_with("attention/")) return 2;
  if (name == "coord_binding_step/tensor") return 30;
  if (name == "coord_binding_step/base") return 1.5;
  if (name.starts_with("lm_step") && name.ends_with("seq:256")) return 1.6;
  return 0;
}

// The suite's state: where the programs are, what ran, the rows so far.
class Suite {
 public:
  explicit Suite(BenchOptions o) : opt_(std::move(o)) {}

  int run() {
    setup_environment();
    const auto t0 = std::chrono::steady_clock::now();
    peers_ok_ = opt_.peers && torch_available();
    for (const std::string& area : opt_.areas) {
      fmt::print("\n== {} ==\n", area);
      std::fflush(stdout);
      if (area == "gemm") gemm();
      else if (area == "ops") ops();
      else if (area == "scaling") scaling();
      else if (area == "models") models();
      else if (area == "lm") lm();
      else
        throw ValueError("tmem bench: unknown area \"" + printable(area) +
                         "\" (areas: gemm, ops, scaling, models, lm)");
    }
    const double minutes =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60;
    const std::string table = markdown(minutes);
    fmt::print("\n{}", table);
    if (!opt_.results.empty() && !opt_.no_append) {
      append_file_atomic(opt_.results, "\n" + table);
      fmt::print("appended to {}\n", opt_.results);
    }
    return 0;
  }

 private:
  // Children inherit OMP_NUM_THREADS; without a wait policy of the user's,
  // OpenMP threads spin briefly (GOMP_SPINCOUNT) and then sleep, for tmem
  // and the peers alike (spinning without limit takes the core from a busy
  // thread when the machine is shared; sleeping at once costs a wake-up per
  // parallel region).
  void setup_environment() {
    setenv("OMP_NUM_THREADS", std::to_string(opt_.threads).c_str(), 1);
    if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
      setenv("GOMP_SPINCOUNT", "10000", 1);
  }

  static std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v ? v : fallback;
  }

  // Runs cmd, echoing its output as it comes; returns the output.
  // Throws Error naming the command when it cannot start or fails.
  std::string run_command(const std::string& cmd) {
    commands_.push_back(cmd);
    fmt::print("$ {}\n", cmd);
    std::fflush(stdout);
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) throw Error("tmem bench: cannot run: " + cmd);
    std::string out;
    char line[4096];
    while (std::fgets(line, sizeof line, p)) {
      out += line;
      std::fputs("  ", stdout);
      std::fputs(line, stdout);
      std::fflush(stdout);
    }
    const int status = pclose(p);
    if (status != 0)
      throw Error("tmem bench: command failed (exit status " +
                  std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) + "): " + cmd);
    return out;
  }

  bool torch_available() {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0) return true;
    fmt::print("PyTorch peers skipped: /usr/bin/python3 cannot import torch "
               "(TMEM_SETUP_TORCH=1 bash tools/setup.sh installs python3-torch)\n");
    return false;
  }

  // A bench/ program, or nullopt (with a message) when it was not built.
  std::optional<std::string> program(const std::string& name) {
    const fs::path p = fs::path(TMEM_BENCH_BIN_DIR) / name;
    if (fs::exists(p)) return p.string();
    fmt::print("skipped: {} was not built (bench/ needs libbenchmark-dev)\n", p.string());
    return std::nullopt;
  }

  // Runs a Google Benchmark program; returns its figures keyed by run name
  // without the "BM_" prefix and the "/iterations:N", "/real_time" and
  // "/manual_time" suffixes.
  Measures gbench(const std::string& prog, const std::string& filter,
                  const std::string& env_prefix = "") {
    const fs::path out = fs::temp_directory_path() /
                         ("tmem_bench_" + std::to_string(getpid()) + ".json");
    std::string cmd = env_prefix + prog + " --benchmark_filter='" + filter + "'" +
                      " --benchmark_out=" + out.string() + " --benchmark_out_format=json";
    cmd += opt_.quick ? " --benchmark_min_time=0.05 --benchmark_min_warmup_time=0.05"
                      : " --benchmark_min_warmup_time=0.2 --benchmark_repetitions=3"
                        " --benchmark_report_aggregates_only=true";
    run_command(cmd);
    std::ifstream f(out);
    if (!f || f.peek() == std::ifstream::traits_type::eof())
      throw Error("tmem bench: " + prog + " wrote no results for the filter '" + filter + "'");
    const json j = parse_json(std::string(std::istreambuf_iterator<char>(f), {}), "tmem bench: " + out.string());
    f.close();
    fs::remove(out);
    Measures m;
    for (const json& b : j.at("benchmarks")) {
      const bool aggregate = b.value("run_type", "") == "aggregate";
      if (aggregate && b.value("aggregate_name", "") != "median") continue;
      std::string name = b.at("run_name").get<std::string>();
      if (name.starts_with("BM_")) name = name.substr(3);
      for (const char* suffix : {"/real_time", "/manual_time"})
        if (name.ends_with(suffix)) name.resize(name.size() - std::string(suffix).size());
      if (const size_t it = name.find("/iterations:"); it != std::string::npos) name.resize(it);
      const std::string unit = b.at("time_unit").get<std::string>();
      const double scale = unit == "ns" ? 1e-6 : unit == "us" ? 1e-3 : unit == "ms" ? 1 : 1e3;
      Measure& r = m[name];
      r.ms = b.at("real_time").get<double>() * scale;
      for (const auto& [k, v] : b.items())
        if (v.is_number() && k != "real_time" && k != "cpu_time" && k != "iterations" &&
            k != "repetitions" && k != "repetition_index" && k != "threads" &&
            k != "family_index" && k != "per_family_instance_index")
          r.counters[k] = v.get<double>();
    }
    return m;
  }

  // Runs a peer script; returns the figures of its `RESULT {"name", "ms"}` lines.
  Measures peer(const std::string& script, const std::string& args) {
    if (!peers_ok_) return {};
    const std::string cmd = "/usr/bin/python3 " + (fs::path(TMEM_SOURCE_DIR) / "bench/peer" / script).string() +
                            " --threads " + std::to_string(opt_.threads) +
                            (opt_.quick ? " --quick" : "") + (args.empty() ? "" : " " + args);
    std::istringstream out(run_command(cmd));
    Measures m;
    for (std::string line; std::getline(out, line);)
      if (line.starts_with("RESULT ")) {
        const json j = parse_json(std::string_view(line).substr(7), "tmem bench: " + script + " output");
        m[j.at("name").get<std::string>()].ms = j.at("ms").get<double>();
      }
    return m;
  }

  // Rows for every tmem figure, each with the same-named peer figure if any.
  void add_rows(const std::string& area, const Measures& tmem, const Measures& peers,
                const std::string& peer_name, const std::vector<std::string>& notes) {
    for (const auto& [name, t] : tmem) {
      Row r{area, name, t.ms, std::nullopt, peer_name, target_of(area, name, peer_name), ""};
      if (const Measure* p = peers.find(name)) r.peer_ms = p->ms;
      for (const std::string& k : notes)
        if (auto c = t.counters.find(k); c != t.counters.end())
          r.note += (r.note.empty() ? "" : ", ") + k + " " +
                    (c->second < 10 ? fmt::format("{:.3g}", c->second) : fmt::format("{:.0f}", c->second));
      rows_.push_back(r);
    }
  }

  void gemm() {
    auto prog = program("bench_gemm");
    if (!prog) return;
    const std::string threads = "threads:" + std::to_string(opt_.threads) + "(/|$)";
    const Measures as_configured = gbench(*prog, threads);
    const Measures avx512 = gbench(*prog, "openblas.*" + threads,
                                   "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ");
    Measures tmem, blas, blas512;
    for (const auto& [name, m] : as_configured) {
      const std::string shape = name.substr(name.find('/') + 1);
      (name.starts_with("tmem") ? tmem : blas)[shape] = m;
    }
    for (const auto& [name, m] : avx512) blas512[name.substr(name.find('/') + 1)] = m;
    add_rows("gemm", tmem, blas,
             "OpenBLAS (OPENBLAS_CORETYPE=" + env_or("OPENBLAS_CORETYPE", "unset") + ")",
             {"GFLOP/s", "peak_frac"});
    add_rows("gemm", tmem, blas512, "OpenBLAS AVX-512", {});
  }

  void ops() {
    auto prog = program("bench_memory");
    if (!prog) return;
    const Measures tmem = gbench(*prog, "convlstm3d_cell|grid_sample|gaussian_splat|selective_scan|attention");
    Measures peers = peer("cell_peer.py", "");
    for (const char* script : {"grid_splat_peer.py", "scan_peer.py", "attention_peer.py"})
      for (auto& [k, v] : peer(script, "")) peers[k] = v;
    add_rows("ops", tmem, peers, "PyTorch " + torch_version(), {"GFLOP/s", "peak_frac", "peak_MiB"});
  }

  void scaling() {
    auto prog = program("bench_memory");
    if (!prog) return;
    add_rows("scaling", gbench(*prog, "memory_layer"), {}, "", {"ms_per_memory_step"});
    if (auto lm = program("bench_lm"))
      add_rows("scaling", gbench(*lm, "lm_step/seq:(128|512)(/|$)"), {}, "", {"tokens/s"});
  }

  void models() {
    auto prog = program("bench_memory");
    if (!prog) return;
    const Measures tmem = gbench(*prog, "coord_binding_step");
    Measures peers;
    for (const char* method : {"tensor", "base"})
      for (auto& [k, v] : peer("coord_peer.py", std::string("--time --method ") + method)) peers[k] = v;
    add_rows("models", tmem, peers, "PyTorch " + torch_version(), {"min_for_2000_steps"});
  }

  void lm() {
    auto prog = program("bench_lm");
    if (!prog) return;
    add_rows("lm", gbench(*prog, "lm_step/seq:256(/|$)"), peer("lm_peer.py", ""),
             "PyTorch " + torch_version(), {"tokens/s"});
  }

  std::string torch_version() {
    if (!peers_ok_) return "";
    if (torch_version_.empty()) {
      FILE* p = popen("/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null", "r");
      char buf[64] = {};
      if (p && std::fgets(buf, sizeof buf, p)) torch_version_ = buf;
      if (p) pclose(p);
      while (!torch_version_.empty() && torch_version_.back() == '\n') torch_version_.pop_back();
    }
    return torch_version_;
  }

  static std::string cpu_model() {
    FILE* p = popen("lscpu 2>/dev/null", "r");
    std::string model = "unknown CPU";
    char line[512];
    while (p && std::fgets(line, sizeof line, p)) {
      std::string s = line;
      if (s.starts_with("Model name:")) {
        s = s.substr(s.find(':') + 1);
        model = s.substr(s.find_first_not_of(' '));
        while (!model.empty() && model.back() == '\n') model.pop_back();
      }
    }
    if (p) pclose(p);
    return model + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores";
  }

  std::string markdown(double minutes) {
    std::ostringstream o;
    char when[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    o << "## `tmem bench" << (opt_.quick ? " --quick" : "") << "`, " << when << "\n\n"
      << "Machine: " << cpu_model() << "; threads " << opt_.threads
      << "; OMP_WAIT_POLICY=" << env_or("OMP_WAIT_POLICY", "unset")
      << ", GOMP_SPINCOUNT=" << env_or("GOMP_SPINCOUNT", "unset") << "; "
      << (opt_.quick ? "one run of each benchmark" : "medians of 3 repetitions")
      << "; the suite took " << fmt::format("{:.1f}", minutes) << " min. Commands:\n\n```\n";
    for (const std::string& c : commands_) o << c << "\n";
    o << "```\n\n| area | benchmark | tmem | peer | peer time | peer / tmem | target | counters |\n"
      << "|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows_) {
      std::string ratio = "", target = r.target > 0 ? fmt::format("{:.2g}x", r.target) : "";
      if (r.tmem_ms && r.peer_ms) {
        const double x = *r.peer_ms / *r.tmem_ms;
        ratio = x < 10 ? fmt::format("{:.2f}x", x) : fmt::format("{:.1f}x", x);
        if (r.target > 0) target += x >= r.target ? " (met)" : " (missed)";
      }
      o << "| " << r.area << " | " << r.name << " | " << (r.tmem_ms ? time_str(*r.tmem_ms) : "")
        << " | " << (r.peer_ms ? r.peer : "") << " | " << (r.peer_ms ? time_str(*r.peer_ms) : "")
        << " | " << ratio << " | " << target << " | " << r.note << " |\n";
    }
    return o.str();
  }

  BenchOptions opt_;
  bool peers_ok_ = false;
  std::string torch_version_;
  std::vector<std::string> commands_;
  std::vector<Row> rows_;
};

}  // namespace

std::function<int()> add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand(
      "bench", "Run the benchmark suite next to its PyTorch/OpenBLAS peers and print the ratios");
  cmd->add_flag("--quick", opt->quick,
                "One short run per benchmark (under 5 minutes on idle cores, about 9 on 2 busy ones); appends only with --results");
  cmd->add_option("--threads", opt->threads, "Threads for tmem and the peers")
      ->capture_default_str()
      ->check(int_range(1, 1024));
  cmd->add_option("--areas", opt->areas, "Areas to run: gemm, ops, scaling, models, lm")
      ->delimiter(',')
      ->check(CLI::IsMember({"gemm", "ops", "scaling", "models", "lm"}))
      ->capture_default_str();
  cmd->add_flag("!--no-peers", opt->peers, "Skip the PyTorch peer scripts");
  auto* results = cmd->add_option("--results", opt->results,
                                  "Markdown file the table is appended to (default: bench/RESULTS.md unless --quick)");
  // --no-append would silently drop a --results file asked for.
  cmd->add_flag("--no-append", opt->no_append, "Print the table only")->excludes(results);
  return [cmd, opt]() -> int {
    if (!*cmd) return -1;
    if (opt->results.empty() && !opt->quick)
      opt->results = (fs::path(TMEM_SOURCE_DIR) / "bench/RESULTS.md").string();
    // Before the benchmarks run, so their table is not lost at the end.
    if (!opt->results.empty() && !opt->no_append) {
      std::error_code ec;
      if (fs::exists(opt->results, ec) && !fs::is_regular_file(opt->results, ec))
        throw IOError("--results: \"" + printable(opt->results) +
                      "\" is not a regular file; expected the markdown file the table is appended to");
      const fs::path dir = fs::path(opt->results).parent_path();
      ensure_writable_dir(dir.empty() ? "." : dir.string());
    }
    return Suite(*opt).run();
  };
}

}  // namespace tmem::tools
