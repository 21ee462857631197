"""ring_group's schedule (targets/group_norm/cuda_ring_group.cu), played out on
the CPU: `grid` resident CTAs, each walking its chunks (chunk i*grid + b)
through a ring of STAGES stages; step i publishes chunk i, then finishes chunk
i - lag once all of its slice has been published, then reloads that stage.
Loads land and CTAs move in a random order. Reports whether any order
deadlocked, for the kernel's lag rule (lag = ceil((cps - 1) / grid) + LAG)
and, as a check that the model can fail, for one step less.
    python3 bench/gpu/ring_schedule.py            # the VAE shapes' chunkings and small edge cases
No GPU, no torch: this checks the rule, not the kernel's code."""
import random
import sys


def lag_rule(cps, grid, extra):
    return (cps - 1 + grid - 1) // grid + extra


def play(total, cps, grid, stages, lag, rng):
    """True when every chunk was finished; False on a deadlock."""
    mine = [(total - b + grid - 1) // grid for b in range(grid)]
    step = [0] * grid
    published = [False] * total  # the slice counter, chunk by chunk
    arrived = [0] * (total // cps)
    loaded = [set(range(min(stages, mine[b]))) for b in range(grid)]  # issued; lands whenever it is scheduled
    finished = 0
    phase = ["stat"] * grid
    while finished < total:
        ready = []
        for b in range(grid):
            i = step[b]
            if i >= mine[b] + lag:
                continue
            if phase[b] == "stat":
                if i >= mine[b] or i in loaded[b]:  # past its chunks, or the stage's copy was issued
                    ready.append(b)
            elif i >= lag:
                q = i - lag
                if arrived[(q * grid + b) // cps] == cps:
                    ready.append(b)
            else:
                ready.append(b)
        if not ready:
            return False
        b = rng.choice(ready)
        i = step[b]
        if phase[b] == "stat":
            if i < mine[b]:
                cid = i * grid + b
                published[cid] = True
                arrived[cid // cps] += 1
            phase[b] = "fin"
            if i < lag:  # nothing to finish yet at this step
                phase[b], step[b] = "stat", i + 1
        else:
            q = i - lag
            finished += 1
            if q + stages < mine[b]:
                assert q + stages > i, "a stage reloaded before its chunk was summed"
                loaded[b].add(q + stages)
            phase[b], step[b] = "stat", i + 1
    return True


def main():
    rng = random.Random(0)
    cases = []
    # (slices, cps, grid): the VAE's five shapes at 16 KB and 32 KB chunks of bf16 on 132 SMs
    # (1 or 2 CTAs per SM), then small and awkward ones.
    for slice_el in (1 << 20, 1 << 21, 1 << 19, 1 << 20, 1 << 18):
        for che, grid in ((8192, 264), (16384, 132)):
            cases.append((32, (slice_el + che - 1) // che, grid))
    cases += [(1, 1, 1), (3, 7, 2), (2, 5, 4), (5, 13, 3), (4, 9, 9), (6, 2, 5), (2, 40, 7), (64, 1, 132)]
    bad = 0
    for slices, cps, grid in cases:
        total = slices * cps
        grid = min(grid, total)
        for stages, extra in ((6, 1), (6, 0), (12, 2), (4, 1)):
            lag = lag_rule(cps, grid, extra)
            if lag > stages - 1:
                continue  # the kernel refuses the call (returns 1)
            runs = 3 if total > 2000 else 20
            ok = all(play(total, cps, grid, stages, lag, rng) for _ in range(runs))
            short = lag_rule(cps, grid, 0) - 1
            fails = short >= 0 and not all(play(total, cps, grid, stages, short, rng) for _ in range(runs))
            print(f"slices {slices:3} cps {cps:4} grid {grid:4} stages {stages:2} lag {lag}: "
                  f"{'ok' if ok else 'DEADLOCK'}; lag {short}: {'deadlocks' if fails else 'no deadlock seen' if short >= 0 else '-'}")
            bad += not ok
    print(f"{bad} deadlocked under the rule")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
