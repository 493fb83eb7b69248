"""The one metrics module: every figure of a run is computed here from its job table.

The input is a Batsim ``_jobs.csv`` (ours or real Batsim's), read with :func:`read_jobs_csv`.

Bounded slowdown (paper, section 3.2), with ``tau`` = 60 s::

    bsld_j = max((wait_j + p_j) / max(p_j, tau), 1)

where ``p_j`` is the job's execution time. Cumulative bounded slowdown is the sum over jobs, mean
bounded slowdown the mean. Waiting time is start - submission. Makespan is the last finish minus
the first submission; utilisation is the processor-seconds used by jobs over machines x makespan.
Rejected jobs have no times: they are counted, and left out of every time-based figure.

Months are calendar months of the submission in the trace's own time zone when the workload says
when it started (``unix_start_time``, ``time_zone_string``), else 30-day periods from time 0.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TAU = 60.0
MONTH = 30 * 86_400.0


def read_jobs_csv(path: str | Path) -> pd.DataFrame:
    """A Batsim jobs table, with ``job_id`` kept as text."""
    return pd.read_csv(
        path, dtype={"job_id": str, "workload_name": str, "allocated_resources": str}
    )


def bounded_slowdown(wait: np.ndarray, runtime: np.ndarray, tau: float = TAU) -> np.ndarray:
    return np.maximum((wait + runtime) / np.maximum(runtime, tau), 1.0)


def with_job_metrics(jobs: pd.DataFrame, tau: float = TAU) -> pd.DataFrame:
    """The executed jobs of ``jobs`` with ``wait``, ``runtime`` and ``bsld`` columns added."""
    done = jobs[jobs["final_state"] != "REJECTED"].copy()
    done["wait"] = done["starting_time"] - done["submission_time"]
    done["runtime"] = done["execution_time"]
    done["bsld"] = bounded_slowdown(done["wait"].to_numpy(), done["runtime"].to_numpy(), tau)
    return done


def month_labels(
    submission: pd.Series, unix_start_time: float | None, time_zone: str | None
) -> pd.Series:
    """Label each submission time with its month ("1996-09", or "m00" without a calendar)."""
    if unix_start_time is None:
        return (submission // MONTH).astype(int).map(lambda m: f"m{m:02d}")
    stamps = pd.to_datetime(unix_start_time + submission, unit="s", utc=True)
    if time_zone:
        # an unknown zone name leaves the months in UTC rather than failing the report
        with contextlib.suppress(KeyError, ValueError, TypeError):
            stamps = stamps.dt.tz_convert(time_zone)
    return stamps.dt.strftime("%Y-%m")


def _round(value: float) -> float:
    return float(round(float(value), 6))


def summarize(
    jobs: pd.DataFrame,
    *,
    nb_machines: int,
    unix_start_time: float | None = None,
    time_zone: str | None = None,
    tau: float = TAU,
) -> dict[str, Any]:
    """The summary of a run: counts, bounded slowdown, waiting time, makespan, utilisation, and
    the same per month. Values are rounded to 6 decimals so the JSON is stable."""
    done = with_job_metrics(jobs, tau)
    success = done["final_state"] == "COMPLETED_SUCCESSFULLY"
    first = float(jobs["submission_time"].min()) if len(jobs) else 0.0
    makespan = float(done["finish_time"].max()) - first if len(done) else 0.0
    area = float((done["requested_number_of_resources"] * done["execution_time"]).sum())
    summary: dict[str, Any] = {
        "jobs": len(jobs),
        "finished": int(success.sum()),
        "killed_or_failed": int((~success).sum()),
        "rejected": int((jobs["final_state"] == "REJECTED").sum()),
        "mean_bsld": _round(done["bsld"].mean()) if len(done) else 0.0,
        "cumulative_bsld": _round(done["bsld"].sum()),
        "mean_wait": _round(done["wait"].mean()) if len(done) else 0.0,
        "max_wait": _round(done["wait"].max()) if len(done) else 0.0,
        "makespan": _round(makespan),
        "utilisation": _round(area / (nb_machines * makespan)) if makespan > 0 else 0.0,
    }
    if len(done):
        months = month_labels(done["submission_time"], unix_start_time, time_zone)
        grouped = done.groupby(months.to_numpy(), sort=True)
        summary["monthly"] = {
            str(month): {
                "jobs": len(group),
                "mean_bsld": _round(group["bsld"].mean()),
                "mean_wait": _round(group["wait"].mean()),
            }
            for month, group in grouped
        }
    return summary


def max_machines_in_use(jobs: pd.DataFrame) -> int:
    """The largest number of machines used at once (a sweep over starts and finishes; at equal
    times, finishes first, as a machine freed at t can be used from t)."""
    done = jobs[jobs["final_state"] != "REJECTED"]
    times = np.concatenate([done["finish_time"].to_numpy(), done["starting_time"].to_numpy()])
    deltas = np.concatenate(
        [
            -done["requested_number_of_resources"].to_numpy(),
            done["requested_number_of_resources"].to_numpy(),
        ]
    )
    kinds = np.concatenate([np.zeros(len(done)), np.ones(len(done))])
    order = np.lexsort((kinds, times))
    return int(np.cumsum(deltas[order]).max()) if len(done) else 0
