#include "tmem/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/ops/dispatch.h"

namespace tmem::nn {

namespace {

void check_param(const Tensor& p, const char* op) {
  check<DtypeError>(p.dtype() == DType::Float32 || p.dtype() == DType::Float64, op,
                    ": parameters must be floating, got ", dtype_name(p.dtype()));
  check<ValueError>(p.is_contiguous(), op, ": parameters must be contiguous, got strides ",
                    shape_str(p.strides()));
}

// The optimizer kernels of t's device (not the CPU; clip_grad_norm_ scales
// with its mul_scalar kernel): DeviceError "<what>: not
// implemented on <kind> yet" when its backend has none, DtypeError unless t
// is float32 (device kernels take float32).
const OpKernels& device_optim_kernels(const Tensor& t, const char* what) {
  const DeviceBackend& b = device_backend(t.device(), what);
  if (!b.ops || !b.ops->adamw_step || !b.ops->sgd_step || !b.ops->sum_squares || !b.ops->unary_forward)
    throw_not_implemented(what, t.device());
  check<DtypeError>(t.dtype() == DType::Float32, what, ": ", b.name, " kernels take float32, but got ",
                    dtype_name(t.dtype()));
  return *b.ops;
}

// `state` (an optimizer buffer of parameter p) on p's device, moved there if
// the parameter moved since (Module::to after the optimizer was made).
void follow_device(Tensor& state, const Tensor& p) {
  if (state.defined() && state.device() != p.device()) state = state.to(p.device());
}

// For each parameter i with a gradient: cpu(p, g, i, n) with typed pointers
// on the CPU, or dev(kernels, p, g, i) on another device (g contiguous).
template <class Cpu, class Dev>
void for_each_grad(const std::vector<Tensor>& params, Cpu&& cpu, Dev&& dev) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor gc = contiguous_data(g);
    if (p.device().is_cpu())
      dispatch_floating(p.dtype(), "optimizer", [&]<class T>() { cpu(p.data<T>(), gc.data<T>(), i, p.numel()); });
    else
      dev(device_optim_kernels(p, "optimizer step"), p, gc, i);
    p.bump_version();
  }
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr_, double momentum, double weight_decay)
    : lr(lr_), params_(std::move(params)), momentum_(momentum), weight_decay_(weight_decay) {
  check<ValueError>(lr >= 0 && momentum >= 0 && weight_decay >= 0,
                    "SGD: expected lr, momentum, weight_decay >= 0, but got ", lr, ", ", momentum,
                    ", ", weight_decay);
  for (const Tensor& p : params_) check_param(p, "SGD");
  bufs_.resize(params_.size());
}

void SGD::step() {
  auto buffer = [&](size_t i) -> bool {
    follow_device(bufs_[i], params_[i]);
    const bool first = momentum_ != 0 && !bufs_[i].defined();
    if (first) bufs_[i] = empty(params_[i].shape(), params_[i].dtype(), params_[i].device());
    return first;
  };
  for_each_grad(
      params_,
      [&]<class T>(T* p, const T* g, size_t i, int64_t n) {
        const bool first = buffer(i);
        T* b = momentum_ != 0 ? bufs_[i].template data<T>() : nullptr;
        for (int64_t k = 0; k < n; ++k) {
          T d = g[k] + static_cast<T>(weight_decay_) * p[k];
          if (b) {
            b[k] = first ? d : static_cast<T>(momentum_) * b[k] + d;
            d = b[k];
          }
          p[k] -= static_cast<T>(lr) * d;
        }
        if (b) bufs_[i].bump_version();
      },
      [&](const OpKernels& k, const Tensor& p, const Tensor& g, size_t i) {
        const bool first = buffer(i);
        float* b = momentum_ != 0 ? static_cast<float*>(bufs_[i].raw_data()) : nullptr;
        k.sgd_step(p.device().index, static_cast<float*>(p.raw_data()), static_cast<const float*>(g.raw_data()),
                   b, p.numel(), {lr, momentum_, weight_decay_, first});
        if (b) bufs_[i].bump_version();
      });
}

void SGD::zero_grad() {
  for (const Tensor& p : params_) p.zero_grad();
}

AdamW::AdamW(std::vector<Tensor> params, double lr_, double beta1, double beta2, double eps,
             double weight_decay)
    : lr(lr_), params_(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps),
      weight_decay_(weight_decay) {
  check<ValueError>(lr >= 0, "AdamW: expected lr >= 0, but got ", lr);
  check<ValueError>(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
                    "AdamW: expected betas in [0, 1), but got (", beta1, ", ", beta2, ")");
  check<ValueError>(eps >= 0 && weight_decay >= 0, "AdamW: expected eps, weight_decay >= 0, but got ",
                    eps, ", ", weight_decay);
  for (const Tensor& p : params_) {
    check_param(p, "AdamW");
    m_.push_back(zeros(p.shape(), p.dtype(), p.device()));
    v_.push_back(zeros(p.shape(), p.dtype(), p.device()));
  }
}

