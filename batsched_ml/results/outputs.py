"""A run folder's files: their names, defined once, and the writers that make them from the run's
records in memory.

Every command that leaves results behind writes them here: ``replay`` (and campaigns and the
Python API, which run replays) through :func:`write_replay`, ``serve`` through
:func:`write_classification` / :func:`write_timing`, ``collect`` through :func:`run_summary` and
:func:`write_predictions`. So one summary has one layout whatever made it, and a figure is
computed in one place (:mod:`batsched_ml.results.metrics`).

Why from memory: the job table is formatted once (Batsim's ``%f`` text, :mod:`.sim.jobs_csv`),
written, and read once (only the columns the figures need, :func:`read_figure_columns`) into the
table every figure is computed from: the figures are those of the file a reader opens, and no
table is read again for each figure.

The writers put each file through :class:`Files`: a run folder (:class:`Folder`, each file
written whole or not at all), or memory (:class:`Memory`, what the Python API returns, parsed
from the same text a folder would hold: a notebook and the command line never disagree, and no
temporary folder is written).

Wall-clock figures go to ``timing.json`` only: every other file of a run is byte-identical across
reruns of the same inputs.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.results.measured import MeasuredPredictor
from batsched_ml.results.metrics import (
    FIGURE_COLUMNS,
    classification_quality,
    prediction_quality,
    read_jobs_csv,
    summarize,
)
from batsched_ml.results.textfile import write_text as write_text
from batsched_ml.scheduler.guard import GUARD_COLUMNS
from batsched_ml.sim.jobs_csv import table_parts
from batsched_ml.workload.io import dropped_jobs

RUN_FILE = "run.json"  # the run's identity and status (:mod:`batsched_ml.results.runfolder`)
JOBS = "jobs.csv"  # Batsim's job table, one row per attempt
SUMMARY = "summary.json"  # the figures, the settings, the classifier's and predictor's quality
TIMING = "timing.json"  # wall-clock figures: the only file that differs between reruns
PREDICTIONS = "predictions.csv"  # per job: predicted and actual runtime
PREDICTED = "predicted.csv"  # a served run's predictions, before collect joins the runtimes
CLASSIFICATION = "classification.csv"  # per job: week, divider, predicted class, attempts
WEEKLY_QUALITY = "weekly_quality.csv"  # the classifier week by week
FEATURE_IMPORTANCE = "feature_importance.csv"  # the weekly forests' Gini importances
DECISIONS = "decisions.csv"  # a served run's decisions
SERVE_STATUS = "serve.json"  # a served run's status
REPORT = "report.md"  # a collected run's short report
MODELS = "models"  # the side trainer's model store (a folder)
TRAINER_DB = "trainer.sqlite"

#: Every name a run may write into its folder (with SQLite's companions of the trainer's store):
#: only folders made of these are replaced by ``--force`` (:mod:`batsched_ml.results.runfolder`).
RUN_OUTPUTS = frozenset(
    {
        RUN_FILE,
        JOBS,
        SUMMARY,
        TIMING,
        PREDICTIONS,
        PREDICTED,
        CLASSIFICATION,
        WEEKLY_QUALITY,
        FEATURE_IMPORTANCE,
        DECISIONS,
        SERVE_STATUS,
        REPORT,
        MODELS,
        TRAINER_DB,
        *(TRAINER_DB + suffix for suffix in ("-wal", "-shm", "-journal")),
    }
)

#: The tables a served run's scheduler writes that ``collect`` copies beside Batsim's job table.
SCHEDULER_TABLES = (DECISIONS, CLASSIFICATION, WEEKLY_QUALITY)


class Settings(Protocol):
    """A run's settings, as its record gives them."""

    def as_dict(self) -> dict[str, Any]: ...


