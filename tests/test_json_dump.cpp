// JSON gradient dumps: statistics, values, and exact round trips of
// non-finite numbers.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tmem/core/file_io.h"
#include "test_util.h"

using namespace tmem;

TEST_CASE("a dump of {NaN, +Inf, -Inf, 2.0} round-trips exactly") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor t = tensor({nan, inf, -inf, 2.0}, {2, 2}, DType::Float64);
  std::string path = (std::filesystem::temp_directory_path() / "tmem_dump_test.jsonl").string();
  {
    GradDumpWriter w(path);
    w.write_step(3, 0.25, {{"w", t}}, /*values=*/true);
    w.write_step(4, inf, {{"w", t}}, false);
  }
  auto steps = read_grad_dump(path);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]["step"] == 3);
  CHECK(number_from_json(steps[0]["loss"]) == 0.25);
  CHECK(steps[1]["loss"] == "Infinity");
  const auto& s = steps[0]["tensors"][0];
  CHECK(s["name"] == "w");
  CHECK(s["nan"] == 1);
  CHECK(s["inf"] == 2);
  CHECK(number_from_json(s["max"]) == 2.0);
  CHECK(number_from_json(s["norm"]) == 2.0);
  CHECK(s["values"][0] == "NaN");
  Tensor back = tensor_from_summary(s);
  std::vector<double> v = back.to_vector();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == inf);
  CHECK(v[2] == -inf);
  CHECK(v[3] == 2.0);
  CHECK(back.shape() == Shape{2, 2});
  CHECK(!steps[1]["tensors"][0].contains("values"));
  std::filesystem::remove(path);
}

TEST_CASE("dump statistics: norm without overflow, mean, unbiased std, min, max") {
  Tensor t = tensor({3e200, 4e200}, {2}, DType::Float64);
  auto j = tensor_summary("big", t);
  CHECK(number_from_json(j["norm"]) == doctest::Approx(5e200));
  auto k = tensor_summary("x", tensor({1, 2, 3, 4}, {4}));
  CHECK(number_from_json(k["mean"]) == doctest::Approx(2.5));
  CHECK(number_from_json(k["std"]) == doctest::Approx(1.2909944));
  CHECK(number_from_json(k["min"]) == 1);
  CHECK(number_from_json(k["max"]) == 4);
  CHECK(k["shape"] == std::vector<int64_t>{4});
}

TEST_CASE("dump statistics near the double range: mean and std do not overflow") {
  // Welford's x - mean overflowed for {1e308, -1e308}: mean -Infinity, std NaN.
  auto j = tensor_summary("huge", tensor({1e308, -1e308}, {2}, DType::Float64));
  CHECK(number_from_json(j["mean"]) == 0);
  CHECK(number_from_json(j["std"]) == doctest::Approx(std::sqrt(2.0) * 1e308));
  CHECK(number_from_json(j["min"]) == -1e308);
  auto k = tensor_summary("mixed", tensor({1e308, 1e308, std::numeric_limits<double>::infinity()}, {3}, DType::Float64));
  CHECK(number_from_json(k["mean"]) == 1e308);
  CHECK(number_from_json(k["std"]) == 0);
  CHECK(k["inf"] == 1);
  auto z = tensor_summary("zeros", zeros({3}));
  CHECK(number_from_json(z["mean"]) == 0);
  CHECK(number_from_json(z["std"]) == 0);
  CHECK(number_from_json(z["norm"]) == 0);
}

TEST_CASE("diff_grad_dumps: finite values near the double range differ by a finite amount") {
  // |1e308 - (-1e308)| overflowed: a relative difference of inf, the same as
  // a NaN against a number.
  // (On "max": a norm is never negative, and a dump with one is refused.)
  const nlohmann::json a = {{"step", 0}, {"tensors", {{{"name", "w"}, {"norm", 1}, {"max", 1e308}}}}};
  const nlohmann::json b = {{"step", 0}, {"tensors", {{{"name", "w"}, {"norm", 1}, {"max", -1e308}}}}};
  const auto d = diff_grad_dumps({a}, {b}, 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0].field == "max");
  CHECK(d[0].rel == 2);
}

