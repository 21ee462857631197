"""torch.compile baseline for one target: how fast Inductor's code for the op is.

forge's worker (C++) times candidates against the stock kernel; torch.compile is
Python-only, so this helper times the same op, on the same captured inputs,
both eager and compiled in each requested mode, with the worker's method: the
caches flushed before every timed call, eager and compiled alternating, medians
and interquartile ranges; on CUDA, device time only (see Timer).

Two ways to run it. `forge_compile_bench.py FILE` (or the request on stdin):
one target's request (the worker's request shape, docs/WORKER.md: op,
overload, args, samples, bench), one JSON object on stdout. `--serve`: what
forge runs (rules/evaluate/compile_baseline.cpp), one process per build
through rules/evaluate/worker_client.h's JSON lines: a hello line, then per
request line (a request with an "id") one reply line {"id", "result"} or
{"id", "error"}; importing torch and Inductor costs seconds, paid once per
build instead of once per target. The result object:

  {"ok": true, "device": "cuda", "torch": "2.11.0",
   "eager_us": {"median", "spread", "reps"},
   "modes": {"default": {"median", "spread", "reps", "compile_seconds"} | {"error"}, ...},
   "best_mode": "default", "compile_us": {...the best mode's...},
   "traced_as": [{"op", "overload", "args"}...], "traced_as_problem": "..."}

A chain target's request carries "chain" (its definition, rules/capture/chain_target.h)
instead of op and overload: args are the chain's inputs, and the function timed and
compiled runs the chain's ATen ops one by one (chain_function), which Inductor fuses.

"traced_as" lists the ops torch.compile's front end traces the captured call to
where that is another op (spellings(), below), for the package's routing
(runtime/autoload/forge_autoload/compile.py); "traced_as_problem" says why a
spelling found cannot be routed. Exit status 0 with "ok": false and "error"
when the op cannot be compiled.
"""
import gc
import json
import os
import statistics
import sys
import time
import traceback

import torch


def torch_dtype(name):
    """The torch dtype of a capture's dtype name: the names of forge's dtype
    table (runtime/common/dtypes.h) are torch's own attribute names."""
    d = getattr(torch, name, None)
    if not isinstance(d, torch.dtype):
        raise KeyError(name)
    return d


