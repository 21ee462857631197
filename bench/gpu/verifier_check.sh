#!/usr/bin/env bash
# The verifier on the GPU machine, in two device calls of under 10 minutes:
#   bash bench/gpu/verifier_check.sh worker   # runner_check.py (every CUDA cheat through
#                                             # the sandboxed worker alone, then the honest
#                                             # softmax's evaluations per GPU-minute), the CPU
#                                             # worker's throughput before the sandboxed runner
#                                             # (fae5eac) and now; builds forge in build-gpu
#   bash bench/gpu/verifier_check.sh suites   # the CUDA adversarial suites (verifier_suite.sh)
#   bash bench/gpu/verifier_check.sh recheck  # after `worker`: the run-time checks suite alone
# Needs, carried: .debs/ (libgit2, bench/gpu/env.sh), build-carry/softmax_family.json
# (targets/softmax/family.yaml as JSON) and build-carry/before/ (`git archive fae5eac
# runtime`). FORGE_COMMIT names the commit measured (the device copy has no .git).
# Results under $OUT; a table last.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
commit=${FORGE_COMMIT:-unknown}
case "${1:-}" in
worker)
  # forge and its tests for the second call, beside the worker checks.
  (cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 &&
     cmake --build build-gpu --target forge forge_tests -j 8 >> "$OUT/cmake.log" 2>&1; echo "forge build rc=$?" > "$OUT/forge_build.txt") &
  build=$!
  PYTHONUNBUFFERED=1 python3 bench/gpu/runner_check.py --family build-carry/softmax_family.json --evals 30 \
    > "$OUT/runner_check.log" 2>&1
  echo "runner_check rc=$?"
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  for w in before:build-carry/before/runtime/worker now:runtime/worker; do
    name=${w%%:*} src=${w#*:}
    cmake -S "$src" -B "/tmp/cpu-worker-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DFORGE_WORKER_CUDA=OFF > "$OUT/cpu_worker_$name.log" 2>&1 &&
      ninja -C "/tmp/cpu-worker-$name" >> "$OUT/cpu_worker_$name.log" 2>&1 ||
      { echo "cpu worker $name: build failed"; tail -20 "$OUT/cpu_worker_$name.log"; }
  done
  python3 bench/worker_throughput.py /tmp/cpu-worker-before /tmp/cpu-worker-now --evals 10 \
    --label "fae5eac (before the runner)" --label "$commit" --family build-carry/softmax_family.json \
    --commit "$commit" > "$OUT/cpu_throughput.txt" 2>&1
  wait $build
  cat "$OUT/forge_build.txt"; tail -3 "$OUT/cmake.log"
  cat "$OUT/cpu_throughput.txt"
  sed -n '/^candidate/,$p' "$OUT/runner_check.log"
  ;;
suites)
  bash bench/gpu/verifier_suite.sh
  ;;
recheck)  # after `worker` on a fresh machine: the run-time checks suite alone
  t0=$(date +%s)
  timeout 300 build-gpu/forge_tests --source-file="*adversarial/test_runtime_checks_cuda.cpp" --no-intro \
    > "$OUT/test_runtime_checks_cuda.log" 2>&1
  echo "test_runtime_checks_cuda: rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "ERROR|test cases|thread_unsafe|forbidden" "$OUT/test_runtime_checks_cuda.log" | cut -c1-220 | tail -30
  ;;
*) echo "usage: $0 worker|suites|recheck"; exit 2 ;;
esac
