"""The CPH dispatcher's cost: a full KTH-SP2 replay, and the time of one CP decision.

Prints, per deterministic budget: the replay's wall time, the decisions that called CP-SAT, their
mean and 99th-percentile wall time, how many started other jobs than PRB's list schedule would,
and the mean bounded slowdown. Target (issue 8): a full KTH-SP2 replay within a few minutes on
this 2-core machine at the default budget.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _common import KTH, need

import batsched_ml.runs.replaying as replay
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler.cph import ConstraintPlanner
from batsched_ml.workload.io import load_workload


class TimedPlanner(ConstraintPlanner):
    """Records the wall time of each solver call (the benchmark's clock, not the core's)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seconds: list[float] = []

    def solve(self, window, free_count, ends, now):
        started = time.perf_counter()
        out = super().solve(window, free_count, ends, now)
        self.seconds.append(time.perf_counter() - started)
        return out


def measure(workload, budget: float, window: int) -> None:
    planners: list[TimedPlanner] = []

    def make() -> TimedPlanner:
        planners.append(TimedPlanner(budget=budget, window=window))
        return planners[-1]

    replay.PLANNERS["cph"] = make  # the replay builds its planner through this table
    started = time.perf_counter()
    result = run_replay(workload, ReplayConfig(dispatcher="cph"))
    elapsed = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as out:
        summary = write_replay(result, out)
    planner = planners[-1]
    calls = sorted(planner.seconds)
    p99 = calls[int(0.99 * (len(calls) - 1))] if calls else 0.0
    mean = sum(calls) / len(calls) if calls else 0.0
    print(
        f"budget {budget:g}, window {window}: replay {elapsed:.1f} s; {planner.calls:,} CP "
        f"decisions, {1000 * mean:.1f} ms mean, {1000 * p99:.1f} ms p99; {planner.improved:,} "
        f"differ from PRB's list schedule, {planner.fallbacks:,} fell back to it; mean bsld "
        f"{summary['mean_bsld']:.2f}, mean wait {summary['mean_wait']:,.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.001])
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    workload = load_workload(need(KTH))
    for budget in args.budgets:
        measure(workload, budget, args.window)


if __name__ == "__main__":
    main()
