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
