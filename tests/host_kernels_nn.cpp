// Host build of the nn kernels (softmax, log_softmax, layer_norm, embedding,
// cross_entropy, dropout): the functors of cuda/softmax.cuh, layer_norm.cuh,
// embedding.cuh and dropout.cuh run over the index space of the launchers in
// cuda/*.cu (the row programs as tests/host_rows.h runs them). Also the
// parity and error tests of these ops on the stand-in device.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tmem/cuda/dropout.cuh"
#include "tmem/cuda/embedding.cuh"
#include "tmem/cuda/layer_norm.cuh"
#include "tmem/cuda/softmax.cuh"
#include "fake_device.h"
#include "host_kernels.h"
#include "host_rows.h"

namespace tmem::test {

namespace {

// *dst += v: the host's add of EmbeddingScatter (atomicAdd on the device).
struct HostAdd {
  void operator()(float* dst, float v) const { *dst += v; }
};

}  // namespace

// ---- the launchers of cuda/softmax.cu, layer_norm.cu, embedding.cu, loss.cu, dropout.cu ----

void host::softmax_forward(int, bool log, const float* x, float* y, int64_t rows, int64_t len) {
  run_rows(rows, len, cuda::SoftmaxRows{log, x, y, len});
}

void host::softmax_backward(int, bool log, const float* y, const float* g, float* gx, int64_t rows,
                            int64_t len) {
  run_rows(rows, len, cuda::SoftmaxBackwardRows{log, y, g, gx, len});
}

void host::layer_norm_forward(int, const float* x, const float* weight, const float* bias, float* y,
                              float* mean, float* rstd, int64_t rows, int64_t cols, double eps) {
  run_rows(rows, cols,
           cuda::LayerNormRows{x, weight, bias, y, mean, rstd, cols, static_cast<float>(eps)});
}

void host::layer_norm_backward_input(int, const float* x, const float* g, const float* weight,
                                     const float* mean, const float* rstd, float* gx, int64_t rows,
                                     int64_t cols) {
  run_rows(rows, cols, cuda::LayerNormInputGradRows{x, g, weight, mean, rstd, gx, cols});
}

void host::layer_norm_backward_params(int, const float* x, const float* g, const float* mean,
                                      const float* rstd, float* gweight, float* gbias, int64_t rows,
                                      int64_t cols) {
  if (cols == 0 || (!gweight && !gbias)) return;
  const int64_t chunks = (rows + cuda::kLayerNormChunkRows - 1) / cuda::kLayerNormChunkRows;
  if (chunks <= 1) {
    run_index(cols, cuda::LayerNormParamGradChunks{x, g, mean, rstd, gweight, gbias, rows, cols});
    return;
  }
  const int64_t n = chunks * cols;
  std::vector<float> part_w(gweight ? n : 0), part_b(gbias ? n : 0);
  run_index(n, cuda::LayerNormParamGradChunks{x, g, mean, rstd, gweight ? part_w.data() : nullptr,
                                              gbias ? part_b.data() : nullptr, rows, cols});
  if (gweight) run_index(cols, cuda::ColumnSums{part_w.data(), gweight, chunks, cols});
  if (gbias) run_index(cols, cuda::ColumnSums{part_b.data(), gbias, chunks, cols});
}

void host::embedding_forward(int, const float* weight, const int64_t* indices, float* out, int64_t count,
                             int64_t dim) {
  run_index(count * dim, cuda::EmbeddingGather{weight, indices, out, dim});
}

void host::embedding_backward(int, const int64_t* indices, const float* g, float* gweight, int64_t count,
                              int64_t dim) {
  run_index(count * dim, cuda::EmbeddingScatter<HostAdd>{indices, g, gweight, dim, HostAdd{}});
}

void host::cross_entropy_forward(int device, const float* lsm, const int64_t* target, float* loss,
                                 int64_t samples, int64_t classes, int64_t ignore_index,
                                 double label_smoothing, float* total, double divisor) {
  run_rows(samples, classes,
           cuda::CrossEntropyRows{lsm, target, loss, classes, ignore_index,
                                  static_cast<float>(label_smoothing)});
  if (total) host::sum_rows(device, loss, total, 1, samples, 1.0 / divisor);
}

void host::cross_entropy_backward(int, const float* lsm, const int64_t* target, const float* g,
                                  bool per_sample, double divisor, float* gx, int64_t samples,
                                  int64_t classes, int64_t ignore_index, double label_smoothing) {
  run_index(samples * classes, cuda::CrossEntropyGrad{lsm, target, g, gx, classes, ignore_index,
                                                      static_cast<float>(label_smoothing),
                                                      per_sample, static_cast<float>(divisor)});
}

void host::dropout_apply(int, const float* x, const float* mask, float* out, int64_t n) {
  run_index(n, cuda::MaskProduct{x, mask, out});
}

}  // namespace tmem::test

// ---- parity and error tests of the nn ops on the stand-in device ----

