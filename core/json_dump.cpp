#include "tmem/core/json_dump.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string_view>

namespace tmem {

using nlohmann::json;

json number_to_json(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

double number_from_json(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    throw IOError("number_from_json: expected a number, \"NaN\", \"Infinity\" or \"-Infinity\", "
                  "but got the string \"" + printable(s) + "\"");
  }
  throw IOError("number_from_json: expected a number, but got " + printable(j.dump()));
}

json tensor_summary(const std::string& name, const Tensor& t, bool values) {
  check<ValueError>(t.defined(), "tensor_summary: \"", printable(name), "\" is undefined (a parameter with no gradient?)");
  std::vector<double> v = t.to_vector();
  int64_t nan = 0, inf = 0, n = 0;
  double mx = -std::numeric_limits<double>::infinity(), mn = -mx;
  double scale = 0;  // max |x|: the sums below run over x / scale, so none overflows
  for (double x : v) {
    if (std::isnan(x)) { ++nan; continue; }
    if (std::isinf(x)) { ++inf; continue; }
    ++n;
    mx = std::max(mx, x);
    mn = std::min(mn, x);
    scale = std::max(scale, std::abs(x));
  }
  // Welford over x / scale (x - mean of +-1e308 overflowed to a mean of
  // -Infinity and a NaN std), and the norm as scale * sqrt(sum((x/scale)^2)).
  double ss = 0, mean = 0, m2 = 0;
  if (scale > 0) {
    int64_t k = 0;
    for (double x : v) {
      if (!std::isfinite(x)) continue;
      const double y = x / scale, d = y - mean;
      ss += y * y;
      mean += d / static_cast<double>(++k);
      m2 += d * (y - mean);
    }
  }
  json j;
  j["name"] = name;
  j["shape"] = t.shape();
  j["norm"] = number_to_json(scale * std::sqrt(ss));
  j["mean"] = n ? number_to_json(scale * mean) : json("NaN");
  j["std"] = n > 1 ? number_to_json(scale * std::sqrt(m2 / static_cast<double>(n - 1))) : json("NaN");
  j["min"] = n ? number_to_json(mn) : json("NaN");
  j["max"] = n ? number_to_json(mx) : json("NaN");
  j["nan"] = nan;
  j["inf"] = inf;
  if (values) {
    json arr = json::array();
    for (double x : v) arr.push_back(number_to_json(x));
    j["values"] = std::move(arr);
  }
  return j;
}

Tensor tensor_from_summary(const json& j) {
  if (!j.contains("values") || !j.contains("shape"))
    throw IOError("tensor_from_summary: the summary of \"" + printable(j.value("name", std::string("?"))) +
                  "\" has no values (dump it with values=true)");
  Shape shape = j["shape"].get<Shape>();
  std::vector<double> v;
  for (const json& x : j["values"]) v.push_back(number_from_json(x));
  if (static_cast<int64_t>(v.size()) != numel_of(shape))
    throw IOError("tensor_from_summary: " + std::to_string(v.size()) + " values for shape " +
                  shape_str(shape));
  return tensor(v, shape, DType::Float64);
}

namespace {

const json& field_of(const json& step, const char* key) {
  if (!step.is_object())
    throw IOError(std::string("grad dump: a line is not a step object but a JSON ") + step.type_name());
  if (!step.contains(key))
    throw IOError(std::string("grad dump: a step object has no \"") + key + "\" field");
  return step[key];
}

// The "step" of a step object: an integer in int64's range (a float such as
// 1e32 would convert out of range).
int64_t step_of(const json& s) {
  const json& v = field_of(s, "step");
  check<IOError>(v.is_number_integer() &&
                     (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)),
                 "grad dump: a step object's \"step\" is ", printable(v.dump()), ", not an integer in [-2^63, 2^63)");
  return v.get<int64_t>();
}

// Rewrites the dump at `path` keeping its step objects with "step" <
// first_step (see GradDumpWriter). Returns the path, so it can run before
// the writer opens the file.
const std::string& keep_steps_before(const std::string& path, int64_t first_step) {
  check<ValueError>(first_step >= 0, "GradDumpWriter: expected first_step >= 0 (the step a run resumes at), but got ",
                    first_step);
  std::error_code ec;
  check_path(path, "GradDumpWriter");
  if (first_step <= 0 || !std::filesystem::exists(path, ec)) return path;
  check<IOError>(std::filesystem::is_regular_file(path, ec), "cannot write ", path, ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(static_cast<bool>(in), "cannot resume the gradient dump ", path, ": it cannot be read");
  AtomicFileWriter out(path);
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    const std::string where = "cannot resume the gradient dump " + path + ": line " + std::to_string(lineno);
    // No newline after it: a step object torn by a kill while dumping, or a
    // file that is no dump at all (a checkpoint given by mistake), which the
    // rewrite below would empty.
    if (in.eof()) {
      check<IOError>(line.starts_with('{'), where, ": no newline after it, and not the start of a step object: "
                     "not a gradient dump (give the dump's path, or remove the file)");
      break;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = parse_json(line, where);
    int64_t step = 0;
    try {
      step = step_of(j);
    } catch (const IOError& e) {
      throw IOError(where + ": " + e.what());
    }
    if (step < first_step) out.write(line + '\n');
  }
  check<IOError>(!in.bad(), "cannot resume the gradient dump ", path, ": reading it failed");
  out.commit();
  return path;
}

}  // namespace

GradDumpWriter::GradDumpWriter(const std::string& path, int64_t first_step)
    : out_(keep_steps_before(path, first_step), first_step <= 0), first_(first_step) {}

void GradDumpWriter::write_step(int64_t step, double loss,
                                const std::vector<std::pair<std::string, Tensor>>& tensors,
                                bool values, const json& extra) {
  check<ValueError>(extra.is_object(), "GradDumpWriter::write_step: extra must be a JSON object (its keys are merged "
                    "into the step object), but got ", printable(extra.dump()));
  check<ValueError>(last_ ? step > *last_ : step >= first_, "GradDumpWriter::write_step: expected a step ",
                    last_ ? "after " + std::to_string(*last_) : ">= " + std::to_string(first_),
                    " (a dump's steps increase), but got step ", step);
  for (const char* key : {"step", "loss", "tensors", "no_grad"})
    check<ValueError>(!extra.contains(key), "GradDumpWriter::write_step: extra key \"", key,
                      "\" is the step object's own (step, loss, tensors, no_grad); give it another name");
  // Each name once, as check_grad_dump requires of a dump.
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto [at, fresh] = first.emplace(tensors[i].first, i);
    check<ValueError>(fresh, "GradDumpWriter::write_step: tensor \"", printable(tensors[i].first),
                      "\" is given twice (at ", at->second, " and ", i, "); a dump names each tensor once");
  }
  json j = extra;
  j["step"] = step;
  j["loss"] = number_to_json(loss);
  json arr = json::array(), missing = json::array();
  for (const auto& [name, t] : tensors) {
    if (t.defined()) arr.push_back(tensor_summary(name, t, values));
    else missing.push_back(name);
  }
  j["tensors"] = std::move(arr);
  if (!missing.empty()) j["no_grad"] = std::move(missing);
  out_.write(j.dump() + '\n');
  last_ = step;
}

