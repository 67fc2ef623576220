// Shapes, strides and NumPy broadcasting rules (docs/DESIGN.md §2).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tmem {

using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for a 0-d shape, 0 when a dim is 0).
/// Throws ShapeError naming the shape when the product overflows int64.
int64_t numel_of(const Shape& s);
/// Row-major (C-contiguous) strides of a shape, in elements.
Shape contiguous_strides(const Shape& s);
/// "[2,3,4]".
std::string shape_str(const Shape& s);
/// NumPy broadcast of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Maps a possibly negative dim into [0, rank) (a rank of 0 takes dims -1
/// and 0, as PyTorch). Throws IndexError "<op>: dim <dim> is out of range
/// [<lo>, <hi>] for a tensor of rank <input_rank>"; input_rank (default:
/// rank) differs where a dim is inserted (unsqueeze and stack take rank + 1
/// positions).
int64_t normalize_dim(int64_t dim, int64_t rank, const char* op, int64_t input_rank = -1);

}  // namespace tmem
