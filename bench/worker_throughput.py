#!/usr/bin/env python3
"""Evaluations per minute of one or more built workers, CPU backend.

    python3 bench/worker_throughput.py WORKER_DIR [WORKER_DIR ...] [--evals N] [--label NAME ...]

Each WORKER_DIR holds a forge_worker (and, for workers from 2b65e5c on, its
forge_runner). The honest CPU softmax of the adversarial suite
(tests/adversarial/cpu/softmax_ok.cc) is compiled once and evaluated N times
in one worker process per directory, on the adversarial suite's target
(_softmax, float32 [64, 1000]) with forge's CPU bench settings (threads 1);
the workers run one after the other, so they see the same machine. Prints a
table and writes bench/results/<date>_<commit>_cpu_worker_throughput.json
($OUT/ instead where OUT is set). Needs PyYAML (the repo's .venv) or --family
with targets/softmax/family.yaml as JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def family_json(path):
    if path:
        return json.load(open(path))
    try:
        import yaml
    except ImportError:
        sys.exit("needs PyYAML (python3 -m pip install pyyaml)")
    return yaml.safe_load(open(os.path.join(ROOT, "targets", "softmax", "family.yaml")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workers", nargs="+")
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--family", default="", help="targets/softmax/family.yaml as JSON (where PyYAML is missing)")
    ap.add_argument("--commit", default="", help="the commit measured, where the tree has no .git")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    so = os.path.join(tmp, "softmax_ok.so")
    subprocess.run(["c++", "-O2", "-std=c++17", "-fPIC", "-shared", "-I", os.path.join(ROOT, "runtime", "abi"),
                    "-x", "c++", os.path.join(ROOT, "tests", "adversarial", "cpu", "softmax_ok.cc"), "-o", so],
                   check=True)
    args = [{"type": "Tensor", "dtype": "float32", "sizes": [64, 1000], "strides": [1000, 1], "device": "cpu",
             "name": "self"},
            {"type": "int", "value": -1, "name": "dim"},
            {"type": "bool", "value": False, "name": "half_to_float"}]
    fam = family_json(a.family)
    reqs = "".join(json.dumps({"cmd": "evaluate", "id": f"ok{i}", "op": "_softmax", "args": args, "samples": [],
                               "family": fam, "candidate": so, "seed": i, "bench": {"threads": 1}}) + "\n"
                   for i in range(a.evals))
    rows = []
    for k, w in enumerate(a.workers):
        label = a.label[k] if k < len(a.label) else w
        t0 = time.time()
        p = subprocess.run([os.path.join(w, "forge_worker"), "--backend", "cpu", "--ceiling", "1e10"],
                           input=reqs, capture_output=True, text=True, timeout=1800)
        wall = time.time() - t0
        rep = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        ev = [r for r in rep if "seconds" in r]
        secs = sorted(r["seconds"] for r in ev)
        ver = sorted(r.get("verify", {}).get("seconds", 0) for r in ev)
        ben = sorted(r.get("bench", {}).get("seconds", 0) for r in ev)
        mid = lambda v: v[len(v) // 2] if v else None
        phases = {k: mid(sorted(r.get("phase_seconds", {}).get(k, 0) for r in ev))
                  for k in sorted({k for r in ev for k in r.get("phase_seconds", {})})}
        rows.append({"worker": label, "evaluations": len(ev), "accepted": sum(r.get("verdict") == "accepted" for r in ev),
                     "per_minute": 60.0 * len(ev) / sum(secs) if secs else 0.0,
                     "median_s": mid(secs), "q1_s": secs[len(secs) // 4] if secs else None,
                     "q3_s": secs[3 * len(secs) // 4] if secs else None,
                     "verify_median_s": mid(ver), "bench_median_s": mid(ben),
                     "cases": ev[0].get("verify", {}).get("cases") if ev else None, "wall_s": wall,
                     "phase_median_s": phases})
    commit = a.commit or subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    out = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "device": "cpu", "cpus": os.cpu_count(),
           "loadavg": load, "command": " ".join(sys.argv), "rows": rows}
    res_dir = os.environ.get("OUT") or os.path.join(ROOT, "bench", "results")
    path = os.path.join(res_dir, f"{out['date']}_{commit}_cpu_worker_throughput.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    json.dump(out, open(path, "w"), indent=1)
    print(f"{'worker':28} {'evals':>5} {'per min':>8} {'median s':>9} {'verify s':>9} {'bench s':>8} {'cases':>6}")
    for r in rows:
        print(f"{r['worker'][:28]:28} {r['evaluations']:5d} {r['per_minute']:8.1f} {r['median_s']:9.2f} "
              f"{r['verify_median_s']:9.2f} {r['bench_median_s']:8.2f} {r['cases']!s:>6}")
    for r in rows:
        print(f"{r['worker'][:28]:28} phases (median s): " +
              ", ".join(f"{k} {v:.3f}" for k, v in r["phase_median_s"].items()))
    print(f"load average {load[0]:.1f}; written {path}")


if __name__ == "__main__":
    main()
