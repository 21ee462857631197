#!/usr/bin/env python3
"""One markdown table per family joining a threads=1 and a default-threads run
of run_cpu.py (same strategies, params and cases).

  python3 bench/templates/table.py T1.jsonl[,T1b.jsonl] T0.jsonl[,T0b.jsonl]

Later files override earlier ones for the same (family, strategy, params, case).
"""
import json
import sys
from collections import OrderedDict


def load(paths):
    d = OrderedDict()
    for p in paths.split(","):
        for line in open(p):
            r = json.loads(line)
            key = (r["family"], r["strategy"], json.dumps(r["params"], sort_keys=True), r["case"])
            d[key] = r
    return d


def cell(r):
    b = r.get("bench") if r else None
    if not b:
        return "- | - | - "
    return "%.1f±%.1f | %.1f±%.1f | %.2f%s " % (b["candidate_us"]["median"], b["candidate_us"]["spread"],
                                               b["eager_us"]["median"], b["eager_us"]["spread"], b["speedup_eager"],
                                               " **✓**" if b["faster"] else "")


def main():
    t1, t0 = load(sys.argv[1]), load(sys.argv[2])
    fams = OrderedDict()
    for k in list(t1) + [k for k in t0 if k not in t1]:
        fams.setdefault(k[0], []).append(k)
    for fam, keys in fams.items():
        print("\n#### %s\n" % fam)
        print("| strategy | params | case | verdict | worst_tol | 1 thr: cand µs | stock µs | × (✓ faster) | 2 thr: cand µs | stock µs | × (✓ faster) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for k in keys:
            a, b = t1.get(k), t0.get(k)
            r = a or b
            verdicts = {x["verdict"] if x["verdict"] == "accepted" else "%s: %s" % (x["verdict"], x["reason"])
                        for x in (a, b) if x}
            tol = max((x.get("verify") or {}).get("worst_tol", 0) or 0 for x in (a, b) if x)
            params = ",".join("%s=%s" % kv for kv in sorted(r["params"].items()))
            print("| %s | %s | %s | %s | %.3g | %s| %s|" % (k[1], params, k[3], " / ".join(sorted(verdicts)), tol,
                                                           cell(a), cell(b)))


if __name__ == "__main__":
    main()
