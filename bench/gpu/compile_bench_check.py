"""Checks the torch.compile helper's timing on the GPU (runtime/compile_bench):
a few campaign ops, eager and compiled (`default` mode), timed by the helper
given, or by each of several helpers for a side-by-side comparison (e.g. an
older copy). Prints a table last.
  python3 bench/gpu/compile_bench_check.py HELPER.py [OTHER_HELPER.py ...]"""
import json
import subprocess
import sys
import tempfile


def t(sizes, dtype):
    strides, s = [], 1
    for d in reversed(sizes):
        strides.insert(0, s)
        s *= d
    return {"type": "Tensor", "device": "cuda:0", "dtype": dtype, "sizes": sizes, "strides": strides}


def i(v):
    return {"type": "int", "value": v}


OPS = {
    "_softmax f32[2,8,1024,1024]": {"op": "aten::_softmax", "overload": "",
                                    "args": [t([2, 8, 1024, 1024], "float32"), i(-1), {"type": "bool", "value": False}]},
    "mean.dim f32[2,1024,1536] [-1]": {"op": "aten::mean", "overload": "dim",
                                       "args": [t([2, 1024, 1536], "float32"), {"type": "int[]", "value": [-1]},
                                                {"type": "bool", "value": True}, {"type": "None"}]},
    "group_norm bf16[1,128,512,512]": {"op": "aten::native_group_norm", "overload": "",
                                       "args": [t([1, 128, 512, 512], "bfloat16"), t([128], "bfloat16"),
                                                t([128], "bfloat16"), i(1), i(128), i(262144), i(32),
                                                {"type": "float", "value": 1e-5}]},
}
rows = []
for name, req in OPS.items():
    req = dict(req, modes=["default"], bench={"warmup": 5, "reps": 30, "min_seconds": 0.2, "max_seconds": 3})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(req, f)
    for helper in sys.argv[1:]:
        p = subprocess.run([sys.executable, helper, f.name], capture_output=True, text=True, timeout=200)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append((name, helper, r["eager_us"]["median"], r["compile_us"]["median"], r.get("host_cover_us")))
        except Exception:
            rows.append((name, helper, None, None, (p.stdout + p.stderr)[-300:]))
        print(rows[-1], flush=True)
print(f"\n{'op':34} {'helper':44} {'eager us':>9} {'compile us':>10}  host cover us")
for name, helper, e, c, h in rows:
    print(f"{name:34} {helper[-44:]:44} {e or float('nan'):9.1f} {c or float('nan'):10.1f}  {h}")
