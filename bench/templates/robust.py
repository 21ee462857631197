#!/usr/bin/env python3
"""Repeated-run summary (run_cpu.py --repeat N): per (family, strategy, params,
case, -march, threads) the N verdicts, speedups and `faster` flags.

  python3 bench/templates/robust.py results.jsonl [...]
"""
import json
import sys
from collections import OrderedDict

groups = OrderedDict()
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        key = (r["family"], r["strategy"], ",".join("%s=%s" % kv for kv in sorted(r["params"].items())), r["case"],
               r["march"], r["threads"])
        groups.setdefault(key, []).append(r)
print("| family | strategy | params | case | -march | stock threads | runs | candidate µs (median ± IQR) per run | stock µs per run | speedups | faster |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (fam, strat, params, case, march, th), rs in groups.items():
    b = [r.get("bench") or {} for r in rs]
    ok = all(r["verdict"] == "accepted" for r in rs)
    cand = "; ".join("%.1f ± %.1f" % (x["candidate_us"]["median"], x["candidate_us"]["spread"]) for x in b if x)
    stock = "; ".join("%.1f ± %.1f" % (x["eager_us"]["median"], x["eager_us"]["spread"]) for x in b if x)
    sp = ", ".join("%.2f" % x["speedup_eager"] for x in b if x)
    fast = sum(1 for x in b if x.get("faster"))
    print("| %s | %s | %s | %s | %s | %s | %d %s | %s | %s | %s | %d/%d |" % (
        fam, strat, params, case, march, th, len(rs), "accepted" if ok else "NOT ALL ACCEPTED", cand, stock, sp, fast,
        len(rs)))
