#include "tmem/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/profiler.h"
#include "tmem/nn/module.h"
#include "tmem/ops/dispatch.h"
#include "tmem/ops/elementwise.h"

namespace tmem::nn {

namespace {

void check_param(const Tensor& p, const char* op) {
  check<DtypeError>(p.dtype() == DType::Float32 || p.dtype() == DType::Float64, op,
                    ": parameters must be floating, got ", dtype_name(p.dtype()));
  check<ValueError>(p.is_contiguous(), op, ": parameters must be contiguous, got strides ",
                    shape_str(p.strides()));
  // An op's output keeps no gradient, so the optimizer would never move it.
  check<ValueError>(p.is_leaf(), op, ": can't optimize a non-leaf Tensor (a parameter of shape ",
                    shape_str(p.shape()), " is the output of an op; pass the leaf it was computed from)");
}

// Whether a device's kernel table holds the optimizer kernels.
bool has_optim_kernels(const OpKernels& k) { return k.adamw_step && k.sgd_step; }

// Whether a device's kernel table holds clip_grad_norm_'s kernels.
bool has_clip_kernels(const OpKernels& k) { return k.abs_max && k.sum_squares && k.scale_inplace; }

// `state` (an optimizer buffer of parameter p) on p's device and of its
// dtype, moved or cast if the parameter was since (Module::to after the
// optimizer was made).
void follow_param(Tensor& state, const Tensor& p) {
  if (!state.defined()) return;
  if (state.device() != p.device()) state = state.to(p.device());
  if (state.dtype() != p.dtype()) state = to_dtype(state, p.dtype());
}

// For each parameter i with a gradient: step(k, p, g, i, n) with k the kernel
// table of p's device and typed pointers to p and its contiguous gradient g.
// Throws ValueError naming `op` for a parameter that is no longer contiguous
// (its data replaced by a strided view since: `p.data = w.T`), whose
// elements the kernels would read as a dense block.
template <class Step>
void for_each_grad(const std::vector<Tensor>& params, const char* op, Step&& step) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    check<ValueError>(p.is_contiguous(), op, ": parameter ", i, " of shape ", shape_str(p.shape()),
                      " is not contiguous (strides ", shape_str(p.strides()), "): its data was replaced by a "
                      "strided view (p.data = src); assign src.contiguous()");
    Tensor gc = contiguous_data(g);
    dispatch_kernels("optimizer step", p, has_optim_kernels, [&]<class T>(const KernelTable<T>& k) {
      step(k, p.data<T>(), gc.template data<T>(), i, p.numel());
    });
    p.bump_version();
  }
}

// Whether an optimizer option is usable: finite (an infinite lr or decay
// turns every parameter into inf or NaN on the first step) and >= 0.
bool finite_nonneg(double x) { return std::isfinite(x) && x >= 0; }

void check_group_options(const ParamGroup& g, size_t i, const char* op) {
  check<ValueError>(finite_nonneg(*g.lr) && finite_nonneg(*g.weight_decay), op,
                    ": expected finite lr, weight_decay >= 0, but group ", i,
                    " has lr ", *g.lr, ", weight_decay ", *g.weight_decay);
}

// Fills in the groups' unset options with the defaults and lists their
// parameters in order (params) with the group of each (group_of). Throws
// ValueError naming `op` for a bad option, a group without an lr when there
// is no default (lr nullopt), or a parameter given twice.
void resolve_groups(std::vector<ParamGroup>& groups, std::optional<double> lr, double weight_decay, const char* op,
                    std::vector<Tensor>& params, std::vector<size_t>& group_of) {
  std::set<const TensorImpl*> seen;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    ParamGroup& g = groups[gi];
    if (!g.lr) g.lr = lr;
    check<ValueError>(g.lr.has_value(), op, ": parameter group ", gi,
                      " didn't specify a value of required optimization parameter lr");
    if (!g.weight_decay) g.weight_decay = weight_decay;
    check_group_options(g, gi, op);
    for (const Tensor& p : g.params) {
      check_param(p, op);
      check<ValueError>(seen.insert(&p.impl()).second, op, ": a parameter of shape ", shape_str(p.shape()),
                        " appears more than once (group ", gi, ")");
      params.push_back(p);
      group_of.push_back(gi);
    }
  }
}

