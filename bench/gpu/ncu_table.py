"""Per kernel medians from an Nsight Compute --csv log (the metrics that
bench/gpu/ncu_*.sh ask for): duration, DRAM throughput (% of peak), bytes
read and written, L2 hit rate, active warps (% of peak).
    python3 bench/gpu/ncu_table.py ncu.csv"""
import collections
import csv
import sys

METRICS = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum",
           "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct", "sm__warps_active.avg.pct_of_peak_sustained_active"]


def main(path):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        sys.exit(print("  no kernel rows"))
    head, body = rows[0], rows[1:]
    k, name, val = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in body:
        try:
            by[r[k][:60]][r[name]].append(float(r[val].replace(",", "")))
        except ValueError:
            pass
    print(f"  {'kernel':60} {'n':>3} {'ns':>10} {'dram %':>7} {'read':>10} {'write':>10} {'L2 hit':>7} {'warps %':>8}")
    for kern, d in by.items():
        med = [sorted(d[c])[len(d[c]) // 2] if d[c] else float("nan") for c in METRICS]
        print(f"  {kern:60} {len(d[METRICS[0]]):3d} {med[0]:10.0f} {med[1]:7.1f} {med[2]:10.3g} {med[3]:10.3g} "
              f"{med[4]:7.1f} {med[5]:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
