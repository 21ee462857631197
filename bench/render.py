#!/usr/bin/env python3
"""Markdown tables from benchmark results (bench/results/*.jsonl, schema in
bench/results/SCHEMA.md). Pure Python 3, standard library only.

  python3 bench/render.py bench/results/*.jsonl      every table the files hold
  python3 bench/render.py --table targets FILE...    one table
  python3 bench/render.py --check docs/PERF.md       exit 1 if a rendered block differs
  python3 bench/render.py --write docs/PERF.md       re-render the blocks in place

A document embeds a table as a block that names the table and its files
(paths from the repository root):

  <!-- render: targets bench/results/2026-12-01_937d3d2_h200.jsonl -->
  ...the rendered table, written by --write, compared by --check...
  <!-- /render -->

Tables: targets, e2e, ceiling, throughput, worker, capture, package_cases, and
designs:FAMILY (the rejected designs of one family). Every table but the
designs ends with the result files it came from: date, device, commit and
command; a design row gives its date and commit, and its line its command. Numbers are
printed as stored: a transcribed 1.001 stays 1.001, a tool's 2.1932 is shown
to the table's precision."""
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = "forge-bench/1"
COMMON = ("schema", "kind", "date", "commit", "device", "driver", "torch", "cuda", "command", "source", "notes")
REQUIRED = {
    "target": ("model", "target", "share_pct", "speedup", "floor_pct", "under_compile", "kernel"),
    "e2e": ("model", "eager_ms", "forge_ms", "compile_ms", "compile_forge_ms", "check"),
    "ceiling": ("tensor", "mb", "empty_kernel_us", "memcpy_us", "copy_us", "copy_form", "copy_floor_pct",
                "read_us", "read_floor_pct", "ceiling_tb_s"),
    "throughput": ("model", "target", "evaluations", "search_s", "per_min", "compile_wait_s", "compiled_ahead",
                   "nvcc_s", "verify_s", "bench_s"),
    "worker": ("evaluations", "accepted", "wall_s", "per_min", "median_eval_s", "verify_s", "bench_s", "honest",
               "cheats"),
    "capture": ("model", "plain_ms", "captured_ms", "overhead_pct", "calls", "signatures", "device_ms"),
    "package_case": ("case", "rc", "forged", "fallback", "max_error"),
    "design": ("family", "design", "status", "result"),
    "profile": ("model", "plain", "package"),
    "kernelbench": ("problem", "class", "shipped", "reason", "targets", "eager_ms", "forge_ms", "compile_ms",
                    "compile_forge_ms", "floor_ms"),
}
DASH = "—"


class Bad(Exception):
    pass


