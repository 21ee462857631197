#!/usr/bin/env bash
# The H200 campaign, one device call per few models (issue: performance):
#   bash bench/gpu/campaign.sh tiny vae        # models of bench/gpu/campaign/*/forge.yaml
# Builds forge, runs `forge build` per model under a timeout, writes
# $OUT/<model>.json and $OUT/store-<model>.tgz (the store's small records, for
# diagnosis), and prints a table last: per target the share, iterations,
# outcomes, best speedup over eager and torch.compile, % of floor, candidates
# per GPU-minute and the stage costs.
# Environment: FORGE_CAMPAIGN_TIMEOUT (s per model, default 420),
# FORGE_CAMPAIGN_DEADLINE (s for the whole script, default 560: a device call
# may run 600), FORGE_CAMPAIGN_BUDGET (iterations per target, overriding
# forge.yaml), FORGE_CAMPAIGN_E2E (models to run end to end afterwards,
# bench/gpu/e2e.py), FORGE_CAMPAIGN_E2E_RUNS (its eager pairs, default 3),
# FORGE_CAMPAIGN_COMPILE_RUNS (its compiled pairs,
# default 1). The store lives in /tmp, so a later call on a still-warm machine
# continues where this one stopped.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) \
  > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
forge_built=$(( $(date +%s) - start ))
echo "forge built in $forge_built s"
budget=(); [ -n "${FORGE_CAMPAIGN_BUDGET:-}" ] && budget=(--budget "$FORGE_CAMPAIGN_BUDGET")
for m in "$@"; do
  left=$(( ${FORGE_CAMPAIGN_DEADLINE:-560} - ($(date +%s) - start) - 20 ))
  limit=${FORGE_CAMPAIGN_TIMEOUT:-420}; [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 60 ]; then echo "$m: skipped, ${left} s left"; continue; fi
  t0=$(date +%s)
  # SIGINT at the limit: forge stops at the next step and still prints its report.
  timeout -s INT -k 60 "$limit" build-gpu/forge -C "bench/gpu/campaign/$m" --json build "${budget[@]}" \
    > "$OUT/$m.json" 2> "$OUT/$m.err" < /dev/null
  rc=$?; secs=$(( $(date +%s) - t0 ))
  echo "$m: forge build rc=$rc in $secs s (limit $limit s)"
  # The build's wall time, for the campaign's total (campaign_table.py), which
  # may gather several calls' outputs into one folder.
  printf '{"build_seconds": %d, "rc": %d}\n' "$secs" "$rc" > "$OUT/$m.wall.json"
  # status: what the store holds (the same targets table, for a build killed outright).
  timeout 60 build-gpu/forge -C "bench/gpu/campaign/$m" --json status > "$OUT/$m.status.json" 2>> "$OUT/$m.err"
  store=/tmp/forge-campaign/$m
  [ -d "$store" ] && (cd "$store" && find . -type f -size -256k -print0 | tar czf "$OUT/store-$m.tgz" --null -T -)
done
# FORGE_CAMPAIGN_DIAG: models run once eagerly under `forge run` with Python's
# fault handler (and gdb's backtrace where gdb exists), logs kept.
for m in ${FORGE_CAMPAIGN_DIAG:-}; do
  script=$(sed -n 's/.*run: python \([A-Za-z0-9_./-]*\.py\).*/\1/p' "bench/gpu/campaign/$m/forge.yaml")
  PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 timeout 90 build-gpu/forge -C "bench/gpu/campaign/$m" run --unchecked -- \
    python "$PWD/bench/models/$script" > "$OUT/diag-$m.log" 2>&1
  echo "diag $m: forge run rc=$?"; tail -n 25 "$OUT/diag-$m.log"
  if command -v gdb > /dev/null; then
    (cd bench/models && FORGE_LOAD_LIBS=/tmp/forge-campaign/$m/package/libforge.so PYTHONPATH="$PWD/../../runtime/autoload" \
      PYTHONUNBUFFERED=1 timeout 90 gdb -q -batch -ex run -ex bt --args python3 "$script") > "$OUT/gdb-$m.log" 2>&1
    grep -A 30 "SIG" "$OUT/gdb-$m.log" | head -40
  fi
done
# End to end for the models named in FORGE_CAMPAIGN_E2E (bench/gpu/e2e.py), in
# what is left of the deadline.
for m in ${FORGE_CAMPAIGN_E2E:-}; do
  left=$(( ${FORGE_CAMPAIGN_DEADLINE:-560} - ($(date +%s) - start) - 15 ))
  if [ "$left" -lt 90 ]; then echo "e2e $m: skipped, ${left} s left"; continue; fi
  t0=$(date +%s)
  timeout -k 10 "$left" python3 bench/gpu/e2e.py "$PWD/build-gpu/forge" "$m" "${FORGE_CAMPAIGN_E2E_RUNS:-3}" default \
    "${FORGE_CAMPAIGN_COMPILE_RUNS:-1}" > "$OUT/e2e-$m.log" 2>&1
  rc=$?; printf '{"e2e_seconds": %d, "rc": %d}\n' "$(( $(date +%s) - t0 ))" "$rc" > "$OUT/e2e-$m.wall.json"
  echo "e2e $m rc=$rc"; tail -n 6 "$OUT/e2e-$m.log"
done
# This call's wall time (forge's own build first): a campaign split over calls
# sums them (campaign_table.py).
printf '{"start": %d, "forge_build_seconds": %d, "call_seconds": %d}\n' "$start" "$forge_built" "$(( $(date +%s) - start ))" \
  > "$OUT/call-$1.wall.json"
python3 bench/gpu/campaign_table.py "$OUT" "$@"
# The device returns few files: everything in one archive.
(cd "$OUT" && tar czf /tmp/campaign-all.tgz --exclude='*.so' . && find . -mindepth 1 -delete && mv /tmp/campaign-all.tgz .)
