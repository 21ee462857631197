#!/usr/bin/env bash
# Bounded diagnosis of GPU capture: every piece under `timeout`, logs in $OUT.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forge-out}; mkdir -p "$OUT"
source bench/gpu/env.sh
m=bench/models
lib=$(ls "$FORGE_CACHE_DIR"/runtime/*/build/libforge_capture.so 2>/dev/null | head -n 1)
echo "capture lib: $lib"
for cupti in 1 0; do
  cap=$(mktemp -d)
  (cd $m && PYTHONPATH="$PWD/../../runtime/autoload" FORGE_LOAD_LIBS="$lib" FORGE_CAPTURE_CUPTI=$cupti \
     FORGE_CAPTURE_DIR="$cap" timeout 45 python tiny_cuda.py) > "$OUT/tiny_cupti$cupti.txt" 2>&1
  echo "tiny cuda, CUPTI=$cupti: rc=$? $(tail -n 1 "$OUT/tiny_cupti$cupti.txt")"
  python3 -c "
import json,glob,sys
for f in glob.glob('$cap/*.json'):
    j=json.load(open(f)); print('  timing', j.get('timing'), j.get('device_timer'), 'unattributed', j.get('unattributed_device_time_us'), 'backend ops', len(j['backend_ops']), [ (b['op'], b['time_us']) for b in j['backend_ops'][:4]])
"
  rm -rf "$cap"
done
