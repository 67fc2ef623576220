// Inputs of convlstm3d_cell for the tests that exercise it.
#pragma once
#include <array>
#include <vector>

#include "tmem/core/rng.h"
#include "tmem/ops/convlstm.h"

namespace tmem::test {

/// Random inputs x, h, c, dw_d, dw_h, dw_w, db_d, db_h, db_w, pw, pb for a
/// cell with batch B, Cx input and C state channels on grid g.
inline std::vector<Tensor> cell_inputs(int64_t B, int64_t Cx, int64_t C, std::array<int64_t, 3> g,
                                       DType dt, uint64_t seed) {
  const int64_t Cz = Cx + C;
  Generator gen(seed);
  auto r = [&](const Shape& s, double lo, double hi) { return rand(s, lo, hi, dt, gen); };
  return {r({B, Cx, g[0], g[1], g[2]}, -1, 1), r({B, C, g[0], g[1], g[2]}, -1, 1),
          r({B, C, g[0], g[1], g[2]}, -1, 1), r({Cz, 3}, -1, 1), r({Cz, 3}, -1, 1),
          r({Cz, 3}, -1, 1), r({Cz}, -0.5, 0.5), r({Cz}, -0.5, 0.5), r({Cz}, -0.5, 0.5),
          r({4 * C, Cz}, -0.6, 0.6), r({4 * C}, -0.5, 0.5)};
}

/// The weights among cell_inputs' tensors (indices 3..10).
inline ConvLSTM3DWeights weights_of(const std::vector<Tensor>& v) {
  return {v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]};
}

}  // namespace tmem::test
