"""Shared by the bench model scripts: run a model a few times and print its
steady-state time per iteration, so a plain run, a captured run and a run
under `forge run` compare (bench/gpu/e2e.py reads the last line).
BENCH_COMPILE=MODE runs the model under torch.compile(mode=MODE) (compiled
during warm-up); BENCH_ITERS sets the timed iterations (default 5).
BENCH_PROFILE=FILE then runs 3 more iterations under torch.profiler and
writes per-name host and device time to FILE (bench/gpu/profile_e2e.py)."""
import json
import os
import time

import torch

# Same weights and inputs in every process: outputs compare across runs.
torch.manual_seed(0)


def run(name, fn, warmup=2, iters=None):
    iters = iters or int(os.environ.get("BENCH_ITERS", "5"))
    mode = os.environ.get("BENCH_COMPILE")
    if mode:
        fn = torch.compile(fn, mode=mode)
        warmup = max(warmup, 3)
    with torch.no_grad():
        for _ in range(warmup):
            out = fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            out = fn()
        torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / iters * 1e3
    if os.environ.get("BENCH_PROFILE"):
        profile(fn, os.environ["BENCH_PROFILE"])
    # A checksum of the last output, so runs with and without forge compare.
    t = out if torch.is_tensor(out) else getattr(out, "logits", None)
    check = float(t.float().abs().mean()) if torch.is_tensor(t) else float("nan")
    print(f"{name}: {ms:.2f} ms/iter (checksum {check:.6g})")


def profile(fn, path, iters=3):
    """Per name (ATen op or GPU kernel): calls, self host µs and self device
    µs per iteration, and the iteration's wall and device-busy µs, so a run
    with forge's package and one without compare op by op."""
    from torch.profiler import ProfilerActivity, profile as prof

    with torch.no_grad(), prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / iters * 1e6
    rows = {}  # by name: key_averages() may split one name (e.g. user annotations)
    for e in p.key_averages():
        dev = getattr(e, "self_device_time_total", None)
        if dev is None:
            dev = getattr(e, "self_cuda_time_total", 0.0)
        r = rows.setdefault(e.key, {"name": e.key, "calls": 0.0, "host_us": 0.0, "device_us": 0.0})
        r["calls"] += e.count / iters
        r["host_us"] += e.self_cpu_time_total / iters
        r["device_us"] += dev / iters
    rows = list(rows.values())
    # Device busy time: the union of kernel and memcpy intervals on the GPU
    # (not user annotations, which span the gaps between kernels too).
    spans = sorted((k.time_range.start, k.time_range.end) for k in p.events()
                   if str(getattr(k, "device_type", "")).endswith("CUDA") and not getattr(k, "is_user_annotation", False)
                   and k.time_range.end > k.time_range.start)
    busy, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            busy += b - max(a, end)
            end = b
    json.dump({"iters": iters, "wall_us": wall, "device_busy_us": busy / iters, "rows": rows}, open(path, "w"), indent=1)
