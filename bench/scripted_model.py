#!/usr/bin/env python3
"""Which kernel forge ships when a model's replies get faster: the race, end to end.

    python3 bench/scripted_model.py [--trials 3] [--load 1] [--forge build/forge]
    python3 bench/scripted_model.py --device cuda --op softmax|group_norm [--trials 1]

The `command` provider is a script that answers the i-th request with the i-th
kernel of a fixed sequence, whatever the prompt.

CPU (default): every kernel is the library's honest CPU softmax
(targets/softmax/cpu_rows_3pass.cpp, ISA as compiled, UNROLL 4) wrapped so
that each call, after computing its result, busy-waits until it has taken
RATIO times as long as the computation: the kernels are honest and stand in a
known order of speed, whatever this machine is. The sequence (RATIO):
1.728, 1.44, 1.2, 1.0, 1.01: each of the first four 1.2x faster than the one
before, the last within 1% of the fastest. The goal: forge ships the 1.0 kernel,
every trial. Each trial is a fresh project (empty store) with `--load` busy
processes beside the build, on `_softmax` float32 (`--shape`, default
[4, 4, 128, 128]; one intra-op thread).

CUDA: the replies are the strategy library's own CUDA instances for the op
(CUDA_SEQUENCES below: `_softmax` over rows of 4096 floats, `native_group_norm`
of a [8, 512, 64, 64] float32 input in 32 groups), unwrapped, in an order
that is not their order of speed. The goal: the kernel forge ships is the
fastest one its own benchmark measured (by median), every trial.

Prints a table last; writes bench/results/<date>_<commit>_<device>_scripted_model.json
($OUT/ instead where OUT is set). Needs torch as `python` on PATH (the repo's
.venv is put first when it exists) and a built forge.
"""
import argparse
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "templates"))
from template_text import source_text as template_source  # noqa: E402  (a template as forge loads it)
RATIOS = [1.728, 1.44, 1.2, 1.0, 1.01]

MODEL = """import torch
torch.manual_seed(0)
x = torch.randn({shape})
for _ in range(3):
    y = torch.softmax(x, dim=-1)
print(float(y.sum()))
"""

# The i-th request gets kernels/k<i>.cpp (the last one again past the end).
# Requests arrive together (the variants under a node are asked at once), so
# the counter is taken under a lock.
PROVIDER = """#!/bin/sh
cat > /dev/null
dir=$(dirname "$0")
n=$(flock "$dir/count.lock" sh -c 'n=$(cat "$1/count" 2>/dev/null || echo 0); echo $((n + 1)) > "$1/count"; echo $n' - "$dir")
last=$(( $(ls "$dir"/kernels | wc -l) - 1 ))
[ "$n" -gt "$last" ] && n=$last
echo 'A softmax.'
echo '```cpp'
cat "$dir/kernels/k$n.cpp"
echo '```'
"""

RATIO_LINE = re.compile(r"idle until the call has taken ([0-9.]+) x the computation")
KERNEL_LINE = re.compile(r"// scripted kernel (k\d+)")

# The library instances the CUDA provider answers with, in order: (template
# under targets/, its params). Each applies to the op's captured signature.
CUDA_SEQUENCES = {
    "softmax": {
        "model": "x = torch.randn(4096, 4096, device='cuda')\nf = lambda: torch.softmax(x, dim=-1)\n",
        "ops": ["_softmax"],
        "kernels": [
            ("softmax/cuda_block_row.cu", {"OP": "_softmax", "BLOCK": 128, "CHUNKS": 0, "EXP": 0}),
            ("softmax/cuda_warp_rows.cu", {"OP": "_softmax", "LANES": 32, "BLOCK": 128, "MAX_ROW": 4096, "EXP": 1}),
            ("softmax/cuda_block_row.cu", {"OP": "_softmax", "BLOCK": 256, "CHUNKS": 4, "EXP": 1}),
            ("softmax/cuda_block_row.cu", {"OP": "_softmax", "BLOCK": 1024, "CHUNKS": 0, "EXP": 0}),
            ("softmax/cuda_block_row.cu", {"OP": "_softmax", "BLOCK": 512, "CHUNKS": 2, "EXP": 1}),
        ],
    },
    "group_norm": {
        "model": ("x = torch.randn(8, 512, 64, 64, device='cuda')\n"
                  "gn = torch.nn.GroupNorm(32, 512).cuda()\nf = lambda: gn(x)\n"),
        "ops": ["native_group_norm"],
        "kernels": [
            ("group_norm/cuda_split_group.cu", {"BLOCK": 128, "CHUNK": 131072, "REVERSE": 0, "PDL": 0}),
            ("group_norm/cuda_cluster_group.cu", {"CLUSTER": 8, "BLOCK": 512, "SMEM_KB": 224, "UNROLL": 4}),
            ("group_norm/cuda_split_group.cu", {"BLOCK": 256, "CHUNK": 8192, "REVERSE": 1, "PDL": 1}),
            ("group_norm/cuda_cluster_group.cu", {"CLUSTER": 16, "BLOCK": 1024, "SMEM_KB": 224, "UNROLL": 4}),
            ("group_norm/cuda_split_group.cu", {"BLOCK": 512, "CHUNK": 32768, "REVERSE": 1, "PDL": 1}),
        ],
    },
}

