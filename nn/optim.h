// Optimizers, learning-rate schedules and gradient clipping, with PyTorch's
// update rules (torch.optim SGD and AdamW, torch.nn.utils.clip_grad_norm_). Updates run in place on the
// parameters' storage without recording on the tape, on the parameters'
// device, through its kernel table (ops/kernel_list.h TMEM_OPTIM_KERNELS and
// TMEM_CLIP_KERNELS): parameters on a GPU never leave it, and the optimizer
// state follows a parameter that Module::to moved after the optimizer was
// made. On a device, step() and clip_grad_norm_ throw DeviceError when its
// backend lacks those kernels and DtypeError unless the gradients are
// float32.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tmem/core/tensor.h"

namespace tmem::nn {

class Module;

/// Parameters that share a learning rate and weight decay (PyTorch's
/// param_groups), and a momentum: SGD's momentum, AdamW's beta1 (what
/// torch's OneCycleLR cycles). An option left unset takes the optimizer's
/// default; in an optimizer's param_groups() all are set.
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr, weight_decay, momentum;
};

/// The two groups of the usual weight-decay rule (GPT-2 / nanoGPT, timm):
/// parameters of rank >= 2 (weight matrices, embeddings, position tables,
/// convolution and depthwise taps) with `weight_decay`, and every other one
/// (biases, LayerNorm gains, the [1] gates gamma of TensorMemory and
/// SlotMemory, SSM skips D) with weight decay 0, each in the given order. Both
/// groups are returned even when one is empty, so an optimizer's state
/// layout does not depend on the model. Throws ValueError for weight_decay < 0.
std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, double weight_decay);
/// weight_decay_groups(m.parameters(), weight_decay).
std::vector<ParamGroup> weight_decay_groups(const Module& m, double weight_decay);

/// SGD with momentum (PyTorch): b = momentum * b + g (b = g on the first
/// step); p -= lr * b. weight_decay adds wd * p to g first. lr,
/// weight_decay and momentum are per group. Throws ValueError for a negative or infinite
/// (or NaN) lr, momentum or weight_decay, or a parameter given twice or not a
/// leaf.
class SGD {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.0, double weight_decay = 0.0);
  /// lr nullopt (torch's required lr): every group must set its own, here and
  /// in add_param_group; ValueError naming the group otherwise.
  SGD(std::vector<ParamGroup> groups, std::optional<double> lr, double momentum = 0.0, double weight_decay = 0.0);
  /// One update from the parameters' .grad (parameters without a grad are skipped).
  void step();
  void zero_grad();
  /// The groups, with lr and weight_decay resolved.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Sets the learning rate of every group (or of group `group`). Throws
  /// ValueError for lr < 0 or not finite, IndexError for a group out of range.
  void set_lr(double lr);
  void set_lr(size_t group, double lr);
  /// Sets group `group`'s weight decay. Throws ValueError for a weight decay
  /// < 0 or not finite, IndexError for a group out of range.
  void set_weight_decay(size_t group, double weight_decay);
  /// Sets group `group`'s momentum (its buffers are kept). Throws ValueError
  /// for a momentum < 0 or not finite, IndexError for a group out of range.
  void set_momentum(size_t group, double momentum);
  /// Appends a group (torch's add_param_group): an option it leaves unset
  /// takes the constructor's lr, weight_decay or momentum. Throws ValueError
  /// as the constructor does, or for a parameter already in a group
  /// (nothing added).
  void add_param_group(ParamGroup group);
  /// The constructor's momentum: a new group's default.
  double momentum() const { return momentum_; }
  /// The constructor's lr and weight_decay: a new group's defaults (lr
  /// nullopt when the constructor had none).
  std::optional<double> default_lr() const { return lr_; }
  double default_weight_decay() const { return weight_decay_; }
  /// For checkpoints (torch.optim.SGD's per-parameter momentum_buffer): the
  /// momentum buffer of each parameter that has one (from its first step
  /// with momentum != 0) as "momentum_buffer.<i>" (i counts the parameters of
  /// all groups in order) and the parameters per group as "group_sizes" [G]
  /// (int64). load_state_dict checks the whole state before copying any of
  /// it; a parameter whose buffer the state lacks starts its momentum again
  /// (b = g on its next step), as torch's. Throws ValueError for group sizes
  /// other than this optimizer's, an unexpected key or a NaN or infinite
  /// buffer, DtypeError for a
  /// "group_sizes" that is not int64 or a buffer that is not floating,
  /// ShapeError for a buffer whose shape is not parameter i's.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  std::vector<ParamGroup> groups_;
  std::vector<Tensor> params_, bufs_;  // every group's parameters, in order
  std::vector<size_t> group_of_;       // the group of params_[i]
  std::optional<double> lr_;           // the constructor's: a new group's defaults
  double weight_decay_;
  double momentum_;
};

