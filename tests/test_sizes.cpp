// Size arithmetic is checked: a shape whose element or byte count overflows
// int64 is a ShapeError naming it (not a 0-byte tensor read out of bounds),
// a crafted checkpoint with such a shape is an IOError naming the file, and
// var with correction >= N follows PyTorch (inf or NaN, never negative).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "tmem/core/rng.h"
#include "tmem/core/safetensors.h"
#include "tmem/ops/cpu/scratch.h"
#include "test_util.h"

using namespace tmem;

namespace {

// A safetensors file of one tensor "w" with the given header fields and no data.
std::string crafted_checkpoint(const std::string& name, const std::string& dtype, const std::string& shape) {
  std::string h = "{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}}";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  const std::string path = test::tmp_path(name);
  test::write_all(path, bytes + h);
  return path;
}

}  // namespace

TEST_CASE("sizes: a shape whose element count overflows int64 is a ShapeError naming it") {
  const int64_t big = int64_t{1} << 62;
  CHECK_THROWS_WITH_AS(zeros({big, 4}), doctest::Contains("[4611686018427387904,4]"), ShapeError);
  CHECK_THROWS_WITH_AS(empty({big, big}), doctest::Contains("[4611686018427387904,4611686018427387904]"), ShapeError);
  CHECK_THROWS_AS(numel_of({big, 2, 2}), ShapeError);
  CHECK(numel_of({big, big, 0}) == 0);  // a 0 dim: no elements, however large the others
  CHECK(numel_of({}) == 1);
}

TEST_CASE("sizes: a negative dim is a ShapeError naming the factory called and the shape") {
  CHECK_THROWS_WITH_AS(empty({-1, 2}), "empty: negative dimension in shape [-1,2]", ShapeError);
  CHECK_THROWS_WITH_AS(zeros({-1, 2}), "zeros: negative dimension in shape [-1,2]", ShapeError);
  CHECK_THROWS_WITH_AS(ones({3, -2}), "ones: negative dimension in shape [3,-2]", ShapeError);
  CHECK_THROWS_WITH_AS(full({-5}, 2.0), "full: negative dimension in shape [-5]", ShapeError);
  CHECK_THROWS_WITH_AS(full_int({-5}, 2), "full_int: negative dimension in shape [-5]", ShapeError);
  Generator g(1);
  CHECK_THROWS_WITH_AS(rand({-1}, 0.0, 1.0, DType::Float32, g), "rand: negative dimension in shape [-1]", ShapeError);
  CHECK_THROWS_WITH_AS(randn({2, -1}, 0.0, 1.0, DType::Float32, g), "randn: negative dimension in shape [2,-1]",
                       ShapeError);
  CHECK_THROWS_WITH_AS(randint({-3}, 5, g), "randint: negative dimension in shape [-3]", ShapeError);
  // A shape whose element count overflows int64 names the factory too.
  CHECK_THROWS_WITH_AS(randn({int64_t{1} << 40, int64_t{1} << 40}, 0.0, 1.0, DType::Float32, g),
                       "randn: shape [1099511627776,1099511627776] has more elements than an int64 can count", ShapeError);
}

TEST_CASE("sizes: a shape whose byte count overflows int64 is a ShapeError") {
  const int64_t n = int64_t{1} << 61;  // fits as elements, but 8 bytes each overflow
  CHECK_THROWS_WITH_AS(empty({n}, DType::Float64), doctest::Contains("bytes"), ShapeError);
}

TEST_CASE("sizes: a crafted checkpoint of shape [2^62, 4] is an IOError naming the file") {
  const std::string a = crafted_checkpoint("tmem_sizes_elems.safetensors", "F32", "[4611686018427387904,4]");
  CHECK_THROWS_WITH_AS(load_safetensors(a), doctest::Contains("tmem_sizes_elems.safetensors"), IOError);
  const std::string b = crafted_checkpoint("tmem_sizes_bytes.safetensors", "F64", "[2305843009213693952]");
  CHECK_THROWS_WITH_AS(load_safetensors(b), doctest::Contains("tmem_sizes_bytes.safetensors"), IOError);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST_CASE("sizes: var with correction >= N is inf or NaN as in PyTorch, never negative") {
  Tensor x = tensor({1.0, 2.0}, {2}, DType::Float64);
  CHECK(var(x, {}, 1).item() == doctest::Approx(0.5));
  CHECK(std::isinf(var(x, {}, 2).item()));
  CHECK(var(x, {}, 2).item() > 0);
  CHECK(std::isinf(var(x, {}, 5).item()));
  CHECK(std::isnan(var(tensor({3.0, 3.0}, {2}, DType::Float64), {}, 2).item()));
}

// /proc/meminfo's value for key in bytes (0 when missing).
int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb) {
    if (name == key) return kb * 1024;
    std::getline(in, unit);
  }
  return 0;
}

// Linux would hand such a block out and kill the process when it is written.
TEST_CASE("sizes: a block beyond the system's available memory is refused up front") {
  const int64_t avail = meminfo_bytes("MemAvailable:") + meminfo_bytes("SwapFree:");
  REQUIRE(avail > 0);
  // 128 MiB past what is free: malloc gives it (the kernel's overcommit
  // refuses only what exceeds RAM + swap), but writing it all would not fit.
  const int64_t floats = (avail + (int64_t{128} << 20)) / 4;
  REQUIRE(floats * 4 < meminfo_bytes("MemTotal:") + meminfo_bytes("SwapTotal:"));
  CHECK_THROWS_WITH_AS(empty({floats}), doctest::Contains(" GiB available and keeps 0.25 GiB of it in reserve ("),
                       OutOfMemoryError);
  CHECK(empty({int64_t{16} << 20}).numel() == int64_t{16} << 20);  // 64 MiB: available
}

TEST_CASE("sizes: memory the system cannot give is a tmem error naming the size, also for an op's scratch") {
  // 2^50 bytes: more than any address space holds, so the allocation fails.
  CHECK_THROWS_WITH_AS(empty({int64_t{1} << 48}),
                       doctest::Contains("empty: no memory for a float32 tensor of shape [281474976710656] on cpu: cpu "
                                         "allocator: out of memory: cannot allocate 1125899906842624 bytes (1048576.00 GiB)"),
                       OutOfMemoryError);
  // Scratch of the OpenMP regions is allocated before the region, where an
  // exception can reach the caller.
  CHECK_THROWS_WITH_AS(cpu::ThreadScratch<float>("gaussian_splat", int64_t{1} << 50),
                       doctest::Contains("gaussian_splat: scratch memory: cpu allocator: out of memory"), OutOfMemoryError);
  CHECK_THROWS_WITH_AS(cpu::Scratch<float>("convlstm3d_cell", int64_t{1} << 50),
                       doctest::Contains("convlstm3d_cell: scratch memory: cpu allocator: out of memory"), OutOfMemoryError);
  CHECK_THROWS_WITH_AS(cpu::Scratch<double>("convlstm3d_cell", int64_t{1} << 62),
                       doctest::Contains("convlstm3d_cell: scratch of 4611686018427387904 values overflows a size"), Error);
  cpu::ThreadScratch<double> ok("gaussian_splat", 3);
  CHECK(ok.slot()[2] == 0.0);
}
