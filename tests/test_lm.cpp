// Language models (models/lm.h): causal linear attention against its masked
// O(T^2) form, causality of every variant (and leaky failing it), the
// Transformer-XL cache (detached; two streamed segments == one causal
// forward), Tensor Memory's carried state, perplexity, the stream batching,
// the LR schedule, parameter matching, a training smoke test and the SVG plot.
#include "tmem/models/lm_trainer.h"
#include "tmem/nn/optim.h"
#include "model_fixtures.h"
#include "test_util.h"

using namespace tmem;
using namespace tmem::models;
using tmem::test::check_close;
using tmem::test::tiny_lm;

namespace {

Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator gen(seed);
  return randint({B, T}, V, gen);
}

// tokens with position t of every row replaced by (token + 1) mod V.
Tensor change_token(const Tensor& tokens, int64_t t, int64_t V) {
  std::vector<int64_t> v = tokens.to_int_vector();
  const int64_t T = tokens.shape()[1];
  for (int64_t b = 0; b < tokens.shape()[0]; ++b) v[b * T + t] = (v[b * T + t] + 1) % V;
  return tensor_int(v, tokens.shape());
}

// max |logits(tokens) - logits(tokens changed at t)| over positions [lo, hi).
double logit_change(const TransformerLM& model, const Tensor& tokens, int64_t t, int64_t lo, int64_t hi) {
  NoGradGuard no_grad;
  Tensor a = model.forward(tokens), b = model.forward(change_token(tokens, t, model.cfg.vocab));
  return max(abs(slice(a, 1, lo, hi) - slice(b, 1, lo, hi))).item();
}

// The masked O(T^2) form of causal linear attention.
Tensor linear_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, double eps) {
  const int64_t T = q.shape()[2];
  std::vector<double> lower(static_cast<size_t>(T * T), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s <= t; ++s) lower[t * T + s] = 1.0;
  Tensor a = matmul(q, transpose(k, -2, -1)) * tensor(lower, {T, T}, q.dtype());
  return matmul(a, v) / (sum(a, {-1}, true) + eps);
}

}  // namespace

TEST_CASE("causal_linear_attention equals the masked O(T^2) form for every chunk size") {
  Generator gen(4);
  Tensor q = rand({2, 2, 7, 3}, 0.0, 1.0, DType::Float32, gen);  // non-negative features
  Tensor k = rand({2, 2, 7, 3}, 0.0, 1.0, DType::Float32, gen);
  Tensor v = randn({2, 2, 7, 4}, 0.0, 1.0, DType::Float32, gen);
  const std::vector<double> ref = linear_attention_reference(q, k, v, 1e-6).to_vector();
  for (int64_t chunk : {1, 3, 7, 64}) {
    INFO("chunk " << chunk);
    Tensor out = causal_linear_attention(q, k, v, 1e-6, chunk);
    CHECK(out.shape() == Shape{2, 2, 7, 4});
    check_close(out, ref, 1e-6, 1e-5);
  }
  // Token 0 sees only itself: out[0] = q0.k0 v0 / (q0.k0 + eps) = v0 (up to eps).
  check_close(slice(causal_linear_attention(q, k, v, 0.0, 2), 2, 0, 1).to_vector(),
              slice(v, 2, 0, 1).to_vector(), 1e-6, 1e-5);
  tmem::test::require_gradcheck(
      [](const std::vector<Tensor>& x) { return causal_linear_attention(x[0], x[1], x[2], 1e-6, 2); },
      {gc_input({1, 2, 5, 3}, 0.1, 1.0, 1), gc_input({1, 2, 5, 3}, 0.1, 1.0, 2), gc_input({1, 2, 5, 2}, -1, 1, 3)});
  CHECK_THROWS_WITH_AS(causal_linear_attention(q, slice(k, 2, 0, 5), v), doctest::Contains("[2,2,5,3]"),
                       ShapeError);
  CHECK_THROWS_AS(causal_linear_attention(q, k, v, 1e-6, 0), ValueError);
}

