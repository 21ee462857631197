"""End to end on the GPU (issues: package 7.5, performance 10.3, torch.compile
12.5): a campaign model's script, plain and under `forge run` (the package
`forge build` made in the campaign's store), alternating, then the same under
torch.compile. Times are the script's own steady-state ms/iter (bench/models/
_timing.py), medians over the alternating runs; the checksum of the last
output must agree. Prints a table last and writes $OUT/e2e-<model>.json.
  python3 bench/gpu/e2e.py FORGE_BINARY MODEL [RUNS] [COMPILE_MODE] [COMPILE_RUNS]
COMPILE_RUNS (default 1) alternating compiled pairs: each compiles the model
again in a fresh process (about 30 s for the VAE-like decoder on the H200).
FORGE_E2E_ALL_FORGE=1 adds, to each compiled pair, a run under
FORGE_COMPILE_POLICY=forge (every forged op replaces Inductor's code, whatever
forge measured): beside "compile+forge" (the measured choice) it shows what
the choice wins back in Inductor's fusion (docs/PACKAGE.md)."""
import json
import os
import re
import statistics
import subprocess
import sys
import time

forge, model = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
compile_mode = sys.argv[4] if len(sys.argv) > 4 else "default"
compile_runs = int(sys.argv[5]) if len(sys.argv) > 5 else 1
root = os.path.dirname(os.path.abspath(__file__))
manifest_dir = os.path.join(root, "campaign", model)
script = re.search(r"run: python ([\w./-]+\.py)", open(os.path.join(manifest_dir, "forge.yaml")).read()).group(1)
models_dir = os.path.join(root, "..", "models")
out_dir = os.environ.get("OUT", "/tmp/forge-out")


def one(forged, compiled, policy=None):
    env = dict(os.environ, BENCH_ITERS="20")
    if policy:
        env["FORGE_COMPILE_POLICY"] = policy
    if compiled:
        env["BENCH_COMPILE"] = compile_mode
    cmd = ["python", os.path.join(models_dir, script)]  # forge -C runs it in the manifest's folder
    if forged:
        report = os.path.join(out_dir, f"e2e-{model}-report.json")
        # --unchecked: measure even when the build's own end-to-end check failed
        # (a crash then shows as a failed run here).
        cmd = [forge, "-C", manifest_dir, "run", "--unchecked", "--json-report", report, "--"] + cmd
    t0 = time.time()
    p = subprocess.run(cmd, cwd=models_dir, env=env, capture_output=True, text=True, timeout=400)
    m = re.search(r": ([0-9.]+) ms/iter \(checksum ([^)]+)\)", p.stdout)
    if p.returncode != 0 or not m:
        sys.stderr.write(p.stdout[-1500:] + p.stderr[-1500:])
        return None
    forged_calls = None
    if forged and os.path.exists(report):
        r = json.load(open(report))
        forged_calls = sum(e.get("forged", 0) for e in r.get("entries", []))
    return {"ms": float(m.group(1)), "checksum": float(m.group(2)), "wall_s": time.time() - t0,
            "forged_calls": forged_calls}


results = {}
for compiled in (False, True):
    # A compiled run spends most of its time compiling: COMPILE_RUNS pairs.
    for i in range(compile_runs if compiled else runs):
        # Pairs alternate their order (plain first, then forged first): a
        # drift between back-to-back processes then favours neither side.
        for forged in ((False, True) if i % 2 == 0 else (True, False)):
            key = ("compile" if compiled else "eager") + ("+forge" if forged else "")
            r = one(forged, compiled)
            results.setdefault(key, []).append(r)
            print(key, r, flush=True)
        if compiled and os.environ.get("FORGE_E2E_ALL_FORGE") == "1":
            r = one(True, True, policy="forge")
            results.setdefault("compile+forge(all)", []).append(r)
            print("compile+forge(all)", r, flush=True)

summary = {}
for key, rs in results.items():
    ok = [r for r in rs if r]
    summary[key] = {"median_ms": statistics.median(r["ms"] for r in ok) if ok else None,
                    "runs": [r["ms"] for r in ok], "checksums": sorted({r["checksum"] for r in ok}),
                    "forged_calls": [r["forged_calls"] for r in ok if r["forged_calls"] is not None]}
json.dump({"model": model, "compile_mode": compile_mode, "summary": summary, "runs": results},
          open(os.path.join(out_dir, f"e2e-{model}.json"), "w"), indent=1)
print(f"{'e2e ' + model:28s} {'median ms':>10s} {'× eager':>8s}  runs (ms)  checksums  forged calls")
base = summary.get("eager", {}).get("median_ms")
for key, s in summary.items():
    x = f"{base / s['median_ms']:.2f}" if base and s["median_ms"] else "-"
    med = f"{s['median_ms']:.2f}" if s["median_ms"] else "-"
    print(f"{key:28s} {med:>10s} {x:>8s}  {s['runs']}  {s['checksums']}  {s['forged_calls']}")
for plain, forged in (("eager", "eager+forge"), ("compile", "compile+forge"), ("compile", "compile+forge(all)")):
    # forge's own gain over each baseline, medians of the same run
    a, b = summary.get(plain, {}).get("median_ms"), summary.get(forged, {}).get("median_ms")
    if a and b:
        print(f"{forged} over {plain}: {a / b:.2f}x")
