#!/usr/bin/env bash
# One device call (bench/README.md): build forge and its runtime against the GPU
# machine's torch, capture the four model families of bench/gpu/forge.yaml, time
# each model plain and with the capture library loaded, print a table last and
# write JSON to $OUT (or /tmp/forge-out).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/forge-out}
mkdir -p "$OUT"

# libgit2 is missing there: Debian's packages, carried in .debs/, unpacked off /.
if ! pkg-config --exists libgit2 2>/dev/null; then
  mkdir -p /tmp/git2
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/git2; done
  lib=/tmp/git2/usr/lib/x86_64-linux-gnu
  # Only static linking needs its private requirements, whose .pc files are absent there.
  sed -i '/^Requires.private/d' $lib/pkgconfig/libgit2.pc
  export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=/tmp/git2
  export LDFLAGS="-Wl,-rpath-link,$lib" LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-}
fi
# The model commands say `python`; the machine has python3 (a venv's: a symlink
# to it would lose the venv, so a wrapper).
mkdir -p /tmp/pybin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/pybin/python
chmod +x /tmp/pybin/python
export PATH=/tmp/pybin:$PATH FORGE_CACHE_DIR=/tmp/forge-cache

t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1
cmake --build build-gpu --target forge >> "$OUT/cmake.log" 2>&1
echo "forge built in $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
build-gpu/forge -C bench/gpu --json capture > "$OUT/capture.json" 2> "$OUT/capture.err" || true
echo "forge capture (runtime build + 4 models) took $(( $(date +%s) - t0 )) s"
build-gpu/forge -C bench/gpu status > "$OUT/status.txt" 2>&1 || true

# Overhead: each model plain, then with the capture library loaded exactly as
# forge loads it (same environment), both timing their own steady-state iterations.
lib=$(ls "$FORGE_CACHE_DIR"/runtime/*/build/libforge_capture.so | head -n 1)
: > "$OUT/timings.txt"
for m in resnet50 vae_decoder gemma_like qwen_moe_like; do
  (cd bench/models && python "$m.py") | sed "s/^/plain $m /" >> "$OUT/timings.txt" 2>&1 || true
  cap=$(mktemp -d)
  (cd bench/models && PYTHONPATH="$PWD/../../runtime/autoload" FORGE_LOAD_LIBS="$lib" \
     FORGE_CAPTURE_DIR="$cap" FORGE_CAPTURE_SAMPLES=2 python "$m.py") \
     | sed "s/^/captured $m /" >> "$OUT/timings.txt" 2>&1 || true
  rm -rf "$cap"
done
python3 bench/capture_report.py "$OUT/capture.json" "$OUT/timings.txt" "$OUT/capture_h200.json"
