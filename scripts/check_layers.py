#!/usr/bin/env python3
"""Fails when a forge include breaks the layering (docs/ARCHITECTURE.md, Folders).

Layers, lowest first; a file may include its own module and any lower layer:
    util < store < engine < runtime (its torch-free headers) < rules/*.h (shared,
    e.g. rules/improvement.h) < rules/<stage>/ < rules/rules.{h,cpp} (the stage
    registry) < serve < cli
Stages (the folders under rules/) may include one another, but the graph of
stage includes must have no cycle. Only `#include "..."` lines of the C++ under
util, store, engine, rules, serve and cli are read; tests/ may include anything.

Usage: scripts/check_layers.py [SOURCE_DIR] [--graph]   (exit 1 on a violation)
"""
import os
import re
import sys

SCANNED = ("util", "store", "engine", "rules", "serve", "cli")
RANK = {"util": 0, "store": 1, "engine": 2, "runtime": 3, "rules (shared)": 4,
        "rules stage": 5, "rules (registry)": 6, "serve": 7, "cli": 8}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    """The module of a repository path: rules/search/search.h -> rules/search,
    rules/rules.h -> rules, rules/improvement.h -> rules/*.h, engine/build.h -> engine."""
    parts = path.split("/")
    top = parts[0]
    if top == "rules":
        if len(parts) > 2:
            return "rules/" + parts[1]
        return "rules" if parts[1] in ("rules.h", "rules.cpp") else "rules/*.h"
    return top


def layer_of(module, path):
    if module.startswith("rules"):
        parts = path.split("/")
        if len(parts) > 2:
            return "rules stage"
        return "rules (registry)" if module == "rules" else "rules (shared)"
    return module


def find_cycle(graph):
    """One cycle of `graph` (node -> set of nodes) as a list of nodes, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    errors = []
    stage_edges = {}  # stage -> {stage: first "file:line" that includes it}
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith((".h", ".cpp")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                src_mod = module_of(rel)
                src_layer = layer_of(src_mod, rel)
                with open(full, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if inc.split("/")[0] not in SCANNED + ("runtime",):
                            continue  # a system or third-party header
                        dst_mod = module_of(inc)
                        dst_layer = layer_of(dst_mod, inc)
                        where = f"{rel}:{lineno}"
                        if dst_mod == src_mod:
                            continue
                        if src_layer == dst_layer == "rules stage":
                            stage_edges.setdefault(src_mod, {}).setdefault(dst_mod, where)
                            continue
                        if RANK[dst_layer] >= RANK[src_layer]:
                            errors.append(f"{where}: {src_mod} ({src_layer}) includes \"{inc}\" "
                                          f"({dst_layer}): an include may only point down a layer")
    graph = {s: set(d) for s, d in stage_edges.items()}
    cycle = find_cycle(graph)
    if cycle:
        steps = [f"{a} -> {b} ({stage_edges[a][b]})" for a, b in zip(cycle, cycle[1:])]
        errors.append("a cycle between stages: " + "; ".join(steps))
    if "--graph" in argv:
        for s in sorted(graph):
            print(f"{s} -> {', '.join(sorted(graph[s]))}")
    for e in errors:
        print("check_layers: " + e, file=sys.stderr)
    if not errors:
        print(f"check_layers: ok ({len(graph)} stages with includes, no cycle, every include points down)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
