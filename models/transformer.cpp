#include "tmem/models/transformer.h"

#include <array>
#include <cmath>
#include <string_view>

#include "tmem/core/enum_names.h"
#include "tmem/core/json_dump.h"
#include "tmem/nn/container.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

namespace {

constexpr std::array<std::string_view, 10> kBackboneMethods = {"base", "base_wide", "slots", "tensor", "linear",
                                                               "ssm",  "rmt",       "none",  "full",   "xl"};
constexpr std::array<std::string_view, 4> kAttentions = {"full", "local", "linear", "xl"};

}  // namespace

std::string to_string(BackboneMethod method) { return enum_name(kBackboneMethods, method); }

BackboneMethod parse_backbone_method(const std::string& name) {
  return parse_enum<BackboneMethod>(kBackboneMethods, name, "unknown method");
}

void to_json(nlohmann::json& j, BackboneMethod method) { j = to_string(method); }

void from_json(const nlohmann::json& j, BackboneMethod& method) {
  method = parse_backbone_method(j.get<std::string>());
}

std::string to_string(Attention attention) { return enum_name(kAttentions, attention); }

Attention parse_attention(const std::string& name) { return parse_enum<Attention>(kAttentions, name, "unknown attention"); }

double mlp_ratio_of(BackboneMethod method) {
  using enum BackboneMethod;
  check<ValueError>(method != none && method != full && method != xl, "Backbone: method ", to_string(method),
                    " is a name of the segment-recurrent comparison (backbone_config_for turns it into base); "
                    "expected base, base_wide, slots, tensor, linear, ssm or rmt");
  return method == base_wide ? 4.5 : 4.0;
}

int64_t memory_layer_parameters(int64_t dim, const nn::TensorMemoryOptions& memory) {
  Generator scratch(0);
  return nn::TensorMemory(dim, memory, scratch).num_parameters() + 2 * dim;
}

int64_t parameter_matched_mlp_hidden(int64_t dim, int64_t extra, int64_t blocks) {
  check<ValueError>(dim >= 1 && blocks >= 1 && extra >= 0,
                    "parameter_matched_mlp_hidden: expected dim >= 1, blocks >= 1 and extra >= 0, but got dim ",
                    dim, " blocks ", blocks, " extra ", extra);
  const int64_t per_unit = blocks * (2 * dim + 1);
  return 4 * dim + (extra + per_unit / 2) / per_unit;  // rounded
}

void BackboneState::detach() {
  for (auto& s : memory) s = {s.h.detach(), s.c.detach()};
  for (auto& s : slots) s = s.detach();
  for (auto& s : cache) s = s.detach();
  for (auto& s : linear) s = {s.S.detach(), s.z.detach()};
  for (auto& s : ssm) s = s.detach();
  if (tokens.defined()) tokens = tokens.detach();
}

std::map<std::string, Tensor> BackboneState::named_tensors() const {
  std::map<std::string, Tensor> out;
  auto put = [&out](const std::string& name, const Tensor& t) {
    if (t.defined()) out[name] = t;
  };
  for (size_t i = 0; i < memory.size(); ++i) {
    put("memory." + std::to_string(i) + ".h", memory[i].h);
    put("memory." + std::to_string(i) + ".c", memory[i].c);
  }
  for (size_t i = 0; i < linear.size(); ++i) {
    put("linear." + std::to_string(i) + ".S", linear[i].S);
    put("linear." + std::to_string(i) + ".z", linear[i].z);
  }
  for (size_t i = 0; i < slots.size(); ++i) put("slots." + std::to_string(i), slots[i]);
  for (size_t i = 0; i < cache.size(); ++i) put("cache." + std::to_string(i), cache[i]);
  for (size_t i = 0; i < ssm.size(); ++i) put("ssm." + std::to_string(i), ssm[i]);
  put("tokens", tokens);
  return out;
}