using namespace tmem;

namespace {

using V = std::vector<Tensor>;

using test::error_of;

// A float32 U[lo, hi) tensor requiring grad, with `masked` rows set to -inf.
Tensor logits_input(const Shape& shape, double lo, double hi, uint64_t seed,
                    const std::vector<int64_t>& masked = {}) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float32, gen);
  const int64_t len = shape.empty() ? 1 : shape.back();
  for (int64_t r : masked)
    for (int64_t j = 0; j < len; ++j)
      t.data<float>()[r * len + j] = -std::numeric_limits<float>::infinity();
  t.requires_grad_();
  return t;
}

}  // namespace

TEST_CASE("device kernels: softmax and log_softmax match the CPU on long, masked and empty rows") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (bool log : {false, true}) {
    auto sm = [log](const Tensor& x, int64_t dim) {
      return log ? log_softmax(x, dim) : softmax(x, dim);
    };
    const std::string op = log ? "log_softmax" : "softmax";
    test::check_parity(
        op + " [7,300] (block per row)", [&](const V& v) { return sm(v[0], -1); },
        {logits_input({7, 300}, -4, 4, 1)}, 1e-4);
    test::check_parity(
        op + " dim 0 of [50,3,40]", [&](const V& v) { return sm(v[0], 0); },
        {logits_input({50, 3, 40}, -4, 4, 2)}, 1e-4);
    test::check_parity(
        op + " of a transposed [33,5] input",
        [&](const V& v) { return sm(transpose(v[0], 0, 1), -1); },
        {logits_input({33, 5}, -4, 4, 3)}, 1e-4);
    test::check_parity(
        op + " long rows offset by 1000, rows 1 and 3 fully masked",
        [&](const V& v) { return sm(v[0], 1); }, {logits_input({4, 100}, 999, 1001, 4, {1, 3})},
        1e-4);
    test::check_parity(
        op + " short rows, row 0 fully masked", [&](const V& v) { return sm(v[0], -1); },
        {logits_input({3, 6}, -2, 2, 5, {0})}, 1e-4);
    test::check_parity(op + " [0,5]", [&](const V& v) { return sm(v[0], -1); },
                       {logits_input({0, 5}, -1, 1, 6)});
    test::check_parity(op + " [3,0]", [&](const V& v) { return sm(v[0], -1); },
                       {logits_input({3, 0}, -1, 1, 7)});
    test::check_parity(op + " 0-d", [&](const V& v) { return sm(v[0], 0); },
                       {logits_input({}, -1, 1, 8)});
  }
}

TEST_CASE("device kernels: layer_norm matches the CPU on long rows, many rows and strided inputs") {
  test::FakeCuda fake(&test::host_op_kernels());
  auto in = [](const Shape& s, double lo, double hi, uint64_t seed) {
    return logits_input(s, lo, hi, seed);
  };
  // 130 rows: three chunks of the weight and bias gradients; 70 columns: a block per row.
  test::check_parity(
      "[2,65,70] weight and bias", [](const V& v) { return layer_norm(v[0], v[1], v[2]); },
      {in({2, 65, 70}, -2, 2, 1), in({70}, 0.5, 1.5, 2), in({70}, -1, 1, 3)}, 1e-4);
  test::check_parity(
      "[128,8] weight only (two full chunks), offset by 100",
      [](const V& v) { return layer_norm(v[0], v[1], Tensor()); },
      {in({128, 8}, 99, 101, 4), in({8}, 0.5, 1.5, 5)}, 1e-4);
  test::check_parity(
      "[100,40] bias only, eps 0.1",
      [](const V& v) { return layer_norm(v[0], Tensor(), v[1], 0.1); },
      {in({100, 40}, -1, 1, 6), in({40}, -1, 1, 7)}, 1e-4);
  test::check_parity(
      "transposed [48,30] input",
      [](const V& v) { return layer_norm(transpose(v[0], 0, 1), v[1], v[2]); },
      {in({48, 30}, -2, 2, 8), in({48}, 0.5, 1.5, 9), in({48}, -1, 1, 10)}, 1e-4);
  test::check_parity("[6,16] rows of |x| up to 3e19 (the sum of squares overflows: measured scaled)",
                     [](const V& v) { return layer_norm(v[0], v[1], Tensor()); },
                     {in({6, 16}, -3e19, 3e19, 14), in({16}, 0.5, 1.5, 15)}, 1e-4);
  test::check_parity("[0,8] (no rows: zero weight and bias gradients)",
                     [](const V& v) { return layer_norm(v[0], v[1], v[2]); },
                     {in({0, 8}, -1, 1, 11), in({8}, 0.5, 1.5, 12), in({8}, -1, 1, 13)});
  Tensor x = ones({2, 3}).to(Device::cuda());
  Tensor w = ones({4}).to(Device::cuda());
  const std::string cpu = error_of<ShapeError>([] { layer_norm(ones({2, 3}), ones({4}), {}); });
  CHECK(!cpu.empty());
  CHECK(error_of<ShapeError>([&] { layer_norm(x, w, Tensor()); }) == cpu);
  CHECK(error_of<DeviceError>([&] { layer_norm(x, ones({3}), Tensor()); }) ==
        "layer_norm: expected operands on one device, but got cuda:0 and cpu");
}

