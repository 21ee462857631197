"""Where a package's time goes inside a model (issue 10): the campaign model's
script run plain and under `forge run`, each timed as in e2e.py and then
profiled for 3 iterations (bench/models/_timing.py, BENCH_PROFILE). Prints
per iteration the wall and device-busy time of both, then the names (ATen ops
and GPU kernels) whose host or device time differs most, and writes
$OUT/profile-<model>-<ITERS>.json.
  python3 bench/gpu/profile_e2e.py FORGE_BINARY MODEL [PAIRS] [ITERS]
PAIRS (default 1): alternating plain/forged processes; per-name figures are
the medians over them. ITERS (default 20): timed iterations per process (the
build's own check times the scripts' default, 5)."""
import json
import os
import re
import statistics
import subprocess
import sys

forge, model = sys.argv[1], sys.argv[2]
pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
iters = sys.argv[4] if len(sys.argv) > 4 else "20"
root = os.path.dirname(os.path.abspath(__file__))
manifest_dir = os.path.join(root, "campaign", model)
script = re.search(r"run: python ([\w./-]+\.py)", open(os.path.join(manifest_dir, "forge.yaml")).read()).group(1)
models_dir = os.path.join(root, "..", "models")
out_dir = os.environ.get("OUT", "/tmp/forge-out")
os.makedirs(out_dir, exist_ok=True)


def one(forged, k):
    path = os.path.join(out_dir, f"profile-{model}-{iters}-{'forge' if forged else 'plain'}-{k}.json")
    env = dict(os.environ, BENCH_ITERS=iters, BENCH_PROFILE=path)
    cmd = ["python", os.path.join(models_dir, script)]
    if forged:
        report = os.path.join(out_dir, f"profile-{model}-report.json")
        cmd = [forge, "-C", manifest_dir, "run", "--unchecked", "--json-report", report, "--"] + cmd
    for stale in (path, report if forged else None):  # never read an earlier invocation's file
        if stale and os.path.exists(stale):
            os.remove(stale)
    try:
        p = subprocess.run(cmd, cwd=models_dir, env=env, capture_output=True, text=True, timeout=400)
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"profile_e2e: {'forged' if forged else 'plain'} run {k} timed out\n")
        return None
    m = re.search(r": ([0-9.]+) ms/iter \(checksum ([^)]+)\)", p.stdout)
    if p.returncode != 0 or not m or not os.path.exists(path):
        sys.stderr.write(p.stdout[-1500:] + p.stderr[-1500:])
        return None
    r = json.load(open(path))
    r["ms"], r["checksum"] = float(m.group(1)), m.group(2)
    if forged and os.path.exists(report):
        rep = json.load(open(report))
        r["forged_calls"] = sum(e.get("forged", 0) for e in rep.get("entries", []))
        r["stock_calls"] = sum(f.get("calls", 0) for f in rep.get("fallback", [])) + \
            sum(e.get("more_threads", 0) for e in rep.get("entries", []))
    return r


runs = {"plain": [], "forge": []}
pairs_done = []  # (plain, forged) of the pairs where both ran
for k in range(pairs):
    # Pairs alternate their order, as in e2e.py and forge's own check.
    if k % 2 == 0:
        a, b = one(False, k), one(True, k)
    else:
        b, a = one(True, k), one(False, k)
    if a and b:
        runs["plain"].append(a)
        runs["forge"].append(b)
        pairs_done.append((a, b))
if not pairs_done:
    sys.exit("profile_e2e: a run failed (above)")


def med(rs, f):
    return statistics.median(f(r) for r in rs)


def per_name(rs):
    """Per name, the median over runs (a run without the name counts 0)."""
    names = {}
    for r in rs:
        for row in r["rows"]:
            names.setdefault(row["name"], []).append(row)
    zero = [{"calls": 0, "host_us": 0, "device_us": 0}]
    return {n: {key: statistics.median(x[key] for x in v + zero * (len(rs) - len(v)))
                for key in ("calls", "host_us", "device_us")}
            for n, v in names.items()}


plain, forged = per_name(runs["plain"]), per_name(runs["forge"])
zero = {"calls": 0, "host_us": 0, "device_us": 0}
diff = []
for n in set(plain) | set(forged):
    a, b = plain.get(n, zero), forged.get(n, zero)
    diff.append({"name": n, "plain": a, "forge": b, "d_host_us": b["host_us"] - a["host_us"],
                 "d_device_us": b["device_us"] - a["device_us"]})
summary = {k: {"ms_timed": med(rs, lambda r: r["ms"]), "wall_us_profiled": med(rs, lambda r: r["wall_us"]),
               "device_busy_us": med(rs, lambda r: r["device_busy_us"]), "checksums": sorted({r["checksum"] for r in rs})}
           for k, rs in runs.items()}
summary["forge"]["forged_calls"] = [r.get("forged_calls") for r in runs["forge"]]
summary["forge"]["stock_calls"] = [r.get("stock_calls") for r in runs["forge"]]
json.dump({"model": model, "pairs": pairs, "iters": int(iters), "summary": summary, "diff": diff, "runs": runs},
          open(os.path.join(out_dir, f"profile-{model}-{iters}.json"), "w"), indent=1)

print(f"{model}, {pairs} pair(s), {iters} timed iterations per process")
print(f"{'per iteration':26s} {'plain':>10s} {'forge':>10s}")
for key, label in (("ms_timed", "timed ms/iter"), ("wall_us_profiled", "profiled wall µs"),
                   ("device_busy_us", "device busy µs")):
    print(f"{label:26s} {summary['plain'][key]:10.1f} {summary['forge'][key]:10.1f}")
print("timed ms/iter per pair (plain first in even pairs, forge first in odd): " +
      ", ".join(f"plain {a['ms']} forge {b['ms']}" for a, b in pairs_done))
print(f"checksums plain {summary['plain']['checksums']} forge {summary['forge']['checksums']}; "
      f"forged calls {summary['forge']['forged_calls']}, stock calls {summary['forge']['stock_calls']} (whole runs)")
for field, label in (("d_device_us", "device"), ("d_host_us", "host")):
    print(f"\nlargest {label} differences (µs per iteration; calls per iteration)")
    print(f"{'name':60s} {'calls':>11s} {'plain µs':>9s} {'forge µs':>9s} {'Δ µs':>8s}")
    key = field[2:]
    for d in sorted(diff, key=lambda d: -abs(d[field]))[:12]:
        calls = f"{d['plain']['calls']:.0f}/{d['forge']['calls']:.0f}"
        print(f"{d['name'][:60]:60s} {calls:>11s} {d['plain'][key]:9.1f} {d['forge'][key]:9.1f} {d[field]:+8.1f}")
