#!/usr/bin/env python3
"""Per class of the strategy library, on this CPU or GPU: does the library's
kernel beat stock? (issue 32)

For every family with strategies for the device and every case of it in
cases_<device>.yaml, each of the device's strategies whose `applies: op`
admits the case, with its first parameter set (what a search's root tries first,
"$row" / "$op" filled in) is compiled and sent to the evaluation worker
(docs/WORKER.md): verified against stock, then timed against stock in paired
rounds on the worker's thread count. The best accepted instance per case is
the library's kernel there. Prints a table, per class last, and writes JSON
under bench/results/.

  python3 bench/templates/classes.py --worker /tmp/wb/forge_worker --threads 1 \
      [--class pointwise ...] [--out bench/results/DATE_COMMIT_cpu_classes.json]
  python3 bench/templates/classes.py --device cuda --worker BUILD/forge_worker \
      --out $OUT/classes_cuda.json        # the worker built with FORGE_WORKER_CUDA=ON
"""
import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import time

import yaml

from run_cpu import HERE, ROOT, TARGETS, Worker, compile_instance, op_name, row_of


def families():
    out = []
    for name in sorted(os.listdir(TARGETS)):
        d = os.path.join(TARGETS, name)
        if os.path.exists(os.path.join(d, "strategies.yaml")):
            out.append(name)
    return out


def admits(strategy, family, case):
    """The keys of `applies` that rules/search/strategies.cpp decides from the
    op and its shape alone: op (the op, or op.overload), the extent ranges
    (row, slice, plane: `$row`'s value), a softmax's dim and batch_norm's
    training flag. Strategies that
    would only decline are not sent."""
    ap = strategy.get("applies") or {}
    ops = ap.get("op")
    name = case["op"] + ("." + case["overload"] if case.get("overload") else "")
    if ops and not (case["op"] in ops or name in ops or op_name(case["op"]) in ops):
        return False
    for key in ("row", "slice", "plane"):
        if key in ap and not ap[key][0] <= row_of(family, case) <= ap[key][1]:
            return False
    if "training" in ap:  # batch_norm: its one bool argument
        training = next((x.get("value") for x in case["args"] if x.get("type") == "bool"), None)
        if training is not None and training != ap["training"]:
            return False
    if "dim" in ap:
        ndim, dim = len(case["args"][0]["sizes"]), case["args"][1]["value"]
        last = dim % ndim == ndim - 1
        if (ap["dim"] == "last") != last:
            return False
    return True


def first_params(strategy, family, case):
    p = {}
    for k, values in (strategy.get("params") or {}).items():
        v = values[0]
        p[k] = row_of(family, case) if v == "$row" else op_name(case["op"]) if v == "$op" else v
    return p


def param_sets(strategy, family, case, neighbours):
    """The root's params, then with `neighbours` each set one step from it
    (one param moved to its second value): the instances a search reaches
    first after the root (rules/search/strategies.cpp moves one param one
    step along its list)."""
    root = first_params(strategy, family, case)
    out = [root]
    if neighbours:
        for k, values in (strategy.get("params") or {}).items():
            if len(values) > 1 and values[1] not in ("$row", "$op"):
                out.append(dict(root, **{k: values[1]}))
    return out


def instances(fams, cases_all, device, neighbours=False):
    """(family, case, strategy, params, source) of every instance to evaluate."""
    for fam in fams:
        fam_dir = os.path.join(TARGETS, fam)
        for s in yaml.safe_load(open(os.path.join(fam_dir, "strategies.yaml")))["strategies"]:
            if s["backend"] != device:
                continue
            for case in cases_all.get(fam, []):
                if admits(s, fam, case):
                    for p in param_sets(s, fam, case, neighbours):
                        yield fam, case, s, p, os.path.join(fam_dir, s["source"])


def precompile(fams, cases_all, a):
    """Every instance compiled up front on all cores (nvcc takes seconds each);
    failures are reported again, per case, by the serial pass."""
    jobs = {(src, json.dumps(p, sort_keys=True)): (src, p)
            for _, _, _, p, src in instances(fams, cases_all, a.device, a.neighbours)}

    def one(job):
        try:
            compile_instance(job[0], job[1], a.march, a.cache, [], a.device)
        except RuntimeError:
            pass
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        list(ex.map(one, jobs.values()))