TEST_CASE("warmup_cosine_lr: linear warmup, cosine decay, then the floor") {
  // warmup 4, total 14, base 1.0, min 0.1
  CHECK(nn::warmup_cosine_lr(0, 4, 14, 1.0, 0.1) == doctest::Approx(0.25));
  CHECK(nn::warmup_cosine_lr(3, 4, 14, 1.0, 0.1) == doctest::Approx(1.0));
  CHECK(nn::warmup_cosine_lr(4, 4, 14, 1.0, 0.1) == doctest::Approx(1.0));
  CHECK(nn::warmup_cosine_lr(9, 4, 14, 1.0, 0.1) == doctest::Approx(0.55));  // half way: (1 + 0.1) / 2
  CHECK(nn::warmup_cosine_lr(14, 4, 14, 1.0, 0.1) == doctest::Approx(0.1));
  CHECK(nn::warmup_cosine_lr(1000, 4, 14, 1.0, 0.1) == doctest::Approx(0.1));
  CHECK(nn::warmup_cosine_lr(0, 0, 10, 2.0) == doctest::Approx(2.0));  // no warmup
  CHECK_THROWS_AS(nn::warmup_cosine_lr(0, 10, 10, 1.0), ValueError);
  CHECK_THROWS_AS(nn::warmup_cosine_lr(0, 1, 10, 1.0, 2.0), ValueError);
  CHECK_THROWS_AS(nn::warmup_cosine_lr(-1, 1, 10, 1.0), ValueError);
}

TEST_CASE("LM causality: changing token t changes no logit before t (base, local, linear, xl, tensor)") {
  Tensor tokens = random_tokens(2, 12, 11, 3);
  for (const auto m : {LMMethod::base, LMMethod::local, LMMethod::linear, LMMethod::xl, LMMethod::tensor})
    for (int64_t chunk : {1, 2}) {
      if (chunk == 2 && m != LMMethod::tensor) continue;
      LMConfig c = tiny_lm(m);
      c.memory.chunk = chunk;
      Generator gen(7);
      TransformerLM model(c, gen);
      for (int64_t t : {1, 5, 10}) {
        INFO(m << " chunk " << chunk << " t=" << t);
        CHECK(logit_change(model, tokens, t, 0, t) == 0.0);
        CHECK(logit_change(model, tokens, t, t, 12) > 0.0);
      }
    }
}

TEST_CASE("local attention: a token reaches at most layers * (window - 1) positions ahead") {
  Generator gen(8);
  TransformerLM model(tiny_lm(LMMethod::local), gen);  // window 3, 2 layers: reach 4
  Tensor tokens = random_tokens(2, 12, 11, 5);
  CHECK(logit_change(model, tokens, 2, 2, 7) > 0.0);
  CHECK(logit_change(model, tokens, 2, 7, 12) == 0.0);
  Generator gen2(8);
  TransformerLM full(tiny_lm(LMMethod::base), gen2);
  CHECK(logit_change(full, tokens, 2, 7, 12) > 0.0);
}

TEST_CASE("leaky is NOT causal: a token changes logits before it (the causality test has teeth)") {
  Generator gen(7);
  TransformerLM model(tiny_lm(LMMethod::leaky), gen);
  CHECK(logit_change(model, random_tokens(2, 12, 11, 3), 6, 0, 6) > 1e-6);
}

TEST_CASE("streaming: xl, tensor and leaky carry state into the next segment - base, local, linear do not") {
  Tensor seg1 = random_tokens(2, 6, 11, 1), seg2 = random_tokens(2, 6, 11, 2);
  for (const auto& m : lm_methods()) {
    INFO(to_string(m));
    Generator gen(9);
    TransformerLM model(tiny_lm(m), gen);
    NoGradGuard no_grad;
    BackboneState s1, s2;
    model.forward(seg1, s1);
    model.forward(change_token(seg1, 0, 11), s2);
    const double d = max(abs(model.forward(seg2, s1) - model.forward(seg2, s2))).item();
    const bool carries = m == LMMethod::xl || m == LMMethod::tensor || m == LMMethod::leaky;
    CHECK(s1.empty() == !carries);
    if (carries) CHECK(d > 1e-6);
    else CHECK(d == 0.0);
  }
}

