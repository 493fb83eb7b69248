"""How long the report's system view takes on a 200,000-job table (about the full HPC2N trace):
the busy machines and queue length as step functions, their daily means, the waits'
distribution. Prints the median of 5 runs::

    python benchmarks/bench_report.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batsched_ml.report import data
from tests.test_report import _large_table


def main() -> None:
    attempts = _large_table(200_000)
    finish = attempts["finish_time"].to_numpy()
    times = []
    for _ in range(5):
        began = time.perf_counter()
        busy = data.busy_machines(attempts)
        queued = data.queue_length(attempts)
        edges = np.append(np.arange(0.0, finish.max(), 86_400.0), finish.max())
        data.step_means(busy["time"], busy["busy"], edges)
        data.step_means(queued["time"], queued["queued"], edges)
        data.wait_cdf(attempts["starting_time"] - attempts["submission_time"])
        times.append(time.perf_counter() - began)
    print(f"system view of 200,000 jobs: {statistics.median(times):.3f} s (median of 5)")


if __name__ == "__main__":
    main()