class Replayed(Protocol):
    """What :func:`write_replay` reads of a replay: its job table's rows, its scheduler (read
    for what it has: the predictor's and the classifier's records), the workload's description
    and its settings; :class:`batsched_ml.runs.replaying.ReplayResult` is one. Named here, so
    that the writers below the run pipeline do not import it."""

    @property
    def rows(self) -> list[str]: ...
    @property
    def scheduler(self) -> Any: ...
    @property
    def workload(self) -> dict[str, Any]: ...
    @property
    def config(self) -> Settings: ...
    @property
    def workload_jobs(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def engine(self) -> str: ...
    @property
    def batsim(self) -> int: ...

    summary: dict[str, Any]  # the summary written, kept for the caller


class Files(Protocol):
    """Where a run's result files go, by name (:data:`JOBS`, :data:`SUMMARY`, ...)."""

    def put(self, name: str, text: str | Iterable[str]) -> None:
        """Keep ``text`` (whole, or its parts in order) as the file ``name``."""
        ...

    def figure_table(self) -> pd.DataFrame:
        """The figure columns of the job table put as :data:`JOBS`, as a reader parses them."""
        ...


class Folder:
    """A run folder: each file written whole or not at all (:func:`write_text`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def put(self, name: str, text: str | Iterable[str]) -> None:
        write_text(self.path / name, text)

    def figure_table(self) -> pd.DataFrame:
        return read_figure_columns(self.path / JOBS)


class Memory:
    """The files as texts in memory, by name (:attr:`texts`): what a folder would hold."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def put(self, name: str, text: str | Iterable[str]) -> None:
        self.texts[name] = text if isinstance(text, str) else "".join(text)

    def figure_table(self) -> pd.DataFrame:
        return read_jobs_csv(io.StringIO(self.texts[JOBS]), columns=FIGURE_COLUMNS, objects=True)


def files_of(out: str | Path | Files) -> Files:
    """``out`` as :class:`Files`: a folder's path, or files already."""
    return Folder(out) if isinstance(out, (str, Path)) else out


def read_figure_columns(path: Path) -> pd.DataFrame:
    """The columns of the job table at ``path`` that the figures are computed from
    (:data:`~batsched_ml.results.metrics.FIGURE_COLUMNS`), as
    :func:`~batsched_ml.results.metrics.read_jobs_csv` reads them: the figures are those of the file
    a reader opens. Parsing the other columns (the allocations' text above all) took a third of the
    parse's time and memory; the file is read back from the system's cache rather than parsed from
    the text in memory, which would need a second copy of it (a third of the run's peak memory on
    HPC2N). Its text columns are Python strings (``objects``): the table is only computed from."""
    return read_jobs_csv(path, columns=FIGURE_COLUMNS, objects=True)


def write_json(path: Path, data: Any, *, indent: int | None = 2) -> None:
    write_text(path, json_text(data, indent=indent))


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """The text of a run's JSON files."""
    return json.dumps(data, indent=indent) + "\n"


def run_summary(
    jobs: pd.DataFrame,
    workload: Mapping[str, Any],
    config: Mapping[str, Any],
    rejected: Iterable[str],
    *,
    workload_jobs: int | None = None,
) -> dict[str, Any]:
    """The head of ``summary.json``, the same for a replay and a collected served run: the
    trace, the settings, the workload's size, the figures of :func:`~.metrics.summarize` and
    the jobs the scheduler rejected. Callers append what only they know."""
    return {
        "trace": workload.get("trace"),
        "config": dict(config),
        "workload_jobs": len(workload.get("jobs", [])) if workload_jobs is None else workload_jobs,
        **summarize(
            jobs,
            nb_machines=int(workload["nb_res"]),
            unix_start_time=workload.get("unix_start_time"),
            time_zone=workload.get("time_zone_string"),
        ),
        "rejected_jobs": list(rejected),
    }


def write_replay(
    result: Replayed, out_dir: str | Path | Files, *, run_id: str | None = None
) -> dict[str, Any]:
    """Write a replay's files into ``out_dir``: ``jobs.csv``, ``summary.json``, ``timing.json``
    and, as the scheduler has them, the predictor's and the classifier's tables; return the
    summary (also kept in ``result.summary``). ``run_id`` (:mod:`batsched_ml.results.runfolder`)
    goes into ``summary.json`` and ``timing.json``."""
    out = files_of(out_dir)

    out.put(JOBS, table_parts(result.rows))
    jobs = out.figure_table()
    workload = result.workload
    scheduler: Any = result.scheduler  # classifying or not: read by what it has
    summary = {
        **({"run_id": run_id} if run_id is not None else {}),
        **run_summary(
            jobs,
            workload,
            result.config.as_dict(),
            scheduler.rejected,
            workload_jobs=result.workload_jobs,
        ),
    }
    if result.batsim != 4:  # the Batsim played, and whose jobs.csv this is (else 4.2.1)
        summary["batsim"] = result.batsim
    if workload.get("shaking"):  # a shaken copy of the trace (workload/shake.py)
        summary["shaking"] = workload["shaking"]
    risky = getattr(scheduler.dispatcher, "risky_starts", None)
    if risky is not None:  # the probabilistic dispatcher: jobs started on their risk
        summary["risky_starts"] = risky
    skipped = (workload.get("cleaning") or {}).get("skipped_lines")
    if skipped:  # --lenient: the malformed lines left out of the trace
        summary["skipped_lines"] = skipped

    dropped = dropped_jobs(workload)
    if dropped:  # the trace's jobs the cleaning rules dropped (a whole trace: no key)
        summary["input_cleaning"] = dropped
    timing: dict[str, Any] = {"replay_seconds": round(result.seconds, 1), "engine": result.engine}
    if run_id is not None:
        timing = {"run_id": run_id, **timing}

    predictor = getattr(scheduler, "predictor", None)
    if isinstance(predictor, MeasuredPredictor):
        planner = getattr(scheduler, "planner", None)
        if planner is not None:
            timing["cph"] = {
                "solver_calls": planner.calls,
                "differ_from_prb": planner.improved,
                "fallbacks": planner.fallbacks,
                "wall_capped": planner.wall_capped,
            }
        summary["prediction"] = write_predictions(
            predictor.predictions,
            predictor.name,
            jobs,
            out,
            # 0 for the compiled engine, whose prediction (the requested time) is a field it
            # reads in its loop; None would read as "not run" on the related-work page
            seconds=predictor.seconds,
            timing=timing,
        )
    if hasattr(scheduler, "records"):  # a classifying scheduler
        summary["classification"] = write_classification(scheduler, out)
        summary["trainer_events"] = list(getattr(scheduler.trainer, "events", []))
        timing.update(training_seconds(scheduler))
    write_timing(out, timing)
    out.put(SUMMARY, json_text(summary))
    result.summary = summary
    return summary


def write_predictions(
    predictions: Mapping[str, float],
    name: str,
    jobs: pd.DataFrame,
    out: str | Path | Files,
    *,
    seconds: float | None = None,
    timing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``predictions.csv`` (each job's predicted runtime, made at its first submission, and its
    actual runtime in the job table ``jobs``: ours in a replay, Batsim's after a served run),
    the time spent predicting per job (into ``timing``, or a ``timing.json`` of its own for a
    served run's collect) and the quality figures for ``summary.json``."""
    jobs = jobs[jobs["final_state"] != "REJECTED"]
    ids = _job_keys(jobs)
    predicted = _mapped(ids, predictions)
    table = pd.DataFrame(
        {"job_id": ids, "predicted": predicted, "actual": jobs["execution_time"]}
    ).dropna()
    files_of(out).put(PREDICTIONS, table_csv_parts(table))
    quality = prediction_quality(table["predicted"].to_numpy(), table["actual"].to_numpy())
    quality["predictor"] = name
    # a measured duration varies from run to run: kept out of summary.json
    per_job = round(1e6 * seconds / len(table), 3) if len(table) and seconds is not None else None
    if timing is None:
        write_timing(out, {"predict_us_per_job": per_job})
    else:
        timing["predict_us_per_job"] = per_job
    return quality


def _job_keys(jobs: pd.DataFrame) -> pd.Series:
    """Each row's ``"<workload>!<job_id>"``, the key the predictors record their predictions
    under: ``workload_name.astype(str) + "!" + job_id.astype(str)``, made as Python strings in
    a column of objects when every name and id is a string (no cell missing), rather than
    through pandas' text type and back (a third of RICC's ``predictions.csv``)."""
    names = jobs["workload_name"].tolist()
    numbers = jobs["job_id"].tolist()
    if set(map(type, names)) | set(map(type, numbers)) <= {str}:
        keys = [f"{name}!{number}" for name, number in zip(names, numbers, strict=True)]
        return pd.Series(keys, index=jobs.index, dtype=object)
    return jobs["workload_name"].astype(str) + "!" + jobs["job_id"].astype(str)


def _mapped(ids: pd.Series, values: Mapping[str, float]) -> pd.Series:
    """``ids.map(values)``, looked up here in a list comprehension rather than through the
    Series pandas builds of the whole dict and its index (half a second for HPC2N), when
    ``values`` is a dict of Python floats and ints (what the predictors give: the requested
    time is the workload's integer). pandas makes the dict a Series, int64 if every value is
    an int, else float64, and takes from it, a missing id giving NaN (and so float64): the
    same here. Anything else (a bool, a numpy number, an int beyond int64) goes through pandas
    itself."""
    if type(values) is not dict:
        return ids.map(values)
    numbers = values.values()
    kinds = set(map(type, numbers))  # (the types and bounds found at C speed, not per value)
    if not kinds <= {float, int}:
        return ids.map(values)
    # a NaN among the values makes min or max NaN (then not in range: through pandas), else
    # they are the ints' and floats' true bounds
    if int in kinds and not (min(numbers) >= -(2**63) and max(numbers) < 2**63):
        return ids.map(values)
    looked_up = list(map(values.get, ids.tolist()))
    column: np.ndarray
    if kinds == {int} and None not in looked_up:
        column = np.array(looked_up, dtype=np.int64)
    else:
        nan = float("nan")
        column = np.array([nan if v is None else v for v in looked_up], dtype=np.float64)
    return pd.Series(column, index=ids.index, name=ids.name)


_NEEDS_QUOTING = re.compile(r'[,"\r\n]')


def _repr_is_numpys() -> bool:
    """Whether numpy writes a float64 array as text (``astype(str)``) as Python's ``repr``
    writes each float (the shortest digits that read back, scientific from 1e16 and below
    1e-4): checked once, on values of every kind, so that a numpy that writes them otherwise
    keeps its own text. Checked offline on six million values (random bit patterns, whole
    numbers, six-decimal ones, powers of ten and their neighbours): all equal."""
    samples = [0.0, -0.0, 1.0, 553.0, 1e-05, 1e-4, 0.1, 1 / 3, 2.5e15, 1e16, 1234567890123456.0]
    samples += [9999999999999998.0, 123456.789012, 2.0**53 + 2, 5e-324, 1.7976931348623157e308]
    samples += [-7.25e-300, float("inf"), float("-inf"), float("nan")]
    try:
        return bool(np.array(samples).astype(str).tolist() == [repr(v) for v in samples])
    except Exception:  # any surprise means: keep numpy's text
        return False


_float_text_is_repr: list[bool] = []  # _repr_is_numpys(), once it was needed


def _float_texts(values: Any) -> list[str]:
    """``values.astype(str).tolist()`` of a float64 array, three times faster through Python's
    ``repr`` where that gives the same text (:func:`_repr_is_numpys`)."""
    if not _float_text_is_repr:
        _float_text_is_repr.append(_repr_is_numpys())
    if _float_text_is_repr[0] and values.dtype == "float64":
        return list(map(repr, values.tolist()))
    return list(values.astype(str).tolist())


def table_csv_parts(table: pd.DataFrame, *, rows_per_part: int = 50_000) -> Iterable[str]:
    """``table.to_csv(index=False)``'s text, formatted ``rows_per_part`` rows at a time: the
    text of each cell of a whole table at once was the largest step of a replay's memory
    (60 MiB for HPC2N's ``predictions.csv``)."""
    return (
        _table_csv(table.iloc[start : start + rows_per_part], header=start == 0)
        for start in range(0, max(len(table), 1), rows_per_part)
    )


def _table_csv(table: pd.DataFrame, *, header: bool = True) -> str:
    """``table.to_csv(index=False, header=header)``'s text, four times faster for the tables of
    text, numeric and boolean columns (``predictions.csv``, ``classification.csv``): each
    column formatted as pandas formats it, ``astype(str)`` of its numpy values (the shortest
    repr of a float: ``553.0``, ``1e-05``; a missing float written as nothing; ``True`` and
    ``False``). A text cell that would need quoting, or another column type, goes through
    pandas itself."""
    columns = [table[name] for name in table.columns]
    cells: list[Any] = []
    for column in columns:
        values = column.to_numpy()
        if values.dtype.kind == "f":
            texts = _float_texts(values)
            missing = np.flatnonzero(np.isnan(values))
            for at in missing.tolist():  # pandas writes a missing value as nothing
                texts[at] = ""
            cells.append(texts)
        elif values.dtype.kind == "i":
            cells.append(list(map(str, values.tolist())))  # astype(str) of integers
        elif values.dtype.kind == "b":
            cells.append(list(map(str, values.tolist())))  # True, False
        elif values.dtype.kind == "O" and set(map(type, texts := values.tolist())) == {str}:
            # one search of the cells joined: it finds a character iff one of them holds it
            if _NEEDS_QUOTING.search("".join(texts)):
                return str(table.to_csv(index=False, header=header))
            cells.append(texts)
        else:
            return str(table.to_csv(index=False, header=header))
    lines = [",".join(str(name) for name in table.columns)] if header else []
    lines.extend(map(",".join, zip(*cells, strict=True)))
    lines.append("")
    return "\n".join(lines)


def write_timing(out: str | Path | Files, timing: Mapping[str, Any]) -> None:
    """``timing.json``: the run's wall-clock figures (replay, prediction and training seconds),
    the only file of a run folder that differs between two runs of the same inputs."""
    files_of(out).put(TIMING, json.dumps(dict(timing)) + "\n")


def training_seconds(scheduler: Any) -> dict[str, Any]:
    """The weekly forests' training time, in all and week by week (wall clock)."""
    return {
        "train_seconds": round(sum(w.train_seconds for w in scheduler.weeks), 3),
        "weekly_train_seconds": [[w.week, round(w.train_seconds, 3)] for w in scheduler.weeks],
    }


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
