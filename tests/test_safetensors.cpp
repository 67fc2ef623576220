// Checkpoint files: round trip, atomic write, and clear errors on corruption.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "fixture.h"
#include "tmem/core/safetensors.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::read_all;
using tmem::test::tmp_path;
using tmem::test::write_all;
namespace fs = std::filesystem;

namespace {

// A safetensors file at p from its header text (padded to 8 bytes) and data.
void write_raw(const std::string& p, std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_all(p, len + header + data);
}

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

TEST_CASE("safetensors: the checksum is zlib's CRC-32 of the header and data, and catches a changed byte") {
  std::string p = tmp_path("tmem_st_crc.safetensors");
  const Tensor w = tensor({1, 2, 3, 4}, {4});
  // Expected values from Python: zlib.crc32(header_json + data), the header
  // as compact JSON with sorted keys and without the checksum key.
  save_safetensors(p, {{"w", w}});
  CHECK(read_all(p).find("\"tmem_crc32\":\"31cda90f\"") != std::string::npos);
  save_safetensors(p, {{"w", w}}, {{"step", "12"}});
  const std::string good = read_all(p);
  CHECK(good.find("\"tmem_crc32\":\"beb9238e\"") != std::string::npos);
  SafetensorsFile f = load_safetensors(p);
  CHECK(f.metadata == StringMap{{"step", "12"}});  // the checksum is the file's, not the caller's
  CHECK(f.checksummed);
  CHECK(f.tensors.at("w").to_vector() == w.to_vector());

  std::string data_flip = good;
  data_flip[data_flip.size() - 1] ^= 0x01;  // the last float's top byte
  write_all(p, data_flip);
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("checksum does not match (stored beb9238e, computed "), IOError);
  std::string meta_change = good;
  meta_change.replace(meta_change.find("\"12\""), 4, "\"13\"");  // a step the header still parses
  write_all(p, meta_change);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("the file was changed or damaged"), IOError);

  // A file without the key (another tool's, an older tmem's) loads unchecked.
  write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string("\0\0\x80\x3f", 4));
  const SafetensorsFile unchecked = load_safetensors(p);
  CHECK(unchecked.tensors.at("w").to_vector() == std::vector<double>{1.0});
  CHECK_FALSE(unchecked.checksummed);
  CHECK_THROWS_WITH_AS(save_safetensors(p, {{"w", w}}, {{"tmem_crc32", "0"}}),
                       doctest::Contains("the metadata key tmem_crc32 is the file's checksum"), IOError);
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

TEST_CASE("safetensors: a file written from PyTorch loads F16, BF16 as float32 and I32, BOOL as int64") {
  // tests/fixtures/torch_dtypes.safetensors and the values torch gives its
  // tensors: tools/fixtures/safetensors_torch.py.
  const nlohmann::json expected = tmem::test::load_fixture("safetensors_torch");
  const SafetensorsFile f = load_safetensors(std::string(TMEM_FIXTURE_DIR) + "/torch_dtypes.safetensors");
  CHECK(f.metadata.at("producer") == "tools/fixtures/safetensors_torch.py");
  CHECK(f.tensors.size() == expected.size());
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key(), st = it.value().at("st_dtype");
    INFO(name);
    const Tensor& t = f.tensors.at(name);
    const DType want = st == "F64" ? DType::Float64
                       : st == "F32" || st == "F16" || st == "BF16" ? DType::Float32
                                                                    : DType::Int64;
    CHECK(t.dtype() == want);
    CHECK(t.shape() == it.value().at("value").at("shape").get<Shape>());
    const std::vector<double> got = t.to_vector(), ref = tmem::test::fixture_values(it.value().at("value"));
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(i);
      CHECK(((std::isnan(got[i]) && std::isnan(ref[i])) || got[i] == ref[i]));
      if (got[i] == 0) CHECK(std::signbit(got[i]) == std::signbit(ref[i]));
    }
  }
  // Spot checks of the conversions themselves.
  const std::vector<double> half = f.tensors.at("half").to_vector();
  CHECK(half[2] == 65504.0);                 // the largest half
  CHECK(half[4] == std::ldexp(1.0, -24));    // the smallest subnormal
  CHECK(half[5] == -std::ldexp(1.0, -15));   // a negative subnormal
  CHECK(std::signbit(half[6]));              // -0
  CHECK(half[7] == std::numeric_limits<double>::infinity());
  CHECK(f.tensors.at("int32").to_int_vector() ==
        std::vector<int64_t>{-2147483648LL, -1, 0, 1, 7, 2147483647LL});
  CHECK(f.tensors.at("mask").to_int_vector() == std::vector<int64_t>{1, 0, 1, 0, 0, 1});
  CHECK(f.tensors.at("int64").to_int_vector() ==
        std::vector<int64_t>{5, std::numeric_limits<int64_t>::min()});
  CHECK(f.tensors.at("scalar_half").shape().empty());
}