std::vector<json> read_grad_dump(const std::string& path) {
  namespace fs = std::filesystem;
  check_path(path, "read_grad_dump");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw IOError("read_grad_dump: " + path +
                  (fs::is_symlink(fs::symlink_status(path, ec)) ? " is a symbolic link to a file that does not exist"
                                                                : " does not exist"));
  if (st.type() == fs::file_type::none) throw IOError("read_grad_dump: cannot read " + path + ": " + ec.message());
  if (!fs::is_regular_file(st))
    throw IOError("read_grad_dump: " + path + " is not a regular file (a gradient dump is a JSON-lines file)");
  std::ifstream in(path);
  if (!in) throw IOError("read_grad_dump: cannot open " + path);
  std::vector<json> steps;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = parse_json(line, "read_grad_dump: " + path + " line " + std::to_string(lineno));
    if (j.is_array()) {
      for (auto& s : j) steps.push_back(std::move(s));
    } else {
      steps.push_back(std::move(j));
    }
  }
  if (in.bad()) throw IOError("read_grad_dump: reading " + path + " failed");
  if (steps.empty()) throw IOError("read_grad_dump: " + path + " holds no dumped step");
  return steps;
}

namespace {

// |a - b| relative to the larger of |a|, |b| and `scale` (the tensor's
// spread for a field that sits near 0 while the tensor does not).
double rel_diff(double a, double b, double scale = 0) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (a == b) return 0;
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  // a - b overflows for finite values of opposite signs near the double range
  // (1e308 against -1e308 read as an infinite difference); a / m - b / m cannot.
  const double m = std::max({std::abs(a), std::abs(b), scale, 1e-30});
  return std::abs(a / m - b / m);
}