TEST_CASE("GradDumpWriter refuses an extra that is not a JSON object, naming it") {
  // A list went into json's operator[] and escaped as nlohmann's type_error.
  const std::string path = (std::filesystem::temp_directory_path() / "tmem_dump_extra.jsonl").string();
  GradDumpWriter w(path);
  CHECK_THROWS_WITH_AS(w.write_step(0, 1.0, {{"w", zeros({2})}}, false, nlohmann::json::array({1, 2})),
                       "GradDumpWriter::write_step: extra must be a JSON object (its keys are merged into the step "
                       "object), but got [1,2]",
                       ValueError);
  w.write_step(0, 1.0, {{"w", zeros({2})}}, false, {{"note", 1}});
  CHECK(read_grad_dump(path).at(0)["note"] == 1);
  std::filesystem::remove(path);
}

TEST_CASE("finite doubles round-trip bit-exactly - bad strings are rejected") {
  for (double v : {0.1, -1e-300, 1.0 / 3.0, 6.02214076e23}) {
    nlohmann::json j = nlohmann::json::parse(nlohmann::json(number_to_json(v)).dump());
    CHECK(number_from_json(j) == v);
  }
  CHECK_THROWS_AS(number_from_json(nlohmann::json("nan")), IOError);
  CHECK_THROWS_AS(read_grad_dump("/nonexistent/dump.jsonl"), IOError);
}

TEST_CASE("summarize and diff gradient dumps") {
  std::string pa = (std::filesystem::temp_directory_path() / "tmem_dump_a.jsonl").string();
  std::string pb = (std::filesystem::temp_directory_path() / "tmem_dump_b.jsonl").string();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  {
    GradDumpWriter a(pa), b(pb);
    a.write_step(0, 1.0, {{"w", tensor({3, 4}, {2})}, {"v", tensor({1e-3}, {1})}}, true);
    a.write_step(10, 0.5, {{"w", tensor({0.3, 0.4}, {2})}, {"v", tensor({0}, {1})}}, true);
    b.write_step(0, 1.0, {{"w", tensor({3, 4.4}, {2})}, {"v", tensor({1e-3}, {1})}}, true);
    b.write_step(10, 0.5, {{"w", tensor({0.3, nan}, {2})}, {"v", tensor({0}, {1})}}, true);
  }
  auto series = summarize_grad_dump(read_grad_dump(pa));
  REQUIRE(series.size() == 2);
  CHECK(series[0].name == "w");
  REQUIRE(series[0].norms.size() == 2);
  CHECK(series[0].norms[0] == doctest::Approx(5.0));
  CHECK(series[0].norms[1] == doctest::Approx(0.5));
  CHECK(series[0].steps == std::vector<int64_t>{0, 10});
  CHECK(!series[0].vanishing);
  CHECK(series[1].vanishing);
  auto sb = summarize_grad_dump(read_grad_dump(pb));
  CHECK(sb[0].nan == 1);

  auto diffs = diff_grad_dumps(read_grad_dump(pa), read_grad_dump(pb), 100);
  CHECK(diffs[0].step == 10);  // NaN against a number is the largest difference
  CHECK(diffs[0].rel == std::numeric_limits<double>::infinity());
  for (size_t i = 1; i < diffs.size(); ++i) CHECK(diffs[i - 1].rel >= diffs[i].rel);
  double worst_step0 = 0;
  for (const auto& d : diffs)
    if (d.step == 0) worst_step0 = std::max(worst_step0, d.rel);
  CHECK(worst_step0 == doctest::Approx(0.4 / 1.4));  // std of w: 1/sqrt(2) vs 1.4/sqrt(2)
  CHECK(diff_grad_dumps(read_grad_dump(pa), read_grad_dump(pb), 3).size() == 3);
  CHECK(diff_grad_dumps(read_grad_dump(pa), read_grad_dump(pa), 5)[0].rel == 0);
  {  // means of opposite signs near 0 in a spread of 1: measured against the spread
    GradDumpWriter a(pa), b(pb);
    a.write_step(0, 1.0, {{"u", tensor({-1, 1 + 2e-9}, {2}, DType::Float64)}}, true);
    b.write_step(0, 1.0, {{"u", tensor({-1 - 2e-9, 1}, {2}, DType::Float64)}}, true);
  }
  const auto near_zero = diff_grad_dumps(read_grad_dump(pa), read_grad_dump(pb), 20);
  CHECK(near_zero.size() == 8);  // the loss, norm, mean, std, min, max and 2 values
  for (const DumpDifference& d : near_zero) {
    INFO(d.field);
    CHECK(d.rel < 3e-9);
    if (d.field == "mean") CHECK(d.a * d.b < 0);  // |a - b| / max(|a|, |b|) would be 2
  }
  std::filesystem::remove(pa);
  std::filesystem::remove(pb);
}

