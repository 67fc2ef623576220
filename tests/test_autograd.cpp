// Autograd engine cases from the foundation issue.
#include <cmath>

#include "test_util.h"

#include "tmem/core/grad_buffer.h"
#include "tmem/core/grad_hooks.h"
#include "tmem/core/profiler.h"

using namespace tmem;
using tmem::test::check_close;

TEST_CASE("diamond graph accumulates both paths: x.grad = 21") {
  Tensor x = tensor({2.0}, {1});
  x.requires_grad_();
  Tensor y = x * 3.0;
  Tensor a = y * 2.0;
  Tensor b = y * 5.0;
  Tensor c = a + b;
  c.backward();
  check_close(x.grad(), {21.0});
}

TEST_CASE("backward casts a gradient of another floating dtype to the root's, as PyTorch") {
  Tensor x = tensor({1, 2}, {2}).requires_grad_();
  Tensor y = mul(x, 3.0);
  y.backward(tensor({1, 0.5}, {2}, DType::Float64));
  check_close(x.grad(), {3, 1.5});
  CHECK(x.grad().dtype() == DType::Float32);
  CHECK_THROWS_AS(mul(x, 3.0).backward(tensor_int({1, 1}, {2})), DtypeError);
}

TEST_CASE("x*(x*a) + x*(x*a) + (x*x)*a with a = 1 gives x.grad = 6") {
  Tensor x = tensor({1.0}, {1});
  x.requires_grad_();
  Tensor a = tensor({1.0}, {1});
  Tensor f = x * (x * a) + x * (x * a) + (x * x) * a;
  f.backward();
  check_close(x.grad(), {6.0});
}

TEST_CASE("broadcast backward sums back to the input shape") {
  Tensor a = tensor({1.5}, {1});
  a.requires_grad_();
  Tensor b = rand({5, 4});
  sum(a * b).backward();
  CHECK(a.grad().shape() == Shape{1});
  check_close(a.grad(), {sum(b).item()}, 1e-5);

  Tensor p = rand({2, 1, 4, 64});
  Tensor q = rand({2, 1, 4, 1});
  p.requires_grad_();
  q.requires_grad_();
  sum(p * q).backward();
  CHECK(p.grad().shape() == Shape{2, 1, 4, 64});
  CHECK(q.grad().shape() == Shape{2, 1, 4, 1});
  check_close(q.grad(), sum(p, {3}, true).to_vector(), 1e-5);
}

TEST_CASE("sigmoid gradient, and in-place change of its saved output is caught") {
  Tensor a = tensor({1, 2, 3}, {3});
  a.requires_grad_();
  Tensor y = sigmoid(a);
  sum(y).backward();
  check_close(a.grad(), {0.1966, 0.1050, 0.0452}, 1e-4);

  Tensor a2 = tensor({1, 2, 3}, {3});
  a2.requires_grad_();
  Tensor y2 = sigmoid(a2);
  mul_(y2, 2.0);
  try {
    sum(y2).backward();
    FAIL("expected an error");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()).find("sigmoid") != std::string::npos);
    CHECK(std::string(e.what()).find("modified in place") != std::string::npos);
  }
}

TEST_CASE("a second backward over a freed graph raises - retain_graph allows it") {
  Tensor x = tensor({2.0}, {1});
  x.requires_grad_();
  Tensor y = exp(x * x);
  y.backward();
  CHECK_THROWS_AS(y.backward(), ValueError);

  Tensor z = exp(x * x);
  x.zero_grad();
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();
  check_close(x.grad(), {2 * 2 * 2.0 * std::exp(4.0)}, 1e-6, 1e-6);
}

TEST_CASE("in-place op on a leaf that requires grad is an error - under NoGradGuard it works") {
  Tensor w = ones({3});
  w.requires_grad_();
  CHECK_THROWS_AS(mul_(w, 2.0), ValueError);
  {
    NoGradGuard g;
    mul_(w, 2.0);
  }
  check_close(w, {2, 2, 2});
}

TEST_CASE("in-place op on a view of a leaf that requires grad is an error, also for a view taken under NoGradGuard") {
  Tensor w = ones({2, 3});
  w.requires_grad_();
  const std::string message =
      ": a view of a leaf tensor that requires grad is used in an in-place operation; wrap the update in "
      "NoGradGuard (Python: with tmem.no_grad())";
  Tensor row = narrow(w, 0, 1, 1);
  CHECK_THROWS_WITH_AS(fill_(row, 5.0), ("fill_" + message).c_str(), ValueError);
  Tensor cell = narrow(row, 1, 2, 1);  // a view of a view: its base is still w
  CHECK_THROWS_WITH_AS(add_(cell, 1.0), ("add_" + message).c_str(), ValueError);
  Tensor quiet;
  {
    NoGradGuard g;
    quiet = narrow(w, 0, 0, 1);
    mul_(quiet, 3.0);
    fill_(row, 5.0);
  }
  CHECK_THROWS_WITH_AS(mul_(quiet, 2.0), ("mul_" + message).c_str(), ValueError);
  check_close(w, {3, 3, 3, 5, 5, 5});
  // A view of a tensor that does not require grad is written as before.
  Tensor y = zeros({2});
  Tensor first = narrow(y, 0, 0, 1);
  add_(first, 4.0);
  check_close(y, {4, 0});
}

TEST_CASE("in-place op on a non-leaf is differentiated through") {
  Tensor x = tensor({1, 2}, {2});
  x.requires_grad_();
  Tensor y = x * 3.0;
  mul_(y, 2.0);
  add_(y, 1.0);
  sum(y).backward();
  check_close(x.grad(), {6, 6});
}

