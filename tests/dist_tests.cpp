// Tests of tmem::dist (dist/): collectives, DistributedDataParallel and
// DistributedSampler. CTest runs the collective and DDP cases under
// `mpirun -np 2` (tests/CMakeLists.txt) and the sampler cases as one plain
// process. With `--fail-on-rank R --how throw|kill` the program instead ends
// rank R by an exception or SIGKILL while the others wait in a barrier
// (tests/dist_expect_abort.cmake checks that the job ends, with the message).
// With `--compare-losses A B TOL` it compares two losses.json files of `tmem
// train`: same length, every loss within TOL relative (1e-6 for 1 process
// against 2 ranks, 0 for a resumed run against an uninterrupted one).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <numeric>
#include <string>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tmem/core/device_backend.h"
#include "tmem/dist/ddp.h"
#include "tmem/dist/sampler.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/optim.h"
#include "tmem/ops/ops.h"

using namespace tmem;

namespace {

// x[B, 8] -> tanh(l1) -> l2 -> logits[B, 4]; parameters l1.weight [16,8],
// l1.bias [16], l2.weight [4,16], l2.bias [4] (registration order).
struct Mlp : nn::Module {
  explicit Mlp(uint64_t seed) {
    Generator gen(seed);
    l1 = register_module("l1", std::make_shared<nn::Linear>(8, 16, true, gen));
    l2 = register_module("l2", std::make_shared<nn::Linear>(16, 4, true, gen));
  }
  Tensor forward(const Tensor& x) const { return l2->forward(tanh(l1->forward(x))); }
  std::shared_ptr<nn::Linear> l1, l2;
};

// A data set of 32 examples: x[32, 8] ~ N(0, 1), y[32] in [0, 4), seeded.
struct Data {
  Tensor x, y;
  Data() {
    Generator gen(7);
    x = randn({32, 8}, 0, 1, DType::Float32, gen);
    y = randint({32}, 4, gen);
  }
  Tensor loss(const Mlp& m, const std::vector<int64_t>& rows) const {
    Tensor idx = tensor_int(rows, {static_cast<int64_t>(rows.size())}).to(x.device());
    return cross_entropy(m.forward(index_select(x, 0, idx)), index_select(y, 0, idx));
  }
};

// Whether every rank holds the same bits in t.
bool same_on_every_rank(const Tensor& t) {
  Tensor all = dist::all_gather(t);
  const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(float);
  for (int r = 1; r < dist::world_size(); ++r)
    if (std::memcmp(all.data<float>(), all.data<float>() + r * t.numel(), bytes) != 0) return false;
  return true;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-30));
  return m;
}

// --fail-on-rank R --how throw|uncaught|kill: rank R fails after 0.2 s
// (an exception inside dist::run, one that escapes main, or SIGKILL) while
// the others wait in a barrier.
int fail_on_rank(int failing, const std::string& how) {
  dist::init();
  auto fail = [failing, &how] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (how == "kill") std::raise(SIGKILL);
    throw ValueError("deliberate failure on rank " + std::to_string(failing) + " (abort test)");
  };
  if (how == "uncaught" && dist::rank() == failing) fail();  // the terminate handler ends the job
  return dist::run([&] {
    if (dist::rank() == failing) fail();
    dist::barrier();
    return 0;
  });
}

// --compare-losses A B TOL: 0 when the two loss lists agree to TOL relative.
int compare_losses(const char* a, const char* b, double tol) {
  auto read = [](const char* path) {
    std::ifstream in(path);
    return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {})).get<std::vector<double>>();
  };
  const std::vector<double> la = read(a), lb = read(b);
  if (la.size() != lb.size() || la.empty()) {
    fmt::print("{} losses in {}, {} in {}\n", la.size(), a, lb.size(), b);
    return 1;
  }
  const double d = max_rel_diff(la, lb);
  fmt::print("{} steps: max relative loss difference {}{}\n", la.size(), d, d == 0 ? " (exact)" : "");
  return d <= tol ? 0 : 1;
}

}  // namespace

