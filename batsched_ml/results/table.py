"""A campaign's table of runs, ``results.csv`` (and ``results.parquet``): its columns, the
statuses of a finished run, and its reader. Here, below the campaigns that write it and the
reports that read it, so that both import it without importing each other."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

SUMMARY_COLUMNS = (
    "jobs",
    "mean_bsld",
    "cumulative_bsld",
    "mean_wait",
    "max_wait",
    "kills",
    "killed_jobs",
    "wasted_core_hours",
    "wasted_share",
    "utilisation",
    "useful_utilisation",
)

RESULT_COLUMNS = (
    "trace",
    "policy",
    "variant",
    "seed",
    "copy",
    "shake_seconds",
    "predictor",
    "correction",
    "dispatcher",
    "predictor_options",
    "dispatcher_options",
    "classifier_options",
    "backfilling",
    "starvation_hours",
    "feature_mode",
    "trees",
    "window",
    "max_samples",
    "batsim",
    "status",
    "seconds",
    "path",
    *SUMMARY_COLUMNS,
    "accuracy",
    "APA",
    "MAE",
    "UR",
    "predict_us_per_job",
    "run_id",
    "rerun_reason",
    "error",
)


#: the columns of results.csv that hold numbers; the others hold text, and are read as text
#: (:func:`read_results`), or a run id such as ``1234e567`` (hexadecimal) becomes a number and
#: the table cannot be written back
NUMBER_RESULT_COLUMNS = frozenset(
    {
        "seed",
        "copy",
        "shake_seconds",
        "starvation_hours",  # empty: none
        "trees",
        "window",  # empty: all
        "max_samples",  # empty: all
        "batsim",
        "seconds",
        *SUMMARY_COLUMNS,
        "accuracy",
        "APA",
        "MAE",
        "UR",
        "predict_us_per_job",
    }
)
#: read as pandas reads True and False: booleans
BOOLEAN_RESULT_COLUMNS = frozenset({"backfilling"})
TEXT_RESULT_COLUMNS = tuple(
    c for c in RESULT_COLUMNS if c not in NUMBER_RESULT_COLUMNS | BOOLEAN_RESULT_COLUMNS
)


def read_results(path: str | Path) -> pd.DataFrame:
    """A campaign's ``results.csv`` with its text columns as text (an empty cell is missing)."""
    return pd.read_csv(
        path,
        keep_default_na=False,
        na_values=[""],
        dtype={column: str for column in TEXT_RESULT_COLUMNS},
    )


#: The statuses of a results row whose run folder holds the finished run: replayed now, found
#: there, or linked from a reused folder (the others: ``failed``)
FINISHED_STATUSES = ("done", "existing", "linked")