TEST_CASE("read_grad_dump names the file when it is a directory, empty or blank") {
  const std::string dir = test::tmp_path("tmem_dump_dir");
  std::filesystem::create_directories(dir);
  CHECK_THROWS_WITH_AS(read_grad_dump(dir), doctest::Contains((dir + " is not a regular file").c_str()), IOError);
  const std::string blank = test::tmp_path("tmem_dump_blank.jsonl");
  std::ofstream(blank) << "\n  \n";
  CHECK_THROWS_WITH_AS(read_grad_dump(blank), doctest::Contains((blank + " holds no dumped step").c_str()), IOError);
}

TEST_CASE("read_grad_dump says a dump that is not there does not exist") {
  // It said "is not a regular file", as for a directory.
  const std::string absent = test::tmp_path("tmem_no_such_dump.jsonl");
  std::filesystem::remove(absent);
  CHECK_THROWS_WITH_AS(read_grad_dump(absent), ("read_grad_dump: " + absent + " does not exist").c_str(), IOError);
  CHECK_THROWS_WITH_AS(read_grad_dump("/nonexistent/dump.jsonl"), "read_grad_dump: /nonexistent/dump.jsonl does not exist",
                       IOError);
  const std::string dangling = test::tmp_path("tmem_dump_dangling.jsonl");
  std::filesystem::remove(dangling);
  std::filesystem::create_symlink(absent, dangling);
  CHECK_THROWS_WITH_AS(read_grad_dump(dangling),
                       ("read_grad_dump: " + dangling + " is a symbolic link to a file that does not exist").c_str(),
                       IOError);
  std::filesystem::remove(dangling);
}