TEST_CASE("an in-place op whose operand broadcasts past self is refused naming the op") {
  Tensor a = zeros({2});
  Tensor b = tensor({1, 2, 3, 4}, {2, 2});
  CHECK_THROWS_WITH_AS(add_(a, b),
                       "add_: the result of shape [2,2] does not fit in the tensor of shape [2] it "
                       "would be written into",
                       ShapeError);
  CHECK_THROWS_WITH_AS(copy_(a, b), doctest::Contains("copy_: the source of shape [2,2] does not broadcast"), ShapeError);
  check_close(a, {0, 0});
}

TEST_CASE("copy_ from a source that does not broadcast names copy_, not the add inside it") {
  Tensor a = zeros({3});
  CHECK_THROWS_WITH_AS(copy_(a, zeros({4})), doctest::Contains("copy_: shapes [3] and [4] cannot be broadcast"),
                       ShapeError);
  Tensor i = zeros({3}, DType::Int64);
  CHECK_THROWS_WITH_AS(copy_(i, zeros({2, 3})), doctest::Contains("copy_: the source of shape [2,3]"), ShapeError);
  check_close(a, {0, 0, 0});
}

TEST_CASE("in-place ops refuse an expanded tensor, whose elements share memory") {
  // copy_ into zeros({1,3}).expand({2,3}) kept the second row in both and
  // dropped the first without a word (PyTorch refuses it).
  Tensor base = zeros({1, 3});
  Tensor x = expand(base, {2, 3});
  const Tensor rows = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK_THROWS_WITH_AS(copy_(x, rows),
                       doctest::Contains("copy_: the tensor of shape [2,3] and strides [0,1] (an expand) has several "
                                         "elements at one memory location (dim 0)"),
                       ValueError);
  CHECK_THROWS_WITH_AS(add_(x, rows), doctest::Contains("add_: the tensor of shape [2,3]"), ValueError);
  CHECK_THROWS_WITH_AS(mul_(x, 2.0), doctest::Contains("mul_:"), ValueError);
  CHECK_THROWS_WITH_AS(fill_(x, 1.0), doctest::Contains("fill_:"), ValueError);
  check_close(base, {0, 0, 0});
  // A size-1 dim with stride 0 holds one element: still writable.
  Tensor y = make_view(zeros({3}), {1, 3}, {0, 1}, 0);
  fill_(y, 2.0);
  check_close(y, {2, 2, 2});
}

TEST_CASE("mul_ by a tensor is differentiated through, with the factor it overwrote") {
  // PyTorch 1.13. mul saves both factors, and mul_ then overwrote the first:
  // every backward through it was refused as a saved tensor modified in place.
  Tensor x = tensor({1, 2}, {2}), w = tensor({3, 4}, {2});
  x.requires_grad_();
  w.requires_grad_();
  Tensor y = x * 1.0;
  mul_(y, w);
  sum(y * y).backward();
  check_close(x.grad(), {18, 64});
  check_close(w.grad(), {6, 32});

  // A constant made to depend on w, and a non-leaf times a constant.
  Tensor w2 = tensor({3, 4}, {2});
  w2.requires_grad_();
  Tensor c = ones({2});
  mul_(c, w2);
  sum(c * c).backward();
  check_close(w2.grad(), {6, 8});

  Tensor x3 = tensor({1, 2}, {2});
  x3.requires_grad_();
  Tensor y3 = x3 * 1.0;
  mul_(y3, tensor({5, 6}, {2}));
  sum(y3).backward();
  check_close(x3.grad(), {5, 6});

  // A broadcast factor, seen through a view taken before.
  Tensor x4 = tensor({1, 2, 3, 4}, {4}), w4 = tensor({2}, {1});
  x4.requires_grad_();
  w4.requires_grad_();
  Tensor y4 = x4 * 1.0;
  Tensor tail = slice(y4, 0, 2, 4);
  mul_(y4, w4);
  sum(tail * tail).backward();
  check_close(x4.grad(), {0, 0, 24, 32});
  check_close(w4.grad(), {100});
}

TEST_CASE("fill_, zero_ and copy_ of a constant keep a non-leaf in the graph with a zero gradient") {
  // PyTorch 1.13: y = 2x; y.fill_(3); sum(y * x) gives x.grad [3, 3].
  Tensor x = tensor({1, 2}, {2});
  x.requires_grad_();
  Tensor y = x * 2.0;
  fill_(y, 3.0);
  CHECK(y.requires_grad());
  CHECK(!y.is_leaf());
  check_close(y, {3, 3});
  sum(y * x).backward();
  check_close(x.grad(), {3, 3});

  // y = 2x; y.zero_(); y.sum().backward() gives x.grad [0, 0] (once refused:
  // y had become a constant).
  Tensor x1 = tensor({1, 2}, {2});
  x1.requires_grad_();
  Tensor y1 = x1 * 2.0;
  zero_(y1);
  sum(y1).backward();
  check_close(x1.grad(), {0, 0});

  // y = 2x; y.copy_([5, 7]); sum(y * x) gives x.grad [5, 7].
  Tensor x2 = tensor({1, 2}, {2});
  x2.requires_grad_();
  Tensor y2 = x2 * 2.0;
  copy_(y2, tensor({5, 7}, {2}));
  check_close(y2, {5, 7});
  sum(y2 * x2).backward();
  check_close(x2.grad(), {5, 7});
  // Infinite values are overwritten, not multiplied by a zero mask.
  Tensor yi = x2 * std::numeric_limits<double>::infinity();
  copy_(yi, tensor({5, 7}, {2}));
  check_close(yi, {5, 7});
  fill_(yi, 4.0);
  check_close(yi, {4, 4});

  // y = 2x; a hook on y and y.retain_grad(), then y.fill_(3); sum(y * x):
  // the hook, on y's old history, sees [0, 0]; y.grad is x, [1, 2].
  Tensor x3 = tensor({1, 2}, {2});
  x3.requires_grad_();
  Tensor y3 = x3 * 2.0;
  std::vector<Tensor> seen;
  register_hook(y3, [&](const Tensor& g) {
    seen.push_back(g);
    return Tensor();
  });
  retain_grad(y3);
  fill_(y3, 3.0);
  sum(y3 * x3).backward();
  REQUIRE(seen.size() == 1);
  check_close(seen[0], {0, 0});
  check_close(y3.grad(), {1, 2});
}

