"""Time the machine-allocation structure alone: the bitmask reference against MachineSet.

The sequence is CEA-Curie's own workload (93,312 processors): its jobs arrive at their submit
times and run for their recorded runtimes on their allocated processors, started first come,
first served as soon as enough processors are free, so that releases come out of order and the
machine fragments as it does in a replay. Both structures take the lowest-numbered free
machines and check the free count first, as a scheduling pass does; the script checks that they
hand out the same machines before timing them, then prints the median of several repeats of
the whole sequence and the ratio.

    python benchmarks/bench_alloc.py [--jobs N] [--repeats R]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import time
from collections import deque

from _common import trace_named

from batsched_ml.alloc import MachineSet, lowest, mask_of
from batsched_ml.workload.swf import read_swf

WIDTH = 93_312
#: one step: (job index, machines) to allocate, or (job index, 0) to release
Step = tuple[int, int]


def curie_sequence(jobs: int) -> list[Step]:
    """The allocate/release steps of the first ``jobs`` jobs of CEA-Curie's log (jobs with
    no processor count are left out)."""
    trace = read_swf(trace_named("CEA-Curie-2011-2.1-cln"))
    frame = {name: values[:jobs] for name, values in trace.jobs.items()}
    arrivals: list[tuple[float, int, int, float]] = []  # (submit, job, procs, runtime)
    for index, (submit, run, allocated, requested) in enumerate(
        zip(
            frame["submit_time"],
            frame["run_time"],
            frame["allocated_processors"],
            frame["requested_processors"],
            strict=True,
        )
    ):
        procs = int(allocated if allocated > 0 else requested)
        if 0 < procs <= WIDTH:
            arrivals.append((submit, index, procs, max(run, 0.0)))
    arrivals.sort()
    steps: list[Step] = []
    running: list[tuple[float, int, int]] = []  # heap of (end, job, procs)
    queue: deque[tuple[int, int, float]] = deque()
    free = WIDTH

    def start_queued(now: float) -> None:
        nonlocal free
        while queue and queue[0][1] <= free:
            index, procs, run = queue.popleft()
            steps.append((index, procs))
            free -= procs
            heapq.heappush(running, (now + run, index, procs))

    def release_until(now: float) -> None:
        nonlocal free
        while running and running[0][0] <= now:
            end, index, procs = heapq.heappop(running)
            steps.append((index, 0))
            free += procs
            start_queued(end)

    for submit, index, procs, run in arrivals:
        release_until(submit)
        queue.append((index, procs, run))
        start_queued(submit)
    release_until(float("inf"))
    return steps


def run_bitmask(steps: list[Step]) -> dict[int, int]:
    free = (1 << WIDTH) - 1
    held: dict[int, int] = {}
    taken_all: dict[int, int] = {}
    for index, count in steps:
        if count:
            assert free.bit_count() >= count
            taken = lowest(free, count)
            free ^= taken
            held[index] = taken_all[index] = taken
        else:
            free |= held.pop(index)
    return taken_all


def run_runs(steps: list[Step]) -> dict[int, tuple[tuple[int, int], ...]]:
    free = MachineSet.full(WIDTH)
    held: dict[int, tuple[tuple[int, int], ...]] = {}
    taken_all: dict[int, tuple[tuple[int, int], ...]] = {}
    for index, count in steps:
        if count:
            assert free.count >= count
            held[index] = taken_all[index] = free.take_lowest(count)
        else:
            free.add(held.pop(index))
    return taken_all


def median_seconds(function, steps: list[Step], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function(steps)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40_000, help="first jobs of the log")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    steps = curie_sequence(args.jobs)
    allocations = sum(1 for _, count in steps if count)
    by_mask, by_runs = run_bitmask(steps), run_runs(steps)
    assert by_mask.keys() == by_runs.keys()
    assert all(by_mask[index] == mask_of(runs) for index, runs in by_runs.items())
    runs = sum(len(r) for r in by_runs.values())
    print(
        f"CEA-Curie, {WIDTH:,} machines: {allocations:,} allocations and their releases "
        f"({runs / allocations:.2f} runs per allocation), the same machines from both"
    )
    bitmask = median_seconds(run_bitmask, steps, args.repeats)
    machine_set = median_seconds(run_runs, steps, args.repeats)
    per = 1e6 / allocations
    print(f"bitmask reference  {bitmask:8.3f} s  {bitmask * per:7.2f} us per allocation+release")
    print(
        f"MachineSet         {machine_set:8.3f} s  {machine_set * per:7.2f} us per "
        f"allocation+release"
    )
    print(f"ratio              {bitmask / machine_set:8.1f}x (median of {args.repeats})")


if __name__ == "__main__":
    main()
