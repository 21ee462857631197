"""The problem's Model end to end, each way in its own process (the package
loads for good once loaded): eager, eager with forge's package, and under
torch.compile in each mode with and without it, alternating so a drift
between processes favours no side. Each process is model_script.py with
KB_* variables; its per-call times come back in a file."""
import json
import os
import subprocess
import sys
import tempfile

WAYS = ("eager", "eager+forge", "compile", "compile+forge")


def stats(ms):
    """{median, spread}: the median and interquartile range (q3 - q1) of the
    timed calls (bench/results/SCHEMA.md), n for the count."""
    if not ms:
        return None
    s = sorted(ms)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]
    mid = len(s) // 2
    median = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
    return {"median": median, "spread": q(0.75) - q(0.25), "n": len(s)}


def one(script, problem, scale, device, iters, timeout, compile_mode=None, package=None, env=None):
    """One process: {"ms": [each timed call], "bytes", "checksum", "mode"} or {"error": text}."""
    fd, times = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    e = dict(os.environ, **(env or {}), KB_ITERS=str(iters), KB_TIMES=times)
    for k, v in (("KB_COMPILE", compile_mode), ("KB_PACKAGE", package)):
        if v:
            e[k] = v
        else:
            e.pop(k, None)
    cmd = [sys.executable, script, problem, "--scale", str(scale), "--device", device]
    try:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            return {"error": "rc %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[-600:]), "mode": compile_mode}
        r = json.load(open(times))
        return {"ms": r["ms"], "bytes": r["bytes"], "checksum": r["checksum"], "mode": compile_mode}
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % timeout, "mode": compile_mode}
    finally:
        os.unlink(times)


def end_to_end(run, package, pairs, compile_modes):
    """run(compile_mode, package) -> one()'s dict. Eager pairs alternate their
    order; each compile mode runs one pair; the better mode is kept per side.
    Without a package (nothing shipped) the +forge ways are not run."""
    got = {w: [] for w in WAYS}
    for i in range(pairs):
        for forged in ((False, True) if i % 2 == 0 else (True, False)):
            if forged and not package:
                continue
            got["eager+forge" if forged else "eager"].append(run(None, package if forged else None))
    for i, mode in enumerate(compile_modes):
        for forged in ((False, True) if i % 2 == 0 else (True, False)):
            if forged and not package:
                continue
            got["compile+forge" if forged else "compile"].append(run(mode, package if forged else None))
    return summarize(got)


def summarize(got):
    """Per way: the calls of all its processes pooled per compile mode, the
    mode with the lower median kept ({median, spread, n}), and the errors."""
    out = {}
    for way, rs in got.items():
        by_mode = {}
        for r in rs:
            if "ms" in r:
                by_mode.setdefault(r["mode"], []).extend(r["ms"])
        modes = {m: stats(ms) for m, ms in by_mode.items()}
        best = min(modes, key=lambda m: modes[m]["median"]) if modes else None
        last = next((r for r in reversed(rs) if "ms" in r and r["mode"] == best), {})
        out[way] = {"ms": modes.get(best), "mode": best, "processes": len(rs),
                    "checksum": last.get("checksum"), "bytes": last.get("bytes"),
                    "modes": {m or "eager": s["median"] for m, s in modes.items()},
                    "errors": [r["error"] for r in rs if "error" in r] or None}
    return out