// Appends `group` to `groups` and its parameters to `params` and
// `group_of` (add_param_group), with resolve_groups' defaults and checks
// over all the groups, so a parameter already in one is refused; on a throw
// nothing changes.
void add_group(std::vector<ParamGroup>& groups, ParamGroup group, std::optional<double> lr, double weight_decay,
               const char* op,
               std::vector<Tensor>& params, std::vector<size_t>& group_of) {
  std::vector<ParamGroup> all = groups;
  all.push_back(std::move(group));
  std::vector<Tensor> all_params;
  std::vector<size_t> all_group_of;
  resolve_groups(all, lr, weight_decay, op, all_params, all_group_of);
  groups = std::move(all);
  params = std::move(all_params);
  group_of = std::move(all_group_of);
}

// Sets groups[group].*field (lr or weight_decay, named `what`) after the
// checks of both setters: the group exists and the value is finite and >= 0.
void set_group_option(std::vector<ParamGroup>& groups, size_t group, double value,
                      std::optional<double> ParamGroup::*field, const char* what, const char* op) {
  check<IndexError>(group < groups.size(), op, ": group ", group, " is out of range for ", groups.size(),
                    " groups");
  check<ValueError>(finite_nonneg(value), op, ": expected a finite ", what, " >= 0, but got ", value);
  groups[group].*field = value;
}

// Sets every group's unset momentum to `fallback` after checking each is in
// range: finite and >= 0 (SGD's momentum) or in [0, 1) (beta, AdamW's beta1).
bool momentum_ok(double m, bool beta) { return beta ? m >= 0 && m < 1 : finite_nonneg(m); }
const char* momentum_range(bool beta) { return beta ? "beta1 in [0, 1)" : "a finite momentum >= 0"; }

void resolve_momentum(std::vector<ParamGroup>& groups, double fallback, bool beta, const char* op) {
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const double m = groups[gi].momentum.value_or(fallback);
    check<ValueError>(momentum_ok(m, beta), op, ": expected ", momentum_range(beta), ", but group ", gi, " has ", m);
    groups[gi].momentum = m;
  }
}

// groups[group].momentum = value after resolve_momentum's check.
void set_momentum_of(std::vector<ParamGroup>& groups, size_t group, double value, bool beta, const char* op) {
  check<IndexError>(group < groups.size(), op, ": group ", group, " is out of range for ", groups.size(),
                    " groups");
  check<ValueError>(momentum_ok(value, beta), op, ": expected ", momentum_range(beta), ", but got ", value);
  groups[group].momentum = value;
}

// The parameters per group of an optimizer's state_dict: "group_sizes" [G].
Tensor group_sizes(const std::vector<ParamGroup>& groups) {
  std::vector<int64_t> sizes;
  for (const ParamGroup& g : groups) sizes.push_back(static_cast<int64_t>(g.params.size()));
  return tensor_int(sizes, {static_cast<int64_t>(sizes.size())});
}

// The checks an optimizer's load_state_dict (named `fn`) makes of a state
// before copying any of it. int_entry(k) reads an int64 vector entry (a
// float "step" would have been read as int64 bits); check_groups compares
// "group_sizes" with the optimizer's (a state without it is one group, the
// form before groups); check_moment checks entry `key` against parameter p;
// check_keys refuses a key outside `expected` ("m.5" beside a 5-parameter
// optimizer's state was ignored, so a state of another model loaded).
struct StateChecks {
  const std::map<std::string, Tensor>& s;
  const char* fn;

