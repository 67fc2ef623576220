// JSON gradient dumps (docs/DESIGN.md §12). A dump file holds one JSON object per
// dumped step, one object per line:
//   {"step": 10, "loss": 2.3, "tensors": [{"name", "shape", "norm", "mean", "std",
//    "min", "max", "nan", "inf", "values"?}, ...], "no_grad": [names]?, ...extra keys}
// where "no_grad" names the tensors given undefined (a parameter that got no
// gradient this step).
// JSON has no NaN or infinities, so they are written as the strings "NaN",
// "Infinity" and "-Infinity" and read back as such; finite doubles are
// written with 17 significant digits and so round-trip exactly.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tmem/core/file_io.h"
#include "tmem/core/tensor.h"

namespace tmem {

/// A double as JSON: a number when finite, else "NaN"/"Infinity"/"-Infinity".
nlohmann::json number_to_json(double v);
/// Inverse of number_to_json. Throws IOError for any other string or type.
double number_from_json(const nlohmann::json& j);

/// Summary of one tensor: name, shape, norm (L2), mean, std (unbiased), min,
/// max over its finite elements (computed on the elements scaled by their
/// largest magnitude, so values near the double range do not overflow the
/// sums), and the counts of NaN and of +-Inf elements;
/// with `values`, every element in row-major order. Throws ValueError naming
/// the tensor when t is undefined.
nlohmann::json tensor_summary(const std::string& name, const Tensor& t, bool values = false);
/// Rebuilds a float64 CPU tensor from a summary written with values=true.
/// Throws IOError when the values are missing or do not match the shape.
Tensor tensor_from_summary(const nlohmann::json& j);

/// Appends one step object per call to a dump file (one JSON object a line,
/// written through AppendFileWriter and fsync'ed after each step, so a
/// crashed run keeps what it dumped and a full disk is an IOError).
class GradDumpWriter {
 public:
  /// Opens `path` for a run whose next step is `first_step`. With
  /// first_step 0 (a fresh run) the file is truncated. With first_step > 0 (a
  /// run resumed from a checkpoint at that step) the step objects of the
  /// existing dump with "step" < first_step are kept and the others dropped,
  /// since the resumed run dumps them again; the file is rewritten atomically
  /// first (write_file_atomic), so a failure leaves it as it was. A torn last
  /// line (no newline: a run killed while dumping) is dropped when it starts
  /// a step object ('{'). Throws IOError naming path when it cannot be
  /// written or is not a regular file, and naming the line when a complete
  /// line is not a step object with an integer "step" or a last line without
  /// a newline does not start one (a file that is no dump is never emptied);
  /// ValueError for first_step < 0.
  explicit GradDumpWriter(const std::string& path, int64_t first_step = 0);
  /// Writes {"step", "loss", "tensors": [summaries...]} merged with `extra`
  /// (a JSON object without the keys step, loss, tensors and no_grad;
  /// anything else is a ValueError naming it). A tensor name given twice is a
  /// ValueError naming both positions (a dump names each tensor once). Steps
  /// increase: a step before first_step or not after the last one written is
  /// a ValueError (`tmem grads` refuses such a dump).
  /// An undefined tensor (a parameter's grad() when it got no gradient) is
  /// not summarized but named in "no_grad", in the given order (the key is
  /// left out when there is none). Throws IOError naming the file when the
  /// write fails.
  void write_step(int64_t step, double loss,
                  const std::vector<std::pair<std::string, Tensor>>& tensors, bool values = false,
                  const nlohmann::json& extra = nlohmann::json::object());