TEST_CASE("xl: two streamed segments equal one causal forward over their concatenation") {
  // The cache holds every earlier token's layer input, so with an empty
  // start the second segment sees exactly what full causal attention over
  // the 2T tokens sees, at the same relative distances.
  BackboneConfig c;
  c.method = BackboneMethod::base;
  c.attention = Attention::xl;
  c.dim = 16;
  c.layers = 2;
  c.heads = 2;
  c.max_len = 10;
  Generator gen(12);
  Backbone model(c, gen);
  for (const auto& blk : model.blocks())  // non-zero relative biases, so distances matter
    copy_data(blk->attn->rel_bias, randn(blk->attn->rel_bias.shape(), 0, 0.5, DType::Float32, gen));
  Tensor x = randn({2, 10, 16}, 0, 1, DType::Float32, gen);
  NoGradGuard no_grad;
  const std::vector<double> whole = model.forward(x).to_vector();
  BackboneState s;
  Tensor y1 = model.forward(slice(x, 1, 0, 5), s);
  REQUIRE(s.cache.size() == 2);
  CHECK(s.cache[0].shape() == Shape{2, 5, 16});
  Tensor y2 = model.forward(slice(x, 1, 5, 10), s);
  check_close(cat({y1, y2}, 1), whole, 1e-5, 1e-4);
}

TEST_CASE("xl: the cache is detached - no gradient reaches the previous segment") {
  BackboneConfig c;
  c.method = BackboneMethod::base;
  c.attention = Attention::xl;
  c.dim = 8;
  c.layers = 2;
  c.heads = 2;
  c.max_len = 4;
  Generator gen(13);
  Backbone model(c, gen);
  Tensor x1 = randn({1, 4, 8}, 0, 1, DType::Float32, gen).requires_grad_();
  Tensor x2 = randn({1, 4, 8}, 0, 1, DType::Float32, gen).requires_grad_();
  BackboneState s;
  model.forward(x1, s);
  for (const Tensor& t : s.cache) CHECK(!t.requires_grad());
  Tensor y2 = model.forward(x2, s);
  sum(y2 * y2).backward();
  CHECK(!x1.grad().defined());  // stop-gradient: segment 1 gets nothing
  REQUIRE(x2.grad().defined());
  CHECK(max(abs(x2.grad())).item() > 0);
  CHECK(model.blocks()[0]->attn->rel_bias.grad().defined());
  NoGradGuard no_grad;  // ... yet segment 2's output depends on segment 1
  CHECK(max(abs(model.forward(x2.detach()) - y2.detach())).item() > 1e-6);
}

TEST_CASE("Tensor Memory: two segments with the carried state equal one pass over the concatenation") {
  // Holds for the memory path by construction (the state after a chunk
  // depends only on the chunks so far) when the first segment is a whole
  // number of chunks. A whole tensor LM does not stream exactly: its
  // attention sees only the current segment.
  nn::TensorMemoryOptions o;
  o.channels = 4;
  o.D = o.H = o.W = 3;
  o.chunk = 2;
  Generator gen(14);
  nn::TensorMemory mem(8, o, gen);
  Tensor x = randn({2, 10, 8}, 0, 1, DType::Float32, gen);
  NoGradGuard no_grad;
  const nn::TensorMemoryOutput whole = mem.forward(x, mem.initial_state(2));
  const nn::TensorMemoryOutput a = mem.forward(slice(x, 1, 0, 4), mem.initial_state(2));
  const nn::TensorMemoryOutput b = mem.forward(slice(x, 1, 4, 10), a.state);
  check_close(cat({a.out, b.out}, 1), whole.out.to_vector(), 1e-6, 1e-5);
  check_close(b.state.h, whole.state.h.to_vector(), 1e-6, 1e-5);
}

