"""The run's figures as bench/results/SCHEMA.md lines (kind `kernelbench`, one
per problem, appended as each finishes) and the table printed last. Pure
Python apart from environment(), which asks torch and nvidia-smi."""
import datetime
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def commit():
    """FORGE_COMMIT, else .gpu-commit (the device copy has no .git), else git."""
    c = os.environ.get("FORGE_COMMIT")
    if not c and os.path.exists(os.path.join(ROOT, ".gpu-commit")):
        c = open(os.path.join(ROOT, ".gpu-commit")).read().strip()
    if not c:
        g = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        c = g.stdout.strip() if g.returncode == 0 else None
    return c[:7] if c else None


def environment(device, command):
    """The fields every line carries (SCHEMA.md), for this machine."""
    import torch
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name()
        smi = subprocess.run("nvidia-smi --query-gpu=driver_version --format=csv,noheader", shell=True,
                             capture_output=True, text=True)
        driver = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else None
    else:
        name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "cpu")
        name += " (%d cores)" % os.cpu_count()
        driver = None
    return {"schema": "forge-bench/1", "kind": "kernelbench",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": commit(),
            "device": name, "driver": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
            "command": command, "source": None, "notes": None}


def file_name(env, device):
    slug = "cpu" if not device.startswith("cuda") else (
        re.sub(r"[^a-z0-9]+", "-", env["device"].lower().replace("nvidia ", "")).strip("-") or "gpu")
    return "%s_%s_%s_kernelbench.jsonl" % (env["date"], env["commit"] or "nocommit", slug)


def ratio(a, b):
    """a's median over b's: how many times faster b is."""
    a, b = (a or {}).get("median"), (b or {}).get("median")
    return a / b if a and b else None


def line(env, problem, cls, ops, scale, budget, rows, e2e, ceiling, why, seconds, peers=None):
    """One problem's line: forge's targets and shipped kernel, the model end
    to end four ways (same run), the copy floor of the model's inputs and
    outputs, and the reason when nothing ships."""
    ms = lambda w: (e2e.get(w) or {}).get("ms")
    nbytes = next(((e2e.get(w) or {}).get("bytes") for w in ("eager", "compile") if (e2e.get(w) or {}).get("bytes")),
                  None)
    floor_ms = nbytes / ceiling * 1e3 if nbytes and ceiling else None
    top = next((r for r in rows if r["shipped"]), rows[0] if rows else None)
    return dict(env, problem=problem, **{"class": cls}, ops=ops, scale=scale, budget=budget,
                shipped=any(r["shipped"] for r in rows), reason=why, targets=rows,
                kernel_us=top and top["candidate_us"], kernel_target=top and top["target"],
                eager_ms=ms("eager"), forge_ms=ms("eager+forge"), compile_ms=ms("compile"),
                compile_forge_ms=ms("compile+forge"),
                compile_mode={w: (e2e.get(w) or {}).get("mode") for w in ("compile", "compile+forge")},
                speedup={"eager": ratio(ms("eager"), ms("eager+forge")),
                         "compile": ratio(ms("compile"), ms("compile+forge")),
                         "kernel_eager": top and top["speedup"]["eager"],
                         "kernel_compile": top and top["speedup"]["compile"]},
                bytes=nbytes, ceiling_bytes_per_s=ceiling, floor_ms=floor_ms,
                floor_pct={w: 100 * floor_ms / ms(w)["median"] if floor_ms and ms(w) else None
                           for w in ("eager", "eager+forge", "compile", "compile+forge")},
                checksums={w: (e2e.get(w) or {}).get("checksum") for w in e2e},
                errors={w: (e2e.get(w) or {}).get("errors") for w in e2e if (e2e.get(w) or {}).get("errors")} or None,
                seconds=seconds, **({"peers": peers} if peers is not None else {}))


