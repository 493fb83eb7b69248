"""The compiled simulator against its reference: the replay alone (``run_replay``, the workload
already loaded), with the compiled simulator and with the Python one, the same Python scheduler
deciding, in turn, median of ``--repeat``; the ratio, and whether both wrote the same rows.

Usage::

    python benchmarks/bench_compiled_sim.py                 # KTH-SP2 and full HPC2N, FCFS
    python benchmarks/bench_compiled_sim.py --policy spf --traces RICC-2010-2 --repeat 1
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import trace_named

from batsched_ml.runs.replaying import ReplayConfig, ReplayResult, run_replay
from batsched_ml.sim import csim
from batsched_ml.workload.io import load_workload


def timed(workload: dict, policy: str, python: bool) -> tuple[float, ReplayResult]:
    module = csim.module
    if python:
        csim.module = lambda: None  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        result = run_replay(workload, ReplayConfig(policy=policy))
        return time.perf_counter() - started, result
    finally:
        csim.module = module  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--traces", nargs="*", default=["KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln"]
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--policy", default="fcfs")
    args = parser.parse_args()
    if csim.module() is None:
        raise SystemExit("the compiled simulator is not built (pip install -e .)")
    for name in args.traces:
        path = trace_named(name)
        workload = load_workload(path)
        compiled: list[float] = []
        python: list[float] = []
        same = True
        for _ in range(args.repeat):
            seconds, ours = timed(workload, args.policy, python=False)
            compiled.append(seconds)
            seconds, theirs = timed(workload, args.policy, python=True)
            python.append(seconds)
            assert ours.engine == "compiled" and theirs.engine == "python"
            same = same and ours.rows == theirs.rows and ours.messages == theirs.messages
            del ours, theirs
        c, p = statistics.median(compiled), statistics.median(python)
        jobs = len(workload["jobs"])
        print(
            f"{name} ({args.policy}): {jobs:,} jobs; replay, median of {args.repeat}: compiled {c:.3f} s "
            f"({1e6 * c / jobs:.1f} us/job), Python {p:.2f} s ({1e6 * p / jobs:.1f} us/job); "
            f"Python / compiled {p / c:.1f}; rows {'identical' if same else 'DIFFERENT'}"
        )


if __name__ == "__main__":
    main()
