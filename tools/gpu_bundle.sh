#!/usr/bin/env bash
# Packs a CUDA build of this machine for a GPU machine that has the CUDA
# toolkit but none of tmem's Debian dependencies (a bare image with no package
# registry): the programs tools/gpu_check.sh runs (stripped), the shared
# libraries they load beyond the C/C++ runtime and CUDA's own, and Open MPI's
# installed files with their libraries for the NCCL check. On the GPU machine,
# `PREBUILT=FILE.tgz bash tools/gpu_check.sh` runs from it instead of building.
#
#   bash tools/gpu_bundle.sh BUILD FILE.tgz
#
# BUILD must hold the targets gpu_check.sh builds (configure it with
# -DTMEM_CUDA=ON and a portable -march, e.g. -DTMEM_NATIVE=OFF
# -DCMAKE_CXX_FLAGS=-march=x86-64-v3: the GPU machine's processor may differ).
# FILE.tgz holds build/ (the programs), root/ (files for /, copied there
# without replacing any) and source_dir.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD FILE.tgz" >&2; exit 2; }
BUILD=$1 OUT_FILE=$(realpath -m "$2")
PROGRAMS=(tools/tmem tests/tmem_tests tests/tmem_cuda_tests tests/tmem_dist_tests bench/bench_cuda)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/build/tools" "$DIR/build/tests" "$DIR/build/bench" "$DIR/root"
for p in "${PROGRAMS[@]}"; do
  [ -x "$BUILD/$p" ] || { echo "gpu_bundle: $BUILD/$p is missing: build it first" >&2; exit 1; }
  strip -o "$DIR/build/$p" "$BUILD/$p"
done
# The source directory the build was configured from: test fixtures are found
# through it (TMEM_FIXTURE_DIR), so gpu_check.sh links it to the checkout there.
grep -m1 '^CMAKE_HOME_DIRECTORY:' "$BUILD/CMakeCache.txt" | cut -d= -f2 > "$DIR/source_dir"

# Libraries a program or Open MPI loads: everything ldd resolves except the C
# library, the C++ runtime (the GPU machine's own is as new or newer) and CUDA's
# libraries (the toolkit there provides them, matching its driver). Open MPI
# keeps its own paths (mpirun finds its plugins and help texts there).
skip='^(linux-vdso|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|ld-linux|libstdc\+\+|libgcc_s|libcuda\.so|libcublas|libcudart|libnccl)'
OMPI_FILES=$(dpkg -L libopenmpi3 openmpi-bin openmpi-common | grep -v '^/usr/share/doc/' |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
libs() { { ldd "$@" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'; }
{
  libs "${PROGRAMS[@]/#/$BUILD/}"
  # shellcheck disable=SC2086
  libs $(echo "$OMPI_FILES" | grep -E '\.so|/bin/')
} | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || echo "$path"
done > "$DIR/libs.txt"
# (/lib is /usr/lib on a merged-/usr system, and may be a link there.)
{ echo "$OMPI_FILES"; cat "$DIR/libs.txt"; } | sort -u | while read -r f; do
  to=$DIR/root${f/#\/lib\//\/usr\/lib\/}
  mkdir -p "$(dirname "$to")" && cp -L "$f" "$to"
done
tar -czf "$OUT_FILE.tmp" -C "$DIR" build root source_dir && mv "$OUT_FILE.tmp" "$OUT_FILE"
ls -la "$OUT_FILE"