TEST_CASE("a resumed dump keeps the steps before the checkpoint and drops the ones it replays") {
  const std::string path = test::tmp_path("tmem_dump_resume.jsonl");
  std::filesystem::remove(path);
  {
    GradDumpWriter w(path);
    for (int64_t s = 0; s < 6; ++s) w.write_step(s, 1.0, {{"w", tensor({1.0 * s}, {1})}});
  }
  std::ofstream(path, std::ios::app) << "{\"step\": 6, \"loss\": 1, \"tens";  // torn by a kill
  {
    GradDumpWriter w(path, 4);  // resumed from a checkpoint at step 4
    w.write_step(4, 2.0, {{"w", tensor({40.0}, {1})}});
  }
  std::vector<int64_t> steps;
  for (const auto& s : read_grad_dump(path)) steps.push_back(s["step"].get<int64_t>());
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(number_from_json(read_grad_dump(path)[4]["loss"]) == 2.0);
  CHECK_THROWS_WITH_AS(GradDumpWriter(path, -5), "GradDumpWriter: expected first_step >= 0 (the step a run resumes at), "
                       "but got -5", ValueError);
  CHECK(number_from_json(read_grad_dump(path)[4]["loss"]) == 2.0);  // left as it was
  // A resume at step 0 (no checkpoint) starts the dump over; a file without one starts one.
  { GradDumpWriter w(path, 0); }
  CHECK(test::read_all(path).empty());
  std::filesystem::remove(path);
  { GradDumpWriter w(path, 3); }
  CHECK(std::filesystem::exists(path));
  // A complete line that is not a step object: the dump is not ours to cut.
  std::ofstream(path) << "{\"step\": 0, \"tensors\": []}\nnot json at all\n";
  const std::string before = test::read_all(path);
  CHECK_THROWS_WITH_AS(GradDumpWriter(path, 3), doctest::Contains((path + ": line 2").c_str()), IOError);
  std::ofstream(path) << "[{\"step\": 0}]\n";
  CHECK_THROWS_WITH_AS(GradDumpWriter(path, 3), doctest::Contains("not a step object"), IOError);
  // A step past int64 once wrapped to -1 and was kept before the resumed steps.
  std::ofstream(path) << "{\"step\": 18446744073709551615, \"tensors\": []}\n";
  CHECK_THROWS_WITH_AS(GradDumpWriter(path, 3),
                       doctest::Contains((path + ": line 1: grad dump: a step object's \"step\" is "
                                          "18446744073709551615, not an integer in [-2^63, 2^63)").c_str()),
                       IOError);
  std::ofstream(path) << "{\"step\": 0, \"tensors\": []}\nnot json at all\n";
  CHECK_THROWS_AS(GradDumpWriter(path, 3), IOError);
  CHECK(test::read_all(path) == before);  // left as it was
  // A file with no newline at all (a checkpoint given by mistake) is not a
  // torn dump: it was emptied.
  const std::string binary("\x74\x00\x00\x00\x00\x00\x00\x00{\"w\":", 14);
  std::ofstream(path, std::ios::binary) << binary;
  CHECK_THROWS_WITH_AS(GradDumpWriter(path, 3),
                       (("cannot resume the gradient dump " + path + ": line 1: no newline after it, and not the start "
                         "of a step object: not a gradient dump (give the dump's path, or remove the file)").c_str()),
                       IOError);
  CHECK(test::read_all(path) == binary);
  std::filesystem::remove(path);
}

TEST_CASE("GradDumpWriter refuses a tensor named twice and extra keys of the step object's own") {
  const std::string path = test::tmp_path("tmem_dump_names.jsonl");
  GradDumpWriter w(path);
  CHECK_THROWS_WITH_AS(w.write_step(0, 1.0, {{"w", zeros({2})}, {"b", zeros({1})}, {"w", ones({2})}}),
                       "GradDumpWriter::write_step: tensor \"w\" is given twice (at 0 and 2); a dump names each "
                       "tensor once", ValueError);
  for (const char* key : {"step", "loss", "tensors", "no_grad"})
    CHECK_THROWS_WITH_AS(w.write_step(0, 1.0, {{"w", zeros({2})}}, false, {{key, 7}}),
                         ("GradDumpWriter::write_step: extra key \"" + std::string(key) +
                          "\" is the step object's own (step, loss, tensors, no_grad); give it another name").c_str(),
                         ValueError);
  w.write_step(0, 1.0, {{"w", zeros({2})}, {"b", Tensor()}}, false, {{"lr", 0.1}});
  const auto steps = read_grad_dump(path);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]["lr"] == 0.1);
  CHECK(steps[0]["no_grad"] == nlohmann::json::array({"b"}));
  std::filesystem::remove(path);
}

TEST_CASE("dump reading: deep nesting, bad counts and overflowing NaN counts are IOErrors") {
  const std::string path = test::tmp_path("tmem_dump_hostile.jsonl");
  std::ofstream(path) << std::string(100000, '[') << "\n";
  CHECK_THROWS_WITH_AS(read_grad_dump(path), doctest::Contains("line 1: JSON nested deeper than 64 levels"), IOError);
  auto step = [](int64_t s, const std::string& nan) {
    return "{\"step\": " + std::to_string(s) + ", \"tensors\": [{\"name\": \"w\", \"norm\": 1, \"nan\": " + nan + "}]}\n";
  };
  // Two counts of 2^62 + 2^62 = 2^63 do not fit int64.
  std::ofstream(path) << step(0, "4611686018427387904") << step(1, "4611686018427387904");
  CHECK_THROWS_WITH_AS(summarize_grad_dump(read_grad_dump(path)), doctest::Contains("overflow int64"), IOError);
  std::ofstream(path) << step(0, "4611686018427387904") << step(1, "4611686018427387903");
  CHECK(summarize_grad_dump(read_grad_dump(path))[0].nan == std::numeric_limits<int64_t>::max());
  for (const std::string bad : {"-1", "1.5", "\"many\"", "18446744073709551615"}) {
    CAPTURE(bad);
    std::ofstream(path) << step(0, bad);
    CHECK_THROWS_WITH_AS(summarize_grad_dump(read_grad_dump(path)), doctest::Contains("\"nan\" count is"), IOError);
  }
  std::filesystem::remove(path);
}