TEST_CASE("StreamSegments: every token but the first is a target exactly once, after its predecessor") {
  std::vector<int64_t> stream(23);
  for (int64_t i = 0; i < 23; ++i) stream[i] = i;
  StreamSegments segs(stream, 3, 4);  // rows of L = ceil(22 / 3) = 8 targets: 2 segments
  REQUIRE(segs.count() == 2);
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < segs.count(); ++i) {
    auto [in, tg] = segs.segment(i);
    CHECK(in.shape() == Shape{3, 4});
    auto iv = in.to_int_vector(), tv = tg.to_int_vector();
    for (size_t j = 0; j < tv.size(); ++j)
      if (tv[j] != -100) {
        CHECK(tv[j] == iv[j] + 1);
        targets.push_back(tv[j]);
      }
  }
  std::sort(targets.begin(), targets.end());
  REQUIRE(targets.size() == 22);
  for (int64_t i = 0; i < 22; ++i) CHECK(targets[i] == i + 1);
  auto [in0, tg0] = segs.segment(0);
  CHECK(in0.to_int_vector()[4] == 8);  // row 1 starts at token 8
  CHECK_THROWS_AS(segs.segment(2), IndexError);
  CHECK_THROWS_AS(StreamSegments({5}, 1, 4), ValueError);
}

TEST_CASE("perplexity: uniform logits give exactly V, over every token but the first") {
  for (const auto m : {LMMethod::base, LMMethod::xl, LMMethod::tensor}) {
    INFO(to_string(m));
    Generator gen(15);
    TransformerLM model(tiny_lm(m), gen);
    fill_data(model.tok->weight, 0.0);  // tied: every logit is 0
    std::vector<int64_t> stream(40);
    for (int64_t i = 0; i < 40; ++i) stream[i] = (i * 7) % 11;
    PerplexityResult r = evaluate_perplexity(model, stream, 3);
    CHECK(r.tokens == 39);
    CHECK(r.perplexity() == doctest::Approx(11.0).epsilon(1e-5));
    CHECK(r.nll() == doctest::Approx(std::log(11.0)).epsilon(1e-6));
    CHECK(model.is_training());  // the mode is restored
  }
  CHECK(PerplexityResult{}.perplexity() == 1.0);
}

TEST_CASE("perplexity: the stream evaluation carries the state like a manual segment loop") {
  Generator gen(16);
  TransformerLM model(tiny_lm(LMMethod::tensor), gen);
  std::vector<int64_t> stream(30);
  for (int64_t i = 0; i < 30; ++i) stream[i] = (i * i) % 11;
  PerplexityResult r = evaluate_perplexity(model, stream, 1);
  NoGradGuard no_grad;
  model.eval();
  BackboneState s;
  Tensor a = model.forward(tensor_int(std::vector<int64_t>(stream.begin(), stream.begin() + 12), {1, 12}), s);
  Tensor b = model.forward(tensor_int(std::vector<int64_t>(stream.begin() + 12, stream.begin() + 24), {1, 12}), s);
  Tensor c = model.forward(tensor_int(std::vector<int64_t>(stream.begin() + 24, stream.begin() + 29), {1, 5}), s);
  const double nll = cross_entropy(reshape(cat({a, b, c}, 1), {-1, 11}),
                                  tensor_int(std::vector<int64_t>(stream.begin() + 1, stream.end()), {29}), -100,
                                  0.0, "sum")
                        .item();
  CHECK(r.tokens == 29);
  CHECK(r.nll_sum == doctest::Approx(nll).epsilon(1e-5));
}

