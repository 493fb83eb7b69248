"""Plug-in parts for tests/test_plugins.py, loaded by import path (``tests.plugin_parts:...``)
as a package outside batsched-ml would provide them."""

from __future__ import annotations

from typing import Any


class HalfRequested:
    """A plug-in predictor: ``factor`` times the requested time (at least one second); it
    records what it is told of finished jobs."""

    name = "half"

    def __init__(self, factor: float = 0.5) -> None:
        if not 0 < factor <= 1:
            raise ValueError(f"factor must be in (0, 1], not {factor}")
        self.factor = factor
        self.observed: list[tuple[str, float]] = []

    def estimate(self, job: Any, profile: dict[str, Any] | None) -> float:
        return max(1.0, self.factor * job.walltime)

    def observe(self, job: Any, runtime: float) -> None:
        self.observed.append((job.id, runtime))


class WidestFirst:
    """A plug-in queue order: most processors first, then submission time and arrival."""

    dynamic = False

    def key(self, job: Any, now: float) -> tuple[float, float, int]:
        return (-job.res, job.subtime, job.seq)


class EstimateOnly:
    """Not a predictor: no ``observe``."""

    def estimate(self, job: Any, profile: dict[str, Any] | None) -> float:
        return 1.0


NOT_A_CLASS = 42


class ArrivalOrder:
    """A plug-in queue order identical to FCFS (submission time, then arrival): a researcher's
    new order before its first edit."""

    dynamic = False

    def key(self, job: Any, now: float) -> tuple[float, float, int]:
        return (job.subtime, job.subtime, job.seq)


class DiesInItsWorker:
    """A plug-in queue order that ends its process at its first key: a run that takes its
    campaign's Dask worker down with it (as running out of memory does). A second first: the
    result of the run its worker finished just before is then with the client (a result only
    the dead worker held would be lost, and counted as failed by a Dask that retries
    nothing)."""

    dynamic = False

    def key(self, job: Any, now: float) -> tuple[float]:
        import os
        import time

        time.sleep(1.0)
        os._exit(9)
