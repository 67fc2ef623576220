// A tiny SVG line-plot writer (no dependencies): axes with ticks (linear or
// log y), one polyline per series, a legend, marked x positions, and panels
// of several plots in one picture. Used for the runs' training curves
// (tools/run_recorder.h) and gradient dumps (tools/grads_plot.h).
#pragma once
#include <string>
#include <vector>

namespace tmem::tools {

/// One curve: points (x[i], y[i]), drawn in order.
struct PlotSeries {
  std::string label;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int width = 720, height = 440;  // pixels
  bool log_y = false;             // y on a log10 scale (values <= 0 are not drawn)
  std::vector<double> marks = {};  // x positions marked by a red dashed line (e.g. steps with NaN)
};

/// One plot of a picture of several (svg_panels).
struct PlotPanel {
  std::vector<PlotSeries> series;
  PlotOptions options;
};

/// The SVG document of a line plot of `series`. Axis ranges span every finite
/// point (a flat range is widened by 1; with log_y, every positive one, in
/// decades); non-finite points (and with log_y those <= 0) are skipped, and
/// a series is split into separate polylines where they were. Labels are
/// XML-escaped. Throws ValueError when a series has x and y of different
/// lengths, or width / height are below 100.
std::string svg_line_plot(const std::vector<PlotSeries>& series, const PlotOptions& opt = {});

/// One SVG document of the panels' plots, `columns` to a row, each at its
/// own options' size. Throws what svg_line_plot throws, and ValueError for
/// columns < 1.
std::string svg_panels(const std::vector<PlotPanel>& panels, int columns);

/// Writes svg_line_plot(series, opt) to `path` with write_file_atomic
/// (core/file_io.h). Throws IOError naming the path when it cannot be
/// written; an old plot at `path` then survives.
void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series,
                         const PlotOptions& opt = {});

}  // namespace tmem::tools
