"""Runtime estimates for EASY, pluggable (scikit-learn-like: plain constructor parameters).

An estimator answers, at submission, how long a job is expected to run; EASY uses the answer to
order the queue (SPF, SAF, WFP), to compute a reservation from the running jobs' expected ends,
and to decide whether a job can be backfilled. ``observe`` is told every finished job so that
learning estimators (later: predictors) can update themselves.

A job without walltime (traces with no requested times at all) is estimated at
``no_walltime_estimate`` seconds, a day by default: an infinite estimate would let every job
backfill ahead of the reservation and starve the queue head.
"""

from __future__ import annotations

from typing import Any, Protocol

from batsched_ml.job import Job

DAY = 86_400.0


class Estimator(Protocol):
    name: str

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float: ...

    def observe(self, job: Job, runtime: float) -> None: ...


class RequestedTime:
    """The user's requested time (the job's walltime): EASY's classic estimate."""

    name = "requested"

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        self.no_walltime_estimate = no_walltime_estimate

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        return job.walltime if job.walltime is not None else self.no_walltime_estimate

    def observe(self, job: Job, runtime: float) -> None:
        return None


class ActualRuntime:
    """The clairvoyant estimate: the job's real duration, read from its ``delay`` profile (the
    scheduler gets the profiles in SIMULATION_BEGINS). A reference, never a real scheduler."""

    name = "actual"

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        self.no_walltime_estimate = no_walltime_estimate

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        if profile is None or "delay" not in profile:
            raise ValueError(f"job {job.id}: the clairvoyant estimate needs its delay profile")
        delay = float(profile["delay"])
        if job.walltime is not None:
            return min(delay, job.walltime)
        return delay

    def observe(self, job: Job, runtime: float) -> None:
        return None


ESTIMATORS: dict[str, type] = {"requested": RequestedTime, "actual": ActualRuntime}
