#!/usr/bin/env bash
# The sanitizer job of CI (.ci/run runs it after the main suite): the whole
# test suite built with AddressSanitizer and UBSan (any report fails the
# test), plus the libFuzzer targets of tests/fuzz run for a fixed number of
# inputs from their seed corpus. A smaller build than the main one: clang
# (libFuzzer needs it), CUDA off, -O1, no Python module or benchmarks. The
# MPI tests run each rank through tests/sanitized_rank.sh, which suppresses
# the leaks of Open MPI's own allocations (tools/lsan_mpi.supp).
# Usage: bash tools/sanitize.sh   (build folder build-san)
set -euo pipefail
cd "$(dirname "$0")/.."

cxx=$(command -v clang++-15 || command -v clang++ || true)
if [[ -z $cxx ]]; then
  echo "sanitize: clang is not installed (bash tools/setup.sh installs clang and libfuzzer-15-dev)" >&2
  exit 1
fi
cmake -S . -B build-san -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g" \
  -DTMEM_SANITIZE=ON -DTMEM_FUZZ=ON -DTMEM_CUDA=OFF -DTMEM_MPI=AUTO \
  -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
cmake --build build-san -j2
# Leaks are reported too; halt_on_error makes the first report fail its test.
# allocator_may_return_null: a too-large allocation fails as it does without
# ASan (tests check the error), instead of ASan stopping the program.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [[ -x /usr/bin/llvm-symbolizer ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer; fi
# The examples that train to an accuracy target (mlp, char_lm) take three
# minutes under ASan and run no library code the unit tests do not; the main
# suite runs them.
ctest --test-dir build-san --output-on-failure -j2 -E '^example_(mlp|char_lm)$'