TEST_CASE("dist collectives give exact values on 2 ranks") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  CHECK(dist::local_rank() == r);  // one machine: local rank == rank

  Tensor b = full({3}, r + 1.0);
  dist::broadcast(b, 1);
  CHECK(b.to_vector() == std::vector<double>{2, 2, 2});
  Tensor bi = tensor_int({10 * r, 10 * r + 1}, {2});
  dist::broadcast(bi, 0);
  CHECK(bi.to_int_vector() == std::vector<int64_t>{0, 1});
  // A transposed (non-contiguous) tensor is broadcast element by element.
  Tensor base = tensor({1.0 + r, 2, 3, 4, 5, 6}, {2, 3});
  Tensor bt = transpose(base, 0, 1);
  dist::broadcast(bt, 1);
  CHECK(base.to_vector() == std::vector<double>{2, 2, 3, 4, 5, 6});

  Tensor s = tensor({r + 1.0, 10.0 * (r + 1), 0.5}, {3});
  dist::all_reduce(s);
  CHECK(s.to_vector() == std::vector<double>{3, 30, 1});
  Tensor m = tensor({r + 1.0, 10.0 * (r + 1), 0.5}, {3}, DType::Float64);
  dist::all_reduce(m, dist::ReduceOp::Mean);
  CHECK(m.to_vector() == std::vector<double>{1.5, 15, 0.5});
  Tensor si = tensor_int({r, 100}, {2});
  dist::all_reduce(si);
  CHECK(si.to_int_vector() == std::vector<int64_t>{1, 200});
  CHECK_THROWS_AS(dist::all_reduce(si, dist::ReduceOp::Mean), DtypeError);

  Tensor g = dist::all_gather(tensor({1.0 * r, r + 0.25}, {2}));
  CHECK(g.shape() == Shape{2, 2});
  CHECK(g.to_vector() == std::vector<double>{0, 0.25, 1, 1.25});

  Tensor a = tensor({r + 1.0, 3.0 * r}, {2});
  dist::Work w = dist::all_reduce_async(a, dist::ReduceOp::Mean);
  CHECK(w.pending());
  w.wait();
  CHECK_FALSE(w.pending());
  CHECK(a.to_vector() == std::vector<double>{1.5, 1.5});

  // Ranks that pass different counts get a ValueError each, not a hang.
  Tensor odd = zeros({3 + r});
  CHECK_THROWS_WITH_AS(dist::all_reduce(odd), doctest::Contains("element counts from 3 to 4"), ValueError);
  CHECK_THROWS_WITH_AS(dist::broadcast(b, 2), doctest::Contains("root 2 is not a rank"), ValueError);
  CHECK_THROWS_WITH_AS(dist::broadcast(b, r), doctest::Contains("different roots, from 0 to 1"), ValueError);
  dist::barrier();
}

