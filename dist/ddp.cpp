#include "tmem/dist/ddp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "tmem/core/grad_hooks.h"
#include "tmem/core/profiler.h"
#include "tmem/dist/nccl.h"
#include "tmem/ops/shape.h"

namespace tmem::dist {

DistributedDataParallel::DistributedDataParallel(nn::Module& module, double bucket_cap_mb) : module_(module) {
  check<ValueError>(is_initialized(), "DistributedDataParallel: the distributed job is not initialized; call "
                    "tmem::dist::init() first (and launch with mpirun or srun)");
  check<ValueError>(std::isfinite(bucket_cap_mb) && bucket_cap_mb > 0,
                    "DistributedDataParallel: expected bucket_cap_mb > 0, but got ", bucket_cap_mb);
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;
    check<DtypeError>(p.dtype() == DType::Float32, "DistributedDataParallel: parameter \"", name,
                      "\" is ", dtype_name(p.dtype()), "; expected float32");
    const Device d = params_.empty() ? p.device() : params_[0].device();
    check<DeviceError>(p.device() == d, "DistributedDataParallel: parameter \"", name, "\" is on ",
                       p.device().str(), " but the first one is on ", d.str(), "; expected one device");
    check<DeviceError>(d.is_cpu() || *nccl::unavailable_reason() == '\0', "DistributedDataParallel: parameter \"",
                       name, "\" is on ", d.str(), ", which needs the NCCL transport: ", nccl::unavailable_reason());
    params_.push_back(p);
  }
  // Every rank must hold the same model: the counts first, then each tensor
  // (broadcast checks its dtype and size).
  const std::map<std::string, Tensor> state = module.state_dict();
  Tensor counts = all_gather(tensor_int({static_cast<int64_t>(state.size()), static_cast<int64_t>(params_.size())}, {2}));
  const std::vector<int64_t> c = counts.to_int_vector();
  for (int r = 1; r < world_size(); ++r)
    check<ValueError>(c[2 * r] == c[0] && c[2 * r + 1] == c[1], "DistributedDataParallel: rank ", r, " has ",
                      c[2 * r], " tensors (", c[2 * r + 1], " trained parameters) but rank 0 has ", c[0], " (",
                      c[1], "); every rank must build the same model");
  for (const auto& [name, t] : state) broadcast(t, 0);

