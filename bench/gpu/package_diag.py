"""Diagnoses libforge.so's CUDA override without a search (bench/gpu/package_diag.sh):
writes package.json for one group_norm kernel (split_group, bf16
[1,128,512,512], 32 groups), then runs each case in its own process with the
library loaded: a forged call, a fallback call (another shape), both, the
VAE-like decoder eagerly. Prints one line per case: ok / exit code / output.
  python3 package_diag.py PKG_DIR"""
import json
import os
import subprocess
import sys

pkg = sys.argv[1]


def tensor(sizes, dtype="bfloat16"):
    strides, s = [], 1
    for d in reversed(sizes):
        strides.insert(0, s)
        s *= d
    return {"type": "Tensor", "device": "cuda:0", "dtype": dtype, "requires_grad": False,
            "sizes": sizes, "strides": strides}


N, C, H, W, G = 1, 128, 512, 512, 32
args = [dict(tensor([N, C, H, W]), name="input"), dict(tensor([C]), name="weight"),
        dict(tensor([C]), name="bias"), {"name": "N", "type": "int", "value": N},
        {"name": "C", "type": "int", "value": C}, {"name": "HxW", "type": "int", "value": H * W},
        {"name": "group", "type": "int", "value": G}, {"name": "eps", "type": "float", "value": 1e-5}]
family = {"name": "group_norm", "ops": ["native_group_norm"],
          "signature_family": {"contiguous": True, "pins": [{"arg": 3, "vary": 0}],
                               "vary": [{"arg": 0, "dim": 0}], "vary_outputs": [0, 1, 2]},
          "tolerance": {"bfloat16": {"atol": 0.016, "rtol": 0.016}}}
entry = {"target": "diag/native_group_norm", "op": "aten::native_group_norm", "overload": "",
         "signature": "diag", "strategy": "split_group", "args": args,
         "outputs": [tensor([N, C, H, W]), tensor([N, G]), tensor([N, G])],
         # vary_max: the guard's bound on N (the worker's verify.vary_max in a
         # build; without it only the captured N=1 is forged, and "batch 2" falls back).
         "vary": [{"arg": 0, "dim": 0}], "vary_max": [4], "pins": [{"arg": 3, "vary": 0}], "contiguous": True,
         "vary_outputs": [0, 1, 2], "family": family, "kernel": "kernels/gn.so"}
json.dump({"backend": "cuda", "entries": [entry], "version": 1}, open(os.path.join(pkg, "package.json"), "w"))

