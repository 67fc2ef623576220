# Sourced by tools/gpu_check.sh and tools/gpu_frontier.sh on the GPU machine:
# unpacks the bundle $PREBUILT (tools/gpu_bundle.sh) into a fresh folder,
# installs its Open MPI and libraries without replacing any file there, finds
# CUDA's libraries, and sets BUILD (the bundle's build folder) and MPIRUN.
# Returns non-zero, naming the fault, when the bundle cannot be used.
unpack_prebuilt() {
  BUILD=$(mktemp -d)
  tar -xzf "$PREBUILT" -C "$BUILD" ||
    { echo "FAILED: PREBUILT=$PREBUILT is not a bundle of tools/gpu_bundle.sh"; return 1; }
  # Open MPI and the libraries, at their paths, replacing nothing there.
  cp -rn "$BUILD/root/." / && ldconfig
  # CUDA's libraries (cuBLAS, NCCL) from this machine's toolkit or its PyTorch.
  local cuda_dirs src
  cuda_dirs=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/lib /opt \
    \( -name 'libcublas.so.*' -o -name 'libnccl.so.2' \) -printf '%h\n' 2>/dev/null | sort -u | tr '\n' :)
  export LD_LIBRARY_PATH="${cuda_dirs}${LD_LIBRARY_PATH:-}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  MPIRUN=/usr/bin/orterun
  src=$(cat "$BUILD/source_dir")
  [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
  BUILD=$BUILD/build
}