TEST_CASE("parameter matching: all six methods within 1% at the default width and depth") {
  LMConfig c;  // d 256, 4 layers, memory C 32 8^3 chunk 16
  c.vocab = 64;  // a small table keeps the test fast and makes the match stricter
  std::vector<int64_t> counts;
  for (const auto& m : lm_methods()) {
    c.method = m;
    Generator gen(0);
    counts.push_back(TransformerLM(c, gen).num_parameters());
  }
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
  CHECK(static_cast<double>(*hi - *lo) / static_cast<double>(*hi) < 0.01);
  c.method = LMMethod::base;
  CHECK(lm_backbone_config(c).mlp_hidden > 4 * c.dim);
  c.method = LMMethod::tensor;
  CHECK(lm_backbone_config(c).mlp_hidden == 0);  // the default ratio 4
  c.method = LMMethod::base;
  c.mlp_hidden = 4 * c.dim;  // the plain transformer of bench_lm
  CHECK(lm_backbone_config(c).mlp_hidden == 4 * c.dim);
  c.mlp_hidden = -1;
  CHECK_THROWS_AS(lm_backbone_config(c), ValueError);
}

TEST_CASE("LM errors name the problem") {
  Generator gen(1);
  CHECK_THROWS_WITH_AS(parse_lm_method("lineer"), doctest::Contains("lineer"), ValueError);
  CHECK_THROWS_WITH_AS(parse_lm_method("lineer"),
                       "unknown LM method \"lineer\" (expected base, local, linear, xl, tensor or leaky)", ValueError);
  CHECK_THROWS_WITH_AS(nlohmann::json("lineer").get<LMMethod>(), doctest::Contains("unknown LM method"), ValueError);
  for (const auto m : lm_methods()) {  // the names of the CLI, JSON configs and checkpoints
    CHECK(parse_lm_method(to_string(m)) == m);
    CHECK(nlohmann::json(m) == to_string(m));
    CHECK(nlohmann::json(to_string(m)).get<LMMethod>() == m);
  }
  CHECK(to_string(LMMethod::leaky) == "leaky");
  LMConfig c = tiny_lm(LMMethod::base);
  c.vocab = 0;
  CHECK_THROWS_AS(TransformerLM(c, gen), ValueError);
  for (const LMMethod m : {LMMethod::tensor, LMMethod::leaky}) {
    LMConfig long_chunk = tiny_lm(m);
    long_chunk.memory.chunk = long_chunk.seq + 1;
    const std::string message = "TransformerLM: expected the memory chunk <= seq (the segment length T), but got chunk " +
                                std::to_string(long_chunk.seq + 1) + " and seq " + std::to_string(long_chunk.seq);
    CHECK_THROWS_WITH_AS(TransformerLM(long_chunk, gen), message.c_str(), ValueError);
  }
  TransformerLM model(tiny_lm(LMMethod::xl), gen);
  CHECK_THROWS_WITH_AS(model.forward(zeros({2, 3})), doctest::Contains("int64"), DtypeError);
  CHECK_THROWS_WITH_AS(model.forward(tensor_int({1, 2, 3}, {3})), doctest::Contains("[3]"), ShapeError);
  CHECK_THROWS_AS(model.forward(tensor_int({1, 2, 11}, {1, 3})), IndexError);
  BackboneState s;
  model.forward(random_tokens(2, 4, 11, 1), s);
  CHECK_THROWS_AS(model.forward(random_tokens(3, 4, 11, 1), s), ShapeError);  // a state for batch 2
  nn::AttentionOptions lin;
  lin.linear = true;
  nn::MultiheadAttention attn(8, 2, 0.0, gen, lin);
  CHECK_THROWS_AS(attn.forward(zeros({1, 3, 8}), true, Tensor(), zeros({1, 2, 8})), ValueError);
  lin.window = 4;
  CHECK_THROWS_AS(nn::MultiheadAttention(8, 2, 0.0, gen, lin), ValueError);
  LMTrainConfig t;
  t.steps = 0;
  t.tokens = 10;
  CHECK_THROWS_AS(lm_train_steps(t), ValueError);  // the budget buys no step
}

