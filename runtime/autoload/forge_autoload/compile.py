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
own decomposition, so its fusion stays everywhere else. Whether a call is inside
is libforge.so's decision: its guard (runtime/package/guard.h), the one the ATen
override applies, called here through ctypes; this file only describes the
arguments. Where the build found that torch.compile traces the op to another
one (the entry's traced_as), that spelling is routed too, its arguments mapped
onto the op's (docs/PACKAGE.md).

forge run installs this on the first torch.compile call. Without forge run:

    torch.ops.load_library(".forge/package/libforge.so")
    sys.path.insert(0, ".forge/package"); import forge_compile; forge_compile.install()

FORGE_COMPILE_POLICY=forge|inductor overrides the measured choice (for
comparisons); the default, "measured", follows package.json.
FORGE_COMPILE_ROUTES_OFF=<target>,... keeps Inductor's code for those entries
whatever the policy (the build's per-route A/B, docs/PACKAGE.md).
"""
import hashlib
import json
import os

_libraries = []  # torch.library.Library objects must stay alive
_installed = set()
_compile_reported = False  # _report_compile_called


def _library(path):
    """libforge.so through ctypes, for its guard (runtime/package/guard.h). The
    program loaded it already (forge run, torch.ops.load_library, which is
    ctypes too): dlopen of the same file returns that copy. Otherwise this loads
    it, which registers its overrides as loading it always does."""
    import ctypes

    lib = ctypes.CDLL(os.path.abspath(path))
    lib.forge_guard_new.restype = ctypes.c_void_p
    lib.forge_guard_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.forge_guard_judge.restype = ctypes.c_int
    lib.forge_guard_judge.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return lib


class _Guard:
    """One package entry's guard: libforge.so's own (forge_guard_new), the
    rule the ATen override applies to every eager call: signature family,
    verified extents, no grad, thread count. Python decides nothing here."""

    INSIDE = 1  # forge_guard_judge: 0 outside, 2 inside but for the thread count

    def __init__(self, lib, entry):
        import ctypes

        self._lib, self.target = lib, entry.get("target", "an entry")
        err = ctypes.create_string_buffer(1024)
        self._handle = lib.forge_guard_new(json.dumps(entry).encode(), err, len(err))
        if not self._handle:
            raise ValueError(err.value.decode(errors="replace"))

    def judge(self, args):
        """libforge.so's verdict on a call with these arguments (forge_guard_judge)."""
        import ctypes

        err = ctypes.create_string_buffer(1024)
        v = self._lib.forge_guard_judge(self._handle, json.dumps(_describe(args)).encode(), err, len(err))
        if v < 0:
            raise ValueError(err.value.decode(errors="replace"))
        return v

    def inside(self, args):
        return self.judge(args) == self.INSIDE


def _float_bits(x):
    import struct

    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def _describe(args):
    """The arguments of a call as forge_guard_judge reads them (its comment in
    runtime/package/guard.h): a transcription of what each one is, no rule.

    Under Inductor they are fake tensors and Python values, and with dynamic
    shapes sizes, strides, offsets and ints may be SymInts. The rule compares
    concrete values, so int() takes each: the value this trace sees, and Dynamo
    then guards the graph on it, i.e. it specializes the graph on that size. The
    Python copy of the rule this replaced specialized the same way on every
    dim that must equal the captured one (its == comparisons), but bounded a
    varied dim with range guards (1 <= n <= vary_max); now a graph whose routed
    op has a symbolic varied dim is specialized on it too, and compiles again
    for another extent. Routing never changes results: the forge op calls the
    ATen op, whose override applies the same guard to the real tensors."""
    import torch

    def ints(xs):
        return [int(x) for x in xs]

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append({"kind": "Tensor", "dtype": str(a.dtype).rpartition(".")[2], "device": a.device.type,
                        "sizes": ints(a.shape), "strides": ints(a.stride()), "offset": int(a.storage_offset()),
                        "contiguous": bool(a.is_contiguous()), "requires_grad": bool(a.requires_grad)})
        elif a is None:
            out.append({"kind": "None"})
        elif isinstance(a, (bool, torch.SymBool)):
            out.append({"kind": "bool", "value": bool(a)})
        elif isinstance(a, (int, torch.SymInt)):
            out.append({"kind": "int", "value": int(a)})
        elif isinstance(a, (float, torch.SymFloat)):
            out.append({"kind": "float", "bits": _float_bits(a)})
        elif isinstance(a, torch.dtype):
            out.append({"kind": "ScalarType", "value": str(a).rpartition(".")[2]})
        elif isinstance(a, str):
            out.append({"kind": "str", "value": a})
        elif isinstance(a, (list, tuple)) and all(
                isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool) for x in a):
            out.append({"kind": "int[]", "value": ints(a)})
        else:
            out.append({"kind": "other"})
    return out


def _schema_order(op, args, kwargs):
    """A call's arguments in op's schema order, defaults filled in: Inductor
    passes keyword-only ones (gelu's approximate) by name."""
    out = list(args)
    for a in op._schema.arguments[len(args):]:
        out.append(kwargs[a.name] if a.name in kwargs else a.default_value)
    return out


def _call(op, args):
    """op on arguments in schema order, keyword-only ones by name."""
    schema = op._schema.arguments
    return op(*[v for a, v in zip(schema, args) if not a.kwarg_only],
              **{a.name: v for a, v in zip(schema, args) if a.kwarg_only})


def _route(tables, aten_op, guards, forge_op, to_captured=lambda a: a):
    """Decomposes aten_op into forge_op for calls inside an entry's family (its
    guard in libforge.so says so); Inductor's own decomposition (or none) for
    every other call. Each of `tables` gets it (Inductor's table, and the copy
    select_decomp_table() may have cached before this ran)."""
    for table in tables:
        original = table.get(aten_op)

        def decompose(*args, _original=original, **kwargs):
            captured = to_captured(_schema_order(aten_op, args, kwargs))
            if any(_inside(g, captured) for g in guards):
                return _call(forge_op, captured)
            if _original is not None:
                return _original(*args, **kwargs)
            return NotImplemented

        table[aten_op] = decompose


def _mapper(entry, spelling):
    """The captured op's arguments from a traced spelling's (docs/PACKAGE.md,
    "Under torch.compile"): args[i] is the spelling's argument that carries
    the captured argument i, or null where the captured value holds."""
    import torch

    def value(rec):  # a non-tensor argument's record (the capture's args JSON)
        if rec.get("type") == "ScalarType":
            return getattr(torch, rec["value"])
        return rec.get("value")

    captured = [value(a) for a in entry["args"]]

    def to_captured(args):
        return [args[j] if j is not None else captured[i] for i, j in enumerate(spelling["args"])]

    return to_captured


_warned = set()


def _warn_once(msg):
    if msg not in _warned:
        _warned.add(msg)
        import sys

        sys.stderr.write("forge: warning: %s\n" % msg)


def _inside(guard, args):
    try:
        return guard.inside(args)
    # A description the library cannot read, or a size no trace may read (an
    # unbacked SymInt): Inductor's code, which is never wrong, only slower.
    except Exception as e:
        _warn_once("%s: not routed under torch.compile: %s" % (guard.target, e))
        return False


def _aten(op, overload):
    import torch

    return getattr(getattr(torch.ops.aten, op.split("::")[-1]), overload or "default")


def _forge_name(aten_op):
    """The name of forge::<op> for an ATen op overload (_forge_op)."""
    name, overload = aten_op._schema.name.split("::")[-1], aten_op._overloadname
    return name if overload == "default" else "%s_%s" % (name, overload)


def _forge_op(aten_op):
    """forge::<op>, the opaque op a routed call becomes: the ATen op's schema;
    eagerly it calls the ATen op, which the dispatcher takes to the override."""
    import torch

    fname = _forge_name(aten_op)
    if not hasattr(torch.ops.forge, fname):
        schema = str(aten_op._schema)
        lib = torch.library.Library("forge", "FRAGMENT")
        lib.define(fname + schema[schema.index("("):])
        lib.impl(fname, lambda *a, **k: aten_op(*a, **k), "CompositeExplicitAutograd")
        torch.library.register_fake("forge::" + fname, lambda *a, **k: aten_op(*a, **k), lib=lib)
        _libraries.append(lib)
    return getattr(getattr(torch.ops.forge, fname), "default")


def _tables():
    """Inductor's decomposition table, and the copy select_decomp_table()
    returns (cached at its first call, maybe before install())."""
    from torch._inductor import decomposition as idecomp

    tables = [idecomp.decompositions]
    chosen = idecomp.select_decomp_table()
    if all(chosen is not t for t in tables):
        tables.append(chosen)
    return tables


def _spellings(entry, policy):
    """The spellings of entry's op that compiled graphs route: the op itself,
    then each one the build traced it to (package.json's traced_as), each as
    (op, overload, argument map or None, choice)."""
    use = entry.get("under_compile", "inductor") if policy == "measured" else policy
    out = [(entry["op"], entry.get("overload") or "default", None, use)]
    for s in entry.get("traced_as", []):
        # A spelling's own choice: the build may keep Inductor's code there.
        choice = s.get("under_compile", "inductor") if policy == "measured" else policy
        out.append((s["op"], s.get("overload") or "default", tuple(s["args"]), choice if use == "forge" else use))
    return out


def install(package_json=None, policy=None, library=None):
    """Routes compiled graphs to the forged kernels that beat Inductor. Idempotent.
    `library`: the libforge.so whose guard decides (default: the one beside package.json)."""
    import torch

    package_json = package_json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "package.json")
    library = library or os.path.join(os.path.dirname(os.path.abspath(package_json)), "libforge.so")
    policy = policy or os.environ.get("FORGE_COMPILE_POLICY", "measured")
    if package_json in _installed:
        return []
    _installed.add(package_json)
    with open(package_json) as f:
        pkg = json.load(f)
    chosen = []  # (entry, op, overload, argument map)
    chains = []  # chain entries routed in compiled graphs (the post-grad pass, _replace_chains)
    off = set(t for t in os.environ.get("FORGE_COMPILE_ROUTES_OFF", "").split(",") if t)
    for e in pkg.get("entries", []):
        if e.get("target") in off:
            continue
        if e.get("chain"):
            if (e.get("under_compile", "inductor") if policy == "measured" else policy) == "forge":
                chains.append(e)
            continue
        spellings = [s for s in _spellings(e, policy) if s[3] == "forge"]
        if spellings and any(isinstance(a, dict) and a.get("changed") for a in e.get("args", [])):
            # The forged op changes an input: a traced graph's functional
            # form has no place for that write, so Inductor keeps it.
            _warn_once("%s: not routed under torch.compile: the call changes an input" % e.get("target", e["op"]))
            continue
        chosen += [(e,) + s[:3] for s in spellings]
    lib = _library(library) if chosen or chains else None
    guards = {}  # by id(entry): libforge.so's guard of the entry
    by_spelling = {}
    for e, op, overload, mapping in chosen:
        if id(e) not in guards:
            try:
                guards[id(e)] = _Guard(lib, e)
            except ValueError as why:  # libforge.so does not override it either
                guards[id(e)] = None
                _warn_once("%s: not routed under torch.compile: %s" % (e.get("target", op), why))
        if guards[id(e)] is not None:
            # Entries share a route where the spelling leaves the same captured values.
            held = json.dumps([e["args"][i] for i, j in enumerate(mapping) if j is None]) if mapping else ""
            by_spelling.setdefault((op, overload, e["op"], e.get("overload") or "default", mapping, held),
                                   []).append(e)
    tables = _tables() if by_spelling else []
    routed = {}
    for (op, overload, cop, coverload, mapping, _), entries in sorted(by_spelling.items(), key=str):
        to_captured = _mapper(entries[0], {"args": list(mapping)}) if mapping else (lambda a: a)
        _route(tables, _aten(op, overload), [guards[id(e)] for e in entries], _forge_op(_aten(cop, coverload)),
               to_captured)
        routed.setdefault((cop, coverload), []).extend(e for e in entries if e not in routed.get((cop, coverload), []))
    # CPU entries apply by thread count, decided when a graph is traced: the
    # count then enters the cache key too. So do this file's text and the
    # library's bytes (its guard decides): a graph cached under other routing
    # code must not be reused.
    chain_routes = []  # (entry, guard, forge_chain op)
    for e in chains:
        try:
            ns, name = e["op"].split("::", 1)
            chain_routes.append((e, _Guard(lib, e), getattr(getattr(torch.ops, ns), name).default))
        except Exception as why:  # libforge.so does not define or override it either
            _warn_once("%s: not routed under torch.compile: %s" % (e.get("target", e["op"]), why))
    from torch._inductor import config as inductor_config

    if chain_routes and inductor_config.post_grad_custom_post_pass is not None:
        # The program's own post-grad pass holds the slot: no chain is replaced,
        # so none of its ops is kept from Inductor's decompositions either.
        _warn_once("chains not routed under torch.compile: the program has its own post-grad pass")
        chain_routes = []
    for e, _, _ in chain_routes:
        routed.setdefault((e["op"], "default"), []).append(e)
        # Inductor would decompose some of the chain's ops (group norm, SiLU)
        # before the post-grad pass looks for the chain: calls of the chain's
        # own signatures stay opaque forge::<op> ops, which the pass matches.
        tables = tables or _tables()
        for j, o in enumerate(e["chain"]["ops"]):
            recorded = _aten(o["op"], o.get("overload"))
            for aten_op, dropped in [(recorded, {})] + _other_spellings(recorded):
                if any(aten_op in t for t in tables):
                    _route(tables, aten_op, [_ChainOpGuard(e, j, dropped)], _forge_op(aten_op))
    by_threads = any(e.get("stock_threads") for v in routed.values() for e in v)
    routing = hashlib.sha256()
    for path in [os.path.abspath(__file__)] + ([library] if lib else []):
        with open(path, "rb") as f:
            routing.update(f.read())
    _key_inductor_cache(json.dumps([policy, sorted(routed.items()), routing.hexdigest()], sort_keys=True),
                        by_threads, chain_routes)
    return sorted("%s.%s" % k for k in routed)


