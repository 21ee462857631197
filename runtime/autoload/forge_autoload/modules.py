"""Forged chains in place of module forwards (docs/PACKAGE.md, "Module forwards").

A chain target whose ops are all the ops one nn.Module class's forward runs
ships as a package entry with "module": {"class", "code"} and the op
forge_chain::c_<digest>, which libforge.so defines: its guard sends calls in the
verified signature family to the forged kernel and every other call to the
chain's ATen ops run one by one. install() makes that class's forward call the
op, in the unchanged program:

- the class is the one with the captured qualified name and the same digest of
  its forward's code (code_digest; every KernelBench class is called Model),
  patched when it is defined after install() (nn.Module.__init_subclass__) or
  at install() when it already was;
- per module instance and call signature (each argument's dtype, sizes,
  strides, device and requires_grad, which arguments are one tensor, the
  values of the other arguments; for the module and each submodule its class,
  its attributes: plain values such as eps and training by value, others such
  as functions by identity; its parameters' and buffers' metadata; at most 64
  signatures an instance), the first call runs the original forward
  under a dispatch mode that records its ATen calls. Where they are the
  chain's ops, in order, on the chain's constant arguments, each chain input
  read from a forward argument, a parameter or buffer of the module or of a
  submodule, or a Python number of the captured kind (float or int), one
  tensor where the chain reads one input twice, and the
  forward returns the last op's result, later calls of that signature call the
  op on the same sources; otherwise they run the original forward;
- the original forward runs when grad is needed (the kernel has no backward),
  under autocast, while torch.compile, torch.jit or torch.func transforms
  trace it, where a submodule or the process has forward hooks (the fused op
  would skip them), and for subclasses of the class.

The op's calls are counted in libforge.so's report as every override's are;
`forge run` prints them. Without forge run:

    torch.ops.load_library(".forge/package/libforge.so")
    sys.path.insert(0, ".forge/package"); import forge_modules; forge_modules.install()
"""
import builtins
import dis
import hashlib
import json
import os
import struct
import sys
import types

_PLAIN = (bool, int, float, str, type(None))
_installed = set()
_wanted = {}  # "module.qualname" -> [(code digest, entry)]
_patched = {}  # class -> its own forward before the patch
_subclass_hook = [False]


