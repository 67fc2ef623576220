// JSON gradient dumps: statistics, values, and exact round trips of
// non-finite numbers.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

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
  CHECK_THROWS_WITH_AS(read_grad_dump(test::tmp_path("tmem_no_such_dump.jsonl")),
                       doctest::Contains("is not a regular file"), IOError);
}
