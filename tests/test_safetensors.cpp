// Checkpoint files: round trip, atomic write, and clear errors on corruption.
#include <filesystem>
#include <fstream>

#include "tmem/core/safetensors.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::read_all;
using tmem::test::tmp_path;
using tmem::test::write_all;
namespace fs = std::filesystem;

namespace {

}  // namespace

TEST_CASE("safetensors: round trip of float32, float64 and int64 with metadata") {
  std::string p = tmp_path("tmem_st_roundtrip.safetensors");
  Tensor a = transpose(reshape(arange(0, 6), {2, 3}), 0, 1);  // non-contiguous view
  Tensor b = tensor({1.5, -2.25}, {2}, DType::Float64);
  Tensor c = tensor_int({7, -9, 11}, {3});
  save_safetensors(p, {{"a", a}, {"b", b}, {"c", c}}, {{"step", "12"}});
  CHECK(fs::is_regular_file(p));
  SafetensorsFile f = load_safetensors(p);
  CHECK(f.metadata.at("step") == "12");
  CHECK(f.tensors.at("a").shape() == Shape{3, 2});
  CHECK(f.tensors.at("a").to_vector() == a.to_vector());
  CHECK(f.tensors.at("b").dtype() == DType::Float64);
  CHECK(f.tensors.at("b").to_vector() == b.to_vector());
  CHECK(f.tensors.at("c").to_int_vector() == std::vector<int64_t>{7, -9, 11});
  // The header is 8-byte aligned JSON after a little-endian length.
  std::string raw = read_all(p);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
  CHECK(hlen % 8 == 0);
  CHECK(raw[8] == '{');
  fs::remove(p);
}

TEST_CASE("safetensors: corrupt files raise IOError naming the file") {
  std::string p = tmp_path("tmem_st_corrupt.safetensors");
  save_safetensors(p, {{"w", ones({4, 4})}});
  std::string good = read_all(p);

  write_all(p, good.substr(0, good.size() - 10));  // truncated data
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("tmem_st_corrupt"), IOError);
  write_all(p, good.substr(0, 5));  // no header length
  CHECK_THROWS_AS(load_safetensors(p), IOError);
  std::string huge = good;
  huge[7] = '\x7f';  // absurd header length
  write_all(p, huge);
  CHECK_THROWS_AS(load_safetensors(p), IOError);
  std::string bad_json = good;
  bad_json[8] = '[';
  bad_json[9] = '[';
  write_all(p, bad_json);
  CHECK_THROWS_AS(load_safetensors(p), IOError);
  CHECK_THROWS_AS(load_safetensors(tmp_path("tmem_st_does_not_exist")), IOError);
  fs::remove(p);
}

TEST_CASE("safetensors: a failed save leaves the previous checkpoint intact") {
  std::string dir = tmp_path("tmem_st_dir");
  fs::create_directories(dir);
  std::string p = dir + "/ckpt.safetensors";
  save_safetensors(p, {{"w", full({2}, 3.0)}});
  {
    tmem::test::FileSizeLimit limit(256);  // the new file cannot be written whole
    CHECK_THROWS_AS(save_safetensors(p, {{"w", full({1000}, 4.0)}}), IOError);
  }
  CHECK(load_safetensors(p).tensors.at("w").to_vector() == std::vector<double>{3, 3});
  fs::remove_all(dir);
}

TEST_CASE("safetensors: a deeply nested or binary header is an IOError, cut short in the message") {
  const std::string path = test::tmp_path("tmem_st_hostile.safetensors");
  auto write_header = [&](const std::string& h) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((h.size() >> (8 * i)) & 0xFF);
    test::write_all(path, bytes + h);
  };
  write_header(std::string(100000, '['));
  CHECK_THROWS_WITH_AS(load_safetensors(path), doctest::Contains("header: JSON nested deeper than 64 levels"), IOError);
  // A tensor name and a dtype of 10,000 bytes with binary ones among them.
  const std::string name = "n\\u0007" + std::string(9998, 'n'), dtype(10000, 'd');  // JSON text: n, byte 7, n...
  write_header(R"({")" + name + R"(": {"dtype": ")" + dtype + R"(", "shape": [1], "data_offsets": [0, 4]}})");
  const std::string err = test::error_of<IOError>([&] { load_safetensors(path); });
  CHECK(err.find("unsupported dtype") != std::string::npos);
  CHECK(err.find("n\\x07nnn") != std::string::npos);
  CHECK(err.size() < 600);
  std::filesystem::remove(path);
}