BackboneState BackboneState::from_named_tensors(const std::map<std::string, Tensor>& named, Device device) {
  BackboneState s;
  // The slot of `v` at the index that follows "<kind>." in `rest`, growing v to hold it.
  auto slot = [](auto& v, const std::string& index) -> auto& {
    const size_t i = std::stoul(index);
    if (v.size() <= i) v.resize(i + 1);
    return v[i];
  };
  for (const auto& [name, t] : named) {
    const Tensor x = t.to(device);
    const size_t dot = name.find('.'), dot2 = name.find('.', dot + 1);
    const std::string kind = name.substr(0, dot);
    const std::string index = dot == std::string::npos ? "" : name.substr(dot + 1, dot2 - dot - 1);
    const std::string field = dot2 == std::string::npos ? "" : name.substr(dot2 + 1);
    const bool numbered = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
                          index.size() < 10;
    if (name == "tokens") s.tokens = x;
    else if (numbered && kind == "memory" && field == "h") slot(s.memory, index).h = x;
    else if (numbered && kind == "memory" && field == "c") slot(s.memory, index).c = x;
    else if (numbered && kind == "linear" && field == "S") slot(s.linear, index).S = x;
    else if (numbered && kind == "linear" && field == "z") slot(s.linear, index).z = x;
    else if (numbered && kind == "slots" && dot2 == std::string::npos) slot(s.slots, index) = x;
    else if (numbered && kind == "cache" && dot2 == std::string::npos) slot(s.cache, index) = x;
    else if (numbered && kind == "ssm" && dot2 == std::string::npos) slot(s.ssm, index) = x;
    else throw ValueError("BackboneState::from_named_tensors: unknown state tensor \"" + printable(name) + "\"");
  }
  return s;
}

std::vector<Tensor> BackboneState::tensors() const {
  std::vector<Tensor> all;
  for (const auto& s : memory) all.insert(all.end(), {s.h, s.c});
  for (const auto& s : linear) all.insert(all.end(), {s.S, s.z});
  for (const auto* v : {&slots, &cache, &ssm}) all.insert(all.end(), v->begin(), v->end());
  if (tokens.defined()) all.push_back(tokens);
  return all;
}

int64_t BackboneState::floats_per_sequence() const {
  int64_t n = 0;
  for (const Tensor& t : tensors()) n += t.numel() / t.shape()[0];
  return n;
}

int64_t state_floats(const BackboneConfig& cfg) {
  const int64_t layers = cfg.leaky_memory ? 1 : cfg.layers / cfg.memory_every;
  const auto& m = cfg.memory;
  if (cfg.attention == Attention::xl) {
    check<ValueError>(cfg.cache_len > 0, "state_floats: xl's state is fixed only for cache_len > 0, but got ",
                      cfg.cache_len);
    return cfg.layers * cfg.dim * cfg.cache_len;
  }
  if (cfg.method == BackboneMethod::tensor) return layers * 2 * m.channels * m.D * m.H * m.W;
  if (cfg.method == BackboneMethod::slots) return layers * 8 * cfg.dim;
  if (cfg.method == BackboneMethod::linear) return cfg.layers * cfg.heads * cfg.linear_features * (cfg.dim / cfg.heads + 1);
  if (cfg.method == BackboneMethod::ssm) return cfg.layers * cfg.dim * cfg.ssm_state;
  if (cfg.method == BackboneMethod::rmt) return cfg.memory_tokens * cfg.dim;
  return 0;
}

namespace {

nn::AttentionOptions attention_options(const BackboneConfig& cfg) {
  nn::AttentionOptions o;
  if (cfg.attention == Attention::local) {
    check<ValueError>(cfg.window > 0, "Backbone: local attention needs window > 0, but got ", cfg.window);
    o.window = cfg.window;
  }
  o.linear = cfg.attention == Attention::linear;
  if (cfg.attention == Attention::xl) o.rel_distances = 2 * cfg.max_len;
  return o;
}

}  // namespace

