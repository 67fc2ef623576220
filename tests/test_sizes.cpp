// Size arithmetic is checked: a shape whose element or byte count overflows
// int64 is a ShapeError naming it (not a 0-byte tensor read out of bounds),
// a crafted checkpoint with such a shape is an IOError naming the file, and
// var with correction >= N follows PyTorch (inf or NaN, never negative).
#include <cmath>
#include <cstdint>
#include <filesystem>

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

TEST_CASE("sizes: memory the system cannot give is a tmem error naming the size, also for an op's scratch") {
  // 2^50 bytes: more than any address space holds, so the allocation fails.
  CHECK_THROWS_WITH_AS(empty({int64_t{1} << 48}),
                       doctest::Contains("empty: no memory for a float32 tensor of shape [281474976710656] on cpu: cpu "
                                         "allocator: out of memory: cannot allocate 1125899906842624 bytes ("),
                       OutOfMemoryError);
  // Scratch of the OpenMP regions is allocated before the region, where an
  // exception can reach the caller.
  CHECK_THROWS_WITH_AS(cpu::ThreadScratch<float>("gaussian_splat", int64_t{1} << 50),
                       doctest::Contains("gaussian_splat: scratch memory: cpu allocator: out of memory"), OutOfMemoryError);
  cpu::ThreadScratch<double> ok("gaussian_splat", 3);
  CHECK(ok.slot()[2] == 0.0);
}
