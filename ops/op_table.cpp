#include "tmem/ops/op_table.h"

#include <algorithm>

#include "tmem/core/rng.h"
#include "tmem/ops/dispatch.h"

namespace tmem {

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = [] {
    std::vector<OpInfo> t;
    register_elementwise_ops(t);
    register_reduction_ops(t);
    register_linalg_ops(t);
    register_shape_ops(t);
    register_softmax_ops(t);
    register_layer_norm_ops(t);
    register_embedding_ops(t);
    register_loss_ops(t);
    register_dropout_ops(t);
    register_attention_ops(t);
    register_grid_sample_ops(t);
    register_gaussian_splat_ops(t);
    register_conv3d_ops(t);
    register_convlstm_ops(t);
    register_selective_scan_ops(t);
    std::sort(t.begin(), t.end(), [](const OpInfo& a, const OpInfo& b) { return a.id < b.id; });
    // Devices other than the CPU come from the backend registered in this
    // build (ops/dispatch.h), so the table says what runs here.
    for (OpInfo& info : t)
      if (device_implements(Device::Kind::CUDA, info.id) &&
          std::find(info.devices.begin(), info.devices.end(), "cuda") == info.devices.end())
        info.devices.push_back("cuda");
    return t;
  }();
  return table;
}

const OpInfo& op_info(OpId id) {
  for (const OpInfo& info : op_table())
    if (info.id == id) return info;
  throw ValueError(detail::cat("op_info: op ", op_name(id), " is not registered"));
}

Tensor gc_input(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = rand(shape, lo, hi, DType::Float64, gen);
  t.requires_grad_();
  return t;
}

}  // namespace tmem