TEST_CASE("copy_ from another dtype sends the gradient back in the source's dtype") {
  // PyTorch 1.13: a = zeros(2) (float32); a.copy_(w * 3) for a float64 w;
  // sum(a * a) gives w.grad [18, 36]. a's history once ended in a float64
  // node, so backward failed with a dtype error.
  Tensor w = tensor({1, 2}, {2}, DType::Float64);
  w.requires_grad_();
  Tensor a = zeros({2});
  copy_(a, w * 3.0);
  CHECK(a.dtype() == DType::Float32);
  sum(a * a).backward();
  CHECK(w.grad().dtype() == DType::Float64);
  check_close(w.grad(), {18, 36});

  // Into an int64 tensor the values are truncated and no history is kept.
  Tensor f = tensor({1.5, 2}, {2});
  f.requires_grad_();
  Tensor n = zeros({2}, DType::Int64);
  copy_(n, f * 1.0);
  CHECK(!n.requires_grad());
  CHECK(n.to_int_vector() == std::vector<int64_t>{1, 2});

  // int64 into int64 ran through add, which refuses int64: now exact and
  // broadcast, also from an overlapping view of the same tensor.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor m = zeros({2, 2}, DType::Int64);
  copy_(m, tensor_int({big, -big}, {2}));
  CHECK(m.to_int_vector() == std::vector<int64_t>{big, -big, big, -big});
  Tensor r = tensor_int({1, 2, 3}, {3});
  Tensor tail = narrow(r, 0, 1, 2);
  copy_(tail, narrow(r, 0, 0, 2));
  CHECK(r.to_int_vector() == std::vector<int64_t>{1, 1, 2});
  CHECK_THROWS_AS(copy_(n, tensor({std::nan(""), 1.0}, {2})), ValueError);
  CHECK_THROWS_AS(copy_(n, tensor_int({1, 2, 3}, {3})), ShapeError);
  CHECK(n.to_int_vector() == std::vector<int64_t>{1, 2});
}

TEST_CASE("in-place ops on views of a tensor that needs grad go through copy_slices, as PyTorch's CopySlices") {
  // PyTorch 1.13: y = 2x; y[:2].fill_(0); sum(y * y) gives x.grad [0, 0, 24, 32].
  Tensor x = tensor({1, 2, 3, 4}, {4});
  x.requires_grad_();
  Tensor y = x * 2.0;
  Tensor part = split(y, 2, 0)[0];
  fill_(part, 0.0);
  check_close(y, {0, 0, 6, 8});
  CHECK(y.impl().grad_fn->op == OpId::CopySlices);
  CHECK(part.requires_grad());
  sum(y * y).backward();
  check_close(x.grad(), {0, 0, 24, 32});

  // c = zeros(2, 3); c[:, 1].copy_(w); c.t()[2] += w; sum(c * [[1,2,3],[4,5,6]])
  // gives w.grad [2 + 3, 5 + 6]; the earlier view col follows c's history.
  Tensor w = tensor({1, 2}, {2});
  w.requires_grad_();
  Tensor c = zeros({2, 3});
  Tensor col = unbind(c, 1)[1];
  copy_(col, w);
  CHECK(c.requires_grad());
  Tensor ct = unbind(transpose(c, 0, 1), 0)[2];
  add_(ct, w);
  check_close(c, {0, 1, 1, 0, 2, 2});
  check_close(col, {1, 2});
  sum(c * tensor({1, 2, 3, 4, 5, 6}, {2, 3})).backward();
  check_close(w.grad(), {5, 11});

  // retain_grad before a write follows the written tensor (PyTorch 2): the
  // base retains its new value's gradient, and so does the view, whose new
  // value (a window of the base's new history) the loss does not use: no
  // .grad (PyTorch 1.13 and 2 agree on the view; once it kept the old one's).
  Tensor x3 = tensor({1, 2, 3, 4}, {2, 2});
  x3.requires_grad_();
  Tensor w3 = tensor({5}, {1});
  w3.requires_grad_();
  Tensor y3 = x3 * 1.0;
  Tensor v3 = narrow(y3, 0, 1, 1);
  retain_grad(y3);
  retain_grad(v3);
  mul_(v3, w3);
  sum(y3 * y3).backward();
  check_close(y3.grad(), {2, 4, 30, 40});
  CHECK(!v3.grad().defined());
  check_close(x3.grad(), {2, 4, 150, 200});

  // A view taken under no_grad has no history of its own: writing it in grad
  // mode is refused (PyTorch too), with a source that needs grad or not.
  Tensor x2 = tensor({1, 2, 3, 4}, {2, 2});
  x2.requires_grad_();
  Tensor y2 = x2 * 2.0;
  Tensor quiet;
  {
    NoGradGuard ng;
    quiet = narrow(y2, 0, 1, 1);
  }
  CHECK_THROWS_WITH_AS(mul_(quiet, w), doctest::Contains("mul_: a view was taken under no_grad of a tensor that "
                                                         "requires grad and is written in grad mode"),
                       ValueError);
  CHECK_THROWS_AS(mul_(quiet, 2.0), ValueError);
  check_close(y2, {2, 4, 6, 8});
  {
    NoGradGuard ng;
    mul_(quiet, 2.0);  // under no_grad, as torch
  }
  check_close(y2, {2, 4, 12, 16});

  // A view of a base that is not contiguous cannot be written with history
  // (the window of the base's gradient would not be the view's strides).
  Tensor w6 = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  w6.requires_grad_();
  Tensor base = make_view(zeros({2, 3}), {3, 2}, {1, 3}, 0);  // transposed, and no view
  base.impl().is_view = false;
  copy_(base, w6);
  CHECK(base.requires_grad());
  Tensor head = narrow(base, 0, 0, 1);
  CHECK_THROWS_WITH_AS(fill_(head, 1.0),
                       doctest::Contains("fill_: an in-place update that needs grad of a view of shape [1,2] of a base "
                                         "of shape [3,2] and strides [1,3] that is not contiguous"),
                       ValueError);
}