  // Buckets of about bucket_cap_mb, filled in reverse registration order.
  const auto cap = static_cast<int64_t>(std::max(1.0, bucket_cap_mb * 1024 * 1024 / sizeof(float)));
  slots_.resize(params_.size());
  int64_t filled = 0;
  for (size_t i = params_.size(); i-- > 0;) {
    if (bucket_params_.empty() || filled >= cap) {
      bucket_params_.emplace_back();
      filled = 0;
    }
    slots_[i] = {bucket_params_.size() - 1, filled};
    bucket_params_.back().push_back(i);
    filled += params_[i].numel();
  }
  for (const auto& b : bucket_params_) {
    int64_t n = 0;
    for (size_t i : b) n += params_[i].numel();
    buffers_.push_back(zeros({n}, DType::Float32, params_[b.front()].device()));
  }
  works_.resize(bucket_params_.size());
  param_ready_.assign(params_.size(), false);
  bucket_ready_.assign(bucket_params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i)
    hook_ids_.push_back(register_post_accumulate_grad_hook(params_[i], [this, i](const Tensor&) { on_grad_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (uint64_t id : hook_ids_) remove_post_accumulate_grad_hook(id);
}

void DistributedDataParallel::copy_in(size_t i) {
  const Tensor& p = params_[i];
  Tensor view = make_view(buffers_[slots_[i].bucket], p.shape(), contiguous_strides(p.shape()), slots_[i].offset);
  if (Tensor g = p.grad(); g.defined()) copy_data(view, g);
  else fill_data(view, 0.0);
}

void DistributedDataParallel::on_grad_ready(size_t i) {
  if (!require_sync_) return;  // no_sync: the gradient stays local and accumulates
  if (round_done_) reset_round();
  check<ValueError>(!param_ready_[i], "DistributedDataParallel: a second backward reached a parameter before "
                    "the first backward's gradients were reduced; call synchronize() after each backward "
                    "(accumulating gradients over several backwards is not supported)");
  param_ready_[i] = true;
  ++params_ready_;
  copy_in(i);
  if (++bucket_ready_[slots_[i].bucket] == bucket_params_[slots_[i].bucket].size()) start_ready_buckets();
  // MPI advances a non-blocking collective only inside MPI calls.
  for (size_t b = 0; b < next_bucket_; ++b) works_[b].test();
  if (next_bucket_ == bucket_params_.size()) finish_round();
}

void DistributedDataParallel::start_ready_buckets() {
  const RecordFunction range("ddp: all_reduce start");  // the profiler's row for launching the reductions
  while (next_bucket_ < bucket_params_.size() &&
         bucket_ready_[next_bucket_] == bucket_params_[next_bucket_].size()) {
    works_[next_bucket_] = all_reduce_async(buffers_[next_bucket_], ReduceOp::Mean);
    if (params_ready_ < params_.size()) ++overlapped_;
    ++next_bucket_;
  }
}

void DistributedDataParallel::finish_round() {
  for (size_t b = 0; b < bucket_params_.size(); ++b) {
    {
      const RecordFunction range("ddp: all_reduce wait");  // communication not hidden behind backward
      works_[b].wait();
    }
    for (size_t i : bucket_params_[b]) {
      const Tensor& p = params_[i];
      Tensor mean = make_view(buffers_[b], p.shape(), contiguous_strides(p.shape()), slots_[i].offset);
      if (Tensor g = p.grad(); g.defined()) {
        copy_data(g, mean);
      } else {
        Tensor fresh = empty(p.shape(), p.dtype(), p.device());
        copy_data(fresh, mean);
        p.impl().grad = fresh.impl_ptr();
      }
    }
  }
  last_overlapped_ = overlapped_;
  round_done_ = true;
}

void DistributedDataParallel::reset_round() {
  std::fill(param_ready_.begin(), param_ready_.end(), false);
  std::fill(bucket_ready_.begin(), bucket_ready_.end(), 0);
  next_bucket_ = 0;
  params_ready_ = 0;
  overlapped_ = 0;
  round_done_ = false;
}

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() {
  NoSync guard(this, require_sync_);
  require_sync_ = false;
  return guard;
}

void DistributedDataParallel::synchronize() {
  if (!require_sync_) return;
  if (!round_done_) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (param_ready_[i]) continue;
      param_ready_[i] = true;
      ++params_ready_;
      copy_in(i);
      ++bucket_ready_[slots_[i].bucket];
    }
    start_ready_buckets();
    finish_round();
  }
  reset_round();
}

void check_replicas_match(const nn::Module& module, const std::string& what) {
  check<ValueError>(is_initialized(), what, ": cannot compare the ranks' parameters: the distributed job is not "
                    "initialized; call tmem::dist::init() first");
  const auto named = module.named_parameters();
  std::vector<int64_t> hashes;
  for (const auto& [name, p] : named) {
    const Tensor host = contiguous(p.detach().cpu());
    const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
    uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bit
    for (size_t k = 0, n = static_cast<size_t>(host.numel()) * dtype_size(host.dtype()); k < n; ++k)
      h = (h ^ bytes[k]) * 1099511628211ull;
    hashes.push_back(static_cast<int64_t>(h));
  }
  const auto P = static_cast<int64_t>(hashes.size());
  const std::vector<int64_t> all = all_gather(tensor_int(hashes, {P})).to_int_vector();
  for (int r = 1; r < world_size(); ++r)
    for (int64_t i = 0; i < P; ++i)
      check<ValueError>(all[r * P + i] == all[i], what, ": the ranks' models have diverged: parameter \"",
                        named[i].first, "\" differs between rank 0 and rank ", r,
                        " (data-parallel training keeps them bit-identical)");
}

}  // namespace tmem::dist
