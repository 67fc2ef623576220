#!/usr/bin/env bash
# Installs tmem's build and test dependencies from Debian packages.
# Usage: bash tools/setup.sh            (as root, or with sudo available)
# Set TMEM_SETUP_TORCH=1 to also install python3-torch and python3-skimage
# (only needed to regenerate the fixtures with tools/make_fixtures.py and to
# run the PyTorch peers of `tmem bench`).
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config
          libxtensor-dev libxsimd-dev doctest-dev nlohmann-json3-dev zlib1g-dev
          libcli11-dev libfmt-dev libbenchmark-dev libopenblas-dev dataset-fashion-mnist
          pybind11-dev python3-dev python3-numpy
          clang libfuzzer-15-dev libomp-15-dev
          openmpi-bin libopenmpi-dev)
if [[ "${TMEM_SETUP_TORCH:-0}" == 1 ]]; then packages+=(python3-torch python3-skimage); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
