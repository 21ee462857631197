"""Shared by the bench model scripts: run a model a few times and print its
steady-state time per iteration, so a plain run and a captured run compare."""
import time

import torch


def run(name, fn, warmup=2, iters=5):
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / iters * 1e3
    print(f"{name}: {ms:.2f} ms/iter")