/// AdamW (Loshchilov & Hutter 2019; PyTorch torch.optim.AdamW): decoupled
/// decay p -= lr * wd * p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) (eps added
/// after the square root). lr, weight_decay and b1 are per group. Throws
/// ValueError for lr or weight_decay < 0 or not finite, eps not finite or
/// not above 0 in float32 (eps 0 makes 0 / 0 where a gradient has been 0), betas outside
/// [0,1), or a parameter given twice or not a leaf.
class AdamW {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01);
  AdamW(std::vector<ParamGroup> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01);
  void step();
  void zero_grad();
  int64_t steps() const { return t_; }
  /// The constructor's beta1 (a new group's default; each group's own is its
  /// ParamGroup::momentum) and beta2.
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }
  /// The constructor's lr and weight_decay: a new group's defaults.
  double default_lr() const { return lr_; }
  double default_weight_decay() const { return weight_decay_; }
  /// The groups, with lr and weight_decay resolved.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Sets the learning rate of every group (or of group `group`). Throws
  /// ValueError for lr < 0 or not finite, IndexError for a group out of range.
  void set_lr(double lr);
  void set_lr(size_t group, double lr);
  /// Sets group `group`'s weight decay. Throws ValueError for a weight decay
  /// < 0 or not finite, IndexError for a group out of range.
  void set_weight_decay(size_t group, double weight_decay);
  /// Sets group `group`'s beta1 (ParamGroup::momentum; the bias correction
  /// 1 - beta1^t then uses it, as torch's). Throws ValueError for a beta1
  /// outside [0, 1), IndexError for a group out of range.
  void set_beta1(size_t group, double beta1);
  /// Appends a group (torch's add_param_group) with zero moments: an option
  /// it leaves unset takes the constructor's lr, weight_decay or beta1.
  /// Throws ValueError as the constructor does, or for a parameter already
  /// in a group (nothing added).
  void add_param_group(ParamGroup group);
  /// For checkpoints: moments as "m.<i>", "v.<i>" (i counts the parameters
  /// of all groups in order), the step count as "step" [1] and the
  /// parameters per group as "group_sizes" [G] (int64). load_state_dict
  /// checks the whole state before copying any of it (a state that does not
  /// fit leaves the optimizer unchanged) and throws ValueError on a missing
  /// or unexpected key, group sizes other than this optimizer's (a state without
  /// "group_sizes" is one group: the form before groups), a "step" that is
  /// not one count in [0, 2^63 - 1), a NaN or infinite moment, or a
  /// negative value in a "v.<i>";
  /// DtypeError for a "step" or "group_sizes" that is not int64 or a moment
  /// that is not floating; ShapeError for a "step" or "group_sizes" that is
  /// not 1-D or a moment whose shape is not parameter i's.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  std::vector<ParamGroup> groups_;
  std::vector<Tensor> params_, m_, v_;  // every group's parameters, in order
  std::vector<size_t> group_of_;        // the group of params_[i]
  double lr_, weight_decay_;            // the constructor's: a new group's defaults
  double beta1_, beta2_, eps_;
  int64_t t_ = 0;
};

/// Linear warmup then cosine decay (the GPT-2 / nanoGPT schedule; the cosine
/// of Loshchilov & Hutter 2017 without restarts), for step = 0, 1, ...:
///   step < warmup:  base_lr * (step + 1) / warmup
///   otherwise:      min_lr + 0.5 (base_lr - min_lr) (1 + cos(pi p)),
///                   p = min(1, (step - warmup) / (total - warmup))
/// so the rate reaches base_lr at the last warmup step, is base_lr at step
/// `warmup`, and min_lr from step `total` on. Throws ValueError for step < 0,
/// warmup < 0, total <= warmup, base_lr < 0 or min_lr outside [0, base_lr].
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double base_lr, double min_lr = 0.0);

/// Scales all gradients so their joint L2 norm is at most max_norm (PyTorch:
/// coefficient max_norm / (norm + 1e-6), applied when below 1). The norm is
/// computed with scaling, so it does not overflow for huge gradients. Returns
/// the norm before clipping. A non-finite norm throws ValueError and leaves
/// every gradient untouched (the caller skips the step).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace tmem::nn
