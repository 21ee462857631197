#!/usr/bin/env bash
# The CUDA adversarial suites on the GPU machine, one device call:
#   bash bench/gpu/verifier_suite.sh
# Builds forge and its tests (libgit2 from .debs/, bench/gpu/env.sh), then runs
# tests/adversarial/test_runtime_checks_cuda.cpp (every cheat, run-time checks
# alone) and test_adversarial_cuda.cpp (through forge try). Logs under $OUT.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
start=$(date +%s)
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge forge_tests) \
  > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
for t in test_runtime_checks_cuda test_adversarial_cuda; do
  t0=$(date +%s)
  timeout 400 build-gpu/forge_tests --source-file="*adversarial/$t.cpp" --no-intro > "$OUT/$t.log" 2>&1
  echo "$t: rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "MESSAGE|ERROR|CHECK|SKIPPED|test cases" "$OUT/$t.log" | grep -vE "^\s*$" | tail -60
done