TEST_CASE("a reshape that copies and a detach are not views: in-place ops with grad work on them") {
  // PyTorch 1.13: neither y.t().reshape(6) nor c[:2].detach() is a view
  // (_is_view() is False), so both take an in-place op that records history.
  Tensor x = tensor({0, 1, 2, 3, 4, 5}, {2, 3});
  x.requires_grad_();
  Tensor r = reshape(transpose(x * 1.0, 0, 1), {6});  // not contiguous: reshape copies
  mul_(r, 2.0);
  sum(r).backward();
  check_close(x.grad(), {2, 2, 2, 2, 2, 2});

  Tensor c = tensor({1, 2, 3, 4}, {4});
  Tensor d = split(c, 2, 0)[0].detach();
  Tensor w = tensor({3, 5}, {2});
  w.requires_grad_();
  mul_(d, w);
  sum(d).backward();
  check_close(w.grad(), {1, 2});
  check_close(c, {3, 10, 3, 4});  // d still aliases c's storage
}

TEST_CASE("views taken before an in-place op on their base are re-based onto its new history") {
  // Expected values from PyTorch 1.13 (slices; PyTorch refuses split's views
  // here, whose re-based gradient is the same as a slice's).
  Tensor x = tensor({1, 2, 3, 4}, {4});
  x.requires_grad_();
  Tensor y = x * 1.0;
  Tensor part = split(y, 2, 0)[0];
  Tensor row = slice(y, 0, 2, 4);
  mul_(y, 3.0);
  check_close(part, {3, 6});
  (sum(part) + sum(row * 2.0)).backward();
  check_close(x.grad(), {3, 3, 6, 6});

  // A chain of views (view then transpose) re-bases onto the first base.
  Tensor x6 = tensor({1, 2, 3, 4, 5, 6}, {6});
  x6.requires_grad_();
  Tensor y6 = x6 * 1.0;
  Tensor v = transpose(view(y6, {2, 3}), 0, 1);
  add_(y6, x6 * x6);
  sum(v * reshape(arange(6.0), {3, 2})).backward();
  check_close(x6.grad(), {0, 10, 28, 9, 33, 65});

  // An in-place op under NoGradGuard gives no new history: the view keeps its own.
  Tensor x4 = tensor({1, 2, 3, 4}, {4});
  x4.requires_grad_();
  Tensor y4 = x4 * 1.0;
  Tensor tail = slice(y4, 0, 2, 4);
  {
    NoGradGuard ng;
    mul_(y4, 5.0);
  }
  sum(tail * 1.0).backward();
  check_close(x4.grad(), {0, 0, 1, 1});
}

TEST_CASE("a view of a constant that an in-place op made depend on w carries w's gradient") {
  // PyTorch 1.13: c = zeros(2); cv = c[1]; c.add_(w); (cv * 2).backward() gives w.grad [0, 2].
  Tensor w = tensor({1, 1}, {2});
  w.requires_grad_();
  Tensor c = zeros({2});
  Tensor cv = unbind(c, 0)[1];
  CHECK(!cv.requires_grad());
  add_(c, w);
  CHECK(cv.requires_grad());
  CHECK(!cv.is_leaf());
  (cv * 2.0).backward();
  check_close(w.grad(), {0, 2});

  // Overwritten by a constant, the view stays in the graph (PyTorch 1.13:
  // tail is [7, 7] with a grad_fn, and its gradient reaches x as zeros).
  Tensor x = tensor({1, 2, 3, 4}, {4});
  x.requires_grad_();
  Tensor y = x * 1.0;
  Tensor tail = slice(y, 0, 2, 4);
  fill_(y, 7.0);
  CHECK(tail.requires_grad());
  check_close(tail, {7, 7});
  sum(tail).backward();
  check_close(x.grad(), {0, 0, 0, 0});

  // A detached alias is a constant by definition.
  Tensor d = y.detach();
  Tensor dv = slice(d, 0, 0, 2);
  mul_(y, sum(w));
  CHECK(!dv.requires_grad());
}

TEST_CASE("a broadcast view taken before an in-place op on its base is refused, not re-based wrongly") {
  Tensor x = tensor({1, 2}, {2, 1});
  x.requires_grad_();
  Tensor y = x * 1.0;
  Tensor e = expand(y, {2, 3});
  mul_(y, 2.0);
  CHECK_THROWS_WITH_AS(sum(e), doctest::Contains("broadcast view of shape [2,3]"), ValueError);
}