TEST_CASE("dist collectives: BatchShard takes rows r, r + R, ... and gathers them back") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  const dist::BatchShard shard(6, "test: batch");
  CHECK(shard.sharded());
  CHECK(shard.rows() == 3);
  Tensor batch = reshape(arange(12), {6, 2});  // row k: [2k, 2k + 1]
  Tensor mine = shard.take(batch);
  CHECK(mine.shape() == Shape{3, 2});
  const std::vector<double> want = r == 0 ? std::vector<double>{0, 1, 4, 5, 8, 9}
                                          : std::vector<double>{2, 3, 6, 7, 10, 11};
  CHECK(mine.to_vector() == want);
  CHECK(shard.gather(mine).to_vector() == batch.to_vector());
  CHECK_THROWS_WITH_AS(dist::BatchShard(5, "test: --batch"),
                       doctest::Contains("test: --batch: the batch of 5 does not split evenly over 2 ranks"), ValueError);
  CHECK_THROWS_WITH_AS(shard.take(zeros({4, 2})), doctest::Contains("test: batch: expected a batch [6, ...]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(shard.gather(zeros({4})), doctest::Contains("expected this rank's rows [3, ...]"), ShapeError);
}

TEST_CASE("dist collectives: RankStream gives each rank its own draws and keeps the generators equal") {
  REQUIRE(dist::world_size() == 2);
  Generator gen(5), shared(5);
  auto draws = [&gen](int64_t step) {
    const dist::RankStream own(gen, step);
    std::vector<int64_t> d;
    for (int k = 0; k < 4; ++k) d.push_back(gen.randint(1000000));
    return dist::all_gather(tensor_int(d, {4})).to_int_vector();
  };
  const std::vector<int64_t> step0 = draws(0), step1 = draws(1), again = draws(0);
  // Rank 0's draws differ from rank 1's, and from the next step's.
  CHECK(std::vector<int64_t>(step0.begin(), step0.begin() + 4) != std::vector<int64_t>(step0.begin() + 4, step0.end()));
  CHECK(step0 != step1);
  CHECK(step0 == again);  // the same state and step: the same draws
  CHECK(gen.state() == shared.state());  // the generator is back where it was
}

TEST_CASE("DistributedDataParallel keeps every rank's parameters bit-identical") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  Mlp model(100 + r);  // different on each rank until DDP broadcasts rank 0's
  Mlp rank0(100);
  Data data;
  dist::DistributedDataParallel ddp(model);
  CHECK(ddp.buckets().size() == 1);  // 212 floats, one 25 MB bucket
  const auto p = model.parameters();
  const auto p0 = rank0.parameters();
  for (size_t i = 0; i < p.size(); ++i) CHECK(p[i].to_vector() == p0[i].to_vector());

  nn::AdamW opt(model.parameters(), 1e-2);
  Mlp local(0);  // the same step without DDP, for the expected mean gradient
  for (int step = 0; step < 5; ++step) {
    local.load_state_dict(model.state_dict());
    local.zero_grad();
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < 4; ++k) rows.push_back((8 * step + 4 * r + k) % 32);  // each rank its own rows
    data.loss(model, rows).backward();
    ddp.synchronize();
    data.loss(local, rows).backward();
    const auto lp = local.parameters();
    for (size_t i = 0; i < p.size(); ++i) {
      Tensor expected = lp[i].grad();
      dist::all_reduce(expected, dist::ReduceOp::Mean);
      CHECK(p[i].grad().to_vector() == expected.to_vector());
    }
    nn::clip_grad_norm_(p, 0.5);
    opt.step();
    opt.zero_grad();
    for (const Tensor& t : p) CHECK(same_on_every_rank(t));
  }
  // The model moved: its parameters are no longer rank 0's initial ones.
  CHECK(p[0].to_vector() != p0[0].to_vector());
  dist::check_replicas_match(model, "test");
  // One bit of one rank's parameter differs: named, on every rank.
  if (r == 1) model.l2->bias.data<float>()[3] = std::nextafter(model.l2->bias.data<float>()[3], 1e9f);
  CHECK_THROWS_WITH_AS(dist::check_replicas_match(model, "test"),
                       doctest::Contains("test: the ranks' models have diverged: parameter \"l2.bias\" differs "
                                         "between rank 0 and rank 1"),
                       ValueError);
}

TEST_CASE("DistributedDataParallel reduces a bucket while backward goes on") {
  REQUIRE(dist::world_size() == 2);
  Mlp model(3);
  Data data;
  // 50 floats per bucket: l2 (4 + 64) fills the first, l1 (16 + 128) the second.
  dist::DistributedDataParallel ddp(model, 50 * 4 / (1024.0 * 1024.0));
  CHECK(ddp.buckets() == std::vector<std::vector<size_t>>{{3, 2}, {1, 0}});
  Mlp local(0);
  local.load_state_dict(model.state_dict());
  const std::vector<int64_t> rows{4 * dist::rank(), 4 * dist::rank() + 1};
  data.loss(model, rows).backward();
  // Reduced by the hooks: l2's bucket started before l1's gradients existed.
  CHECK(ddp.buckets_started_during_backward() == 1);
  data.loss(local, rows).backward();
  const auto p = model.parameters(), lp = local.parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    Tensor expected = lp[i].grad();
    dist::all_reduce(expected, dist::ReduceOp::Mean);
    CHECK(p[i].grad().to_vector() == expected.to_vector());
  }
  const std::vector<double> reduced = p[0].grad().to_vector();
  ddp.synchronize();  // nothing left to do: the gradients stay as they are
  CHECK(p[0].grad().to_vector() == reduced);
}

