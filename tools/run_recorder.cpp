#include "tmem/tools/run_recorder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tmem/core/error.h"
#include "tmem/core/file_io.h"
#include "tmem/dist/dist.h"
#include "tmem/tools/progress.h"

namespace tmem::tools {

namespace {

// Refuses a run directory whose config.json names another command: this
// run would overwrite that run's results.json and mix its cells with them.
void check_same_command(const std::string& dir, const std::string& command) {
  const std::string earlier = recorded_command(dir);
  check<ValueError>(earlier.empty() || earlier == command, "--name: ", dir, " holds a run of `tmem ",
                    printable(earlier), "`, not of `tmem ", command, "`; give this run another --name");
}

// Refuses a run directory holding a .json or .svg entry, in it or in one of
// its cells' directories, that is not a regular file (a directory, a device,
// a link into a loop): the run would train and then fail to write its
// results over it.
void check_result_files(const std::string& dir, bool cells = true) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".json" && ext != ".svg") {
      if (cells && e.is_directory(ec) && !e.is_symlink(ec)) check_result_files(e.path().string(), false);
      continue;
    }
    const fs::file_status st = fs::status(e.path(), ec);
    check<IOError>(!ec && fs::is_regular_file(st), "run: ", e.path().string(), " is not a regular file (",
                   ec ? ec.message() : fs::is_directory(st) ? "a directory" : "a device, a FIFO or a socket",
                   "), and the run would fail to write its results over it after training; remove it");
  }
}

}  // namespace

std::string recorded_command(const std::string& dir) {
  const std::string p = dir + "/config.json";
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return "";
  const nlohmann::json j = read_json_file(p, "run");
  if (!j.is_object() || !j.contains("command") || !j["command"].is_string()) return "";
  return j["command"].get<std::string>();
}

RunRecorder::RunRecorder(const std::string& name, const std::string& command, const nlohmann::json& config)
    : dir_(run_dir(name)), writer_(dist::rank() == 0), config_({{"command", command}, {"config", config}}) {
  models::check_ranks_agree(config_, command);
  if (!writer_) return;
  check_same_command(dir_, command);
  ensure_writable_dir(dir_);
  check_result_files(dir_);
}

void RunRecorder::record_config() const {
  if (config_written_) return;
  config_written_ = true;
  write_json("config.json", config_);
}

void RunRecorder::write_json(const std::string& file, const nlohmann::json& j, int indent) const {
  if (!writer_) return;
  record_config();
  const std::string p = path(file), text = j.dump(indent) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(p).parent_path(), ec);
  if (ec) throw IOError("run: cannot make the directory of " + p + ": " + ec.message());
  write_file_atomic(p, text);
  std::ifstream in(p, std::ios::binary);
  const std::string back(std::istreambuf_iterator<char>(in), {});
  if (!in.good() && !in.eof()) throw IOError("run: cannot read back " + p);
  if (back != text)
    throw IOError("run: " + p + " reads back " + std::to_string(back.size()) + " bytes that differ from the " +
                  std::to_string(text.size()) + " written");
}

void RunRecorder::add_curve(const std::string& plot, const PlotOptions& opt, PlotSeries s) {
  auto& [options, series] = plots_[plot];
  options = opt;
  for (PlotSeries& old : series)
    if (old.label == s.label) {
      old = std::move(s);
      return;
    }
  series.push_back(std::move(s));
}

void RunRecorder::draw() const {
  if (!writer_) return;
  for (const auto& [plot, p] : plots_) write_svg_line_plot(path(plot + ".svg"), p.second, p.first);
}

void RunRecorder::place(models::CheckpointOptions& o, const std::string& sub) const {
  if (o.checkpoint_every > 0 || o.resume) o.run_dir = path(sub);
  if (!o.dump_grads.empty()) o.dump_grads = path(sub + "/" + o.dump_grads);
  if (writer_ && (!o.run_dir.empty() || !o.dump_grads.empty())) ensure_writable_dir(path(sub));
  record_config();
}