TEST_CASE("training smoke test: the loss falls on a tiny periodic stream, for every method") {
  const std::vector<int64_t> stream = test::periodic_stream(600);
  for (const auto& m : lm_methods()) {
    INFO(to_string(m));
    LMTrainConfig c;
    c.model = tiny_lm(m);
    c.model.seq = 8;
    c.batch = 4;
    c.steps = 60;
    c.warmup = 5;
    c.lr = 2e-2;
    c.min_lr = 1e-3;
    c.eval_batch = 2;
    std::vector<int64_t> seen;
    LMTrainResult r = train_lm(c, stream, std::vector<int64_t>(stream.begin(), stream.begin() + 100), {},
                               [&](const LMTrainProgress& p) { if (p.phase == "train") seen.push_back(p.step); });
    REQUIRE(r.losses.size() == 60);
    CHECK(seen.size() == 60);
    const double first = (r.losses[0] + r.losses[1]) / 2, last = (r.losses[58] + r.losses[59]) / 2;
    CHECK(last < 0.4 * first);
    CHECK(r.valid.tokens == 99);
    CHECK(r.valid.perplexity() < 3.0);  // uniform would be 11
    CHECK(r.test.tokens == 0);
    CHECK(r.gates.size() == (m == LMMethod::tensor || m == LMMethod::leaky ? 2u : 0u));
  }
}

TEST_CASE("stream_lm: Tensor Memory's state stays one size over the stream, a KV cache grows by every token") {
  Generator gen(1);
  LMConfig tc = tiny_lm(LMMethod::tensor);
  TransformerLM tensor_lm(tc, gen);
  std::vector<int64_t> state;
  const StreamReport last = stream_lm(tensor_lm, 5 * tc.seq + 3, 7, [&](const StreamReport& r) {
    state.push_back(r.state_bytes);
    return true;
  });
  CHECK(last.tokens == 5 * tc.seq + 3);
  REQUIRE(state.size() == 6);
  const int64_t one_layer = 2 * tc.memory.channels * tc.memory.D * tc.memory.H * tc.memory.W * 4;  // h and c
  for (int64_t b : state) CHECK(b == tc.layers * one_layer);

  LMConfig kc = tiny_lm(LMMethod::xl);
  kc.cache_len = -1;
  TransformerLM kv(kc, gen);
  std::vector<std::pair<int64_t, int64_t>> seen;  // (tokens, state bytes)
  stream_lm(kv, 4 * kc.seq, 7, [&](const StreamReport& r) {
    seen.emplace_back(r.tokens, r.state_bytes);
    return r.tokens < 3 * kc.seq;  // stops after the third segment
  });
  REQUIRE(seen.size() == 3);
  for (auto [tokens, bytes] : seen) CHECK(bytes == kc.layers * tokens * kc.dim * 4);

  kc.cache_len = kc.seq + 2;  // a bounded cache keeps its last cache_len tokens
  TransformerLM bounded(kc, gen);
  const StreamReport b = stream_lm(bounded, 4 * kc.seq, 7);
  CHECK(b.state_bytes == kc.layers * (kc.seq + 2) * kc.dim * 4);
  CHECK_THROWS_AS(stream_lm(bounded, 0, 7), ValueError);
  kc.cache_len = -2;
  CHECK_THROWS_AS(TransformerLM(kc, gen), ValueError);
}

TEST_CASE("xl with a growing cache equals xl with a cache of exactly the tokens streamed so far") {
  // The growing cache concatenates the previous caches: after two segments
  // its logits equal a cache_len = 2 T model's (which keeps the same tokens).
  Generator g1(3), g2(3);
  LMConfig c = tiny_lm(LMMethod::xl);
  c.cache_len = -1;
  TransformerLM grow(c, g1);
  c.cache_len = 2 * c.seq;
  TransformerLM fixed(c, g2);
  grow.eval();
  fixed.eval();
  Generator data(5);
  BackboneState sg, sf;
  for (int i = 0; i < 3; ++i) {
    Tensor ids = randint({2, c.seq}, c.vocab, data);
    test::check_close(grow.forward(ids, sg).to_vector(), fixed.forward(ids, sf).to_vector(), 1e-6, 1e-6);
  }
  CHECK(sg.cache[0].shape()[1] == 3 * c.seq);
  CHECK(sf.cache[0].shape()[1] == 2 * c.seq);
}
