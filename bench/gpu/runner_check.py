#!/usr/bin/env python3
"""The CUDA worker's sandbox and checks on the GPU, without forge itself.

    python3 bench/gpu/runner_check.py --family FAMILY.json [--build DIR] [--evals N]

Builds runtime/worker (forge_worker + forge_runner) against this machine's
torch, compiles every tests/adversarial/cuda/*.cu as forge compiles CUDA
candidates, and sends each one to the worker with the import check off
(--no-import-check), so only the runner's sandbox and the judge's checks stand
between a cheat and acceptance. Then N evaluations of the honest softmax for
the throughput (evaluations per GPU-minute). FAMILY.json is
targets/softmax/family.yaml as JSON (python3 -c 'import yaml,json,sys;
json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)' ...), since the GPU
machine may lack PyYAML. Prints a table last; writes $OUT/runner_check.json.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--build", default="/tmp/forge-wb")
    ap.add_argument("--evals", type=int, default=20)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    out_dir = os.environ.get("OUT", "/tmp/forge-out")
    os.makedirs(out_dir, exist_ok=True)

    t0 = time.time()
    prefix = torch.utils.cmake_prefix_path
    r = sh(f"cmake -S {ROOT}/runtime/worker -B {a.build} -G Ninja -DCMAKE_BUILD_TYPE=Release "
           f"-DCMAKE_PREFIX_PATH={prefix} -DFORGE_WORKER_CUDA=ON && ninja -C {a.build} forge_worker forge_runner")
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(1)
    print(f"worker built in {time.time() - t0:.0f} s", flush=True)

    family = json.load(open(a.family))
    so_dir = os.path.join(a.build, "cheats")
    os.makedirs(so_dir, exist_ok=True)
    files = sorted(glob.glob(f"{ROOT}/tests/adversarial/cuda/*.cu"))
    if a.only:
        files = [f for f in files if any(o in f for o in a.only.split(","))]
    sos = {}
    compile_failed = {}
    for f in files:
        name = os.path.basename(f)[:-3]
        so = os.path.join(so_dir, name + ".so")
        r = sh(f"nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
               f"-gencode=arch=compute_90a,code=sm_90a -I{ROOT}/runtime/abi -o {so} {f}")
        if r.returncode != 0:
            compile_failed[name] = r.stderr[-300:]
        else:
            sos[name] = so

    args = [{"type": "Tensor", "dtype": "float32", "sizes": [a.rows, a.cols], "strides": [a.cols, 1],
             "device": "cuda:0", "name": "self"},
            {"type": "int", "value": -1, "name": "dim"},
            {"type": "bool", "value": False, "name": "half_to_float"}]

    def request(rid, so, bench=None):
        return {"cmd": "evaluate", "id": rid, "op": "_softmax", "args": args, "samples": [],
                "family": family, "candidate": so, "seed": 11, "call_timeout_seconds": 15,
                "bench": bench or {}}

    def run_worker(reqs, env=None):
        lines = "".join(json.dumps(q) + "\n" for q in reqs)
        t = time.time()
        p = subprocess.run([f"{a.build}/forge_worker", "--backend", "cuda", "--no-import-check"],
                           input=lines, capture_output=True, text=True, env=env, timeout=540)
        replies = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        return replies, time.time() - t, p.stderr

    # The cheats, one worker for all (a crash or sandbox kill ends only its runner).
    reqs = [request(n, so, {"reps": 20, "min_seconds": 0.1}) for n, so in sos.items()]
    replies, secs, err = run_worker(reqs)
    table = []
    for rep in replies:
        if "hello" in rep:
            continue
        b = rep.get("bench", {})
        table.append({"candidate": rep.get("id"), "verdict": rep.get("verdict", "error"),
                      "reason": rep.get("reason", rep.get("error", "")),
                      "detail": (rep.get("detail") or "")[:160],
                      "speedup_eager": b.get("speedup_eager"), "clock_check": b.get("clock_check"),
                      "cases": rep.get("verify", {}).get("cases"),
                      "vary_max": rep.get("verify", {}).get("vary_max")})
    diag = {}
    if any(t["candidate"] == "softmax_ok" and t["verdict"] != "accepted" for t in table):
        env = dict(os.environ, FORGE_SANDBOX_DIAGNOSE="1")
        d, _, derr = run_worker([request("softmax_ok", sos["softmax_ok"])], env=env)
        diag = {"replies": d, "stderr": derr[-3000:]}

    # Throughput: N honest evaluations in one worker, forge's default bench settings.
    thr = {}
    if "softmax_ok" in sos and a.evals > 0:
        reps, secs_h, _ = run_worker([request(f"ok{i}", sos["softmax_ok"]) for i in range(a.evals)])
        ok = [r for r in reps if r.get("verdict") == "accepted"]
        per = [r.get("seconds", 0) for r in reps if "seconds" in r]
        thr = {"evaluations": len(per), "accepted": len(ok), "wall_s": secs_h,
               "per_minute": 60.0 * len(per) / secs_h if secs_h > 0 else 0,
               "median_eval_s": sorted(per)[len(per) // 2] if per else None,
               "verify_s": sorted(r["verify"].get("seconds", 0) for r in ok)[len(ok) // 2] if ok else None,
               "bench_s": sorted(r["bench"].get("seconds", 0) for r in ok)[len(ok) // 2] if ok else None,
               "threads_check_s": sorted(r["verify"].get("threads", {}).get("seconds", 0) for r in ok)[len(ok) // 2]
               if ok else None,
               "cases": ok[0]["verify"].get("cases") if ok else None,
               "phase_median_s": {k: sorted(r.get("phase_seconds", {}).get(k, 0) for r in ok)[len(ok) // 2]
                                  for k in sorted({k for r in ok for k in r.get("phase_seconds", {})})},
               "not_accepted": [{"id": r.get("id"), "reason": r.get("reason", r.get("error", "")),
                                 "detail": (r.get("detail") or "")[:300]}
                                for r in reps if "seconds" in r and r.get("verdict") != "accepted"]}

    result = {"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "driver": sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.strip(),
              "command": " ".join(sys.argv), "shape": [a.rows, a.cols], "cheats": table,
              "compile_failed": compile_failed, "throughput": thr, "diagnosis": diag,
              "worker_stderr_tail": err[-2000:]}
    json.dump(result, open(os.path.join(out_dir, "runner_check.json"), "w"), indent=1)
    print(f"\n{'candidate':34} {'verdict':9} {'reason':28} speedup  detail")
    for t in table:
        sp = f"{t['speedup_eager']:.2f}" if isinstance(t["speedup_eager"], (int, float)) else "-"
        print(f"{t['candidate']:34} {t['verdict']:9} {t['reason'][:28]:28} {sp:>6}  {t['detail'][:70]}")
    for n, e in compile_failed.items():
        print(f"{n:34} compile failed: {e[-120:]}")
    print("throughput:", json.dumps(thr))


if __name__ == "__main__":
    main()
