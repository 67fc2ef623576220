// A small transformer language model's training step (models/lm.h, method
// base: full causal attention, tied embeddings, MLP hidden 4d, dropout 0): forward, mean
// cross-entropy of the next token, backward, clip_grad_norm_(1.0), AdamW
// (lr 3e-4, betas 0.9 / 0.95, weight decay 0.1 on every parameter). Shapes
// of the performance issue: d = 256, 4 layers, 4 heads, batch B = 16,
// vocabulary V = 16384, sequence T in {128, 256, 512} (T = 256 is the
// comparison with bench/peer/lm_peer.py; the others show the scaling).
//
// Counters: tokens/s (B T per step) and params (equal to the peer's).
//
//   OMP_NUM_THREADS=2 build/bench/bench_lm
#include <benchmark/benchmark.h>

#include <chrono>

#include "tmem/models/lm.h"
#include "tmem/nn/optim.h"
#include "tmem/ops/ops.h"

namespace {

using namespace tmem;

// Arg: T.
void BM_lm_step(benchmark::State& st) {
  const int64_t B = 16, T = st.range(0), V = 16384;
  models::LMConfig cfg;
  cfg.method = models::LMMethod::base;
  cfg.vocab = V;
  cfg.dim = 256;
  cfg.layers = 4;
  cfg.heads = 4;
  cfg.seq = T;
  cfg.dropout = 0.0;
  cfg.mlp_hidden = 4 * cfg.dim;
  Generator gen(5);
  models::TransformerLM model(cfg, gen);
  const Tensor tokens = randint({B, T + 1}, V, gen);
  const Tensor in = contiguous(slice(tokens, 1, 0, T)), target = contiguous(slice(tokens, 1, 1, T + 1));
  std::vector<Tensor> params = model.parameters();
  nn::AdamW opt(params, 3e-4, 0.9, 0.95, 1e-8, 0.1);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    Tensor logits = model.forward(in);
    Tensor loss = cross_entropy(reshape(logits, {B * T, V}), reshape(target, {B * T}));
    loss.backward();
    nn::clip_grad_norm_(params, 1.0);
    opt.step();
    opt.zero_grad();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.counters["tokens/s"] = static_cast<double>(B * T * st.iterations()) / seconds;
  st.counters["params"] = static_cast<double>(model.num_parameters());
}

}  // namespace

BENCHMARK(BM_lm_step)->Arg(128)->Arg(256)->Arg(512)->ArgName("seq")->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