def table(lines):
    """The table printed last: per problem its class, forge's top target and
    kernel (× over stock and Inductor for the op, from the build), the model's
    median ms four ways, the copy floor, and why nothing shipped."""
    f = lambda v, p="%.3g": "-" if v is None else p % v
    med = lambda o: None if not o else o.get("median")
    head = "%-30s %-11s %-26s %6s %6s %9s %9s %9s %9s %9s %6s  %s" % (
        "problem", "class", "top target (kernel)", "k×eag", "k×cmp", "eager ms", "+forge", "compile", "+forge",
        "floor ms", "%floor", "reason")
    out = [head]
    for x in lines:
        t = next((r for r in x["targets"] if r["target"] == x.get("kernel_target")), None)
        name = "-" if not t else "%s%s" % (t["op"], "" if t["shipped"] else " (none)")
        best = med(x["forge_ms"]) or med(x["eager_ms"])
        pct = 100 * x["floor_ms"] / best if x.get("floor_ms") and best else None
        out.append("%-30s %-11s %-26s %6s %6s %9s %9s %9s %9s %9s %6s  %s" % (
            x["problem"].split("/")[-1][:30], x["class"], name[:26], f(x["speedup"]["kernel_eager"], "%.2f"),
            f(x["speedup"]["kernel_compile"], "%.2f"), f(med(x["eager_ms"])), f(med(x["forge_ms"])),
            f(med(x["compile_ms"])), f(med(x["compile_forge_ms"])), f(x.get("floor_ms")), f(pct, "%.0f"),
            (x.get("reason") or "")[:90]))
    shipped = [x for x in lines if x["shipped"]]
    out.append("%d problems, %d with a shipped kernel; k×: forge's kernel over stock (eag) and Inductor (cmp) for "
               "the op, from the build; ms: the model end to end, medians; %%floor: floor over the fastest eager way"
               % (len(lines), len(shipped)))
    return "\n".join(out)


def goals(lines):
    """Issue 32's goals over single-op problems (class single-op): how many
    shipped a kernel; per problem forge's kernel over the better of eager and
    torch.compile for the op (the build's figures; a problem with no kernel
    has none, stock never stands in); their geometric mean; those below 1;
    and, for problems that move at least 1 GB, the copy floor's share of the
    model's time with the package."""
    single = [x for x in lines if x.get("class") == "single-op"]
    shipped = [x for x in single if x["shipped"]]
    fig = {}
    for x in shipped:
        k = [v for v in (x["speedup"].get("kernel_eager"), x["speedup"].get("kernel_compile")) if v]
        if len(k) == 2:
            fig[x["problem"]] = min(k)
    out = ["single-op problems: %d run, %d with a shipped kernel (%.0f%%)"
           % (len(single), len(shipped), 100.0 * len(shipped) / len(single) if single else 0)]
    if fig:
        geo = 1.0
        for v in fig.values():
            geo *= v
        geo **= 1.0 / len(fig)
        out.append("forge's kernel over the better of eager and torch.compile: geometric mean %.2f× over %d "
                   "problems with both figures; below 1: %s" % (
                       geo, len(fig), ", ".join("%s %.2f" % (p.split("/")[-1], v)
                                                for p, v in sorted(fig.items()) if v < 1) or "none"))
    big = [x for x in shipped if (x.get("bytes") or 0) >= 1e9 and (x.get("floor_pct") or {}).get("eager+forge")]
    if big:
        out.append("≥ 1 GB with a package: copy floor / model time %s" % ", ".join(
            "%s %.0f%%" % (x["problem"].split("/")[-1], x["floor_pct"]["eager+forge"]) for x in big))
    return "\n".join(out)


if __name__ == "__main__":  # python3 bench/kernelbench/results.py [--goals] FILE...: one table over shards' files
    import json
    import sys
    latest = {}  # a problem run again (--redo): its last line
    files = [f for f in sys.argv[1:] if f != "--goals"]
    for f in files:
        for text in open(f):
            if '"kernelbench"' in text:
                x = json.loads(text)
                latest[x["problem"]] = x
    print(table(list(latest.values())))
    if "--goals" in sys.argv[1:]:
        print(goals(list(latest.values())))