def _modules():
    try:
        from forge_autoload import modules
    except ImportError:  # the package's copy (forge_modules.py beside this file)
        import forge_modules as modules
    return modules


def _same_constant(v, rec):
    import torch

    return _modules().same_constant(torch, v, rec)


def _number_of(rec, v):
    return _modules()._number_of(rec, v)


def _other_spellings(aten_op):
    """The ops a compiled graph calls where eager code called aten_op, as a
    chain's op: [(op, {position: value})], the positions aten_op has and the
    other op drops, with the value they must hold. A batch norm in eval mode
    is _native_batch_norm_legit_no_training, without the training flag. (An
    in-place op needs none: a chain's definition spells it as the functional
    op functionalization leaves, rules/capture/chain_target.cpp.)"""
    import torch

    name = aten_op._schema.name.split("::")[-1]
    if name in ("native_batch_norm", "cudnn_batch_norm"):
        return [(torch.ops.aten._native_batch_norm_legit_no_training.default, {5: False})]
    return []


def _restored(values, dropped):
    """A spelling's arguments (schema order) with those it drops put back."""
    values = list(values)
    for i in sorted(dropped):
        values.insert(i, dropped[i])
    return values


def _spelled(aten_op):
    """How a post-grad graph spells aten_op: {op: the positions it drops}, for
    aten_op itself, its other spellings (_other_spellings), and the forge::<op>
    a route decomposed any of them into (_forge_op: the same arguments)."""
    import torch

    name = aten_op._schema.name.split("::")[-1]
    if name == "_to_copy":  # a chain's cast: post-grad graphs spell a dtype conversion so
        return {aten_op: {}, torch.ops.prims.convert_element_type.default: {}}
    out = {}
    for op, dropped in [(aten_op, {})] + _other_spellings(aten_op):
        out[op] = dropped
        fname = _forge_name(op)
        if hasattr(torch.ops.forge, fname):
            out[getattr(torch.ops.forge, fname).default] = dropped
    return out


