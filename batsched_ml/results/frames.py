"""Job tables as pandas tables: what reports, served runs' collection and notebooks read and
show. The figures themselves are :mod:`batsched_ml.results.metrics`' (numpy alone, so that a
replay does not load pandas); the tables here are built from the same folding and formulas.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from batsched_ml.results.metrics import TAU, fold_attempts, job_waits, round_figure


def read_jobs_csv(
    path: str | Path | IO[str], *, columns: tuple[str, ...] | None = None, objects: bool = False
) -> pd.DataFrame:
    """A Batsim jobs table, with ``job_id`` kept as text; only ``columns`` if given (in the
    file's order).

    ``objects``: the text columns as Python strings (columns of objects) rather than pandas'
    text type, for a table read only to compute from. The numbers are read the same way either
    way."""
    text: type = object if objects else str
    dtype: dict[str, Any] = {"job_id": text, "workload_name": text, "allocated_resources": text}
    return pd.read_csv(path, dtype=dtype, usecols=list(columns) if columns is not None else None)


def logical_jobs(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per workload job (:func:`~batsched_ml.results.metrics.fold_attempts`), with
    ``attempts`` and ``wasted_area`` columns. Rows keep Batsim's columns; ``job_id`` and
    ``workload_name`` are the original job's, ``submission_time`` its first submission, and
    ``waiting_time`` and ``turnaround_time`` are counted from it."""
    fold = fold_attempts(jobs)
    table = jobs.copy(deep=False)  # columns are added, none is changed: the data is shared
    if fold is None:
        table["attempts"] = 1
        table["wasted_area"] = 0.0
        return table
    out = table.take(fold.final).reset_index(drop=True)
    out["attempts"] = fold.attempts
    out["wasted_area"] = fold.wasted_area
    out["job_id"] = table["job_id"].take(fold.named_by).reset_index(drop=True)
    out["workload_name"] = table["workload_name"].take(fold.named_by).reset_index(drop=True)
    submission = table["submission_time"].to_numpy()[fold.submitted_by]
    out["submission_time"] = submission
    out["waiting_time"] = out["starting_time"].to_numpy() - submission
    out["turnaround_time"] = out["finish_time"].to_numpy() - submission
    return out


def with_job_metrics(jobs: pd.DataFrame, tau: float = TAU) -> pd.DataFrame:
    """The executed logical jobs of ``jobs`` with ``wait``, ``runtime`` and ``bsld`` added
    (:func:`~batsched_ml.results.metrics.job_waits`)."""
    done = jobs[jobs["final_state"] != "REJECTED"].copy(deep=False)  # a new table already
    done["runtime"] = done["execution_time"]
    wait, bsld = job_waits(
        done["submission_time"].to_numpy(),
        done["finish_time"].to_numpy(),
        done["runtime"].to_numpy(),
        tau,
    )
    done["wait"] = wait
    done["bsld"] = bsld
    return done


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
            str(key): (int(value) if key in ("TS", "FS", "TL", "FL") else round_figure(value))
            for key, value in totals.iloc[0].items()
        }
        if len(scored)
        else {}
    )
    overall["jobs_scored"] = len(scored)
    overall["jobs_unscored_first_week"] = int(len(records) - len(scored))
    return weekly.reset_index(), overall
