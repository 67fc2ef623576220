// `tmem train <task>`: trains the diagnostic models side by side and prints
// the results table.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tmem/models/trainer.h"
#include "tmem/tools/progress.h"
#include "tmem/tools/run_recorder.h"

namespace tmem::tools {

/// Adds the `train` subcommand to app; returns the function to run after
/// parsing. argv is pre-scanned for --config so its values act as defaults
/// that explicit flags override.
std::function<int()> add_train_command(CLI::App& app, int argc, char** argv);

/// Adds the `ablate` subcommand: the ablations of docs/DESIGN.md §8 on coord-binding
/// (W=20, s=0.05): Gaussian vs hard write, shared vs separate coordinate
/// heads, factorized vs pointwise-only update, grids 4^3/6^3/8^3, chunks 1/2/4.
std::function<int()> add_ablate_command(CLI::App& app);

/// Sets the task parameter `name` (W, T, L, P, G or length) of c to v.
void set_sweep(models::TrainConfig& c, const std::string& name, int64_t v);

/// The result.json of c.run_dir with a config, an eval accuracy in [0, 1]
/// and, where present, the other keys run_or_reuse writes in their types and
/// ranges (accuracies in [0, 1], counts, numeric gates, a training curve of
/// [step, accuracy] pairs), or nullopt: none yet, or
/// torn, edited or not a regular file (a warning names the file and ends
/// with `fate`, "the cell runs again" or "left out").
std::optional<nlohmann::json> cell_result(const models::TrainConfig& c, const std::string& fate);

/// How the config of a result.json differs from c's, leaving out the key
/// `except` ("" when they agree; models::config_differences).
std::string result_differences(const nlohmann::json& result, const models::TrainConfig& c,
                               const std::string& except = "");

/// Trains c as the cell `cell_dir` of the run `rec` (c.run_dir becomes
/// rec.path(cell_dir)), printing progress and a result line under `label`,
/// and writes its result.json and losses.json and draws its loss and
/// accuracy curves into the run's plots; with c.resume, a cell that an
/// earlier invocation finished with the same config is reused instead, and
/// one finished with another config (other than a longer --steps extended
/// from its checkpoint) is an error (ValueError naming the keys). `id`
/// names the run in the record: its first key's value ({"cell": ...} or
/// {"variant": ...}) is the run's name; its other keys are copied into the
/// record. With `eta` (the run's parts, this cell current), the progress
/// line's ETA covers the rest of the run and the cell is finished in it;
/// without, the ETA covers this cell. Returns the result.json record.
nlohmann::json run_or_reuse(RunRecorder& rec, const std::string& cell_dir, models::TrainConfig c,
                            const std::string& label, const nlohmann::json& id, bool tty, RunEta* eta = nullptr);

}  // namespace tmem::tools
