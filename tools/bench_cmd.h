// `tmem bench`: runs the benchmark suite side by side with its PyTorch peers
// and prints (and appends to bench/RESULTS.md) one table of ratios.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace tmem::tools {

/// Adds the `bench` subcommand to app; returns the function to run after
/// parsing (it returns -1 when the subcommand was not given). The suite runs
/// the programs of bench/ (Google Benchmark, JSON output) and the scripts of
/// bench/peer/ (Debian's python3-torch) as child processes with the same
/// thread count, so every ratio comes from one run on one machine state.
std::function<int()> add_bench_command(CLI::App& app);

}  // namespace tmem::tools
