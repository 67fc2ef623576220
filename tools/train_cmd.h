// `tmem train <task>`: trains the diagnostic models side by side and prints
// the results table.
#pragma once
#include <CLI/CLI.hpp>

namespace tmem::tools {

/// Adds the `train` subcommand to app; returns the function to run after
/// parsing. argv is pre-scanned for --config so its values act as defaults
/// that explicit flags override.
std::function<int()> add_train_command(CLI::App& app, int argc, char** argv);

}  // namespace tmem::tools