CUDA_MODEL = """import torch
torch.manual_seed(0)
{setup}with torch.no_grad():
    for _ in range(3):
        y = f()
torch.cuda.synchronize()
print(float(y.float().sum()))
"""


def library_kernel():
    """The rows_3pass template with its params and its shared blocks inlined, as forge instantiates it."""
    return ("#define FORGE_P_ISA 0\n#define FORGE_P_UNROLL 4\n" +
            template_source(os.path.join(ROOT, "targets", "softmax", "cpu_rows_3pass.cpp")))


def cuda_kernel(k, template, params):
    """A library instance as forge compiles it: its params as FORGE_P_ defines, shared blocks inlined."""
    defines = "".join(f"#define FORGE_P_{name} {value}\n" for name, value in params.items())
    label = " ".join(f"{n}={v}" for n, v in params.items())
    return (f"// scripted kernel k{k}: {template} {label}\n" + defines +
            template_source(os.path.join(ROOT, "targets", template)))


def scripted_kernel(ratio):
    return ("#include <chrono>\n#define forge_kernel forge_kernel_honest\n" + library_kernel() +
            "\n#undef forge_kernel\n"
            f"// Honest, then idle until the call has taken {ratio} x the computation.\n"
            "extern \"C\" int forge_kernel(const forge_call* call) {\n"
            "  const auto t0 = std::chrono::steady_clock::now();\n"
            "  const int rc = forge_kernel_honest(call);\n"
            "  const auto work = std::chrono::steady_clock::now() - t0;\n"
            f"  while (std::chrono::steady_clock::now() - t0 < work * {ratio}) {{\n"
            "  }\n"
            "  return rc;\n"
            "}\n")


def burn(stop_at):
    while time.time() < stop_at:
        pass


def trial(forge, k, load, shape, device, op):
    d = tempfile.mkdtemp(prefix=f"forge-scripted-{k}-")
    os.makedirs(os.path.join(d, "kernels"))
    if device == "cuda":
        seq = CUDA_SEQUENCES[op]
        kernels = [cuda_kernel(i, t, p) for i, (t, p) in enumerate(seq["kernels"])]
        model, ops, fence = CUDA_MODEL.replace("{setup}", seq["model"]), seq["ops"], "cuda"
        backend = "device: {backend: cuda}\n"
    else:
        kernels = [scripted_kernel(r) for r in RATIOS]
        model, ops, fence, backend = MODEL.replace("{shape}", shape), ["_softmax"], "cpp", ""
    for i, text in enumerate(kernels):
        open(os.path.join(d, "kernels", f"k{i}.cpp"), "w").write(text)
    open(os.path.join(d, "model.py"), "w").write(model)
    open(os.path.join(d, "provider.sh"), "w").write(PROVIDER.replace("```cpp", "```" + fence))
    os.chmod(os.path.join(d, "provider.sh"), 0o755)
    open(os.path.join(d, "forge.yaml"), "w").write(
        "models:\n  sm: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n" + backend +
        f"targets: {{ops: [{', '.join(ops)}], top: 1, min_share: 0}}\n"
        f"budget: {{iterations: {len(kernels)}}}\n"
        "proposer:\n  strategies: false\n"
        f"  llm: {{provider: command, command: sh provider.sh, variants: {len(kernels)}}}\n")
    burners = [multiprocessing.Process(target=burn, args=(time.time() + 3600,)) for _ in range(load)]
    for b in burners:
        b.start()
    t0 = time.time()
    # The build's progress goes to a log beside the results, so a trial cut off by a
    # time limit still says where its time went.
    log_dir = os.environ.get("OUT") or tempfile.gettempdir()
    log = os.path.join(log_dir, f"scripted_{op if device == 'cuda' else 'cpu'}_trial{k}.log")
    try:
        with open(log, "w") as err:
            p = subprocess.run([forge, "--json", "build"], cwd=d, stdout=subprocess.PIPE, stderr=err, text=True,
                               timeout=3000, env=dict(os.environ, FORGE_PROGRESS="lines"))
    finally:
        for b in burners:
            b.terminate()
    wall = time.time() - t0
    # A build that exits nonzero (a step failed, e.g. the end-to-end check)
    # still reports what it searched: the trial is read from the store then.
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        rep = {}
    if not rep.get("targets"):
        shutil.rmtree(d, ignore_errors=True)
        return {"trial": k, "error": json.dumps(rep.get("notes")) if rep else p.stdout[-2000:],
                "log_tail": open(log).read()[-1000:], "wall_s": wall, "rc": p.returncode}
    t = rep["targets"][0]
    evals = evaluations(d)
    measured = [e["ratio"] for e in evals if e["verdict"] == "accepted" and e["ratio"] is not None]
    timed = [e for e in evals if e["verdict"] == "accepted" and e["candidate_us"]]
    fastest = min(timed, key=lambda e: e["candidate_us"]) if timed else None
    shipped_text = source_text(d, t.get("best_source"))
    shipped_kernel = kernel_of(shipped_text)
    shipped_us = [e["candidate_us"] for e in timed if e["kernel"] == shipped_kernel and shipped_kernel]
    out = {"trial": k, "wall_s": wall, "rc": p.returncode, "notes": rep.get("notes"),
           "iterations": t.get("iterations"), "outcomes": t.get("outcomes"),
           "shipped_iteration": t.get("best_iteration"), "best_speedup_eager": t.get("best_speedup_eager"),
           "best_strategy": t.get("best_strategy"),
           # Which kernel of the sequence each is, read from its own source.
           "shipped_ratio": ratio_of(shipped_text), "shipped_kernel": shipped_kernel,
           "fastest_verified_ratio": min(measured) if measured else None,
           # By forge's own benchmark: the accepted kernel with the lowest median.
           "fastest_measured_kernel": fastest["kernel"] if fastest else None,
           "fastest_measured_us": fastest["candidate_us"] if fastest else None,
           "shipped_us": min(shipped_us) if shipped_us else None,
           "races": races(d), "evaluations": evals}
    shutil.rmtree(d, ignore_errors=True)
    return out