Block::Block(const BackboneConfig& cfg, Generator& gen, bool with_memory) : causal(cfg.causal) {
  const int64_t hidden = cfg.mlp_hidden > 0 ? cfg.mlp_hidden
                                            : static_cast<int64_t>(mlp_ratio_of(cfg.method) * static_cast<double>(cfg.dim));
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(cfg.dim));
  attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(cfg.dim, cfg.heads, cfg.dropout, gen,
                                                                          attention_options(cfg)));
  if (with_memory && cfg.method == BackboneMethod::tensor) {
    ln_mem = register_module("ln_mem", std::make_shared<nn::LayerNorm>(cfg.dim));
    memory = register_module("memory", std::make_shared<nn::TensorMemory>(cfg.dim, cfg.memory, gen));
  }
  if (cfg.method == BackboneMethod::linear)
    linear = register_module("linear", std::make_shared<nn::LinearAttentionMemory>(cfg.dim, cfg.heads,
                                                                                  cfg.linear_features, gen));
  if (cfg.method == BackboneMethod::ssm) ssm = register_module("ssm", std::make_shared<nn::SelectiveSSM>(cfg.dim, cfg.ssm_state, gen));
  if (linear || ssm) ln_mem = register_module("ln_mem", std::make_shared<nn::LayerNorm>(cfg.dim));
  if (with_memory && cfg.method == BackboneMethod::slots) {
    ln_mem = register_module("ln_mem", std::make_shared<nn::LayerNorm>(cfg.dim));
    slots = register_module("slots", std::make_shared<nn::SlotMemory>(cfg.dim, 8, cfg.memory.chunk,
                                                                      cfg.memory.gamma_init, gen));
  }
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(cfg.dim));
  mlp = register_module("mlp", std::make_shared<nn::MLP>(cfg.dim, hidden, gen));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, gen));
}

Tensor Block::forward(const Tensor& x, ConvLSTM3DState* state, Tensor* slot_state, const Tensor& cache,
                      const Tensor& attn_mask, nn::LinearAttentionState* linear_state, Tensor* ssm_state) const {
  Tensor ctx = cache.defined() ? ln1->forward(cache) : Tensor();
  Tensor y = x + drop->forward(attn->forward(ln1->forward(x), causal, Tensor(), ctx, attn_mask));
  if (memory) {
    nn::TensorMemoryOutput m = memory->forward(ln_mem->forward(y), *state);
    *state = std::move(m.state);
    y = y + m.out;
  }
  if (slots) y = y + slots->forward(ln_mem->forward(y), *slot_state);
  if (linear) y = y + linear->forward(ln_mem->forward(y), *linear_state);
  if (ssm) y = y + ssm->forward(ln_mem->forward(y), *ssm_state);
  return y + drop->forward(mlp->forward(ln2->forward(y)));
}

