#!/usr/bin/env bash
# The H200 campaign, one device call per few models (issue: performance):
#   bash bench/gpu/campaign.sh tiny vae        # models of bench/gpu/campaign/*.yaml
# Builds forge (the store and runtime caches in /tmp survive between calls
# while the machine stays warm), runs `forge build` per model under a timeout,
# writes $OUT/<model>.json and prints a table last: per target the share,
# iterations, outcomes, best speedup over eager and torch.compile, % of floor,
# candidates per GPU-minute and the stage costs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
t0=$(date +%s)
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) \
  > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
echo "forge built in $(( $(date +%s) - t0 )) s"
for m in "$@"; do
  t0=$(date +%s)
  timeout "${FORGE_CAMPAIGN_TIMEOUT:-420}" build-gpu/forge -C "bench/gpu/campaign/$m" --json build \
    > "$OUT/$m.json" 2> "$OUT/$m.err" < /dev/null
  echo "$m: forge build rc=$? in $(( $(date +%s) - t0 )) s"
done
python3 bench/gpu/campaign_table.py "$OUT" "$@"
