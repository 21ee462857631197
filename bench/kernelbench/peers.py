"""Hand-written kernels a user could pick instead of forge, timed on a
KernelBench problem's own inputs beside it (issue 32, item 3): Liger-Kernel
(Triton) and quack-kernels (CuTe DSL), where the package has the problem's op.

    python3 peers.py PROBLEM.py [--device cuda] [--iters 30] [--scale 1]

Prints one JSON object, per peer that has the op: {"call": what was called,
"matches": its output against the problem's Model (the same inputs),
"max_abs_diff", "ms": {median, spread, n} (only when it matches)} or
{"error": why not}. A peer whose package is not importable says so; a problem
no peer covers prints {}. Each peer's call is timed like the model
(model_script.py): warm-up calls (Triton and CuTe compile then), then one
CUDA-event pair per call. run.py runs this in its own process per problem
(--peers) and keeps the object in the problem's line as "peers".

The adapters map the problem's Model (its modules and forward, from the
problem's name and its nn modules) onto the peer's API, reshaping where the
peer normalizes the last dim only (KernelBench's LayerNorm normalizes three).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402
import model_script  # noqa: E402


class Unsupported(Exception):
    """The peer has no call for this problem's shape or arguments."""


def module_of(model, cls):
    for m in model.modules():
        if isinstance(m, cls):
            return m
    raise Unsupported("the Model has no %s" % cls.__name__)


def adapter(make, fn):
    make.call = getattr(fn, "__name__", "")
    return make


def last_dim_softmax(fn):
    def make(model, inputs):
        (x,) = inputs
        if x.dim() != 2:
            raise Unsupported("softmax over a %d-D input" % x.dim())
        return lambda: fn(x)
    return adapter(make, fn)


def layer_norm(fn):
    """fn(X [rows, N], W [N], B [N], eps): the Model's LayerNorm over its
    normalized dims, flattened to one."""
    def make(model, inputs):
        import torch
        ln = module_of(model, torch.nn.LayerNorm)
        (x,) = inputs
        n = 1
        for s in ln.normalized_shape:
            n *= s
        w = ln.weight.reshape(n) if ln.weight is not None else torch.ones(n, device=x.device, dtype=x.dtype)
        b = ln.bias.reshape(n) if ln.bias is not None else torch.zeros(n, device=x.device, dtype=x.dtype)
        flat = x.reshape(-1, n)
        return lambda: fn(flat, w, b, ln.eps).reshape(x.shape)
    return adapter(make, fn)


def group_norm(fn):
    """fn(X, W, B, C, G, eps) as liger_group_norm takes it."""
    def make(model, inputs):
        import torch
        gn = module_of(model, torch.nn.GroupNorm)
        (x,) = inputs
        return lambda: fn(x, gn.weight, gn.bias, gn.num_channels, gn.num_groups, gn.eps)
    return adapter(make, fn)


def cross_entropy(fn):
    def make(model, inputs):
        logits, target = inputs
        if logits.dim() != 2:
            raise Unsupported("cross entropy over a %d-D input" % logits.dim())
        return lambda: fn(logits, target)
    return adapter(make, fn)


def liger(name):
    """liger_kernel.transformers.functional.<name>, imported when called."""
    def call(*a):
        from liger_kernel.transformers import functional
        return getattr(functional, name)(*a)
    call.__name__ = "liger_kernel.transformers.functional." + name
    return call


def quack(module, name):
    def call(*a):
        import importlib
        return getattr(importlib.import_module("quack." + module), name)(*a)
    call.__name__ = "quack.%s.%s" % (module, name)
    return call


# Level 1 problem name (its file stem after the number) -> {peer: adapter(peer function)}.
PEERS = {
    "Softmax": {"liger": last_dim_softmax(liger("liger_softmax")),
                "quack": last_dim_softmax(quack("softmax", "softmax"))},
    "LayerNorm": {"liger": layer_norm(liger("liger_layer_norm"))},
    "GroupNorm": {"liger": group_norm(liger("liger_group_norm"))},
    "CrossEntropyLoss": {"liger": cross_entropy(liger("liger_cross_entropy")),
                         "quack": cross_entropy(quack("cross_entropy", "cross_entropy"))},
}


def adapters(stem):
    """The peers of a level 1 problem ("23_Softmax", "35_GroupNorm_"), by its whole name."""
    return PEERS.get(stem.split("_", 1)[-1].rstrip("_"), {})


def package_of(peer):
    return {"liger": "liger_kernel", "quack": "quack"}[peer]


def compare(got, want):
    import torch
    got, want = got.float(), want.float()
    if got.shape != want.shape:
        return False, None
    diff = float((got - want).abs().max()) if got.numel() else 0.0
    return bool(torch.allclose(got, want, rtol=1e-3, atol=1e-4)), diff


def time_calls(fn, iters, cuda):
    import time
    import torch
    for _ in range(3):
        fn()
    ms = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            ms.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
    return measure.stats(ms)


def run(problem, device, iters, scale, table=None):
    """{peer: result} for the problem file (table: {peer: adapter}, for tests)."""
    import importlib.util
    import torch
    stem = os.path.splitext(os.path.basename(problem))[0]
    table = adapters(stem) if table is None else table
    if not table:
        return {}
    mod = model_script.load_problem(problem, scale)
    torch.manual_seed(0)
    with torch.device(device):
        model = mod.Model(*mod.get_init_inputs()).eval()
        inputs = mod.get_inputs()
    model = model.to(device)
    inputs = [x.to(device) if torch.is_tensor(x) else x for x in inputs]
    out = {}
    with torch.no_grad():
        want = model(*inputs)
        for peer, make in table.items():
            pkg = package_of(peer) if peer in ("liger", "quack") else None
            if pkg and importlib.util.find_spec(pkg) is None:
                out[peer] = {"error": "%s is not installed here" % pkg}
                continue
            try:
                fn = make(model, inputs)
                got = fn()
                ok, diff = compare(got, want)
                r = {"call": getattr(make, "call", peer), "matches": ok, "max_abs_diff": diff}
                if ok:
                    r["ms"] = time_calls(fn, iters, device.startswith("cuda"))
                out[peer] = r
            except Unsupported as e:
                out[peer] = {"error": "unsupported: %s" % e}
            except Exception as e:  # a peer that fails on this problem is a result, not a crash
                out[peer] = {"error": "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    print(json.dumps(run(a.problem, a.device, a.iters, a.scale)))


if __name__ == "__main__":
    main()