TEST_CASE("device kernels: embedding matches the CPU and checks indices as the CPU does") {
  test::FakeCuda fake(&test::host_op_kernels());
  Generator gen(3);
  Tensor idx = randint({6, 11}, 50, gen);
  idx.data<int64_t>()[5] = idx.data<int64_t>()[17] = idx.data<int64_t>()[40] = 7;  // repeats
  test::check_parity(
      "[50,40] table, [6,11] indices with repeats",
      [](const V& v) { return embedding(v[0], v[1]); }, {logits_input({50, 40}, -1, 1, 1), idx},
      1e-4);
  test::check_parity(
      "transposed indices", [](const V& v) { return embedding(v[0], transpose(v[1], 0, 1)); },
      {logits_input({50, 3}, -1, 1, 2), idx}, 1e-4);
  test::check_parity("no indices", [](const V& v) { return embedding(v[0], v[1]); },
                     {logits_input({5, 3}, -1, 1, 3), tensor_int({}, {0})});
  Tensor w = ones({5, 3});
  for (int64_t bad : {5, -1}) {
    Tensor i = tensor_int({0, 2, bad, 1}, {2, 2});
    const std::string cpu = error_of<IndexError>([&] { embedding(w, i); });
    CHECK(!cpu.empty());
    CHECK(error_of<IndexError>([&] { embedding(w.to(Device::cuda()), i.to(Device::cuda())); }) ==
          cpu);
  }
  CHECK(error_of<DeviceError>([&] { embedding(w.to(Device::cuda()), tensor_int({0}, {1})); }) ==
        "embedding: expected operands on one device, but got cuda:0 and cpu");
}

TEST_CASE("device kernels: cross_entropy matches the CPU and checks targets as the CPU does") {
  test::FakeCuda fake(&test::host_op_kernels());
  Tensor tgt = tensor_int({3, 299, -100, 0, 150, 7, -100, 42, 1}, {9});
  for (const char* red : {"mean", "sum", "none"})
    for (double eps : {0.0, 0.1}) {
      test::check_parity(
          std::string("[9,300] ") + red + " smoothing " + std::to_string(eps),
          [red, eps](const V& v) { return cross_entropy(v[0], v[1], -100, eps, red); },
          {logits_input({9, 300}, -4, 4, 1), tgt}, 1e-4);
    }
  test::check_parity(
      "transposed logits, ignore_index 2",
      [](const V& v) { return cross_entropy(transpose(v[0], 0, 1), v[1], 2, 0.2, "mean"); },
      {logits_input({40, 3}, -2, 2, 2), tensor_int({2, 0, 39}, {3})}, 1e-4);
  test::check_parity(
      "every sample ignored, mean (NaN)", [](const V& v) { return cross_entropy(v[0], v[1]); },
      {logits_input({2, 4}, -1, 1, 3), tensor_int({-100, -100}, {2})}, 1e-4);
  Tensor logits = ones({3, 4});
  for (int64_t bad : {4, -1}) {
    Tensor t = tensor_int({0, bad, 1}, {3});
    const std::string cpu = error_of<IndexError>([&] { cross_entropy(logits, t); });
    CHECK(!cpu.empty());
    CHECK(error_of<IndexError>(
              [&] { cross_entropy(logits.to(Device::cuda()), t.to(Device::cuda())); }) == cpu);
  }
  CHECK(error_of<DeviceError>([&] {
          cross_entropy(logits.to(Device::cuda()), tensor_int({0, 1, 2}, {3}));
        }) == "cross_entropy: expected operands on one device, but got cuda:0 and cpu");
}

TEST_CASE("device kernels: dropout draws the CPU's mask from the same Generator state") {
  test::FakeCuda fake(&test::host_op_kernels());
  for (double p : {0.3, 1.0}) {
    test::check_parity("[37,53] p " + std::to_string(p),
                       [p](const V& v) {
                         Generator gen(5);
                         return dropout(v[0], p, true, gen);
                       },
                       {logits_input({37, 53}, -1, 1, 1)});
  }
  test::check_parity("transposed input",
                     [](const V& v) {
                       Generator gen(6);
                       return dropout(transpose(v[0], 0, 1), 0.5, true, gen);
                     },
                     {logits_input({9, 14}, -1, 1, 2)});
  // The Generator advances by the same draws on both devices.
  Generator a(8), b(8);
  dropout(ones({4, 5}), 0.5, true, a);
  dropout(ones({4, 5}).to(Device::cuda()), 0.5, true, b);
  CHECK(a.next_u64() == b.next_u64());
}
