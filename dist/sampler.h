// DistributedSampler (PyTorch torch.utils.data.distributed.DistributedSampler):
// one seeded order of a data set's indices, shared by every rank, and the
// rank's share of it. Rank r takes the order's positions r, r + R, r + 2R,
// ... (R = num_replicas), so the k-th batch of b examples of every rank
// together is exactly the k-th batch of R*b examples one process would take
// from the same order: 2 ranks x batch B/2 see the batch 1 process sees with B.
// Needs no MPI (rank and num_replicas are given).
//
// BatchShard is the same share for trainers that draw each batch whole (from
// a seeded generator or a DataLoader, identically on every rank): rank r
// trains on the batch's rows r, r + R, ..., so the data order, the
// generators and the checkpoints stay those of one process. RankStream gives
// each rank draws of its own (dropout masks for its rows) without letting the
// ranks' generators drift apart.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/core/tensor.h"

namespace tmem::dist {

class DistributedSampler {
 public:
  /// A sampler over indices [0, size). shuffle: the order is a permutation
  /// drawn from Generator(seed + epoch) (Fisher-Yates), the same on every
  /// rank; otherwise 0, 1, ..., size-1. The order is cut to a multiple of
  /// num_replicas: drop_last drops its tail, otherwise its head is repeated
  /// to fill it (PyTorch's padding). Throws ValueError for size < 0,
  /// num_replicas < 1, rank outside [0, num_replicas), or drop_last with
  /// size < num_replicas.
  DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  /// Selects the epoch's order (PyTorch set_epoch): call it before each epoch
  /// for a new shuffle. Throws ValueError for epoch < 0.
  void set_epoch(int64_t epoch);
  /// This rank's indices for the current epoch, num_samples() of them.
  std::vector<int64_t> indices() const;
  /// The whole order (every rank's indices interleaved), total_size() long.
  std::vector<int64_t> order() const;
  /// Indices per rank: ceil(size / R), or floor(size / R) with drop_last.
  int64_t num_samples() const { return num_samples_; }
  /// num_samples() * R.
  int64_t total_size() const { return num_samples_ * replicas_; }

 private:
  int64_t size_, num_samples_, epoch_ = 0;
  int replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
};

/// This rank's rows of every batch of `batch` examples in a job of R =
/// world_size() ranks: r, r + R, r + 2R, ... (DistributedSampler's share of
/// the order 0 ... batch-1). With one rank (no job, or a job of one) the
/// whole batch: take() and gather() return their argument.
class BatchShard {
 public:
  /// Throws ValueError naming `what` (the option, e.g. "train brown:
  /// --batch") when batch < 1 or batch % R != 0: every rank must train as
  /// many rows, so that the mean of the ranks' mean gradients is the batch's.
  BatchShard(int64_t batch, const std::string& what);
  /// Whether the batch is split over several ranks.
  bool sharded() const { return ranks_ > 1; }
  /// The rows per rank: batch / R.
  int64_t rows() const { return batch_ / ranks_; }
  /// This rank's rows of t [batch, ...]: [batch / R, ...] (a copy). Throws
  /// ShapeError naming `what` when t's first axis is not batch.
  Tensor take(const Tensor& t) const;
  /// The inverse of take, collective (every rank calls it with its part):
  /// the ranks' parts [batch / R, ...] interleaved back into the batch
  /// [batch, ...] on every rank. Throws ShapeError naming `what` when
  /// part's first axis is not batch / R, and what all_gather throws.
  Tensor gather(const Tensor& part) const;

 private:
  int64_t batch_;
  int ranks_;
  std::string what_;
  Tensor index_;  // int64 [batch / R]: this rank's rows
};

/// For its lifetime, `gen` draws from a stream of this rank's own, seeded
/// from gen's state, `step` and the rank, so that the ranks' dropout masks
/// for their rows differ (and differ from step to step); the destructor puts
/// `gen` back in the state it had, so the ranks' generators stay equal (rank
/// 0's checkpoint resumes them all) and a step without draws changes
/// nothing. Does nothing outside a job of several ranks (one process draws
/// as ever).
class RankStream {
 public:
  RankStream(Generator& gen, int64_t step);
  ~RankStream();
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;

 private:
  Generator* gen_ = nullptr;  // null: no job of several ranks
  std::string shared_;        // the state to return to
};

}  // namespace tmem::dist
