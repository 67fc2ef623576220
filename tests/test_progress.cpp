// tools/progress.h: the ETA of a run of several parts (RunEta). Times are
// given, not measured, and are binary fractions, so the sums are exact.
#include <doctest/doctest.h>

#include "tmem/core/error.h"
#include "tmem/tools/progress.h"

using tmem::tools::RunEta;

TEST_CASE("RunEta: later parts at the time per step of their kind's finished parts, else the current part's") {
  RunEta eta({{"base", 100}, {"base", 100}, {"tensor", 100}, {"base", 40}});
  // Nothing finished: every part at the current part's 0.5 s per step.
  CHECK(eta.seconds_left(60, 0.5) == 60 * 0.5 + 100 * 0.5 + 100 * 0.5 + 40 * 0.5);
  CHECK(eta.seconds_left(100, 0) == 0);  // no step measured yet
  eta.finish(100, 25);                   // base: 0.25 s per step
  // The current base part at its own rate, tensor at the current rate (no
  // tensor part finished), the last base part at the finished base rate.
  CHECK(eta.seconds_left(50, 0.5) == 50 * 0.5 + 100 * 0.5 + 40 * 0.25);
  eta.finish(0, 0);  // reused from an earlier run: the base rate stays
  CHECK(eta.seconds_left(10, 2) == 10 * 2 + 40 * 0.25);
  eta.finish(100, 150);
  CHECK(eta.seconds_left(4, 0.5) == 4 * 0.5);
  eta.finish(40, 10);
  CHECK_THROWS_AS(eta.finish(1, 1), tmem::ValueError);
}

TEST_CASE("RunEta: a kind's time per step is its finished parts' seconds over their steps") {
  RunEta eta({{"a", 10}, {"a", 10}, {"b", 8}, {"a", 10}});
  eta.finish(10, 2.5);
  eta.finish(30, 12.5);  // a resumed part counts every step it trained: a is now 15 s / 40 steps
  CHECK(eta.seconds_left(2, 1) == 2 * 1 + 10 * (15.0 / 40));
}