TEST_CASE("DistributedDataParallel no_sync accumulates locally, and the next backward reduces the sum") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  Data data;
  Mlp model(13);
  // l2 fills the first bucket, l1 the second: the hooks' path with two buckets.
  dist::DistributedDataParallel ddp(model, 50 * 4 / (1024.0 * 1024.0));
  Mlp local(0), big(0);
  local.load_state_dict(model.state_dict());
  big.load_state_dict(model.state_dict());
  // 3 micro-batches of 4 rows per rank (rows 12 r ... 12 r + 11), each loss
  // scaled by 1/3 so that their sum is the mean over the rank's 12 rows.
  auto rows = [r](int k) {
    std::vector<int64_t> v;
    for (int64_t j = 0; j < 4; ++j) v.push_back(12 * r + 4 * k + j);
    return v;
  };
  const auto p = model.parameters(), lp = local.parameters(), bp = big.parameters();
  {
    const auto guard = ddp.no_sync();
    for (int k = 0; k < 2; ++k) {
      (data.loss(model, rows(k)) / 3.0).backward();
      ddp.synchronize();  // a no-op under no_sync
      CHECK(ddp.buckets_started_during_backward() == 0);
    }
    // Still this rank's own sum: nothing was reduced.
    for (int k = 0; k < 2; ++k) (data.loss(local, rows(k)) / 3.0).backward();
    for (size_t i = 0; i < p.size(); ++i) CHECK(p[i].grad().to_vector() == lp[i].grad().to_vector());
  }
  (data.loss(model, rows(2)) / 3.0).backward();
  ddp.synchronize();
  CHECK(ddp.buckets_started_during_backward() == 1);
  (data.loss(local, rows(2)) / 3.0).backward();
  std::vector<int64_t> all12;
  for (int k = 0; k < 3; ++k)
    for (int64_t row : rows(k)) all12.push_back(row);
  data.loss(big, all12).backward();
  for (size_t i = 0; i < p.size(); ++i) {
    // Bit-exact: the mean over the ranks of the same local sums.
    Tensor expected = lp[i].grad();
    dist::all_reduce(expected, dist::ReduceOp::Mean);
    CHECK(p[i].grad().to_vector() == expected.to_vector());
    // The one big batch of 12 rows per rank: equal to rounding (the micro-batch
    // sums add in another order), 1e-6 relative to the gradient's largest entry.
    Tensor whole = bp[i].grad();
    dist::all_reduce(whole, dist::ReduceOp::Mean);
    const std::vector<double> a = p[i].grad().to_vector(), b = whole.to_vector();
    double scale = 0, diff = 0;
    for (size_t j = 0; j < a.size(); ++j) scale = std::max(scale, std::abs(b[j])), diff = std::max(diff, std::abs(a[j] - b[j]));
    CHECK(diff <= 1e-6 * scale);
  }
  // The next step reduces again, and no_sync restored the synchronization.
  model.zero_grad();
  data.loss(model, rows(0)).backward();
  CHECK(ddp.buckets_started_during_backward() == 1);
  CHECK(same_on_every_rank(p[0].grad()));
}

TEST_CASE("DistributedDataParallel synchronize covers parameters a backward did not reach") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  Mlp model(5);
  Data data;
  dist::DistributedDataParallel ddp(model, 50 * 4 / (1024.0 * 1024.0));
  // Rank 0 backpropagates through l1 only, rank 1 through the whole model:
  // rank 0 counts with a zero gradient for l2, so l2's mean gradient is rank
  // 1's own / 2, on both ranks.
  Mlp local(0);
  local.load_state_dict(model.state_dict());
  Tensor x = slice(data.x, 0, 0, 2);
  auto loss_of = [r, &x](const Mlp& m) {
    Tensor h = tanh(m.l1->forward(x));
    return r == 0 ? sum(h) : sum(m.l2->forward(h));
  };
  loss_of(model).backward();
  CHECK(ddp.buckets_started_during_backward() == r);  // rank 1: l2's bucket; rank 0: none
  ddp.synchronize();
  loss_of(local).backward();
  const auto p = model.parameters(), lp = local.parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    Tensor expected = lp[i].grad().defined() ? lp[i].grad() : zeros_like(lp[i]);
    dist::all_reduce(expected, dist::ReduceOp::Mean);
    REQUIRE(p[i].grad().defined());
    CHECK(p[i].grad().to_vector() == expected.to_vector());
  }
  const double norm = sum(model.l2->weight.grad() * model.l2->weight.grad()).item();
  CHECK(norm > 0);
}

