// Pieces shared by the training commands (tmem train brown, tmem train
// fashion-mnist, the diagnostic runs): time formatting, a text progress bar,
// curve smoothing for the SVG plots, and default run names.
#pragma once
#include <string>
#include <vector>

namespace tmem::tools {

/// Seconds as "m:ss", or "h:mm:ss" from one hour on; negative counts as 0.
std::string fmt_time(double seconds);

/// A bar of `width` characters, '#' for the done fraction of `total`, '.'
/// for the rest ("[" and "]" not included); total <= 0 counts as empty.
std::string progress_bar(int64_t done, int64_t total, int width = 20);

/// Moving average over `window` points (the first points average what
/// exists); window 0 counts as 1.
std::vector<double> moving_average(const std::vector<double>& v, size_t window);

/// "<prefix>-YYYYmmdd-HHMMSS" in local time: the default run name.
std::string timestamped_name(const std::string& prefix);

}  // namespace tmem::tools
