"""The figures as pandas computed them, before :mod:`batsched_ml.results.metrics` was written
on numpy alone: the oracle its tests compare it with (``tests/test_metrics.py``), bit for bit.
Kept as it was: pandas' groupby, ``Series.mean``, ``median`` and ``strftime`` do the work."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pandas as pd

from batsched_ml.slowdown import TAU, bounded_slowdown

HOUR = 3_600.0
MONTH = 30 * 86_400.0


RESUBMIT_SUFFIX = "_resub"


def logical_jobs(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per workload job (see the module docstring), with ``attempts`` and
    ``wasted_area`` columns. Rows keep Batsim's columns; ``job_id``/``workload_name`` are the
    original job's.

    Rows are the final attempts in the order a stable sort on (not killed, finish time, -1
    for none) gives them: the jobs killed for good first, then by finish time, ties in the
    table's order. The attempts of a job are matched by their group's number
    (``pd.factorize`` of "<workload>!<name>", once), never by aligning tables on the text keys:
    each such alignment hashed 200,000 keys again (HPC2N classified: 0.86 s, now 0.11 s)."""
    workload = jobs["workload_name"].astype(str)
    resub = workload.str.endswith(RESUBMIT_SUFFIX).to_numpy(dtype=bool)
    table = jobs.copy(deep=False)  # columns are added, none is changed: the data is shared
    table["attempts"] = 1
    table["wasted_area"] = 0.0
    killed = (table["final_state"] == "COMPLETED_KILLED").to_numpy(dtype=bool)
    if not resub.any() and not killed.any():
        return table
    original_workload = workload.where(~resub, workload.str.slice(0, -len(RESUBMIT_SUFFIX)))
    job_id = table["job_id"]
    original_name = job_id.where(~resub, job_id.str.replace(r"_r\d+$", "", regex=True))
    codes, keys = pd.factorize(original_workload + "!" + original_name)  # first seen: 0, 1...
    if (codes < 0).any():  # (pandas' groupby left such rows out without a word)
        raise ValueError("a job table with a row that has no job_id")
    groups = len(keys)
    waste = np.where(
        killed,
        table["requested_number_of_resources"].to_numpy() * table["execution_time"].to_numpy(),
        0.0,
    )
    # the final attempt of each logical job: the one that did not end killed (else the last)
    finish = table["finish_time"].fillna(-1.0).to_numpy()
    ranked = np.lexsort((finish, np.where(killed, 0, 1)))  # stable: ties keep the row order
    ranked_codes = codes[ranked]
    reversed_first = np.unique(ranked_codes[::-1], return_index=True)[1]
    positions = np.sort(len(ranked) - 1 - reversed_first)  # each group's last, in rank order
    final_rows = ranked[positions]
    final_codes = ranked_codes[positions]
    # the original attempt of each group (none for a resubmission without one), else its first
    original = np.flatnonzero(~resub)
    if np.bincount(codes[original], minlength=groups).max(initial=0) > 1:
        raise ValueError("a job table with two original rows for the same workload job")
    original_of = np.full(groups, -1)
    original_of[codes[original]] = original
    first_of = np.unique(codes, return_index=True)[1]
    named_by = original_of[final_codes]
    named_by = np.where(named_by >= 0, named_by, final_rows)
    submitted_by = original_of[final_codes]
    submitted_by = np.where(submitted_by >= 0, submitted_by, first_of[final_codes])
    out = table.take(final_rows).reset_index(drop=True)
    out["attempts"] = np.bincount(codes, minlength=groups)[final_codes]
    out["wasted_area"] = pd.Series(waste).groupby(codes).sum().to_numpy()[final_codes]
    out["job_id"] = job_id.take(named_by).reset_index(drop=True)
    out["workload_name"] = table["workload_name"].take(named_by).reset_index(drop=True)
    submission = table["submission_time"].to_numpy()[submitted_by]
    out["submission_time"] = submission
    out["waiting_time"] = out["starting_time"].to_numpy() - submission
    out["turnaround_time"] = out["finish_time"].to_numpy() - submission
    return out


def killed_jobs(jobs: pd.DataFrame) -> int:
    """Logical jobs (:func:`logical_jobs`) that had at least one attempt killed: resubmitted
    (more than one attempt; an attempt is resubmitted only when killed) or killed for good."""
    return int(((jobs["attempts"] > 1) | (jobs["final_state"] == "COMPLETED_KILLED")).sum())


