"""The weekly Random Forest: training set-up, and fast prediction for one job at a time.

A scheduler classifies each job when it is submitted, one job per call. scikit-learn's
``predict_proba`` costs about 2 ms per call for 50 trees (input validation and parallel dispatch
per call), which is 400 s over the 200,000 jobs of HPC2N. :class:`FastForest` asks each fitted tree
directly (``tree_.predict`` on one float32 row) and averages their class probabilities exactly as
``RandomForestClassifier.predict_proba`` does: about 0.1 ms per job. A test checks both agree.

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
    """

    n_estimators: int = 40
    max_depth: int | None = 20
    min_samples_leaf: int = 2
    max_features: str | float = "sqrt"
    window: int | None = 20_000
    min_train: int = 100
    n_jobs: int = 2
    random_state: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FastForest:
    """Prediction of a fitted binary ``RandomForestClassifier``, one row at a time."""

    def __init__(self, forest: RandomForestClassifier) -> None:
        classes = list(forest.classes_)
        self.classes = classes
        self.trees = [estimator.tree_ for estimator in forest.estimators_]
        self.n_features = forest.n_features_in_
        self.forest = forest

    def proba(self, row: list[float] | np.ndarray) -> np.ndarray:
        """Class probabilities of one sample, in the order of ``classes``."""
        x = np.asarray(row, dtype=np.float32).reshape(1, -1)
        total = np.zeros(len(self.classes))
        for tree in self.trees:
            value = tree.predict(x)[0]
            total += value / value.sum()
        return total / len(self.trees)

    def predict_one(self, row: list[float] | np.ndarray) -> Any:
        """The predicted class (ties go to the first class, as ``predict`` does)."""
        return self.classes[int(np.argmax(self.proba(row)))]


@dataclass
class TrainedForest:
    predictor: FastForest | None
    importances: np.ndarray | None
    train_seconds: float
    n_train: int


def train_forest(x: np.ndarray, y: np.ndarray, params: ForestParams) -> TrainedForest:
    """Fit on ``x`` (float32 rows) and boolean labels ``y`` (True = small). Too few samples, or
    a single class, give no predictor (every job then counts as large)."""
    if len(y) < params.min_train or y.all() or not y.any():
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
