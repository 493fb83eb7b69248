"""Weekly training: the one interface between the scheduler and whoever trains its models.

The scheduler hands every finished job to a :class:`Trainer` (:meth:`Trainer.add_finished`: the
features computed at its submission and its observed runtime) and, at each week boundary, asks
for the model of the coming week (:meth:`Trainer.model_for`). :class:`InProcessTrainer` trains in
the scheduler's process; the side trainer process implements the same interface out of process.

The divider of week w is the median runtime of *all* jobs finished before week w starts. The
whole history, rather than the last week only, because the divider labels the training set: a
median over one week jumps with that week's mix of jobs (a burst of short tests halves it) and
relabels the whole history at each training, while the cumulative median converges to the trace's
median, the paper's definition of small (section 3.3, Table 2). A job is small if its runtime is
strictly below the divider. ``ForestParams.divider_quantile`` (the classifier option of that
name) takes another quantile of the same runtimes instead of the median.

Weeks are 7-day periods from the first submission (time 0 of the workload).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import FastForest, ForestParams, train_forest

WEEK = 7 * 86_400.0


def week_of(t: float) -> int:
    return int(t // WEEK)


@dataclass
class WeeklyModel:
    """What the scheduler uses during one week."""

    week: int
    divider: float | None
    predictor: FastForest | None
    n_train: int = 0
    train_seconds: float = 0.0
    importances: list[float] | None = None
    features: tuple[str, ...] = FEATURE_NAMES
    params: dict = field(default_factory=dict)

    def is_small(self, features: list[float]) -> bool:
        if self.predictor is None:
            return False
        return bool(self.predictor.predict_one(features))

    def probabilities(self, features: list[float]) -> tuple[float, float]:
        """``(p_large, p_small)``: the forest's class probabilities of one job, as
        :meth:`FastForest.proba` computes them (``(1.0, 0.0)`` without a forest)."""
        if self.predictor is None:
            return 1.0, 0.0
        first, second = self.predictor.proba(features)
        return (first, second) if self.predictor.classes[1] else (second, first)


class Trainer(Protocol):
    """Where finished jobs go and weekly models come from (in process, or the side trainer)."""

    def add_finished(self, features: list[float], runtime: float, week: int) -> None:
        """A finished job: features computed at its submission, observed runtime, and the week
        of its submission."""
        ...

    def model_for(self, week: int) -> WeeklyModel:
        """The model for ``week``, trained on every job added so far."""
        ...


def divider_of(runtime: np.ndarray, quantile: float = 0.5) -> float:
    """The divider of the runtimes: their median (``numpy.median`` itself, as always), or
    another ``quantile`` (``numpy.quantile``, linear interpolation)."""
    if quantile == 0.5:
        return float(np.median(runtime))
    return float(np.quantile(runtime, quantile))


def fit_week(x: np.ndarray, runtime: np.ndarray, week: int, params: ForestParams) -> WeeklyModel:
    """Train the model of ``week`` on the finished jobs ``x``/``runtime`` (in finish order):
    the divider over all of them, the forest over the last ``params.window``. The one training
    function, used in process and by the side trainer, so both give the same models."""
    if not len(runtime):
        return WeeklyModel(week, None, None, params=params.as_dict())
    divider = divider_of(runtime, params.divider_quantile)
    start = 0 if params.window is None else max(0, len(runtime) - params.window)
    trained = train_forest(x[start:], runtime[start:] < divider, params)
    return WeeklyModel(
        week=week,
        divider=divider,
        predictor=trained.predictor,
        n_train=trained.n_train,
        train_seconds=trained.train_seconds,
        importances=None if trained.importances is None else trained.importances.tolist(),
        params=params.as_dict(),
    )


class InProcessTrainer:
    """Keeps the history in growing numpy buffers and trains synchronously."""

    def __init__(self, params: ForestParams | None = None) -> None:
        self.params = params or ForestParams()
        self._x = np.zeros((1024, len(FEATURE_NAMES)), dtype=np.float32)
        self._runtime = np.zeros(1024, dtype=np.float64)
        self.size = 0

    def add_finished(self, features: list[float], runtime: float, week: int = 0) -> None:
        if self.size == len(self._runtime):
            self._x = np.concatenate([self._x, np.zeros_like(self._x)])
            self._runtime = np.concatenate([self._runtime, np.zeros_like(self._runtime)])
        self._x[self.size] = features
        self._runtime[self.size] = runtime
        self.size += 1

    def divider(self) -> float | None:
        if not self.size:
            return None
        return divider_of(self._runtime[: self.size], self.params.divider_quantile)

    def model_for(self, week: int) -> WeeklyModel:
        return fit_week(self._x[: self.size], self._runtime[: self.size], week, self.params)
