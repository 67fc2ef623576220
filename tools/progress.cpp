#include "tools/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "core/error.h"

namespace tmem::tools {

std::string fmt_time(double s) {
  char buf[32];
  const int t = static_cast<int>(std::lround(std::max(s, 0.0)));
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

std::string progress_bar(int64_t done, int64_t total, int width) {
  const int filled =
      total > 0 ? static_cast<int>(std::clamp<int64_t>(width * done / total, 0, width)) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  return bar;
}

std::vector<double> moving_average(const std::vector<double>& v, size_t w) {
  w = std::max<size_t>(w, 1);
  std::vector<double> out(v.size());
  double acc = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    acc += v[i];
    if (i >= w) acc -= v[i - w];
    out[i] = acc / static_cast<double>(std::min(i + 1, w));
  }
  return out;
}

void print_progress_line(const std::string& label, const std::string& unit, int64_t done, int64_t total,
                         const std::string& fields, double seconds, bool tty, int64_t lines) {
  const bool last = done == total;
  const int64_t every = std::max<int64_t>(total / std::max<int64_t>(lines, 1), 1);
  if (!tty && !last && done % every != 0) return;
  const double eta = done > 0 ? seconds / static_cast<double>(done) * static_cast<double>(total - done) : 0;
  std::printf("%s%s [%s] %s %lld/%lld  %s  ETA %s%s", tty ? "\r" : "", label.c_str(), progress_bar(done, total).c_str(),
              unit.c_str(), static_cast<long long>(done), static_cast<long long>(total), fields.c_str(),
              fmt_time(eta).c_str(), tty && !last ? "" : "\n");
  std::fflush(stdout);
}

std::string run_dir(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos)
    throw ValueError("--name: expected a plain directory name under runs/ (no '/', not '.' or '..'), but got \"" +
                     name + "\"");
  return "runs/" + name;
}

const CLI::Validator kPositive(
    [](const std::string& v) { return std::stoll(v) >= 1 ? std::string() : "must be at least 1, got " + v; },
    "INT >= 1");
const CLI::Validator kNonNegative(
    [](const std::string& v) { return std::stoll(v) >= 0 ? std::string() : "must be at least 0, got " + v; },
    "INT >= 0");

std::string timestamped_name(const std::string& prefix) {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&now));
  return prefix + "-" + buf;
}

void add_run_options(CLI::App& app, int& threads, std::string& name, std::string& data_dir,
                     const std::string& name_default, const std::string& data_help) {
  app.add_option("--threads", threads, "OpenMP threads (default: all cores)");
  app.add_option("--name", name, "Run name: results go to runs/<name>/ (default: " + name_default + ")");
  app.add_option("--data-dir", data_dir, data_help)->capture_default_str();
}

int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmem: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace tmem::tools
