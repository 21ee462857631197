# Copied from ../shared/anchors/anchors_h200.py (the project brief's anchor script), as
# issue "Performance on the H200" asks: rerun on the H200 for today's eager and
# torch.compile figures beside forge's (writes $OUT/anchors_h200.json).
#   python3 bench/gpu/anchors_h200.py
"""Anchor measurements on an H200: eager vs torch.compile for the ops the
Kernel Forge paper reports, plus the copy-bandwidth ceiling. Prints a table."""
import json, os, sys, time, math
import torch, torch.nn.functional as F
from triton.testing import do_bench

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
out_dir = os.environ.get("OUT", "/tmp")
rows = []

def ms(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")

# ceiling: device-to-device copy of 4 GiB
a = torch.empty(2**30, dtype=torch.float32, device=dev).uniform_()
b = torch.empty_like(a)
t = ms(lambda: b.copy_(a))
copy_bw = 2 * a.numel() * 4 / (t * 1e-3) / 1e12
print(f"copy ceiling: {copy_bw:.2f} TB/s", flush=True)
del a, b
torch.cuda.empty_cache()

cases = []
def case(name, fn, make, nbytes):
    cases.append((name, fn, make, nbytes))

# ResNet-50 adaptive avg pool (N,2048,7,7)->(N,2048,1,1)
for N, dt in [(32, torch.float32), (128, torch.float32), (128, torch.bfloat16)]:
    shp = (N, 2048, 7, 7)
    case(f"adaptive_avg_pool2d {shp} {str(dt)[6:]}", lambda x: F.adaptive_avg_pool2d(x, 1),
         lambda s=shp, d=dt: (torch.randn(s, device=dev, dtype=d),),
         math.prod(shp) * dt.itemsize + N * 2048 * dt.itemsize)
# SD3.5 VAE group norm, 32 groups
for shp, dt in [((1, 512, 128, 128), torch.float32), ((1, 256, 512, 512), torch.float32),
                ((1, 128, 1024, 1024), torch.bfloat16), ((2, 512, 64, 64), torch.bfloat16)]:
    C = shp[1]
    def mk(s=shp, d=dt, C=C):
        return (torch.randn(s, device=dev, dtype=d), torch.randn(C, device=dev, dtype=d), torch.randn(C, device=dev, dtype=d))
    case(f"group_norm {shp} {str(dt)[6:]}", lambda x, w, bb: F.group_norm(x, 32, w, bb, 1e-6), mk,
         2 * math.prod(shp) * dt.itemsize)
# attention softmax (Gemma-like eager attention) and vocab/router softmax
for shp, dt in [((1, 8, 2048, 2048), torch.float32), ((1, 8, 2048, 2048), torch.bfloat16),
                ((4, 16, 1024, 1024), torch.float32), ((2048, 262144), torch.bfloat16),
                ((8192, 256), torch.float32), ((4096, 248320), torch.float32)]:
    case(f"softmax {shp} {str(dt)[6:]}", lambda x: torch.softmax(x, dim=-1),
         lambda s=shp, d=dt: (torch.randn(s, device=dev, dtype=d) * 4,), 2 * math.prod(shp) * dt.itemsize)
# layer norm / rms norm (transformer hidden 2048/4096)
for shp, dt in [((8192, 2048), torch.bfloat16), ((16384, 4096), torch.float32)]:
    H = shp[-1]
    case(f"layer_norm {shp} {str(dt)[6:]}", lambda x, w, bb: F.layer_norm(x, (x.shape[-1],), w, bb, 1e-6),
         lambda s=shp, d=dt, H=H: (torch.randn(s, device=dev, dtype=d), torch.randn(H, device=dev, dtype=d), torch.randn(H, device=dev, dtype=d)),
         2 * math.prod(shp) * dt.itemsize)
    case(f"rms_norm {shp} {str(dt)[6:]}", lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
         lambda s=shp, d=dt, H=H: (torch.randn(s, device=dev, dtype=d), torch.randn(H, device=dev, dtype=d)),
         2 * math.prod(shp) * dt.itemsize)
# gelu (tanh) elementwise, SD/ViT MLP
for shp, dt in [((8192, 8192), torch.bfloat16)]:
    case(f"gelu_tanh {shp} {str(dt)[6:]}", lambda x: F.gelu(x, approximate="tanh"),
         lambda s=shp, d=dt: (torch.randn(s, device=dev, dtype=d),), 2 * math.prod(shp) * dt.itemsize)

for name, fn, make, nbytes in cases:
    args = make()
    t_eager = ms(lambda: fn(*args))
    floor_ms = nbytes / (copy_bw * 1e12) * 1e3
    res = {"op": name, "eager_ms": t_eager, "floor_ms": floor_ms}
    for mode in ["default", "max-autotune-no-cudagraphs"]:
        try:
            torch._dynamo.reset()
            cf = torch.compile(fn, mode=None if mode == "default" else mode, dynamic=False)
            t0 = time.time(); cf(*args); torch.cuda.synchronize(); ct = time.time() - t0
            res[f"compile_{mode}_ms"] = ms(lambda: cf(*args))
            res[f"compile_{mode}_build_s"] = ct
        except Exception as e:
            res[f"compile_{mode}_ms"] = None
            res[f"err_{mode}"] = repr(e)[:200]
    rows.append(res)
    c1 = res.get("compile_default_ms"); c2 = res.get("compile_max-autotune-no-cudagraphs_ms")
    print(f"{name:45s} eager {t_eager*1e3:9.1f}us  inductor {c1*1e3 if c1 else float('nan'):9.1f}us  max-at {c2*1e3 if c2 else float('nan'):9.1f}us  floor {floor_ms*1e3:8.1f}us  eager%roof {100*floor_ms/t_eager:5.1f}  ind%roof {100*floor_ms/min(x for x in [c1,c2] if x):5.1f}", flush=True)
    del args
    torch.cuda.empty_cache()

json.dump({"copy_TBps": copy_bw, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows},
          open(os.path.join(out_dir, "anchors_h200.json"), "w"), indent=1)
