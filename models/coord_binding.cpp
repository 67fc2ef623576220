#include "models/coord_binding.h"

#include <algorithm>

#include "ops/elementwise.h"

namespace tmem::models {

CoordBindingBatch coord_binding_batch(int64_t B, int64_t W, double noise, int64_t queries,
                                      Generator& gen) {
  check<ValueError>(B > 0 && W > 0 && queries > 0 && noise >= 0,
                    "coord_binding_batch: expected B, W, queries >= 1 and noise >= 0, but got B ", B,
                    " W ", W, " queries ", queries, " noise ", noise);
  const int64_t T = W + queries;
  std::vector<double> keys(B * T * 3);
  std::vector<int64_t> values(B * T, kCoordValues), types(B * T, 0), targets(B * T, -100);
  for (int64_t b = 0; b < B; ++b) {
    double* k = keys.data() + b * T * 3;
    for (int64_t i = 0; i < W; ++i) {
      for (int a = 0; a < 3; ++a) k[i * 3 + a] = -1.0 + 2.0 * gen.uniform();
      values[b * T + i] = gen.randint(kCoordValues);
    }
    for (int64_t q = W; q < T; ++q) {
      const int64_t src = gen.randint(W);
      for (int a = 0; a < 3; ++a)
        k[q * 3 + a] = std::clamp(k[src * 3 + a] + noise * gen.normal(), -1.0, 1.0);
      int64_t best = 0;
      double best_d = 1e300;
      for (int64_t i = 0; i < W; ++i) {
        double d = 0;
        for (int a = 0; a < 3; ++a) d += (k[q * 3 + a] - k[i * 3 + a]) * (k[q * 3 + a] - k[i * 3 + a]);
        if (d < best_d) {
          best_d = d;
          best = i;
        }
      }
      types[b * T + q] = 1;
      targets[b * T + q] = values[b * T + best];
    }
  }
  return {tensor(keys, {B, T, 3}), tensor_int(values, {B, T}), tensor_int(types, {B, T}),
          tensor_int(targets, {B, T})};
}

CoordBindingModel::CoordBindingModel(const BackboneConfig& cfg, Generator& gen) {
  type_emb = register_module("type_emb", std::make_shared<nn::Embedding>(2, cfg.dim, gen));
  value_emb = register_module("value_emb", std::make_shared<nn::Embedding>(kCoordValues + 1, cfg.dim, gen));
  key_proj = register_module("key_proj", std::make_shared<nn::Linear>(3, cfg.dim, true, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(cfg, gen));
  head = register_module("head", std::make_shared<nn::Linear>(cfg.dim, kCoordValues, true, gen));
}

Tensor CoordBindingModel::embed(const CoordBindingBatch& batch) const {
  return type_emb->forward(batch.types) + key_proj->forward(batch.keys) + value_emb->forward(batch.values);
}

Tensor CoordBindingModel::forward(const CoordBindingBatch& batch) const {
  return head->forward(backbone->forward(embed(batch)));
}

}  // namespace tmem::models
