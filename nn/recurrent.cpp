#include "tmem/nn/recurrent.h"

#include <cmath>

#include "tmem/ops/elementwise.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/reduction.h"
#include "tmem/ops/selective_scan.h"
#include "tmem/ops/shape.h"

namespace tmem::nn {

namespace {

// ELU(x) + 1 = relu(x) + exp(-relu(-x)): positive, and exp never overflows.
Tensor elu_plus_one(const Tensor& x) { return relu(x) + exp(neg(relu(neg(x)))); }

// [B, T, h * w] -> [B, h, T, w]
Tensor heads_first(const Tensor& x, int64_t h) {
  const Shape& s = x.shape();
  return permute(reshape(x, {s[0], s[1], h, s[2] / h}), {0, 2, 1, 3});
}

}  // namespace

LinearAttentionMemory::LinearAttentionMemory(int64_t dim_, int64_t heads_, int64_t features_, Generator& gen)
    : dim(dim_), heads(heads_), features(features_) {
  check<ValueError>(heads > 0 && dim % heads == 0 && features > 0,
                    "LinearAttentionMemory: expected dim divisible by heads and features >= 1, but got dim ", dim,
                    " heads ", heads, " features ", features);
  q = register_module("q", std::make_shared<Linear>(dim, heads * features, true, gen));
  k = register_module("k", std::make_shared<Linear>(dim, heads * features, true, gen));
  v = register_module("v", std::make_shared<Linear>(dim, dim, true, gen));
  out = register_module("out", std::make_shared<Linear>(dim, dim, true, gen));
}

LinearAttentionState LinearAttentionMemory::initial_state(int64_t B) const {
  const Device d = out->weight.device();
  const DType t = out->weight.dtype();
  return {zeros({B, heads, features, dim / heads}, t, d), zeros({B, heads, features}, t, d)};
}

Tensor LinearAttentionMemory::forward(const Tensor& x, LinearAttentionState& state) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "LinearAttentionMemory: expected x [B, T, ", dim,
                    "], but got ", shape_str(x.shape()));
  const int64_t B = x.shape()[0], T = x.shape()[1];
  check<ShapeError>(state.S.shape() == Shape{B, heads, features, dim / heads} &&
                        state.z.shape() == Shape{B, heads, features},
                    "LinearAttentionMemory: expected state S [", B, ", ", heads, ", ", features, ", ", dim / heads,
                    "] and z [", B, ", ", heads, ", ", features, "], but got ", shape_str(state.S.shape()), " and ",
                    shape_str(state.z.shape()));
  Tensor qf = elu_plus_one(heads_first(q->forward(x), heads));  // [B, h, T, f]
  Tensor kf = elu_plus_one(heads_first(k->forward(x), heads));  // [B, h, T, f]
  Tensor vv = heads_first(v->forward(x), heads);                // [B, h, T, C/h]
  std::vector<double> tril(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) tril[i * T + j] = 1.0;
  Tensor a = matmul(qf, transpose(kf, 2, 3)) * tensor(tril, {T, T}, x.dtype()).to(x.device());  // [B, h, T, T]
  Tensor num = matmul(a, vv) + matmul(qf, state.S);                                  // [B, h, T, C/h]
  Tensor den = sum(a, {3}, true) + matmul(qf, unsqueeze(state.z, 3));                // [B, h, T, 1]
  Tensor o = num / (den + eps);
  state = {state.S + matmul(transpose(kf, 2, 3), vv), state.z + sum(kf, {2})};
  return out->forward(reshape(permute(o, {0, 2, 1, 3}), {B, T, dim}));
}

SelectiveSSM::SelectiveSSM(int64_t dim_, int64_t state_, Generator& gen) : dim(dim_), state_dim(state_) {
  check<ValueError>(dim > 0 && state_dim > 0, "SelectiveSSM: expected dim >= 1 and state >= 1, but got dim ", dim,
                    " state ", state_dim);
  in = register_module("in", std::make_shared<Linear>(dim, dim, true, gen));
  gate = register_module("gate", std::make_shared<Linear>(dim, dim, true, gen));
  dt = register_module("dt", std::make_shared<Linear>(dim, dim, true, gen));
  b_proj = register_module("b_proj", std::make_shared<Linear>(dim, state_dim, false, gen));
  c_proj = register_module("c_proj", std::make_shared<Linear>(dim, state_dim, false, gen));
  out = register_module("out", std::make_shared<Linear>(dim, dim, true, gen));
  std::vector<double> a_log(dim * state_dim), dt_bias(dim);
  for (int64_t c = 0; c < dim; ++c) {
    for (int64_t n = 0; n < state_dim; ++n) a_log[c * state_dim + n] = std::log(static_cast<double>(n + 1));
    // softplus^-1 of a delta log-uniform in [0.001, 0.1] across channels.
    const double delta = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * (c + 0.5) / dim);
    dt_bias[c] = std::log(std::expm1(delta));
  }
  A_log = register_parameter("A_log", tensor(a_log, {dim, state_dim}));
  D = register_parameter("D", ones({dim}));
  copy_data(dt->bias, tensor(dt_bias, {dim}));
}

Tensor SelectiveSSM::initial_state(int64_t B) const {
  return zeros({B, dim, state_dim}, D.dtype(), D.device());
}

Tensor SelectiveSSM::forward(const Tensor& x, Tensor& state) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == dim, "SelectiveSSM: expected x [B, T, ", dim, "], but got ",
                    shape_str(x.shape()));
  const int64_t B = x.shape()[0];
  check<ShapeError>(state.shape() == Shape{B, dim, state_dim}, "SelectiveSSM: expected state [", B, ", ", dim, ", ",
                    state_dim, "], but got ", shape_str(state.shape()));
  SelectiveScanResult r = selective_scan(in->forward(x), softplus(dt->forward(x)), neg(exp(A_log)),
                                         b_proj->forward(x), c_proj->forward(x), D, state);
  state = r.h;
  return out->forward(r.y * silu(gate->forward(x)));
}

}  // namespace tmem::nn
