// `tmem grads plot DUMP`: a gradient dump (core/json_dump.h) drawn as one
// SVG: the per-tensor gradient norms over the dumped steps, one panel per
// layer (log y; steps where a tensor of the panel had NaN or Inf marked),
// and beside them the memory internals the dump carries (gates, write
// widths, the spread of the read and write coordinates per memory layer).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmem::tools {

/// The layer a parameter belongs to: its name up to the first all-digit
/// component ("backbone.blocks.1.attn.qkv.weight" -> "backbone.blocks.1"),
/// else its first component ("head.weight" -> "head").
std::string layer_of(const std::string& name);

/// The SVG of a dump's steps (read_grad_dump): the panels described above,
/// two to a row, titled `title`. A memory entry's "gate" and statistics are
/// read with number_from_json ("NaN" of a diverged run is drawn as a gap), and
/// an entry without write_sigma/read_coords/write_coords (the probe did not
/// see the layer) leaves a gap too. Throws IOError for a malformed step or
/// tensor (summarize_grad_dump's checks, naming `title` as the dump), and for
/// a memory entry whose "layer" is not an integer >= 0 or whose "gate" is not
/// a number_from_json value.
std::string grad_dump_svg(const std::vector<nlohmann::json>& steps, const std::string& title);

/// Runs `tmem grads plot DUMP [--out FILE]`: writes grad_dump_svg of the
/// dump to `out` (default: DUMP with its extension replaced by .svg)
/// atomically. Throws IOError naming the file that cannot be read or
/// written, naming DUMP, the step and the field when the dump is malformed
/// (check_grad_dump), and naming both paths when `out` is DUMP itself (the
/// same path once made absolute and normalized, or the same file through a
/// symlink or hard link: a dump named x.svg with no --out, say), which the
/// SVG would replace. Returns 0.
int run_grads_plot(const std::string& dump, std::string out);

}  // namespace tmem::tools
