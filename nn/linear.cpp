#include "tmem/nn/linear.h"

#include <cmath>

#include "tmem/ops/elementwise.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/shape.h"

namespace tmem::nn {

Linear::Linear(int64_t in, int64_t out, bool has_bias, Generator& gen)
    : in_features(in), out_features(out) {
  check<ValueError>(in > 0 && out > 0, "Linear: expected positive sizes, but got in ", in, " out ", out);
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", rand({out, in}, -bound, bound, DType::Float32, gen));
  if (has_bias) bias = register_parameter("bias", rand({out}, -bound, bound, DType::Float32, gen));
}

Tensor Linear::forward(const Tensor& x) const {
  check<ShapeError>(x.dim() >= 1 && x.shape().back() == in_features, "Linear: expected input [..., ",
                    in_features, "], but got ", shape_str(x.shape()));
  check<DtypeError>(x.dtype() == weight.dtype(), "Linear: the input is ", dtype_name(x.dtype()), " but the weight is ",
                    dtype_name(weight.dtype()), "; convert the input (to_dtype)");
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? y + bias : y;
}

}  // namespace tmem::nn