class _ChainOpGuard:
    """Whether a call of a routed chain's op j is the chain's own signature:
    its tensors of the captured dtypes and sizes, its constants the captured
    ones. It only keeps such calls opaque for the post-grad pass (_replace_chains),
    where libforge.so's guard decides on the chain; an opaque op the pass does
    not replace runs the ATen op."""

    def __init__(self, entry, j, dropped=None):
        self.target = entry.get("target", entry["op"])
        self._recs = entry["chain"]["ops"][j]["args"]
        self._dropped = dropped or {}  # a spelling's (_other_spellings)

    def inside(self, args):
        import torch

        args = _restored(args, self._dropped)
        if len(args) != len(self._recs):
            return False
        for v, rec in zip(args, self._recs):
            if "ref" not in rec:
                if not _same_constant(v, rec):
                    return False
            elif not isinstance(v, torch.Tensor):
                return False  # a Python number: the op's own decomposition keeps it (the pass matches either)
            elif str(v.dtype).rpartition(".")[2] != rec.get("dtype") or [int(d) for d in v.shape] != rec.get("sizes"):
                return False
        return True


def _match_chain(node, entry):
    """The chain `entry` ending at post-grad graph node `node` (its last op):
    (its nodes, each chain input's node or Python number, the node of its
    result), or None. Walks back from the last op through the ops' tensor
    arguments, so a chain whose data flow branches (MinGPT's GELU) matches
    like a straight one. Each op must be the chain's, on its constants; every
    intermediate is read by the chain's own ops alone."""
    import operator

    import torch

    ops = entry["chain"]["ops"]
    found = {len(ops) - 1: node}  # chain op -> its node
    inputs = [None] * int(entry["chain"]["inputs"])
    getitems = set()  # a multi-output op's result nodes
    for j in range(len(ops) - 1, -1, -1):
        cur, o = found.get(j), ops[j]
        spellings = _spelled(_aten(o["op"], o.get("overload")))
        if cur is None or cur.op != "call_function" or cur.target not in spellings:
            return None
        recs = o["args"]
        values = _modules().trim_cast(torch, cur.target, _schema_order(cur.target, cur.args, cur.kwargs), recs)
        if values is not None:
            values = _restored(values, spellings[cur.target])
        if values is None or len(values) != len(recs):
            return None
        for v, rec in zip(values, recs):
            ref = rec.get("ref")
            if ref is None:
                if not _same_constant(v, rec):
                    return None
            elif "input" in ref:
                k = int(ref["input"])
                if not (isinstance(v, torch.fx.Node) or _number_of(entry["args"][k], v)):
                    return None
                # A chain input two ops read (RMSNorm's x) must be one node or number here too.
                if inputs[k] is not None and (inputs[k] is not v if isinstance(v, torch.fx.Node) else
                                              (type(inputs[k]) is not type(v) or inputs[k] != v)):
                    return None
                inputs[k] = v
            else:
                k, out = int(ref["op"]), int(ref.get("output", 0))
                if not isinstance(v, torch.fx.Node) or k >= j:
                    return None
                producer = v
                if len(_aten(ops[k]["op"], ops[k].get("overload"))._schema.returns) > 1:
                    # A multi-output op (group norm): its result through getitem.
                    if v.op != "call_function" or v.target is not operator.getitem or v.args[1] != out:
                        return None
                    producer = v.args[0]
                    getitems.add(v)
                elif out != 0:
                    return None
                if found.setdefault(k, producer) is not producer:
                    return None
    if len(found) != len(ops) or len(set(found.values())) != len(ops):
        return None
    result = node
    if len(node.target._schema.returns) > 1:
        firsts = [u for u in node.users if u.op == "call_function" and u.target is operator.getitem and u.args[1] == 0]
        if len(firsts) != 1:
            return None
        result = firsts[0]
        getitems.add(result)
    nodes = set(found.values()) | getitems
    unread = set()  # a multi-output op's other results, which nothing reads
    for n in nodes:
        if n is result:
            continue
        for u in n.users:
            if u in nodes:
                continue
            if not (u.op == "call_function" and u.target is operator.getitem and not u.users):
                return None
            unread.add(u)
    nodes |= unread
    if any(isinstance(i, torch.fx.Node) and i in nodes for i in inputs):
        return None  # an input the chain itself computes (relu(x) * relu(x) for relu(a) * b)
    return nodes, inputs, result


