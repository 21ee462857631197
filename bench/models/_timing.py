"""Shared by the bench model scripts: run a model a few times and print its
steady-state time per iteration, so a plain run, a captured run and a run
under `forge run` compare (bench/gpu/e2e.py reads the last line).
BENCH_COMPILE=MODE runs the model under torch.compile(mode=MODE) (compiled
during warm-up); BENCH_ITERS sets the timed iterations (default 5)."""
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
    # A checksum of the last output, so runs with and without forge compare.
    t = out if torch.is_tensor(out) else getattr(out, "logits", None)
    check = float(t.float().abs().mean()) if torch.is_tensor(t) else float("nan")
    print(f"{name}: {ms:.2f} ms/iter (checksum {check:.6g})")