def code_digest(fn):
    """A digest of a function's code: bytecode, names, constants (nested code
    objects included) and defaults. The capture records it for each module
    class (forge_autoload.load), and install() patches a class only where it
    is unchanged."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    h = hashlib.sha256()

    def add(c):
        h.update(c.co_code)
        h.update(repr((c.co_names, c.co_varnames, c.co_freevars)).encode())
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                add(k)
            else:
                h.update(repr(k).encode())

    add(code)
    h.update(repr(getattr(fn, "__defaults__", None)).encode())
    return h.hexdigest()[:16]


def class_name(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _warn(msg):
    try:
        sys.stderr.write("forge: warning: %s\n" % msg)
    except Exception:
        pass


def _tensor_key(torch, t):
    return (t.dtype, tuple(t.shape), t.stride(), t.device, t.requires_grad)


def _value_key(torch, v):
    """A hashable description of an argument, or raises TypeError for a kind
    the plan cannot key on (the original forward runs)."""
    if isinstance(v, torch.Tensor):
        return ("T",) + _tensor_key(torch, v)
    if isinstance(v, float):  # by its bits: -0.0 is not 0.0 (x / s), and a NaN equals itself
        return ("float", struct.pack("<d", v))
    if isinstance(v, _PLAIN):
        return (type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_value_key(torch, x) for x in v)
    raise TypeError(type(v).__name__)


_MODULE_INTERNALS = set()  # the attributes every nn.Module has (hooks, _parameters, ...): set by install()


def _attr_key(torch, v):
    """An attribute in the call key: its value where it is plain (or a tuple or
    list of plain values), else its identity (a function, a config object: the
    forward may read anything of it) with the plain values of its own
    attributes (a config's `scale`, which the forward may read as a number)."""
    try:
        return _value_key(torch, v)
    except TypeError:
        fields = []
        for n, x in sorted(getattr(v, "__dict__", {}).items()) if not isinstance(v, type) else ():
            try:
                fields.append((n, _value_key(torch, x)))
            except TypeError:
                pass
        return ("id", id(v), tuple(fields))


def _outside_reads(cls, original):
    """Where the class's own code reads names from outside the module: (the
    module globals, name) for each global name its functions use (a SCALE the
    forward multiplies by), and the forward's closure cells. A plain value
    there is part of the call key; the values are read per call."""
    fns = [original] + [getattr(f, "__func__", f) for n, f in vars(cls).items() if n != "forward"]
    reads = []
    for fn in fns:
        code = getattr(fn, "__code__", None)
        if code is None:
            continue
        todo = [code]
        while todo:
            c = todo.pop()
            todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
            # The names the code loads as globals (not its attribute names, which
            # share co_names), bound to plain values now or not yet bound (a
            # module, a class or a function rebound to a number later is not
            # expected): read per call.
            loaded = {i.argval for i in dis.get_instructions(c) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
            loaded = {n for n in loaded if n in fn.__globals__ or not hasattr(builtins, n)}  # super, len, ...
            reads += [(fn.__globals__, n) for n in sorted(loaded) if isinstance(fn.__globals__.get(n, 0), _PLAIN)]
    cells = tuple(getattr(original, "__closure__", None) or ())
    return reads, cells


def _outside_key(torch, reads, cells):
    out = []
    for g, n in reads:
        v = g.get(n)
        if isinstance(v, _PLAIN):
            out.append((n, _value_key(torch, v)))
    for c in cells:
        try:
            v = c.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(v, _PLAIN):
            out.append(_value_key(torch, v))
    return tuple(out)


def _call_key(torch, mod, args, kwargs, outside=((), ())):
    """The call signature a plan is kept for: the arguments (and which of them
    are one tensor, or the module's own parameter), for the module and each
    submodule its class, its other attributes, parameters and buffers, and
    the plain values the class's code reads from its module's globals or the
    forward's closure (_outside_reads)."""
    flat = list(args) + [kwargs[n] for n in sorted(kwargs)]
    first = {}
    same = tuple(first.setdefault(id(a), i) for i, a in enumerate(flat) if isinstance(a, torch.Tensor))
    k = [tuple(_value_key(torch, a) for a in args), tuple((n, _value_key(torch, kwargs[n])) for n in sorted(kwargs)),
         same, _outside_key(torch, *outside)]
    own = {}  # id -> the module's own parameter or buffer
    for prefix, sub in mod.named_modules():
        k.append((prefix, type(sub)))
        k.append(tuple((n, _attr_key(torch, v)) for n, v in sub.__dict__.items() if n not in _MODULE_INTERNALS))
        for table in (sub._parameters, sub._buffers):
            k.append(tuple((n, None if t is None else _tensor_key(torch, t)) for n, t in table.items()))
            for n, t in table.items():
                own[id(t)] = (prefix, n)
    # An argument that is the module's own parameter or buffer (m(m.weight)):
    # a plan recorded so reads it through the argument.
    k.append(tuple(own.get(id(a)) for a in flat if isinstance(a, torch.Tensor)))
    return tuple(k)


def _needs_original(torch, mod, args, kwargs):
    """Why this call must run the original forward, or None."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and compiler.is_compiling():
        return "compiling"
    if torch.jit.is_scripting() or torch._C._get_tracing_state() is not None:
        return "jit"
    functorch = getattr(torch._C, "_are_functorch_transforms_active", None)
    if functorch is not None and functorch():
        return "functorch"
    if torch.is_autocast_enabled() or torch.is_autocast_enabled("cpu"):
        return "autocast"
    if torch.is_grad_enabled():
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if any(t.requires_grad for t in tensors + list(mod.parameters()) + list(mod.buffers())):
            return "grad"
    # Hooks a submodule's call would run, which the fused op skips.
    from torch.nn.modules import module as nn_module

    if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks:
        return "hooks"
    for _, sub in mod.named_modules():
        if sub is not mod and (sub._forward_hooks or sub._forward_pre_hooks):
            return "hooks"
    return None


def _schema_values(func, args, kwargs):
    out = []
    for i, a in enumerate(func._schema.arguments):
        if i < len(args):
            out.append(args[i])
        elif a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            return None
    return out


def trim_cast(torch, func, values, recs):
    """`values` (a call's arguments in schema order) cut to as many as the
    chain op's records (`recs`). A cast the chain records as _to_copy(x,
    dtype) is called with more (layout, device, ... from .to() or type_as):
    those must say what the record leaves to defaults (x's own layout and
    device, no pinning, no non-blocking copy, the preserved format), or None
    comes back. x is a tensor, or a graph node with its fake value in meta."""
    if values is None or len(values) <= len(recs) or func._schema.name != "aten::_to_copy":
        return values
    x = values[0]
    device = x.device if isinstance(x, torch.Tensor) else getattr(getattr(x, "meta", {}).get("val"), "device", None)
    neutral = {"layout": (None, torch.strided), "pin_memory": (None, False), "non_blocking": (False,),
               "memory_format": (None, torch.preserve_format)}
    for a, v in zip(func._schema.arguments[len(recs):], values[len(recs):]):
        if a.name == "device":
            ok = v is None or (device is not None and torch.device(v) == device)
        else:
            ok = any(v is n or v == n for n in neutral.get(a.name, ()))
        if not ok:
            return None
    return values[:len(recs)]


def same_constant(torch, v, rec):
    """Whether a traced argument is the chain's captured constant (its capture
    record, docs/CAPTURE.md); kinds not listed never match."""
    if not isinstance(rec, dict):
        return False
    kind, value = rec.get("type"), rec.get("value")
    if kind == "None":
        return v is None
    if kind == "bool":
        return isinstance(v, bool) and v == value
    if kind in ("int", "float"):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(value, (int, float)) \
            and float(v) == float(value)
    if kind in ("int[]", "list"):
        items = [x.get("value") if isinstance(x, dict) else x for x in (value or [])]
        return isinstance(v, (list, tuple)) and list(v) == items
    if kind == "ScalarType":
        return isinstance(v, torch.dtype) and str(v) == "torch." + str(value)
    if kind == "str":
        return v == value
    return False


def _number_of(rec, v):
    """Whether Python number v is what the chain's 0-dim input `rec` captured:
    a float where it was float64, an int where it was int64."""
    if isinstance(v, bool) or rec.get("sizes") != []:
        return False
    return (isinstance(v, float) and rec.get("dtype") == "float64") or (isinstance(v, int) and rec.get("dtype") == "int64")


def _call_order(torch, calls, ops, result):
    """The chain op each recorded call is, in call order, or None. The chain
    lists its ops in one order of their data flow; a forward whose flow
    branches (MinGPT's GELU, Gemma's RMSNorm casting its weight beside x) may
    run them in another. Walking back from the returned tensor pins every op:
    the call that returned it is the last op, and each op's op inputs are
    the calls that produced the tensors it read (linear in the calls)."""
    if len(calls) != len(ops):
        return None
    producers = {}  # id(tensor) -> [(call, output)], in call order
    for c, (_, _, _, out) in enumerate(calls):
        for k, o in enumerate(out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, torch.Tensor):
                producers.setdefault(id(o), []).append((c, k))

    def producer(t, before):
        """The last call before `before` that returned tensor t: (call, output)."""
        found = [p for p in producers.get(id(t), ()) if p[0] < before] if isinstance(t, torch.Tensor) else []
        return found[-1] if found else None

    first = result[0] if isinstance(result, (tuple, list)) and result else result
    last = producer(first, len(calls))
    if last is None or last[1] != 0:
        return None
    call_of = {len(ops) - 1: last[0]}
    for j in range(len(ops) - 1, -1, -1):
        c = call_of.get(j)
        if c is None:
            return None
        func, a, kw, _ = calls[c]
        # An in-place op is computed as its functional op; eager code calls it as recorded.
        spelled = ops[j].get("called_as") or ops[j]
        if func._schema.name != spelled["op"] or func._schema.overload_name != (spelled.get("overload") or ""):
            return None
        recs = ops[j].get("args", [])
        values = trim_cast(torch, func, _schema_values(func, a, kw), recs)
        if values is None or len(values) != len(recs):
            return None
        for v, rec in zip(values, recs):
            ref = rec.get("ref") if isinstance(rec, dict) else None
            if ref is None or "op" not in ref:
                continue
            k = int(ref["op"])
            p = producer(v, c)
            if p is None or k >= j or p[1] != int(ref.get("output", 0)) or call_of.setdefault(k, p[0]) != p[0]:
                return None
    if len(set(call_of.values())) != len(ops):
        return None
    order = [None] * len(calls)
    for j, c in call_of.items():
        order[c] = j
    return order


def _plan(torch, entry, mod, args, kwargs, calls, result):
    """The sources of the chain op's inputs, from one recorded forward: each
    ("arg", i), ("kwarg", name), ("param", name), ("buffer", name) (dotted
    for a submodule's) or ("value", tensor); or
    (None, why) when the forward is not the chain."""
    chain = entry["chain"]
    ops = chain["ops"]
    names = [(func._schema.name + ("." + func._schema.overload_name if func._schema.overload_name else ""))
             for func, _, _, _ in calls]
    if len(calls) != len(ops):
        return None, "its forward ran %s, not the chain's %d ops" % (names, len(ops))
    known = {}  # id(tensor) -> source
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            known.setdefault(id(a), ("arg", i))
    for n, a in kwargs.items():
        if isinstance(a, torch.Tensor):
            known.setdefault(id(a), ("kwarg", n))
    for n, t in mod.named_parameters():
        known.setdefault(id(t), ("param", n))
    for n, t in mod.named_buffers():
        known.setdefault(id(t), ("buffer", n))
    sources = [None] * int(chain["inputs"])
    order = _call_order(torch, calls, ops, result)
    if order is None:
        return None, "its forward's ops %s are not the chain's" % names
    outs = {}  # chain op -> its results
    for (func, a, kw, out), j in zip(calls, order):
        op = ops[j]
        recs = op.get("args", [])
        values = trim_cast(torch, func, _schema_values(func, a, kw), recs)
        if values is None or len(values) != len(recs):
            return None, "op %d's arguments differ" % j
        for v, rec in zip(values, recs):
            ref = rec.get("ref") if isinstance(rec, dict) else None
            if ref is None:
                if not same_constant(torch, v, rec):
                    return None, "op %d's %s is %r, the chain's %r" % (j, rec.get("name", "argument"), v,
                                                                        rec.get("value"))
            elif "input" in ref:
                k = int(ref["input"])
                if isinstance(v, torch.Tensor):
                    src = known.get(id(v))
                elif _number_of(entry["args"][k], v):
                    # A Python number of the captured kind: the chain reads it as a 0-dim tensor.
                    src = ("value", v, torch.tensor(v, dtype=getattr(torch, entry["args"][k]["dtype"])))
                else:
                    src = None
                if src is None:
                    return None, "op %d reads a tensor that is no argument, parameter or buffer" % j
                # A chain input two ops read (RMSNorm's x) must be one tensor here too.
                if sources[k] is not None and sources[k][:2] != src[:2]:
                    return None, "op %d reads another tensor than the chain's input %d" % (j, k)
                sources[k] = src
            elif v is not outs[int(ref["op"])][int(ref["output"])]:
                return None, "op %d does not read op %s's result" % (j, ref["op"])
        outs[j] = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if any(s is None for s in sources):
        return None, "a chain input is read by no op"
    n = int(chain["outputs"])
    last = outs[len(ops) - 1][:n]
    if n == 1 and result is not last[0]:
        return None, "its forward does not return the last op's result"
    if n > 1 and not (isinstance(result, tuple) and len(result) == n and all(r is l for r, l in zip(result, last))):
        return None, "its forward does not return the last op's results"
    return sources, None


def _record(torch, fn):
    """Runs fn() under a dispatch mode that records every ATen call:
    [(func, args, kwargs, result)], and fn's result."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):
            # Else torch wraps __torch_dispatch__ in dynamo.disable, whose
            # first call imports torch._dynamo: a second of start-up per
            # process. This mode never runs under torch.compile (forward checks).
            return False

        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self.calls.append((func, args, kwargs, out))
            return out

    with Record() as r:
        result = fn()
    return r.calls, result


def _fetch(src, args, kwargs, mod):
    kind, where = src[0], src[1]
    if kind == "arg":
        return args[where]
    if kind == "kwarg":
        return kwargs[where]
    if kind == "param":
        return mod.get_parameter(where)
    if kind == "buffer":
        return mod.get_buffer(where)
    return src[2]  # "value": the number as a tensor


_MAX_PLANS = 64  # per module instance: a forward called with ever new shapes or numbers stops recording


def _patch(cls, entries):
    import functools
    import weakref

    import torch

    original = cls.forward
    ops = []
    for e in entries:
        ns, name = e["op"].split("::", 1)
        ops.append(getattr(getattr(torch.ops, ns), name))
    # Per module instance: call key -> (op, sources), or None: the original forward.
    plans = weakref.WeakKeyDictionary()
    outside = _outside_reads(cls, original)

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if type(self) is not cls or _needs_original(torch, self, args, kwargs):
            return original(self, *args, **kwargs)
        try:
            key = _call_key(torch, self, args, kwargs, outside)
        except TypeError:
            return original(self, *args, **kwargs)
        mine = plans.setdefault(self, {})
        if key not in mine:
            if len(mine) >= _MAX_PLANS:
                return original(self, *args, **kwargs)
            calls, result = _record(torch, lambda: original(self, *args, **kwargs))
            mine[key], whys = None, []
            for e, op in zip(entries, ops):  # the class's chains (one per captured signature)
                sources, why = _plan(torch, e, self, args, kwargs, calls, result)
                if sources is not None:
                    mine[key] = (op, sources)
                    break
                whys.append("%s: %s" % (e.get("target", e["op"]), why))
            if mine[key] is None and os.environ.get("FORGE_PACKAGE_TRACE") == "1":
                _warn("%s keeps its forward for this call: %s" % (class_name(cls), "; ".join(whys)))
            return result
        plan = mine[key]
        if plan is None:
            return original(self, *args, **kwargs)
        op, sources = plan
        return op(*[_fetch(s, args, kwargs, self) for s in sources])

    forward.__forge_chain__ = [e.get("target", e["op"]) for e in entries]
    _patched[cls] = cls.__dict__.get("forward")
    cls.forward = forward


def _consider(cls):
    if cls in _patched or class_name(cls) not in _wanted:
        return
    digest = code_digest(getattr(cls, "forward", None))
    entries = [e for d, e in _wanted[class_name(cls)] if d == digest]
    if entries:
        try:
            _patch(cls, entries)
        except Exception as e:  # the class keeps its forward
            _warn("%s's forward not replaced: %s" % (class_name(cls), e))


def _all_subclasses(cls):
    seen, todo = [], [cls]
    while todo:
        for s in todo.pop().__subclasses__():
            if s not in seen:
                seen.append(s)
                todo.append(s)
    return seen


def install(package_json=None):
    """Replaces the forwards of the package's module classes (idempotent).
    Returns the targets whose class waits to be defined or was patched."""
    import torch

    package_json = package_json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "package.json")
    if package_json in _installed:
        return []
    _installed.add(package_json)
    with open(package_json) as f:
        pkg = json.load(f)
    wanted = []
    for e in pkg.get("entries", []):
        m = e.get("module")
        if e.get("chain") and isinstance(m, dict) and m.get("class") and m.get("code"):
            _wanted.setdefault(m["class"], []).append((m["code"], e))
            wanted.append(e.get("target", e["op"]))
    if not wanted:
        return []
    _MODULE_INTERNALS.update(torch.nn.Module().__dict__)
    if not _subclass_hook[0]:
        _subclass_hook[0] = True
        Module = torch.nn.Module
        previous = Module.__dict__.get("__init_subclass__")

        def init_subclass(cls, **kwargs):
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(Module, cls).__init_subclass__(**kwargs)
            _consider(cls)

        Module.__init_subclass__ = classmethod(init_subclass)
    for cls in _all_subclasses(torch.nn.Module):
        _consider(cls)
    return wanted
