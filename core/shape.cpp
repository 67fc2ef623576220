#include "tmem/core/shape.h"

#include "tmem/core/error.h"

namespace tmem {

int64_t numel_of(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape " + shape_str(s) + " has more elements than an int64 can count");
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    check<ShapeError>(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                      shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ",
                      db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char* op, int64_t input_rank) {
  int64_t r = rank == 0 ? 1 : rank;
  check<IndexError>(dim >= -r && dim < r, op, ": dim ", dim, " is out of range [", -r, ", ", r - 1,
                    "] for a tensor of rank ", input_rank < 0 ? rank : input_rank);
  return dim < 0 ? dim + r : dim;
}

}  // namespace tmem
