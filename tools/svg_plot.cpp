#include "tmem/tools/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "tmem/core/error.h"
#include "tmem/core/file_io.h"

namespace tmem::tools {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

// Tick values at a 1/2/5 x 10^k step, about five across [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step)
    t.push_back(std::abs(v) < 1e-12 * step ? 0.0 : v);
  return t;
}

}  // namespace

std::string svg_line_plot(const std::vector<PlotSeries>& series, const PlotOptions& opt) {
  check<ValueError>(opt.width >= 100 && opt.height >= 100, "svg_line_plot: expected width and height >= 100, ",
                    "but got ", opt.width, " x ", opt.height);
  // y as drawn: log10(y) on a log scale (NaN for y <= 0, which is skipped).
  auto ty = [&opt](double y) {
    return !opt.log_y ? y : y > 0 ? std::log10(y) : std::numeric_limits<double>::quiet_NaN();
  };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series) {
    check<ValueError>(s.x.size() == s.y.size(), "svg_line_plot: series \"", s.label, "\" has ", s.x.size(),
                      " x values but ", s.y.size(), " y values");
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(ty(s.y[i])))
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]), y0 = std::min(y0, ty(s.y[i])),
        y1 = std::max(y1, ty(s.y[i]));
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to draw
  if (x1 - x0 <= 0) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 <= 0) y0 -= 0.5, y1 += 0.5;
  if (opt.log_y) y0 = std::floor(y0), y1 = std::ceil(y1);  // whole decades
  const double left = 70, right = opt.width - 150.0, top = 40, bottom = opt.height - 50.0;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (right - left); };
  auto py = [&](double y) { return bottom - (y - y0) / (y1 - y0) * (bottom - top); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << opt.width << "\" height=\"" << opt.height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!opt.title.empty())
    o << "<text x=\"" << num((left + right) / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << escape(opt.title) << "</text>\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << num(right - left) << "\" height=\""
    << num(bottom - top) << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double t : ticks(x0, x1))
    o << "<line x1=\"" << num(px(t)) << "\" y1=\"" << num(bottom) << "\" x2=\"" << num(px(t)) << "\" y2=\""
      << num(bottom + 5) << "\" stroke=\"black\"/><text x=\"" << num(px(t)) << "\" y=\"" << num(bottom + 18)
      << "\" text-anchor=\"middle\">" << num(t) << "</text>\n";
  for (double t : ticks(y0, y1)) {
    if (opt.log_y && std::abs(t - std::round(t)) > 1e-9) continue;  // decades only
    if (opt.log_y) t = std::round(t);
    o << "<line x1=\"" << num(left - 5) << "\" y1=\"" << num(py(t)) << "\" x2=\"" << num(right) << "\" y2=\""
      << num(py(t)) << "\" stroke=\"#dddddd\"/><text x=\"" << num(left - 8) << "\" y=\"" << num(py(t) + 4)
      << "\" text-anchor=\"end\">" << (opt.log_y ? "1e" + num(t) : num(t)) << "</text>\n";
  }
  for (double m : opt.marks)
    if (std::isfinite(m) && m >= x0 && m <= x1)
      o << "<line x1=\"" << num(px(m)) << "\" y1=\"" << num(top) << "\" x2=\"" << num(px(m)) << "\" y2=\""
        << num(bottom) << "\" stroke=\"#d62728\" stroke-dasharray=\"4,3\"/>\n";
  if (!opt.x_label.empty())
    o << "<text x=\"" << num((left + right) / 2) << "\" y=\"" << num(opt.height - 12.0)
      << "\" text-anchor=\"middle\">" << escape(opt.x_label) << "</text>\n";
  if (!opt.y_label.empty())
    o << "<text x=\"16\" y=\"" << num((top + bottom) / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
      << num((top + bottom) / 2) << ")\">" << escape(opt.y_label) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* color = kColors[k % std::size(kColors)];
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"" << points
          << "\"/>\n";
      points.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(ty(s.y[i]))) {
        flush();
        continue;
      }
      if (!points.empty()) points += ' ';
      points += num(px(s.x[i]));
      points += ',';
      points += num(py(ty(s.y[i])));
    }
    flush();
    const double ly = top + 10 + 18.0 * static_cast<double>(k);
    o << "<line x1=\"" << num(right + 12) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(right + 36) << "\" y2=\""
      << num(ly) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/><text x=\"" << num(right + 42)
      << "\" y=\"" << num(ly + 4) << "\">" << escape(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string svg_panels(const std::vector<PlotPanel>& panels, int columns) {
  check<ValueError>(columns >= 1, "svg_panels: expected columns >= 1, but got ", columns);
  const size_t cols = static_cast<size_t>(columns), rows = (panels.size() + cols - 1) / cols;
  std::vector<int> col_width(cols, 0), row_height(rows, 0);
  for (size_t i = 0; i < panels.size(); ++i) {
    col_width[i % cols] = std::max(col_width[i % cols], panels[i].options.width);
    row_height[i / cols] = std::max(row_height[i / cols], panels[i].options.height);
  }
  int width = 0, height = 0;
  for (int w : col_width) width += w;
  for (int h : row_height) height += h;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << std::max(width, 100) << "\" height=\""
    << std::max(height, 100) << "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  int y = 0;
  for (size_t r = 0; r < rows; ++r) {
    int x = 0;
    for (size_t c = 0; c < cols && r * cols + c < panels.size(); ++c) {
      const PlotPanel& p = panels[r * cols + c];
      // The panel's own document, placed as a nested <svg> at (x, y).
      o << "<svg x=\"" << x << "\" y=\"" << y << "\"" << svg_line_plot(p.series, p.options).substr(4);
      x += col_width[c];
    }
    y += row_height[r];
  }
  o << "</svg>\n";
  return o.str();
}

void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series, const PlotOptions& opt) {
  write_file_atomic(path, svg_line_plot(series, opt));
}

}  // namespace tmem::tools