def load(paths):
    """Every line of every file, each with `_file` (its path from the root)."""
    out = []
    for path in paths:
        full = path if os.path.isabs(path) else os.path.join(ROOT, path)
        rel = os.path.relpath(full, ROOT)
        with open(full, encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                where = "%s:%d" % (rel, n)
                try:
                    r = json.loads(text)
                except ValueError as e:
                    raise Bad("%s: not JSON (%s)" % (where, e))
                if r.get("schema") != SCHEMA:
                    raise Bad("%s: schema is %r, not %r" % (where, r.get("schema"), SCHEMA))
                kind = r.get("kind")
                if kind not in REQUIRED:
                    raise Bad("%s: unknown kind %r" % (where, kind))
                missing = [k for k in COMMON + REQUIRED[kind] if k not in r]
                if missing:
                    raise Bad("%s: %s line lacks %s" % (where, kind, ", ".join(missing)))
                if not re.fullmatch(r"\d{4}-\d\d-\d\d", r["date"] or ""):
                    raise Bad("%s: date %r is not YYYY-MM-DD" % (where, r["date"]))
                r["_file"] = rel
                out.append(r)
    return out


def num(v, d):
    """v with d decimals, or d + 1 where the stored value has one more (a
    transcribed figure is shown as it was written, never rounded again)."""
    if v is None:
        return DASH
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return " / ".join(num(x, d) for x in v)
    s = "%.*f" % (d, v)
    if float(s) != v:
        t = "%.*f" % (d + 1, v)
        if float(t) == v:
            return t
    return s


def ms(t, d=2):
    """A time object: its median, else its runs, else its range."""
    if t is None:
        return DASH
    if t.get("median") is not None:
        return num(t["median"], d)
    if t.get("runs"):
        return ", ".join(num(x, d) for x in t["runs"])
    if t.get("range"):
        return "%s–%s" % (num(t["range"][0], d), num(t["range"][1], d))
    return DASH


def med(t, d=1):
    return DASH if not t or t.get("median") is None else num(t["median"], d)


def x(v):
    return DASH if v is None else num(v, 2) + "×"


def cell(s):
    return DASH if s is None or s == "" else str(s).replace("|", "\\|")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def sources(lines):
    """One line per result file and commit: where the table's figures come from."""
    seen = {}
    for r in lines:
        # the source's first clause: "transcribed from docs/PERF.md at 0f6ad2e"
        key = (r["_file"], r["date"], r["device"], r["driver"], r["torch"], r["cuda"], r["commit"],
               (r["source"] or "").split(",")[0].split(" (")[0])
        cmds = seen.setdefault(key, [])
        if r["command"] not in cmds:
            cmds.append(r["command"])
    out = []
    for (f, date, dev, drv, torch, cuda, commit, how), cmds in seen.items():
        env = ", ".join(p for p in (("driver " + drv) if drv else None, ("torch " + torch) if torch else None,
                                    ("CUDA " + cuda) if cuda else None) if p)
        out.append("- `%s`: %s, %s (%s), commit %s%s; %s" % (
            f, date, dev, env, commit or "not committed", ", " + how if how else "",
            "; ".join("`%s`" % c for c in cmds)))
    return ["", "Result files:"] + out


def geomean(vs):
    vs = [v for v in vs if v is not None]
    return math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None


def r_targets(lines):
    rows, notes, ship = [], [], []
    for r in lines:
        sp = r["speedup"] or {}
        mark = ""
        if r.get("shipped"):
            ship.append(r)
            mark = " ¹"
        rows.append([r["model"], "`%s`" % r["target"], num(r["share_pct"], 1) + "%",
                     DASH if r.get("best_iteration") is None else "%d of %d" % (r["best_iteration"], r["iterations"]),
                     x(sp.get("eager")), x(sp.get("eager_hot")), x(sp.get("compile")) + mark,
                     med(r.get("candidate_us")), med(r.get("compile_us")), num(r["floor_pct"], 0),
                     num(r.get("candidates_per_min"), 1), r["under_compile"], r["kernel"], r["commit"]])
    out = table(["model", "target", "share", "best at", "×eager", "hot ×eager", "×compile", "forge µs",
                 "Inductor µs", "floor %", "cand/min", "under compile", "kernel", "commit"], rows)
    for r in ship:
        s = r["shipped"]["speedup"]
        notes.append("¹ The package ships the tip of the improvement chain, %s over eager and %s over torch.compile "
                     "(the table gives the fastest kernel by median)." % (x(s.get("eager")), x(s.get("compile"))))
    g = geomean([(r["speedup"] or {}).get("compile") for r in lines])
    gs = geomean([((r.get("shipped") or {}).get("speedup") or r["speedup"] or {}).get("compile") for r in lines])
    n = sum(1 for r in lines if (r["speedup"] or {}).get("compile") is not None)
    if g is not None:
        line = "Geometric mean of ×compile over these %d targets: %.2f" % (n, g)
        if ship:
            line += " (%.2f with the kernels shipped)" % gs
        notes.append(line + ".")
    return out + ([""] + notes if notes else []) + sources(lines)


def r_e2e(lines):
    rows = []
    for r in lines:
        fc = r.get("forged_calls") or {}
        sp = r.get("speedup") or {}
        ck = r.get("check") or {}
        check = DASH
        if ck.get("stock_ms"):
            check = "%s → %s, %s" % (ms(ck["stock_ms"]), ms(ck["forged_ms"]), x(ck.get("speedup")))
            if ck.get("mismatches") is not None:
                check += ", %d mismatches" % ck["mismatches"]
                if ck.get("checked_calls"):
                    check += " in %d calls" % ck["checked_calls"]
        rows.append([r["model"], r["commit"], ms(r["eager_ms"]), ms(r["forge_ms"]), x(sp.get("eager")),
                     num(fc.get("eager"), 0), num(r.get("amdahl_bound"), 2), ms(r["compile_ms"]),
                     ms(r["compile_forge_ms"]), x(sp.get("compile")), num(fc.get("compile"), 0), check])
    out = table(["model", "commit", "eager ms", "+ forge ms", "×eager", "forged calls", "Amdahl bound",
                 "compile ms", "compile + forge ms", "×compile", "forged calls", "build's check: plain → forged ms"],
                rows)
    notes = ["- %s at %s: %s" % (r["model"], r["commit"], r["notes"]) for r in lines if r.get("notes")]
    return out + ([""] + notes if notes else []) + sources(lines)


def r_ceiling(lines):
    rows = [["`%s`" % r["tensor"], num(r["mb"], 1), num(r["empty_kernel_us"], 1), num(r["memcpy_us"], 1),
             num(r["copy_us"], 1), r["copy_form"], num(r["copy_floor_pct"], 0), num(r["read_us"], 1),
             num(r["read_floor_pct"], 0)] for r in lines]
    rates = sorted({num(r["ceiling_tb_s"], 2) for r in lines})
    out = table(["tensor", "MB", "empty kernel µs", "memcpy µs", "fastest copy µs", "its form", "floor %",
                 "fastest read µs", "floor %"], rows)
    return out + ["", "The floor is bytes over %s TB/s, with no per-call cost." % " / ".join(rates)] + sources(lines)


def r_throughput(lines):
    rows = [[r["model"], "`%s`" % r["target"], r["evaluations"], num(r["search_s"], 1), num(r["per_min"], 1),
             num(r["compile_wait_s"], 1), "%d of %d" % tuple(r["compiled_ahead"]), num(r["nvcc_s"], 2),
             num(r["verify_s"], 2), num(r["bench_s"], 2)] for r in lines]
    return table(["model", "target", "evaluations", "search s", "per minute", "waited on compiles s",
                  "compiled ahead", "nvcc s", "verify s", "bench s"], rows) + sources(lines)


def r_worker(lines):
    rows, cheats = [], []
    for r in lines:
        rej = [c for c in r["cheats"] if c["verdict"] == "rejected"]
        rows.append([r["commit"], r["evaluations"], r["accepted"], num(r["wall_s"], 1), num(r["per_min"], 0),
                     num(r["median_eval_s"], 2), num(r["verify_s"], 2), num(r["bench_s"], 2),
                     x(r["honest"]["speedup_eager"]), "%d of %d" % (len(rej), len(r["cheats"]))])
        if not r["cheats"]:
            continue
        cheats.append("Cheats at %s (candidate: reason): %s." % (
            r["commit"], "; ".join("%s: %s" % (c["candidate"], c["reason"] if c["verdict"] == "rejected"
                                               else "ACCEPTED") for c in r["cheats"])))
    out = table(["commit", "evaluations", "accepted", "wall s", "per GPU-minute", "median s each", "verify s",
                 "bench s", "honest kernel ×stock", "cheats rejected"], rows)
    return out + [""] + cheats + sources(lines)


def r_capture(lines):
    rows = [[r["model"], num(r["plain_ms"], 2), num(r["captured_ms"], 2), "+%s%%" % num(r["overhead_pct"], 0),
             "{:,}".format(r["calls"]), r["signatures"], num(r["device_ms"], 1)] for r in lines]
    return table(["model", "plain ms/iter", "captured ms/iter", "overhead", "calls", "signatures",
                  "captured device ms"], rows) + sources(lines)


def r_package_cases(lines):
    rows = [[r["case"], r["rc"], r["forged"], r["fallback"], r["max_error"]] for r in lines]
    return table(["case", "rc", "forged", "fallback", "max error vs float64"], rows) + sources(lines)


def r_designs(lines, family):
    lines = [r for r in lines if r["kind"] == "design" and r["family"] == family]
    if not lines:
        raise Bad("no design lines for family %r" % family)
    commit = lambda r: r["commit"] or "not committed"
    if any("values" in r for r in lines):
        shapes = []
        for r in lines:
            for k in list(r["values"]) + list(((r.get("baseline") or {}).get("values") or {})):
                if k not in shapes:
                    shapes.append(k)
        rows = []
        for r in lines:
            b = (r.get("baseline") or {}).get("values") or {}
            cells = []
            for k in shapes:
                v, w = r["values"].get(k), b.get(k)
                cells.append(DASH if v is None else num(v, 2 if r["unit"] == "x_eager" else 1)
                             + ("" if w is None else " (%s)" % num(w, 2 if r["unit"] == "x_eager" else 1)))
            rows.append([r["date"], commit(r), r["design"], (r.get("baseline") or {}).get("name"),
                         {"us": "µs", "x_eager": "×eager"}[r["unit"]]] + cells + [r["result"], r["status"]])
        out = table(["date", "commit", "design", "against (in parentheses)", "unit"] + ["`%s`" % s for s in shapes]
                    + ["result", "what became of it"], rows)
    else:
        rows = [[r["date"], commit(r), r["design"], r["measured"], r["against"], r["result"], r["status"]]
                for r in lines]
        out = table(["date", "commit", "design", "measured", "against", "result", "what became of it"], rows)
    return out


RENDER = {"targets": ("target", r_targets), "e2e": ("e2e", r_e2e), "ceiling": ("ceiling", r_ceiling),
          "throughput": ("throughput", r_throughput), "worker": ("worker", r_worker),
          "capture": ("capture", r_capture), "package_cases": ("package_case", r_package_cases)}


def render(name, lines):
    if name.startswith("designs:"):
        return "\n".join(r_designs(lines, name.split(":", 1)[1]))
    if name not in RENDER:
        raise Bad("unknown table %r" % name)
    kind, fn = RENDER[name]
    lines = [r for r in lines if r["kind"] == kind]
    if not lines:
        raise Bad("no %s lines in the files given" % kind)
    return "\n".join(fn(lines))


def render_all(lines):
    out = []
    for name, (kind, _) in RENDER.items():
        if any(r["kind"] == kind for r in lines):
            out.append("### %s\n\n%s" % (name, render(name, lines)))
    for fam in dict.fromkeys(r["family"] for r in lines if r["kind"] == "design"):
        out.append("### designs:%s\n\n%s" % (fam, render("designs:" + fam, lines)))
    return "\n\n".join(out)


BLOCK = re.compile(r"(<!-- render: (\S+)((?: \S+)+) -->\n)(.*?)(<!-- /render -->)", re.S)


def blocks(doc_path, write):
    """Re-renders every block of the document; returns the blocks that differ."""
    text = open(doc_path, encoding="utf-8").read()
    stale = []

    def one(m):
        head, name, files, body, tail = m.groups()
        new = render(name, load(files.split())) + "\n"
        if new != body:
            stale.append((name, files.split(), body, new))
        return head + new + tail

    out = BLOCK.sub(one, text)
    if not BLOCK.search(text):
        raise Bad("%s has no <!-- render: ... --> block" % doc_path)
    if write and out != text:
        open(doc_path, "w", encoding="utf-8").write(out)
    return stale


def main(argv):
    import difflib
    try:
        if argv[:1] in (["--check"], ["--write"]) and len(argv) == 2:
            stale = blocks(argv[1], argv[0] == "--write")
            if argv[0] == "--check":
                for name, files, old, new in stale:
                    sys.stdout.writelines(difflib.unified_diff(
                        old.splitlines(True), new.splitlines(True),
                        "%s (%s)" % (argv[1], name), "rendered from " + " ".join(files)))
                if stale:
                    print("%s: %d rendered block(s) differ from their result files; "
                          "python3 bench/render.py --write %s" % (argv[1], len(stale), argv[1]))
                    return 1
            return 0
        if argv[:1] == ["--table"] and len(argv) >= 3:
            print(render(argv[1], load(argv[2:])))
            return 0
        if argv and not argv[0].startswith("-"):
            print(render_all(load(argv)))
            return 0
    except (Bad, OSError) as e:
        print("render.py: %s" % e, file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