def source_text(d, digest):
    if not digest:
        return ""
    try:
        return open(os.path.join(d, ".forge", "objects", digest[:2], digest[2:]), "rb").read()[20:].decode()
    except (OSError, UnicodeDecodeError):
        return ""


def ratio_of(text):
    m = RATIO_LINE.search(text or "")
    return float(m.group(1)) if m else None


def kernel_of(text):
    m = KERNEL_LINE.search(text or "")
    return m.group(1) if m else None


def evaluations(d):
    """Each evaluation record in the store: the kernel's file and ratio, its speedup over stock, spreads."""
    out = []
    for rec in store_records(d):
        b = rec.get("bench") if isinstance(rec.get("bench"), dict) else None
        if "candidate" in rec and "verdict" in rec and b:
            src = rec.get("source") if isinstance(rec.get("source"), str) else None
            text = source_text(d, src)
            out.append({"file": rec["candidate"], "verdict": rec["verdict"], "reason": rec.get("reason"),
                        "ratio": ratio_of(text), "kernel": kernel_of(text), "faster_test": b.get("faster_test"),
                        "speedup_eager": b.get("speedup_eager"), "faster": b.get("faster"),
                        "candidate_us": b.get("candidate_us", {}).get("median"),
                        "candidate_iqr": b.get("candidate_us", {}).get("spread"),
                        "eager_us": b.get("eager_us", {}).get("median"),
                        "eager_iqr": b.get("eager_us", {}).get("spread")})
    return sorted(out, key=lambda e: e["file"])


def store_records(d):
    for root, _, files in os.walk(os.path.join(d, ".forge", "objects")):
        for f in files:
            try:
                rec = json.loads(open(os.path.join(root, f), "rb").read()[20:])
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(rec, dict):
                yield rec


