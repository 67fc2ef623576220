#include "tmem/ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "tmem/core/autograd.h"
#include "tmem/core/rng.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/reduction.h"

namespace tmem {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  // eps 0 made every numeric derivative 0/0 and reported correct gradients
  // as wrong; atol = inf passed any gradient.
  check<ValueError>(std::isfinite(eps) && eps > 0 && std::isfinite(atol) && atol >= 0 && std::isfinite(rtol) &&
                        rtol >= 0,
                    "gradcheck: expected a finite eps > 0 and finite atol, rtol >= 0, but got eps ", eps, " atol ",
                    atol, " rtol ", rtol);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      check<DtypeError>(inputs[i].dtype() == DType::Float64, "gradcheck: input ", i,
                        " must be float64, but is ", dtype_name(inputs[i].dtype()));
      check<ValueError>(inputs[i].is_leaf() && inputs[i].is_contiguous(), "gradcheck: input ", i,
                        " must be a contiguous leaf");
      inputs[i].zero_grad();
    }
  Tensor out = f(inputs);
  check<ValueError>(out.defined(), "gradcheck: f returned an undefined tensor");
  Generator gen(1234);
  Tensor w = rand(out.shape(), 0.5, 1.5, out.dtype(), gen);
  auto loss_of = [&](const Tensor& y) { return sum(to_dtype(mul(y, w), DType::Float64)).item(); };
  GradcheckResult res;
  if (!out.requires_grad()) {
    res.ok = false;
    res.message = "gradcheck: the output does not require grad";
    return res;
  }
  sum(mul(out, w)).backward();
  double worst_excess = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor g = x.grad();
    std::vector<double> analytic = g.defined() ? g.to_vector() : std::vector<double>(x.numel(), 0.0);
    double* p = x.data<double>();
    NoGradGuard no_grad;
    for (int64_t k = 0; k < x.numel(); ++k) {
      double orig = p[k];
      p[k] = orig + eps;
      double lp = loss_of(f(inputs));
      p[k] = orig - eps;
      double lm = loss_of(f(inputs));
      p[k] = orig;
      double numeric = (lp - lm) / (2 * eps);
      double err = std::abs(analytic[k] - numeric);
      if (!std::isfinite(analytic[k]) || !std::isfinite(numeric)) err = INFINITY;
      res.max_abs_err = std::max(res.max_abs_err, err);
      double excess = err - (atol + rtol * std::abs(numeric));
      if (excess > worst_excess || (std::isnan(excess) && res.ok)) {
        worst_excess = std::isnan(excess) ? INFINITY : excess;
        res.ok = false;
        std::ostringstream os;
        os << "gradcheck failed: input " << i << " " << shape_str(x.shape()) << " element " << k
           << " (value " << orig << "): analytic " << analytic[k] << ", numeric " << numeric
           << ", |diff| " << err << " > atol " << atol << " + rtol " << rtol << " * |numeric|";
        res.message = os.str();
      }
    }
  }
  return res;
}

}  // namespace tmem
