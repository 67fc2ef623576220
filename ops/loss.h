// Losses (docs/DESIGN.md §4), PyTorch semantics.
// Shapes: logits[N, C] (N samples, C classes), target[N] int64.
#pragma once
#include <cstdint>
#include <string>

#include "tmem/core/tensor.h"

namespace tmem {

/// Cross-entropy of logits against class indices
/// (torch.nn.functional.cross_entropy with class-index targets, no weight).
/// Per sample, with lsm = log_softmax(logits[n]) computed max-subtracted and
/// eps = label_smoothing:
///   loss[n] = (1 - eps) * (-lsm[target[n]]) + eps * mean_c(-lsm[c]),
/// and loss[n] = 0 where target[n] == ignore_index. reduction "none" returns
/// loss[N]; "sum" returns sum_n loss[n]; "mean" returns the sum divided by
/// the number of non-ignored samples (NaN when every sample is ignored, as
/// PyTorch). Logits [1e8, 1e8] with target 1 give log 2.
/// Backward: dlogits[n, c] = s[n] * (softmax[n, c] - (1 - eps) [c == target[n]]
/// - eps / C), zero on ignored rows; s[n] the reduction's weight times g.
/// Throws ShapeError for logits not [N, C] or target not [N] (naming both
/// shapes), DtypeError for a non-int64 target or int64 logits (float64 on a
/// device), IndexError for a target outside [0, C) that is not ignore_index
/// (naming it and C), ValueError for an unknown reduction or label_smoothing
/// outside [0, 1], DeviceError for operands on different devices or a device
/// whose backend has no cross_entropy (or log_softmax) kernels.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, const std::string& reduction = "mean");

}  // namespace tmem
