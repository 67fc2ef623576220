// embedding (ops/embedding.cpp): the gathered rows, the scatter-added
// gradient, and index errors.
#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::check_throws_with;

TEST_CASE("embedding: rows are gathered and the gradient is scatter-added") {
  Tensor w = tensor({0, 1, 10, 11, 20, 21}, {3, 2});
  w.requires_grad_();
  Tensor out = embedding(w, tensor_int({2, 0, 2, 2}, {2, 2}));
  CHECK(out.shape() == Shape{2, 2, 2});
  check_close(out, {20, 21, 0, 1, 20, 21, 20, 21});
  sum(mul(out, tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}))).backward();
  check_close(w.grad(), {3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8});
}

TEST_CASE("embedding: an index out of range or negative is an IndexError naming index and size") {
  Tensor w = zeros({3, 4});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({0, 999}, {2})); },
                                {"embedding", "999", "3 rows"});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({1, -1}, {1, 2})); },
                                {"embedding", "-1", "3 rows"});
  check_throws_with<IndexError>([&] { embedding(w, tensor_int({3}, {})); }, {"3 rows"});
  check_throws_with<DtypeError>([&] { embedding(w, tensor({0, 1}, {2})); }, {"embedding", "int64"});
  check_throws_with<ShapeError>([&] { embedding(zeros({12}), tensor_int({0}, {1})); },
                                {"embedding", "[12]", "[1]"});
}

TEST_CASE("embedding: the padding_idx row is read but gets no gradient, counted from the end when negative") {
  for (const int64_t pad : {int64_t{2}, int64_t{-1}}) {
    Tensor w = tensor({0, 1, 10, 11, 20, 21}, {3, 2});
    w.requires_grad_();
    Tensor out = embedding(w, tensor_int({2, 0, 2, 1}, {4}), pad);
    check_close(out, {20, 21, 0, 1, 20, 21, 10, 11});
    sum(mul(out, tensor({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}))).backward();
    check_close(w.grad(), {3, 4, 7, 8, 0, 0});
  }
  check_throws_with<ValueError>([] { embedding(zeros({3, 2}), tensor_int({0}, {1}), 3); },
                                {"embedding", "padding_idx 3", "3 rows"});
  check_throws_with<ValueError>([] { embedding(zeros({3, 2}), tensor_int({0}, {1}), -4); },
                                {"padding_idx -4"});
}
