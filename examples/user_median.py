"""A custom runtime predictor: the median of the user's last runtimes, capped by the request.

A predictor is a plain class, scikit-learn style (constructor parameters with defaults, which
become its ``--predictor-option`` keys): ``estimate(job, profile)`` answers at submission how
long the job will run; ``observe(job, runtime)`` is told every finished job. Nothing registers
it: the scheduler imports it by its path, ``user_median:UserMedian``, with this folder on the
Python path.

Run it in the embedded simulator (the shipped KTH-SP2 trace, SPF with requested times against
SPF with this predictor)::

    python examples/user_median.py --jobs 5000

Serve it, unchanged, to Batsim (real or the stand-in ``batsched-ml batsim``)::

    PYTHONPATH=examples batsched-ml serve --socket tcp://127.0.0.1:28000 \\
        --policy spf --predictor user_median:UserMedian --predictor-option history=3 -o served
"""

from __future__ import annotations

import argparse
from collections import deque
from importlib.resources import files
from statistics import median
from typing import Any

DAY = 86_400.0


class UserMedian:
    """The median of the user's ``history`` last runtimes, at most the requested time; the
    requested time for a user with no finished job yet."""

    name = "user-median"

    def __init__(self, history: int = 5) -> None:
        if history < 1:
            raise ValueError(f"history must be at least 1, not {history}")
        self.history = history
        self._runtimes: dict[Any, deque[float]] = {}

    def estimate(self, job: Any, profile: dict[str, Any] | None) -> float:
        requested = job.walltime if job.walltime is not None else DAY
        past = self._runtimes.get(job.field("user"))
        if not past:
            return requested
        return max(1.0, min(requested, median(past)))

    def observe(self, job: Any, runtime: float) -> None:
        user = job.field("user")
        if user not in self._runtimes:
            self._runtimes[user] = deque(maxlen=self.history)
        self._runtimes[user].append(runtime)


def main(argv: list[str] | None = None) -> dict[str, float]:
    import batsched_ml
    from batsched_ml.workload.io import load_workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=None, help="replay the first JOBS jobs only")
    parser.add_argument("--history", type=int, default=5)
    args = parser.parse_args(argv)
    workload = load_workload(files("batsched_ml") / "data" / "KTH-SP2-1996-2.1-cln.swf.gz")
    if args.jobs is not None:
        workload["jobs"] = workload["jobs"][: args.jobs]
    base = batsched_ml.replay(workload, policy="spf")
    mine = batsched_ml.replay(
        workload,
        policy="spf",
        predictor="user_median:UserMedian",
        predictor_params={"history": args.history},
    )
    figures = {"requested": base.summary["mean_bsld"], "user-median": mine.summary["mean_bsld"]}
    for name, value in figures.items():
        print(f"SPF, {name:>10} runtimes: mean bounded slowdown {value:.2f}")
    return figures


if __name__ == "__main__":
    main()
