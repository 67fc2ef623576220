// Checked file output (core/file_io.h): a failed write is an IOError naming
// the file and the old file survives. Failures are injected with a file size
// limit (RLIMIT_FSIZE), which fails write() with EFBIG as a full disk fails it
// with ENOSPC, and works for root too.
#include <algorithm>
#include <filesystem>

#include <sys/stat.h>

#include "tmem/core/file_io.h"
#include "tmem/core/json_dump.h"
#include "tmem/core/safetensors.h"
#include "tmem/tools/svg_plot.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::FileSizeLimit;
using tmem::test::read_all;
using tmem::test::tmp_path;
namespace fs = std::filesystem;

namespace {

// A fresh empty directory under the temp folder.
std::string fresh_dir(const std::string& name) {
  const std::string d = tmp_path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The names in dir other than `keep` (left-over temporary files).
std::vector<std::string> others_in(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("file_io: write_file_atomic replaces the file and leaves no temporary file") {
  const std::string dir = fresh_dir("tmem_fio_basic"), p = dir + "/result.json";
  write_file_atomic(p, "first\n");
  write_file_atomic(p, "second\n");
  CHECK(read_all(p) == "second\n");
  CHECK(others_in(dir, "result.json").empty());
  append_file_atomic(p, "third\n");
  CHECK(read_all(p) == "second\nthird\n");
  fs::remove_all(dir);
}

TEST_CASE("file_io: a path with a NUL byte is refused by every reader and writer, which would cut it there") {
  const std::string dir = fresh_dir("tmem_fio_nul"), cut = dir + "/x", p = cut + std::string(1, '\0') + "y.st";
  write_file_atomic(cut, "keep\n");
  const std::string nul_at = "holds a NUL byte (at " + std::to_string(cut.size()) + ")";
  const doctest::Contains names_nul(nul_at.c_str());
  CHECK_THROWS_WITH_AS(write_file_atomic(p, "data"), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(append_file_atomic(p, "data"), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(AppendFileWriter(p, true), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(ensure_writable_dir(p), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(save_safetensors(p, {{"a", ones({1})}}), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(load_safetensors(p), names_nul, ValueError);
  CHECK_THROWS_WITH_AS(read_json_file(p, "config"), doctest::Contains("config: the path \""), ValueError);
  CHECK_THROWS_WITH_AS(read_grad_dump(p), names_nul, ValueError);
  CHECK(read_all(cut) == "keep\n");
  CHECK(others_in(dir, "x").empty());
  fs::remove_all(dir);
}

TEST_CASE("file_io: a write that fails (file size limit) throws IOError naming the file, the old file survives") {
  const std::string dir = fresh_dir("tmem_fio_full"), p = dir + "/result.json";
  write_file_atomic(p, "old results\n");
  const std::string big(64 * 1024, 'x');
  {
    FileSizeLimit limit(1024);
    CHECK_THROWS_WITH_AS(write_file_atomic(p, big), doctest::Contains("result.json"), IOError);
    CHECK_THROWS_WITH_AS(append_file_atomic(p, big), doctest::Contains("result.json"), IOError);
  }
  CHECK(read_all(p) == "old results\n");
  CHECK(others_in(dir, "result.json").empty());
  fs::remove_all(dir);
}

TEST_CASE("file_io: a FIFO is refused and stays, a symbolic link stays and its file is replaced, permissions are kept") {
  // Each was replaced by a plain file: `--profile /dev/null` run as root
  // would have taken /dev/null from the whole machine.
  const std::string dir = fresh_dir("tmem_fio_special");
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(write_file_atomic(fifo, "x"),
                       doctest::Contains(("cannot write " + fifo + ": not a regular file (a device, a FIFO or a socket)").c_str()),
                       IOError);
  CHECK(fs::is_fifo(fifo));
  write_file_atomic(dir + "/target.json", "old\n");
  fs::create_symlink("target.json", dir + "/link.json");
  write_file_atomic(dir + "/link.json", "new\n");
  CHECK(fs::is_symlink(dir + "/link.json"));
  CHECK(read_all(dir + "/target.json") == "new\n");
  fs::permissions(dir + "/target.json", fs::perms::owner_read | fs::perms::owner_write);
  write_file_atomic(dir + "/target.json", "newer\n");
  CHECK(fs::status(dir + "/target.json").permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(others_in(dir, "target.json").size() == 2);  // the link and the FIFO, no temporary file
  // A dangling link (through a second link) gets its file made, and stays a
  // link; one into a missing directory fails, as open() would.
  fs::create_symlink("link2.json", dir + "/dangling.json");
  fs::create_symlink(dir + "/made.json", dir + "/link2.json");
  write_file_atomic(dir + "/dangling.json", "made\n");
  CHECK(fs::is_symlink(dir + "/dangling.json"));
  CHECK(fs::is_symlink(dir + "/link2.json"));
  CHECK(read_all(dir + "/made.json") == "made\n");
  fs::create_symlink("no/such/dir/x.json", dir + "/nowhere.json");
  CHECK_THROWS_WITH_AS(write_file_atomic(dir + "/nowhere.json", "x"),
                       doctest::Contains(("creating a temporary file in " + dir + "/no/such/dir").c_str()), IOError);
  CHECK(fs::is_symlink(dir + "/nowhere.json"));
  fs::create_symlink("loop.json", dir + "/loop.json");
  CHECK_THROWS_WITH_AS(write_file_atomic(dir + "/loop.json", "x"), doctest::Contains("too many levels of symbolic links"),
                       IOError);
  fs::remove_all(dir);
}

TEST_CASE("file_io: a file name of 255 bytes is written, its temporary file's name cut to fit") {
  const std::string dir = fresh_dir("tmem_fio_long"), name = std::string(255, 'n');
  write_file_atomic(dir + "/" + name, "long\n");
  CHECK(read_all(dir + "/" + name) == "long\n");
  CHECK(others_in(dir, name).empty());
  fs::remove_all(dir);
}

TEST_CASE("file_io: a missing directory, a directory as target and a bad run directory are IOErrors") {
  const std::string dir = fresh_dir("tmem_fio_bad");
  CHECK_THROWS_WITH_AS(write_file_atomic(dir + "/no/such/dir/x.json", "x"), doctest::Contains("x.json"), IOError);
  fs::create_directory(dir + "/sub");
  CHECK_THROWS_WITH_AS(write_file_atomic(dir + "/sub", "x"), doctest::Contains("is a directory"), IOError);
  write_file_atomic(dir + "/file", "x");
  CHECK_THROWS_WITH_AS(ensure_writable_dir(dir + "/file/run"), doctest::Contains("file/run"), IOError);
  ensure_writable_dir(dir + "/run/cell");
  CHECK(fs::is_directory(dir + "/run/cell"));
  CHECK(fs::is_empty(dir + "/run/cell"));
  fs::remove_all(dir);
}

TEST_CASE("file_io: AtomicFileWriter without commit leaves the target untouched") {
  const std::string dir = fresh_dir("tmem_fio_abort"), p = dir + "/ckpt";
  write_file_atomic(p, "old");
  {
    AtomicFileWriter w(p);
    w.write("new bytes");
  }
  CHECK(read_all(p) == "old");
  CHECK(others_in(dir, "ckpt").empty());
  fs::remove_all(dir);
}

TEST_CASE("file_io: checkpoints, plots and gradient dumps fail loudly on a full disk") {
  const std::string dir = fresh_dir("tmem_fio_users");
  const std::string ckpt = dir + "/checkpoint.safetensors", svg = dir + "/loss.svg", dump = dir + "/grads.jsonl";
  save_safetensors(ckpt, {{"w", full({2}, 3.0)}});
  tools::write_svg_line_plot(svg, {{"a", {0, 1}, {1, 2}}});
  const std::string old_svg = read_all(svg);
  GradDumpWriter w(dump);
  {
    FileSizeLimit limit(4096);
    CHECK_THROWS_WITH_AS(save_safetensors(ckpt, {{"w", full({10000}, 4.0)}}), doctest::Contains("checkpoint.safetensors"),
                         IOError);
    std::vector<double> xs(2000), ys(2000);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i), ys[i] = std::sin(0.01 * static_cast<double>(i));
    CHECK_THROWS_WITH_AS(tools::write_svg_line_plot(svg, {{"long", xs, ys}}), doctest::Contains("loss.svg"), IOError);
    CHECK_THROWS_WITH_AS(w.write_step(0, 1.0, {{"g", ones({1000})}}, true), doctest::Contains("grads.jsonl"), IOError);
  }
  CHECK(load_safetensors(ckpt).tensors.at("w").to_vector() == std::vector<double>{3, 3});
  CHECK(read_all(svg) == old_svg);
  fs::remove_all(dir);
}

TEST_CASE("parse_json: nesting deeper than the limit is an IOError naming the source, never a stack overflow") {
  // 100,000 '[' (issue 15, defect 6): refused at level 65, before the parser
  // builds (and later destroys or dumps) a deep value.
  const std::string deep(100000, '[');
  CHECK_THROWS_WITH_AS(parse_json(deep, "deep.json"), doctest::Contains("deep.json: JSON nested deeper than 64 levels"),
                       IOError);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  CHECK_THROWS_WITH_AS(parse_json(objects, "objects.json"), doctest::Contains("nested deeper than 64"), IOError);
  // Exactly at the limit is fine, one more level is not.
  auto nested = [](int levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); };
  CHECK(parse_json(nested(64), "ok").dump().size() == 129);
  CHECK_THROWS_AS(parse_json(nested(65), "too deep"), IOError);
  CHECK(parse_json(nested(3), "x", 3).is_array());
  CHECK_THROWS_AS(parse_json(nested(4), "x", 3), IOError);
  CHECK(parse_json("{\"a\": [1, {\"b\": null}]}", "x")["a"][1].contains("b"));
}

TEST_CASE("parse_json: a key twice in one object is an IOError, the same key in two objects is not") {
  // {"lr": 1e-3, "lr": 3} trained at 3 (nlohmann keeps the last).
  CHECK_THROWS_WITH_AS(parse_json(R"({"lr": 1e-3, "steps": 4, "lr": 3})", "config.json"),
                       "config.json: the key \"lr\" appears twice in one object", IOError);
  CHECK_THROWS_WITH_AS(parse_json(R"({"a": {"x": 1}, "b": [{"y": 1, "y": 2}]})", "x"),
                       doctest::Contains("the key \"y\" appears twice"), IOError);
  const auto ok = parse_json(R"({"a": {"x": 1, "b": [{"x": 2}, {"x": 3}]}, "x": {"a": 4}, "b": 5})", "ok");
  CHECK(ok["a"]["b"][1]["x"] == 3);
  CHECK(ok["b"] == 5);
}

TEST_CASE("parse_json: text that is not JSON is an IOError naming the source, the bad text cut short") {
  CHECK_THROWS_WITH_AS(parse_json("{\"a\": 1", "cfg.json"), doctest::Contains("cfg.json: not valid JSON (parse error at line 1"),
                       IOError);
  CHECK_THROWS_AS(parse_json("", "empty"), IOError);
  CHECK_THROWS_AS(parse_json("[1] trailing", "trailing"), IOError);
  // The parser stopped at a NUL and ignored the rest: {"a":1} was read from
  // {"a":1}\0{"b":2}, and a safetensors header padded with NULs loaded.
  CHECK_THROWS_WITH_AS(parse_json(std::string("{\"a\":1}\0{\"b\":2}", 15), "cfg.json"),
                       "cfg.json: not valid JSON (a NUL byte at offset 7)", IOError);
  // A huge binary token: the message stays short and printable.
  std::string junk(100000, 'x');
  for (size_t i = 0; i < junk.size(); i += 7) junk[i] = static_cast<char>(0x80 + i % 100);
  const std::string err = test::error_of<IOError>([&] { parse_json(junk, "junk.bin"); });
  CHECK(err.find("junk.bin: not valid JSON") != std::string::npos);
  CHECK(err.size() < 400);
  CHECK(std::all_of(err.begin(), err.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
}
