// Values of the shape ops (ops/shape.cpp): views sharing storage, reshape and
// view strides, cat, stack, split, pad, gather, index_select,
// repeat_interleave. (Gradients are covered by the op-table gradchecks.)
#include <limits>

#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;

TEST_CASE("views share storage and the version counter") {
  Tensor a = reshape(arange(0, 6), {2, 3});
  Tensor t = transpose(a, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(!t.is_contiguous());
  check_close(t, {0, 3, 1, 4, 2, 5});
  CHECK(t.impl().storage == a.impl().storage);
  uint64_t v = a.version();
  fill_data(t, 1.0);
  CHECK(a.version() == v + 1);
  check_close(a, {1, 1, 1, 1, 1, 1});
  check_close(slice(reshape(arange(0, 10), {10}), 0, 1, 8, 3), {1, 4, 7});
  check_close(expand(tensor({1, 2}, {2, 1}), {2, 3}), {1, 1, 1, 2, 2, 2});
  check_close(expand(tensor({1, 2}, {2, 1}), {-1, 2}), {1, 1, 2, 2});
  // A size-1 dim took any negative size (a shape [2, -2] failing later, in sum or numpy()); PyTorch refuses it.
  CHECK_THROWS_WITH_AS(expand(tensor({1, 2}, {2, 1}), {2, -2}),
                       "expand: size -2 at dim 1 of [2,-2] is negative (only -1, keep the input's size, is allowed)",
                       ShapeError);
  CHECK_THROWS_AS(view(transpose(reshape(arange(0, 6), {2, 3}), 0, 1), {6}), ShapeError);
  check_close(reshape(transpose(reshape(arange(0, 6), {2, 3}), 0, 1), {6}), {0, 3, 1, 4, 2, 5});
}

TEST_CASE("reshape and view of a non-contiguous tensor are views when the strides allow (PyTorch computeStride)") {
  // [2, 3, 4] permuted to [4, 2, 3] (strides 1, 12, 4): its last two dims are
  // contiguous with each other, the first is not.
  Tensor a = reshape(arange(0, 24), {2, 3, 4});
  Tensor p = permute(a, {2, 0, 1});
  Tensor merged = view(p, {4, 6});  // dims 1 and 2 merge: a view
  CHECK(merged.impl().storage == a.impl().storage);
  CHECK(merged.strides() == Shape{1, 4});
  Tensor unsq = view(p, {4, 1, 2, 3});  // a size-1 dim added
  CHECK(unsq.impl().storage == a.impl().storage);
  Tensor split = view(p, {2, 2, 6});  // the first dim split
  CHECK(split.strides() == Shape{2, 1, 4});
  CHECK(split.to_vector() == contiguous(p).to_vector());
  Tensor sq = squeeze(slice(permute(reshape(arange(0, 24), {2, 3, 1, 4}), {2, 0, 3, 1}), 0, 0, 1), 0);
  CHECK(sq.shape() == Shape{2, 4, 3});
  CHECK(sq.impl().storage != nullptr);
  CHECK(!sq.is_contiguous());  // a view of the permuted storage, not a copy
  check_close(sq, contiguous(sq).to_vector());
  // Not viewable: dims 0 and 1 of p are not one stride apart; reshape copies.
  CHECK_THROWS_WITH_AS(view(p, {8, 3}), doctest::Contains("cannot be seen as shape [8,3]"), ShapeError);
  Tensor copied = reshape(p, {8, 3});
  CHECK(copied.impl().storage != a.impl().storage);
  CHECK(copied.to_vector() == contiguous(p).to_vector());
  // Gradients flow through the views as through copies.
  Generator gen(5);
  Tensor x = randn({2, 3, 4}, 0, 1, DType::Float64, gen);
  x.requires_grad_();
  const Tensor w = randn({2, 2, 6}, 0, 1, DType::Float64, gen);
  tmem::test::require_gradcheck(
      [&](const std::vector<Tensor>& v) {
        return sum(squeeze(unsqueeze(view(permute(v[0], {2, 0, 1}), {2, 2, 6}), 1), 1) * w);
      },
      {x});
}

TEST_CASE("shape ops: cat, stack, split, pad, gather, index_select, repeat_interleave") {
  Tensor a = reshape(arange(0, 6), {2, 3});
  check_close(cat({a, a * 10.0}, 0), {0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50});
  CHECK(stack({a, a}, 1).shape() == Shape{2, 2, 3});
  auto parts = split(arange(0, 5), 2, 0);
  REQUIRE(parts.size() == 3);
  check_close(parts[2], {4});
  check_close(pad(tensor({1, 2}, {1, 2}), {1, 0, 0, 1}, -1), {-1, 1, 2, -1, -1, -1});
  // Negative pads crop (it was refused); values and gradient from torch 1.13:
  // F.pad(arange(12.).reshape(3, 4), (-1, 1, 0, -2), value=-1) = [[1, 2, 3, -1]],
  // and the gradient of F.pad(x, (-1, 1, 1, -2)).sum() is 1 on row 0, cols 1-3.
  Tensor grid = reshape(arange(0, 12), {3, 4});
  grid.requires_grad_();
  Tensor cropped = pad(grid, {-1, 1, 0, -2}, -1);
  CHECK(cropped.shape() == Shape{1, 4});
  check_close(cropped, {1, 2, 3, -1});
  sum(pad(grid, {-1, 1, 1, -2})).backward();
  check_close(grid.grad(), {0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(pad(grid, {-2, -2}).shape() == Shape{3, 0});
  CHECK_THROWS_WITH_AS(pad(grid, {-3, -2}), "pad: dim 1 of size 4 with padding -3 and -2 would have a negative size",
                       ShapeError);
  check_close(gather(a, 1, tensor_int({2, 0, 1, 1}, {2, 2})), {2, 0, 4, 4});
  check_close(index_select(a, 0, tensor_int({1, 1, 0}, {3})), {3, 4, 5, 3, 4, 5, 0, 1, 2});
  check_close(repeat_interleave(tensor({1, 2}, {2}), 3, 0), {1, 1, 1, 2, 2, 2});
  // repeats 0 empties the dim, as torch.repeat_interleave (it was refused),
  // and the gradient is zeros; a negative count is refused with torch's words.
  Tensor r = tensor({1, 2, 3, 4}, {2, 2});
  r.requires_grad_();
  Tensor none = repeat_interleave(r, 0, 1);
  CHECK(none.shape() == Shape{2, 0});
  sum(none).backward();
  check_close(r.grad(), {0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(repeat_interleave(r, -1, 0), "repeat_interleave: repeats can not be negative, but got -1",
                       ValueError);
  CHECK_THROWS_AS(index_select(a, 0, tensor_int({2}, {1})), IndexError);
  CHECK_THROWS_AS(gather(a, 1, tensor_int({3, 0}, {2, 1})), IndexError);
  CHECK_THROWS_AS(cat({a, zeros({2, 2})}, 0), ShapeError);
}

TEST_CASE("split and unbind: views, one tape node, and a backward that concatenates") {
  Tensor a = reshape(arange(0, 12), {2, 6});
  a.requires_grad_();
  const int64_t nodes = live_node_count();
  std::vector<Tensor> parts = split(a, 4, 1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].shape() == Shape{2, 4});
  CHECK(parts[1].shape() == Shape{2, 2});
  CHECK(parts[1].impl().storage == a.impl().storage);
  check_close(parts[1], {4, 5, 10, 11});
  CHECK(live_node_count() == nodes + 1);
  // Only the second part reaches the loss: the first part's gradient is zeros.
  sum(parts[1] * 3.0).backward();
  check_close(a.grad(), {0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 3, 3});

  std::vector<Tensor> rows = unbind(reshape(arange(0, 6), {2, 3}), 1);
  REQUIRE(rows.size() == 3);
  CHECK(rows[2].shape() == Shape{2});
  check_close(rows[2], {2, 5});
  const std::vector<Tensor> empty_parts = split(zeros({2, 0}), 3, 1);  // torch: one empty part
  REQUIRE(empty_parts.size() == 1);
  CHECK(empty_parts[0].shape() == Shape{2, 0});
  CHECK_THROWS_WITH_AS(split(a, 0, 1), "split: expected a positive split_size, but got 0", ValueError);
  CHECK_THROWS_WITH_AS(split(tensor({1}, {}), 1, 0), "split: cannot split a 0-d tensor", ShapeError);
  CHECK_THROWS_AS(unbind(a, 2), IndexError);
  // A dim is inserted: the range is one wider than the input's rank.
  CHECK_THROWS_WITH_AS(unsqueeze(zeros({2, 2}), 3), "unsqueeze: dim 3 is out of range [-3, 2] for a tensor of rank 2",
                       IndexError);
  CHECK_THROWS_WITH_AS(stack({zeros({2}), zeros({2})}, -3), "stack: dim -3 is out of range [-2, 1] for a tensor of rank 1",
                       IndexError);
  CHECK(unsqueeze(zeros({2, 2}), -3).shape() == Shape{1, 2, 2});
  // As torch.squeeze(x, dim): a dim whose size is not 1 is left (a view).
  const Tensor sq_in = arange(0, 6);
  const Tensor sq = squeeze(reshape(sq_in, {2, 3}), 0);
  CHECK(sq.shape() == Shape{2, 3});
  CHECK(sq.impl().storage == sq_in.impl().storage);
  CHECK(squeeze(tensor({1}, {}), -1).shape() == Shape{});
  CHECK_THROWS_WITH_AS(squeeze(zeros({2, 1}), 2), "squeeze: dim 2 is out of range [-2, 1] for a tensor of rank 2",
                       IndexError);
  // A step near 2^63 takes the first element: (end - start + step - 1) / step overflowed to -1 elements.
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  const Tensor m = reshape(arange(0, 6), {2, 3});
  CHECK(slice(m, 0, 0, kHuge, kHuge).shape() == Shape{1, 3});
  check_close(slice(m, 1, 1, 3, kHuge - 1), {1, 4});
  CHECK(slice(m, 0, 2, kHuge, kHuge).shape() == Shape{0, 3});
  // Sizes past int64 printed as negative shapes.
  CHECK_THROWS_WITH_AS(repeat_interleave(m, int64_t{1} << 62, 0),
                       "repeat_interleave: 2 x 4611686018427387904 repeats along dim 0 is past int64", ShapeError);
  const Tensor wide = expand(zeros({1, 1}), {int64_t{1} << 62, 1});
  CHECK_THROWS_WITH_AS(cat({wide, wide, wide}, 0), "cat: the sizes along dim 0 add up past int64 (tensor 1)", ShapeError);
  CHECK_THROWS_WITH_AS(unbind(tensor({1}, {}), 0), "unbind: cannot unbind a 0-d tensor", ShapeError);
}

TEST_CASE("gather and index_select name the first index out of range in row-major order, anywhere in a large index") {
  using test::error_of;
  const Tensor a = reshape(arange(0, 40 * 300), {40, 300});  // a[r, c] = 300 r + c
  std::vector<int64_t> rows(40 * 300), cols(2000);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i * 7 % 300);
  for (size_t i = 0; i < cols.size(); ++i) cols[i] = static_cast<int64_t>(i * 11 % 40);
  std::vector<double> gathered(rows.size()), selected(cols.size() * 300);
  for (size_t i = 0; i < rows.size(); ++i) gathered[i] = static_cast<double>(i / 300 * 300 + rows[i]);
  for (size_t i = 0; i < selected.size(); ++i) selected[i] = static_cast<double>(cols[i / 300] * 300 + i % 300);
  CHECK(gather(a, 1, tensor_int(rows, {40, 300})).to_vector() == gathered);
  CHECK(index_select(a, 0, tensor_int(cols, {2000})).to_vector() == selected);
  // A bad value in the middle and a later one: the middle one is named.
  rows[6001] = 300;
  rows[11999] = -1;
  CHECK(error_of<IndexError>([&] { gather(a, 1, tensor_int(rows, {40, 300})); }) ==
        "gather: index 300 is out of range for a dim of size 300");
  rows[6001] = 5;
  CHECK(error_of<IndexError>([&] { gather(a, 1, tensor_int(rows, {40, 300})); }) ==
        "gather: index -1 is out of range for a dim of size 300");
  // A transposed index is read in its own row-major order, not in memory
  // order: its element [0, 5] is stored at 200, its element [1, 0] at 1.
  rows[11999] = 0;
  rows[200] = 301;
  rows[1] = 302;
  CHECK(error_of<IndexError>([&] { gather(a, 1, transpose(tensor_int(rows, {300, 40}), 0, 1)); }) ==
        "gather: index 301 is out of range for a dim of size 300");
  cols[1000] = 40;
  cols[1999] = -3;
  CHECK(error_of<IndexError>([&] { index_select(a, 0, tensor_int(cols, {2000})); }) ==
        "index_select: index 40 is out of range for a dim of size 40");
  cols[1000] = 0;
  CHECK(error_of<IndexError>([&] { index_select(a, 0, tensor_int(cols, {2000})); }) ==
        "index_select: index -3 is out of range for a dim of size 40");
  std::vector<int64_t> labels(40);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i);
  CHECK(error_of<IndexError>([&] { index_select(tensor_int(labels, {40}), 0, tensor_int(cols, {2000})); }) ==
        "index_select: index -3 is out of range for a dim of size 40");
  // A gathered dim of size 0 has no valid index.
  CHECK(error_of<IndexError>([&] { gather(zeros({3, 0}), 1, tensor_int({0, 0, 0}, {3, 1})); }) ==
        "gather: index 0 is out of range for a dim of size 0");
}

TEST_CASE("0-d tensors: transpose is the tensor, the ops that index a dim raise instead of reading past the shape") {
  const Tensor s = full({}, 1.5f);
  const Tensor t = transpose(s, 0, -1);
  CHECK(t.dim() == 0);
  CHECK(t.item() == 1.5);
  CHECK_THROWS_AS(transpose(s, 0, 1), IndexError);
  CHECK_THROWS_WITH_AS(cat({ones({1}), s}, 0), "cat: zero-dimensional tensor (at position 1) cannot be concatenated",
                       ShapeError);
  CHECK_THROWS_WITH_AS(cat({s}, -1), "cat: zero-dimensional tensor (at position 0) cannot be concatenated", ShapeError);
  CHECK_THROWS_WITH_AS(repeat_interleave(s, 2, 0),
                       "repeat_interleave: dim 0 given, but the tensor has no dims (0-d)", ShapeError);
  CHECK_THROWS_WITH_AS(index_select(s, 0, zeros({1}, DType::Int64)),
                       "index_select: expected an input of at least 1 dim, but got a 0-d tensor", ShapeError);
  CHECK_THROWS_WITH_AS(gather(s, 0, zeros({}, DType::Int64)),
                       "gather: expected an input of at least 1 dim, but got a 0-d tensor", ShapeError);
  CHECK_THROWS_WITH_AS(s.size(0), "size: dim 0 given, but the tensor has no dims (0-d)", IndexError);
  CHECK_THROWS_WITH_AS(narrow(s, 0, 0, 1), "narrow: cannot narrow a 0-d tensor", ShapeError);
}

TEST_CASE("narrow is torch.narrow: a view of length elements, and out-of-range arguments raise instead of clamping") {
  const Tensor x = reshape(arange(12), {3, 4});
  const Tensor v = narrow(x, 1, 1, 2);
  CHECK(v.shape() == Shape{3, 2});
  CHECK(v.to_vector() == std::vector<double>{1, 2, 5, 6, 9, 10});
  CHECK(narrow(x, -1, -2, 2).to_vector() == std::vector<double>{2, 3, 6, 7, 10, 11});
  CHECK(narrow(x, 0, 3, 0).shape() == Shape{0, 4});
  CHECK_THROWS_WITH_AS(narrow(x, 1, 2, 5), "narrow: start (2) + length (5) exceeds dim 1 of size 4", IndexError);
  CHECK_THROWS_WITH_AS(narrow(x, 1, 10, 2), "narrow: start 10 is out of range [-4, 4] for dim 1 of size 4",
                       IndexError);
  CHECK_THROWS_WITH_AS(narrow(x, 1, -5, 1), "narrow: start -5 is out of range [-4, 4] for dim 1 of size 4",
                       IndexError);
  CHECK_THROWS_WITH_AS(narrow(x, 1, 1, std::numeric_limits<int64_t>::max()),
                       "narrow: start (1) + length (9223372036854775807) exceeds dim 1 of size 4", IndexError);
  CHECK_THROWS_WITH_AS(narrow(x, 1, 0, -1), "narrow: expected length >= 0, but got -1", ValueError);
  CHECK_THROWS_AS(narrow(x, 2, 0, 1), IndexError);
}

TEST_CASE("pad: padding that overflows a dim's size is a ValueError naming pad") {
  const int64_t big = int64_t{1} << 62;
  CHECK_THROWS_WITH_AS(pad(ones({2, 3}), {big, big}),
                       "pad: pads 4611686018427387904 and 4611686018427387904 make dim 1 of shape [2,3] larger than an "
                       "int64 holds",
                       ValueError);
  CHECK_THROWS_AS(pad(ones({2, 3}), {std::numeric_limits<int64_t>::min(), 0}), ShapeError);
}