TEST_CASE("2 ranks x batch 4 equal 1 process x batch 8") {
  REQUIRE(dist::world_size() == 2);
  const int r = dist::rank();
  Data data;
  Mlp model(11), single(11);
  dist::DistributedDataParallel ddp(model);
  nn::AdamW opt(model.parameters(), 1e-2), opt1(single.parameters(), 1e-2);
  dist::DistributedSampler sampler(32, 2, r, true, 42), sampler1(32, 1, 0, true, 42);
  std::vector<double> losses, losses1;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    sampler.set_epoch(epoch);
    sampler1.set_epoch(epoch);
    const auto mine = sampler.indices(), all = sampler1.indices();
    for (int64_t k = 0; k < 4; ++k) {
      Tensor loss = data.loss(model, {mine.begin() + 4 * k, mine.begin() + 4 * k + 4});
      loss.backward();
      ddp.synchronize();
      nn::clip_grad_norm_(model.parameters(), 1.0);
      opt.step();
      opt.zero_grad();
      Tensor mean_loss = loss.detach();
      dist::all_reduce(mean_loss, dist::ReduceOp::Mean);
      losses.push_back(mean_loss.item());

      Tensor loss1 = data.loss(single, {all.begin() + 8 * k, all.begin() + 8 * k + 8});
      loss1.backward();
      nn::clip_grad_norm_(single.parameters(), 1.0);
      opt1.step();
      opt1.zero_grad();
      losses1.push_back(loss1.item());
    }
  }
  const double loss_diff = max_rel_diff(losses, losses1);
  double param_diff = 0;
  const auto p = model.parameters(), p1 = single.parameters();
  for (size_t i = 0; i < p.size(); ++i) param_diff = std::max(param_diff, max_rel_diff(p[i].to_vector(), p1[i].to_vector()));
  const std::string exact = loss_diff == 0 ? "exact" : "not bit-exact";
  MESSAGE("12 steps: max relative loss difference " << loss_diff << " (" << exact << "), parameters "
          << param_diff);
  CHECK(loss_diff <= 1e-6);
  // It trains: the loss over all 32 examples went down.
  std::vector<int64_t> every(32);
  std::iota(every.begin(), every.end(), int64_t{0});
  CHECK(data.loss(model, every).item() < 0.9 * data.loss(Mlp(11), every).item());
}

TEST_CASE("DistributedSampler shards one seeded order") {
  dist::DistributedSampler one(10, 1, 0, true, 3);
  const std::vector<int64_t> order = one.indices();
  CHECK(order == one.order());
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(order != sorted);  // shuffled
  // 3 ranks x batch 2: batch k of the ranks together is batch k of 6 of the
  // one-process order, padded with its head to 12 = 3 x 4.
  for (int rk = 0; rk < 3; ++rk) {
    dist::DistributedSampler s(10, 3, rk, true, 3);
    CHECK(s.num_samples() == 4);
    CHECK(s.total_size() == 12);
    const auto mine = s.indices();
    for (size_t j = 0; j < mine.size(); ++j) {
      const size_t pos = 3 * j + static_cast<size_t>(rk);
      CHECK(mine[j] == order[pos % 10]);
    }
  }
  dist::DistributedSampler dropped(10, 3, 2, false, 0, true);
  CHECK(dropped.indices() == std::vector<int64_t>{2, 5, 8});
  dist::DistributedSampler e0(10, 1, 0, true, 3), e1(10, 1, 0, true, 3);
  e1.set_epoch(1);
  CHECK(e0.indices() != e1.indices());
  e1.set_epoch(0);
  CHECK(e0.indices() == e1.indices());
  CHECK_THROWS_AS(dist::DistributedSampler(10, 2, 2), ValueError);
  CHECK_THROWS_AS(dist::DistributedSampler(1, 2, 0, true, 0, true), ValueError);
  CHECK_THROWS_AS(e1.set_epoch(-1), ValueError);
}

