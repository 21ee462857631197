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
# Eager: one process each way. Compiled: CH_ROUNDS (default 3) rounds of three processes in turn:
# stock, forge loaded with its routes off (FORGE_COMPILE_POLICY=inductor), forge routed; the
# table gives each module's median over the rounds, so loading forge and routing are told apart.
python model.py > $O/stock-eager.txt 2>> $O/run.err; echo "stock eager:"; cat $O/stock-eager.txt
$R/build-gpu/forge -C $P run --json-report $O/forged-eager.json -- python model.py > $O/forged-eager.txt 2>> $O/run.err
echo "forged eager:"; cat $O/forged-eager.txt; echo "elapsed $(( $(date +%s)-t0 )) s"
for i in $(seq 1 ${CH_ROUNDS:-3}); do
  CH_COMPILE=1 python model.py > $O/stock-compile-$i.txt 2>> $O/run.err
  CH_COMPILE=1 FORGE_COMPILE_POLICY=inductor $R/build-gpu/forge -C $P run -- python model.py > $O/loaded-compile-$i.txt 2>> $O/run.err
  CH_COMPILE=1 $R/build-gpu/forge -C $P run --json-report $O/forged-compile.json -- python model.py > $O/forged-compile-$i.txt 2>> $O/run.err
  echo "compiled round $i: elapsed $(( $(date +%s)-t0 )) s"
done
python3 - $O <<'PY'
import glob, json, os, re, statistics, sys
o = sys.argv[1]
def times(pattern):
    per = {}
    for f in sorted(glob.glob(os.path.join(o, pattern))):
        for m in re.finditer(r"^(\S+) ([0-9.]+) ms/iter", open(f).read(), re.M):
            per.setdefault(m.group(1), []).append(float(m.group(2)))
    return per
cols = [("stock eager", times("stock-eager.txt")), ("forge eager", times("forged-eager.txt")),
        ("stock compile", times("stock-compile-*.txt")), ("forge loaded, routes off", times("loaded-compile-*.txt")),
        ("forge routed", times("forged-compile-*.txt"))]
print("| module | " + " | ".join(c for c, _ in cols) + " |")
for name in cols[0][1]:
    cells = []
    for _, t in cols:
        v = t.get(name) or []
        cells.append("%.4f [%.4f-%.4f]" % (statistics.median(v), min(v), max(v)) if v else "-")
    print("| %s | %s |" % (name, " | ".join(cells)))
for m in ("eager", "compile"):
    try:
        r = json.load(open(os.path.join(o, "forged-%s.json" % m)))
    except Exception as e:
        print(m, "no report", e); continue
    print(m, [(e["target"], e["forged"], e["kernel_errors"], e.get("mismatches")) for e in r["entries"]])
PY
echo "total $(( $(date +%s)-t0 )) s"