  const Tensor& get(const std::string& k) const {
    auto it = s.find(k);
    check<ValueError>(it != s.end(), fn, ": missing key \"", k, "\"");
    return it->second;
  }
  std::vector<int64_t> int_entry(const std::string& k) const {
    const Tensor& t = get(k);
    check<DtypeError>(t.dtype() == DType::Int64, fn, ": \"", k, "\" must be int64, but got ", dtype_name(t.dtype()));
    check<ShapeError>(t.dim() == 1, fn, ": \"", k, "\" must be 1-D, but got shape ", shape_str(t.shape()));
    return t.to_int_vector();
  }
  void check_groups(const std::vector<ParamGroup>& groups, size_t n_params) const {
    std::vector<int64_t> own, saved{static_cast<int64_t>(n_params)};
    for (const ParamGroup& g : groups) own.push_back(static_cast<int64_t>(g.params.size()));
    if (s.count("group_sizes")) saved = int_entry("group_sizes");
    check<ValueError>(saved == own, fn, ": the state has groups of ", shape_str(saved),
                      " parameters, but this optimizer has ", shape_str(own));
  }
  // A NaN or infinite moment makes every parameter it reaches NaN on the
  // next step; a negative second moment (square_mean) makes sqrt(v) NaN.
  void check_moment(const std::string& key, const Tensor& p, bool square_mean = false) const {
    const Tensor& t = get(key);
    check<ShapeError>(t.shape() == p.shape(), fn, ": \"", key, "\" expected shape ", shape_str(p.shape()),
                      ", but got ", shape_str(t.shape()));
    check<DtypeError>(is_floating(t.dtype()), fn, ": \"", key, "\" must be floating, but got ", dtype_name(t.dtype()));
    // Finite as the parameter's dtype holds it: 1e300 in float64 is inf in float32.
    const double largest = p.dtype() == DType::Float32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
    const std::vector<double> v = t.to_vector();
    const auto bad = std::find_if(v.begin(), v.end(), [&](double x) {
      return !(std::abs(x) <= largest) || (square_mean && x < 0);
    });
    check<ValueError>(bad == v.end(), fn, ": \"", key, "\" holds ", bad == v.end() ? 0.0 : *bad, " at flat index ",
                      bad - v.begin(), square_mean ? ", but a second moment must be finite and cannot be negative"
                                                   : ", but a moment must be finite");
  }
  void check_keys(const std::set<std::string>& expected) const {
    std::string unexpected;
    for (const auto& kv : s) {
      if (expected.count(kv.first)) continue;
      unexpected += unexpected.empty() ? "\"" : ", \"";
      unexpected += printable(kv.first);
      unexpected += '"';
    }
    check<ValueError>(unexpected.empty(), fn, ": unexpected key(s) ", unexpected);
  }
};

}  // namespace

std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, double weight_decay) {
  check<ValueError>(weight_decay >= 0, "weight_decay_groups: expected weight_decay >= 0, but got ", weight_decay);
  std::vector<ParamGroup> groups{{{}, std::nullopt, weight_decay}, {{}, std::nullopt, 0.0}};
  for (const Tensor& p : params) groups[p.dim() >= 2 ? 0 : 1].params.push_back(p);
  return groups;
}

std::vector<ParamGroup> weight_decay_groups(const Module& m, double weight_decay) {
  return weight_decay_groups(m.parameters(), weight_decay);
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : SGD(std::vector<ParamGroup>{{std::move(params), std::nullopt, std::nullopt}}, lr, momentum, weight_decay) {}

SGD::SGD(std::vector<ParamGroup> groups, std::optional<double> lr, double momentum, double weight_decay)
    : groups_(std::move(groups)), lr_(lr), weight_decay_(weight_decay), momentum_(momentum) {
  check<ValueError>(!lr || finite_nonneg(*lr), "SGD: expected a finite lr >= 0, but got ", lr.value_or(0));
  check<ValueError>(finite_nonneg(momentum) && finite_nonneg(weight_decay),
                    "SGD: expected finite momentum, weight_decay >= 0, but got ", momentum, ", ", weight_decay);
  resolve_groups(groups_, lr, weight_decay, "SGD", params_, group_of_);
  resolve_momentum(groups_, momentum, false, "SGD");
  bufs_.resize(params_.size());
}

void SGD::add_param_group(ParamGroup group) {
  std::vector<ParamGroup> one{group};
  resolve_momentum(one, momentum_, false, "SGD::add_param_group");  // checked before anything is added
  add_group(groups_, std::move(one.front()), lr_, weight_decay_, "SGD::add_param_group", params_, group_of_);
  bufs_.resize(params_.size());
}

void SGD::set_momentum(size_t group, double momentum) {
  set_momentum_of(groups_, group, momentum, false, "SGD::set_momentum");
}

void SGD::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_group_option(groups_, g, lr, &ParamGroup::lr, "lr", "SGD::set_lr");
}
void SGD::set_lr(size_t group, double lr) { set_group_option(groups_, group, lr, &ParamGroup::lr, "lr", "SGD::set_lr"); }
void SGD::set_weight_decay(size_t group, double weight_decay) {
  set_group_option(groups_, group, weight_decay, &ParamGroup::weight_decay, "weight_decay", "SGD::set_weight_decay");
}

