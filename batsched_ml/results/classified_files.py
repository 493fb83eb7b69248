"""A classifying scheduler's tables: ``classification.csv`` (each job's week, divider, class and
attempts), ``weekly_quality.csv`` (the classifier week by week, and the safeguard's decisions)
and ``feature_importance.csv`` (the weekly forests' Gini importances).

They are made with pandas (its merges and ``to_csv`` formats), which a classified run loads
anyway: kept apart from :mod:`batsched_ml.results.outputs` so that a replay without a classifier
does not load it (0.3 s and 110 MiB, with pyarrow).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.results.frames import classification_quality
from batsched_ml.results.outputs import (
    CLASSIFICATION,
    FEATURE_IMPORTANCE,
    WEEKLY_QUALITY,
    Files,
    csv_text,
    files_of,
)
from batsched_ml.scheduler.guard import GUARD_COLUMNS


def table_csv_parts(table: pd.DataFrame, *, rows_per_part: int = 50_000) -> Iterable[str]:
    """``table.to_csv(index=False)``'s text, formatted ``rows_per_part`` rows at a time (the
    text of each cell of a whole table at once was the largest step of a run's memory)."""
    return (
        _table_csv(table.iloc[start : start + rows_per_part], header=start == 0)
        for start in range(0, max(len(table), 1), rows_per_part)
    )


def _table_csv(table: pd.DataFrame, *, header: bool = True) -> str:
    """``table.to_csv(index=False, header=header)``'s text, four times faster for the tables of
    text, numeric and boolean columns (:func:`~batsched_ml.results.outputs.csv_text`); a
    column of another type goes through pandas itself."""
    try:
        return csv_text({name: table[name].to_numpy() for name in table.columns}, header=header)
    except TypeError:
        return str(table.to_csv(index=False, header=header))


def write_classification(scheduler: Any, out: str | Path | Files) -> dict[str, Any]:
    """Write the per-job classification, the weekly quality and the weekly Gini importances of
    a classifying scheduler; return the overall quality for ``summary.json``."""
    columns = ("job_id", "week", "divider", "predicted_small", "runtime", "attempts")
    # built column by column: a list of a dict per job made pandas infer every row (an empty
    # table as before: columns of objects, not of floats)
    records = pd.DataFrame(
        {name: [getattr(r, name) for r in scheduler.records] for name in columns}
        if scheduler.records
        else [],
        columns=list(columns),
    )
    files = files_of(out)
    files.put(CLASSIFICATION, table_csv_parts(records))
    weekly, overall = classification_quality(records)
    weeks = pd.DataFrame(
        [
            {
                "week": w.week,
                "divider": w.divider,
                "model": w.has_model,
                "n_train": w.n_train,
            }
            for w in scheduler.weeks
        ],
        columns=["week", "divider", "model", "n_train"],  # a run stopped before its first week
    )
    weekly = weeks.merge(weekly, on="week", how="left")
    guard = getattr(scheduler, "guard", None)
    if guard is not None:  # classification-guarded: each week's decision and its quantities
        decisions = pd.DataFrame(guard.table(), columns=["week", *GUARD_COLUMNS])
        weekly = weekly.merge(decisions, on="week", how="left")
    files.put(WEEKLY_QUALITY, weekly.to_csv(index=False, float_format="%.6f"))
    importances = pd.DataFrame(
        [[w.week, *w.importances] for w in scheduler.weeks if w.importances is not None],
        columns=["week", *FEATURE_NAMES],
    )
    files.put(FEATURE_IMPORTANCE, importances.to_csv(index=False, float_format="%.6f"))
    overall["kill_decisions"] = scheduler.kill_decisions
    overall["weeks_with_model"] = int(sum(w.has_model for w in scheduler.weeks))
    if guard is not None:
        overall["guard_weeks_on"] = int(sum(d.on for d in guard.decisions))
        overall["guard_demoted_jobs"] = guard.demoted
        # every option the guard ran with, defaults included: a run's record says what it
        # applied, and a changed default changes the record (and so the results pages' probes)
        overall["guard_options"] = dict(vars(guard.options))
    return overall