def _replace_chains(graph, routes):
    """Inductor's post-grad graph: each chain of a routed entry whose inputs its
    guard (libforge.so's) takes becomes one call of the entry's forge_chain op.
    A Python number the chain reads becomes a 0-dim tensor of the captured dtype."""
    import torch

    # Longest chains first: a shorter chain that is another's first ops would
    # take those nodes and leave the longer one unmatched.
    for entry, guard, op in sorted(routes, key=lambda r: -len(r[0]["chain"]["ops"])):
        tail = entry["chain"]["ops"][-1]
        last_op = _spelled(_aten(tail["op"], tail.get("overload")))
        for node in list(graph.nodes):
            if node.graph is not graph or node.op != "call_function" or node.target not in last_op:
                continue
            m = _match_chain(node, entry)
            if m is None:
                continue
            nodes, inputs, last = m
            dtypes = [getattr(torch, a.get("dtype", "float32")) for a in entry["args"]]
            described = [i.meta.get("val") if isinstance(i, torch.fx.Node) else torch.tensor(i, dtype=d)
                         for i, d in zip(inputs, dtypes)]
            if any(d is None for d in described) or not _inside(guard, described):
                continue
            fake = last.meta.get("val")
            fake_mode = getattr(fake, "fake_mode", None) or torch._guards.detect_fake_mode(
                [d for d in described if isinstance(d, torch.Tensor)])
            with graph.inserting_before(last):
                args = []
                for i, d in zip(inputs, dtypes):
                    if isinstance(i, torch.fx.Node):
                        args.append(i)
                        continue
                    n = graph.call_function(torch.ops.aten.scalar_tensor.default, (i,), {"dtype": d})
                    if fake_mode is not None:
                        with fake_mode:
                            n.meta["val"] = torch.ops.aten.scalar_tensor.default(i, dtype=d)
                    args.append(n)
                new = graph.call_function(op, tuple(args))
            # The chain's result (a custom pass's op: no eager_input_vals, so
            # Inductor puts no layout constraints of the last op's on it).
            for k in ("val", "tensor_meta", "stack_trace"):
                if k in last.meta:
                    new.meta[k] = last.meta[k]
            # Its inputs in the layouts the graph traced (those the kernel was
            # built for), not the ones Inductor would pick (a convolution's
            # output channels-last): eager_input_vals asks for exactly these.
            vals = tuple(a.meta.get("val") for a in args)
            if all(isinstance(v, torch.Tensor) for v in vals):
                new.meta["eager_input_vals"] = (vals, {})
            last.replace_all_uses_with(new)
            # Users first: the graph's order, backwards.
            for n in reversed([n for n in graph.nodes if n in nodes]):
                graph.erase_node(n)