TEST_CASE("an op taking two stale views of one base re-bases both before it records itself") {
  // PyTorch 1.13 (slices): y = x * 1; a = y[0:2]; b = y[2:4]; y.add_(x * x);
  // sum(a * b) gives x.grad [36, 100, 14, 54]. b's re-base once came after
  // the mul's node, so backward ran it first and b's gradient was lost.
  Tensor x = tensor({1, 2, 3, 4}, {4});
  x.requires_grad_();
  Tensor y = x * 1.0;
  Tensor a = slice(y, 0, 0, 2), b = slice(y, 0, 2, 4);
  add_(y, x * x);
  sum(a * b).backward();
  check_close(x.grad(), {36, 100, 14, 54});

  // The same with unbind's views (PyTorch refuses them; the gradient is the
  // slices') and with cat of the two.
  Tensor x2 = tensor({1, 2, 3, 4}, {2, 2});
  x2.requires_grad_();
  Tensor y2 = x2 * 1.0;
  std::vector<Tensor> rows = unbind(y2, 0);
  add_(y2, x2 * x2);
  sum(rows[0] * rows[1]).backward();
  check_close(x2.grad(), {36, 100, 14, 54});

  Tensor x3 = tensor({1, 2, 3, 4}, {4});
  x3.requires_grad_();
  Tensor y3 = x3 * 1.0;
  Tensor a3 = slice(y3, 0, 0, 2), b3 = slice(y3, 0, 2, 4);
  add_(y3, x3 * x3);
  sum(cat({a3, b3}, 0)).backward();
  check_close(x3.grad(), {3, 5, 7, 9});
}

namespace {

// out = in, recorded as a custom op whose backward writes its gradient into
// input_grad_buffer and notes whether that buffer held a pending gradient.
Tensor identity_into_buffer(const Tensor& in, std::vector<bool>& accumulated) {
  const OpRange range(OpId::Custom);
  Tensor out = empty(in.shape());
  copy_data(out, in);
  record(OpId::Custom, {in}, {out}, {}, [&accumulated](const Node& n, const std::vector<Tensor>& g) {
    GradBuffer b = input_grad_buffer(n, 0);
    accumulated.push_back(b.accumulate);
    Tensor go = contiguous(g[0]);
    float* dst = b.grad.data<float>();
    const float* src = go.data<float>();
    for (int64_t i = 0; i < go.numel(); ++i) dst[i] = b.accumulate ? dst[i] + src[i] : src[i];
    return std::vector<Tensor>{b.grad};
  });
  return out;
}

}  // namespace

TEST_CASE("input_grad_buffer: a backward adds into the gradient the engine holds for its input") {
  // s feeds the custom op and, later, s * 3: backward runs the mul first, so
  // the custom op finds s's gradient pending and adds to it (counted once).
  Tensor x = tensor({1, 2, 3}, {3});
  x.requires_grad_();
  Tensor s = x * 1.0;
  std::vector<bool> accumulated;
  Tensor y = identity_into_buffer(s, accumulated);
  Tensor z = s * 3.0;
  (sum(y * tensor({1, 10, 100}, {3})) + sum(z)).backward();
  REQUIRE(accumulated.size() == 1);
  CHECK(accumulated[0]);
  check_close(x.grad(), {4, 13, 103});

  // Made last, the custom op runs first: nothing is pending, it writes in full.
  Tensor x2 = tensor({1, 2, 3}, {3});
  x2.requires_grad_();
  Tensor s2 = x2 * 1.0;
  Tensor z2 = s2 * 3.0;
  std::vector<bool> accumulated2;
  Tensor y2 = identity_into_buffer(s2, accumulated2);
  (sum(y2 * tensor({1, 10, 100}, {3})) + sum(z2)).backward();
  REQUIRE(accumulated2.size() == 1);
  CHECK(!accumulated2[0]);
  check_close(x2.grad(), {4, 13, 103});

  // A leaf input never gets the engine's buffer.
  Tensor x3 = tensor({1, 2}, {2});
  x3.requires_grad_();
  std::vector<bool> accumulated3;
  Tensor y3 = identity_into_buffer(x3, accumulated3);
  (sum(y3) + sum(x3 * 2.0)).backward();
  REQUIRE(accumulated3.size() == 1);
  CHECK(!accumulated3[0]);
  check_close(x3.grad(), {3, 3});
}

TEST_CASE("detach and NoGradGuard stop recording") {
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor d = x.detach();
  CHECK(!d.requires_grad());
  {
    NoGradGuard g;
    Tensor y = x * 2.0;
    CHECK(!y.requires_grad());
  }
  CHECK((x * 2.0).requires_grad());
}

TEST_CASE("accumulate_grad rejects a gradient of the wrong shape or dtype") {
  Tensor leaf = zeros({2, 3});
  leaf.requires_grad_();
  CHECK_THROWS_AS(accumulate_grad(leaf.impl(), zeros({3, 2}), "test"), ShapeError);
  CHECK_THROWS_AS(accumulate_grad(leaf.impl(), zeros({2, 3}, DType::Float64), "test"), DtypeError);
  accumulate_grad(leaf.impl(), ones({2, 3}), "test");
  accumulate_grad(leaf.impl(), ones({2, 3}), "test");
  check_close(leaf.grad(), std::vector<double>(6, 2.0));
}

TEST_CASE("anomaly mode names the op that produced NaN") {
  AnomalyModeGuard anomaly;
  Tensor x = tensor({-1.0}, {1});
  x.requires_grad_();
  try {
    Tensor y = sqrt(x);
    FAIL("expected an anomaly error");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()).find("sqrt") != std::string::npos);
  }
}

TEST_CASE("a re-base that anomaly mode refuses under NoGradGuard leaves grad mode off") {
  // The re-base records with grad mode on; its NaN error once left it on, so
  // later ops inside the guard recorded.
  Tensor x = tensor({1, NAN, 3, 4}, {4});
  x.requires_grad_();
  Tensor y = x * 1.0;
  Tensor head = slice(y, 0, 0, 2);
  add_(y, 1.0);
  AnomalyModeGuard anomaly;
  NoGradGuard no_grad;
  CHECK_THROWS_WITH_AS(head.requires_grad(), doctest::Contains("slice"), ValueError);
  CHECK(!grad_enabled());
  CHECK(!(x * 2.0).requires_grad());
}