namespace {

// The differences between two configs, "key: a -> b", skipping keys in `skip` at any depth.
void config_diff(const nlohmann::json& a, const nlohmann::json& b, const std::string& at,
                 const std::set<std::string>& skip, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const std::string& k : keys) {
      if (skip.count(k)) continue;
      config_diff(a.contains(k) ? a[k] : nlohmann::json(), b.contains(k) ? b[k] : nlohmann::json(),
                  at.empty() ? k : at + "." + k, skip, out);
    }
  } else if (a != b) {
    auto shown = [](const nlohmann::json& v) { return v.is_null() ? std::string("(none)") : printable(v.dump()); };
    out.push_back(at + ": " + shown(a) + " -> " + shown(b));
  }
}

}  // namespace

void RunRecorder::check_resume(const std::vector<std::string>& may_differ) const {
  std::error_code ec;
  if (!writer_ || !std::filesystem::exists(path("config.json"), ec)) return;
  const nlohmann::json earlier = read_json_file(path("config.json"), "run");
  check<ValueError>(earlier.is_object() && earlier.contains("config") && earlier["config"].is_object(), "--resume: ",
                    path("config.json"), " is damaged (no \"config\" object in it), so what it ran is unknown; give "
                    "this run another --name, or run without --resume to replace it");
  std::vector<std::string> diff;
  config_diff(earlier["config"], config_["config"], "", {may_differ.begin(), may_differ.end()}, diff);
  check<ValueError>(diff.empty(), "--resume: ", dir_, " holds a run of another config (", fmt::format("{}", fmt::join(diff, ", ")),
                    "); give this run another --name, or run without --resume to replace it");
}

nlohmann::json RunRecorder::with_earlier(const std::string& file, const std::string& key,
                                         const std::vector<std::string>& id_keys, nlohmann::json items,
                                         bool note) const {
  const std::string p = path(file);
  std::error_code ec;
  if (!writer_ || !std::filesystem::exists(p, ec)) return items;
  nlohmann::json earlier;
  try {
    earlier = read_json_file(p, "run");
  } catch (const IOError& e) {
    if (note) fmt::print("note: the earlier run's {} entries are not kept: {}\n", key, e.what());
    return items;
  }
  auto identity = [&](const nlohmann::json& entry) {
    nlohmann::json id = nlohmann::json::array();
    for (const std::string& k : id_keys) id.push_back(entry.value(k, nlohmann::json()));
    return id;
  };
  std::set<nlohmann::json> ids;
  for (const auto& entry : items) ids.insert(identity(entry));
  const auto list = earlier.is_object() ? earlier.find(key) : earlier.end();
  if (!earlier.is_object() || list == earlier.end() || !list->is_array()) return items;
  std::vector<std::string> kept;
  size_t dropped = 0;
  for (const auto& entry : *list) {
    if (!entry.is_object() ||
        !std::all_of(id_keys.begin(), id_keys.end(), [&](const std::string& k) { return entry.contains(k); })) {
      ++dropped;
      continue;
    }
    const nlohmann::json id = identity(entry);
    if (ids.count(id)) continue;
    items.push_back(entry);
    std::string name;
    for (const auto& v : id) name += (name.empty() ? "" : " ") + printable(v.is_string() ? v.get<std::string>() : v.dump());
    kept.push_back(name);
  }
  if (note && !kept.empty())
    fmt::print("note: {} keeps the earlier run's {} that this one did not rerun ({}): {}\n", p, key, kept.size(),
               fmt::join(kept, ", "));
  if (note && dropped > 0)
    fmt::print("note: {} drops {} earlier {} entries that are not objects naming their {}\n", p, dropped, key,
               fmt::join(id_keys, " and "));
  return items;
}

PlotSeries smoothed_curve(const std::string& label, const std::vector<double>& values,
                          const std::function<double(size_t)>& x) {
  PlotSeries s{label, {}, moving_average(values, values.size() / 50)};
  for (size_t i = 0; i < values.size(); ++i) s.x.push_back(x(i));
  return s;
}

}  // namespace tmem::tools
