"""Per-call host cost of a package's overrides (libforge.so, docs/PACKAGE.md).
For each op the package overrides: the op on a tiny input of another
signature (the fallback path: what the override adds to every call it does
not forge) and at each entry's captured signature (the forged path), timed
in one process before and after torch.ops.load_library. Medians of batches of
calls, in µs per call; on CUDA each batch ends with a synchronize, and the
tiny calls are host-bound, so they time the host's work. Prints a table last
and writes JSON (default $OUT/package_overhead.json or ./package_overhead.json).
    python3 bench/package_overhead.py PACKAGE_DIR [--batches 30] [--calls 200] [--out FILE]
PACKAGE_DIR: a store's package folder (package.json, libforge.so), e.g.
examples/tiny/.forge/package after `make demo`."""
import argparse
import json
import os
import statistics
import time

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


def tiny_args(op, dev):
    """A small call of `op` that no captured signature matches (another shape)."""
    r = lambda *s: torch.randn(*s, device=dev)  # noqa: E731
    return {
        "aten::_softmax": lambda: (r(2, 8), -1, False),
        "aten::native_layer_norm": lambda: (r(2, 8), [8], r(8), r(8), 1e-5),
        "aten::native_group_norm": lambda: (r(1, 4, 2, 2), r(4), r(4), 1, 4, 4, 2, 1e-5),
        "aten::mean.dim": lambda: (r(2, 8), [-1], True, None),
        "aten::native_batch_norm": lambda: (r(2, 4, 2, 2), r(4), r(4), r(4), r(4).abs(), False, 0.1, 1e-5),
    }[op]()


def captured_args(entry):
    """The entry's captured call, with fresh random tensors."""
    args = []
    for a in entry["args"]:
        t = a.get("type")
        if t == "Tensor":
            x = torch.randn(a["sizes"], dtype=DTYPES[a["dtype"]], device=a["device"])
            if a["dtype"] == "float32" and "var" in a.get("name", ""):
                x = x.abs()
            args.append(x)
        elif t == "None" or ("value" not in a and t != "Tensor"):
            args.append(None)
        else:
            args.append(a["value"])
    return tuple(args)


def op_fn(op):
    name, _, overload = op.split("::")[1].partition(".")
    packet = getattr(torch.ops.aten, name)
    return getattr(packet, overload) if overload else packet.default


def per_call_us(fn, args, batches, calls, cuda):
    for _ in range(calls):  # warm-up: allocator, dispatcher caches
        fn(*args)
    times = []
    for _ in range(batches):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("package_dir")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out")
    a = ap.parse_args()
    pkg = json.load(open(os.path.join(a.package_dir, "package.json")))
    cuda = pkg.get("backend") == "cuda"
    dev = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    cases = []  # (label, op, args)
    for op in sorted({e["op"] for e in pkg["entries"]}):
        cases.append(("fallback " + op, op, tiny_args(op, dev)))
    for e in pkg["entries"]:
        cases.append(("forged " + e["target"], e["op"], captured_args(e)))
    before = [per_call_us(op_fn(op), args, a.batches, a.calls, cuda) for _, op, args in cases]
    torch.ops.load_library(os.path.join(a.package_dir, "libforge.so"))
    after = [per_call_us(op_fn(op), args, a.batches, a.calls, cuda) for _, op, args in cases]
    rows = [{"case": label, "stock_us": b, "with_package_us": w, "added_us": w - b}
            for (label, _, _), b, w in zip(cases, before, after)]
    out = a.out or os.path.join(os.environ.get("OUT", "."), "package_overhead.json")
    with open(out, "w") as f:
        json.dump({"package": os.path.abspath(a.package_dir), "device": dev, "torch": torch.__version__,
                   "batches": a.batches, "calls": a.calls, "rows": rows}, f, indent=1)
    print(f"{'case':56} {'stock us':>9} {'with package us':>16} {'added us':>9}")
    for r in rows:
        print(f"{r['case'][:56]:56} {r['stock_us']:9.2f} {r['with_package_us']:16.2f} {r['added_us']:9.2f}")


if __name__ == "__main__":
    main()
