// tools/svg_plot.h and tools/grads_plot.h: line plots (linear and log y,
// marks, panels) and the picture of a gradient dump.
#include <cmath>
#include <filesystem>

#include "test_util.h"
#include "tmem/core/json_dump.h"
#include "tmem/models/transformer.h"
#include "tmem/nn/tensor_memory.h"
#include "tmem/tools/grads_plot.h"
#include "tmem/tools/svg_plot.h"

using namespace tmem;
using namespace tmem::tools;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("svg_line_plot: one polyline per finite run, escaped labels, a legend") {
  PlotSeries a{"base <1>", {0, 1, 2, 3}, {5, 4, NAN, 2}}, b{"tensor", {0, 1}, {3, 3}};
  std::string svg = svg_line_plot({a, b}, {"loss & curves", "tokens", "nats"});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(count(svg, "<polyline") == 3);  // a is split at its NaN
  CHECK(svg.find("base &lt;1&gt;") != std::string::npos);
  CHECK(svg.find("loss &amp; curves") != std::string::npos);
  CHECK(svg.find("tensor") != std::string::npos);
  CHECK_THROWS_WITH_AS(svg_line_plot({PlotSeries{"bad", {0, 1}, {1}}}), doctest::Contains("bad"), ValueError);
  const std::string path = tmem::test::tmp_path("tmem_plot.svg");
  write_svg_line_plot(path, {b});
  CHECK(tmem::test::read_all(path).find("<polyline") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("svg_line_plot: log y draws whole decades, skips values <= 0, and marks x positions") {
  PlotOptions opt{"norms", "step", "norm"};
  opt.log_y = true;
  opt.marks = {2, 99};  // 99 is outside the x range: not drawn
  const std::string svg = svg_line_plot({PlotSeries{"g", {0, 1, 2, 3}, {1e-3, 0.02, 0, 4}}}, opt);
  CHECK(count(svg, "<polyline") == 2);  // split at the 0
  for (const char* tick : {">1e-3<", ">1e-2<", ">1e-1<", ">1e0<", ">1e1<"}) {
    INFO(tick);
    CHECK(svg.find(tick) != std::string::npos);
  }
  CHECK(svg.find(">1e-4<") == std::string::npos);
  CHECK(count(svg, "stroke-dasharray") == 1);
}

TEST_CASE("svg_panels: the plots side by side in one document, each at its own place") {
  const std::vector<PlotPanel> panels = {{{PlotSeries{"a", {0, 1}, {0, 1}}}, {"first", "x", "y"}},
                                         {{PlotSeries{"b", {0, 1}, {1, 0}}}, {"second", "x", "y"}},
                                         {{PlotSeries{"c", {0, 1}, {1, 1}}}, {"third", "x", "y"}}};
  const std::string svg = svg_panels(panels, 2);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1440\" height=\"880\"", 0) == 0);
  CHECK(svg.find("<svg x=\"0\" y=\"0\"") != std::string::npos);
  CHECK(svg.find("<svg x=\"720\" y=\"0\"") != std::string::npos);
  CHECK(svg.find("<svg x=\"0\" y=\"440\"") != std::string::npos);
  CHECK(count(svg, "<polyline") == 3);
  CHECK_THROWS_AS(svg_panels(panels, 0), ValueError);
}

TEST_CASE("grads plot: a panel per layer with the NaN steps marked, and the memory internals beside them") {
  CHECK(layer_of("backbone.blocks.1.attn.qkv.weight") == "backbone.blocks.1");
  CHECK(layer_of("head.weight") == "head");
  CHECK(layer_of("gamma") == "gamma");
  const std::string path = tmem::test::tmp_path("tmem_grads_plot.jsonl");
  {
    GradDumpWriter w(path);
    const nlohmann::json memory = nlohmann::json::array(
        {{{"layer", 0}, {"gate", 0.2}, {"write_sigma", tensor_summary("write_sigma", full({2, 3, 1}, 0.5))},
          {"read_coords", tensor_summary("read_coords", zeros({2, 3, 3}))},
          {"write_coords", tensor_summary("write_coords", zeros({2, 3, 3}))}}});
    for (int64_t step : {0, 10, 20}) {
      Tensor g = full({2, 2}, 0.1 * static_cast<double>(step + 1));
      if (step == 10) g = full({2, 2}, NAN);
      w.write_step(step, 1.0, {{"backbone.blocks.0.w", g}, {"backbone.blocks.1.w", full({3}, 1.0)}, {"head.w", g}},
                   false, {{"memory", memory}});
    }
  }
  const std::string svg = grad_dump_svg(read_grad_dump(path), "tmem_grads_plot.jsonl");
  CHECK(count(svg, "<svg x=") == 7);  // 3 layers and 4 memory panels
  CHECK(svg.find("tmem_grads_plot.jsonl: backbone.blocks.0") != std::string::npos);
  CHECK(svg.find("memory gates") != std::string::npos);
  CHECK(count(svg, "stroke-dasharray") == 2);  // step 10 in blocks.0 and in head
  CHECK(run_grads_plot(path, "") == 0);
  const std::string out = tmem::test::tmp_path("tmem_grads_plot.svg");
  CHECK(tmem::test::read_all(out) == svg);
  std::filesystem::remove(path);
  std::filesystem::remove(out);
}

