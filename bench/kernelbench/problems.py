"""Which KernelBench problems a run takes: the level's files in number order,
--only, --shard i/n, and the ones a results file already holds (resume).
Pure Python (no torch): tests/bench/test_kernelbench.py checks it."""
import json
import os
import re

NAME = re.compile(r"^(\d+)_(.+)\.py$")


def level_files(checkout, level=1):
    """[(number, stem, path)] of KernelBench/level<N>/*.py under the checkout, by number."""
    d = os.path.join(checkout, "KernelBench", "level%d" % level)
    if not os.path.isdir(d):
        raise SystemExit("no %s: give the KernelBench checkout's root" % d)
    out = []
    for f in os.listdir(d):
        m = NAME.match(f)
        if m:
            out.append((int(m.group(1)), f[:-3], os.path.join(d, f)))
    return sorted(out)


def pick(problems, only):
    """--only "19,23,softmax": numbers exactly, other words as case-insensitive
    parts of the name; empty keeps all."""
    words = [w.strip().lower() for w in (only or "").split(",") if w.strip()]
    if not words:
        return list(problems)
    return [p for p in problems
            if any(w.isdigit() and int(w) == p[0] or not w.isdigit() and w in p[1].lower() for w in words)]


def parse_shard(text):
    """'i/n' with 1 <= i <= n -> (i, n)."""
    m = re.fullmatch(r"(\d+)/(\d+)", text or "1/1")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError("--shard wants i/n with 1 <= i <= n, got %r" % text)
    return int(m.group(1)), int(m.group(2))


def shard(problems, i, n):
    """The i-th of n shards, round-robin over the sorted list: neighbours
    (convolutions 50-87 cluster by number) land on different shards."""
    return [p for k, p in enumerate(problems) if k % n == i - 1]


def done(results_path):
    """Problems (stems) a results file already has a line for: a rerun skips them."""
    out = set()
    if not results_path or not os.path.exists(results_path):
        return out
    with open(results_path) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed run: that problem runs again
            if rec.get("kind") == "kernelbench" and rec.get("problem"):
                out.add(rec["problem"])
    return out
