"""The predictor as a run measures it: what ``predictions.csv`` and ``timing.json`` report of it.
Here, below the run pipeline and the served run that wrap a predictor in it and the writers that
read it, and compiled with the scheduler that calls it at every submission and completion
(:data:`batsched_ml.compiled.SCHEDULER_GROUP`)."""

from __future__ import annotations

import time
from typing import Any


class MeasuredPredictor:
    """Wraps a runtime predictor to keep, for the reports, each job's prediction at submission
    and the time spent predicting (a clock belongs here, at the edge, not in the pure core)."""

    def __init__(self, inner: Any, name: str | None = None) -> None:
        self.inner = inner
        self.name = name if name is not None else getattr(inner, "name", type(inner).__name__)
        self.backfill_shortest_first = getattr(inner, "backfill_shortest_first", False)
        self.predictions: dict[str, float] = {}
        self.seconds = 0.0

    def estimate(self, job: Any, profile: dict[str, Any] | None) -> float:
        started = time.perf_counter()
        value = self.inner.estimate(job, profile)
        self.seconds += time.perf_counter() - started
        self.predictions.setdefault(job.id, value)
        return value

    def observe(self, job: Any, runtime: float) -> None:
        started = time.perf_counter()
        self.inner.observe(job, runtime)
        self.seconds += time.perf_counter() - started
