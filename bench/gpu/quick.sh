#!/usr/bin/env bash
# Short GPU capture check: tiny model through forge, then ResNet-50 with the
# capture library loaded, its top backend ops by CUPTI device time.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
(cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target forge) > "$OUT/cmake.log" 2>&1
timeout 90 build-gpu/forge -C bench/gpu/tiny --json capture > "$OUT/tiny.json" 2> "$OUT/tiny.err"
echo "forge capture tiny rc=$?"
lib=$(ls "$FORGE_CACHE_DIR"/runtime/*/build/libforge_capture.so | head -n 1)
cap=$(mktemp -d)
(cd bench/models && timeout 60 python resnet50.py) 2>&1 | tail -n 1
(cd bench/models && PYTHONPATH="$PWD/../../runtime/autoload" FORGE_LOAD_LIBS="$lib" FORGE_CAPTURE_DIR="$cap" \
   FORGE_CAPTURE_SAMPLES=1 timeout 60 python resnet50.py) 2>&1 | tail -n 1
python3 - "$cap" <<'PY'
import json, glob, sys
for f in glob.glob(sys.argv[1] + "/*.json"):
    j = json.load(open(f))
    print("timer:", j.get("device_timer"), "unattributed us:", j.get("unattributed_device_time_us"))
    tot = j["total_backend_time_us"]
    print(f"total backend device time {tot:.0f} us")
    tot = sum(b['time_us'] for b in j['backend_ops'] if b.get('dispatch_key') == 'CUDA')
    print(f'CUDA backend ops: {tot:.0f} us')
    for b in [b for b in j['backend_ops'] if b.get('dispatch_key') == 'CUDA'][:10]:
        print(f"  {100*b['time_us']/max(tot,1e-9):5.1f}% {b['time_us']:9.0f} us {b['calls']:4d}  {b['signature'][:100]}")
PY
