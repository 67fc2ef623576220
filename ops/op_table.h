// The op table (docs/DESIGN.md §4): every op with its name, the devices that have a
// kernel for it, its differentiable inputs, and its gradcheck cases. `tmem
// ops` prints the table; the test suite runs every case (float64 central
// differences), so "gradcheck: yes" means a case exists and runs in CI.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tmem/core/op_id.h"
#include "tmem/core/tensor.h"

namespace tmem {

/// One gradcheck case: float64 inputs (the ones to check have requires_grad)
/// and the function of them whose gradients are checked.
struct OpCase {
  std::string label;
  std::function<std::vector<Tensor>()> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  double eps = 1e-6;   // central-difference step
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
};

struct OpInfo {
  OpId id;
  std::vector<std::string> devices;       // "cpu", and "cuda" where this build's backend runs it
  std::vector<std::string> diff_inputs;   // names of differentiable inputs
  std::vector<OpCase> cases;              // gradcheck cases
  std::string_view name() const { return op_name(id); }
};

/// Every registered op, in OpId order. Built on first use.
const std::vector<OpInfo>& op_table();
/// The entry for `id`; throws ValueError if the op was never registered.
const OpInfo& op_info(OpId id);

// Registration, one function per op family file.
void register_elementwise_ops(std::vector<OpInfo>& table);
void register_reduction_ops(std::vector<OpInfo>& table);
void register_linalg_ops(std::vector<OpInfo>& table);
void register_shape_ops(std::vector<OpInfo>& table);
void register_softmax_ops(std::vector<OpInfo>& table);
void register_layer_norm_ops(std::vector<OpInfo>& table);
void register_embedding_ops(std::vector<OpInfo>& table);
void register_loss_ops(std::vector<OpInfo>& table);
void register_dropout_ops(std::vector<OpInfo>& table);
void register_attention_ops(std::vector<OpInfo>& table);
void register_grid_sample_ops(std::vector<OpInfo>& table);
void register_gaussian_splat_ops(std::vector<OpInfo>& table);
void register_conv3d_ops(std::vector<OpInfo>& table);
void register_convlstm_ops(std::vector<OpInfo>& table);
void register_selective_scan_ops(std::vector<OpInfo>& table);

/// A float64 tensor of `shape` with U[lo, hi) values from a fixed seed, with
/// requires_grad set (the usual gradcheck input).
Tensor gc_input(const Shape& shape, double lo = -1.0, double hi = 1.0, uint64_t seed = 1);

}  // namespace tmem
