// The `tmem` command-line program. Subcommands:
//   tmem ops   the op table: devices, differentiable inputs, gradcheck coverage
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "ops/ops.h"

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "-" : s;
}

// Prints the op table, running each op's gradcheck cases (float64, small).
int run_ops(bool run_checks) {
  using namespace tmem;
  std::printf("%-18s %-9s %-28s %-6s %s\n", "op", "devices", "differentiable inputs", "cases",
              run_checks ? "gradcheck" : "gradcheck covered");
  int failures = 0, missing = 0;
  for (int i = 0; i < static_cast<int>(OpId::Count); ++i) {
    OpId id = static_cast<OpId>(i);
    const OpInfo* info = nullptr;
    for (const OpInfo& e : op_table())
      if (e.id == id) info = &e;
    if (!info) {
      std::printf("%-18s %-9s %-28s %-6s %s\n", std::string(op_name(id)).c_str(), "-", "-", "0",
                  "no (not implemented)");
      ++missing;
      continue;
    }
    std::string status = info->cases.empty() ? "no" : "yes";
    if (run_checks && !info->cases.empty()) {
      int passed = 0;
      for (const OpCase& c : info->cases)
        passed += gradcheck(c.fn, c.inputs(), c.eps, c.atol, c.rtol).ok ? 1 : 0;
      status = passed == static_cast<int>(info->cases.size())
                   ? "yes (pass)"
                   : "FAIL (" + std::to_string(passed) + "/" + std::to_string(info->cases.size()) + ")";
      failures += passed != static_cast<int>(info->cases.size());
    }
    std::printf("%-18s %-9s %-28s %-6zu %s\n", std::string(info->name()).c_str(),
                join(info->devices).c_str(), join(info->diff_inputs).c_str(), info->cases.size(),
                status.c_str());
  }
  std::printf("%zu ops registered, %d missing, %d failing gradcheck\n", op_table().size(), missing,
              failures);
  return failures || missing ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tmem: tape autograd, CPU/CUDA kernels and Tensor Memory models"};
  app.require_subcommand(1);
  bool run_checks = true;
  auto* ops = app.add_subcommand("ops", "Print the op table with gradcheck coverage");
  ops->add_flag("!--no-check", run_checks, "List coverage without running the gradchecks");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*ops) return run_ops(run_checks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tmem: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
