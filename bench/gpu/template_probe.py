"""One template instance (group_norm, softmax, batch_norm or mean, --op), standalone: compiled
with forge's flags, called through the candidate ABI
(runtime/abi/forge_kernel.h) with ctypes on torch tensors, checked against
the aten op, then timed (CUDA events, L2 flushed before each rep, median)
beside the stock op. No forge, no
capture, no helper processes: small enough to run under Nsight Compute, which
wrapping `forge try` was not (it timed out: ncu attached to forge's helpers too). Prints a table last.
    python3 bench/gpu/template_probe.py targets/group_norm/cuda_split_group.cu \
        "BLOCK=128 CHUNK=8192 REVERSE=1 PDL=1" --shape "1,128,512,512 1,512,128,128" --dtype bfloat16
    python3 bench/gpu/template_probe.py targets/softmax/cuda_block_row.cu "BLOCK=128 CHUNKS=2 EXP=1" \
        --op softmax --shape 2,8,1024,1024 --dtype float32
    ncu --clock-control none -k regex:gn_ python3 bench/gpu/template_probe.py ... --reps 3
--device cpu runs a CPU template the same way (this machine's check of the ABI plumbing)."""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "templates"))
from template_text import source_text  # noqa: E402

MAX_DIMS, MAX_LIST = 8, 8
DTYPES = {torch.float32: 0, torch.float16: 2, torch.bfloat16: 3}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("sizes", ctypes.c_int64 * MAX_DIMS),
                ("strides", ctypes.c_int64 * MAX_DIMS), ("ndim", ctypes.c_int32), ("dtype", ctypes.c_int32)]


class Scalar(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("len", ctypes.c_int32), ("i", ctypes.c_int64), ("f", ctypes.c_double),
                ("ints", ctypes.c_int64 * MAX_LIST)]


class Call(ctypes.Structure):
    _fields_ = [("inputs", ctypes.POINTER(Tensor)), ("n_inputs", ctypes.c_int32),
                ("outputs", ctypes.POINTER(Tensor)), ("n_outputs", ctypes.c_int32),
                ("scalars", ctypes.POINTER(Scalar)), ("n_scalars", ctypes.c_int32),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_int64), ("stream", ctypes.c_void_p)]


def view(t):
    v = Tensor(data=t.data_ptr(), ndim=t.dim(), dtype=DTYPES[t.dtype])
    for d in range(t.dim()):
        v.sizes[d], v.strides[d] = t.size(d), t.stride(d)
    return v


def scalar_int(i):
    return Scalar(kind=1, i=i)


def build(template, params, dtype, device, work):
    """The instance as forge compiles it (rules/evaluate/compile.cpp, compile_flags);
    not again when `work` holds the same source already compiled."""
    text = "#define FORGE_DTYPES %d\n" % (1 << DTYPES[dtype])
    for p in params.split():
        name, value = p.split("=")
        text += "#define FORGE_P_%s %s\n" % (name, value)
    text += source_text(template)
    src = os.path.join(work, "candidate" + (".cu" if device == "cuda" else ".cpp"))
    so = os.path.join(work, "candidate.so")
    if os.path.exists(so) and os.path.exists(src) and open(src).read() == text:
        return ctypes.CDLL(so)
    with open(src, "w") as f:
        f.write(text)
    abi = "-I" + os.path.join(ROOT, "runtime", "abi")
    if device == "cuda":
        cmd = ["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
               "-gencode=arch=compute_90a,code=sm_90a", abi, src, "-o", so]
    else:
        cmd = ["c++", "-O3", "-std=c++17", "-fPIC", "-shared", "-march=native", abi, src, "-o", so]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(so)


