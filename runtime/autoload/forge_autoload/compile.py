"""torch.compile integration of libforge.so (docs/PACKAGE.md, "Under torch.compile").

Inductor decomposes ops such as native_layer_norm into primitives and generates
its own kernels, so compiled graphs never reach the ATen overrides. For each
package entry whose kernel forge measured faster than Inductor's code for the
same op and signature ("under_compile": "forge" in package.json), this installs
a decomposition in Inductor's table that, for calls inside the entry's
signature family, emits an opaque custom op forge::<op> instead. Inductor keeps
such an op as an external call; at run time it calls the ATen op, which the
dispatcher sends to libforge.so's guarded kernel. Every other call (other
signatures, ops where Inductor was faster, calls needing grad) keeps Inductor's
own decomposition, so its fusion stays everywhere else.

forge run installs this on the first torch.compile call. Without forge run:

    torch.ops.load_library(".forge/package/libforge.so")
    sys.path.insert(0, ".forge/package"); import forge_compile; forge_compile.install()

FORGE_COMPILE_POLICY=forge|inductor overrides the measured choice (for
comparisons); the default, "measured", follows package.json.
"""
import hashlib
import json
import os

_libraries = []  # torch.library.Library objects must stay alive
_installed = set()


def _dtype(name):
    import torch

    return getattr(torch, name, None)


def _vary_bounds(entry):
    """Per signature_family.vary entry, the extents (lo, hi) the worker verified:
    1..vary_max[k] (package.json's vary_max, the accepted record's
    verify.vary_max), or, for an entry packaged without a well-formed one, the
    captured extent alone; None when the entry names no captured tensor dim."""
    vary = entry.get("vary", [])
    vmax = entry.get("vary_max")
    if (isinstance(vmax, list) and len(vmax) == len(vary)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in vmax)):
        return [(1, n) for n in vmax]
    bounds = []
    for v in vary:
        try:
            if v["arg"] < 0 or v["dim"] < 0:  # as in C++: no dim counted from the end
                raise IndexError
            captured = entry["args"][v["arg"]]["sizes"][v["dim"]]
        except (KeyError, IndexError, TypeError):
            captured = None
        bounds.append((captured, captured) if isinstance(captured, int) else None)
    return bounds


def _within_verified(entry, extent):
    """Is every varied extent of a call inside what the worker verified? The
    bound of the package guard; its C++ twin is within_verified in
    runtime/common/signature_family.h, the one home of the signature-family
    rule, which libforge.so's guard and the worker use. Below 1 never: an
    empty batch goes to stock."""
    bounds = _vary_bounds(entry)
    if len(extent) != len(bounds):
        return False
    for n, b in zip(extent, bounds):
        if n is None or b is None or not (max(1, b[0]) <= n <= b[1]):
            return False
    return True


def _matches(entry, args):
    """The Python mirror of the package guard (runtime/package/override.cpp's
    matches over runtime/common/signature_family.h)."""
    import torch

    recs = entry["args"]
    if len(args) < len(recs):
        return False
    # A single-threaded CPU kernel beat stock at stock_threads intra-op threads.
    if 0 < entry.get("stock_threads", 0) < torch.get_num_threads():
        return False
    vary = {(v["arg"], v["dim"]): k for k, v in enumerate(entry.get("vary", []))}
    extent = [None] * len(entry.get("vary", []))
    pins = {p["arg"]: p["vary"] for p in entry.get("pins", [])}
    for i, rec in enumerate(recs):
        a, t = args[i], rec.get("type")
        if t == "Tensor":
            if not isinstance(a, torch.Tensor) or a.dtype != _dtype(rec["dtype"]):
                return False
            if a.device.type != rec["device"].split(":")[0] or a.dim() != len(rec["sizes"]):
                return False
            if torch.is_grad_enabled() and a.requires_grad:
                return False
            for d, size in enumerate(rec["sizes"]):
                if (i, d) in vary:
                    extent[vary[(i, d)]] = a.shape[d]
                elif a.shape[d] != size:
                    return False
            if entry.get("contiguous", True):
                if not a.is_contiguous():
                    return False
            elif list(a.stride()) != rec["strides"]:
                return False
        elif t == "None":
            if a is not None:
                return False
        elif i in pins:
            if extent[pins[i]] is None or a != extent[pins[i]]:
                return False
        elif t in ("int", "float", "bool", "str"):
            if a != rec["value"]:
                return False
        elif t == "int[]":
            if list(a) != rec["value"]:
                return False
        else:
            return False
    return _within_verified(entry, extent)


