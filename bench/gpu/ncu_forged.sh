#!/usr/bin/env bash
# What limits each forged kernel (issue: performance, item 5), after a campaign
# in the same device call (the package is in /tmp/forge-campaign/<model>):
#   bash bench/gpu/ncu_forged.sh vae resnet50
# Runs each model's script once with its libforge.so loaded, under Nsight
# Compute, profiling forge's kernels (the templates' names) and the stock
# kernels of the same ops; writes $OUT/ncu-<model>.csv and prints per kernel:
# duration, DRAM throughput (% of peak), bytes read and written, L2 hit rate,
# active warps (% of peak). Clocks are left alone (--clock-control none, as
# the device notes advise on these machines).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
forged='gn_|bn_|ln_|rms_|mean_plane|softmax_'
stock='GroupNorm|group_norm|batch_norm|layer_norm|softmax|reduce_kernel'
metrics=$(python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import ncu_table; print(','.join(ncu_table.METRICS))")
for m in "$@"; do
  lib=/tmp/forge-campaign/$m/package/libforge.so
  script=$(sed -n 's/.*run: python \([A-Za-z0-9_./-]*\.py\).*/\1/p' "bench/gpu/campaign/$m/forge.yaml")
  [ -f "$lib" ] || { echo "$m: no package at $lib (run the campaign first)"; continue; }
  (cd bench/models && BENCH_ITERS=1 FORGE_LOAD_LIBS="$lib" PYTHONPATH="$PWD/../../runtime/autoload" \
     timeout 300 ncu --clock-control none --target-processes all -k "regex:$forged|$stock" --launch-count 40 --print-units base \
       --metrics "$metrics" --csv python3 "$script") > "$OUT/ncu-$m.csv" 2> "$OUT/ncu-$m.err"
  echo "$m: ncu rc=$? ($(grep -c '"' "$OUT/ncu-$m.csv") rows)"
  python3 bench/gpu/ncu_table.py "$OUT/ncu-$m.csv"
done