TEST_CASE("anomaly mode lets a -inf mask through and catches an Inf gradient, naming the op") {
  AnomalyModeGuard anomaly;
  // A causal-style mask: -inf outputs are meant, and softmax turns them into 0.
  Tensor x = tensor({1.0, 2.0}, {1, 2});
  x.requires_grad_();
  Tensor p = softmax(masked_fill(x, tensor({0.0, 1.0}, {2}), -INFINITY), -1);
  check_close(p, {1.0, 0.0});
  sum(p).backward();
  // d sqrt(z) / dz at z = 0 is Inf: the gradient check names sqrt's node.
  Tensor z = zeros({1});
  z.requires_grad_();
  Tensor s = sqrt(z);
  try {
    s.backward(ones({1}));
    FAIL("expected an anomaly error");
  } catch (const ValueError& e) {
    const std::string m = e.what();
    CHECK(m.find("the gradient that sqrt (node #") != std::string::npos);
    CHECK(m.find("has Inf") != std::string::npos);
  }
}

TEST_CASE("backward of a long chain is iterative: 200,000 nodes, no stack overflow") {
  Tensor x = tensor({1.0}, {1});
  x.requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = y * 1.0;
  y.backward();
  check_close(x.grad(), {1.0});
  int64_t before = live_node_count();
  {
    Tensor z = x;
    for (int i = 0; i < 200000; ++i) z = z + 0.0;
  }  // dropped without backward: freed iteratively too
  CHECK(live_node_count() == before);
  {
    // copy_slices nodes reach their parent twice (the base's old history and
    // the re-based view's slice): the free once recursed per node and
    // overflowed the stack near 25,000 writes.
    Tensor w = x * 1.0;
    Tensor b = zeros({7, 3}) + w;
    for (int i = 0; i < 100000; ++i) {
      Tensor row = narrow(b, 0, i % 7, 1);
      add_(row, 1.0);
    }
  }
  CHECK(live_node_count() == before);
}

TEST_CASE("shape errors print both shapes") {
  try {
    matmul(zeros({4, 3}), zeros({5, 2}));
    FAIL("expected ShapeError");
  } catch (const ShapeError& e) {
    std::string m = e.what();
    CHECK(m.find("[4,3]") != std::string::npos);
    CHECK(m.find("[5,2]") != std::string::npos);
  }
  CHECK_THROWS_AS(add(zeros({2, 3}), zeros({4})), ShapeError);
  CHECK_THROWS_AS(add(zeros({2}), zeros({2}, DType::Float64)), DtypeError);
}

TEST_CASE("seeded RNG is reproducible") {
  Generator g1(42), g2(42);
  CHECK(randn({8}, 0, 1, DType::Float32, g1).to_vector() == randn({8}, 0, 1, DType::Float32, g2).to_vector());
  Generator g3(43);
  CHECK(rand({8}, 0, 1, DType::Float32, g1).to_vector() != rand({8}, 0, 1, DType::Float32, g3).to_vector());
}

TEST_CASE("an op may save an undefined tensor (an optional input)") {
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor y = x * 2.0;
  record(OpId::MulScalar, {x}, {y}, {Tensor(), x}, [](const Node& n, const std::vector<Tensor>& g) {
    CHECK(!n.saved_tensor(0).defined());
    return std::vector<Tensor>{g[0] * 3.0};
  });
  sum(y).backward();
  check_close(x.grad(), {3, 3});
}

TEST_CASE("post-accumulate-grad hooks run once per leaf as soon as its gradient is complete") {
  Tensor x = tensor({1.0, 2.0}, {2});
  Tensor w = tensor({5.0, 7.0}, {2});
  Tensor unused = tensor({1.0}, {1});
  x.requires_grad_();
  w.requires_grad_();
  unused.requires_grad_();
  std::vector<std::string> calls;
  std::vector<double> w_grad_then;
  bool x_grad_defined_then = true;
  const uint64_t hx = register_post_accumulate_grad_hook(x, [&calls](const Tensor& t) {
    calls.push_back("x");
    check_close(t.grad(), {2 + 3 * 5.0, 2 + 3 * 7.0});  // both paths are in
  });
  const uint64_t hw = register_post_accumulate_grad_hook(w, [&](const Tensor& t) {
    calls.push_back("w");
    w_grad_then = t.grad().to_vector();
    x_grad_defined_then = x.grad().defined();
  });
  const uint64_t hu = register_post_accumulate_grad_hook(unused, [&calls](const Tensor&) { calls.push_back("unused"); });
  // x * 2 is recorded first, so x's last edge is processed last: w's hook runs
  // while x's gradient is still being computed.
  Tensor first = sum(x * 2.0);
  Tensor loss = first + sum((x * 3.0) * w);
  loss.backward();
  CHECK(calls == std::vector<std::string>{"w", "x"});
  CHECK(w_grad_then == std::vector<double>{3, 6});
  CHECK_FALSE(x_grad_defined_then);

  remove_post_accumulate_grad_hook(hw);
  remove_post_accumulate_grad_hook(hx);
  remove_post_accumulate_grad_hook(hw);  // twice is harmless
  calls.clear();
  sum(x * w).backward();
  CHECK(calls.empty());
  unused.backward();  // a leaf root runs its hooks too
  CHECK(calls == std::vector<std::string>{"unused"});
  remove_post_accumulate_grad_hook(hu);
  CHECK_THROWS_AS(register_post_accumulate_grad_hook(loss, [](const Tensor&) {}), ValueError);
}

