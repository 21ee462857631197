#!/usr/bin/env python3
"""KernelBench problems through forge, unchanged, with baselines from the same run.

    python3 bench/kernelbench/run.py KERNELBENCH_CHECKOUT [--level 1] [--only 19,23,softmax]
        [--shard i/n] [--device cuda|cpu] [--scale 1] [--budget 20] [--forge build/forge]
        [--workdir /tmp/forge-kernelbench] [--results FILE] [--resume-from FILE ...]
        [--deadline SECONDS] [--list]

Per problem (bench/kernelbench/README.md): a project in WORKDIR/<problem>
(project.py), `forge build` on it (capture, search with the strategy library),
forge's targets, reasons and shipped kernel (forge_report.py), then the model
end to end eager and under torch.compile, each with and without the package
(measure.py), and the copy floor. One line per problem is appended to the
results file as it finishes; problems it (or a --resume-from file) already
holds are skipped. A table is printed last.
--list prints the level's problems with their class (classify.py) and stops.
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import classify  # noqa: E402
import forge_report  # noqa: E402
import measure  # noqa: E402
import problems  # noqa: E402
import project  # noqa: E402
import results  # noqa: E402


def args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", help="a KernelBench checkout's root (holds KernelBench/level1/)")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--only", default="", help="numbers or name parts, comma-separated")
    ap.add_argument("--shard", default="1/1", help="i/n: every n-th problem from the i-th")
    ap.add_argument("--list", action="store_true", help="print the problems with their class, run nothing")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--scale", type=float, default=1.0, help="sizes above 16 shrunk by about this (model_script.shrink)")
    ap.add_argument("--budget", type=int, default=20, help="search iterations per target")
    ap.add_argument("--budget-seconds", type=int, default=0, help="wall-clock cap per target's search")
    ap.add_argument("--top", type=int, default=2, help="targets per problem")
    ap.add_argument("--max-input-mb", type=int, default=8192, help="capture's cap on saved input samples")
    ap.add_argument("--forge", default=os.path.join(results.ROOT, "build", "forge"))
    ap.add_argument("--workdir", default="/tmp/forge-kernelbench")
    ap.add_argument("--results", help="results file (default: $OUT or bench/results, SCHEMA.md's name)")
    ap.add_argument("--resume-from", nargs="*", default=[], help="earlier results files: their problems are skipped")
    ap.add_argument("--redo", action="store_true", help="run the selected problems even if a results file has them")
    ap.add_argument("--iters", type=int, default=30, help="timed calls per process end to end")
    ap.add_argument("--pairs", type=int, default=2, help="alternating eager pairs")
    ap.add_argument("--compile-modes", default="default,max-autotune-no-cudagraphs")
    ap.add_argument("--build-timeout", type=int, default=360, help="seconds per forge build (SIGINT, then its report)")
    ap.add_argument("--deadline", type=int, default=0, help="seconds for the whole run: no problem starts "
                    "within --reserve of it (0 = none)")
    ap.add_argument("--reserve", type=int, default=150, help="seconds a problem's measuring needs after its build")
    ap.add_argument("--no-peers", dest="peers", action="store_false",
                    help="skip Liger-Kernel and quack-kernels on the problem's inputs (peers.py)")
    ap.add_argument("--keep-stores", action="store_true",
                    help="keep each project's .forge (default: its small files in store.tgz, the rest removed)")
    return ap.parse_args()


def forge_build(forge, d, timeout):
    """forge build --json, stopped with SIGINT at TIMEOUT (forge then prints
    the report of what exists); the report (or None), rc, stderr."""
    p = subprocess.Popen([forge, "-C", d, "--json", "build"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
    open(os.path.join(d, "build.json"), "w").write(out)
    open(os.path.join(d, "build.err"), "w").write(err)
    try:
        return json.loads(out), p.returncode, err
    except ValueError:
        return None, p.returncode, err


PEERS_TIMEOUT = 120  # within --reserve's default, after the end-to-end ways


def run_peers(path, a):
    """peers.py in its own process (Triton and CuTe compile there): {peer: result}."""
    cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers.py"), path,
           "--device", a.device, "--iters", str(a.iters), "--scale", str(a.scale)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=PEERS_TIMEOUT)
        got = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
        if got is None:
            return {"error": "rc %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[-300:])}
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % PEERS_TIMEOUT}
    except ValueError as e:
        return {"error": "unreadable output: %s" % e}
    for peer, r in got.items():
        ms = (r.get("ms") or {}).get("median")
        print("   %s: %s" % (peer, "%.4g ms" % ms if ms else r.get("error") or "no match (max diff %s)" % r.get("max_abs_diff")),
              flush=True)
    return got


def one_problem(a, env, stem, path, limit, left=lambda: None):
    """The results line for one problem. left(): seconds to the run's deadline
    (None: no deadline); too few after the build and the line keeps the
    build's figures without the end-to-end ones, rather than the call's limit
    taking the line with it."""
    t0 = time.time()
    ops = classify.capture_ops(path, a.scale)
    cls = classify.classify(ops)
    # The build stops searching at half its limit (budget.build_seconds) and
    # packages what it accepted; SIGINT at the limit would leave no package.
    # The other half is the package stage's: its end-to-end check runs the
    # model eagerly and, where a target is routed, compiled (compile_env).
    d = project.write(a.workdir, stem, path, a.scale, a.device, a.budget, a.budget_seconds, a.top, a.max_input_mb,
                      build_seconds=int(limit * 0.5))
    print("== %s (%s): forge build, limit %d s" % (stem, cls, limit), flush=True)
    report, rc, err = forge_build(a.forge, d, limit)
    if report is None:  # killed outright: what the store holds, from `forge status`
        st = subprocess.run([a.forge, "-C", d, "--json", "status", "--all"], capture_output=True, text=True, timeout=120)
        try:
            report = dict(json.loads(st.stdout), interrupted=True, notes=["build killed: status of the store"])
        except ValueError:
            pass
    store = os.path.join(d, ".forge")
    rows = forge_report.target_rows(report, store) if report else []
    why = forge_report.reason(report, rows, rc, err)
    build_s = time.time() - t0
    print("   built in %.0f s: rc=%s, %s" % (build_s, rc, why or "shipped"), flush=True)
    pkg = os.path.join(store, "package")
    package = pkg if any(r["shipped"] for r in rows) and os.path.exists(os.path.join(pkg, "libforge.so")) else None
    model = os.path.join(d, "model.py")
    run_env = {"OMP_NUM_THREADS": "1"} if a.device == "cpu" else {}
    run = lambda mode, pk: measure.one(model, path, a.scale, a.device, a.iters, 300, mode, pk, run_env)
    modes = [m for m in a.compile_modes.split(",") if m]
    t = left()
    if t is not None and t < a.reserve / 2:
        e2e, peers = {}, None
        skipped = "end to end not measured: %d s to the deadline" % t
        why = "%s; %s" % (why, skipped) if why else skipped
        print("   " + skipped, flush=True)
    else:
        e2e = measure.end_to_end(run, package, a.pairs, modes)
        t = left()
        peers = run_peers(path, a) if a.peers and a.level == 1 and (t is None or t > PEERS_TIMEOUT) else None
    ceiling = forge_report.copy_ceiling(report or {})
    if not a.keep_stores and os.path.isdir(store):
        # Captured inputs are store objects of up to GBs: the store's small files
        # (records, sources, package.json) stay in store.tgz, the store goes.
        subprocess.run("cd %s && find . -type f -size -256k -print0 | tar czf ../store.tgz --null -T - && cd .. "
                       "&& rm -rf .forge" % shlex.quote(store), shell=True)
    return results.line(env, "level%d/%s" % (a.level, stem), cls, classify.compute_calls(ops), a.scale, a.budget,
                        rows, e2e, ceiling, why, {"build": round(build_s), "total": round(time.time() - t0)}, peers)


def main():
    a = args()
    start = time.time()
    todo = problems.pick(problems.level_files(a.checkout, a.level), a.only)
    todo = problems.shard(todo, *problems.parse_shard(a.shard))
    if a.list:
        for n, stem, path in todo:
            try:
                ops = classify.capture_ops(path, a.scale)
            except Exception as e:  # a problem that does not run at this scale is one line, not the list's end
                print("%-60s %-12s %s: %s" % (stem, "error", type(e).__name__, str(e).splitlines()[0][:120]))
                continue
            print("%-60s %-12s %s" % (stem, classify.classify(ops), " ".join(classify.compute_calls(ops))))
        return
    a.forge = os.path.abspath(a.forge)
    command = "python3 bench/kernelbench/run.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    env = results.environment(a.device, command)
    out = a.results or os.path.join(os.environ.get("OUT") or os.path.join(results.ROOT, "bench", "results"),
                                    results.file_name(env, a.device))
    skip = set() if a.redo else set().union(*(problems.done(f) for f in [out] + a.resume_from))
    lines, left = [], []
    for n, stem, path in todo:
        pid = "level%d/%s" % (a.level, stem)
        if pid in skip:
            print("== %s: in the results already, skipped" % stem)
            continue
        limit = a.build_timeout
        if a.deadline:
            limit = min(limit, int(a.deadline - (time.time() - start) - a.reserve))
            if limit < 60:
                left.append(stem)
                continue
        try:
            rec = one_problem(a, env, stem, path, limit,
                              (lambda: a.deadline - (time.time() - start)) if a.deadline else (lambda: None))
        except Exception as e:  # one problem's crash is its line, not the run's end
            rec = results.line(env, pid, "unknown", [], a.scale, a.budget, [], {}, None,
                               "runner error: %s: %s" % (type(e).__name__, e), None)
        with open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        lines.append(rec)
    print()
    print(results.table(lines))
    if left:
        print("not started (deadline): %s; run again to continue" % ", ".join(left))
    print("results: %s" % out)


if __name__ == "__main__":
    main()
