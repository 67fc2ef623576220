#include "tmem/nn/slot_memory.h"

#include <cmath>

#include "tmem/ops/elementwise.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/shape.h"
#include "tmem/ops/softmax.h"

namespace tmem::nn {

SlotMemory::SlotMemory(int64_t dim_, int64_t slots_, int64_t chunk_, double gamma_init, Generator& gen)
    : dim(dim_), slots(slots_), chunk(chunk_) {
  check<ValueError>(slots > 0 && chunk > 0, "SlotMemory: expected positive slots and chunk, but got ",
                    slots, " and ", chunk);
  init = register_parameter("init", randn({slots, dim}, 0.0, 0.02, DType::Float32, gen));
  gamma = register_parameter("gamma", full({1}, gamma_init));
  q = register_module("q", std::make_shared<Linear>(dim, dim, true, gen));
  key = register_module("key", std::make_shared<Linear>(dim, dim, true, gen));
  val = register_module("val", std::make_shared<Linear>(dim, dim, true, gen));
  out = register_module("out", std::make_shared<Linear>(dim, dim, true, gen));
  q_write = register_module("q_write", std::make_shared<Linear>(dim, dim, true, gen));
  update = register_module("update", std::make_shared<Linear>(dim, dim, true, gen));
}

Tensor SlotMemory::initial_state(int64_t B) const { return expand(init, {B, slots, dim}); }

Tensor SlotMemory::forward(const Tensor& x, Tensor& state) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "SlotMemory: expected x [B, N, ", dim,
                    "], but got ", shape_str(x.shape()));
  const int64_t B = x.shape()[0], N = x.shape()[1], K = chunk, nc = (N + K - 1) / K;
  check<ShapeError>(state.shape() == Shape{B, slots, dim}, "SlotMemory: expected state [", B, ", ",
                    slots, ", ", dim, "], but got ", shape_str(state.shape()));
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  Tensor xp = nc * K == N ? x : pad(x, {0, 0, 0, nc * K - N});
  Tensor chunks = reshape(xp, {B, nc, K, dim});
  Tensor qr = q->forward(squeeze(slice(chunks, 2, 0, 1), 2));  // [B, nc, C]
  Tensor w = mean(chunks, {2});                                // [B, nc, C]
  Tensor qw = q_write->forward(w), u = update->forward(w);
  std::vector<Tensor> reads;
  const std::vector<Tensor> qr_k = unbind(qr, 1), qw_k = unbind(qw, 1), u_k = split(u, 1, 1);
  for (int64_t k = 0; k < nc; ++k) {
    Tensor keys = key->forward(state);  // [B, M, C]
    Tensor scores_r = matmul(keys, reshape(qr_k[k], {B, dim, 1})) * scale;  // [B, M, 1]
    Tensor a = softmax(scores_r, 1);
    reads.push_back(sum(mul(val->forward(state), a), {1}));  // [B, C]
    Tensor scores_w = matmul(keys, reshape(qw_k[k], {B, dim, 1})) * scale;
    Tensor b = softmax(scores_w, 1);  // [B, M, 1]
    state = state + mul(b, u_k[k]);
  }
  Tensor o = out->forward(stack(reads, 1));  // [B, nc, C]
  if (K > 1) o = slice(repeat_interleave(o, K, 1), 1, 0, N);
  return sigmoid(gamma) * o;
}

}  // namespace tmem::nn
