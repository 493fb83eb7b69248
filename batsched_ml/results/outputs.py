"""A run folder's files: their names, defined once, and the writers that make them from the run's
records in memory.

Every command that leaves results behind writes them here: ``replay`` (and campaigns and the
Python API, which run replays) through :func:`write_replay`, ``serve`` through
:func:`write_classification` / :func:`write_timing`, ``collect`` through :func:`run_summary` and
:func:`write_predictions`. So one summary has one layout whatever made it, and a figure is
computed in one place (:mod:`batsched_ml.results.metrics`).

Why from memory: the job table is formatted once (Batsim's ``%f`` text, :mod:`.sim.jobs_csv`),
written, and its rows read once (only the columns the figures need,
:func:`~batsched_ml.results.metrics.figure_columns`) into the table every figure is computed
from: the figures are those of the file a reader opens, and no table is read again for each
figure. Nothing here loads pandas: a replay's files and figures are numpy's and Python's
(pandas and pyarrow took 0.3 s and 110 MiB of every replay); a classifying scheduler's tables
are :mod:`batsched_ml.results.classified_files`' (pandas), loaded for such a run only.

The writers put each file through :class:`Files`: a run folder (:class:`Folder`, each file
written whole or not at all), or memory (:class:`Memory`, what the Python API returns, parsed
from the same text a folder would hold: a notebook and the command line never disagree, and no
temporary folder is written).

Wall-clock figures go to ``timing.json`` only: every other file of a run is byte-identical across
reruns of the same inputs.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from batsched_ml.registry import run_title
from batsched_ml.results.measured import MeasuredPredictor
from batsched_ml.results.metrics import (
    Table,
    column,
    figure_columns,
    prediction_quality,
    summarize,
    text_column,
)
from batsched_ml.results.textfile import write_text as write_text
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


class Folder:
    """A run folder: each file written whole or not at all (:func:`write_text`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def put(self, name: str, text: str | Iterable[str]) -> None:
        write_text(self.path / name, text)


class Memory:
    """The files as texts in memory, by name (:attr:`texts`): what a folder would hold."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def put(self, name: str, text: str | Iterable[str]) -> None:
        self.texts[name] = text if isinstance(text, str) else "".join(text)


def files_of(out: str | Path | Files) -> Files:
    """``out`` as :class:`Files`: a folder's path, or files already."""
    return Folder(out) if isinstance(out, (str, Path)) else out


def write_json(path: Path, data: Any, *, indent: int | None = 2) -> None:
    write_text(path, json_text(data, indent=indent))


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """The text of a run's JSON files."""
    return json.dumps(data, indent=indent) + "\n"


def run_summary(
    jobs: Table,
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


def summary_table(summary: dict[str, Any]) -> str:
    """The few figures a person reads first, one per line."""
    config = summary.get("config", {})
    rows = [
        ("trace", str(summary.get("trace"))),
        ("policy", run_title(config)),
        (
            "jobs",
            f"{summary['jobs']:,} ({summary['finished']:,} finished, "
            f"{summary['rejected']} rejected)",
        ),
        ("mean bounded slowdown", f"{summary['mean_bsld']:.2f}"),
        ("mean wait", f"{summary['mean_wait']:.0f} s"),
        ("max wait", f"{summary['max_wait']:.0f} s"),
        ("makespan", f"{summary['makespan']:.0f} s"),
        ("utilisation", f"{summary['utilisation']:.1%}"),
    ]
    if summary.get("batsim_version"):
        rows.append(("batsim", str(summary["batsim_version"])))
    if summary.get("prediction"):
        quality = summary["prediction"]
        rows.append(
            (
                "runtime prediction",
                f"APA {quality['APA']:.3f}, MAE {quality['MAE']:,.0f} s, UR {quality['UR']:.3f}",
            )
        )
    if "classification" in summary:
        quality = summary["classification"]
        rows += [
            (
                "classification",
                f"accuracy {quality.get('accuracy') or 0:.1%}, precision "
                f"{quality.get('precision') or 0:.1%}, recall {quality.get('recall') or 0:.1%}",
            ),
            ("killed and resubmitted", f"{summary['kills']:,}"),
        ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def write_replay(
    result: Replayed, out_dir: str | Path | Files, *, run_id: str | None = None
) -> dict[str, Any]:
    """Write a replay's files into ``out_dir``: ``jobs.csv``, ``summary.json``, ``timing.json``
    and, as the scheduler has them, the predictor's and the classifier's tables; return the
    summary (also kept in ``result.summary``). ``run_id`` (:mod:`batsched_ml.results.runfolder`)
    goes into ``summary.json`` and ``timing.json``."""
    out = files_of(out_dir)

    out.put(JOBS, table_parts(result.rows))
    jobs = figure_columns(result.rows)
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
    if hasattr(scheduler, "records"):  # a classifying scheduler: its tables are pandas'
        from batsched_ml.results.classified_files import write_classification

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
    jobs: Table,
    out: str | Path | Files,
    *,
    seconds: float | None = None,
    timing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``predictions.csv`` (each job's predicted runtime, made at its first submission, and its
    actual runtime in the job table ``jobs``: ours in a replay, Batsim's after a served run),
    the time spent predicting per job (into ``timing``, or a ``timing.json`` of its own for a
    served run's collect) and the quality figures for ``summary.json``."""
    executed = np.asarray(column(jobs, "final_state") != "REJECTED", dtype=bool)
    ids = _job_keys(column(jobs, "workload_name")[executed], column(jobs, "job_id")[executed])
    predicted = _mapped(ids, predictions)
    actual = column(jobs, "execution_time")[executed].astype(np.float64)
    known = ~np.isnan(actual)
    if predicted.dtype.kind == "f":
        known &= ~np.isnan(predicted)
    if not known.all():  # a job with no prediction or no runtime: left out
        ids = [key for key, keep in zip(ids, known.tolist(), strict=True) if keep]
        predicted, actual = predicted[known], actual[known]
    table = {"job_id": text_column(ids), "predicted": predicted, "actual": actual}
    files_of(out).put(PREDICTIONS, csv_parts(table))
    quality = prediction_quality(predicted, actual)
    quality["predictor"] = name
    # a measured duration varies from run to run: kept out of summary.json
    per_job = round(1e6 * seconds / len(ids), 3) if len(ids) and seconds is not None else None
    if timing is None:
        write_timing(out, {"predict_us_per_job": per_job})
    else:
        timing["predict_us_per_job"] = per_job
    return quality


def _job_keys(names: np.ndarray, numbers: np.ndarray) -> list[str]:
    """Each row's ``"<workload>!<job_id>"``, the key the predictors record their predictions
    under."""
    return [
        f"{name}!{number}" for name, number in zip(names.tolist(), numbers.tolist(), strict=True)
    ]


def _mapped(ids: list[str], values: Mapping[str, Any]) -> np.ndarray:
    """Each id's value in ``values`` (the predictions: seconds, Python or numpy numbers), typed
    as pandas' ``Series.map`` types them: int64 when every value of ``values`` is an integer
    within int64 and every id has one, else float64, a missing id giving NaN. An integer beyond
    int64 makes floats here (pandas would keep Python objects); a value that is not a number
    (a bool among them) is a :class:`TypeError`."""
    given = list(values.values())
    kinds = set(map(type, given))
    odd = [kind for kind in kinds if not _is_number(kind)]
    if odd:
        raise TypeError(f"a prediction of type {odd[0].__name__}, not a number of seconds")
    looked_up = list(map(values.get, ids))
    if kinds and all(issubclass(kind, (int, np.integer)) for kind in kinds):
        integers = cast(list[int], given)
        if None not in looked_up and min(integers) >= -(2**63) and max(integers) < 2**63:
            return np.array(looked_up, dtype=np.int64)
    nan = float("nan")
    return np.array([nan if v is None else float(v) for v in looked_up], dtype=np.float64)


def _is_number(kind: type) -> bool:
    """Whether values of ``kind`` are numbers of seconds (not bools)."""
    return issubclass(kind, (int, float, np.integer, np.floating)) and not issubclass(
        kind, (bool, np.bool_)
    )


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


def _quoted(cell: str) -> str:
    """``cell`` as the csv module writes it in a row (pandas' ``to_csv``: minimal quoting)."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow([cell, ""])
    return text.getvalue()[:-2]  # the row less its empty last field and its end


def csv_parts(table: Mapping[str, np.ndarray], *, rows_per_part: int = 50_000) -> Iterable[str]:
    """The text pandas' ``to_csv(index=False)`` writes of a table of columns (numpy arrays of
    floats, integers, booleans or Python strings), formatted ``rows_per_part`` rows at a time:
    the text of each cell of a whole table at once was the largest step of a replay's memory
    (60 MiB for HPC2N's ``predictions.csv``)."""
    rows = len(next(iter(table.values()))) if table else 0
    return (
        csv_text(
            {name: values[start : start + rows_per_part] for name, values in table.items()},
            header=start == 0,
        )
        for start in range(0, max(rows, 1), rows_per_part)
    )


def csv_text(table: Mapping[str, np.ndarray], *, header: bool = True) -> str:
    """``to_csv(index=False, header=header)``'s text of a table of columns, as pandas formats
    each column: ``astype(str)`` of its numpy values (the shortest repr of a float: ``553.0``,
    ``1e-05``; a missing float written as nothing; ``True`` and ``False``), text quoted only
    where it must be. :class:`TypeError` for a column of any other kind (objects that are not
    all strings, dates)."""
    cells: list[Any] = []
    for values in table.values():
        if values.dtype.kind == "f":
            texts = _float_texts(values)
            missing = np.flatnonzero(np.isnan(values))
            for at in missing.tolist():  # pandas writes a missing value as nothing
                texts[at] = ""
            cells.append(texts)
        elif values.dtype.kind in "ib":
            cells.append(list(map(str, values.tolist())))  # astype(str): 5, True, False
        elif values.dtype.kind == "O" and set(map(type, texts := values.tolist())) <= {str}:
            # one search of the cells joined: it finds a character iff one of them holds it
            if _NEEDS_QUOTING.search("".join(texts)):
                texts = [_quoted(t) if _NEEDS_QUOTING.search(t) else t for t in texts]
            cells.append(texts)
        else:
            raise TypeError(f"a column of {values.dtype} is not written here")
    lines = [",".join(_quoted(str(name)) for name in table)] if header else []
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
