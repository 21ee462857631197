"""Table and JSON of a capture run on the GPU (bench/capture_h200.sh): the top
targets per model with their time share, and the capture overhead."""
import json
import re
import sys


def main(capture_path, timings_path, out_path):
    try:
        report = json.load(open(capture_path))
    except Exception as e:  # keep the timings even if forge failed
        report = {"ok": False, "error": str(e), "models": {}, "targets": []}
    times = {}
    for line in open(timings_path):
        m = re.match(r"(plain|captured) (\S+) .*: ([0-9.]+) ms/iter", line)
        if m:
            times.setdefault(m.group(2), {})[m.group(1)] = float(m.group(3))
    result = {"report": report, "ms_per_iter": times}
    json.dump(result, open(out_path, "w"), indent=1)

    print(f"{'model':14} {'plain ms':>9} {'captured':>9} {'overhead':>9}")
    for name, t in times.items():
        p, c = t.get("plain"), t.get("captured")
        ov = f"{(c / p - 1) * 100:+.1f}%" if p and c else "-"
        print(f"{name:14} {p or float('nan'):9.2f} {c or float('nan'):9.2f} {ov:>9}")
    print()
    for name, m in report.get("models", {}).items():
        print(f"model {name}: {m.get('status')} timing={m.get('timing')} "
              f"calls={m.get('calls')} op_time_us={m.get('time_us')} {m.get('reason', '')}")
    print(f"\n{'target':44} {'share':>6} {'calls':>6} {'time_us':>10} {'floor_us':>9}  signature")
    for t in report.get("targets", []):
        floor = t.get("floor_us")
        print(f"{t['id']:44} {100 * t['share']:5.1f}% {t['calls']:6d} {t['time_us']:10.0f} "
              f"{floor if floor is not None else '-':>9}  {t['signature'][:90]}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