# What torch.compile traces in place of a captured op: the captured op's
# entries then guard the traced op too, whose arguments map onto the captured
# op's. BatchNorm in eval mode runs native_batch_norm eagerly but traces to
# _native_batch_norm_legit_no_training(input, weight, bias, running_mean,
# running_var, momentum, eps): the same kernel without `training`.
# Routed only under FORGE_COMPILE_POLICY=forge: in a compiled graph Inductor
# fuses a batch norm with the ReLU and residual add after it, which an opaque
# forge op breaks (an extra pass over the tensor), and the build's per-op
# comparison does not see that (docs/PACKAGE.md). Measured choice: Inductor's.
_TRACED_AS = {
    ("aten::native_batch_norm", "default"): [
        ("_native_batch_norm_legit_no_training", "default", lambda a: tuple(a[:5]) + (False,) + tuple(a[5:])),
    ],
}


def _route(table, aten_op, entries, forge_op, to_captured=lambda a: a):
    """Decomposes aten_op into forge_op for calls inside an entry's family;
    Inductor's own decomposition (or none) for every other call."""
    original = table.get(aten_op)

    def decompose(*args, **kwargs):
        if not kwargs:
            captured = to_captured(args)
            if any(_matches(e, captured) for e in entries):
                return forge_op(*captured)
        if original is not None:
            return original(*args, **kwargs)
        return NotImplemented

    table[aten_op] = decompose


def _install_op(op, overload, entries, traced_too):
    import torch
    from torch._inductor import decomposition as idecomp

    name = op.split("::")[-1]
    aten_op = getattr(getattr(torch.ops.aten, name), overload)
    fname = name if overload == "default" else "%s_%s" % (name, overload)
    schema = str(aten_op._schema)
    lib = torch.library.Library("forge", "FRAGMENT")
    lib.define(fname + schema[schema.index("("):])
    # The forge op calls the ATen op eagerly: the dispatcher takes it to the override.
    lib.impl(fname, lambda *args: aten_op(*args), "CompositeExplicitAutograd")
    torch.library.register_fake("forge::" + fname, lambda *args: aten_op(*args), lib=lib)
    _libraries.append(lib)
    forge_op = getattr(getattr(torch.ops.forge, fname), "default")
    _route(idecomp.decompositions, aten_op, entries, forge_op)
    spellings = _TRACED_AS.get((op, overload), []) if traced_too else []
    for traced, traced_overload, to_captured in spellings:
        traced_op = getattr(getattr(torch.ops.aten, traced), traced_overload)
        _route(idecomp.decompositions, traced_op, entries, forge_op, to_captured)


def install(package_json=None, policy=None):
    """Routes compiled graphs to the forged kernels that beat Inductor. Idempotent."""
    package_json = package_json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "package.json")
    policy = policy or os.environ.get("FORGE_COMPILE_POLICY", "measured")
    if package_json in _installed:
        return []
    _installed.add(package_json)
    with open(package_json) as f:
        pkg = json.load(f)
    by_op = {}
    for e in pkg.get("entries", []):
        use = e.get("under_compile", "inductor") if policy == "measured" else policy
        if use == "forge":
            by_op.setdefault((e["op"], e.get("overload") or "default"), []).append(e)
    for (op, overload), entries in sorted(by_op.items()):
        _install_op(op, overload, entries, traced_too=policy == "forge")
    # CPU entries apply by thread count, decided when a graph is traced: the
    # count then enters the cache key too. So does this file's text: a graph
    # cached under other routing code must not be reused.
    by_threads = any(e.get("stock_threads") for v in by_op.values() for e in v)
    with open(os.path.abspath(__file__), "rb") as f:
        routing = hashlib.sha256(f.read()).hexdigest()
    _key_inductor_cache(json.dumps([policy, sorted(by_op.items()), routing], sort_keys=True), by_threads)
    return sorted("%s.%s" % k for k in by_op)


def _key_inductor_cache(choice, by_threads=False):
    """Inductor's on-disk FX graph cache does not hash the decomposition table,
    so a graph compiled with other choices (or without forge) would be reused.
    A no-op post-grad pass whose uuid() names the choices enters the cache key;
    with `by_threads`, also torch's intra-op threads when the graph is keyed."""
    import torch
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class ForgeChoices(CustomGraphPass):
        def __init__(self, digest):
            self.digest = digest

        def __call__(self, graph):
            pass

        def uuid(self):
            threads = "-t%d" % torch.get_num_threads() if by_threads else ""
            return "forge-" + self.digest + threads

    if config.post_grad_custom_post_pass is None:
        config.post_grad_custom_post_pass = ForgeChoices(hashlib.sha256(choice.encode()).hexdigest())
    else:  # the user's own pass is there: no cache rather than a wrong hit
        config.fx_graph_cache = False


def install_on_first_compile(package_json):
    """Wraps torch.compile so that install() runs before the first compilation
    (importing Inductor while `import torch` is still running would be slow and fragile)."""
    import functools

    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile(*args, **kwargs):
        try:
            install(package_json)
        except Exception as e:
            import sys

            sys.stderr.write("forge: warning: torch.compile integration failed: %s\n" % (e,))
        return original(*args, **kwargs)

    torch.compile = compile