def _key_inductor_cache(choice, by_threads=False, chain_routes=()):
    """Inductor's on-disk FX graph cache does not hash the decomposition table,
    so a graph compiled with other choices (or without forge) would be reused.
    A post-grad pass whose uuid() names the choices enters the cache key;
    with `by_threads`, also torch's intra-op threads when the graph is keyed.
    The pass replaces the routed chains (_replace_chains)."""
    import torch
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class ForgeChoices(CustomGraphPass):
        def __init__(self, digest):
            self.digest = digest

        def __call__(self, graph):
            if chain_routes:
                _replace_chains(graph, chain_routes)

        def uuid(self):
            threads = "-t%d" % torch.get_num_threads() if by_threads else ""
            return "forge-" + self.digest + threads

    if config.post_grad_custom_post_pass is None:
        config.post_grad_custom_post_pass = ForgeChoices(hashlib.sha256(choice.encode()).hexdigest())
    else:  # the user's own pass is there: no cache rather than a wrong hit
        config.fx_graph_cache = False


def _report_compile_called():
    """In `forge build`'s end-to-end check (FORGE_PACKAGE_REPORT set), says that
    this process called torch.compile: only then can the routing change what it
    runs, so only then does its eager check depend on the routes
    (rules/package/verdict.cpp)."""
    global _compile_reported
    report = os.environ.get("FORGE_PACKAGE_REPORT")
    if not report or _compile_reported:
        return
    _compile_reported = True
    try:
        with open(os.path.join(report, "torch_compile-%d.json" % os.getpid()), "w") as f:
            f.write('{"torch_compile": true}\n')
    except OSError as e:
        _warn_once("cannot write the package report: %s" % (e,))


def install_on_first_compile(package_json):
    """Wraps torch.compile so that install() runs before the first compilation
    (importing Inductor while `import torch` is still running would be slow and fragile)."""
    import functools

    import torch

    original = torch.compile

    @functools.wraps(original)
    def compile(*args, **kwargs):
        _report_compile_called()
        try:
            install(package_json)
        except Exception as e:
            import sys

            sys.stderr.write("forge: warning: torch.compile integration failed: %s\n" % (e,))
        return original(*args, **kwargs)

    torch.compile = compile
