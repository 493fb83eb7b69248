"""The weekly Random Forest's set-up (:class:`ForestParams`): plain values, importable without
scikit-learn, so that the command line can show the defaults at once. The forest itself is in
:mod:`batsched_ml.predict.forest`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from batsched_ml.errors import ConfigError, check_integer


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
        """Checked when made, whoever makes it (the command line, a campaign, an init string,
        the trainer's command): a value the forest cannot be grown with is refused here, with
        one line naming the field, rather than failing in the trainer at every week of the
        run (each failure restarts the trainer, and the run goes on with every job large)."""
        if not 0.0 < self.divider_quantile < 1.0:
            raise ConfigError(f"divider_quantile must be in (0, 1), not {self.divider_quantile}")
        for name, least in (("n_estimators", 0), ("min_samples_leaf", 1), ("min_train", 0)):
            check_integer(f"forest {name}", getattr(self, name), least)
        for name in ("max_depth", "window"):
            if getattr(self, name) is not None:
                check_integer(f"forest {name}", getattr(self, name), 1)
        check_integer("forest random_state", self.random_state, 0)
        if self.random_state >= 2**32:
            raise ConfigError(f"forest random_state must be below 2**32, not {self.random_state}")
        check_integer("forest n_jobs", self.n_jobs)
        if self.n_jobs == 0:
            raise ConfigError("forest n_jobs must not be 0 (a count, or -1 for every core)")
        features = self.max_features
        if not (features in ("sqrt", "log2", None) or _share(features) or _whole(features, 1)):
            raise ConfigError(
                "forest max_features must be 'sqrt', 'log2', None, a share in (0, 1] or a count "
                ">= 1, "
                f"not {features!r}"
            )
        if self.max_samples is not None:
            if not _share(self.max_samples) and self.max_samples != 1:
                raise ConfigError(
                    f"forest max_samples must be a share in (0, 1] or all, not {self.max_samples!r}"
                )
            # as a float: an integer is a count of rows for scikit-learn (1: one row a tree)
            object.__setattr__(self, "max_samples", float(self.max_samples))

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        if values["max_samples"] is None:  # the former default: earlier runs keep their identities
            del values["max_samples"]
        if values["divider_quantile"] == 0.5:  # the median: likewise
            del values["divider_quantile"]
        return values


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _share(value: Any) -> bool:
    return isinstance(value, float) and 0.0 < value <= 1.0