TEST_CASE("dump reading: a tensor without a name or with fields of the wrong type is an IOError, not a crash") {
  // Found by tests/fuzz/fuzz_grad_dump (corpus/grad_dump/regress-tensor-without-name).
  using nlohmann::json;
  const json nameless = json::parse(R"({"step": 0, "tensors": [{"shape": [2], "norm": 1}]})");
  CHECK_THROWS_WITH_AS(summarize_grad_dump({nameless}), doctest::Contains("summarize_grad_dump: malformed"), IOError);
  CHECK_THROWS_WITH_AS(diff_grad_dumps({nameless}, {nameless}, 5), doctest::Contains("diff_grad_dumps: malformed"),
                       IOError);
  const json text_step = json::parse(R"({"step": "zero", "tensors": [{"name": "w", "norm": 1}]})");
  CHECK_THROWS_AS(summarize_grad_dump({text_step}), IOError);
  // A number too large for a double is a parse error too (nlohmann's out_of_range).
  CHECK_THROWS_WITH_AS(parse_json("[1e999999]", "dump"), doctest::Contains("dump: not valid JSON"), IOError);
  // A step that is not an integer in int64's range converted out of range
  // (UBSan; found by fuzz_grad_dump, corpus/grad_dump/regress-step-1e32).
  for (const char* bad : {"99999999999999999999999999999999", "1.5", "18446744073709551615"}) {
    CAPTURE(bad);
    const json j = json::parse(std::string(R"({"step": )") + bad + R"(, "tensors": [{"name": "w", "norm": 1}]})");
    CHECK_THROWS_WITH_AS(summarize_grad_dump({j}), doctest::Contains("\"step\" is"), IOError);
    CHECK_THROWS_WITH_AS(diff_grad_dumps({j}, {j}, 5), doctest::Contains("not an integer in [-2^63, 2^63)"), IOError);
  }
  const json good = json::parse(R"({"step": 0, "tensors": [{"name": "w", "norm": 1}]})");
  CHECK(summarize_grad_dump({good})[0].norms == std::vector<double>{1.0});
}

TEST_CASE("a dump names the tensors without a gradient instead of failing on them") {
  // A parameter that took no part in the loss has no gradient: it is named in
  // "no_grad", the others are summarized, and the file is complete.
  Tensor used = tensor({1, 2}, {2}).requires_grad_(), unused = tensor({3}, {1}).requires_grad_();
  sum(mul(used, used)).backward();
  REQUIRE_FALSE(unused.grad().defined());
  const std::string path = (std::filesystem::temp_directory_path() / "tmem_dump_no_grad.jsonl").string();
  {
    GradDumpWriter w(path);
    w.write_step(0, 1.5, {{"used", used.grad()}, {"unused", unused.grad()}});
    w.write_step(1, 1.0, {{"used", used.grad()}});
  }
  const auto steps = read_grad_dump(path);
  REQUIRE(steps.size() == 2);
  REQUIRE(steps[0]["tensors"].size() == 1);
  CHECK(steps[0]["tensors"][0]["name"] == "used");
  CHECK(number_from_json(steps[0]["tensors"][0]["max"]) == 4.0);  // d/dx x^2 = 2x at x = 2
  CHECK(steps[0]["no_grad"] == nlohmann::json::array({"unused"}));
  CHECK_FALSE(steps[1].contains("no_grad"));
  const auto series = summarize_grad_dump(steps);
  REQUIRE(series.size() == 1);
  CHECK(series[0].name == "used");
  CHECK_THROWS_WITH_AS(tensor_summary("unused", unused.grad()),
                       "tensor_summary: \"unused\" is undefined (a parameter with no gradient?)", ValueError);
  std::filesystem::remove(path);
}

