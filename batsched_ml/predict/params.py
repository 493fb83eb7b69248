"""The weekly Random Forest's set-up (:class:`ForestParams`): plain values, importable without
scikit-learn, so that the command line can show the defaults at once. The forest itself is in
:mod:`batsched_ml.predict.forest`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ForestParams:
    """Random Forest set-up and training window (plain values, as in scikit-learn).

    ``window``: train on the most recent ``window`` finished jobs (``None``: all history).
    ``n_estimators=0`` trains nothing (only the divider is computed: class-clairvoyant).
    ``max_samples``: each tree's bootstrap sample, as a share of the training set. 0.25 by
    default: it trains 2 to 5 times faster than ``None`` (as many as the training set,
    scikit-learn's default and the paper's) and classifies as well, within 0.5 point of
    accuracy on the five paper traces (``benchmarks/training_setup.py``; docs/speed.md).
    ``None`` is not listed by :meth:`as_dict`, so runs made before 0.25 was the default keep
    their identities.
    ``divider_quantile``: the divider is this quantile of the finished jobs' runtimes (0.5:
    the median, :func:`numpy.median` itself; another value :func:`numpy.quantile`, linear).
    Set by the classifier option of that name; left at 0.5 it is not listed by
    :meth:`as_dict` either.
    """

    n_estimators: int = 40
    max_depth: int | None = 20
    min_samples_leaf: int = 20
    max_features: str | float = "sqrt"
    window: int | None = 50_000
    min_train: int = 100
    n_jobs: int = 2
    random_state: int = 0
    max_samples: float | None = 0.25
    divider_quantile: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.divider_quantile < 1.0:
            raise ValueError(f"divider_quantile must be in (0, 1), not {self.divider_quantile}")

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        if values["max_samples"] is None:  # the former default: earlier runs keep their identities
            del values["max_samples"]
        if values["divider_quantile"] == 0.5:  # the median: likewise
            del values["divider_quantile"]
        return values
