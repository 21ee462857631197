"""modules.py's plans (runtime/autoload/forge_autoload/modules.py) on the cases
where a recorded forward must not stand for a later call: arguments that were
one tensor, two reads of one chain input that are two tensors, instances whose
attributes differ, a Python number of another kind. The forge_chain ops are
stand-ins computing the chain in torch, so no forge build is needed; each case
checks the patched forward's results against the original math. Exit 77: no torch."""
import os
import sys
import time
import types

try:
    import torch
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "runtime", "autoload"))
from forge_autoload import modules  # noqa: E402

lib = torch.library.Library("forge_chain", "DEF")
calls = {"add_relu": 0, "add_relu_mul": 0, "relu_then": 0, "scale": 0, "branches": 0, "gemma": 0, "div_exp": 0,
         "exps": 0}


def define(name, schema, fn):
    def counted(*a):
        calls[name] += 1
        return fn(*a)

    lib.define(name + schema)
    lib.impl(name, counted, "CompositeExplicitAutograd")


define("add_relu", "(Tensor a, Tensor b) -> Tensor", lambda a, b: torch.relu(a + b))
define("add_relu_mul", "(Tensor x, Tensor a) -> Tensor", lambda x, a: torch.relu(x + a) * a)
define("relu_then", "(Tensor x) -> Tensor", lambda x: torch.sigmoid(torch.relu(x)))
define("scale", "(Tensor x, Tensor k) -> Tensor", lambda x, k: torch.sigmoid(x) * k)
define("branches", "(Tensor x) -> Tensor", lambda x: torch.exp(x) * torch.tanh(x))
define("div_exp", "(Tensor x, Tensor s) -> Tensor", lambda x, s: torch.exp(x / s))
define("exps", "(" + ", ".join("Tensor t%d" % k for k in range(10)) + ") -> Tensor",
       lambda *t: sum(torch.exp(x) for x in t))
define("gemma", "(Tensor w, Tensor x) -> Tensor", lambda w, x: (torch.sigmoid(x.float()) * torch.exp(w.float())).type_as(x))


def inp(k):
    return {"ref": {"input": k}}


def out(j):
    return {"ref": {"op": j, "output": 0}}


ONE = {"type": "int", "value": 1}


def entry(name, args, ops):
    return {"op": "forge_chain::" + name, "target": name, "args": args,
            "chain": {"inputs": len(args), "outputs": 1, "ops": ops}}


T = {"dtype": "float32", "sizes": [3, 8]}
add = {"op": "aten::add", "overload": "Tensor", "args": [inp(0), inp(1), ONE]}
relu = {"op": "aten::relu", "overload": "", "args": [out(0)]}


class AddRelu(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b)


class AddReluMul(torch.nn.Module):  # captured where a and b held the same data: one input
    def forward(self, x, a, b):
        return torch.relu(x + a) * b


class ReluThen(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(torch.relu(x))


class Scale(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return torch.sigmoid(x) * self.k


class Branches(torch.nn.Module):  # two branches that meet: the chain lists tanh first, the forward runs exp first
    def forward(self, x):
        return torch.exp(x) * torch.tanh(x)


class BranchesSwapped(torch.nn.Module):  # the same ops, the product's operands the other way round
    def forward(self, x):
        return torch.tanh(x) * torch.exp(x)


SCALE = 2.0  # a module global the forward reads


class DivExp(torch.nn.Module):  # x / s, s a Python number: an argument, an attribute's field or a global
    def __init__(self):
        super().__init__()
        self.cfg = types.SimpleNamespace(scale=2.0)

    def forward(self, x, s=None):
        return torch.exp(x / (s if s is not None else self.cfg.scale if self.cfg.scale != 2.0 else SCALE))


class AddOwn(torch.nn.Module):  # x + w, called once with its own weight as x
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 8))

    def forward(self, x):
        return torch.relu(x + self.w)


class Exps(torch.nn.Module):  # ten exps summed; the chain adds in another order than this forward
    def forward(self, *t):
        r = torch.exp(t[0])
        for x in t[1:]:
            r = torch.exp(x) + r
        return r


class GemmaLike(torch.nn.Module):  # two casts of one kind, x's first in the forward, w's first in the chain
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1, 1, 8, dtype=torch.bfloat16))

    def forward(self, x):
        return (torch.sigmoid(x.float()) * torch.exp(self.w.float())).type_as(x)


modules._patch(AddRelu, [entry("add_relu", [T, T], [add, relu])])
modules._patch(AddReluMul, [entry("add_relu_mul", [T, T], [
    add, relu, {"op": "aten::mul", "overload": "Tensor", "args": [out(1), inp(1)]}])])
modules._patch(ReluThen, [entry("relu_then", [T], [
    {"op": "aten::relu", "overload": "", "args": [inp(0)]},
    {"op": "aten::sigmoid", "overload": "", "args": [out(0)]}])])
modules._patch(Scale, [entry("scale", [T, {"dtype": "int64", "sizes": []}], [
    {"op": "aten::sigmoid", "overload": "", "args": [inp(0)]},
    {"op": "aten::mul", "overload": "Tensor", "args": [out(0), inp(1)]}])])

branches = [{"op": "aten::tanh", "overload": "", "args": [inp(0)]},
            {"op": "aten::exp", "overload": "", "args": [inp(0)]},
            {"op": "aten::mul", "overload": "Tensor", "args": [out(1), out(0)]}]
modules._patch(Branches, [entry("branches", [T], branches)])
modules._patch(BranchesSwapped, [entry("branches", [T], branches)])