def group_norm_call(shape, groups, dtype, dev):
    """native_group_norm's call: (inputs, outputs, scalars, stock op)."""
    N, C, G = shape[0], shape[1], groups
    HW = 1
    for s in shape[2:]:
        HW *= s
    x = (torch.randn(shape, device=dev) * 2 + 0.5).to(dtype)
    w = torch.randn(C, device=dev).to(dtype)
    b = torch.randn(C, device=dev).to(dtype)
    # Outputs poisoned: a kernel that skips elements fails the check.
    outs = [torch.full_like(x, float("nan"))] + [torch.full((N, G), float("nan"), device=dev, dtype=dtype)
                                                 for _ in range(2)]
    scal = [scalar_int(N), scalar_int(C), scalar_int(HW), scalar_int(G), Scalar(kind=2, f=1e-5)]
    return [x, w, b], outs, scal, lambda: torch.ops.aten.native_group_norm(x, w, b, N, C, HW, G, 1e-5)


def softmax_call(shape, groups, dtype, dev):
    """_softmax(x, -1, false)'s call, as an attention's scores: logits ~ N(0, 3)."""
    x = (torch.randn(shape, device=dev) * 3).to(dtype)
    outs = [torch.full_like(x, float("nan"))]
    scal = [scalar_int(-1), Scalar(kind=3, i=0)]
    return [x], outs, scal, lambda: (torch.ops.aten._softmax(x, -1, False),)


def batch_norm_call(shape, groups, dtype, dev):
    """native_batch_norm in eval mode, as a converted BatchNorm2d: parameters
    and running statistics in the input's dtype, outputs shaped as aten's."""
    C = shape[1]
    x = (torch.randn(shape, device=dev) * 2 + 0.5).to(dtype)
    w, b, rm = (torch.randn(C, device=dev).to(dtype) for _ in range(3))
    rv = (torch.rand(C, device=dev) + 0.5).to(dtype)

    def stock():
        return torch.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)

    outs = [torch.full_like(r, float("nan")) for r in stock()]  # poisoned
    scal = [Scalar(kind=3, i=0), Scalar(kind=2, f=0.1), Scalar(kind=2, f=1e-5)]
    return [x, w, b, rm, rv], outs, scal, stock


def mean_call(shape, groups, dtype, dev):
    """mean.dim over the trailing dims: H and W of a 4-D shape (the pool,
    keepdim), else the last (an RMSNorm's mean of squares)."""
    dims = [-1, -2] if len(shape) == 4 else [-1]
    keep = len(shape) == 4
    x = torch.randn(shape, device=dev).to(dtype) ** 2
    ref = torch.ops.aten.mean.dim(x, dims, keep)
    outs = [torch.full_like(ref, float("nan"))]
    lst = Scalar(kind=4, len=len(dims))
    for i, d in enumerate(dims):
        lst.ints[i] = d
    scal = [lst, Scalar(kind=3, i=int(keep)), Scalar(kind=0)]
    return [x], outs, scal, lambda: (torch.ops.aten.mean.dim(x, dims, keep),)


OPS = {"group_norm": group_norm_call, "softmax": softmax_call, "batch_norm": batch_norm_call, "mean": mean_call}


