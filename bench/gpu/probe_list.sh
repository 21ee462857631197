#!/usr/bin/env bash
# Several template instances through bench/gpu/template_probe.py in one device
# call: each is checked against its aten op on every shape (poisoned outputs,
# a second call must give the same bits), then timed beside the stock op with
# L2 flushed. Prints each instance's table; the tables together last.
#   bash bench/gpu/probe_list.sh LIST            # on the GPU machine
#   PROBE_BUILD_ONLY=1 bash bench/gpu/probe_list.sh LIST   # here: compile only
# LIST: one instance per line, "OP DTYPE TEMPLATE 'PARAMS' 'SHAPES'" (shell
# words), e.g.
#   mean float32 targets/mean_hw/cuda_plane_lanes.cu 'LANES=32 BLOCK=128 UNROLL=4' '2,1024,1536'
# PROBE_TIMEOUT: seconds per instance (default 240). PROBE_ARGS: more
# template_probe.py arguments for every instance (e.g. --diagnostic).
# Compiled instances are kept in PROBE_KEEP (default .probe-build, in the tree
# so that a device call carries what was compiled here).
set -uo pipefail
cd "$(dirname "$0")/../.."
list=$1
keep_root=${PROBE_KEEP:-.probe-build}
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
tables=$OUT/probe-tables.txt; : > "$tables"
i=0 failed=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  eval "set -- $line"
  if [ $# -ne 5 ]; then echo "$list: not OP DTYPE TEMPLATE 'PARAMS' 'SHAPES': $line" >&2; exit 2; fi
  op=$1 dtype=$2 template=$3 params=$4 shapes=$5
  i=$((i + 1)); keep=$keep_root/$i
  if [ -n "${PROBE_BUILD_ONLY:-}" ]; then
    # A template outside the tree (an old form copied in for one call) is skipped here.
    if [ ! -f "$template" ]; then echo "skipped (not in this tree): $template" >&2; continue; fi
    python3 bench/gpu/template_probe.py "$template" "$params" --dtype "$dtype" --keep "$keep" --build-only || exit 1
    continue
  fi
  echo "== $op $dtype $template $params"
  if ! timeout "${PROBE_TIMEOUT:-240}" python3 bench/gpu/template_probe.py "$template" "$params" --op "$op" --dtype "$dtype" \
      --shape "$shapes" --keep "$keep" ${PROBE_ARGS:-} > "$OUT/probe-$i.txt" 2>&1; then
    failed=$((failed + 1)); echo "FAILED:"; tail -5 "$OUT/probe-$i.txt"
  fi
  grep -v "max abs difference" "$OUT/probe-$i.txt"
  { echo "== $op $dtype $(basename "$template") $params"; grep -A100 "^shape" "$OUT/probe-$i.txt"; } >> "$tables"
done < "$list"
[ -n "${PROBE_BUILD_ONLY:-}" ] && exit 0
echo; echo "=== all instances ($failed failed)"; cat "$tables"
exit $((failed > 0))
