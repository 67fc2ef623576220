#!/usr/bin/env bash
# A long fuzzing run by hand (docs/FUZZING.md): each libFuzzer target of
# tests/fuzz for SECONDS, one after another, from its committed seed corpus,
# with the sanitizer job's ASan/UBSan options. New inputs go to
# build-san/tests/fuzz/long/<target>/ (never into the corpus); a crash, leak
# or timeout input is written there as crash-*, leak-* or timeout-*. Prints
# one line per target (inputs run, coverage, what it found) for the table in
# docs/FUZZING.md.
# Usage: tools/fuzz.sh SECONDS [TARGET ...]   (targets: safetensors idx brown
# grad_dump config; default all). Needs build-san's fuzz targets:
#   bash tools/sanitize.sh, or the configure line of tools/sanitize.sh and
#   cmake --build build-san --target fuzz_safetensors fuzz_idx ...
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 || ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 SECONDS [safetensors|idx|brown|grad_dump|config ...]" >&2
  exit 2
fi
seconds=$1
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors idx brown grad_dump config)

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
if [[ -x /usr/bin/llvm-symbolizer ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer; fi

status=0
for t in "${targets[@]}"; do
  bin=build-san/tests/fuzz/fuzz_$t
  corpus=tests/fuzz/corpus/$t
  if [[ ! -x $bin || ! -d $corpus ]]; then
    echo "fuzz: no $bin or $corpus (build build-san's fuzz targets first; see the usage)" >&2
    exit 1
  fi
  out=build-san/tests/fuzz/long/$t
  mkdir -p "$out"
  log=$out.log
  rc=0
  "$bin" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$out/" "$out" "$corpus" > "$log" 2>&1 || rc=$?
  # libFuzzer's last status line: "#<runs> DONE cov: <edges> ft: <features> corp: <n>/<size> ..."
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  found=$(find "$out" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  echo "fuzz_$t: ${seconds} s, exit $rc, ${done_line:-no DONE line (see $log)}, findings $found"
  [[ $rc -eq 0 && $found -eq 0 ]] || status=1
done
exit $status