namespace {

// A step object of a dump as the tests below write it: `tensors` is the JSON
// text of its "tensors" array.
nlohmann::json dump_step(int64_t step, const std::string& tensors, double loss = 1.0) {
  nlohmann::json j = nlohmann::json::parse("{\"tensors\": " + tensors + "}");
  j["step"] = step;
  j["loss"] = number_to_json(loss);
  return j;
}

}  // namespace

TEST_CASE("diff_grad_dumps reports a tensor whose shape differs as a shape difference, not as equal") {
  // [16,65] against [99] with the same statistics was "0 difference".
  const auto a = dump_step(0, R"([{"name": "w", "shape": [16, 65], "norm": 1, "mean": 0, "std": 1}])");
  const auto b = dump_step(0, R"([{"name": "w", "shape": [99], "norm": 1, "mean": 0, "std": 1}])");
  const auto d = diff_grad_dumps({a}, {b}, 10);
  REQUIRE(d.size() == 2);  // the shape and the loss: statistics of two different tensors are not compared
  CHECK(d[0].field == "shape");
  CHECK(d[0].name == "w");
  CHECK(d[0].a == 16 * 65);  // the element counts
  CHECK(d[0].b == 99);
  CHECK(d[0].rel == std::numeric_limits<double>::infinity());
  CHECK(d[1].field == "loss");
  CHECK(d[1].rel == 0);
  // [2,3] against [3,2]: the same element count, still another tensor.
  const auto c = dump_step(0, R"([{"name": "w", "shape": [3, 2], "norm": 1, "mean": 0, "std": 1}])");
  const auto e = dump_step(0, R"([{"name": "w", "shape": [2, 3], "norm": 1, "mean": 0, "std": 1}])");
  CHECK(diff_grad_dumps({c}, {e}, 1).at(0).field == "shape");
  CHECK(diff_grad_dumps({c}, {c}, 1).at(0).rel == 0);
}

TEST_CASE("diff_grad_dumps reports the loss, a NaN loss in one dump included") {
  const auto a = dump_step(0, "[]", 1.0), b = dump_step(0, "[]", std::numeric_limits<double>::quiet_NaN());
  auto d = diff_grad_dumps({a}, {b}, 10);
  REQUIRE(d.size() == 1);
  CHECK(d[0].name == "(loss)");
  CHECK(d[0].field == "loss");
  CHECK(d[0].a == 1.0);
  CHECK(std::isnan(d[0].b));
  CHECK(d[0].rel == std::numeric_limits<double>::infinity());
  d = diff_grad_dumps({dump_step(3, "[]", 2.0)}, {dump_step(3, "[]", 1.5)}, 10);
  REQUIRE(d.size() == 1);
  CHECK(d[0].step == 3);
  CHECK(d[0].rel == doctest::Approx(0.25));
  // Both NaN: the same.
  CHECK(diff_grad_dumps({b}, {b}, 10).at(0).rel == 0);
}

TEST_CASE("diff_grad_dumps says which dump lacks a tensor or a step, and gives the other's norm") {
  // The rows read "missing  A 0  B 0  rel inf", not saying which file lacked it.
  const std::string w = R"({"name": "w", "norm": 2})", v = R"({"name": "v", "norm": 3})";
  const std::vector<nlohmann::json> a = {dump_step(0, "[" + w + ", " + v + "]"), dump_step(1, "[" + w + "]")};
  const std::vector<nlohmann::json> b = {dump_step(0, "[" + w + "]"), dump_step(2, "[" + v + "]", 4.0)};
  const auto d = diff_grad_dumps(a, b, 100);
  std::vector<std::string> rows;
  for (const DumpDifference& x : d)
    if (x.rel == std::numeric_limits<double>::infinity())
      rows.push_back(std::to_string(x.step) + " " + x.name + " " + x.field + " " + (std::isnan(x.a) ? "-" : std::to_string(x.a)) +
                     " " + (std::isnan(x.b) ? "-" : std::to_string(x.b)));
  std::sort(rows.begin(), rows.end());
  CHECK(rows == std::vector<std::string>{"0 v missing in B 3.000000 -", "1 (loss) missing in B 1.000000 -",
                                         "1 w missing in B 2.000000 -", "2 (loss) missing in A - 4.000000",
                                         "2 v missing in A - 3.000000"});
}