def with_job_metrics(jobs: pd.DataFrame, tau: float = TAU) -> pd.DataFrame:
    """The executed logical jobs of ``jobs`` with ``wait``, ``runtime`` and ``bsld`` added.

    ``wait`` is the time from the original submission to the start of the final attempt, so a
    killed job's lost time counts as waiting."""
    done = jobs[jobs["final_state"] != "REJECTED"].copy(deep=False)  # a new table already
    done["runtime"] = done["execution_time"]
    done["wait"] = done["finish_time"] - done["submission_time"] - done["runtime"]
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
    if stamps.isna().any() or not len(stamps):
        return stamps.dt.strftime("%Y-%m")
    # strftime's "%Y-%m", formatted once per month rather than once per job
    code = stamps.dt.year.to_numpy() * 100 + stamps.dt.month.to_numpy()
    months, which = np.unique(code, return_inverse=True)
    labels = np.array([f"{m // 100}-{m % 100:02d}" for m in months.tolist()], dtype=object)
    return pd.Series(labels[which.reshape(-1)], index=submission.index, name=stamps.name)


def _round(value: float) -> float | None:
    """Six decimals, and ``None`` (JSON null) for an undefined value such as 0/0."""
    value = float(value)
    return float(round(value, 6)) if np.isfinite(value) else None


def summarize(
    jobs: pd.DataFrame,
    *,
    nb_machines: int,
    unix_start_time: float | None = None,
    time_zone: str | None = None,
    tau: float = TAU,
) -> dict[str, Any]:
    """The summary of a run: counts, bounded slowdown, waiting time, makespan, utilisation, and
    the same per month and per actual class. Values are rounded to 6 decimals so the JSON is
    stable. ``jobs`` is a Batsim job table: attempts are folded into logical jobs here."""
    attempts = jobs
    jobs = logical_jobs(jobs)
    done = with_job_metrics(jobs, tau)
    success = done["final_state"] == "COMPLETED_SUCCESSFULLY"
    first = float(jobs["submission_time"].min()) if len(jobs) else 0.0
    makespan = float(done["finish_time"].max()) - first if len(done) else 0.0
    ran = attempts[attempts["final_state"] != "REJECTED"]
    area = float((ran["requested_number_of_resources"] * ran["execution_time"]).sum())
    killed_rows = attempts["final_state"] == "COMPLETED_KILLED"
    killed = int(killed_rows.sum())
    wasted = float(
        (
            attempts.loc[killed_rows, "requested_number_of_resources"]
            * attempts.loc[killed_rows, "execution_time"]
        ).sum()
    )
    capacity = nb_machines * makespan
    summary: dict[str, Any] = {
        "jobs": len(jobs),
        "finished": int(success.sum()),
        "killed_or_failed": int((~success).sum()),
        "rejected": int((jobs["final_state"] == "REJECTED").sum()),
        "kills": killed,
        "killed_jobs": killed_jobs(jobs),
        "wasted_area": _round(wasted),
        "mean_bsld": _round(done["bsld"].mean()) if len(done) else 0.0,
        "cumulative_bsld": _round(done["bsld"].sum()),
        "mean_wait": _round(done["wait"].mean()) if len(done) else 0.0,
        "max_wait": _round(done["wait"].max()) if len(done) else 0.0,
        "makespan": _round(makespan),
        "utilisation": _round(area / capacity) if makespan > 0 else 0.0,
        # the cost side: the killed attempts' processor time, in core-hours and as a share of
        # the machine's capacity over the makespan, and the utilisation without it
        "wasted_core_hours": _round(wasted / HOUR),
        "wasted_share": _round(wasted / capacity) if makespan > 0 else 0.0,
        "useful_utilisation": _round((area - wasted) / capacity) if makespan > 0 else 0.0,
    }
    if len(done):
        divider = float(done["runtime"].median())
        small = done["runtime"] < divider
        summary["divider"] = _round(divider)
        summary["bsld_small"] = _round(done.loc[small, "bsld"].mean()) if small.any() else 0.0
        summary["bsld_large"] = _round(done.loc[~small, "bsld"].mean()) if (~small).any() else 0.0
        months = month_labels(done["submission_time"], unix_start_time, time_zone)
        # each month's rows of the two columns averaged (the same values in the same order as
        # the whole table's groups): a month's table of every column, text ones included, held
        # a sixth of a large replay's memory
        grouped = done[["bsld", "wait"]].groupby(months.to_numpy(), sort=True)
        summary["monthly"] = {
            str(month): {
                "jobs": len(group),
                "mean_bsld": _round(group["bsld"].mean()),
                "mean_wait": _round(group["wait"].mean()),
            }
            for month, group in grouped
        }
    return summary