TEST_CASE("register_hook on a leaf sees its gradient summed over every use, once, and may replace it") {
  Tensor x = tensor({1.0, 2.0}, {2});
  x.requires_grad_();
  std::vector<std::vector<double>> seen;
  const uint64_t id = register_hook(x, [&seen](const Tensor& g) {
    seen.push_back(g.to_vector());
    return g * 10.0;
  });
  std::vector<double> grad_when_post_hook_ran;
  const uint64_t post = register_post_accumulate_grad_hook(
      x, [&](const Tensor& t) { grad_when_post_hook_ran = t.grad().to_vector(); });
  sum(x * 2.0 + (x * x) * 3.0).backward();  // d/dx = 2 + 6x: three edges into x
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{8, 14});
  check_close(x.grad(), {80, 140});
  CHECK(grad_when_post_hook_ran == std::vector<double>{80, 140});  // after the hook's replacement
  remove_post_accumulate_grad_hook(post);

  // The leaf as the root: its hook sees the seed.
  x.zero_grad();
  x.backward(tensor({1.0, -1.0}, {2}));
  check_close(x.grad(), {10, -10});

  remove_hook(id);
  remove_hook(id);  // twice is harmless
  x.zero_grad();
  sum(x * 2.0).backward();
  CHECK(seen.size() == 2);
  check_close(x.grad(), {2, 2});
}

TEST_CASE("register_hook on a non-leaf changes the gradient its grad_fn differentiates with") {
  Tensor x = tensor({1.0, 2.0}, {2});
  x.requires_grad_();
  Tensor h = x * x;
  std::vector<std::string> calls;
  register_hook(h, [&calls](const Tensor& g) {
    calls.push_back("first");
    check_close(g, {8, 8});  // (3 + 1) x 2: both uses of h, after the root's hook
    return g + 1.0;
  });
  register_hook(h, [&calls](const Tensor& g) {
    calls.push_back("second");
    check_close(g, {9, 9});  // what the first returned
    return Tensor();         // keeps it
  });
  Tensor loss = sum(h * 3.0) + sum(h);
  register_hook(loss, [&calls](const Tensor& g) {  // the root's hook sees the seed
    calls.push_back("root");
    return g * 2.0;
  });
  loss.backward();
  CHECK(calls == std::vector<std::string>{"root", "first", "second"});
  check_close(x.grad(), {9 * 2 * 1.0, 9 * 2 * 2.0});  // 9 * dh/dx
}

TEST_CASE("a gradient hook that returns its input leaves every gradient as it was") {
  Generator gen(5);
  Tensor a = randn({3, 4}, 0, 1, DType::Float64, gen);
  Tensor b = randn({4, 2}, 0, 1, DType::Float64, gen);
  a.requires_grad_();
  b.requires_grad_();
  auto loss_of = [&] {
    Tensor h = tanh(matmul(a, b));
    return std::pair{h, sum(h * h) + sum(h * 3.0)};
  };
  auto [h0, plain] = loss_of();
  plain.backward();
  const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  a.zero_grad();
  b.zero_grad();
  auto [h1, hooked] = loss_of();
  int calls = 0;
  const auto same = [&calls](const Tensor& g) {
    ++calls;
    return g;
  };
  register_hook(h1, same);
  register_hook(a, same);
  register_hook(b, same);
  hooked.backward();
  CHECK(calls == 3);
  CHECK(a.grad().to_vector() == ga);
  CHECK(b.grad().to_vector() == gb);
}

TEST_CASE("retain_grad keeps a non-leaf's gradient, summed over backward calls, after its hooks") {
  Tensor x = tensor({1.0, 2.0}, {2});
  x.requires_grad_();
  Tensor h = x * 3.0;
  CHECK_FALSE(retains_grad(h));
  retain_grad(h);
  retain_grad(h);  // again: kept once
  CHECK(retains_grad(h));
  register_hook(h, [](const Tensor& g) { return g * 2.0; });
  Tensor loss = sum(h * h);
  loss.backward(Tensor(), /*retain_graph=*/true);
  check_close(h.grad(), {2 * 2 * 3.0, 2 * 2 * 6.0});  // 2h, doubled by the hook
  check_close(x.grad(), {36, 72});
  loss.backward();
  check_close(h.grad(), {24, 48});
  CHECK(retains_grad(h));  // also once backward has freed its graph
  // retain_grad follows the tensor through an in-place op: its .grad is the
  // gradient of the new value (PyTorch: 12, not the old value's 36).
  Tensor y = x * 2.0;
  retain_grad(y);
  mul_(y, 3.0);
  CHECK(retains_grad(y));
  sum(y * y).backward();  // y = 6x
  check_close(y.grad(), {12, 24});
  // A leaf keeps its gradient already; retains_grad says so as PyTorch's.
  retain_grad(x);
  CHECK_FALSE(retains_grad(x));
  Tensor c = tensor({1.0}, {1});
  CHECK_THROWS_WITH_AS(retain_grad(c), doctest::Contains("does not require grad"), ValueError);
}