TEST_CASE("a dump with a step twice or a tensor twice in a step is refused, naming the step and the tensor") {
  // Merged silently before: the last one won in diff, summarize counted both.
  const std::string w = R"({"name": "w", "norm": 2})", w2 = R"({"name": "w", "norm": 5})";
  const std::vector<nlohmann::json> twice = {dump_step(0, "[" + w + "]"), dump_step(7, "[" + w + "]"),
                                             dump_step(7, "[" + w2 + "]")};
  CHECK_THROWS_WITH_AS(summarize_grad_dump(twice),
                       "summarize_grad_dump: malformed gradient dump: step 7 appears twice (step objects 2 and 3 of 3)",
                       IOError);
  CHECK_THROWS_WITH_AS(diff_grad_dumps({dump_step(7, "[" + w + "]")}, twice, 5),
                       "diff_grad_dumps: malformed gradient dump B: step 7 appears twice (step objects 2 and 3 of 3)",
                       IOError);
  const std::vector<nlohmann::json> names = {dump_step(4, "[" + w + ", " + R"({"name": "v", "norm": 1})" + ", " + w2 + "]")};
  CHECK_THROWS_WITH_AS(summarize_grad_dump(names),
                       "summarize_grad_dump: malformed gradient dump: step 4: tensor \"w\" appears twice (tensors[0] "
                       "and tensors[2])",
                       IOError);
  CHECK_THROWS_WITH_AS(diff_grad_dumps(names, {dump_step(4, "[" + w + "]")}, 5),
                       "diff_grad_dumps: malformed gradient dump A: step 4: tensor \"w\" appears twice (tensors[0] "
                       "and tensors[2])",
                       IOError);
}

TEST_CASE("a dump whose steps go back is refused by the reader and never written by GradDumpWriter") {
  // summarize took the steps in file order, so a norm series ran backwards.
  const std::string w = R"({"name": "w", "norm": 2})";
  const std::vector<nlohmann::json> back = {dump_step(0, "[" + w + "]"), dump_step(7, "[" + w + "]"),
                                            dump_step(3, "[" + w + "]")};
  CHECK_THROWS_WITH_AS(summarize_grad_dump(back),
                       "summarize_grad_dump: malformed gradient dump: step 3 comes after step 7 (step objects 2 and 3 "
                       "of 3); a dump's steps increase, as tmem writes them",
                       IOError);
  const std::string path = (std::filesystem::temp_directory_path() / "tmem_dump_order.jsonl").string();
  {
    GradDumpWriter out(path);
    out.write_step(2, 1.0, {{"w", zeros({2})}});
    CHECK_THROWS_WITH_AS(out.write_step(2, 1.0, {{"w", zeros({2})}}),
                         "GradDumpWriter::write_step: expected a step after 2 (a dump's steps increase), but got step 2",
                         ValueError);
    out.write_step(5, 1.0, {{"w", zeros({2})}});
  }
  GradDumpWriter resumed(path, 4);  // keeps step 2, drops 5
  CHECK_THROWS_WITH_AS(resumed.write_step(3, 1.0, {{"w", zeros({2})}}),
                       "GradDumpWriter::write_step: expected a step >= 4 (a dump's steps increase), but got step 3",
                       ValueError);
  resumed.write_step(4, 1.0, {{"w", zeros({2})}});
  const std::vector<nlohmann::json> steps = read_grad_dump(path);
  REQUIRE(steps.size() == 2);
  CHECK((steps[0]["step"] == 2 && steps[1]["step"] == 4));
  std::filesystem::remove(path);
}