TEST_CASE("safetensors: an unknown dtype or a size that does not fit the dtype is an IOError") {
  std::string p = tmp_path("tmem_st_dtypes.safetensors");
  auto write = [&](const std::string& header, const std::string& data) { write_raw(p, header, data); };
  write(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "ab");
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("unsupported dtype \"U8\""), IOError);
  write(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,2]}})", "ab");  // 2 halves need 4 bytes
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("bad data offsets [0, 2] (its shape and dtype take 4 bytes; the data section holds 2)"),
                       IOError);
  write(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", std::string(16, '\0'));  // 16 bytes, past the end
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("bad data offsets [8, 24] (its shape and dtype take 16 bytes; the data section "
                                         "holds 16)"),
                       IOError);
  write(R"({"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", std::string("\x80\x3f\x00\xc0", 4));
  CHECK(load_safetensors(p).tensors.at("x").to_vector() == std::vector<double>{1.0, -2.0});
  fs::remove(p);
}

TEST_CASE("safetensors: a fractional shape, overlapping or missing data bytes are IOErrors, as the reference loader's") {
  std::string p = tmp_path("tmem_st_layout.safetensors");
  auto write = [&](const std::string& header, const std::string& data) { write_raw(p, header, data); };
  const std::string eight(8, '\0'), sixteen(16, '\0');
  write(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("\"x\" has a shape that is not a list of integers in [0, 2^63): [2.5]"),
                       IOError);
  write(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight);
  CHECK_THROWS_AS(load_safetensors(p), IOError);
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
        sixteen);
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("\"b\" starts at byte 4 of the data, but the tensors before it end at 8 (overlapping data)"),
                       IOError);
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", sixteen);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("\"a\" starts at byte 8 of the data, but the tensors before it end at 0 (a gap)"),
                       IOError);
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", sixteen);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("the tensors cover 8 of the 16 data bytes"), IOError);
  write(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
        sixteen);
  CHECK(load_safetensors(p).tensors.size() == 2);  // any order of the header
  fs::remove(p);
}

TEST_CASE("safetensors: fractional or negative data_offsets and a dim past int64 are IOErrors naming them") {
  // data_offsets [0, 4.5] loaded as [0, 4]; a dim of 2^64 - 1 was reported as
  // the shape [-1].
  std::string p = tmp_path("tmem_st_offsets.safetensors");
  auto write = [&](const std::string& header, const std::string& data) { write_raw(p, header, data); };
  const std::string four(4, '\0');
  write(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("\"x\" has data_offsets that are not two integers >= 0: [0,4.5]"), IOError);
  write(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4.0]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("[0.0,4.0]"), IOError);
  write(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("not two integers >= 0: [-4,0]"), IOError);
  write(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains("[0,4,8]"), IOError);
  write(R"({"x":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})", "");
  CHECK_THROWS_WITH_AS(load_safetensors(p),
                       doctest::Contains("not a list of integers in [0, 2^63): [18446744073709551615]"), IOError);
  write(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four);
  CHECK(load_safetensors(p).tensors.at("x").shape() == Shape{1});
  // Metadata that is not text: nlohmann's type_error named no entry.
  write(R"({"__metadata__":{"model":"m","step":5},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains(": __metadata__ entry \"step\" is 5, not a string"),
                       IOError);
  write(R"({"__metadata__":[1],"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four);
  CHECK_THROWS_WITH_AS(load_safetensors(p), doctest::Contains(": __metadata__ is not an object of strings"), IOError);
  fs::remove(p);
}
