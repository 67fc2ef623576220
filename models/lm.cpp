#include "tmem/models/lm.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/enum_names.h"
#include "tmem/ops/elementwise.h"
#include "tmem/ops/linalg.h"
#include "tmem/ops/loss.h"
#include "tmem/ops/shape.h"

namespace tmem::models {

LMConfig::LMConfig() {
  memory.channels = 32;
  memory.D = memory.H = memory.W = 8;
  memory.chunk = 16;
}

namespace {

constexpr std::array<std::string_view, 6> kLMMethods = {"base", "local", "linear", "xl", "tensor", "leaky"};

}  // namespace

std::string to_string(LMMethod method) { return enum_name(kLMMethods, method); }

LMMethod parse_lm_method(const std::string& name) { return parse_enum<LMMethod>(kLMMethods, name, "unknown LM method"); }

void to_json(nlohmann::json& j, LMMethod method) { j = to_string(method); }

void from_json(const nlohmann::json& j, LMMethod& method) { method = parse_lm_method(j.get<std::string>()); }

const std::vector<LMMethod>& lm_methods() {
  using enum LMMethod;
  static const std::vector<LMMethod> m = {base, local, linear, xl, tensor, leaky};
  return m;
}

BackboneConfig lm_backbone_config(const LMConfig& cfg) {
  BackboneConfig b;
  const bool memory = cfg.method == LMMethod::tensor || cfg.method == LMMethod::leaky;
  b.method = memory ? BackboneMethod::tensor : BackboneMethod::base;
  b.leaky_memory = cfg.method == LMMethod::leaky;
  b.attention = cfg.method == LMMethod::local    ? Attention::local
                : cfg.method == LMMethod::linear ? Attention::linear
                : cfg.method == LMMethod::xl     ? Attention::xl
                                                 : Attention::full;
  b.window = cfg.window;
  b.dim = cfg.dim;
  b.layers = cfg.layers;
  b.heads = cfg.heads;
  b.max_len = cfg.seq;
  b.dropout = cfg.dropout;
  b.memory = cfg.memory;
  b.cache_len = cfg.cache_len;
  check<ValueError>(cfg.mlp_hidden >= 0, "TransformerLM: expected mlp_hidden >= 0, but got ", cfg.mlp_hidden);
  check<ValueError>(!memory || cfg.memory.chunk <= cfg.seq, "TransformerLM: expected the memory chunk <= seq (the ",
                    "segment length T), but got chunk ", cfg.memory.chunk, " and seq ", cfg.seq);
  if (cfg.mlp_hidden > 0) {
    b.mlp_hidden = cfg.mlp_hidden;
  } else if (!memory) {
    b.mlp_hidden = parameter_matched_mlp_hidden(cfg.dim, memory_layer_parameters(cfg.dim, cfg.memory), 1);
  }
  return b;
}

TransformerLM::TransformerLM(const LMConfig& c, Generator& gen) : cfg(c) {
  check<ValueError>(cfg.vocab >= 1, "TransformerLM: expected vocab >= 1, but got ", cfg.vocab);
  tok = register_module("tok", std::make_shared<nn::Embedding>(cfg.vocab, cfg.dim, gen));
  copy_data(tok->weight, randn({cfg.vocab, cfg.dim}, 0.0, 0.02, DType::Float32, gen));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, gen));
  backbone = register_module("backbone", std::make_shared<Backbone>(lm_backbone_config(cfg), gen));
}

Tensor TransformerLM::forward(const Tensor& tokens) const {
  BackboneState fresh;
  return forward(tokens, fresh);
}

Tensor TransformerLM::forward(const Tensor& tokens, BackboneState& state) const {
  check<ShapeError>(tokens.dim() == 2 && tokens.shape()[1] >= 1 && tokens.shape()[1] <= cfg.seq,
                    "TransformerLM: expected tokens [B, 1 <= T <= ", cfg.seq, "], but got ",
                    shape_str(tokens.shape()));
  check<DtypeError>(tokens.dtype() == DType::Int64, "TransformerLM: expected int64 tokens, but got ",
                    dtype_name(tokens.dtype()));
  Tensor h = backbone->forward(drop->forward(tok->forward(tokens)), state);
  return matmul(h, transpose(tok->weight, 0, 1));
}