F32 = {"type": "ScalarType", "value": "float32"}
B16 = {"dtype": "bfloat16", "sizes": [3, 8]}
modules._patch(GemmaLike, [entry("gemma", [{"dtype": "bfloat16", "sizes": [8]}, B16], [
    {"op": "aten::_to_copy", "overload": "", "args": [inp(0), F32]},
    {"op": "aten::exp", "overload": "", "args": [out(0)]},
    {"op": "aten::_to_copy", "overload": "", "args": [inp(1), F32]},
    {"op": "aten::sigmoid", "overload": "", "args": [out(2)]},
    {"op": "aten::mul", "overload": "Tensor", "args": [out(3), out(1)]},
    {"op": "aten::_to_copy", "overload": "", "args": [out(4), {"type": "ScalarType", "value": "bfloat16"}]}])])

NUM = {"dtype": "float64", "sizes": []}
modules._patch(DivExp, [entry("div_exp", [T, NUM], [
    {"op": "aten::div", "overload": "Tensor", "args": [inp(0), inp(1)]},
    {"op": "aten::exp", "overload": "", "args": [out(0)]}])])
modules._patch(AddOwn, [entry("add_relu", [T, T], [add, relu])])
exps = [{"op": "aten::exp", "overload": "", "args": [inp(k)]} for k in range(10)]
acc = 0
for k in range(1, 10):  # the chain's adds: exp(t0) + exp(tk), ...: this forward adds exp(tk) + r
    exps.append({"op": "aten::add", "overload": "Tensor", "args": [out(acc), out(k), ONE]})
    acc = len(exps) - 1
modules._patch(Exps, [entry("exps", [T] * 10, exps)])

failures = []


def check(what, got, want, fused=None, name=None):
    if not torch.allclose(got, want):
        failures.append(what + ": wrong result")
    if fused is not None and (calls[name] > 0) != fused:
        failures.append(what + (": the fused op did not run" if fused else ": the fused op ran"))


x, y, z = torch.randn(3, 3, 8)
with torch.no_grad():
    m = AddRelu()
    m(x, x)  # recorded with one tensor twice
    check("one tensor as both arguments, then two", m(x, y), torch.relu(x + y), fused=False, name="add_relu")
    m(x, y)  # recorded with two tensors: later calls fuse
    check("two tensors", m(x, z), torch.relu(x + z), fused=True, name="add_relu")

    b = AddReluMul()
    b(x, y, z)
    check("one chain input read twice, two tensors given", b(x, y, z), torch.relu(x + y) * z, fused=False,
          name="add_relu_mul")

    s, t = ReluThen(torch.sigmoid), ReluThen(torch.tanh)
    s(x)
    s(x)
    check("another instance, another function attribute", t(x), torch.tanh(torch.relu(x)))
    check("another instance, on its second call", t(x), torch.tanh(torch.relu(x)))

    k = Scale(2)
    k(x)
    check("the captured int", k(x), torch.sigmoid(x) * 2, fused=True, name="scale")
    calls["scale"] = 0
    h = Scale(0.5)
    h(x)
    check("a float where an int was captured", h(x), torch.sigmoid(x) * 0.5, fused=False, name="scale")

    r = Branches()
    r(x)
    check("a forward that runs the chain's ops in another order of their data flow", r(y),
          torch.exp(y) * torch.tanh(y), fused=True, name="branches")
    calls["branches"] = 0
    w = BranchesSwapped()
    w(x)
    check("the same ops, another data flow", w(y), torch.tanh(y) * torch.exp(y), fused=False, name="branches")

    g = GemmaLike()
    xb = x.to(torch.bfloat16)
    g(xb)
    want = (torch.sigmoid(y.to(torch.bfloat16).float()) * torch.exp(g.w.float())).type_as(xb)
    check("casts the chain lists in another order, type_as's layout and device", g(y.to(torch.bfloat16)).float(),
          want.float(), fused=True, name="gemma")

    neg = -torch.rand(3, 8) - 0.5
    d = DivExp()
    d(neg, 0.0)
    calls["div_exp"] = 0
    check("-0.0 after 0.0", d(neg, -0.0), torch.exp(neg / -0.0))
    d(x)  # SCALE, 2.0
    d(x)
    SCALE = 3.0
    check("a module global the forward reads, changed", d(x), torch.exp(x / 3.0))
    d.cfg.scale = 4.0
    check("a field of a config attribute, changed", d(x), torch.exp(x / 4.0))

    # What the call key reads from outside: DivExp's globals (SCALE; torch is no
    # plain value), not the attribute names its code shares co_names with (cfg, scale).
    reads, _ = modules._outside_reads(DivExp, getattr(DivExp.forward, "__wrapped__", DivExp.forward))
    if sorted(n for _, n in reads) != ["SCALE"]:
        failures.append("outside reads: %s, not just SCALE" % sorted(n for _, n in reads))

    o = AddOwn()
    o(o.w)
    check("its own weight as the argument, then another tensor", o(y), torch.relu(y + o.w))

    e8 = Exps()
    t0 = time.perf_counter()
    ts = list(torch.randn(10, 3, 8))
    e8(*ts)
    got = e8(*ts)
    if time.perf_counter() - t0 > 5:
        failures.append("a forward that is not the chain took %.1f s to refuse" % (time.perf_counter() - t0))
    check("ten exps added the other way round: not the chain", got, sum(torch.exp(t) for t in ts), fused=False,
          name="exps")

print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
