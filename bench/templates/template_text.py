"""A template as forge loads it: each `#include "../_common/NAME"` line replaced
by that file, recursively (the mirror of rules/search/strategies.cpp, inline_common:
NAME is resolved from the including file's folder, so the script works from
anywhere). Prints the complete source, e.g. to compile one instance by hand:
    python3 bench/templates/template_text.py targets/group_norm/cuda_split_group.cu > gn.cu"""
import os
import sys

DIRECTIVE = '#include "../_common/'


def source_text(src, depth=0):
    out = []
    for line in open(src).read().splitlines(keepends=True):
        if line.startswith(DIRECTIVE):
            if depth >= 4:
                raise SystemExit(f"{src}: shared blocks nested more than 4 deep (a cycle?)")
            name = line[len(DIRECTIVE):].split('"')[0]
            line = source_text(os.path.join(os.path.dirname(os.path.abspath(src)), "..", "_common", name), depth + 1)
        out.append(line)
    return "".join(out)


if __name__ == "__main__":
    sys.stdout.write(source_text(sys.argv[1]))
