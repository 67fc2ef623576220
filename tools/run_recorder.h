// The files of one run of any command under runs/<name>/: the directory
// (checked writable before any work), config.json, every JSON the run
// leaves (written atomically and read back), and the training curves (loss
// and training metric per method or cell) drawn as SVG. In a tmem::dist job
// only rank 0 writes: on the other ranks every writing call returns at once.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/models/train_loop.h"
#include "tmem/tools/svg_plot.h"

namespace tmem::tools {

/// The command recorded in dir/config.json ("train coord-binding",
/// "frontier mqar"), or "" when there is no such file or it names none.
/// Throws IOError naming the file when it is not a regular file or not
/// JSON (read_json_file).
std::string recorded_command(const std::string& dir);

class RunRecorder {
 public:
  /// Makes runs/<name> (run_dir checks the name) writable (ensure_writable_dir).
  /// config.json {"command": command, "config": config} is written before the
  /// run's first file of its own (write_json, place, record_config), so that
  /// a run refused before any work (a --resume of another config) leaves the
  /// earlier run's config.json as it was. Throws ValueError naming --name for
  /// a bad name or a directory whose config.json is of another command (its
  /// results would be overwritten), or when the ranks of a distributed job
  /// were given other options (models::check_ranks_agree; collective);
  /// IOError naming the directory when it cannot be written or its
  /// config.json is not JSON, and naming the entry when a .json or .svg in
  /// it is not a regular file (the run would fail to write over it).
  RunRecorder(const std::string& name, const std::string& command, const nlohmann::json& config);
  /// Writes config.json when this run has not yet. Throws IOError.
  void record_config() const;
  /// runs/<name>.
  const std::string& dir() const { return dir_; }
  /// dir()/<file>.
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  /// Writes j to path(file) (its directory made when missing) atomically
  /// (write_file_atomic), indented by `indent` spaces (< 0: on one line), then
  /// reads the file back. Throws IOError naming the file when it cannot be
  /// written or reads back other bytes.
  /// config.json is recorded first (record_config).
  void write_json(const std::string& file, const nlohmann::json& j, int indent = 2) const;
  /// Adds curve s to plot `plot` (drawn as path(plot + ".svg")), replacing a
  /// curve of the same label; the plot takes the last `opt` given.
  void add_curve(const std::string& plot, const PlotOptions& opt, PlotSeries s);
  /// Writes every plot with curves (write_svg_line_plot). Throws IOError.
  void draw() const;
  /// Points a trainer's files at path(sub): its checkpoint only when
  /// o.checkpoint_every > 0 or o.resume asks for one (a real-data model's
  /// checkpoint can be large), its gradient dump o.dump_grads (a file name)
  /// there; the directory is made when either needs it, and config.json is
  /// recorded (record_config). Throws IOError.
  void place(models::CheckpointOptions& o, const std::string& sub) const;
  /// For --resume, before anything is written: throws ValueError naming
  /// --resume and the values that differ when the run directory's
  /// config.json (the run this one continues) holds another config than
  /// this run's, apart from keys named in may_differ (at any depth: the
  /// lists of cells, the step count), so that results of two configs never
  /// mix in one results.json. Throws IOError when config.json is not JSON.
  /// Does nothing on ranks other than 0.
  void check_resume(const std::vector<std::string>& may_differ) const;
  /// For a --resume that reruns fewer entries than the run it continues:
  /// items (this run's entries of path(file)[key]) followed by the entries
  /// of the earlier path(file)[key] whose identity (their values of id_keys)
  /// is not among items, so that the earlier run's results stay listed;
  /// entries that are not objects holding every id key are dropped. With
  /// `note`, prints which it kept and how many it dropped. A missing,
  /// unreadable or foreign earlier file keeps none (noted when unreadable).
  /// On ranks other than 0 it returns items.
  nlohmann::json with_earlier(const std::string& file, const std::string& key,
                              const std::vector<std::string>& id_keys, nlohmann::json items, bool note = true) const;

 private:
  std::string dir_;
  bool writer_;  // rank 0
  nlohmann::json config_;          // config.json's content
  mutable bool config_written_ = false;
  std::map<std::string, std::pair<PlotOptions, std::vector<PlotSeries>>> plots_;
};

/// A per-step series of a training run (losses, metrics) as a plot curve:
/// its moving average over values.size() / 50 steps (at least 1) against
/// x(step), step 0-based.
PlotSeries smoothed_curve(const std::string& label, const std::vector<double>& values,
                      const std::function<double(size_t)>& x);

}  // namespace tmem::tools
