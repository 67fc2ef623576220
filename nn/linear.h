// Linear layer (PyTorch nn.Linear).
#pragma once
#include "tmem/core/rng.h"
#include "tmem/nn/module.h"

namespace tmem::nn {

/// y[..., out] = x[..., in] @ weight^T + bias, weight [out, in], bias [out].
/// Initialised as PyTorch: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in))
/// (kaiming_uniform with a = sqrt(5)). Throws ShapeError when x's last dim is
/// not `in`, DtypeError when x's dtype is not the weight's.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         Generator& gen = default_generator());
  Tensor forward(const Tensor& x) const;
  int64_t in_features, out_features;
  Tensor weight, bias;
};

}  // namespace tmem::nn
