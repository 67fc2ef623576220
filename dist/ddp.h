// DistributedDataParallel (PyTorch torch.nn.parallel.DistributedDataParallel,
// Li et al. 2020, "PyTorch Distributed"): every rank holds the whole model,
// runs forward and backward on its own shard of the batch, and the gradients
// are averaged over the ranks before the optimizer step, so every rank takes
// the same step and the parameters stay bit-identical.
//
// The parameters are grouped into buckets of about bucket_cap_mb, in reverse
// registration order (backward finishes the last layers first). A
// post-accumulate-grad hook (core/grad_hooks.h) on each parameter copies its
// finished gradient into its bucket's flat buffer; a bucket whose gradients
// are all in starts its all-reduce at once (MPI_Iallreduce), while backward
// goes on with the earlier layers. Buckets start in index order on every rank
// (a bucket that fills early waits for the ones before it), as MPI needs.
// When the last bucket has started, the hook waits for all of them and writes
// the mean gradients back into the parameters' .grad, so after
// loss.backward() the gradients are already reduced; synchronize() finishes a
// backward that did not reach every parameter.
//
// Gradient accumulation (PyTorch's no_sync): backwards run while a NoSync
// guard lives are not reduced; each rank's .grad accumulates its own sum, and
// the next backward outside the guard reduces the accumulated gradients.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tmem/dist/dist.h"
#include "tmem/nn/module.h"

namespace tmem::dist {

class DistributedDataParallel {
 public:
  /// The scope of no_sync(): while it lives, backward does not reduce.
  /// Move-only; the destructor restores the synchronization that was on when
  /// it was made.
  class NoSync {
   public:
    NoSync(NoSync&& o) noexcept : ddp_(o.ddp_), restore_(o.restore_) { o.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;
    ~NoSync() {
      if (ddp_) ddp_->require_sync_ = restore_;
    }

   private:
    friend class DistributedDataParallel;
    NoSync(DistributedDataParallel* ddp, bool restore) : ddp_(ddp), restore_(restore) {}
    DistributedDataParallel* ddp_;
    bool restore_;
  };

  /// Wraps `module` (which must outlive this object): broadcasts its
  /// parameters and buffers from rank 0 (so every rank starts from rank 0's
  /// initialisation) and registers the gradient hooks. Collective: every rank
  /// constructs it. Throws ValueError before init() or for bucket_cap_mb <= 0,
  /// or when the ranks' models differ (dist::broadcast's check);
  /// DtypeError for a parameter that is not float32, DeviceError when the
  /// parameters are on several devices, or on a CUDA device without NCCL.
  explicit DistributedDataParallel(nn::Module& module, double bucket_cap_mb = 25.0);
  /// Removes the hooks (waiting for a reduction still in flight).
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// Completes this backward's reduction: the parameters that backward did
  /// not reach count with a zero gradient (and get one), the buckets not yet
  /// started start, and every parameter's .grad becomes the mean over the
  /// ranks. A no-op when the backward reached every parameter (the hooks have
  /// done it all). Call it after loss.backward(), before clipping and the
  /// optimizer step; every rank must call it. A no-op inside no_sync().
  void synchronize();

  /// Turns the reduction off until the returned guard is destroyed (PyTorch
  /// DistributedDataParallel.no_sync): the backwards in its scope leave each
  /// rank's gradients local, accumulating in .grad, and the first backward
  /// after it (with synchronize()) reduces the accumulated sums. So K
  /// backwards under no_sync and one after it give every rank the mean over
  /// the ranks of each rank's gradient summed over its K + 1 micro-batches.
  /// Call it between backwards, never while one runs; every rank must skip
  /// the same backwards.
  [[nodiscard]] NoSync no_sync();

  nn::Module& module() { return module_; }
  /// The buckets as indices into module().parameters() (those requiring
  /// grad), in the order they are reduced.
  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }
  /// Over the last completed backward: how many buckets started their
  /// all-reduce while some parameter's gradient was still being computed
  /// (the overlap; all but the last bucket when backward reaches every
  /// parameter in bucket order).
  int64_t buckets_started_during_backward() const { return last_overlapped_; }

 private:
  struct Slot {
    size_t bucket;
    int64_t offset;  // in the bucket's buffer, in elements
  };
  void on_grad_ready(size_t param);
  void copy_in(size_t param);
  void start_ready_buckets();
  void finish_round();
  void reset_round();

  nn::Module& module_;
  std::vector<Tensor> params_;
  std::vector<Slot> slots_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<Tensor> buffers_;
  std::vector<uint64_t> hook_ids_;
  // This backward's state.
  std::vector<bool> param_ready_;
  std::vector<size_t> bucket_ready_;  // parameters of each bucket whose gradient is in
  std::vector<Work> works_;
  size_t next_bucket_ = 0;            // the first bucket not started
  size_t params_ready_ = 0;
  int64_t overlapped_ = 0, last_overlapped_ = 0;
  bool round_done_ = false;
  bool require_sync_ = true;  // off inside no_sync()
};

/// Checks that `module`'s parameters hold the same bits on every rank (a
/// 64-bit hash of each, all-gathered), as data-parallel training keeps them.
/// Collective. Throws ValueError naming `what` (e.g. "train"), the first
/// parameter that differs and the ranks, or before init().
void check_replicas_match(const nn::Module& module, const std::string& what);

}  // namespace tmem::dist