Backbone::Backbone(const BackboneConfig& c, Generator& gen) : cfg(c) {
  mlp_ratio_of(cfg.method);
  check<ValueError>(cfg.layers > 0 && cfg.dim > 0 && cfg.max_len > 0 && cfg.mlp_hidden >= 0 && cfg.memory_every > 0,
                    "Backbone: expected positive layers, dim, max_len and memory_every and mlp_hidden >= 0");
  check<ValueError>(cfg.cache_len >= -1, "Backbone: expected cache_len >= -1 (-1: keep every token), but got ",
                    cfg.cache_len);
  check<ValueError>(cfg.causal || cfg.attention == Attention::full,
                    "Backbone: bidirectional (non-causal) attention must be full, but got attention \"",
                    to_string(cfg.attention), "\"");
  // Memory layers sit in blocks memory_every, 2 memory_every, ...: past the
  // last block a "tensor" model would hold none and train as the base one.
  check<ValueError>(cfg.method != BackboneMethod::tensor || cfg.leaky_memory || cfg.memory_every <= cfg.layers,
                    "Backbone: memory_every ", cfg.memory_every, " is more than the ", cfg.layers,
                    " layers, so no block would hold a memory layer (expected memory_every <= layers)");
  check<ValueError>(cfg.method != BackboneMethod::rmt || cfg.memory_tokens > 0,
                    "Backbone: rmt needs memory_tokens >= 1, but got ", cfg.memory_tokens);
  // rmt puts its R memory tokens before and after each segment: a forward
  // said only "expected x [B, T <= -184, ...]".
  check<ValueError>(cfg.method != BackboneMethod::rmt || cfg.max_len - cfg.memory_tokens > cfg.memory_tokens,
                    "Backbone: rmt's 2 x ", cfg.memory_tokens, " memory tokens leave no room for a segment in max_len ",
                    cfg.max_len, " (expected max_len > 2 memory_tokens)");
  // A chunk past max_len makes every sequence one zero-padded chunk, and
  // sizes the write projection (chunk * dim inputs) for tokens that never come.
  check<ValueError>((cfg.method != BackboneMethod::tensor && cfg.method != BackboneMethod::slots) ||
                        cfg.memory.chunk <= cfg.max_len,
                    "Backbone: expected the memory chunk <= max_len ", cfg.max_len, " (the most tokens a forward ",
                    "takes), but got chunk ", cfg.memory.chunk);
  if (cfg.attention != Attention::xl && cfg.positions)
    pos_ = register_parameter("pos", randn({cfg.max_len, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  if (cfg.method == BackboneMethod::rmt)
    memory_init_ = register_parameter("memory_tokens", randn({cfg.memory_tokens, cfg.dim}, 0.0, 0.02,
                                                             DType::Float32, gen));
  // A ModuleList, so the blocks' names stay "blocks.<l>.*" (a '.' is no
  // module name of its own).
  auto blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t l = 0; l < cfg.layers; ++l) {
    blocks_.push_back(std::make_shared<Block>(cfg, gen, (l + 1) % cfg.memory_every == 0));
    blocks->push_back(blocks_.back());
  }
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.dim));
}

Tensor Backbone::extend_cache(const Tensor& cache, const Tensor& h) const {
  Tensor now = cfg.cache_grad ? h : h.detach();
  if (cfg.cache_len == 0 || !cache.defined()) return now;
  Tensor all = cat({cache, now}, 1);
  const int64_t P = all.shape()[1];
  return cfg.cache_len > 0 && P > cfg.cache_len ? contiguous(slice(all, 1, P - cfg.cache_len, P)) : all;
}

Tensor Backbone::forward(const Tensor& x) const {
  BackboneState fresh;
  return forward(x, fresh);
}

