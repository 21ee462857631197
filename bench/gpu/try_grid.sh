#!/usr/bin/env bash
# One strategy template, a grid of its parameters, against every captured
# target of one op: `forge try` per (target, parameters), so each instance is
# verified (captured and fresh inputs, poisoned outputs) and timed against eager
# in the worker, out of process, under a timeout. A quick look at a new template
# on the GPU without a whole search. Prints a table last; $OUT/try-<model>.json.
#   bash bench/gpu/try_grid.sh vae native_group_norm targets/group_norm/cuda_split_group.cu \
#       "BLOCK=512 CHUNK=131072 UNROLL=1" "BLOCK=256 CHUNK=32768 UNROLL=4 REVERSE=1 PDL=1"
# Environment: FORGE_TRY_DEADLINE (s for the whole script, default 540),
# FORGE_TRY_TARGETS (a regex the target ids must match, default all).
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
model=$1 op=$2 template=$3; shift 3
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) \
  > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
forge="build-gpu/forge -C bench/gpu/campaign/$model"
timeout 300 $forge capture > "$OUT/try-capture.log" 2>&1 || { echo "capture failed"; tail -20 "$OUT/try-capture.log"; }
$forge --json status > "$OUT/try-status.json" 2>> "$OUT/try-capture.log"
echo "forge built and $model captured in $(( $(date +%s) - start )) s"
work=$(mktemp -d)
results="$OUT/try-$model.jsonl"; : > "$results"
python3 - "$OUT/try-status.json" "$op" > "$work/targets" <<'PY'
import json, os, re, sys
for t in json.load(open(sys.argv[1]))["targets"]:
    if t["op"] == sys.argv[2] and re.search(os.environ.get("FORGE_TRY_TARGETS", ""), t["id"]):
        print(t["id"], t["signature"])
PY
while read -r id signature; do
  # The dtypes the signature names, as forge's FORGE_DTYPES mask (one instance compiled).
  mask=0
  for d in float32:0 float16:2 bfloat16:3; do
    [[ "$signature" == *[\(\ ]"${d%%:*}["* ]] && mask=$(( mask | (1 << ${d##*:}) ))
  done
  for params in "$@"; do
    if [ $(( $(date +%s) - start )) -gt "${FORGE_TRY_DEADLINE:-540}" ]; then echo "deadline: $id $params skipped"; continue; fi
    file="$work/cand_$(echo "$id $params" | md5sum | cut -c1-8).cu"
    { echo "#define FORGE_DTYPES $mask"
      for p in $params; do echo "#define FORGE_P_${p%%=*} ${p#*=}"; done
      python3 bench/templates/template_text.py "$template"; } > "$file"
    timeout 120 $forge --json try "$id" "$file" --timeout 60 > "$work/rec.json" 2> "$work/rec.err"
    rc=$?
    python3 - "$work/rec.json" "$id" "$params" "$rc" "$work/rec.err" >> "$results" <<'PY'
import json, sys
path, tid, params, rc, err = sys.argv[1:]
try:
    rec = json.load(open(path))
except Exception:
    rec = {"verdict": "no record", "reason": open(err).read()[-400:]}
rec.pop("compile", None) if rec.get("verdict") == "accepted" else None
print(json.dumps({"target": tid, "params": params, "rc": int(rc), "record": rec}))
PY
  done
done < "$work/targets"
python3 - "$results" "$OUT/try-$model.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print(f"{'target':32} {'params':40} {'verdict':10} {'cand us':>9} {'eager us':>9} {'x eager':>8} {'floor %':>7}")
for r in rows:
    rec, b = r["record"], r["record"].get("bench") or {}
    med = lambda k: (b.get(k) or {}).get("median")
    f = lambda v, fmt: format(v, fmt) if isinstance(v, (int, float)) else "-"
    print(f"{r['target'][:32]:32} {r['params'][:40]:40} {rec.get('verdict', '?')[:10]:10} {f(med('candidate_us'), '9.1f')} "
          f"{f(med('eager_us'), '9.1f')} {f(b.get('speedup_eager'), '8.2f')} {f(b.get('floor_pct'), '7.1f')}")
    if rec.get("verdict") != "accepted":
        print("    ", (rec.get("reason", "") + " " + str(rec.get("detail", "")))[:300].replace("\n", " "))
PY
