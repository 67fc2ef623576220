// Depthwise 3-D convolution (docs/DESIGN.md §4): PyTorch's F.conv3d with
// groups = C and one filter per channel.
#pragma once
#include <array>
#include <cstdint>

#include "tmem/core/tensor.h"

namespace tmem {

/// Depthwise 3-D convolution (cross-correlation, as PyTorch) with zero padding:
///
///   out[b,c,od,oh,ow] = bias[c] + sum_{i<kD, j<kH, k<kW} weight[c,0,i,j,k]
///                        * input[b,c, od sD - pD + i, oh sH - pH + j, ow sW - pW + k]
///
/// input [B,C,D,H,W], weight [C,1,kD,kH,kW] (PyTorch's Conv3d(C, C, k,
/// groups=C) layout), bias [C] or undefined (no bias); stride (sD,sH,sW) >= 1,
/// padding (pD,pH,pW) >= 0, taps outside the input read 0. Any kernel size >= 1
/// per axis ((3,1,1), (1,3,1), (1,1,3), (3,3,3), ...). Output
/// [B, C, Do, Ho, Wo] with Do = (D + 2 pD - kD) / sD + 1 (integer division),
/// likewise Ho and Wo, exactly as PyTorch. Gradients w.r.t. input, weight and
/// bias. Source: torch.nn.functional.conv3d(input, weight, bias, stride,
/// padding, groups=C).
///
/// Throws ShapeError (naming the op and the shapes involved) when input is not
/// 5-D, when weight is not [C,1,kD,kH,kW] for input's C, when bias is not [C],
/// or when the padded input is smaller than the kernel along some axis or its
/// size (D + 2 pD, ...) overflows int64;
/// ValueError for a stride < 1 or a padding < 0; DtypeError for mixed or
/// non-floating dtypes (float32 on a device); DeviceError when the inputs are
/// on different devices or the device's backend has no kernel for this op.
Tensor conv3d_depthwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        std::array<int64_t, 3> stride = {1, 1, 1},
                        std::array<int64_t, 3> padding = {0, 0, 0});

}  // namespace tmem