def build_args(req, device):
    """The op's arguments from the capture's records; tensors from the first sample."""
    sample = (req.get("samples") or [{}])[0]
    files = sample.get("inputs", sample) if isinstance(sample, dict) else sample
    args = []
    gen = torch.Generator().manual_seed(int(req.get("seed", 1234)))
    for i, rec in enumerate(req["args"]):
        t = rec.get("type")
        if t == "Tensor":
            dtype = torch_dtype(rec["dtype"])
            sizes, strides = rec["sizes"], rec["strides"]
            entry = files[i] if i < len(files) else None
            n = 1
            for s in sizes:
                n *= s
            if entry and entry.get("file"):
                raw = open(entry["file"], "rb").read()
                flat = torch.frombuffer(bytearray(raw), dtype=dtype)[:n].clone()
                # A large input's sample holds its leading blocks only
                # (runtime/common/sample_part.h): tiled over the tensor, as the worker does.
                if 0 < flat.numel() < n:
                    flat = flat.repeat((n + flat.numel() - 1) // flat.numel())[:n]
            elif dtype.is_floating_point:
                flat = torch.randn(n, generator=gen).to(dtype)
            else:
                flat = torch.randint(0, 16, (n,), generator=gen).to(dtype)
            x = torch.empty_strided(sizes, strides, dtype=dtype)
            x.copy_(flat.view(sizes) if n else flat.reshape(sizes))
            # A CPU tensor of a CUDA call (a Python number the chain reads) stays on the CPU.
            args.append(x if str(rec.get("device", "")).startswith("cpu") else x.to(device))
        elif t == "None":
            args.append(None)
        elif t == "ScalarType":
            args.append(torch_dtype(rec["value"]))
        elif t in ("int", "float", "bool", "str", "int[]", "float[]", "bool[]"):
            args.append(rec["value"])
        elif t == "list":
            args.append([r["value"] for r in rec["value"]])
        else:
            raise ValueError("argument %d of type %s is not supported" % (i, t))
    return args


def aten_op(name, overload):
    """torch.ops.aten.<name>.<overload> from a definition's "aten::name" and overload."""
    return getattr(getattr(torch.ops.aten, name.split("::")[-1]), overload or "default")


def chain_function(chain, inputs):
    """A function of no arguments running the chain's ops one by one on
    `inputs`, each argument its captured constant, a chain input ({"ref":
    {"input": i}}) or an earlier op's return ({"ref": {"op": j, "output": k}}).
    Written as Python source and exec'd: Dynamo traces plain code, where a
    loop over a list of ops and records stops it ("sourceless builder")."""
    lines, consts = ["def run():"], {}
    for j, o in enumerate(chain["ops"]):
        op = aten_op(o["op"], o.get("overload"))
        recs = o["args"]
        values = build_args({"args": [{"type": "None"} if "ref" in r else r for r in recs], "samples": []}, "cpu")
        parts = []
        for a, r, v in zip(op._schema.arguments, recs, values):
            ref = r.get("ref")
            if ref is None:
                name = "c%d_%d" % (j, len(parts))
                consts[name] = v
                text = name
            elif "input" in ref:
                text = "inputs[%d]" % ref["input"]
            else:
                multi = len(aten_op(chain["ops"][ref["op"]]["op"], chain["ops"][ref["op"]].get("overload"))._schema.returns) > 1
                text = "t%d[%d]" % (ref["op"], ref["output"]) if multi else "t%d" % ref["op"]
            parts.append(("%s=%s" % (a.name, text)) if a.kwarg_only else text)
        consts["op%d" % j] = op
        lines.append("    t%d = op%d(%s)" % (j, j, ", ".join(parts)))
    n_out = int(chain["outputs"])
    last = len(chain["ops"]) - 1
    multi = len(aten_op(chain["ops"][-1]["op"], chain["ops"][-1].get("overload"))._schema.returns) > 1
    if not multi:
        lines.append("    return t%d" % last)
    else:
        lines.append("    return " + ("t%d[0]" % last if n_out == 1 else "tuple(t%d[:%d])" % (last, n_out)))
    scope = dict(consts, inputs=inputs)
    exec("\n".join(lines), scope)
    return scope["run"]


def split_args(op, args):
    """Positional and keyword-only arguments: the capture records all in schema order."""
    positional, kwargs = [], {}
    for a, v in zip(op._schema.arguments, args):
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            positional.append(v)
    return positional, kwargs


def schema_args(op, args, kwargs):
    """A call's arguments in schema order, defaults filled in."""
    out = list(args)
    for a in op._schema.arguments[len(args):]:
        out.append(kwargs[a.name] if a.name in kwargs else a.default_value)
    return out


def spellings(op, args):
    """What torch.compile's front end (AOTAutograd: the Python dispatcher,
    functionalization) traces op(*args) to, in no-grad mode, before Inductor's
    decomposition table applies: a call of another op where the captured one
    is redirected (an eval native_batch_norm becomes
    _native_batch_norm_legit_no_training). Returns (spellings, problem): each
    spelling {"op", "overload", "args"}, args[i] naming the spelling's
    argument (schema order) that carries the captured op's argument i, or
    None where the spelling has none (the captured value holds); problem is
    None or why the trace cannot be routed. Tensors map by identity; other
    arguments by name and value, then the mapping is checked by running both
    ops on these inputs."""
    from functorch.compile import aot_function

    idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def call(*ts):
        full = list(args)
        for i, t in zip(idx, ts):
            full[i] = t
        p, k = split_args(op, full)
        return op(*p, **k)

    graphs = []
    with torch.no_grad():
        aot_function(call, fw_compiler=lambda gm, _: graphs.append(gm) or gm, decompositions={})(
            *[args[i] for i in idx])
    nodes = list(graphs[0].graph.nodes)
    placeholder = {n: idx[k] for k, n in enumerate(n for n in nodes if n.op == "placeholder")}
    ops = [n for n in nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]
    names = ", ".join(str(n.target) for n in ops)
    if len(ops) != 1:
        return [], "traced to %s: not one call" % (names or "no op")
    node = ops[0]
    traced = node.target
    if traced == op:
        return [], None
    formal = [a.name for a in op._schema.arguments]
    got = schema_args(traced, node.args, node.kwargs)
    mapping = [None] * len(args)
    for j, (a, v) in enumerate(zip(traced._schema.arguments, got)):
        if isinstance(v, torch.fx.Node):
            if v not in placeholder:
                return [], "traced to %s, whose %s is computed" % (traced, a.name)
            mapping[placeholder[v]] = j
            continue
        # A value: the captured argument of that name, else the only one equal to it.
        same = [i for i in range(len(args)) if formal[i] == a.name and args[i] == v and type(args[i]) is type(v)]
        same = same or [i for i in range(len(args)) if not isinstance(args[i], torch.Tensor) and
                        type(args[i]) is type(v) and args[i] == v and mapping[i] is None]
        if len(same) != 1:
            if a.has_default_value() and v == a.default_value:
                continue  # the spelling's own default: nothing of the captured call
            return [], "traced to %s, whose %s=%r matches no captured argument" % (traced, a.name, v)
        mapping[same[0]] = j
    if any(mapping[i] is None for i in idx):
        return [], "traced to %s, which drops a tensor argument" % traced
    # The mapping, checked: the spelling run on the captured call's arguments
    # as the trace passes them gives the captured op's results.
    with torch.no_grad():
        want = call(*[args[i] for i in idx])
        p, k = split_args(traced, [args[mapping.index(j)] if j in mapping else v for j, v in enumerate(got)])
        have = traced(*p, **k)
    want = want if isinstance(want, (tuple, list)) else (want,)
    have = have if isinstance(have, (tuple, list)) else (have,)
    same = len(want) == len(have) and all(
        isinstance(w, torch.Tensor) and isinstance(h, torch.Tensor) and w.shape == h.shape and
        w.dtype == h.dtype and torch.equal(w, h) for w, h in zip(want, have))
    if not same:
        return [], "traced to %s, whose results differ from the captured op's" % traced
    name = traced._schema.name.split("::")[-1]
    return [{"op": "aten::" + name, "overload": traced._overloadname, "args": mapping}], None


class Timer:
    """Device time of one call, caches flushed first. On CUDA the events bracket
    the call on the stream, so any host time between them (Dynamo's guards and
    Python wrappers cost tens of microseconds per compiled call) would count as
    idle device time. A GPU spin enqueued after the flush keeps the device
    busy while the host queues the call: the figure is then the device time
    of the op alone, as in forge's worker, whose C++ calls cost less host time
    than its flush takes on the device."""

    def __init__(self, device, flush_bytes=256 << 20):
        self.cuda = device == "cuda"
        self.flush_buf = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device)
        self.spin_cycles = 0
        self.spin_us = 0.0

    def cover_host_time(self, fns):
        """Sizes the spin: twice the slowest host time of a call among fns, plus 50 us.
        Without torch.cuda._sleep (a private helper) there is no spin, and the
        record's host_cover_us is 0: compiled times then include host time."""
        if not self.cuda or not hasattr(torch.cuda, "_sleep"):
            return
        host = 0.0
        for f in fns:
            for _ in range(5):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                host = max(host, time.perf_counter() - t0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(1000000)
        end.record()
        end.synchronize()
        cycles_per_us = 1000000 / max(start.elapsed_time(end) * 1e3, 1e-3)
        self.spin_us = max(self.spin_us, 2 * host * 1e6 + 50)
        self.spin_cycles = int(cycles_per_us * self.spin_us)

    def time_us(self, fn):
        self.flush_buf.zero_()  # evicts the inputs from L2 (GPU) / the caches (CPU)
        if self.cuda:
            if self.spin_cycles:
                torch.cuda._sleep(self.spin_cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6


def summary(xs):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return {"median": statistics.median(xs), "spread": q[2] - q[0], "reps": len(xs)}


def measure(req):
    """The result object for one request (the module docstring)."""
    device = "cuda" if any(r.get("type") == "Tensor" and str(r.get("device", "")).startswith("cuda")
                           for r in req["args"]) else "cpu"
    bench = req.get("bench", {})
    if device == "cpu" and bench.get("threads"):
        torch.set_num_threads(int(bench["threads"]))
    args = build_args(req, device)
    if "chain" in req:
        eager = chain_function(req["chain"], args)
        found, problem = [], None
    else:
        op = aten_op(req["op"], req.get("overload"))
        try:
            found, problem = spellings(op, args)
        except Exception as e:  # a trace that fails routes nothing more; the timing goes on
            found, problem = [], "the trace failed: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
        if req.get("spellings_only"):
            return {"ok": True, "traced_as": found, "traced_as_problem": problem}
        # The capture records arguments in schema order; keyword-only ones (mean.dim's
        # dtype) must be passed by name, which Dynamo enforces and eager does not.
        args, kwargs = split_args(op, args)

        def eager():
            return op(*args, **kwargs)

    out = {"ok": True, "device": device, "torch": torch.__version__, "modes": {}, "traced_as": found}
    if problem:
        out["traced_as_problem"] = problem
    timer = Timer(device)
    warmup, reps = int(bench.get("warmup", 5)), int(bench.get("reps", 30))
    min_seconds = float(bench.get("min_seconds", 0.2))
    eager_times = []
    with torch.no_grad():
        for mode in req.get("modes", ["default", "max-autotune-no-cudagraphs"]):
            torch._dynamo.reset()
            fn = torch.compile(eager, mode=mode, dynamic=False, fullgraph=True)
            t0 = time.perf_counter()
            try:
                fn()
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:  # an op Inductor cannot compile is a result, not a crash
                out["modes"][mode] = {"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])}
                continue
            compile_seconds = time.perf_counter() - t0
            for _ in range(warmup):
                timer.time_us(eager)
                timer.time_us(fn)
            timer.cover_host_time([eager, fn])
            ct = []
            t_start = time.perf_counter()
            while len(ct) < reps or time.perf_counter() - t_start < min_seconds:
                if len(ct) % 2 == 0:
                    eager_times.append(timer.time_us(eager))
                    ct.append(timer.time_us(fn))
                else:
                    ct.append(timer.time_us(fn))
                    eager_times.append(timer.time_us(eager))
                if time.perf_counter() - t_start > float(bench.get("max_seconds", 10)):
                    break
            out["modes"][mode] = dict(summary(ct), compile_seconds=compile_seconds)
    timed = {m: r for m, r in out["modes"].items() if "median" in r}
    if not timed:
        out.update(ok=False, error="; ".join("%s: %s" % (m, r["error"]) for m, r in out["modes"].items()))
    else:
        best = min(timed, key=lambda m: timed[m]["median"])
        out["best_mode"] = best
        out["compile_us"] = timed[best]
        out["eager_us"] = summary(eager_times)
        if timer.cuda:
            out["host_cover_us"] = timer.spin_us  # the spin ahead of each timed call
    return out


def serve():
    """Requests from stdin, one per line, until it closes. The replies go to
    the original stdout; anything else printed to fd 1 (Inductor, compilers it
    runs) is sent to stderr, so a stray line can never pass for a reply."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    replies.write(json.dumps({"hello": "forge_compile_bench", "torch": torch.__version__}) + "\n")
    replies.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        reply = {"id": req.get("id")}
        try:
            reply["result"] = measure(req)
        except Exception:  # the helper failing on one target: that target's record says why
            reply["error"] = traceback.format_exc()[-2000:]
        # Each target starts from a clean compiler state and frees the last one's tensors.
        torch._dynamo.reset()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    req = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
    json.dump(measure(req), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