 private:
  AppendFileWriter out_;
  int64_t first_;               // first_step: the steps before it are the kept ones
  std::optional<int64_t> last_;  // the last step written
};

/// Reads every step object of a dump file (one object a line; a line may
/// also hold an array of objects). Throws IOError naming the file and line on
/// bad JSON or JSON nested deeper than 64 levels (parse_json), and naming
/// the file when it does not exist, is not a regular file (a directory, a
/// device), cannot be read, or holds no step. The steps' fields are checked
/// by check_grad_dump (summarize_grad_dump and diff_grad_dumps call it).
std::vector<nlohmann::json> read_grad_dump(const std::string& path);

/// Checks that `steps` is a gradient dump `tmem grads` can read: every step
/// object has an integer "step" in int64's range, no step appears twice and
/// none comes after a larger one (GradDumpWriter writes them increasing), a
/// "loss" (when given) is a number_from_json value, and "tensors" is an array
/// of objects, each with a string "name" (no name twice in a step) and a
/// "norm" that is a number >= 0, "NaN" or "Infinity" (what GradDumpWriter
/// writes); "mean", "std", "min", "max" and each of "values", when given, are
/// number_from_json values ("std" also >= 0), "nan" and "inf" integers in
/// [0, 2^63), "shape" a list of integers >= 0. Throws IOError
/// "<who>: malformed gradient dump <source>: ..." naming the step (or the
/// step object's place when it has no valid "step"), the tensor and the field.
void check_grad_dump(const std::vector<nlohmann::json>& steps, const std::string& who, const std::string& source);

/// One tensor's statistics over the dumped steps.
struct GradSeries {
  std::string name;
  std::vector<int64_t> steps;
  std::vector<double> norms;
  int64_t nan = 0, inf = 0;  // summed over steps
  int64_t nonfinite_norms = 0;  // steps whose norm is NaN or inf (a dump written elsewhere)
  bool vanishing = false;     // norm below the threshold at the last step
};
/// Per-tensor norm series of a dump, in first-seen order. Throws IOError for
/// a malformed dump (check_grad_dump with who "summarize_grad_dump" and
/// `source`, e.g. the file's name: a missing or mistyped field, a negative
/// norm, a step twice, a tensor twice in a step), and when a tensor's "nan"
/// or "inf" counts summed over the steps would overflow int64.
std::vector<GradSeries> summarize_grad_dump(const std::vector<nlohmann::json>& steps,
                                            double vanish_threshold = 1e-10, const std::string& source = "");

/// One difference between two dumps: the loss, or a statistic (or value
/// index) of one tensor, at one step.
struct DumpDifference {
  int64_t step;
  std::string name;   // the tensor's, or "(loss)"
  std::string field;  // "loss", "norm", ..., "values[3]", "shape", "missing in A", "missing in B"
  double a, b;
  double rel;  // |a - b| / max(|a|, |b|, spread, 1e-30); +inf when exactly one is non-finite
  std::string note = {};  // for "shape": the two shapes ("[16,65] in A, [99] in B")
};
/// The `top` largest relative differences between two dumps over the steps
/// and tensors present in both: the step's "loss" (NaN against a number is
/// +inf), and each tensor's norm, mean, std, min, max, and every value when
/// both dumps have values. Norm, std and the loss are relative to
/// themselves; mean, min, max and values to the larger of themselves and the
/// tensor's spread (the larger std of the two dumps), since a gradient's mean
/// sits near 0 where rounding alone would look like disagreement. A tensor
/// whose "shape" differs (when both give one) is one difference with field
/// "shape", a and b the element counts, the shapes in `note` and rel +inf;
/// its statistics, of two different tensors, are not compared. A tensor, a
/// loss or a whole step that only one dump has is a difference with field
/// "missing in B" (or "missing in A"), rel +inf, the present side's norm (or
/// loss) and NaN for the absent side; a step with neither loss nor tensors is
/// one row named "(step)". Throws IOError when either dump is malformed
/// (check_grad_dump with who "diff_grad_dumps" and source `source_a` or
/// `source_b`, e.g. the file names).
std::vector<DumpDifference> diff_grad_dumps(const std::vector<nlohmann::json>& a,
                                            const std::vector<nlohmann::json>& b, size_t top = 10,
                                            const std::string& source_a = "A", const std::string& source_b = "B");

}  // namespace tmem