prelude = f"""
import faulthandler, torch, torch.nn.functional as F
faulthandler.enable()
torch.ops.load_library("{pkg}/libforge.so")
torch.manual_seed(0)
def gn(shape, device="cuda"):
    x = torch.randn(shape, device=device, dtype=torch.bfloat16)
    w = torch.randn(shape[1], device=device, dtype=torch.bfloat16)
    b = torch.randn(shape[1], device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        y = F.group_norm(x, 32, w, b, 1e-5)
    ref = F.group_norm(x.double(), 32, w.double(), b.double(), 1e-5)
    torch.cuda.synchronize()
    return float((y.double() - ref).abs().max())
x = torch.randn(1, 128, 512, 512, device="cuda", dtype=torch.bfloat16)
w = torch.randn(128, device="cuda", dtype=torch.bfloat16)
b = torch.randn(128, device="cuda", dtype=torch.bfloat16)
def err_of(y):
    ref = F.group_norm(x.double(), 32, w.double(), b.double(), 1e-5)
    return float((y.double() - ref).abs().max())
"""
# Safety cases (issue: package, item 4; torch.compile, item 3): a CUDA graph
# captures the forged call and replays it on new input; the second GPU; four
# threads at once; torch.compile's reduce-overhead mode (CUDA graphs) with
# compiled graphs sent to the forged kernel.
CUDA_GRAPH = """
with torch.no_grad():
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        F.group_norm(x, 32, w, b, 1e-5)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = F.group_norm(x, 32, w, b, 1e-5)
    x.copy_(torch.randn_like(x)); g.replay(); torch.cuda.synchronize()
print('err', err_of(y))
"""
SECOND_GPU = """
print('err', gn((1, 128, 512, 512), 'cuda:1') if torch.cuda.device_count() > 1 else 'skipped: one GPU')
"""
THREADS = """
import threading
errs = []
def work():
    for _ in range(10):
        errs.append(gn((1, 128, 512, 512)))
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print('err', max(errs), len(errs), 'calls')
"""
REDUCE_OVERHEAD = """
import sys; sys.path.insert(0, 'runtime/autoload')
from forge_autoload import compile as forge_compile
forge_compile.install('%s/package.json', policy='forge')
f = torch.compile(lambda t: F.group_norm(t, 32, w, b, 1e-5), mode='reduce-overhead')
with torch.no_grad():
    for _ in range(3):
        y = f(x).clone()
torch.cuda.synchronize()
print('err', err_of(y))
""" % pkg
cases = {
    "forged": "print('err', gn((1, 128, 512, 512)))",
    "fallback": "print('err', gn((1, 512, 64, 64)))",
    "both": "print('err', gn((1, 512, 64, 64)), gn((1, 128, 512, 512)), gn((1, 512, 64, 64)))",
    # Which path crashes: Python's boxed call into aten directly (no
    # composite group_norm in between), inference mode (no autograd key), and
    # grad mode on (autograd's kernel, no grad needed).
    "aten direct": "x = torch.randn(1, 128, 512, 512, device='cuda', dtype=torch.bfloat16); w = torch.ones(128, device='cuda', dtype=torch.bfloat16)\n"
                   "with torch.no_grad(): y = torch.ops.aten.native_group_norm(x, w, w, 1, 128, 512 * 512, 32, 1e-5)\n"
                   "torch.cuda.synchronize(); print('err', float(y[0].float().abs().max()))",
    "inference mode": "x = torch.randn(1, 512, 64, 64, device='cuda', dtype=torch.bfloat16)\n"
                      "with torch.inference_mode(): y = F.group_norm(x, 32)\n"
                      "torch.cuda.synchronize(); print('err', float(y.float().abs().max()))",
    "grad mode fallback": "x = torch.randn(1, 512, 64, 64, device='cuda', dtype=torch.bfloat16)\n"
                          "y = F.group_norm(x, 32); torch.cuda.synchronize(); print('err', float(y.float().abs().max()))",
    "batch 2 (varied N)": "print('err', gn((2, 128, 512, 512)))",
    "cuda graph": CUDA_GRAPH,
    "second gpu": SECOND_GPU,
    "threads": THREADS,
    "reduce-overhead": REDUCE_OVERHEAD,
    "vae eager": "import runpy, sys; sys.path.insert(0, 'bench/models'); runpy.run_path('bench/models/vae_decoder.py')",
}
def counts():
    """forged and fallback calls from the library's reports (FORGE_PACKAGE_REPORT), then clears them."""
    forged = fallback = 0
    for f in os.listdir(pkg):
        if f.endswith(".json") and f != "package.json":
            r = json.load(open(os.path.join(pkg, f)))
            forged += sum(e["forged"] for e in r.get("entries", []))
            fallback += sum(e["calls"] for e in r.get("fallback", []))
            os.remove(os.path.join(pkg, f))
    return forged, fallback


trace = os.environ.get("FORGE_DIAG_TRACE", "0")
env = dict(os.environ, FORGE_PACKAGE_REPORT=pkg, FORGE_PACKAGE_TRACE=trace)
counts()
for name, body in cases.items():
    p = subprocess.run([sys.executable, "-c", prelude + body], capture_output=True, text=True, timeout=120, env=env)
    tail = (p.stdout + p.stderr).strip().splitlines()
    keep = [l for l in tail if "trace" in l or "err" in l or "Error" in l or "error" in l][:12]
    forged, fallback = counts()
    print(f"{name:20s} rc={p.returncode} forged={forged} fallback={fallback}  " + " | ".join(keep)[-1200:], flush=True)
