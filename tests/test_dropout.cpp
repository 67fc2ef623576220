// dropout (ops/dropout.cpp): inverted scaling, the seeded mask, eval mode,
// the p = 1 and bad-p cases.
#include <cmath>

#include "op_test_util.h"
#include "test_util.h"

using namespace tmem;
using tmem::test::check_close;
using tmem::test::check_throws_with;

TEST_CASE("dropout: inverted scaling, seeded mask, identity in eval, p = 1 gives zeros") {
  Tensor x = ones({100, 50});
  x.requires_grad_();
  Generator g1(5);
  Tensor y = dropout(x, 0.3, true, g1);
  std::vector<double> v = y.to_vector();
  int64_t kept = 0;
  for (double e : v) {
    CHECK((e == 0.0 || std::abs(e - 1.0 / 0.7) < 1e-6));
    kept += e != 0.0;
  }
  CHECK(std::abs(static_cast<double>(kept) / 5000.0 - 0.7) < 0.03);
  sum(y).backward();
  check_close(x.grad(), v);  // dx = mask
  Generator g2(5);
  CHECK(dropout(x, 0.3, true, g2).to_vector() == v);

  Tensor same = dropout(x, 0.3, false);
  CHECK(same.impl_ptr() == x.impl_ptr());
  CHECK(dropout(x, 0.0, true).impl_ptr() == x.impl_ptr());

  Tensor x1 = rand({4, 3});
  x1.requires_grad_();
  Tensor z = dropout(x1, 1.0, true);
  check_close(z, std::vector<double>(12, 0.0));
  sum(z).backward();
  check_close(x1.grad(), std::vector<double>(12, 0.0));
}

TEST_CASE("dropout: p outside [0, 1] is a ValueError") {
  check_throws_with<ValueError>([] { dropout(ones({3}), 1.5, true); }, {"dropout", "1.5"});
  check_throws_with<ValueError>([] { dropout(ones({3}), -0.1, false); }, {"dropout", "-0.1"});
}
