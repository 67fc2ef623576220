// `tmem frontier <task>`: the accuracy-vs-state-size frontier of the
// segment-recurrent methods on mqar, map-recall or coord-recall (docs/DESIGN.md §9).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace tmem::tools {

/// Adds the `frontier` subcommand to app; returns the function to run after
/// parsing (-1 when the subcommand was not given).
std::function<int()> add_frontier_command(CLI::App& app);

}  // namespace tmem::tools
