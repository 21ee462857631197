#!/usr/bin/env bash
# One device call (bench/README.md): build forge and its runtime against the GPU
# machine's torch, capture the four model families of bench/gpu/forge.yaml, time
# each model plain and with the capture library loaded, print a table last and
# write JSON to $OUT (or /tmp/forge-out). FORGE_CAPTURE_DEADLINE (s, default
# 540) bounds the whole script: overhead runs that would pass it are skipped,
# and the table is printed from what was measured.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s); deadline=${FORGE_CAPTURE_DEADLINE:-540}
OUT=${OUT:-/tmp/forge-out}
mkdir -p "$OUT"

source bench/gpu/env.sh

t0=$(date +%s)
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) \
  > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
echo "forge built in $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
cap_limit=$(( deadline - ($(date +%s) - start) - 60 )); [ $cap_limit -gt 330 ] && cap_limit=330
timeout -s INT -k 10 $cap_limit \
  build-gpu/forge -C bench/gpu --json capture > "$OUT/capture.json" 2> "$OUT/capture.err"
echo "forge capture rc=$?"
echo "forge capture (runtime build + 4 models) took $(( $(date +%s) - t0 )) s"
build-gpu/forge -C bench/gpu status > "$OUT/status.txt" 2>&1 || true

# Overhead: each model plain, then with the capture library loaded exactly as
# forge loads it (same environment), both timing their own steady-state iterations.
lib=$(ls "$FORGE_CACHE_DIR"/runtime/*/build/libforge_capture.so | head -n 1)
: > "$OUT/timings.txt"
for m in resnet50 vae_decoder gemma_like qwen_moe_like; do
  left=$(( deadline - ($(date +%s) - start) - 10 ))
  if [ "$left" -lt 60 ]; then echo "overhead $m: skipped, $left s left"; continue; fi
  (cd bench/models && timeout $(( left / 2 )) python "$m.py") | sed "s/^/plain $m /" >> "$OUT/timings.txt" 2>&1 || true
  cap=$(mktemp -d)
  (cd bench/models && PYTHONPATH="$PWD/../../runtime/autoload" FORGE_LOAD_LIBS="$lib" \
     FORGE_CAPTURE_DIR="$cap" FORGE_CAPTURE_SAMPLES=2 timeout $(( left / 2 )) python "$m.py") \
     | sed "s/^/captured $m /" >> "$OUT/timings.txt" 2>&1 || true
  rm -rf "$cap"
done
python3 bench/capture_report.py "$OUT/capture.json" "$OUT/timings.txt" "$OUT/capture_h200.json"
