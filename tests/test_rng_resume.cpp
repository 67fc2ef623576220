// The generator state survives a checkpoint bit for bit, including a cached
// normal (an odd number of normal() calls), and so does a resumed run that
// draws an odd number of normals per step.
#include <bit>
#include <cstdio>
#include <filesystem>

#include "tmem/core/rng.h"
#include "tmem/models/trainer.h"
#include "test_util.h"

using namespace tmem;

TEST_CASE("rng: state after an odd number of normals restores bit for bit") {
  Generator g(7);
  for (int i = 0; i < 3; ++i) g.normal();  // a normal is now cached
  Generator r(0);
  r.set_state(g.state());
  for (int i = 0; i < 5; ++i) CHECK(std::bit_cast<uint64_t>(r.normal()) == std::bit_cast<uint64_t>(g.normal()));
  CHECK(r.next_u64() == g.next_u64());
}

TEST_CASE("rng: the older hexfloat form still restores, malformed text is a ValueError") {
  Generator g(3);
  g.normal();
  const std::string s = g.state();
  const std::string engine = s.substr(0, s.rfind(' '));
  Generator want(3);
  want.normal();
  const double cached = want.normal();
  char hex[64];
  std::snprintf(hex, sizeof hex, "%a", cached);
  Generator old(0);
  old.set_state(engine + " " + hex);
  CHECK(std::bit_cast<uint64_t>(old.normal()) == std::bit_cast<uint64_t>(cached));
  Generator bad(0);
  CHECK_THROWS_AS(bad.set_state(engine + " zz"), ValueError);
  CHECK_THROWS_AS(bad.set_state(engine), ValueError);
  CHECK_THROWS_AS(bad.set_state(s + " trailing"), ValueError);
  // 312 zero words and an index: a valid engine text whose engine draws only 0.
  std::string zeros;
  for (int i = 0; i < 312; ++i) zeros += "0 ";
  CHECK_THROWS_WITH_AS(bad.set_state(zeros + "312 0 0000000000000000"),
                       "Generator::set_state: the engine's 312 state words are all 0, a state that draws only 0",
                       ValueError);
  CHECK(bad.next_u64() == Generator(0).next_u64());  // the refused state left it as it was
}

TEST_CASE("rng: resume is bit-exact when a step draws an odd number of normals") {
  namespace fs = std::filesystem;
  models::TrainConfig c;  // coord-binding: 3 normals per query, 3 x 1 query = 9 per step
  c.model.method = models::BackboneMethod::base;
  c.model.dim = 16;
  c.model.layers = 1;
  c.model.heads = 2;
  c.task_cfg.W = 5;
  c.task_cfg.queries = 1;
  c.batch = 3;
  c.eval_batches = 1;
  c.steps = 10;
  c.run_dir = (fs::temp_directory_path() / "tmem_rng_resume_full").string();
  fs::remove_all(c.run_dir);
  const models::TrainResult full = models::train_diagnostic(c);
  models::TrainConfig half = c;
  half.run_dir = (fs::temp_directory_path() / "tmem_rng_resume_half").string();
  fs::remove_all(half.run_dir);
  half.steps = 5;  // 45 normals drawn: one is cached in the checkpoint
  models::train_diagnostic(half);
  half.steps = 10;
  half.resume = true;
  const models::TrainResult resumed = models::train_diagnostic(half);
  REQUIRE(resumed.losses.size() == full.losses.size());
  for (size_t i = 0; i < full.losses.size(); ++i) CHECK(resumed.losses[i] == full.losses[i]);
  fs::remove_all(c.run_dir);
  fs::remove_all(half.run_dir);
}
