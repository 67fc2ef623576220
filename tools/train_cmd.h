// `tmem train <task>`: trains the diagnostic models side by side and prints
// the results table.
#pragma once
#include <CLI/CLI.hpp>

namespace tmem::tools {

/// Adds the `train` subcommand to app; returns the function to run after
/// parsing. argv is pre-scanned for --config so its values act as defaults
/// that explicit flags override.
std::function<int()> add_train_command(CLI::App& app, int argc, char** argv);

/// Adds the `ablate` subcommand: the ablations of DESIGN.md 5 on coord-binding
/// (W=20, s=0.05): Gaussian vs hard write, shared vs separate coordinate
/// heads, factorized vs pointwise-only update, grids 4^3/6^3/8^3, chunks 1/2/4.
std::function<int()> add_ablate_command(CLI::App& app);

}  // namespace tmem::tools
