#!/usr/bin/env bash
# The strategy library's CUDA templates per class on the GPU machine, one call:
#   bash bench/gpu/classes.sh [classes.py options, e.g. --class reduce]
# Builds the evaluation worker with CUDA (runtime/worker, as bench/gpu/runner_check.py
# does), then bench/templates/classes.py --device cuda over CLASSES_CASES
# (default bench/templates/cases_cuda_quick.yaml: small shapes, seconds per
# evaluation; cases_cuda.yaml's GPU sizes take minutes each, so one class at a
# time): each CUDA strategy's root instance verified against stock and timed
# beside it in the worker. $OUT/classes_cuda.json and the log; a table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
start=$(date +%s)
wb=/tmp/forge-wb
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
(cmake -S runtime/worker -B $wb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
   -DFORGE_WORKER_CUDA=ON && ninja -C $wb forge_worker forge_runner) > "$OUT/worker-build.log" 2>&1 \
  || { tail -30 "$OUT/worker-build.log"; exit 1; }
echo "worker built in $(( $(date +%s) - start )) s"
cd bench/templates
PYTHONUNBUFFERED=1 timeout ${CLASSES_TIMEOUT:-480} python3 classes.py --device cuda --worker $wb/forge_worker \
  --cache /tmp/forge-classes --cases "${CLASSES_CASES:-cases_cuda_quick.yaml}" --out "$OUT/classes_cuda.json" "$@" 2>&1 | tee "$OUT/classes_cuda.log"
cp /tmp/forge_worker_stderr.log "$OUT/" 2>/dev/null
echo "call: $(( $(date +%s) - start )) s"
