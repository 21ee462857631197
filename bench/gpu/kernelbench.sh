#!/usr/bin/env bash
# One shard of KernelBench level 1 on the GPU machine, in one device call:
#   FORGE_COMMIT=abc1234 bash bench/gpu/kernelbench.sh 3/34 [run.py options...]
# Needs, carried: .debs/ (libgit2, bench/gpu/env.sh) and build-carry/KernelBench
# (KernelBench's level-1 files, never committed here:
#   git -C MIRROR archive HEAD KernelBench/level1 | tar x -C build-carry/KernelBench),
# optionally build-carry/kernelbench-results/ (earlier calls' result files:
# their problems are skipped). Builds forge in build-gpu when it is missing
# (a warm machine keeps it), then runs bench/kernelbench/run.py on the shard
# until KB_DEADLINE (s for the whole call, default 560: a call may run 600);
# the problems left run on the next call with the same SHARD. Results under
# $OUT: the shard's results file (bench/results/SCHEMA.md, kind kernelbench)
# and the run's log; a table last. KB_BUDGET: iterations per target (default 20).
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
shard=${1:?usage: $0 SHARD (i/n) [run.py options]}; shift
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
if [ ! -x build-gpu/forge ]; then
  (cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) \
    > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
  echo "forge built in $(( $(date +%s) - start )) s"
fi
# The shard's results live in /tmp too, so a later call on a still-warm machine resumes them.
work=/tmp/forge-kernelbench; mkdir -p "$work"
results="$work/results-${shard/\//-of-}.jsonl"
left=$(( ${KB_DEADLINE:-560} - ($(date +%s) - start) ))
# The results so far into $OUT every 15 s: a call stopped at its limit still returns them.
( while sleep 15; do [ -f "$results" ] && cp "$results" "$OUT/"; done ) & copier=$!
PYTHONUNBUFFERED=1 python3 bench/kernelbench/run.py build-carry/KernelBench --device cuda --shard "$shard" \
  --forge build-gpu/forge --workdir "$work" --results "$results" --deadline "$left" --budget "${KB_BUDGET:-20}" \
  --resume-from build-carry/kernelbench-results/*.jsonl "$@" 2>&1 | tee "$OUT/kernelbench-${shard/\//-of-}.log"
kill $copier 2>/dev/null
cp "$results" "$OUT/" 2>/dev/null
echo "call: $(( $(date +%s) - start )) s"