StreamSegments::StreamSegments(const std::vector<int64_t>& tokens, int64_t batch, int64_t seq)
    : tokens_(tokens), batch_(batch), seq_(seq) {
  const auto N = static_cast<int64_t>(tokens.size());
  check<ValueError>(N >= 2 && batch >= 1 && seq >= 1, "StreamSegments: expected at least 2 tokens, ",
                    "batch >= 1 and seq >= 1, but got ", N, " tokens, batch ", batch, ", seq ", seq);
  row_ = (N - 1 + batch - 1) / batch;
  count_ = (row_ + seq - 1) / seq;
}

std::pair<Tensor, Tensor> StreamSegments::segment(int64_t i, Device device) const {
  check<IndexError>(i >= 0 && i < count_, "StreamSegments: segment ", i, " is outside [0, ", count_, ")");
  const auto N = static_cast<int64_t>(tokens_.size());
  std::vector<int64_t> in(static_cast<size_t>(batch_ * seq_), 0), tg(in.size(), -100);
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < seq_; ++t) {
      const int64_t j = i * seq_ + t, pos = b * row_ + j;  // input position; the target is pos + 1
      if (j >= row_ || pos + 1 >= N) break;
      in[b * seq_ + t] = tokens_[pos];
      tg[b * seq_ + t] = tokens_[pos + 1];
    }
  return {tensor_int(in, {batch_, seq_}).to(device), tensor_int(tg, {batch_, seq_}).to(device)};
}

double PerplexityResult::perplexity() const { return std::exp(nll()); }

PerplexityResult evaluate_perplexity(TransformerLM& model, const std::vector<int64_t>& stream, int64_t batch,
                                     const std::function<void(const PerplexityResult&, int64_t, int64_t)>& progress) {
  StreamSegments segs(stream, batch, model.cfg.seq);
  const Device device = model.tok->weight.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  BackboneState state;
  PerplexityResult r;
  for (int64_t i = 0; i < segs.count(); ++i) {
    auto [in, tg] = segs.segment(i, device);
    Tensor logits = model.forward(in, state);
    Tensor flat = reshape(tg, {-1});
    r.nll_sum += cross_entropy(reshape(logits, {-1, model.cfg.vocab}), flat, -100, 0.0, "sum").item();
    for (int64_t t : flat.to_int_vector()) r.tokens += t != -100;
    if (progress) progress(r, i + 1, segs.count());
  }
  model.train(was_training);
  return r;
}

namespace {

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(dtype_size(t.dtype())) : 0; }

int64_t state_bytes(const BackboneState& s) {
  int64_t n = 0;
  for (const Tensor& t : s.tensors()) n += bytes_of(t);
  return n;
}

}  // namespace

StreamReport stream_lm(TransformerLM& model, int64_t tokens, uint64_t seed,
                       const std::function<bool(const StreamReport&)>& report) {
  check<ValueError>(tokens >= 1, "stream_lm: expected tokens >= 1, but got ", tokens);
  const Device device = model.tok->weight.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  Generator gen(seed);
  BackboneState state;
  StreamReport r;
  allocator_reset_peak(device);
  const auto t0 = std::chrono::steady_clock::now();
  while (r.tokens < tokens) {
    const int64_t T = std::min(model.cfg.seq, tokens - r.tokens);
    Tensor ids = randint({1, T}, model.cfg.vocab, gen).to(device);
    Tensor logits = model.forward(ids, state);
    synchronize(device);
    r.tokens += T;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.state_bytes = state_bytes(state);
    const AllocatorStats stats = allocator_stats(device);
    r.bytes_in_use = stats.in_use;
    r.peak_bytes = stats.peak_in_use;
    if (report && !report(r)) break;
  }
  model.train(was_training);
  return r;
}

}  // namespace tmem::models
