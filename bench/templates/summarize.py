#!/usr/bin/env python3
"""Markdown tables from run_cpu.py's JSON-lines results (for docs/STRATEGIES.md).

  python3 bench/templates/summarize.py results.jsonl [more.jsonl ...] [--best]

--best: per (family, case, threads) only the fastest accepted instance and
the count of instances tried/accepted.
"""
import json
import sys
from collections import defaultdict


def fmt_params(p):
    return ",".join("%s=%s" % kv for kv in sorted(p.items()))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    best = "--best" in sys.argv
    rows = []
    for path in args:
        for line in open(path):
            rows.append(json.loads(line))
    by_fam = defaultdict(list)
    for r in rows:
        by_fam[r["family"]].append(r)
    for fam, rs in by_fam.items():
        print("\n#### %s\n" % fam)
        if best:
            groups = defaultdict(list)
            for r in rs:
                groups[(r["case"], r["threads"])].append(r)
            print("| case | stock threads | instances (accepted) | best strategy | params | candidate µs | stock µs | speedup | faster |")
            print("|---|---|---|---|---|---|---|---|---|")
            for (case, th), g in groups.items():
                acc = [r for r in g if r["verdict"] == "accepted" and r.get("bench")]
                if not acc:
                    print("| %s | %s | %d (0) | - | - | - | - | - | - |" % (case, th, len(g)))
                    continue
                b = min(acc, key=lambda r: r["bench"]["candidate_us"]["median"])
                bb = b["bench"]
                print("| %s | %s | %d (%d) | %s | %s | %.1f ± %.1f | %.1f ± %.1f | %.2f | %s |" % (
                    case, th, len(g), len(acc), b["strategy"], fmt_params(b["params"]),
                    bb["candidate_us"]["median"], bb["candidate_us"]["spread"], bb["eager_us"]["median"],
                    bb["eager_us"]["spread"], bb["speedup_eager"], "yes" if bb["faster"] else "no"))
            continue
        print("| strategy | params | case | stock threads | verdict | worst_tol | candidate µs | stock µs | speedup | faster |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rs:
            b = r.get("bench") or {}
            v = r.get("verify") or {}
            if b:
                cu, eu = b["candidate_us"], b["eager_us"]
                t = "%.1f ± %.1f | %.1f ± %.1f | %.2f | %s" % (cu["median"], cu["spread"], eu["median"], eu["spread"],
                                                         b["speedup_eager"], "yes" if b["faster"] else "no")
            else:
                t = "- | - | - | -"
            verdict = r["verdict"] if r["verdict"] == "accepted" else "%s (%s)" % (r["verdict"], r["reason"])
            print("| %s | %s | %s | %s | %s | %.3g | %s |" % (r["strategy"], fmt_params(r["params"]), r["case"],
                                                           r["threads"], verdict, v.get("worst_tol", 0) or 0, t))


if __name__ == "__main__":
    main()
