"""The one metrics module: every figure of a run is computed here from its job table.

The input is a Batsim ``_jobs.csv`` (ours or real Batsim's), read with :func:`read_jobs_csv`.

Bounded slowdown (paper, section 3.2; the formula is :mod:`batsched_ml.slowdown`'s), with ``tau``
= 60 s::

    bsld_j = max((wait_j + p_j) / max(p_j, tau), 1)

where ``p_j`` is the job's execution time. Cumulative bounded slowdown is the sum over jobs, mean
bounded slowdown the mean. Waiting time is start - submission. Makespan is the last finish minus
the first submission; utilisation is the processor-seconds used by jobs over machines x makespan,
killed attempts included (they held the machines). The cost of killing: ``kills`` (killed
attempts: killed at the divider and resubmitted, or at their walltime), ``killed_jobs`` (jobs
with at least one killed attempt), ``wasted_area`` (their
processor-seconds), ``wasted_core_hours`` (the same in hours), ``wasted_share`` (over machines x
makespan) and ``useful_utilisation`` (utilisation without them: utilisation - wasted_share, up to
rounding), so that a method is not rewarded for work it threw away.
Rejected jobs have no times: they are counted, and left out of every time-based figure.

Months are calendar months of the submission in the trace's own time zone when the workload says
when it started (``unix_start_time``, ``time_zone_string``), else 30-day periods from time 0.

Logical jobs: the safeguard kills a job and resubmits it under a new id (workload
``<w>_resub``, name ``<name>_r<n>``). :func:`logical_jobs` folds every attempt into the workload
job it belongs to: submission = the original one, start and runtime = the last attempt's,
finish = the last attempt's; the killed attempts are counted and their area (processors x time
run) reported as wasted. Every figure is computed on logical jobs.

Actual class (for per-class figures): a job is small if its runtime is below the median runtime
of all the run's jobs (the paper's divider over the whole trace, Table 2).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

# the formula and its bound, written below the scheduler's guard that decides with them
from batsched_ml.slowdown import TAU as TAU
from batsched_ml.slowdown import bounded_slowdown as bounded_slowdown

HOUR = 3_600.0
MONTH = 30 * 86_400.0


#: The columns of a job table that :func:`summarize` and :func:`prediction_quality`'s caller read:
#: a table parsed only for its figures needs no others (the allocations' text, the metadata).
FIGURE_COLUMNS: tuple[str, ...] = (
    "job_id",
    "workload_name",
    "submission_time",
    "requested_number_of_resources",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
)


def read_jobs_csv(
    path: str | Path | IO[str], *, columns: tuple[str, ...] | None = None, objects: bool = False
) -> pd.DataFrame:
    """A Batsim jobs table, with ``job_id`` kept as text; only ``columns`` if given (in the
    file's order).

    ``objects``: the text columns as Python strings (columns of objects) rather than pandas'
    text type, for a table read only to compute from (the figures of a replay's own table):
    making pandas' text columns (Arrow strings) and taking the strings back out of them was
    half of reading RICC's figure columns. The numbers are read the same way either way."""
    text: type = object if objects else str
    dtype: dict[str, Any] = {"job_id": text, "workload_name": text, "allocated_resources": text}
    return pd.read_csv(path, dtype=dtype, usecols=list(columns) if columns is not None else None)


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


def prediction_quality(predicted: np.ndarray, actual: np.ndarray) -> dict[str, Any]:
    """Runtime prediction quality (the SU paper, equations 6-8): APA, the mean over jobs of
    predicted / actual when under, actual / predicted otherwise (1 is perfect); MAE, the mean
    absolute error in seconds; UR, the share of jobs predicted below their runtime."""
    predicted = np.asarray(predicted, dtype=float)
    actual = np.asarray(actual, dtype=float)
    if not len(actual):
        return {"jobs": 0, "APA": None, "MAE": None, "UR": None}
    under = predicted < actual
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(under, predicted / actual, actual / predicted)
    ratio = np.where((predicted == 0) & (actual == 0), 1.0, ratio)
    return {
        "jobs": len(actual),
        "APA": _round(ratio.mean()),
        "MAE": _round(np.abs(predicted - actual).mean()),
        "UR": _round(under.mean()),
    }


def classification_quality(records: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per week and overall: TS, FS, TL, FL, accuracy, precision, recall, false-small and
    false-large rates (paper, Tables 5-6).

    ``records`` has one row per finished job: ``week``, ``divider`` (of the model that classified
    it), ``predicted_small`` and ``runtime``. A job is actually small if its runtime is below that
    divider. Jobs classified with no divider yet (the first week) are left out: there is no class
    to be right or wrong about. Rates with a zero denominator are NaN per week (the paper's
    "undefined") and left out of nothing else.
    """
    scored = records[records["divider"].notna()].copy()
    scored["actual_small"] = scored["runtime"] < scored["divider"]
    p, a = scored["predicted_small"].astype(bool), scored["actual_small"]
    scored["TS"] = p & a
    scored["FS"] = p & ~a
    scored["TL"] = ~p & ~a
    scored["FL"] = ~p & a
    weekly = scored.groupby("week")[["TS", "FS", "TL", "FL"]].sum().astype(int)

    def rates(frame: pd.DataFrame) -> pd.DataFrame:
        ts, fs, tl, fl = (frame[c].astype(float) for c in ("TS", "FS", "TL", "FL"))
        out = frame.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            out["accuracy"] = (ts + tl) / (ts + tl + fs + fl)
            out["precision"] = ts / (ts + fs)
            out["recall"] = ts / (ts + fl)
            out["false_large_rate"] = fl / (fl + tl)
            out["false_small_rate"] = fs / (fs + ts)
        return out

    weekly = rates(weekly)
    totals = rates(pd.DataFrame([scored[["TS", "FS", "TL", "FL"]].sum().astype(int)]))
    overall = (
        {
            str(key): (int(value) if key in ("TS", "FS", "TL", "FL") else _round(value))
            for key, value in totals.iloc[0].items()
        }
        if len(scored)
        else {}
    )
    overall["jobs_scored"] = len(scored)
    overall["jobs_unscored_first_week"] = int(len(records) - len(scored))
    return weekly.reset_index(), overall


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