Tensor Backbone::forward(const Tensor& x, BackboneState& state, const Tensor& attn_mask) const {
  const bool rmt = cfg.method == BackboneMethod::rmt;
  const int64_t R = rmt ? cfg.memory_tokens : 0;
  check<ShapeError>(x.dim() == 3 && x.shape()[2] == cfg.dim && x.shape()[1] + 2 * R <= cfg.max_len,
                    "Backbone: expected x [B, T <= ", cfg.max_len - 2 * R, ", ", cfg.dim, "], but got ",
                    shape_str(x.shape()));
  check<ValueError>(!rmt || !attn_mask.defined(), "Backbone: rmt takes no attention mask");
  const int64_t B = x.shape()[0], T = x.shape()[1];
  const auto L = blocks_.size();
  if (state.empty()) {
    for (const auto& blk : blocks_) {
      if (blk->memory && (!cfg.leaky_memory || state.memory.empty()))
        state.memory.push_back(blk->memory->initial_state(B));
      if (blk->slots) state.slots.push_back(blk->slots->initial_state(B));
      if (blk->linear) state.linear.push_back(blk->linear->initial_state(B));
      if (blk->ssm) state.ssm.push_back(blk->ssm->initial_state(B));
    }
  }
  Tensor h = x;
  if (rmt) {
    Tensor mem = state.tokens.defined() ? state.tokens : expand(memory_init_, {B, R, cfg.dim});
    h = cat({mem, x, mem}, 1);
  }
  if (pos_.defined()) h = h + slice(pos_, 0, 0, T + 2 * R);
  std::vector<Tensor> next_cache;
  size_t mem_i = 0, slot_i = 0, lin_i = 0, ssm_i = 0;  // the state of the next block with that mechanism
  for (size_t l = 0; l < L; ++l) {
    const auto& blk = blocks_[l];
    if (cfg.attention == Attention::xl) next_cache.push_back(extend_cache(state.cache.empty() ? Tensor() : state.cache[l], h));
    ConvLSTM3DState* mem = blk->memory ? &state.memory[cfg.leaky_memory ? 0 : mem_i++] : nullptr;
    Tensor* slot = blk->slots ? &state.slots[slot_i++] : nullptr;
    nn::LinearAttentionState* lin = blk->linear ? &state.linear[lin_i++] : nullptr;
    Tensor* ssm = blk->ssm ? &state.ssm[ssm_i++] : nullptr;
    h = blk->forward(h, mem, slot, state.cache.empty() ? Tensor() : state.cache[l], attn_mask, lin, ssm);
  }
  if (cfg.attention == Attention::xl) state.cache = std::move(next_cache);
  Tensor out = ln_f_->forward(h);
  if (!rmt) return out;
  state.tokens = contiguous(slice(out, 1, R + T, 2 * R + T));
  return slice(out, 1, R, R + T);
}

std::vector<double> memory_gates(const Backbone& backbone) {
  std::vector<double> gates;
  for (const auto& blk : backbone.blocks())
    if (blk->memory) gates.push_back(1.0 / (1.0 + std::exp(-blk->memory->gamma.item())));
  return gates;
}

nlohmann::json memory_internals(const Backbone& backbone, const nn::TensorMemoryProbe& probe) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < backbone.blocks().size(); ++l) {
    const auto& mem = backbone.blocks()[l]->memory;
    if (!mem) continue;
    nlohmann::json j;
    j["layer"] = l;
    j["gate"] = number_to_json(1.0 / (1.0 + std::exp(-mem->gamma.item())));  // "NaN", not null, once diverged
    if (const nn::TensorMemoryProbe::Record* r = probe.last(*mem)) {
      j["write_sigma"] = tensor_summary("write_sigma", r->sigma);
      j["read_coords"] = tensor_summary("read_coords", r->mu_read);
      j["write_coords"] = tensor_summary("write_coords", r->mu_write);
    }
    layers.push_back(j);
  }
  return layers;
}

BackboneConfig bidirectional_backbone_config(bool with_memory, int64_t dim, int64_t layers, int64_t heads,
                                             int64_t max_len, double dropout, const nn::TensorMemoryOptions& memory,
                                             int64_t memory_every, int64_t mlp_hidden) {
  check<ValueError>(memory_every >= 1 && mlp_hidden >= 0, "Backbone: expected memory_every >= 1 and mlp_hidden >= 0, ",
                    "but got ", memory_every, " and ", mlp_hidden);
  BackboneConfig b;
  b.method = with_memory ? BackboneMethod::tensor : BackboneMethod::base;
  b.dim = dim;
  b.layers = layers;
  b.heads = heads;
  b.max_len = max_len;
  b.dropout = dropout;
  b.memory = memory;
  b.memory_every = memory_every;
  b.causal = false;
  b.positions = false;
  if (mlp_hidden > 0)
    b.mlp_hidden = mlp_hidden;
  else if (!with_memory)
    b.mlp_hidden = parameter_matched_mlp_hidden(dim, layers / memory_every * memory_layer_parameters(dim, memory), layers);
  return b;
}

}  // namespace tmem::models
