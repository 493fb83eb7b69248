"""The weekly forest's training: scikit-learn's ``RandomForestClassifier.fit``, the same forest
with its trees grown on their bootstrap rows only (:mod:`batsched_ml.predict.bootstrap_rows`,
``train_forest``'s fallback) and grown by the compiled grower (:mod:`batsched_ml.predict.grow`,
what ``train_forest`` uses when it is built).

The job stream is fixed as in ``training_setup.py`` (one FCFS-EASY replay gives every job's
finish time); for every k-th week the three fits train on the jobs finished before the week
starts (the default set-up: window of 50,000, 40 trees, ``max_samples=0.25``, 2 threads), in
turn, ``--repeat`` times each. Printed: the training sets' sizes, each fit's median time per
week, the ratios, and whether every compiled forest and its importances are the same, array for
array, and every tree the compiled grower grew equals scikit-learn's in every array (they must).

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
from batsched_ml.predict.forest import ForestParams, compile_forest, compile_trees
from batsched_ml.predict.grow import GrownForest, grow_forest
from batsched_ml.predict.training import WEEK
from batsched_ml.workload.io import load_workload


def timed_fit(forest: RandomForestClassifier, x: np.ndarray, y: np.ndarray) -> float:
    started = time.perf_counter()
    forest.fit(x, y)
    return time.perf_counter() - started


def timed_grow(x: np.ndarray, y: np.ndarray, params: ForestParams) -> tuple[float, GrownForest]:
    started = time.perf_counter()
    grown = grow_forest(x, y, params)
    elapsed = time.perf_counter() - started
    if grown is None:
        raise SystemExit("the compiled grower is not built (pip install -e .)")
    return elapsed, grown


def same_trees(grown: GrownForest, forest: RandomForestClassifier) -> bool:
    for mine, estimator in zip(grown.trees, forest.estimators_, strict=True):
        t = estimator.tree_
        pairs = [
            (mine.left, t.children_left),
            (mine.right, t.children_right),
            (mine.feature, t.feature),
            (mine.threshold, t.threshold),
            (mine.impurity, t.impurity),
            (mine.n_node_samples, t.n_node_samples),
            (mine.weighted_n_node_samples, t.weighted_n_node_samples),
            (mine.value, t.value[:, 0, :]),
        ]
        if not all(np.array_equal(a, b) for a, b in pairs):
            return False
    return True


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
    grown_times: list[float] = []
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
        a, b, c = [], [], []
        for _ in range(args.repeat):  # in turn, so that a drift of the machine hits all
            reference = scikit_learn_forest(params)
            a.append(timed_fit(reference, x, y))
            faster = forest_classifier(params)
            b.append(timed_fit(faster, x, y))
            elapsed, grown = timed_grow(x, y, params)
            c.append(elapsed)
        theirs.append(statistics.median(a))
        ours.append(statistics.median(b))
        grown_times.append(statistics.median(c))
        trees = [(t.left, t.right, t.feature, t.threshold, t.value) for t in grown.trees]
        cc = compile_trees(grown.classes, grown.n_features, trees)
        ca, cb = compile_forest(reference), compile_forest(faster)
        identical &= all(np.array_equal(ca[k], cb[k]) and np.array_equal(ca[k], cc[k]) for k in ca)
        identical &= same_trees(grown, reference)
        identical &= np.array_equal(grown.feature_importances(), reference.feature_importances_)
    print(
        f"{args.trace}: {len(sizes)} weeks, training sets of {min(sizes):,} to {max(sizes):,} jobs"
    )
    print(
        f"scikit-learn fit     {sum(theirs):7.2f} s in all, {statistics.median(theirs):.3f} s/week"
    )
    print(f"bootstrap rows only  {sum(ours):7.2f} s in all, {statistics.median(ours):.3f} s/week")
    grown_median = statistics.median(grown_times)
    print(f"compiled grower      {sum(grown_times):7.2f} s in all, {grown_median:.3f} s/week")
    print(f"ratio (rows only / scikit-learn, all weeks): {sum(ours) / sum(theirs):.2f}")
    print(
        f"ratio (compiled grower / scikit-learn, all weeks): {sum(grown_times) / sum(theirs):.2f}"
    )
    print(f"every tree, importance and compiled forest identical: {identical}")


if __name__ == "__main__":
    main()