def races(d):
    """The race records the build journaled: who raced whom, the decision."""
    out = []
    for rec in store_records(d):
        if "challenger_wins" in rec and "rule" in rec:
            out.append({"challenger_wins": rec["challenger_wins"], "effect": rec.get("effect"),
                        "p": rec.get("p"), "why": rec.get("why")})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--load", type=int, default=1, help="busy processes beside the build")
    ap.add_argument("--forge", default=os.path.join(ROOT, "build", "forge"))
    ap.add_argument("--shape", default="4, 4, 128, 128", help="the CPU softmax input's sizes (last dim reduced)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--op", choices=sorted(CUDA_SEQUENCES), default="softmax", help="CUDA: the target's op")
    a = ap.parse_args()
    venv = os.path.join(ROOT, ".venv", "bin")
    if os.path.isdir(venv):
        os.environ["PATH"] = venv + os.pathsep + os.environ["PATH"]
    rows = [trial(a.forge, k, a.load, a.shape, a.device, a.op) for k in range(a.trials)]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    commit = os.environ.get("FORGE_COMMIT") or commit
    if a.device == "cuda":
        import torch
        dev = torch.cuda.get_device_name(0)
        res = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "device": dev, "torch": torch.__version__,
               "command": " ".join(sys.argv), "op": a.op, "sequence": CUDA_SEQUENCES[a.op]["kernels"],
               "trials": rows, "goal": "the fastest kernel forge measured is the one shipped, every trial"}
        tag = "h200" if "H200" in dev else "h100" if "H100" in dev else "cuda"
        name = f"{res['date']}_{commit}_{tag}_scripted_{a.op}.json"
    else:
        res = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "device": "cpu", "cpus": os.cpu_count(),
               "command": " ".join(sys.argv), "ratios": RATIOS, "load": a.load, "shape": a.shape, "trials": rows,
               "goal": "the 1.0 kernel shipped in every trial"}
        name = f"{res['date']}_{commit}_cpu_scripted_model.json"
    res_dir = os.environ.get("OUT") or os.path.join(ROOT, "bench", "results")
    path = os.path.join(res_dir, name)
    os.makedirs(res_dir, exist_ok=True)
    json.dump(res, open(path, "w"), indent=1)
    if a.device == "cuda":
        print_cuda(rows, path)
        return
    print(f"{'trial':>5} {'shipped (ratio)':>16} {'fastest seen':>13} {'x stock':>8} {'races won/run':>14} {'wall s':>7}  outcomes")
    for r in rows:
        if "error" in r:
            print(f"{r['trial']:5d} error: {r['error'][-300:]}")
            continue
        won = sum(x["challenger_wins"] for x in r["races"])
        print(f"{r['trial']:5d} {r['shipped_ratio']!s:>16} {r['fastest_verified_ratio']!s:>13} {r['best_speedup_eager'] or 0:8.2f} "
              f"{won:>6}/{len(r['races']):<7} {r['wall_s']:7.0f}  {json.dumps(r['outcomes'])}")
    for r in rows:
        for e in r.get("evaluations", []):
            print(f"  trial {r['trial']} {e['file']:24} ratio {e['ratio']!s:5} {e['verdict']:9} x{e['speedup_eager'] or 0:.2f} "
                  f"({e['candidate_us'] or 0:.0f}+-{e['candidate_iqr'] or 0:.0f} us vs stock "
                  f"{e['eager_us'] or 0:.0f}+-{e['eager_iqr'] or 0:.0f})")
    ok = sum(1 for r in rows if r.get("shipped_ratio") is not None and
             r.get("shipped_ratio") == r.get("fastest_verified_ratio"))
    best = sum(1 for r in rows if r.get("shipped_ratio") == 1.0)
    print(f"the fastest verified kernel shipped in {ok} of {len(rows)} trials "
          f"(the 1.0 kernel in {best}); written {path}")


def print_cuda(rows, path):
    for r in rows:
        for e in r.get("evaluations", []):
            print(f"  trial {r['trial']} {e['file']:24} {e['kernel']!s:4} {e['verdict']:9} x{e['speedup_eager'] or 0:.2f} "
                  f"({e['candidate_us'] or 0:.1f}+-{e['candidate_iqr'] or 0:.1f} us vs stock "
                  f"{e['eager_us'] or 0:.1f}+-{e['eager_iqr'] or 0:.1f})")
    print(f"{'trial':>5} {'shipped':>8} {'its us':>8} {'fastest measured':>17} {'its us':>8} {'races won/run':>14} {'wall s':>7}")
    ok = 0
    for r in rows:
        if "error" in r:
            print(f"{r['trial']:5d} error: {r['error'][-300:]}")
            continue
        won = sum(x["challenger_wins"] for x in r["races"])
        ok += r["shipped_kernel"] is not None and r["shipped_kernel"] == r["fastest_measured_kernel"]
        print(f"{r['trial']:5d} {r['shipped_kernel']!s:>8} {r['shipped_us'] or 0:8.1f} {r['fastest_measured_kernel']!s:>17} "
              f"{r['fastest_measured_us'] or 0:8.1f} {won:>6}/{len(r['races']):<7} {r['wall_s']:7.0f}")
        if r.get("rc"):
            print(f"      the build exited {r['rc']}: {json.dumps(r.get('notes'))[-400:]}")
    print(f"the fastest measured kernel shipped in {ok} of {len(rows)} trials; written {path}")


if __name__ == "__main__":
    main()
