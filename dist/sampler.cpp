#include "tmem/dist/sampler.h"

#include <numeric>
#include <utility>

#include "tmem/core/rng.h"
#include "tmem/dist/dist.h"
#include "tmem/ops/shape.h"

namespace tmem::dist {

DistributedSampler::DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : size_(size), num_samples_(0), replicas_(num_replicas), rank_(rank), shuffle_(shuffle),
      drop_last_(drop_last), seed_(seed) {
  check<ValueError>(size >= 0, "DistributedSampler: expected size >= 0, but got ", size);
  check<ValueError>(num_replicas >= 1 && rank >= 0 && rank < num_replicas,
                    "DistributedSampler: expected num_replicas >= 1 and rank in [0, num_replicas), but got "
                    "num_replicas ", num_replicas, " and rank ", rank);
  check<ValueError>(!drop_last || size >= num_replicas, "DistributedSampler: drop_last with ", size,
                    " examples over ", num_replicas, " ranks leaves no example per rank");
  num_samples_ = drop_last ? size / num_replicas : (size + num_replicas - 1) / num_replicas;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  check<ValueError>(epoch >= 0, "DistributedSampler::set_epoch: expected epoch >= 0, but got ", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::order() const {
  std::vector<int64_t> idx(static_cast<size_t>(size_));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  if (shuffle_) {
    Generator gen(seed_ + static_cast<uint64_t>(epoch_));
    for (int64_t i = size_ - 1; i > 0; --i) std::swap(idx[i], idx[gen.randint(i + 1)]);
  }
  const auto total = static_cast<size_t>(total_size());
  if (drop_last_) {
    idx.resize(total);
  } else {
    for (size_t i = 0; idx.size() < total; ++i) idx.push_back(idx[i]);
  }
  return idx;
}

std::vector<int64_t> DistributedSampler::indices() const {
  const std::vector<int64_t> all = order();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(rank_); i < all.size(); i += static_cast<size_t>(replicas_))
    mine.push_back(all[i]);
  return mine;
}

BatchShard::BatchShard(int64_t batch, const std::string& what)
    : batch_(batch), ranks_(world_size()), what_(what) {
  check<ValueError>(batch >= 1 && batch % ranks_ == 0, what, ": the batch of ", batch,
                    " does not split evenly over ", ranks_, " ranks; choose a multiple of ", ranks_);
  if (sharded())
    index_ = tensor_int(DistributedSampler(batch, ranks_, rank(), false).indices(), {rows()});
}

Tensor BatchShard::take(const Tensor& t) const {
  check<ShapeError>(t.dim() >= 1 && t.shape()[0] == batch_, what_, ": expected a batch [", batch_,
                    ", ...] to split over the ranks, but got ", shape_str(t.shape()));
  return sharded() ? index_select(t, 0, index_.to(t.device())) : t;
}

Tensor BatchShard::gather(const Tensor& part) const {
  check<ShapeError>(part.dim() >= 1 && part.shape()[0] == rows(), what_, ": expected this rank's rows [", rows(),
                    ", ...] to gather, but got ", shape_str(part.shape()));
  if (!sharded()) return part;
  // [R, b, ...] -> [b, R, ...] -> [b R, ...]: row k R + r is rank r's row k.
  Shape whole = part.shape();
  whole[0] = batch_;
  return reshape(transpose(all_gather(part), 0, 1), whole);
}

RankStream::RankStream(Generator& gen, int64_t step) {
  if (world_size() < 2) return;
  shared_ = gen.state();
  uint64_t h = 14695981039346656037ull;  // FNV-1a of the state, then the step and the rank
  for (unsigned char c : shared_) h = (h ^ c) * 1099511628211ull;
  for (uint64_t v : {static_cast<uint64_t>(step), static_cast<uint64_t>(rank())})
    for (int b = 0; b < 8; ++b) h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
  gen.manual_seed(h);
  gen_ = &gen;
}

RankStream::~RankStream() {
  if (gen_) gen_->set_state(shared_);
}

}  // namespace tmem::dist
