#include "models/transformer.h"

#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tmem::models {

double mlp_ratio_of(const std::string& method) {
  if (method == "base" || method == "tensor" || method == "slots") return 4.0;
  if (method == "base_wide") return 4.5;
  throw ValueError("unknown method \"" + method + "\" (expected base, base_wide, slots or tensor)");
}

Block::Block(const BackboneConfig& cfg, Generator& gen) {
  const int64_t hidden = static_cast<int64_t>(mlp_ratio_of(cfg.method) * static_cast<double>(cfg.dim));
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(cfg.dim));
  attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(cfg.dim, cfg.heads, cfg.dropout, gen));
  if (cfg.method == "tensor") {
    ln_mem = register_module("ln_mem", std::make_shared<nn::LayerNorm>(cfg.dim));
    memory = register_module("memory", std::make_shared<nn::TensorMemory>(cfg.dim, cfg.memory, gen));
  }
  if (cfg.method == "slots") {
    ln_mem = register_module("ln_mem", std::make_shared<nn::LayerNorm>(cfg.dim));
    slots = register_module("slots", std::make_shared<nn::SlotMemory>(cfg.dim, 8, cfg.memory.chunk,
                                                                      cfg.memory.gamma_init, gen));
  }
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(cfg.dim));
  mlp = register_module("mlp", std::make_shared<nn::MLP>(cfg.dim, hidden, gen));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, gen));
}

Tensor Block::forward(const Tensor& x, ConvLSTM3DState* state, Tensor* slot_state) const {
  Tensor y = x + drop->forward(attn->forward(ln1->forward(x), true));
  if (memory) y = y + memory->forward(ln_mem->forward(y), *state);
  if (slots) y = y + slots->forward(ln_mem->forward(y), *slot_state);
  return y + drop->forward(mlp->forward(ln2->forward(y)));
}

Backbone::Backbone(const BackboneConfig& c, Generator& gen) : cfg(c) {
  mlp_ratio_of(cfg.method);
  check<ValueError>(cfg.layers > 0 && cfg.dim > 0 && cfg.max_len > 0,
                    "Backbone: expected positive layers, dim and max_len");
  pos_ = register_parameter("pos", randn({cfg.max_len, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  for (int64_t l = 0; l < cfg.layers; ++l)
    blocks_.push_back(register_module("blocks." + std::to_string(l), std::make_shared<Block>(cfg, gen)));
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.dim));
}

Tensor Backbone::forward(const Tensor& x) const {
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == cfg.dim && x.shape()[1] <= cfg.max_len,
                    "Backbone: expected x [B, T <= ", cfg.max_len, ", ", cfg.dim, "], but got ",
                    shape_str(x.shape()));
  const int64_t B = x.shape()[0], T = x.shape()[1];
  Tensor h = x + slice(pos_, 0, 0, T);
  ConvLSTM3DState shared;
  for (const auto& blk : blocks_) {
    ConvLSTM3DState own;
    ConvLSTM3DState* state = nullptr;
    Tensor slot_state = blk->slots ? blk->slots->initial_state(B) : Tensor();
    if (blk->memory) {
      if (cfg.leaky_memory) {
        if (!shared.h.defined()) shared = blk->memory->initial_state(B);
        state = &shared;
      } else {
        own = blk->memory->initial_state(B);
        state = &own;
      }
    }
    h = blk->forward(h, state, &slot_state);
  }
  return ln_f_->forward(h);
}

}  // namespace tmem::models
