// The diagnostic backbones of DESIGN.md 5: a pre-norm causal transformer
// (`base`), the same with MLP ratio 4.5 (`base_wide`, parameter-matched), and
// the same with a Tensor Memory layer in every block (`tensor`). Shapes: B
// batch, T tokens, C = dim channels.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/slot_memory.h"
#include "nn/tensor_memory.h"

namespace tmem::models {

struct BackboneConfig {
  std::string method = "tensor";  // base | base_wide | slots | tensor
  int64_t dim = 64, layers = 2, heads = 4;
  int64_t max_len = 256;          // learned positions
  double dropout = 0.0;
  nn::TensorMemoryOptions memory;
  /// Reproduces the reference code's threading of ONE memory state through
  /// all layers (layer l+1 starts from the state layer l left after the whole
  /// sequence), which lets tokens read what later tokens wrote. Ablation only.
  bool leaky_memory = false;
};

/// MLP ratio of a method: 4 for base, slots and tensor, 4.5 for base_wide.
/// Throws ValueError for an unknown method.
double mlp_ratio_of(const std::string& method);

/// Pre-norm block: x += attn(ln1(x)); [x += mem(ln_m(x))]; x += mlp(ln2(x)),
/// the memory being TensorMemory (method tensor) or SlotMemory (slots).
class Block : public nn::Module {
 public:
  Block(const BackboneConfig& cfg, Generator& gen);
  /// memory_state / slot_state: this layer's recurrent state (used when the
  /// block has that memory), advanced in place.
  Tensor forward(const Tensor& x, ConvLSTM3DState* memory_state, Tensor* slot_state = nullptr) const;
  std::shared_ptr<nn::LayerNorm> ln1, ln2, ln_mem;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::MLP> mlp;
  std::shared_ptr<nn::TensorMemory> memory;  // null unless method == tensor
  std::shared_ptr<nn::SlotMemory> slots;     // null unless method == slots
  std::shared_ptr<nn::Dropout> drop;
};

/// Learned positions + blocks + final LayerNorm: x[B, T, C] -> [B, T, C].
/// Causal for every method (each layer keeps its own memory state) unless
/// leaky_memory. Throws ShapeError when T > max_len or C != dim.
class Backbone : public nn::Module {
 public:
  Backbone(const BackboneConfig& cfg, Generator& gen);
  Tensor forward(const Tensor& x) const;
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  BackboneConfig cfg;

 private:
  Tensor pos_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
};

}  // namespace tmem::models
