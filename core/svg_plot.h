// A tiny SVG line-plot writer (no dependencies): axes with ticks, one
// polyline per series, a legend. Used for training curves (tmem train brown).
#pragma once
#include <string>
#include <vector>

namespace tmem {

/// One curve: points (x[i], y[i]), drawn in order.
struct PlotSeries {
  std::string label;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int width = 720, height = 440;  // pixels
};

/// The SVG document of a line plot of `series`. Axis ranges span every finite
/// point (a flat range is widened by 1); non-finite points are skipped, and a
/// series is split into separate polylines where they were. Labels are
/// XML-escaped. Throws ValueError when a series has x and y of different
/// lengths, or width / height are below 100.
std::string svg_line_plot(const std::vector<PlotSeries>& series, const PlotOptions& opt = {});

/// Writes svg_line_plot(series, opt) to `path` with write_file_atomic
/// (core/file_io.h). Throws IOError naming the path when it cannot be
/// written; an old plot at `path` then survives.
void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series,
                         const PlotOptions& opt = {});

}  // namespace tmem
