// Mini-batches of an in-memory dataset (PyTorch torch.utils.data.DataLoader
// over a TensorDataset): tensors that share dim 0, the N examples (e.g.
// images [N, H, W] and labels [N]).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/core/tensor.h"

namespace tmem::nn {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// A fresh order at the start of every epoch: a Fisher-Yates shuffle of
  /// 0..N-1 drawn from the generator (for k = N-1 down to 1, swap entries k
  /// and gen.randint(k + 1)); false: the examples in order.
  bool shuffle = false;
  /// Drop the last batch of an epoch when it has fewer than batch_size
  /// examples (with N < batch_size an epoch then has no batch at all).
  bool drop_last = false;
};

/// Batches over `tensors` (any devices; a batch's tensors are on their
/// dataset tensor's device): batch i of an epoch holds examples
/// order[i * batch_size, (i + 1) * batch_size) of every tensor, gathered with
/// index_select along dim 0. Iterate one epoch with range-for, or take
/// batches across epochs with next():
///
///   Generator gen(42);
///   DataLoader loader({images, labels}, {64, true, true}, gen);
///   for (const std::vector<Tensor>& b : loader) train_step(b[0], b[1]);
///
/// The generator is drawn from only when an epoch starts (so sharing it with
/// other users, as the ViT trainer does, keeps a fixed order of draws) and
/// must outlive the loader. Throws ShapeError for no tensors, a 0-d tensor or
/// tensors with different dim 0; ValueError for batch_size < 1.
class DataLoader {
 public:
  DataLoader(std::vector<Tensor> tensors, const DataLoaderOptions& options, Generator& gen = default_generator());

  /// Batches per epoch: N / batch_size with drop_last, else rounded up.
  int64_t size() const;
  int64_t dataset_size() const { return n_; }
  /// The next batch, one tensor per dataset tensor; after the last batch of
  /// an epoch, the first of a new one (reshuffled). Throws ValueError when an
  /// epoch has no batch.
  std::vector<Tensor> next();

  /// Iterates the batches of one epoch; begin() starts a new epoch (as
  /// iter(loader) in PyTorch), dropping what was left of the current one.
  class Iterator {
   public:
    std::vector<Tensor> operator*() const { return batch_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return left_ == o.left_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, int64_t left);
    DataLoader* loader_;
    int64_t left_;  // batches not yet visited, this one included
    std::vector<Tensor> batch_;
  };
  Iterator begin();
  Iterator end() { return Iterator(this, 0); }

  /// The position in the current epoch, for checkpoints: "order" [N] (the
  /// epoch's order, int64) and "next_batch" [1].
  std::map<std::string, Tensor> state_dict() const;
  /// Continues from a state_dict(). Throws ValueError naming a missing key
  /// or for an order that is not a permutation of 0..N-1, ShapeError for a
  /// next_batch that is not [1].
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  std::vector<Tensor> tensors_;
  DataLoaderOptions opt_;
  Generator* gen_;
  int64_t n_ = 0;
  std::vector<int64_t> order_;
  int64_t next_batch_ = 0;  // in the current epoch; size() (or more) = the epoch is over
};

}  // namespace tmem::nn