TEST_CASE("gradient hooks refuse bad input with errors that name register_hook") {
  Tensor x = tensor({1.0, 2.0}, {2});
  CHECK_THROWS_WITH_AS(register_hook(x, [](const Tensor& g) { return g; }),
                       doctest::Contains("register_hook: cannot register a hook on a tensor that does not require grad"),
                       ValueError);
  x.requires_grad_();
  CHECK_THROWS_WITH_AS(register_hook(x, GradHook()), doctest::Contains("register_hook: expected a hook"), ValueError);
  const uint64_t wrong_shape = register_hook(x, [](const Tensor&) { return zeros({3}); });
  CHECK_THROWS_WITH_AS(sum(x * 2.0).backward(), doctest::Contains("register_hook: a hook returned a gradient of shape [3] for a tensor of shape [2]"),
                       ValueError);
  CHECK_FALSE(x.grad().defined());
  remove_hook(wrong_shape);
  const uint64_t wrong_dtype = register_hook(x, [](const Tensor&) { return zeros({2}, DType::Float64); });
  CHECK_THROWS_WITH_AS(sum(x * 2.0).backward(), doctest::Contains("a hook returned a float64 gradient for a tensor of dtype float32"),
                       ValueError);
  remove_hook(wrong_dtype);
  const uint64_t throws = register_hook(x, [](const Tensor&) -> Tensor { throw std::runtime_error("from the hook"); });
  CHECK_THROWS_WITH_AS(sum(x * 2.0).backward(), "from the hook", std::runtime_error);
  remove_hook(throws);
  sum(x * 2.0).backward();
  check_close(x.grad(), {2, 2});
}

TEST_CASE("a non-leaf's gradient hooks go with its graph") {
  Tensor x = tensor({1.0, 2.0}, {2});
  x.requires_grad_();
  int calls = 0;
  Tensor h = x * 2.0;
  register_hook(h, [&calls](const Tensor& g) {
    ++calls;
    return g;
  });
  sum(h).backward();
  CHECK(calls == 1);
  // The graph is freed: a new graph's nodes never see the old hook, even at
  // a reused address.
  for (int i = 0; i < 100; ++i) sum(x * 2.0).backward();
  CHECK(calls == 1);
}

TEST_CASE("hooks of tensors that died are dropped as the registry grows, and never called") {
  int dead_calls = 0;
  for (int i = 0; i < 300; ++i) {
    Tensor t = tensor({1.0}, {1});
    t.requires_grad_();
    register_hook(t, [&dead_calls](const Tensor& g) {
      ++dead_calls;
      return g;
    });
  }
  Tensor x = tensor({1.0}, {1});
  x.requires_grad_();
  int calls = 0;
  const uint64_t id = register_hook(x, [&calls](const Tensor& g) {
    ++calls;
    return g * 3.0;
  });
  sum(x * 2.0).backward();
  CHECK(calls == 1);
  CHECK(dead_calls == 0);
  check_close(x.grad(), {6});
  remove_hook(id);
}

TEST_CASE("a product or quotient by a constant saves nothing of the other operand") {
  // As PyTorch: y * c and y / c keep no copy of y, so an in-place op on y
  // afterwards leaves their backward intact; y * w still saves y for w.
  Tensor x = tensor({1.0, 2.0}, {2});
  x.requires_grad_();
  Tensor y = x * 2.0;
  Tensor c = tensor({3.0, 4.0}, {2});
  Tensor prod = mul(y, c);
  Tensor quot = div(y, c);
  add_(y, 1.0);
  sum(prod + quot).backward();
  check_close(x.grad(), {2 * (3.0 + 1 / 3.0), 2 * (4.0 + 1 / 4.0)});
  Tensor w = tensor({1.0, 1.0}, {2});
  w.requires_grad_();
  Tensor z = x * 2.0;
  Tensor zw = mul(z, w);
  add_(z, 1.0);
  CHECK_THROWS_WITH_AS(sum(zw).backward(), doctest::Contains("modified in place"), ValueError);
}

TEST_CASE("post-accumulate-grad hooks of leaves that died are dropped as the registry grows") {
  int dead_calls = 0;
  for (int i = 0; i < 300; ++i) {
    Tensor t = tensor({1.0}, {1});
    t.requires_grad_();
    register_post_accumulate_grad_hook(t, [&dead_calls](const Tensor&) { ++dead_calls; });
  }
  Tensor x = tensor({2.0}, {1});
  x.requires_grad_();
  std::vector<double> seen;
  const uint64_t id = register_post_accumulate_grad_hook(x, [&seen](const Tensor& t) { seen = t.grad().to_vector(); });
  sum(x * 3.0).backward();
  CHECK(seen == std::vector<double>{3});
  CHECK(dead_calls == 0);
  remove_post_accumulate_grad_hook(id);
}

TEST_CASE("grad gives the root's gradients for leaves and intermediates without touching .grad") {
  Tensor x = tensor({1, 2, 3}, {3}).requires_grad_();
  Tensor w = tensor({0.5, -1, 2}, {3}).requires_grad_();
  Tensor h = mul(x, w);                      // dh/dx = w
  Tensor root = sum(mul(h, h));              // d/dh = 2h, d/dx = 2 h w
  const std::vector<Tensor> g = grad(root, {x, h, x}, Tensor(), /*retain_graph=*/true);
  check_close(g[0], {2 * 0.5 * 0.5, 2 * 2 * 1, 2 * 6 * 2});
  check_close(g[1], {1, -4, 12});
  check_close(g[2], {0.5, 4, 24});           // an input named twice gets its gradient twice
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  Tensor unused = tensor({1.0}, {1}).requires_grad_();
  CHECK_THROWS_WITH_AS(grad(root, {unused}, Tensor(), true),
                       "grad: input 0 was not used to compute the root, so it has no gradient; pass "
                       "allow_unused=true to get an undefined tensor (None) for it",
                       ValueError);
  CHECK_FALSE(grad(root, {unused}, Tensor(), true, /*allow_unused=*/true)[0].defined());
  CHECK_THROWS_WITH_AS(grad(root, {tensor({1.0}, {1})}), "grad: input 0 does not require grad, so it has no gradient",
                       ValueError);
  // A leaf's hook runs for backward, not for grad (its .grad is not written).
  int calls = 0;
  register_hook(x, [&calls](const Tensor& gx) { ++calls; return gx; });
  grad(root, {w});  // frees the graph
  CHECK(calls == 0);
  CHECK_THROWS_AS(grad(root, {w}), ValueError);
}
