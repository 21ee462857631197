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
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for m in "$@"; do
  lib=/tmp/forge-campaign/$m/package/libforge.so
  script=$(sed -n 's/.*run: python \([A-Za-z0-9_./-]*\.py\).*/\1/p' "bench/gpu/campaign/$m/forge.yaml")
  [ -f "$lib" ] || { echo "$m: no package at $lib (run the campaign first)"; continue; }
  (cd bench/models && BENCH_ITERS=1 FORGE_LOAD_LIBS="$lib" PYTHONPATH="$PWD/../../runtime/autoload" \
     timeout 300 ncu --clock-control none --target-processes all -k "regex:$forged|$stock" --launch-count 40 --print-units base \
       --metrics "$metrics" --csv python3 "$script") > "$OUT/ncu-$m.csv" 2> "$OUT/ncu-$m.err"
  echo "$m: ncu rc=$? ($(grep -c '"' "$OUT/ncu-$m.csv") rows)"
  python3 - "$OUT/ncu-$m.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit(print("  no kernel rows"))
head, body = rows[0], rows[1:]
k, name, val = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
by = collections.defaultdict(lambda: collections.defaultdict(list))
for r in body:
    try:
        by[r[k][:60]][r[name]].append(float(r[val].replace(",", "")))
    except ValueError:
        pass
cols = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum",
        "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct", "sm__warps_active.avg.pct_of_peak_sustained_active"]
print(f"  {'kernel':60} {'n':>3} {'time':>10} {'dram %':>7} {'read':>10} {'write':>10} {'L2 hit':>7} {'warps %':>8}")
for kern, d in by.items():
    med = [sorted(d[c])[len(d[c]) // 2] if d[c] else float('nan') for c in cols]
    print(f"  {kern:60} {len(d[cols[0]]):3d} {med[0]:10.0f} {med[1]:7.1f} {med[2]:10.3g} {med[3]:10.3g} {med[4]:7.1f} {med[5]:8.1f}")
PY
done