def evaluate(w, a, fam_dir, family, case, s, p):
    """One instance through the worker: verified, then timed against stock."""
    try:
        so = compile_instance(os.path.join(fam_dir, s["source"]), p, a.march, a.cache, [], a.device)
    except RuntimeError as e:
        return {"strategy": s["name"], "params": p, "verdict": "compile_error", "detail": str(e)[:300]}
    # On CUDA every tensor moves to the GPU but a wrapped Python
    # number (a 0-dim float64 CPU tensor), which stays where torch keeps it.
    args = [dict(x, device="cuda:0") if a.device == "cuda" and x.get("type") == "Tensor" and not (
            x.get("sizes") == [] and x.get("dtype") == "float64") else x for x in case["args"]]
    req = {"cmd": "evaluate", "id": "%s/%s/%s" % (os.path.basename(fam_dir), s["name"], case["name"]), "op": case["op"],
           "overload": case.get("overload", ""), "args": args, "samples": [], "family": family,
           "candidate": so, "seed": 1234, "call_timeout_seconds": 30,
           "bench": {"warmup": 5, "reps": a.reps, "min_seconds": a.min_seconds, "max_seconds": 10}}
    if a.device == "cpu":
        req["bench"]["threads"] = a.threads
    t0 = time.time()
    r = w.request(req)
    b = r.get("bench") or {}
    return {"strategy": s["name"], "params": p, "verdict": r.get("verdict"), "reason": r.get("reason"),
            "detail": r.get("detail") or r.get("error"),
            "kernel_us": b.get("candidate_us"), "stock_us": b.get("eager_us"),
            "speedup": b.get("speedup_eager"), "faster": b.get("faster"),
            "verify_cases": (r.get("verify") or {}).get("cases"), "seconds": round(time.time() - t0, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default="/tmp/wb/forge_worker")
    ap.add_argument("--class", dest="classes", action="append", help="a family (default: every one with CPU strategies)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--cases", default=None, help="cases file (default: cases_<device>.yaml)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for kernel and stock")
    ap.add_argument("--march", default="native")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--min-seconds", type=float, default=0.3)
    ap.add_argument("--cache", default="/tmp/forge_strategies")
    ap.add_argument("--out", default=None)
    ap.add_argument("--neighbours", action="store_true",
                    help="also each strategy's params one step from its first ones (a search's next tries)")
    a = ap.parse_args()

    cases_all = yaml.safe_load(open(a.cases or os.path.join(HERE, "cases_%s.yaml" % a.device)))
    os.makedirs(a.cache, exist_ok=True)
    fams = a.classes or [f for f in families() if f in cases_all]
    precompile(fams, cases_all, a)
    w = Worker(a.worker, a.device)
    w.start()
    rows = []
    for fam in fams:
        fam_dir = os.path.join(TARGETS, fam)
        family = yaml.safe_load(open(os.path.join(fam_dir, "family.yaml")))
        strategies = [s for s in yaml.safe_load(open(os.path.join(fam_dir, "strategies.yaml")))["strategies"]
                      if s["backend"] == a.device]
        for case in cases_all.get(fam, []):
            tried = []
            for s in strategies:
                if not admits(s, fam, case):
                    continue
                for p in param_sets(s, fam, case, a.neighbours):
                    tried.append(evaluate(w, a, fam_dir, family, case, s, p))
            ok = [t for t in tried if t["verdict"] == "accepted" and t.get("kernel_us")]
            best = max(ok, key=lambda t: t["speedup"] or 0) if ok else None
            rows.append({"class": fam, "case": case["name"], "op": case["op"], "best": best, "tried": tried})
            if a.out:  # so far, in case the run is cut off
                with open(a.out, "w") as f:
                    json.dump({"partial": True, "device": a.device, "rows": rows}, f)
            k, st = (best or {}).get("kernel_us") or {}, (best or {}).get("stock_us") or {}
            print("%-11s %-22s %-14s %10s %10s %7s %s" % (
                fam, case["name"], best["strategy"] if best else "-",
                "%.2f±%.2f" % (k["median"], k.get("spread", 0)) if k else "-",
                "%.2f±%.2f" % (st["median"], st.get("spread", 0)) if st else "-",
                "%.2fx" % best["speedup"] if best else "-",
                "faster" if best and best["faster"] else ("not faster" if best else
                                                         "no kernel: " + "; ".join("%s %s" % (t["strategy"], t["verdict"]) for t in tried))),
                flush=True)
    w.close()

    print("\nper class on %s (µs are medians%s; 'faster': the worker's paired test says so)" % (
        w.hello.get("device"), " at %d thread(s)" % a.threads if a.device == "cpu" else ""))
    print("%-11s %6s %7s %s" % ("class", "cases", "faster", "geomean kernel/stock speedup"))
    summary = {}
    for fam in sorted({r["class"] for r in rows}):
        rs = [r for r in rows if r["class"] == fam]
        sp = [r["best"]["speedup"] for r in rs if r["best"] and r["best"]["speedup"]]
        geo = 1.0
        for x in sp:
            geo *= x
        geo = geo ** (1.0 / len(sp)) if sp else None
        faster = sum(1 for r in rs if r["best"] and r["best"]["faster"])
        summary[fam] = {"cases": len(rs), "with_kernel": len(sp), "faster": faster, "geomean_speedup": geo}
        print("%-11s %6d %7d %s" % (fam, len(rs), faster, "%.2fx" % geo if geo else "-"))
    if a.out:
        commit = os.environ.get("FORGE_COMMIT") or subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        rec = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit, "machine": w.hello.get("device"),
               "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "threads": a.threads,
               "march": a.march, "device": a.device, "command": "python3 bench/templates/" + " ".join(
                   [os.path.basename(__file__)] + sys.argv[1:]),
               "summary": summary, "rows": rows}
        with open(a.out, "w") as f:
            json.dump(rec, f, indent=1)
        print("wrote", a.out)


if __name__ == "__main__":
    main()