void SGD::step() {
  const RecordFunction region("SGD.step");
  auto buffer = [&](size_t i, double momentum) -> bool {
    follow_param(bufs_[i], params_[i]);
    const bool first = momentum != 0 && !bufs_[i].defined();
    if (first) bufs_[i] = empty(params_[i].shape(), params_[i].dtype(), params_[i].device());
    return first;
  };
  for_each_grad(params_, "SGD.step", [&]<class T>(const KernelTable<T>& k, T* p, const T* g, size_t i, int64_t n) {
    const ParamGroup& group = groups_[group_of_[i]];
    const double momentum = *group.momentum;
    const bool first = buffer(i, momentum);
    T* b = momentum != 0 ? bufs_[i].template data<T>() : nullptr;
    k.sgd_step(params_[i].device().index, p, g, b, n, {*group.lr, momentum, *group.weight_decay, first});
    if (b) bufs_[i].bump_version();
  });
}

void SGD::zero_grad() {
  const RecordFunction region("zero_grad");
  for (const Tensor& p : params_) p.zero_grad();
}

std::map<std::string, Tensor> SGD::state_dict() const {
  std::map<std::string, Tensor> s;
  for (size_t i = 0; i < params_.size(); ++i)
    if (bufs_[i].defined()) s["momentum_buffer." + std::to_string(i)] = bufs_[i];
  s["group_sizes"] = group_sizes(groups_);
  return s;
}

void SGD::load_state_dict(const std::map<std::string, Tensor>& s) {
  const StateChecks c{s, "SGD::load_state_dict"};
  c.check_groups(groups_, params_.size());
  std::set<std::string> expected{"group_sizes"};
  for (size_t i = 0; i < params_.size(); ++i)
    if (const std::string key = "momentum_buffer." + std::to_string(i); s.count(key)) {
      c.check_moment(key, params_[i]);
      expected.insert(key);
    }
  c.check_keys(expected);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto it = s.find("momentum_buffer." + std::to_string(i));
    if (it == s.end()) {
      bufs_[i] = Tensor();
      continue;
    }
    if (!bufs_[i].defined()) bufs_[i] = empty(params_[i].shape(), params_[i].dtype(), params_[i].device());
    copy_data(bufs_[i], it->second);
  }
}

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : AdamW(std::vector<ParamGroup>{{std::move(params), std::nullopt, std::nullopt}}, lr, beta1, beta2, eps,
            weight_decay) {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps,
             double weight_decay)
    : groups_(std::move(groups)), lr_(lr), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps) {
  check<ValueError>(finite_nonneg(lr), "AdamW: expected a finite lr >= 0, but got ", lr);
  check<ValueError>(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
                    "AdamW: expected betas in [0, 1), but got (", beta1, ", ", beta2, ")");
  check<ValueError>(std::isfinite(eps) && static_cast<float>(eps) > 0,
                    "AdamW: expected a finite eps > 0, also as float32 (eps 0 divides 0 by 0 where a gradient has ",
                    "been 0), but got ", eps);
  check<ValueError>(finite_nonneg(weight_decay), "AdamW: expected a finite weight_decay >= 0, but got ", weight_decay);
  resolve_groups(groups_, lr, weight_decay, "AdamW", params_, group_of_);
  resolve_momentum(groups_, beta1, true, "AdamW");
  for (const Tensor& p : params_) {
    m_.push_back(zeros(p.shape(), p.dtype(), p.device()));
    v_.push_back(zeros(p.shape(), p.dtype(), p.device()));
  }
}

void AdamW::add_param_group(ParamGroup group) {
  std::vector<ParamGroup> one{group};
  resolve_momentum(one, beta1_, true, "AdamW::add_param_group");  // checked before anything is added
  add_group(groups_, std::move(one.front()), lr_, weight_decay_, "AdamW::add_param_group", params_, group_of_);
  for (size_t i = m_.size(); i < params_.size(); ++i) {
    m_.push_back(zeros(params_[i].shape(), params_[i].dtype(), params_[i].device()));
    v_.push_back(zeros(params_[i].shape(), params_[i].dtype(), params_[i].device()));
  }
}

void AdamW::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_group_option(groups_, g, lr, &ParamGroup::lr, "lr", "AdamW::set_lr");
}
void AdamW::set_lr(size_t group, double lr) { set_group_option(groups_, group, lr, &ParamGroup::lr, "lr", "AdamW::set_lr"); }
void AdamW::set_weight_decay(size_t group, double weight_decay) {
  set_group_option(groups_, group, weight_decay, &ParamGroup::weight_decay, "weight_decay",
                   "AdamW::set_weight_decay");
}

