# Chain modules on CUDA (bench/gpu/chain_modules.py): forge build, then the modules stock and
# under forge run, eager and compiled; prints the per-module ms/iter and the forged calls.
#   CH_BUILD_S=420 bash bench/gpu/chains.sh   (on the device; $OUT receives build.json and the reports)
set -o pipefail; source bench/gpu/env.sh; t0=$(date +%s); export PYTHONUNBUFFERED=1
O=$OUT; R=$PWD; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) > $O/cmake.log 2>&1 || { tail -30 $O/cmake.log; exit 1; }
echo "forge ready $(( $(date +%s)-t0 )) s"
P=/tmp/chains; rm -rf $P; mkdir -p $P; cp bench/gpu/chain_modules.py $P/model.py
printf "models:\n  m: {run: python model.py, env: {CH_ITERS: '3'}, latency: 'total ([0-9.]+) ms/iter', check_runs: 3, compile_env: {CH_COMPILE: '1'}}\ndevice: {backend: cuda}\nbudget: {iterations: 2}\ntargets: {top: 6, min_share: 0, ops: [native_group_norm]}\n" > $P/forge.yaml
timeout -s INT -k 20 ${CH_BUILD_S:-420} build-gpu/forge -C $P --json build > $O/build.json 2> $O/build.err; echo "build rc=$? $(( $(date +%s)-t0 )) s"
python3 - $O/build.json <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for c in b.get("chains", []):
    if c.get("search") or c.get("whole_forward"):
        print("chain", c["ops"], c.get("module"), (c.get("why") or "")[:160], json.dumps(c.get("search")))
pk = b.get("package") or {}
print("package", json.dumps({k: v for k, v in pk.items() if k in ("status", "entries")}))
for m, r in (pk.get("models") or {}).items():
    print("compiled A/B", m, json.dumps(r.get("compiled")))
print("routes_off", json.dumps(pk.get("routes_off")))
PY
cd $P
for mode in eager compile; do
  c=""; [ $mode = compile ] && c=1
  CH_COMPILE=$c python model.py > $O/stock-$mode.txt 2>> $O/run.err; echo "stock $mode:"; cat $O/stock-$mode.txt
  CH_COMPILE=$c $R/build-gpu/forge -C $P run --json-report $O/forged-$mode.json -- python model.py > $O/forged-$mode.txt 2>> $O/run.err
  echo "forged $mode:"; cat $O/forged-$mode.txt
  echo "elapsed $(( $(date +%s)-t0 )) s"
done
python3 -c "
import json,sys
for m in ('eager','compile'):
    try: r=json.load(open('$O/forged-'+m+'.json'))
    except Exception as e: print(m, 'no report', e); continue
    print(m, [(e['target'], e['forged'], e['kernel_errors'], e.get('mismatches')) for e in r['entries']])
"
echo "total $(( $(date +%s)-t0 )) s"