def probe(lib, op, shape_text, groups, dtype, dev, reps, diagnostic=False):
    """Checks one shape against aten (twice: the second call on the used
    workspace must give the same bits), then times it beside the stock op.
    Returns (forged us, stock us, copy us, floor us): copy = torch copying the
    first input into the first output, the same bytes as the floor's, as a
    practical ceiling at this size (launch, ramp and tail included); None on
    the CPU."""
    shape = [int(s) for s in shape_text.split(",")]
    torch.manual_seed(0)
    inputs, outputs, scalars, stock = OPS[op](shape, groups, dtype, dev)
    ins = (Tensor * len(inputs))(*[view(t) for t in inputs])
    outs = (Tensor * len(outputs))(*[view(t) for t in outputs])
    scal = (Scalar * len(scalars))(*scalars)
    stream = torch.cuda.current_stream().cuda_stream if dev == "cuda" else None
    call = Call(inputs=ins, n_inputs=len(inputs), outputs=outs, n_outputs=len(outputs), scalars=scal,
                n_scalars=len(scalars), stream=stream)
    lib.forge_kernel.argtypes = [ctypes.POINTER(Call)]
    wsb = 0
    if hasattr(lib, "forge_workspace_bytes"):
        lib.forge_workspace_bytes.argtypes = [ctypes.POINTER(Call)]
        lib.forge_workspace_bytes.restype = ctypes.c_int64
        wsb = lib.forge_workspace_bytes(ctypes.byref(call))
    ws = torch.full((max(wsb, 1),), 0xCD, dtype=torch.uint8, device=dev)  # poisoned, as the worker does
    call.workspace, call.workspace_bytes = ws.data_ptr(), wsb

    def forged():
        rc = lib.forge_kernel(ctypes.byref(call))
        if rc:
            sys.exit(f"{shape_text}: forge_kernel returned {rc} (the instance refused the call)")

    forged()
    ref = stock()
    err = max((o.float() - r.float()).abs().max().item() for o, r in zip(outputs, ref) if r.numel())
    print(f"{shape_text}: max abs difference from aten ({op}): {err:.3g}")
    if not err < 0.1:  # bf16 outputs of magnitude ~10 differ by a few ulps; NaN fails too
        if not diagnostic:
            sys.exit(f"{shape_text}: MISMATCH")
        print(f"{shape_text}: MISMATCH (a diagnostic variant: timed anyway)")
    y = outputs[0]
    first = y.clone()
    y.fill_(float("nan"))
    forged()  # a second call on the used workspace: the same bits (deterministic, state reset)
    if not torch.equal(y, first) and not diagnostic:
        sys.exit(f"{shape_text}: MISMATCH: a second call gave other bits")
    if dev != "cuda":
        return None
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    def median_us(fn):
        times = []
        for _ in range(reps):
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1000)
        return sorted(times)[len(times) // 2]

    src, dst = inputs[0], outputs[0]
    bytes_moved = src.numel() * src.element_size() + dst.numel() * dst.element_size()
    floor = bytes_moved / 4.28e12 * 1e6  # the copy ceiling measured on the H200 (KERNELS.md)
    copy = median_us(lambda: dst.copy_(src)) if dst.shape == src.shape else None  # a reduction has no copy
    return median_us(forged), median_us(stock), copy, floor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("template")
    ap.add_argument("params", help='e.g. "BLOCK=128 CHUNK=8192"')
    ap.add_argument("--shape", default="1,128,512,512", help="N,C,H,W; several separated by spaces")
    ap.add_argument("--op", default="group_norm", choices=sorted(OPS))
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--keep", help="a folder for the compiled instance, reused by later runs of the same one")
    ap.add_argument("--diagnostic", action="store_true",
                    help="a variant wrong by design (a stage left out, to time what it costs): report the check, "
                         "time it anyway; its figures are differences, never a kernel's result")
    ap.add_argument("--build-only", action="store_true",
                    help="compile into --keep and stop (prebuild on a machine without the GPU)")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    if a.build_only and not a.keep:
        sys.exit("--build-only needs --keep")
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or tmp
        os.makedirs(work, exist_ok=True)
        lib = build(a.template, a.params, dtype, a.device, work)
        if a.build_only:
            return
        rows = [(s, probe(lib, a.op, s, a.groups, dtype, a.device, a.reps, a.diagnostic)) for s in a.shape.split()]
    if a.device != "cuda":
        return
    name = os.path.basename(a.template)
    print(f"{'shape':16} {name + ' us':>24} {'floor %':>8} {'copy %':>7} {'stock us':>9} {'floor %':>8} "
          f"{'copy us':>8}  params")
    for s, (f_us, s_us, c_us, floor) in rows:
        copy_pct, copy_us = ("%7.1f" % (100 * c_us / f_us), "%8.1f" % c_us) if c_us else ("%7s" % "-", "%8s" % "-")
        print(f"{s:16} {f_us:24.1f} {100 * floor / f_us:8.1f} {copy_pct} {s_us:9.1f} "
              f"{100 * floor / s_us:8.1f} {copy_us}  {a.params}")


if __name__ == "__main__":
    main()
