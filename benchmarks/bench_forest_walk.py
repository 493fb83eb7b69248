"""How long one job's classification takes: the forest walk, compiled and in Python.

The scheduler asks the weekly forest for one job's class probabilities at each submission
(:meth:`FastForest.proba`). This script takes a real job stream (KTH-SP2's FCFS-EASY replay and
the online features, as ``training_setup.py`` builds it), trains the default forest
(:class:`ForestParams`) on the first ``--train`` jobs in finishing order, and times the walk over
the next ``--rows`` jobs' features: the compiled walk (``_cforest.c``) and the Python reference,
median of ``--repeat`` passes each, in microseconds per job. It also checks that both give the
same probabilities, bit for bit.

    python bench_forest_walk.py [TRACE] [--train N] [--rows N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _common import KTH, need
from training_setup import job_stream

from batsched_ml.predict.forest import ForestParams, train_forest
from batsched_ml.workload.io import load_workload


def per_job_us(proba, rows: list[list[float]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for row in rows:
            proba(row)
        times.append((time.perf_counter() - started) / len(rows) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trace", nargs="?", default=str(KTH))
    parser.add_argument("--train", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    workload = load_workload(need(Path(args.trace)))
    features, runtimes, _, ends = job_stream(workload)
    order = np.argsort(ends, kind="stable")
    train, test = order[: args.train], order[args.train : args.train + args.rows]
    divider = float(np.median(runtimes[train]))
    trained = train_forest(features[train], runtimes[train] < divider, ForestParams())
    fast = trained.predictor
    assert fast is not None
    from batsched_ml.predict.forest import FastForest

    reference = FastForest(fast.arrays, compiled=False)
    rows = [list(map(float, row)) for row in features[test]]
    nodes = len(fast.arrays["left"])
    print(
        f"{workload['trace']}: forest of {ForestParams().n_estimators} trees, {nodes:,} nodes, "
        f"trained on {len(train):,} jobs; walks of {len(rows):,} jobs, median of {args.repeat}"
    )
    if fast.compiled is None:
        print("compiled walk: not built (or BATSCHED_ML_KERNEL=python)")
    else:
        same = all(fast.proba(row) == reference.proba(row) for row in rows)
        compiled_us = per_job_us(fast.proba, rows, args.repeat)
        print(f"compiled walk: {compiled_us:6.2f} us per job (same probabilities: {same})")
    python_us = per_job_us(reference.proba, rows, args.repeat)
    print(f"Python walk:   {python_us:6.2f} us per job")


if __name__ == "__main__":
    main()
