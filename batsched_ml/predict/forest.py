"""The weekly Random Forest: training set-up, and fast prediction for one job at a time.

A scheduler classifies each job when it is submitted, one job per call. scikit-learn's
``predict_proba`` costs about 2 ms per call for 50 trees (input validation and parallel dispatch
per call), which is 400 s over the 200,000 jobs of HPC2N. :class:`FastForest` walks the fitted
trees itself and averages their class probabilities exactly as
``RandomForestClassifier.predict_proba`` does, in tens of microseconds. A test checks both agree.

Hyper-parameters (:class:`ForestParams`), chosen with ``benchmarks/training_setup.py`` on HPC2N:
see the README's classification section for the figures.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier


@dataclass(frozen=True)
class ForestParams:
    """Random Forest set-up and training window (plain values, as in scikit-learn).

    ``window``: train on the most recent ``window`` finished jobs (``None``: all history).
    ``n_estimators=0`` trains nothing (only the divider is computed: class-clairvoyant).
    """

    n_estimators: int = 40
    max_depth: int | None = 20
    min_samples_leaf: int = 20
    max_features: str | float = "sqrt"
    window: int | None = 50_000
    min_train: int = 100
    n_jobs: int = 2
    random_state: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FastForest:
    """Prediction of a fitted binary ``RandomForestClassifier``, one row at a time.

    Each tree is flattened into Python lists (children, feature, threshold, and each leaf's two
    class probabilities) and walked in plain Python: for one row that beats any numpy call. The
    arithmetic is scikit-learn's: the row is rounded to float32 as ``predict`` does, each tree's
    leaf counts are normalised, the per-class sums are taken in tree order and the larger class
    wins, ties to the first.
    """

    def __init__(self, forest: RandomForestClassifier) -> None:
        if len(forest.classes_) != 2:
            raise ValueError("FastForest handles binary classifiers only")
        self.classes = list(forest.classes_)
        self.n_features = forest.n_features_in_
        self.forest = forest
        self.trees = []
        for estimator in forest.estimators_:
            tree = estimator.tree_
            value = tree.value[:, 0, :]
            proba = value / value.sum(axis=1, keepdims=True)
            self.trees.append(
                (
                    tree.children_left.tolist(),
                    tree.children_right.tolist(),
                    tree.feature.tolist(),
                    tree.threshold.tolist(),
                    proba[:, 0].tolist(),
                    proba[:, 1].tolist(),
                )
            )

    def proba(self, row: list[float] | np.ndarray) -> tuple[float, float]:
        """Class probabilities of one sample, in the order of ``classes``."""
        x = np.asarray(row, dtype=np.float32).tolist()
        first = second = 0.0
        for left, right, feature, threshold, p0, p1 in self.trees:
            node = 0
            child = left[0]
            while child != -1:
                node = child if x[feature[node]] <= threshold[node] else right[node]
                child = left[node]
            first += p0[node]
            second += p1[node]
        count = len(self.trees)
        return first / count, second / count

    def predict_one(self, row: list[float] | np.ndarray) -> Any:
        """The predicted class (ties go to the first class, as ``predict`` does)."""
        first, second = self.proba(row)
        return self.classes[1] if second > first else self.classes[0]


@dataclass
class TrainedForest:
    predictor: FastForest | None
    importances: np.ndarray | None
    train_seconds: float
    n_train: int


def train_forest(x: np.ndarray, y: np.ndarray, params: ForestParams) -> TrainedForest:
    """Fit on ``x`` (float32 rows) and boolean labels ``y`` (True = small). Too few samples, or
    a single class, give no predictor (every job then counts as large)."""
    if params.n_estimators == 0 or len(y) < params.min_train or y.all() or not y.any():
        return TrainedForest(None, None, 0.0, len(y))
    started = time.perf_counter()
    forest = RandomForestClassifier(
        n_estimators=params.n_estimators,
        max_depth=params.max_depth,
        min_samples_leaf=params.min_samples_leaf,
        max_features=params.max_features,
        n_jobs=params.n_jobs,
        random_state=params.random_state,
    )
    forest.fit(x, y)
    forest.n_jobs = 1
    return TrainedForest(
        FastForest(forest),
        forest.feature_importances_.copy(),
        time.perf_counter() - started,
        len(y),
    )
