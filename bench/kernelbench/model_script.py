"""One KernelBench problem as a model script: what `forge build` captures and
checks, and what the runner times (bench/kernelbench/run.py copies it into each
problem's project as model.py).

    python model.py PROBLEM.py [--scale S] [--device cpu|cuda]

Loads the problem file unchanged, builds Model(*get_init_inputs()) and
get_inputs() on the device, runs the model under torch.no_grad() and prints
`kernelbench NAME: X ms/iter`, X the median of the timed calls
(forge.yaml's `latency` regex reads it). Environment:
  KB_ITERS=N      timed calls (default 3), after KB_WARMUP (default 2; 3 compiled)
  KB_COMPILE=MODE the model under torch.compile(mode=MODE), compiled in warm-up
  KB_PACKAGE=DIR  forge's package: torch.ops.load_library(DIR/libforge.so),
                  forge_compile.install() and forge_modules.install() (a chain
                  that is Model's whole forward) before the problem is loaded
  KB_TIMES=FILE   writes {"ms": [each timed call], "bytes": inputs + outputs,
                  "checksum": the last output's mean |x|, ...}
--scale S < 1 shrinks the problem for a dry run: shrink() below.
"""
import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time

SMALL = 16  # module-level integers up to this are kept: dims, kernel sizes, strides, groups


def shrink(value, scale):
    """A problem's module-level size at SCALE: integers above SMALL (and those in
    tuples) divided by the power of two nearest 1/SCALE where it divides them,
    else times SCALE, never below SMALL; the rest unchanged. KernelBench's sizes
    are mostly powers of two times small factors, so exact division keeps the
    ratios between them (a GroupNorm's channels still divisible by its groups:
    8192 features in 512 groups at 0.05 are 512 in 32, where times 0.05 made
    409 in 25). get_inputs()/get_init_inputs() read their sizes from module
    globals, so shrinking the globals shrinks the inputs and the model together."""
    if scale == 1 or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value <= SMALL:
            return value
        d = 2 ** round(math.log2(1 / scale))
        return max(SMALL, value // d if value % d == 0 else int(value * scale))
    if isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(shrink(v, scale) for v in value)
    return value


def load_problem(path, scale):
    spec = importlib.util.spec_from_file_location("kernelbench_problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, value in list(vars(mod).items()):
        if not name.startswith("_"):
            setattr(mod, name, shrink(value, scale))
    return mod


def nbytes(x):
    import torch
    if torch.is_tensor(x):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    import torch

    package = os.environ.get("KB_PACKAGE")
    if package:
        torch.ops.load_library(os.path.join(package, "libforge.so"))
        sys.path.insert(0, package)
        import forge_compile
        forge_compile.install()
        if os.path.exists(os.path.join(package, "forge_modules.py")):
            import forge_modules
            forge_modules.install()
    mod = load_problem(a.problem, a.scale)
    torch.manual_seed(0)
    with torch.device(a.device):  # weights and inputs made on the device
        model = mod.Model(*mod.get_init_inputs()).eval()
        inputs = mod.get_inputs()
    model = model.to(a.device)
    inputs = [x.to(a.device) if torch.is_tensor(x) else x for x in inputs]
    mode = os.environ.get("KB_COMPILE")
    fn = torch.compile(model, mode=mode) if mode else model
    cuda = a.device.startswith("cuda")
    warmup = int(os.environ.get("KB_WARMUP", "3" if mode else "2"))
    iters = int(os.environ.get("KB_ITERS", "3"))
    ms = []
    with torch.no_grad():
        for _ in range(warmup):
            out = fn(*inputs)
        for _ in range(iters):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = fn(*inputs)
                end.record()
                end.synchronize()
                ms.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                out = fn(*inputs)
                ms.append((time.perf_counter() - t0) * 1e3)
    name = os.path.splitext(os.path.basename(a.problem))[0]
    print(f"kernelbench {name}: {statistics.median(ms):.4f} ms/iter")
    if os.environ.get("KB_TIMES"):  # not under forge's capture: the checksum's ops would be captured too
        t = out if torch.is_tensor(out) else out[0]
        check = float(t.double().abs().mean())
        json.dump({"ms": ms, "bytes": nbytes(inputs) + nbytes(out), "checksum": check, "compile": mode,
                   "package": package}, open(os.environ["KB_TIMES"], "w"))


if __name__ == "__main__":
    main()