TEST_CASE("summarize_grad_dump refuses a negative norm naming the step and the tensor") {
  // -1 and -1e308 were summarized and flagged "ok".
  for (const std::string bad : {"-1", "-1e+308", "\"-Infinity\"", "-1e-300"}) {
    CAPTURE(bad);
    const auto s = dump_step(3, R"([{"name": "w", "norm": 1}, {"name": "v", "norm": )" + bad + "}]");
    CHECK_THROWS_WITH_AS(summarize_grad_dump({s}),
                         ("summarize_grad_dump: malformed gradient dump: step 3, tensor \"v\": \"norm\" is " + bad +
                          ", not a number >= 0, \"NaN\" or \"Infinity\"").c_str(),
                         IOError);
    CHECK_THROWS_WITH_AS(diff_grad_dumps({s}, {s}, 5), doctest::Contains("step 3, tensor \"v\": \"norm\" is "), IOError);
  }
  const auto text = dump_step(3, R"([{"name": "w", "norm": "big"}])");
  CHECK_THROWS_WITH_AS(summarize_grad_dump({text}),
                       "summarize_grad_dump: malformed gradient dump: step 3, tensor \"w\": \"norm\" is \"big\", not a "
                       "number >= 0, \"NaN\" or \"Infinity\"",
                       IOError);
  // What the writer writes: finite norms >= 0 (1e308 is one), "NaN", "Infinity".
  const auto good = dump_step(3, R"([{"name": "a", "norm": 1e308}, {"name": "b", "norm": "NaN"},
                                     {"name": "c", "norm": "Infinity"}, {"name": "d", "norm": 0}])");
  const auto series = summarize_grad_dump({good});
  REQUIRE(series.size() == 4);
  CHECK(series[0].norms == std::vector<double>{1e308});
  CHECK(series[0].nonfinite_norms == 0);
  CHECK(series[1].nonfinite_norms == 1);
  CHECK(series[2].nonfinite_norms == 1);
  CHECK(series[3].vanishing);
}

TEST_CASE("a step or tensor without a field is named with the field, not with the JSON library's text") {
  // It was "malformed gradient dump: [json.exception.out_of_range.403] key 'name' not found".
  using nlohmann::json;
  const auto check = [](const json& step, const std::string& expected) {
    CAPTURE(step.dump());
    try {
      summarize_grad_dump({dump_step(0, R"([{"name": "w", "norm": 1}])"), step});
      FAIL("no error");
    } catch (const IOError& e) {
      CHECK(std::string(e.what()) == "summarize_grad_dump: malformed gradient dump: " + expected);
      CHECK(std::string(e.what()).find("json.exception") == std::string::npos);
    }
  };
  check(dump_step(5, R"([{"name": "w", "norm": 1}, {"shape": [2], "norm": 1}])"), "step 5: tensors[1] has no \"name\" field");
  check(dump_step(5, R"([{"name": "w", "shape": [2]}])"), "step 5, tensor \"w\" has no \"norm\" field");
  check(dump_step(5, R"([{"name": 12, "norm": 1}])"), "step 5: tensors[0]'s \"name\" is 12, not a string");
  check(dump_step(5, R"([7])"), "step 5: tensors[0] is a JSON number, not an object");
  check(json::parse(R"({"step": 5, "tensors": 3})"), "step 5: \"tensors\" is a JSON number, not an array");
  check(json::parse(R"({"step": 5})"), "step 5 has no \"tensors\" field");
  check(json::parse(R"({"tensors": []})"), "step object 2 of 2 has no \"step\" field");
  check(json::parse(R"("text")"), "step object 2 of 2 is a JSON string, not an object");
  check(dump_step(5, R"([{"name": "w", "norm": 1, "mean": [1]}])"),
        "step 5, tensor \"w\": \"mean\" is [1], not a number, \"NaN\", \"Infinity\" or \"-Infinity\"");
  check(dump_step(5, R"([{"name": "w", "norm": 1, "shape": [2, -1]}])"),
        "step 5, tensor \"w\": \"shape\" is [2,-1], not a list of integers >= 0");
  json bad_loss = dump_step(5, "[]");
  bad_loss["loss"] = "low";
  check(bad_loss, "step 5: \"loss\" is \"low\", not a number, \"NaN\", \"Infinity\" or \"-Infinity\"");
}
