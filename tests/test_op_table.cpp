// Runs every gradcheck case of every op in the op table (ggml's
// test-backend-ops habit): "gradcheck: yes" in `tmem ops` means this ran.
#include "test_util.h"

using namespace tmem;

TEST_CASE("op table: every op in the enum is registered with a gradcheck case") {
  for (int i = 0; i < static_cast<int>(OpId::Count); ++i) {
    OpId id = static_cast<OpId>(i);
    if (id == OpId::Custom) continue;  // the ops of programs, not of tmem
    bool found = false;
    for (const OpInfo& info : op_table())
      if (info.id == id) {
        found = true;
        INFO("op " << op_name(id));
        CHECK(!info.cases.empty());
        CHECK(!info.devices.empty());
      }
    INFO("op " << op_name(id) << " is not registered");
    CHECK(found);
  }
}

TEST_CASE("op table: gradcheck of every registered case") {
  for (const OpInfo& info : op_table())
    for (const OpCase& c : info.cases) {
      SUBCASE((std::string(info.name()) + ": " + c.label).c_str()) {
        GradcheckResult r = gradcheck(c.fn, c.inputs(), c.eps, c.atol, c.rtol);
        INFO(info.name() << " / " << c.label << ": " << r.message);
        CHECK(r.ok);
      }
    }
}

TEST_CASE("gradcheck refuses an eps, atol or rtol that would decide its answer") {
  // eps 0 turned every numeric derivative into 0/0 and reported x * 2 as
  // wrong; atol = inf passed any gradient.
  Tensor x = tensor({1, 2}, {2}, DType::Float64).requires_grad_();
  auto f = [](const std::vector<Tensor>& v) { return mul(v[0], 2.0); };
  CHECK_THROWS_WITH_AS(gradcheck(f, {x}, 0.0),
                       "gradcheck: expected a finite eps > 0 and finite atol, rtol >= 0, but got eps 0 atol 1e-05 rtol 0.001",
                       ValueError);
  CHECK_THROWS_AS(gradcheck(f, {x}, -1e-6), ValueError);
  CHECK_THROWS_AS(gradcheck(f, {x}, NAN), ValueError);
  CHECK_THROWS_AS(gradcheck(f, {x}, 1e-6, INFINITY), ValueError);
  CHECK_THROWS_AS(gradcheck(f, {x}, 1e-6, 1e-5, -1.0), ValueError);
  CHECK_THROWS_WITH_AS(gradcheck([](const std::vector<Tensor>&) { return Tensor(); }, {x}),
                       "gradcheck: f returned an undefined tensor", ValueError);
  CHECK(gradcheck(f, {x}, 1e-6, 0.0, 1e-6).ok);
}
