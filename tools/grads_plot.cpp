#include "tmem/tools/grads_plot.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tmem/core/file_io.h"
#include "tmem/core/json_dump.h"
#include "tmem/tools/svg_plot.h"

namespace tmem::tools {

using nlohmann::json;

std::string layer_of(const std::string& name) {
  for (size_t start = 0; start < name.size();) {
    const size_t end = std::min(name.find('.', start), name.size());
    const std::string part = name.substr(start, end - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) return name.substr(0, end);
    start = end + 1;
  }
  return name.substr(0, name.find('.'));
}

namespace {

// A statistic of a tensor summary (NaN when absent).
double stat(const json& summary, const char* key) {
  return summary.contains(key) ? number_from_json(summary.at(key)) : std::numeric_limits<double>::quiet_NaN();
}

// A memory-internals panel: per memory layer, value(layer object) over the
// dumped steps (NaN, e.g. a diverged gate or a layer the probe did not see,
// leaves a gap). Throws IOError for a "layer" that is not an integer >= 0.
PlotPanel memory_panel(const std::vector<json>& steps, const std::string& title, const std::string& y_label,
                       double (*value)(const json&)) {
  std::map<int64_t, PlotSeries> layers;
  for (const json& s : steps) {
    if (!s.contains("memory")) continue;
    for (const json& m : s.at("memory")) {
      const json& layer = m.at("layer");
      check<IOError>(layer.is_number_integer() && layer.get<int64_t>() >= 0, "grads plot: step ",
                     s.at("step").get<int64_t>(), ": a memory entry's \"layer\" is ", printable(layer.dump()),
                     ", not an integer >= 0");
      const int64_t l = layer.get<int64_t>();
      PlotSeries& series = layers[l];
      series.label = "layer " + std::to_string(l);
      series.x.push_back(static_cast<double>(s.at("step").get<int64_t>()));
      series.y.push_back(value(m));
    }
  }
  PlotPanel p{{}, {title, "step", y_label, 620}};
  for (auto& [l, s] : layers) p.series.push_back(std::move(s));
  return p;
}

// Refuses an output that is the dump itself, by another spelling of its
// path or through a link (a symlink or hard link to it): the SVG would
// replace the dump it is drawn from. `defaulted`: out is the default.
void check_out_is_not_dump(const std::string& dump, const std::string& out, bool defaulted) {
  namespace fs = std::filesystem;
  std::error_code ec_dump, ec_out;
  const fs::path d = fs::absolute(dump, ec_dump).lexically_normal(), o = fs::absolute(out, ec_out).lexically_normal();
  bool same = !ec_dump && !ec_out && d == o;
  std::error_code ec;
  if (!same && fs::exists(out, ec)) same = fs::equivalent(dump, out, ec) && !ec;
  if (!same) return;
  throw IOError(defaulted ? "grads plot: the output " + out + " (the dump's name with .svg) is the dump " + dump +
                                " itself: writing the SVG there would replace it; give --out another file"
                          : "grads plot: --out " + out + " is the dump " + dump +
                                " itself (or a link to it): writing the SVG there would replace it; give --out "
                                "another file");
}

}  // namespace

std::string grad_dump_svg(const std::vector<json>& steps, const std::string& title) {
  const std::vector<GradSeries> tensors = summarize_grad_dump(steps, 1e-10, title);
  // The steps at which a tensor of each layer had a NaN or Inf element.
  std::map<std::string, std::set<int64_t>> bad_steps;
  for (const json& s : steps)
    for (const json& t : s.at("tensors"))
      if (t.value("nan", int64_t{0}) > 0 || t.value("inf", int64_t{0}) > 0)  // both checked, or absent
        bad_steps[layer_of(t.at("name").get<std::string>())].insert(s.at("step").get<int64_t>());
  // One panel per layer, in first-seen order, one norm curve per tensor.
  std::vector<PlotPanel> panels;
  std::map<std::string, size_t> panel_of;
  for (const GradSeries& g : tensors) {
    const std::string layer = layer_of(g.name);
    auto [it, fresh] = panel_of.try_emplace(layer, panels.size());
    if (fresh) {
      PlotPanel p{{}, {title + ": " + layer, "step", "gradient norm (log scale)", 620}};
      p.options.log_y = true;
      for (int64_t b : bad_steps[layer]) p.options.marks.push_back(static_cast<double>(b));
      panels.push_back(std::move(p));
    }
    PlotSeries s{g.name.size() > layer.size() ? g.name.substr(layer.size() + 1) : g.name, {}, g.norms};
    for (int64_t step : g.steps) s.x.push_back(static_cast<double>(step));
    panels[it->second].series.push_back(std::move(s));
  }
  if (std::any_of(steps.begin(), steps.end(), [](const json& s) { return s.contains("memory") && !s.at("memory").empty(); })) {
    panels.push_back(memory_panel(steps, "memory gates sigmoid(gamma)", "gate",
                                  [](const json& m) { return number_from_json(m.at("gate")); }));
    panels.push_back(memory_panel(steps, "write widths sigma (mean)", "sigma",
                                  [](const json& m) { return stat(m.value("write_sigma", json::object()), "mean"); }));
    panels.push_back(memory_panel(steps, "read coordinates (std over batch, chunks, axes)", "std",
                                  [](const json& m) { return stat(m.value("read_coords", json::object()), "std"); }));
    panels.push_back(memory_panel(steps, "write coordinates (std over batch, chunks, axes)", "std",
                                  [](const json& m) { return stat(m.value("write_coords", json::object()), "std"); }));
  }
  return svg_panels(panels, 2);
}

int run_grads_plot(const std::string& dump, std::string out) {
  const std::vector<json> steps = read_grad_dump(dump);
  const bool defaulted = out.empty();
  if (defaulted) out = std::filesystem::path(dump).replace_extension(".svg").string();
  check_out_is_not_dump(dump, out, defaulted);
  check_grad_dump(steps, "grads plot", dump);
  std::string svg;
  try {
    svg = grad_dump_svg(steps, std::filesystem::path(dump).filename().string());
  } catch (const json::exception& e) {
    throw IOError(dump + ": a step or tensor has a missing or mistyped field (" + e.what() + ")");
  }
  write_file_atomic(out, svg);
  fmt::print("{}: {} dumped steps drawn to {}\n", dump, steps.size(), out);
  return 0;
}

}  // namespace tmem::tools