void AdamW::set_beta1(size_t group, double beta1) { set_momentum_of(groups_, group, beta1, true, "AdamW::set_beta1"); }

void AdamW::step() {
  const RecordFunction region("AdamW.step");
  ++t_;
  const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(t_));
  const double bc2_sqrt = std::sqrt(bc2);
  for_each_grad(params_, "AdamW.step", [&]<class T>(const KernelTable<T>& k, T* p, const T* g, size_t i, int64_t n) {
    follow_param(m_[i], params_[i]);
    follow_param(v_[i], params_[i]);
    const ParamGroup& group = groups_[group_of_[i]];
    const double beta1 = *group.momentum, bc1 = 1.0 - std::pow(beta1, static_cast<double>(t_));
    k.adamw_step(params_[i].device().index, p, g, m_[i].template data<T>(), v_[i].template data<T>(), n,
                 {beta1, beta2_, 1.0 - *group.lr * *group.weight_decay, *group.lr / bc1, bc2_sqrt, eps_});
  });
}

std::map<std::string, Tensor> AdamW::state_dict() const {
  std::map<std::string, Tensor> s;
  for (size_t i = 0; i < params_.size(); ++i) {
    s["m." + std::to_string(i)] = m_[i];
    s["v." + std::to_string(i)] = v_[i];
  }
  s["step"] = tensor_int({t_}, {1});
  s["group_sizes"] = group_sizes(groups_);
  return s;
}

void AdamW::load_state_dict(const std::map<std::string, Tensor>& s) {
  // Every entry is checked before any is copied: a state that does not fit
  // leaves the optimizer as it was.
  const StateChecks c{s, "AdamW::load_state_dict"};
  c.check_groups(groups_, params_.size());
  const std::vector<int64_t> step = c.int_entry("step");
  check<ValueError>(step.size() == 1 && step[0] >= 0 && step[0] < std::numeric_limits<int64_t>::max(), c.fn,
                    ": \"step\" must hold one count in [0, 2^63 - 1), but got ", shape_str(step));
  std::set<std::string> expected{"step", "group_sizes"};
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string m = "m." + std::to_string(i), v = "v." + std::to_string(i);
    c.check_moment(m, params_[i]);
    c.check_moment(v, params_[i], true);
    expected.insert({m, v});
  }
  c.check_keys(expected);
  for (size_t i = 0; i < params_.size(); ++i) {
    copy_data(m_[i], c.get("m." + std::to_string(i)));
    copy_data(v_[i], c.get("v." + std::to_string(i)));
  }
  t_ = step[0];
}

void AdamW::zero_grad() {
  const RecordFunction region("zero_grad");
  for (const Tensor& p : params_) p.zero_grad();
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  const RecordFunction region("clip_grad_norm_");
  check<ValueError>(max_norm > 0, "clip_grad_norm_: expected max_norm > 0, but got ", max_norm);
  // f(k, data, n) with k the kernel table of gradient g's device.
  auto with_kernels = [](const Tensor& g, auto&& f) {
    return dispatch_kernels("clip_grad_norm_", g, has_clip_kernels, [&]<class T>(const KernelTable<T>& k) {
      return f(k, g.template data<T>(), g.numel());
    });
  };
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(contiguous_data(p.grad()));
  // The gradients are divided by their largest magnitude before squaring,
  // so no square overflows (float64 included), and summed one after another.
  double scale = 0;
  bool finite = true;
  for (const Tensor& g : grads) {
    const double m = with_kernels(g, [&](const auto& k, const auto* x, int64_t n) {
      return k.abs_max(g.device().index, x, n);
    });
    finite = finite && std::isfinite(m);
    scale = std::max(scale, m);
  }
  check<ValueError>(finite,
                    "clip_grad_norm_: the total gradient norm is non-finite (NaN or Inf "
                    "in a gradient); gradients left unchanged, skip this step");
  double ss = 0;
  if (scale > 0)
    for (const Tensor& g : grads)
      ss = with_kernels(g, [&](const auto& k, const auto* x, int64_t n) {
        return k.sum_squares(g.device().index, x, n, scale, ss);
      });
  const double norm = scale * std::sqrt(ss);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    size_t i = 0;
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      const Tensor& gc = grads[i++];
      with_kernels(gc, [&](const auto& k, auto* x, int64_t n) { k.scale_inplace(g.device().index, x, n, coef); });
      if (!g.is_contiguous()) copy_data(g, gc);
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
