"""The weekly forest's training: scikit-learn's ``RandomForestClassifier.fit`` against the same
forest with its trees grown on their bootstrap rows only (:mod:`batsched_ml.predict.bootstrap_rows`,
what ``train_forest`` uses).

The job stream is fixed as in ``training_setup.py`` (one FCFS-EASY replay gives every job's
finish time); for every k-th week both fits train on the jobs finished before the week starts
(the default set-up: window of 50,000, 40 trees, ``max_samples=0.25``, 2 threads), in turn,
``--repeat`` times each. Printed: the training sets' sizes, each fit's median time per week, the
ratio, and whether every compiled forest is the same array for array (it must be).

    python bench_forest_fit.py [TRACE] [--every K] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _common import KTH, need
from sklearn.ensemble import RandomForestClassifier
from training_setup import job_stream

from batsched_ml.predict.bootstrap_rows import forest_classifier, scikit_learn_forest
from batsched_ml.predict.forest import ForestParams, compile_forest
from batsched_ml.predict.training import WEEK
from batsched_ml.workload.io import load_workload


def timed_fit(forest: RandomForestClassifier, x: np.ndarray, y: np.ndarray) -> float:
    started = time.perf_counter()
    forest.fit(x, y)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trace", nargs="?", default=str(KTH))
    parser.add_argument("--every", type=int, default=4, help="train every K-th week")
    parser.add_argument("--repeat", type=int, default=3, help="fits of each kind per week")
    args = parser.parse_args()
    params = ForestParams()
    features, runtimes, submit, ends = job_stream(load_workload(need(Path(args.trace))))
    theirs: list[float] = []
    ours: list[float] = []
    sizes: list[int] = []
    identical = True
    for week in range(1, int(submit.max() // WEEK) + 1, args.every):
        done = np.flatnonzero(ends < week * WEEK)
        if len(done) < params.min_train:
            continue
        done = done[np.argsort(ends[done], kind="stable")]
        y = runtimes[done] < float(np.median(runtimes[done]))
        done = done[-params.window :] if params.window is not None else done
        x, y = features[done], y[-len(done) :]
        if y.all() or not y.any():
            continue
        sizes.append(len(done))
        a, b = [], []
        for _ in range(args.repeat):  # in turn, so that a drift of the machine hits both
            reference = scikit_learn_forest(params)
            a.append(timed_fit(reference, x, y))
            faster = forest_classifier(params)
            b.append(timed_fit(faster, x, y))
        theirs.append(statistics.median(a))
        ours.append(statistics.median(b))
        ca, cb = compile_forest(reference), compile_forest(faster)
        identical &= all(np.array_equal(ca[k], cb[k]) for k in ca)
    print(
        f"{args.trace}: {len(sizes)} weeks, training sets of {min(sizes):,} to {max(sizes):,} jobs"
    )
    print(
        f"scikit-learn fit     {sum(theirs):7.2f} s in all, {statistics.median(theirs):.3f} s/week"
    )
    print(f"bootstrap rows only  {sum(ours):7.2f} s in all, {statistics.median(ours):.3f} s/week")
    print(f"ratio (rows only / scikit-learn, all weeks): {sum(ours) / sum(theirs):.2f}")
    print(f"every compiled forest identical: {identical}")


if __name__ == "__main__":
    main()
