"""Prints the campaign's table (bench/gpu/campaign.sh) from OUT/<model>.json and
writes OUT/campaign.json: per target share, iterations, outcomes, speedups over
eager and torch.compile, % of floor, candidates per minute of this build's
search wall clock (the report's "search": compile-ahead included), and the
mean stage costs per candidate (compile as if serial)."""
import json
import os
import sys


def main(out, models):
    rows = []
    for m in models:
        r, err = None, None
        for name in (m + ".json", m + ".status.json"):  # a timed-out build leaves no JSON
            try:
                r = json.load(open(os.path.join(out, name)))
                break
            except Exception as e:
                err = err or str(e)
        if r is None:
            rows.append({"model": m, "error": err})
            continue
        for t in r.get("targets", []):
            st = t.get("stage_seconds") or {}
            n = st.get("evaluations") or 0
            per = lambda k: (st.get(k, 0) / n) if n else None
            run = (r.get("search") or {}).get(t["id"]) or {}
            rows.append({
                "model": m, "target": t["id"], "share": t["share"], "iterations": t["iterations"],
                "outcomes": t.get("outcomes"), "x_eager": t.get("best_speedup_eager"),
                "x_compile": t.get("best_speedup_compile"), "floor_pct": t.get("floor_pct"),
                "under_compile": t.get("under_compile"), "strategy": t.get("best_strategy"),
                "candidates_per_min": 60 * run["evaluations"] / run["seconds"] if run.get("seconds") else None,
                "search_seconds": run.get("seconds"), "compile_wait_s": run.get("compile_wait_seconds"),
                "compiled_ahead": run.get("compiled_ahead"), "evaluations": run.get("evaluations"),
                "compile_s": per("compile"), "verify_s": per("verify"), "bench_s": per("bench"),
                "package": (r.get("package") or {}).get("models", {}).get(m)})
    json.dump(rows, open(os.path.join(out, "campaign.json"), "w"), indent=1)
    f = lambda v, p="%.2f": "-" if v is None else p % v
    print("%-44s %6s %5s %7s %8s %6s %8s %7s %7s %6s %6s %6s  %s" % (
        "target", "share", "iter", "×eager", "×compile", "floor", "cand/min", "wait s", "ahead", "cmp s", "ver s",
        "ben s", "outcomes"))
    for x in rows:
        if "error" in x:
            print("%-44s %s" % (x["model"], x["error"][:80]))
            continue
        ahead = "-" if x["compiled_ahead"] is None else "%d/%d" % (x["compiled_ahead"], x["evaluations"])
        print("%-44s %5.1f%% %5d %7s %8s %5s%% %8s %7s %7s %6s %6s %6s  %s" % (
            x["target"][:44], 100 * x["share"], x["iterations"], f(x["x_eager"]), f(x["x_compile"]),
            f(x["floor_pct"], "%.0f"), f(x["candidates_per_min"], "%.1f"), f(x["compile_wait_s"], "%.1f"),
            ahead, f(x["compile_s"]),
            f(x["verify_s"]), f(x["bench_s"]), json.dumps(x["outcomes"]) + " compile:" + str(x["under_compile"])))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