TEST_CASE("grads plot: a diverged memory gate is dumped as NaN and drawn as a gap") {
  // A NaN gate went into the dump as JSON null (nlohmann's dump of a NaN
  // double), and the plot refused the file tmem wrote as mistyped.
  Generator gen(1);
  models::BackboneConfig bc;
  bc.dim = 8;
  bc.layers = 1;
  bc.heads = 2;
  bc.max_len = 8;
  models::Backbone backbone(bc, gen);
  REQUIRE(backbone.blocks()[0]->memory);
  {
    NoGradGuard ng;
    fill_data(backbone.blocks()[0]->memory->gamma, NAN);
  }
  const nn::TensorMemoryProbe probe;  // no forward under it: no write_sigma or coordinates
  const nlohmann::json memory = models::memory_internals(backbone, probe);
  REQUIRE(memory.size() == 1);
  CHECK(memory[0]["gate"] == "NaN");
  CHECK(nlohmann::json::parse(memory.dump())[0]["gate"] == "NaN");
  const std::string path = tmem::test::tmp_path("tmem_grads_plot_nan_gate.jsonl");
  {
    GradDumpWriter w(path);
    w.write_step(0, 1.0, {{"head.w", full({2}, 1.0)}}, false, {{"memory", memory}});
  }
  const std::string svg = grad_dump_svg(read_grad_dump(path), "nan_gate");
  CHECK(svg.find("memory gates") != std::string::npos);
  // A layer that is not an integer >= 0 is named, not cast.
  const nlohmann::json bad = {{"step", 0},
                              {"tensors", nlohmann::json::array()},
                              {"memory", {{{"layer", 1e300}, {"gate", 0.5}}}}};
  CHECK_THROWS_WITH_AS(grad_dump_svg({bad}, "bad"), doctest::Contains("\"layer\" is 1e+300"), IOError);
  std::filesystem::remove(path);
}

TEST_CASE("grads plot refuses to write its SVG over the dump it reads, naming both paths") {
  // `cp g.jsonl dump.svg && tmem grads plot dump.svg` replaced the dump by its
  // own picture: the default output (the name with .svg) was the dump.
  namespace fs = std::filesystem;
  const fs::path dir = tmem::test::tmp_path("tmem_grads_plot_self");
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const std::string dump = (dir / "dump.svg").string();
  {
    GradDumpWriter w(dump);
    w.write_step(0, 1.0, {{"head.w", full({2}, 1.0)}});
  }
  const std::string before = tmem::test::read_all(dump);
  REQUIRE(before.find("\"step\":0") != std::string::npos);
  CHECK_THROWS_WITH_AS(run_grads_plot(dump, ""),
                       ("grads plot: the output " + dump + " (the dump's name with .svg) is the dump " + dump +
                        " itself: writing the SVG there would replace it; give --out another file")
                           .c_str(),
                       IOError);
  // --out naming the dump: the same path, another spelling of it, a link to it.
  const std::string same = (dir / "sub" / ".." / "." / "dump.svg").string();
  fs::create_symlink(dump, dir / "link.svg");
  fs::create_hard_link(dump, dir / "hard.svg");
  for (const std::string& out : {dump, same, (dir / "link.svg").string(), (dir / "hard.svg").string()}) {
    CAPTURE(out);
    CHECK_THROWS_WITH_AS(run_grads_plot(dump, out),
                         ("grads plot: --out " + out + " is the dump " + dump +
                          " itself (or a link to it): writing the SVG there would replace it; give --out another file")
                             .c_str(),
                         IOError);
  }
  CHECK(tmem::test::read_all(dump) == before);
  CHECK(fs::is_symlink(dir / "link.svg"));
  // A dump whose .svg name is another file is drawn as before.
  const std::string jsonl = (dir / "g.jsonl").string();
  fs::copy_file(dump, jsonl);
  CHECK(run_grads_plot(jsonl, "") == 0);
  CHECK(tmem::test::read_all(dir / "g.svg").rfind("<svg", 0) == 0);
  CHECK(run_grads_plot(dump, (dir / "out.svg").string()) == 0);
  CHECK(tmem::test::read_all(dump) == before);
  fs::remove_all(dir);
}
