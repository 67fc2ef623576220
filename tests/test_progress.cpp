// tools/progress.h: the ETA of a run of several parts (RunEta). Times are
// given, not measured, and are binary fractions, so the sums are exact.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "test_util.h"

#include "tmem/core/error.h"
#include "tmem/tools/progress.h"

using tmem::tools::RunEta;
using tmem::tools::progress_eta;

namespace {

// What f prints on stdout and stderr (file descriptors 1 and 2, one file), read back.
std::string output_of(const std::function<void()>& f) {
  // One file per process: ctest runs this file's cases side by side.
  const std::string path = tmem::test::tmp_path("tmem_progress_output_" + std::to_string(getpid()) + ".txt");
  std::fflush(stdout);
  std::fflush(stderr);
  const int out = dup(1), err = dup(2), fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE((out >= 0 && err >= 0 && fd >= 0));
  dup2(fd, 1);
  dup2(fd, 2);
  close(fd);
  f();
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(out, 1);
  dup2(err, 2);
  close(out);
  close(err);
  const std::string text = tmem::test::read_all(path);
  std::remove(path.c_str());
  return text;
}

}  // namespace

TEST_CASE("end_progress_line ends the line a terminal's progress left open, once, and only then") {
  using tmem::tools::end_progress_line;
  using tmem::tools::print_progress_line;
  // An error after step 1 of 3 once followed the progress line on the same line.
  CHECK(output_of([] {
          print_progress_line("base", "step", 1, 3, "loss 1.0", 2.0, true, 10);
          end_progress_line();
          end_progress_line();
        }) == "\rbase [######..............] step 1/3  loss 1.0  ETA 0:04\n");
  CHECK(output_of([] {
          print_progress_line("base", "step", 3, 3, "loss 1.0", 2.0, true, 10);
          end_progress_line();
        }) == "\rbase [####################] step 3/3  loss 1.0  ETA 0:00\n");
  CHECK(output_of([] {
          print_progress_line("base", "step", 1, 3, "loss 1.0", 2.0, false, 3);
          end_progress_line();
        }) == "base [######..............] step 1/3  loss 1.0  ETA 0:04\n");
}

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

TEST_CASE("RunEta: the ETA is a guess while a later part's kind has not been timed, and the line says so") {
  RunEta eta({{"base", 3}, {"base", 3}, {"tensor", 3}});
  CHECK(eta.guessed());  // tensor counted at base's time per step
  CHECK(output_of([&] { print_progress_line("base", "step", 1, 3, "loss 1.0", 2.0, false, 3, &eta); }) ==
        "base [######..............] step 1/3  loss 1.0  ETA ~0:16\n");
  eta.finish(3, 6);
  CHECK(eta.guessed());
  eta.finish(3, 6);
  CHECK(!eta.guessed());  // the current part is the only tensor one: its own time
  CHECK(output_of([&] { print_progress_line("tensor", "step", 1, 3, "loss 1.0", 5.0, false, 3, &eta); }) ==
        "tensor [######..............] step 1/3  loss 1.0  ETA 0:10\n");
  RunEta same({{"a", 2}, {"a", 2}});
  CHECK(!same.guessed());  // one kind: its current rate is measured
}

TEST_CASE("RunEta: an untimed kind counts at the current part's rate scaled by their costs") {
  // base at 0.5 s per step; tensor (cost 7, base 1) untimed: 7 * 0.5 s per step.
  RunEta eta({{"base", 100, 1.0}, {"tensor", 100, 7.0}, {"base", 40, 1.0}});
  CHECK(eta.seconds_left(60, 0.5) == 60 * 0.5 + 100 * 3.5 + 40 * 0.5);
  eta.finish(100, 50);
  // Now tensor is current at its measured 2 s per step; base is timed at 0.5.
  CHECK(eta.seconds_left(10, 2) == 10 * 2 + 40 * 0.5);
  RunEta reverse({{"tensor", 10, 7.0}, {"base", 70, 1.0}});
  CHECK(reverse.seconds_left(10, 3.5) == 10 * 3.5 + 70 * 0.5);
}

TEST_CASE("RunEta: a kind's time per step is its finished parts' seconds over their steps") {
  RunEta eta({{"a", 10}, {"a", 10}, {"b", 8}, {"a", 10}});
  eta.finish(10, 2.5);
  eta.finish(30, 12.5);  // a resumed part counts every step it trained: a is now 15 s / 40 steps
  CHECK(eta.seconds_left(2, 1) == 2 * 1 + 10 * (15.0 / 40));
}

TEST_CASE("progress_eta: the time per step of this invocation's steps, also after a resume") {
  // 100 of 400 steps in 50 s from step 0: 0.5 s per step, 300 left.
  CHECK(progress_eta(100, 400, 50, 0, nullptr) == 150);
  // Resumed at step 300: 20 s for its 40 steps, 60 left at 0.5 s each (not 20 s / 340 steps).
  CHECK(progress_eta(340, 400, 20, 300, nullptr) == 30);
  CHECK(progress_eta(300, 400, 0, 300, nullptr) == 0);  // no step of this invocation yet
  RunEta eta({{"a", 400}, {"b", 100}});
  CHECK(progress_eta(340, 400, 20, 300, &eta) == 60 * 0.5 + 100 * 0.5);
}