void AdamW::step() {
  ++t_;
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(t_));
  const double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
  for_each_grad(
      params_,
      [&]<class T>(T* p, const T* g, size_t i, int64_t n) {
        follow_device(m_[i], params_[i]);
        follow_device(v_[i], params_[i]);
        T* m = m_[i].template data<T>();
        T* v = v_[i].template data<T>();
        const T b1 = static_cast<T>(beta1_), b2 = static_cast<T>(beta2_);
        const T decay = static_cast<T>(1.0 - lr * weight_decay_);
#pragma omp parallel for if (n > 65536)
        for (int64_t k = 0; k < n; ++k) {
          p[k] *= decay;
          m[k] = b1 * m[k] + (T(1) - b1) * g[k];
          v[k] = b2 * v[k] + (T(1) - b2) * g[k] * g[k];
          T denom = std::sqrt(v[k]) / static_cast<T>(bc2_sqrt) + static_cast<T>(eps_);
          p[k] -= static_cast<T>(step_size) * m[k] / denom;
        }
      },
      [&](const OpKernels& k, const Tensor& p, const Tensor& g, size_t i) {
        follow_device(m_[i], p);
        follow_device(v_[i], p);
        k.adamw_step(p.device().index, static_cast<float*>(p.raw_data()), static_cast<const float*>(g.raw_data()),
                     static_cast<float*>(m_[i].raw_data()), static_cast<float*>(v_[i].raw_data()), p.numel(),
                     {beta1_, beta2_, 1.0 - lr * weight_decay_, step_size, bc2_sqrt, eps_});
      });
}

std::map<std::string, Tensor> AdamW::state_dict() const {
  std::map<std::string, Tensor> s;
  for (size_t i = 0; i < params_.size(); ++i) {
    s["m." + std::to_string(i)] = m_[i];
    s["v." + std::to_string(i)] = v_[i];
  }
  s["step"] = tensor_int({t_}, {1});
  return s;
}

void AdamW::load_state_dict(const std::map<std::string, Tensor>& s) {
  auto get = [&](const std::string& k) -> const Tensor& {
    auto it = s.find(k);
    check<ValueError>(it != s.end(), "AdamW::load_state_dict: missing key \"", k, "\"");
    return it->second;
  };
  for (size_t i = 0; i < params_.size(); ++i)
    for (auto* moments : {&m_, &v_}) {
      const std::string key = (moments == &m_ ? "m." : "v.") + std::to_string(i);
      const Tensor& t = get(key);
      check<ShapeError>(t.shape() == params_[i].shape(), "AdamW::load_state_dict: \"", key,
                        "\" expected shape ", shape_str(params_[i].shape()), ", but got ", shape_str(t.shape()));
      copy_data((*moments)[i], t);
    }
  t_ = get("step").to_int_vector().at(0);
}

void AdamW::zero_grad() {
  for (const Tensor& p : params_) p.zero_grad();
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  check<ValueError>(max_norm > 0, "clip_grad_norm_: expected max_norm > 0, but got ", max_norm);
  // CPU gradients (any floating dtype) are divided by their largest magnitude
  // before squaring, so float64 squares cannot overflow; device gradients
  // (float32) are squared and summed in float64 by their kernel, where no
  // float32 square overflows. The two parts are joined by hypot.
  double scale = 0, ss = 0, device_ss = 0;
  bool finite = true;
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.device().is_cpu()) {
      Tensor gc = contiguous_data(g);
      device_ss += device_optim_kernels(g, "clip_grad_norm_")
                       .sum_squares(g.device().index, static_cast<const float*>(gc.raw_data()), g.numel());
      continue;
    }
    grads.push_back(g.to_vector());
    for (double x : grads.back()) {
      if (!std::isfinite(x)) finite = false;
      scale = std::max(scale, std::abs(x));
    }
  }
  check<ValueError>(finite && std::isfinite(device_ss),
                    "clip_grad_norm_: the total gradient norm is non-finite (NaN or Inf "
                    "in a gradient); gradients left unchanged, skip this step");
  if (scale > 0)
    for (const auto& v : grads)
      for (double x : v) ss += (x / scale) * (x / scale);
  const double norm = std::hypot(scale * std::sqrt(ss), std::sqrt(device_ss));
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (g.device().is_cpu()) {
        dispatch_floating(g.dtype(), "clip_grad_norm_", [&]<class T>() {
          T* d = g.data<T>();
          for (int64_t k = 0; k < g.numel(); ++k) d[k] *= static_cast<T>(coef);
        });
      } else {
        device_optim_kernels(g, "clip_grad_norm_")
            .unary_forward(g.device().index, OpId::MulScalar, {coef},
                           elementwise_args<2>(g, {g}, "clip_grad_norm_"));
      }
      g.bump_version();
    }
  }
  return norm;
}

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double base_lr, double min_lr) {
  check<ValueError>(step >= 0 && warmup >= 0 && total > warmup, "warmup_cosine_lr: expected step >= 0 and ",
                    "0 <= warmup < total, but got step ", step, " warmup ", warmup, " total ", total);
  check<ValueError>(base_lr >= 0 && min_lr >= 0 && min_lr <= base_lr, "warmup_cosine_lr: expected ",
                    "0 <= min_lr <= base_lr, but got base_lr ", base_lr, " min_lr ", min_lr);
  if (step < warmup) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double p = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * p));
}

}  // namespace tmem::nn
