#include "tmem/nn/data_loader.h"

#include <numeric>
#include <utility>

#include "tmem/core/autograd.h"
#include "tmem/ops/shape.h"

namespace tmem::nn {

DataLoader::DataLoader(std::vector<Tensor> tensors, const DataLoaderOptions& options, Generator& gen)
    : tensors_(std::move(tensors)), opt_(options), gen_(&gen) {
  check<ShapeError>(!tensors_.empty(), "DataLoader: expected at least one tensor");
  check<ValueError>(opt_.batch_size >= 1, "DataLoader: expected batch_size >= 1, but got ", opt_.batch_size);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    check<ShapeError>(tensors_[i].dim() >= 1, "DataLoader: tensor ", i, " is 0-d; examples run along dim 0");
    check<ShapeError>(tensors_[i].size(0) == tensors_[0].size(0), "DataLoader: tensor ", i, " has shape ",
                      shape_str(tensors_[i].shape()), " but tensor 0 has ", shape_str(tensors_[0].shape()),
                      " (dim 0 must match)");
  }
  n_ = tensors_[0].size(0);
  order_.resize(static_cast<size_t>(n_));
  next_batch_ = size();
}

int64_t DataLoader::size() const {
  return opt_.drop_last ? n_ / opt_.batch_size : (n_ + opt_.batch_size - 1) / opt_.batch_size;
}

std::vector<Tensor> DataLoader::next() {
  check<ValueError>(size() > 0, "DataLoader: an epoch of ", n_, " examples has no batch of ", opt_.batch_size,
                    opt_.drop_last ? " with drop_last" : "");
  if (next_batch_ >= size()) {  // a new epoch
    std::iota(order_.begin(), order_.end(), int64_t{0});
    if (opt_.shuffle)
      for (int64_t k = n_ - 1; k > 0; --k) std::swap(order_[k], order_[gen_->randint(k + 1)]);
    next_batch_ = 0;
  }
  const int64_t b0 = next_batch_ * opt_.batch_size, b1 = std::min(n_, b0 + opt_.batch_size);
  ++next_batch_;
  const Tensor idx = tensor_int(std::vector<int64_t>(order_.begin() + b0, order_.begin() + b1), {b1 - b0});
  NoGradGuard no_grad;
  std::vector<Tensor> batch;
  for (const Tensor& t : tensors_) batch.push_back(index_select(t, 0, idx.to(t.device())));
  return batch;
}

DataLoader::Iterator::Iterator(DataLoader* loader, int64_t left) : loader_(loader), left_(left) {
  if (left_ > 0) batch_ = loader_->next();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  batch_.clear();
  if (--left_ > 0) batch_ = loader_->next();
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  next_batch_ = size();
  return Iterator(this, size());
}

std::map<std::string, Tensor> DataLoader::state_dict() const {
  return {{"order", tensor_int(order_, {n_})}, {"next_batch", tensor_int({next_batch_}, {1})}};
}

void DataLoader::load_state_dict(const std::map<std::string, Tensor>& state) {
  for (const char* key : {"order", "next_batch"})
    check<ValueError>(state.count(key) > 0, "DataLoader::load_state_dict: the state has no \"", key, "\"");
  const std::vector<int64_t> order = state.at("order").to_int_vector();
  std::vector<bool> seen(static_cast<size_t>(n_), false);
  bool permutation = static_cast<int64_t>(order.size()) == n_;
  for (int64_t i : order) {
    permutation = permutation && i >= 0 && i < n_ && !seen[static_cast<size_t>(i)];
    if (permutation) seen[static_cast<size_t>(i)] = true;
  }
  check<ValueError>(permutation, "DataLoader::load_state_dict: \"order\" is not a permutation of 0..", n_ - 1);
  check<ShapeError>(state.at("next_batch").shape() == Shape{1},
                    "DataLoader::load_state_dict: expected \"next_batch\" [1], but got ",
                    shape_str(state.at("next_batch").shape()));
  order_ = order;
  next_batch_ = state.at("next_batch").to_int_vector()[0];
}

}  // namespace tmem::nn
