"""Bounded slowdown: the figure every method here is judged by (the paper's section 3.2),
written once, below the two that use it: the scheduler's guard, which decides with it
(:mod:`batsched_ml.scheduler.guard`), and a run's metrics, which report it
(:mod:`batsched_ml.results.metrics`). The scheduler does not import the results.

    bsld_j = max((wait_j + p_j) / max(p_j, tau), 1)

with ``p_j`` the job's execution time and ``tau`` = :data:`TAU` (60 s), so that a job of a
few seconds that waited a little does not count as slowed down a hundredfold.
"""

from __future__ import annotations

import numpy as np

#: The bound, in seconds, below which a runtime counts as ``TAU``.
TAU = 60.0


def bounded_slowdown(wait: np.ndarray, runtime: np.ndarray, tau: float = TAU) -> np.ndarray:
    """Each job's bounded slowdown, from its wait and its execution time (arrays or numbers)."""
    return np.maximum((wait + runtime) / np.maximum(runtime, tau), 1.0)