// A dump is untrusted input: check_grad_dump names what is wrong first; a
// JSON library error that still got through (a missing key or a field of the
// wrong type) becomes an IOError naming the function.
template <class F>
auto malformed_as_io_error(const char* fn, F f) {
  try {
    return f();
  } catch (const json::exception& e) {
    throw IOError(std::string(fn) + ": malformed gradient dump: " + printable(e.what()));
  }
}

// A count ("nan", "inf"): an integer in [0, 2^63).
bool is_count(const json& v) {
  return v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                                                          : v.get<int64_t>() >= 0);
}

// A number_from_json value (a number, "NaN", "Infinity", "-Infinity").
bool is_number_value(const json& v) {
  if (v.is_number()) return true;
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  return s == "NaN" || s == "Infinity" || s == "-Infinity";
}

const char* const kNumberValue = ", not a number, \"NaN\", \"Infinity\" or \"-Infinity\"";

}  // namespace

void check_grad_dump(const std::vector<json>& steps, const std::string& who, const std::string& source) {
  const std::string prefix = who + ": malformed gradient dump" + (source.empty() ? "" : " " + source) + ": ";
  const auto fail = [&prefix](const std::string& what) { throw IOError(prefix + what); };
  const std::string of_n = " of " + std::to_string(steps.size());
  std::map<int64_t, size_t> step_objects;  // step -> its place in `steps`
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string object = "step object " + std::to_string(i + 1) + of_n;
    if (!s.is_object()) fail(object + " is a JSON " + s.type_name() + ", not an object");
    if (!s.contains("step")) fail(object + " has no \"step\" field");
    const json& sv = s["step"];
    if (!sv.is_number_integer() || (sv.is_number_unsigned() && sv.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      fail(object + ": \"step\" is " + printable(sv.dump()) + ", not an integer in [-2^63, 2^63)");
    const int64_t step = sv.get<int64_t>();
    const auto placed = step_objects.emplace(step, i);
    if (!placed.second)
      fail("step " + std::to_string(step) + " appears twice (step objects " + std::to_string(placed.first->second + 1) +
           " and " + std::to_string(i + 1) + of_n + ")");
    if (i > 0 && steps[i - 1]["step"].get<int64_t>() > step)
      fail("step " + std::to_string(step) + " comes after step " + std::to_string(steps[i - 1]["step"].get<int64_t>()) +
           " (step objects " + std::to_string(i) + " and " + std::to_string(i + 1) + of_n +
           "); a dump's steps increase, as tmem writes them");
    const std::string at = "step " + std::to_string(step);
    if (s.contains("loss") && !is_number_value(s["loss"]))
      fail(at + ": \"loss\" is " + printable(s["loss"].dump()) + kNumberValue);
    if (!s.contains("tensors")) fail(at + " has no \"tensors\" field");
    const json& tensors = s["tensors"];
    if (!tensors.is_array()) fail(at + ": \"tensors\" is a JSON " + tensors.type_name() + ", not an array");
    std::map<std::string, size_t> names;  // name -> its index in "tensors"
    for (size_t k = 0; k < tensors.size(); ++k) {
      const json& t = tensors[k];
      const std::string slot = at + ": tensors[" + std::to_string(k) + "]";
      if (!t.is_object()) fail(slot + " is a JSON " + t.type_name() + ", not an object");
      if (!t.contains("name")) fail(slot + " has no \"name\" field");
      if (!t["name"].is_string()) fail(slot + "'s \"name\" is " + printable(t["name"].dump()) + ", not a string");
      const std::string& name = t["name"].get_ref<const std::string&>();
      const auto named = names.emplace(name, k);
      if (!named.second)
        fail(at + ": tensor \"" + printable(name) + "\" appears twice (tensors[" + std::to_string(named.first->second) +
             "] and tensors[" + std::to_string(k) + "])");
      const std::string tensor = at + ", tensor \"" + printable(name) + "\"";
      if (!t.contains("norm")) fail(tensor + " has no \"norm\" field");
      // A norm is >= 0 or +Infinity (an overflow), or NaN; -1e308 is no norm.
      const json& norm = t["norm"];
      if (!is_number_value(norm) || number_from_json(norm) < 0)
        fail(tensor + ": \"norm\" is " + printable(norm.dump()) + ", not a number >= 0, \"NaN\" or \"Infinity\"");
      for (const char* f : {"mean", "std", "min", "max"})
        if (t.contains(f) && !is_number_value(t[f]))
          fail(tensor + ": \"" + f + "\" is " + printable(t[f].dump()) + kNumberValue);
      if (t.contains("std") && number_from_json(t["std"]) < 0)
        fail(tensor + ": \"std\" is " + printable(t["std"].dump()) + ", not a number >= 0, \"NaN\" or \"Infinity\"");
      for (const char* f : {"nan", "inf"})
        if (t.contains(f) && !is_count(t[f]))
          fail(tensor + ": the \"" + f + "\" count is " + printable(t[f].dump()) + ", not an integer in [0, 2^63)");
      if (t.contains("shape")) {
        const json& shape = t["shape"];
        if (!shape.is_array() || !std::all_of(shape.begin(), shape.end(), is_count))
          fail(tensor + ": \"shape\" is " + printable(shape.dump()) + ", not a list of integers >= 0");
      }
      if (t.contains("values")) {
        const json& values = t["values"];
        if (!values.is_array()) fail(tensor + ": \"values\" is a JSON " + values.type_name() + ", not an array");
        for (size_t v = 0; v < values.size(); ++v)
          if (!is_number_value(values[v]))
            fail(tensor + ": \"values\"[" + std::to_string(v) + "] is " + printable(values[v].dump()) + kNumberValue);
      }
    }
  }
}

std::vector<GradSeries> summarize_grad_dump(const std::vector<json>& steps, double vanish_threshold,
                                            const std::string& source) {
  check_grad_dump(steps, "summarize_grad_dump", source);
  return malformed_as_io_error("summarize_grad_dump", [&] {
    std::vector<GradSeries> out;
    std::map<std::string, size_t> index;
    for (const json& s : steps) {
      const int64_t step = s["step"].get<int64_t>();
      for (const json& t : s["tensors"]) {
        const std::string& name = t["name"].get_ref<const std::string&>();
        const auto found = index.emplace(name, out.size());
        if (found.second) {
          out.emplace_back();
          out.back().name = name;
        }
        GradSeries& g = out[found.first->second];
        g.steps.push_back(step);
        g.norms.push_back(number_from_json(t["norm"]));
        g.nonfinite_norms += !std::isfinite(g.norms.back());
        for (const auto& [key, sum] : {std::pair{"nan", &g.nan}, std::pair{"inf", &g.inf}}) {
          if (!t.contains(key)) continue;  // a count check_grad_dump let through: in [0, 2^63)
          check<IOError>(!__builtin_add_overflow(*sum, t[key].get<int64_t>(), sum), "summarize_grad_dump: ",
                         source.empty() ? "" : source + ": ", "tensor \"", printable(name), "\": its \"", key,
                         "\" counts summed over the steps overflow int64");
        }
      }
    }
    for (GradSeries& g : out) g.vanishing = !g.norms.empty() && g.norms.back() < vanish_threshold;
    return out;
  });
}

std::vector<DumpDifference> diff_grad_dumps(const std::vector<json>& a, const std::vector<json>& b, size_t top,
                                            const std::string& source_a, const std::string& source_b) {
  check_grad_dump(a, "diff_grad_dumps", source_a);
  check_grad_dump(b, "diff_grad_dumps", source_b);
  return malformed_as_io_error("diff_grad_dumps", [&] {
    // check_grad_dump made the steps unique and the names unique in a step.
    auto by_step = [](const std::vector<json>& d) {
      std::map<int64_t, const json*> m;
      for (const json& s : d) m[s["step"].get<int64_t>()] = &s;
      return m;
    };
    auto by_name = [](const json& s) {
      std::map<std::string, const json*> m;
      for (const json& t : s["tensors"]) m[t["name"].get<std::string>()] = &t;
      return m;
    };
    const auto ma = by_step(a), mb = by_step(b);
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<DumpDifference> diffs;
    // What only one dump has (`in_a`: dump A): its value (a norm, a loss)
    // on its side, NaN on the other.
    auto one_sided = [&diffs, inf, nan](int64_t step, const std::string& name, double value, bool in_a) {
      diffs.push_back({step, name, in_a ? "missing in B" : "missing in A", in_a ? value : nan, in_a ? nan : value, inf});
    };
    auto whole_step = [&one_sided, nan](int64_t step, const json& s, bool in_a) {
      if (s.contains("loss")) one_sided(step, "(loss)", number_from_json(s["loss"]), in_a);
      for (const json& t : s["tensors"]) one_sided(step, t["name"].get<std::string>(), number_from_json(t["norm"]), in_a);
      if (!s.contains("loss") && s["tensors"].empty()) one_sided(step, "(step)", nan, in_a);
    };
    auto numel = [](const json& shape) {
      double n = 1;
      for (const json& d : shape) n *= static_cast<double>(d.get<uint64_t>());
      return n;
    };
    for (const auto& [step, sa] : ma) {
      const auto found = mb.find(step);
      if (found == mb.end()) {
        whole_step(step, *sa, true);
        continue;
      }
      const json& sb = *found->second;
      if (sa->contains("loss") && sb.contains("loss")) {
        const double x = number_from_json((*sa)["loss"]), y = number_from_json(sb["loss"]);
        diffs.push_back({step, "(loss)", "loss", x, y, rel_diff(x, y)});
      } else if (sa->contains("loss") || sb.contains("loss")) {
        const bool in_a = sa->contains("loss");
        one_sided(step, "(loss)", number_from_json((in_a ? *sa : sb)["loss"]), in_a);
      }
      const auto ta = by_name(*sa), tb = by_name(sb);
      for (const auto& [name, pa] : ta) {
        const auto other = tb.find(name);
        if (other == tb.end()) {
          one_sided(step, name, number_from_json((*pa)["norm"]), true);
          continue;
        }
        const json &ja = *pa, &jb = *other->second;
        if (ja.contains("shape") && jb.contains("shape") && ja["shape"] != jb["shape"]) {
          // Two different tensors under one name: their statistics say nothing.
          diffs.push_back({step, name, "shape", numel(ja["shape"]), numel(jb["shape"]), inf,
                           printable(ja["shape"].dump()) + " in A, " + printable(jb["shape"].dump()) + " in B"});
          continue;
        }
        // A gradient's mean and single values sit near 0 (1e-12 against a
        // spread of 1e-3 is common): they are measured against the spread.
        double spread = 0;
        for (const json* j : {&ja, &jb})
          if (j->contains("std")) {
            const double s = number_from_json((*j)["std"]);
            if (std::isfinite(s)) spread = std::max(spread, s);
          }
        for (const char* f : {"norm", "mean", "std", "min", "max"}) {
          if (!ja.contains(f) || !jb.contains(f)) continue;
          double x = number_from_json(ja[f]), y = number_from_json(jb[f]);
          const bool centred = std::string_view(f) != "norm" && std::string_view(f) != "std";
          diffs.push_back({step, name, f, x, y, rel_diff(x, y, centred ? spread : 0)});
        }
        if (ja.contains("values") && jb.contains("values")) {
          const json &va = ja["values"], &vb = jb["values"];
          if (va.size() != vb.size()) {
            diffs.push_back({step, name, "values size", double(va.size()), double(vb.size()), inf});
            continue;
          }
          for (size_t i = 0; i < va.size(); ++i) {
            double x = number_from_json(va[i]), y = number_from_json(vb[i]);
            diffs.push_back({step, name, "values[" + std::to_string(i) + "]", x, y, rel_diff(x, y, spread)});
          }
        }
      }
      for (const auto& [name, pb] : tb)
        if (!ta.count(name)) one_sided(step, name, number_from_json((*pb)["norm"]), false);
    }
    for (const auto& [step, sb] : mb)
      if (!ma.count(step)) whole_step(step, *sb, false);
    std::stable_sort(diffs.begin(), diffs.end(),
                     [](const DumpDifference& x, const DumpDifference& y) { return x.rel > y.rel; });
    if (diffs.size() > top) diffs.resize(top);
    return diffs;
  });
}

}  // namespace tmem
