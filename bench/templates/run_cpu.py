#!/usr/bin/env python3
"""Drives the evaluation worker over the CPU strategies of the strategy library.

For each (family, strategy, params, case) it compiles the strategy's template
with -DFORGE_P_<NAME>=<value>, sends one `evaluate` request (docs/WORKER.md) to
forge_worker and prints / appends the verdict and the benchmark to a JSON-lines
file. Not part of forge: a reproducible record of how docs/STRATEGIES.md was
measured.

  python3 bench/templates/run_cpu.py --worker /tmp/wbuild2/forge_worker \
      --family softmax [--strategy rows_3pass] [--param VEC=16 ...] \
      [--case tiny_attn] [--threads 1] [--march x86-64-v2] [--repeat 3] \
      [--out results.jsonl] [--cases cases_odd.yaml --cases-key odd_softmax]

Cases live in cases_cpu.yaml next to this file: per family a list of
{name, op, args} with args as the capture writes them (docs/CAPTURE.md).
"""
import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import time

import yaml

from template_text import source_text  # the template as forge loads it

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = os.path.join(ROOT, "targets")


def compile_instance(src, params, march, cache, extra, device="cpu"):
    """The template instance as forge compiles it (rules/evaluate/compile.cpp):
    g++ for the CPU, nvcc for sm_90a (the H200) for CUDA."""
    key = hashlib.sha256((source_text(src) + json.dumps(params, sort_keys=True) + march + device + " ".join(extra)).encode()).hexdigest()[:16]
    out = os.path.join(cache, os.path.basename(src) + "." + key + ".so")
    if not os.path.exists(out):
        if device == "cuda":
            cmd = ["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
                   "-gencode=arch=compute_90a,code=sm_90a", "-Xlinker", "-z,defs"]
        else:
            cmd = ["g++", "-O3", "-march=" + march, "-std=c++17", "-shared", "-fPIC", "-Wl,-z,defs"]
        cmd += ["-I", os.path.join(ROOT, "runtime/abi")] + extra
        cmd += ["-DFORGE_P_%s=%s" % (k, v) for k, v in params.items()]
        cmd += [src, "-o", out + ".tmp"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("compile failed: %s\n%s" % (" ".join(cmd), r.stderr))
        os.rename(out + ".tmp", out)
    return out


class Worker:
    def __init__(self, path, backend="cpu"):
        self.path = path
        self.backend = backend
        self.p = None

    def start(self):
        self.p = subprocess.Popen([self.path, "--backend", self.backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open("/tmp/forge_worker_stderr.log", "a"), text=True)
        self.hello = json.loads(self.p.stdout.readline())

    def request(self, req):
        if self.p is None or self.p.poll() is not None:
            self.start()
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            rc = self.p.wait()
            self.p = None
            return {"verdict": "rejected", "reason": "crashed (status %d)" % rc}
        rep = json.loads(line)
        if rep.get("worker_exits"):
            self.p.wait()
            self.p = None
        return rep

    def close(self):
        if self.p and self.p.poll() is None:
            self.p.stdin.write('{"cmd": "quit"}\n')
            self.p.stdin.flush()
            self.p.wait()


def row_of(family, case):
    """What `$row` means for a family: the reduced (or per-channel) extent."""
    args = case["args"]
    x = args[0]["sizes"]
    if family in ("layer_norm", "rms_norm"):
        n = 1
        for v in args[1]["value"]:
            n *= v
        return n
    if family == "softmax":
        return x[-1]
    if family == "group_norm":  # elements of one (n, group): C/G * HxW
        return args[4]["value"] // args[6]["value"] * args[5]["value"]
    n = 1
    if family == "mean_hw":  # the reduced (trailing) dims
        for d in args[1].get("value") or range(len(x)):
            n *= x[d]
        return n
    for v in x[2:]:  # batch_norm: the H*W plane
        n *= v
    return n


def op_name(op):
    """What `$op` means: the op without its overload, an in-place form as its
    out-of-place op (rules/search/strategies.cpp, signature_facts)."""
    name = op.split(".")[0]
    return name[:-1] if len(name) > 1 and name.endswith("_") else name


def expand(params, fixed):
    names = sorted(params)
    for combo in itertools.product(*[params[n] for n in names]):
        p = dict(zip(names, combo))
        if all(str(p.get(k)) == str(v) for k, v in fixed.items() if k in p):
            yield p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default="/tmp/wbuild2/forge_worker")
    ap.add_argument("--family", required=True)
    ap.add_argument("--strategy", action="append")
    ap.add_argument("--param", action="append", default=[], help="NAME=VALUE: only this value")
    ap.add_argument("--case", action="append")
    ap.add_argument("--threads", type=int, default=0, help="bench.threads (0: torch default)")
    ap.add_argument("--march", default="x86-64-v2")
    ap.add_argument("--cflag", action="append", default=[])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default="/tmp/forge_strategies")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases_cpu.yaml"), help="cases file")
    ap.add_argument("--cases-key", default=None, help="key in the cases file (default: the family)")
    a = ap.parse_args()

    fam_dir = os.path.join(TARGETS, a.family)
    family = yaml.safe_load(open(os.path.join(fam_dir, "family.yaml")))
    strategies = yaml.safe_load(open(os.path.join(fam_dir, "strategies.yaml")))["strategies"]
    cases = yaml.safe_load(open(a.cases))[a.cases_key or a.family]
    fixed = dict(kv.split("=", 1) for kv in a.param)
    os.makedirs(a.cache, exist_ok=True)
    w = Worker(a.worker)
    w.start()
    out = open(a.out, "a") if a.out else None
    for s in strategies:
        if s["backend"] != "cpu" or (a.strategy and s["name"] not in a.strategy):
            continue
        for p0 in expand(s.get("params", {}), fixed):
            p = dict(p0)
            for c in cases:
                if a.case and c["name"] not in a.case:
                    continue
                p = {k: (row_of(a.family, c) if v == "$row" else op_name(c["op"]) if v == "$op" else v)
                     for k, v in p0.items()}
                if any(v is None for v in p.values()):
                    continue
                try:
                    so = compile_instance(os.path.join(fam_dir, s["source"]), p, a.march, a.cache, a.cflag)
                except RuntimeError as e:
                    print(e, file=sys.stderr)
                    continue
                for rep in range(a.repeat):
                    req = {"cmd": "evaluate", "id": "%s/%s/%s" % (s["name"], p, c["name"]), "op": c["op"], "overload": c.get("overload", ""),
                           "args": c["args"], "samples": [], "family": family, "candidate": so, "seed": a.seed,
                           "bench": {"warmup": 5, "reps": a.reps, "min_seconds": a.min_seconds, "max_seconds": 10}}
                    if a.threads:
                        req["bench"]["threads"] = a.threads
                    r = w.request(req)
                    rec = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": w.hello.get("device"),
                           "family": a.family, "strategy": s["name"], "params": p, "case": c["name"],
                           "march": a.march, "threads": a.threads or w.hello.get("threads"),
                           "verdict": r.get("verdict"), "reason": r.get("reason"), "detail": r.get("detail"),
                           "error": r.get("error"), "verify": r.get("verify"), "bench": r.get("bench")}
                    b = r.get("bench") or {}
                    cu, eu = b.get("candidate_us", {}), b.get("eager_us", {})
                    ps = ",".join("%s=%s" % kv for kv in sorted(p.items()))
                    print("%-14s %-26s %-16s %-9s %-13s tol=%-8.3g cand=%9.2f±%-7.2f eager=%9.2f±%-7.2f x%-5.2f %s%s" % (
                        s["name"], ps, c["name"], r.get("verdict"), r.get("reason"),
                        (r.get("verify") or {}).get("worst_tol", 0), cu.get("median", 0), cu.get("spread", 0),
                        eu.get("median", 0), eu.get("spread", 0), b.get("speedup_eager", 0),
                        "FASTER" if b.get("faster") else "", (" " + (r.get("detail") or r.get("error") or "")) if r.get("verdict") != "accepted" else ""),
                        flush=True)
                    if out:
                        out.write(json.dumps(rec) + "\n")
                        out.flush()
    w.close()


if __name__ == "__main__":
    main()
