// Gradient checking by float64 central differences (flashlight habit).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tmem/core/tensor.h"

namespace tmem {

struct GradcheckResult {
  bool ok = true;
  double max_abs_err = 0;  // largest |analytic - numeric| seen
  std::string message;     // on failure: the worst element, both values
};

/// Checks the gradients of f at `inputs` against central differences.
/// Every input with requires_grad must be a float64 CPU leaf. The scalar
/// checked is L = sum(f(inputs) * w) with w fixed pseudo-random weights (so
/// every output element matters with a different weight); for each input
/// element x, numeric dL/dx = (L(x+eps) - L(x-eps)) / (2 eps), and the check
/// is |analytic - numeric| <= atol + rtol |numeric|. The failure message names
/// the input, the element's index, and both values at the worst element.
/// Throws DtypeError for a checked input that is not float64; ValueError for
/// an eps that is not finite and > 0, an atol or rtol that is not finite and
/// >= 0, a checked input that is not a contiguous leaf, or an f that returns
/// an undefined tensor.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);

}  // namespace tmem
