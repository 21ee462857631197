#!/usr/bin/env bash
# What limits split_group on the VAE's group_norm shapes (issue: performance,
# item 5), with no forge build: bench/gpu/template_probe.py times each
# instance beside the stock op, then Nsight Compute profiles the instance's two
# kernels on one timed rep (after the probe's L2 flush; --cache-control none,
# so the apply kernel sees what the statistics kernel left in L2).
#   bash bench/gpu/ncu_group_norm.sh
# Environment: GN_PROBE_TEMPLATE (default split_group), GN_PROBE_CONFIGS
# ("BLOCK=.. CHUNK=.. ..." per line), GN_PROBE_SHAPES (space-separated
# N,C,H,W), GN_PROBE_NCU (shapes to profile; empty: none), GN_PROBE_KEEP (the
# compiled instances' folder), GN_PROBE_BUILD_ONLY=1 (compile them and stop:
# run here with nvcc, carry the folder to the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
probe=bench/gpu/template_probe.py
template=${GN_PROBE_TEMPLATE:-targets/group_norm/cuda_split_group.cu}
keep_root=${GN_PROBE_KEEP:-/tmp/gn-probe}
configs=${GN_PROBE_CONFIGS:-"BLOCK=128 CHUNK=8192 REVERSE=1 PDL=1
BLOCK=128 CHUNK=8192 REVERSE=0 PDL=0
BLOCK=512 CHUNK=131072 REVERSE=1 PDL=1"}
shapes=${GN_PROBE_SHAPES:-"1,128,512,512 1,256,256,256 1,512,128,128"}
metrics=$(python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import ncu_table; print(','.join(ncu_table.METRICS))")
i=0
while read -r params; do
  i=$((i + 1)); keep=$keep_root/$i
  if [ -n "${GN_PROBE_BUILD_ONLY:-}" ]; then
    python3 $probe $template "$params" --keep $keep --build-only || exit 1
    continue
  fi
  echo "== $params"
  timeout 300 python3 $probe $template "$params" --shape "$shapes" --keep $keep 2>&1 | grep -v "^[0-9,]*: max abs"
  for s in ${GN_PROBE_NCU-1,128,512,512 1,512,128,128}; do
    log="$OUT/ncu-gn-$i-${s//,/x}.csv"
    # Launches 1-4 are the two correctness calls; 5-6 the first timed rep.
    timeout 150 ncu --clock-control none --cache-control none -k regex:gn_ --launch-skip 4 --launch-count 2 \
      --print-units base --metrics "$metrics" --csv --log-file "$log" \
      python3 $probe $template "$params" --shape "$s" --keep $keep --reps 2 > /dev/null 2>&1
    echo "ncu $params $s: rc=$?"
    python3 bench/gpu/ncu_table.py "$log"
  done
done <<< "$configs"