TEST_CASE("NCCL: collectives and DistributedDataParallel on CUDA tensors, one GPU per rank") {
#ifndef TMEM_WITH_NCCL
  MESSAGE("skipped: this build has no NCCL transport");
#else
  if (device_count(Device::Kind::CUDA) == 0) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  dist::init();
  const int r = dist::rank(), n = dist::world_size();
  const Device gpu = parse_device("cuda:" + std::to_string(dist::local_rank()));
  auto on_gpu = [&](std::vector<double> v) { return tensor(v, {static_cast<int64_t>(v.size())}).to(gpu); };
  const double sum_r = n * (n - 1) / 2.0;  // 0 + 1 + ... + (n - 1)

  Tensor t = on_gpu({1.0 + r, -2.0 * r, 0.5});
  dist::all_reduce(t);
  CHECK(t.to_vector() == std::vector<double>{n + sum_r, -2.0 * sum_r, 0.5 * n});
  t = on_gpu({4.0 * r, 8.0});
  dist::all_reduce(t, dist::ReduceOp::Mean);
  CHECK(t.to_vector() == std::vector<double>{4.0 * sum_r / n, 8.0});
  t = on_gpu({static_cast<double>(r), 7.0});
  dist::Work w = dist::all_reduce_async(t, dist::ReduceOp::Mean);
  w.wait();
  CHECK(t.to_vector() == std::vector<double>{sum_r / n, 7.0});
  t = on_gpu({10.0 + r, 20.0 + r});
  dist::broadcast(t, 0);
  CHECK(t.to_vector() == std::vector<double>{10.0, 20.0});
  Tensor all = dist::all_gather(on_gpu({static_cast<double>(r), 1.0}));
  CHECK(all.shape() == Shape{n, 2});
  CHECK(all.device() == gpu);
  std::vector<double> expected;
  for (int k = 0; k < n; ++k) expected.insert(expected.end(), {static_cast<double>(k), 1.0});
  CHECK(all.to_vector() == expected);

  // DDP on the GPU: every rank computes the same batch, so the mean gradient
  // is the gradient of one model without DDP on the same batch.
  Mlp model(100 + r), local(0);
  model.to(gpu);
  local.to(gpu);
  Data data;
  data.x = data.x.to(gpu);
  data.y = data.y.to(gpu);
  dist::DistributedDataParallel ddp(model);
  local.load_state_dict(model.state_dict());
  const std::vector<int64_t> rows{0, 5, 9, 30};
  data.loss(model, rows).backward();
  ddp.synchronize();
  data.loss(local, rows).backward();
  const auto p = model.parameters(), lp = local.parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK(p[i].grad().device() == gpu);
    const std::vector<double> g = p[i].grad().to_vector(), gl = lp[i].grad().to_vector();
    for (size_t k = 0; k < g.size(); ++k) CHECK(g[k] == doctest::Approx(gl[k]).epsilon(1e-6));
  }
#endif
}

TEST_CASE("dist without a launcher: BatchShard is the whole batch") {
  if (dist::launched_distributed()) return;  // the mpirun cases cover that
  const dist::BatchShard shard(5, "test: batch");
  CHECK_FALSE(shard.sharded());
  CHECK(shard.rows() == 5);
  Tensor batch = arange(5);
  CHECK(shard.take(batch).impl_ptr() == batch.impl_ptr());
  CHECK(shard.gather(batch).impl_ptr() == batch.impl_ptr());
  CHECK_THROWS_WITH_AS(dist::BatchShard(0, "test: batch"), doctest::Contains("the batch of 0"), ValueError);
}

TEST_CASE("dist without a launcher: RankStream leaves the generator alone") {
  if (dist::launched_distributed()) return;
  Generator gen(5), same(5);
  {
    const dist::RankStream own(gen, 3);
    CHECK(gen.next_u64() == same.next_u64());
  }
  CHECK(gen.state() == same.state());
}

TEST_CASE("dist without a launcher: one rank, or a clear reason") {
  if (dist::launched_distributed()) return;  // the mpirun cases cover that
  CHECK(dist::rank() == 0);
  CHECK(dist::world_size() == 1);
  CHECK_FALSE(dist::is_initialized());
  CHECK_THROWS_WITH_AS(dist::barrier(), doctest::Contains("call tmem::dist::init() first"), ValueError);
  const std::string reason = dist::unavailable_reason();
  if (!reason.empty()) CHECK_THROWS_WITH_AS(dist::init(), doctest::Contains(reason.c_str()), ValueError);
}

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--compare-losses") == 0)
    return compare_losses(argv[2], argv[3], std::atof(argv[4]));
  if (argc == 5 && std::strcmp(argv[1], "--fail-on-rank") == 0 && std::strcmp(argv[3], "--how") == 0)
    return fail_on_rank(std::atoi(argv[2]), argv[4]);
  if (dist::launched_distributed()) dist::init();
  doctest::Context ctx(argc, argv);
  int failed = ctx.run();
  if (dist::is_initialized()) {
    // The job fails when any rank failed.
    Tensor f = tensor_int({failed != 0}, {1});
    dist::all_reduce(f);
    failed = f.to_int_vector()[0] != 0;
    dist::finalize();
  }
  return failed;
}
