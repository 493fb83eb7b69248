"""The one metrics module: every figure of a run is computed here from its job table.

The input is a Batsim ``_jobs.csv`` (ours or real Batsim's) by column: the columns of
:data:`FIGURE_COLUMNS` as numpy arrays (a replay's own table, :mod:`.figure_table`), or a pandas
table read by :func:`batsched_ml.results.frames.read_jobs_csv` (real Batsim's, a report's). The
figures are numpy's alone: a replay computes them without loading pandas (0.3 s and 110 MiB of
every command, with pyarrow), and a report from a pandas table gets the same numbers: the sums
and means are numpy's pairwise ones that pandas calls, the median its ``nanmedian``, and the
months' means their rows' in table order, as pandas' groups hold them (``tests/test_metrics.py``
compares both on random tables and on replays).

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

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import numpy as np

# the formula and its bound, written below the scheduler's guard that decides with them
from batsched_ml.gc_control import collector_paused
from batsched_ml.slowdown import TAU as TAU
from batsched_ml.slowdown import bounded_slowdown as bounded_slowdown
from batsched_ml.workload.swf import compiled_parser

HOUR = 3_600.0
MONTH = 30 * 86_400.0


class Table(Protocol):
    """A job table by column: ``table[name]`` gives the column as an array (a dict of numpy
    arrays, or a pandas table)."""

    def __getitem__(self, name: str, /) -> Any: ...


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
_TEXT_COLUMNS = frozenset({"job_id", "workload_name", "final_state"})
# each figure column's place in a row of Batsim's jobs.csv (sim/jobs_csv.py's JOBS_CSV_COLUMNS)
_PLACES = {
    "job_id": 0,
    "workload_name": 1,
    "submission_time": 3,
    "requested_number_of_resources": 4,
    "final_state": 7,
    "starting_time": 8,
    "execution_time": 9,
    "finish_time": 10,
}


def figure_columns(rows: list[str], *, part: int = 50_000) -> dict[str, np.ndarray]:
    """The :data:`FIGURE_COLUMNS` of a job table's text rows (Batsim's ``jobs.csv`` without its
    header line, as :mod:`batsched_ml.sim.jobs_csv` writes them): the text columns as arrays of
    Python strings, the numbers as float64 (an empty field, a rejected job's times: NaN), each
    the number a reader of the file gets (correctly rounded, as Python's ``float`` and pandas'
    parser read ``%f``'s digits). The figure fields come before the quoted metadata, and none
    of them holds a comma: each row is split on its commas.

    The compiled reader (``_cswf.csv_fields``) reads the usual table in one pass; a row it is
    not sure of leaves the whole table to the steps below, its reference, which read ``part``
    rows at a time (the split fields of a whole table were the largest step of a replay's
    memory)."""
    texts = tuple(name for name in FIGURE_COLUMNS if name in _TEXT_COLUMNS)
    numbers = tuple(name for name in FIGURE_COLUMNS if name not in _TEXT_COLUMNS)
    parser = compiled_parser()
    read = (
        None
        if parser is None
        else parser.csv_fields(
            rows, tuple(_PLACES[name] for name in texts), tuple(_PLACES[name] for name in numbers)
        )
    )
    out: dict[str, np.ndarray] = {}
    if read is not None:
        lists, values = read
        by_place = np.frombuffer(values, dtype=np.float64).reshape(len(numbers), len(rows))
        for name, cells in zip(texts, lists, strict=True):
            out[name] = text_column(cells)
        for name, numbers_of_name in zip(numbers, by_place, strict=True):
            out[name] = numbers_of_name
        return {name: out[name] for name in FIGURE_COLUMNS}
    text_cells: dict[str, list[str]] = {name: [] for name in texts}
    number_parts: dict[str, list[np.ndarray]] = {name: [] for name in numbers}
    # a list per row, alive until its part is read: the collector's passes they set off went
    # over all the run's objects (full HPC2N without compiled parts: 0.94 times the whole
    # command's time, median of 3 interleaved)
    with collector_paused():
        for start in range(0, len(rows), part):
            fields = [row.split(",", 11) for row in rows[start : start + part]]
            for name, cells in text_cells.items():
                cells.extend(map(itemgetter(_PLACES[name]), fields))
            for name, parts in number_parts.items():
                parts.append(_floats(list(map(itemgetter(_PLACES[name]), fields))))
    for name in FIGURE_COLUMNS:
        if name in text_cells:
            out[name] = text_column(text_cells[name])
        else:
            parts = number_parts[name]
            out[name] = np.concatenate(parts) if parts else np.empty(0)
    return out


def text_column(cells: list[str]) -> np.ndarray:
    """``cells`` as a numpy array of Python strings (objects)."""
    column = np.empty(len(cells), dtype=object)
    column[:] = cells
    return column


def _floats(cells: list[str]) -> np.ndarray:
    """The numbers of ``cells``, an empty one NaN."""
    try:
        return np.array(cells, dtype=np.float64)
    except ValueError:  # an empty field: a rejected job's times
        return np.array([float(cell) if cell else np.nan for cell in cells], dtype=np.float64)


def column(table: Table, name: str) -> np.ndarray:
    """Column ``name`` of ``table`` as a numpy array (text as Python strings)."""
    return np.asarray(table[name])


def _known(values: np.ndarray) -> np.ndarray:
    """The values that are not NaN, as float64."""
    values = np.asarray(values, dtype=np.float64)
    return values[~np.isnan(values)]


def _nan_min(values: np.ndarray) -> float:
    """The least value, NaN left out (pandas' ``min``); NaN when none is left."""
    kept = _known(values)
    return float(kept.min()) if len(kept) else float("nan")


def _nan_max(values: np.ndarray) -> float:
    """The greatest value, NaN left out (pandas' ``max``); NaN when none is left."""
    kept = _known(values)
    return float(kept.max()) if len(kept) else float("nan")


def _nan_sum(values: np.ndarray) -> float:
    """The sum, NaN counted as 0 in its place (pandas' ``sum``): numpy's pairwise sum, whose
    pairs depend on the places."""
    values = np.asarray(values, dtype=np.float64)
    missing = np.isnan(values)
    return float((np.where(missing, 0.0, values) if missing.any() else values).sum())


def _nan_mean(values: np.ndarray) -> float:
    """The mean of the values that are not NaN (pandas' ``mean``): :func:`_nan_sum` over their
    count; NaN when none is."""
    count = len(_known(values))
    return _nan_sum(values) / count if count else float("nan")


RESUBMIT_SUFFIX = "_resub"
_ATTEMPT = re.compile(r"_r\d+$")


@dataclass(frozen=True)
class Folding:
    """How a job table's attempts fold into workload jobs (see the module docstring), as rows
    of the table: one logical job per entry, in the order of a stable sort on (not killed,
    finish time, -1 for none): the jobs killed for good first, then by finish time, ties in the
    table's order."""

    final: np.ndarray  # the row of the final attempt
    attempts: np.ndarray  # how many attempts (int64)
    wasted_area: np.ndarray  # the killed attempts' processors x time run
    named_by: np.ndarray  # the row whose job_id and workload_name name the job
    submitted_by: np.ndarray  # the row whose submission time is the job's


def fold_attempts(table: Table) -> Folding | None:
    """The folding of ``table``'s attempts into workload jobs; None when every row is a job of
    its own (no resubmission, no kill). The attempts of a job are matched by their group's
    number (each "<workload>!<name>" numbered once, first seen first), never by aligning tables
    on the text keys: each such alignment hashed 200,000 keys again."""
    workload = [str(name) for name in column(table, "workload_name").tolist()]
    ends = {name: name.endswith(RESUBMIT_SUFFIX) for name in set(workload)}
    resub = np.fromiter(map(ends.__getitem__, workload), dtype=bool, count=len(workload))
    killed = column(table, "final_state") == "COMPLETED_KILLED"
    killed = np.asarray(killed, dtype=bool)
    if not resub.any() and not killed.any():
        return None
    job_id = column(table, "job_id").tolist()
    index: dict[str, int] = {}
    codes_list: list[int] = []
    for name, number, again in zip(workload, job_id, resub.tolist(), strict=True):
        if not isinstance(number, str):  # (pandas' groups left such rows out without a word)
            raise ValueError("a job table with a row that has no job_id")
        if again:
            name, number = name[: -len(RESUBMIT_SUFFIX)], _ATTEMPT.sub("", number)
        codes_list.append(index.setdefault(f"{name}!{number}", len(index)))
    codes = np.array(codes_list, dtype=np.int64)
    groups = len(index)
    res = column(table, "requested_number_of_resources")
    waste = np.where(killed, res * column(table, "execution_time"), 0.0)
    # the final attempt of each logical job: the one that did not end killed (else the last)
    finish = column(table, "finish_time").astype(np.float64)
    finish = np.where(np.isnan(finish), -1.0, finish)
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
    wasted = _group_sums(waste, codes, groups)
    return Folding(
        final=final_rows,
        attempts=np.bincount(codes, minlength=groups)[final_codes].astype(np.int64),
        wasted_area=wasted[final_codes],
        named_by=named_by,
        submitted_by=submitted_by,
    )


def _group_sums(values: np.ndarray, codes: np.ndarray, groups: int) -> np.ndarray:
    """Each group's sum of ``values``, added in row order (``numpy.add.at``), a missing value
    left out. (pandas' ``groupby().sum()``, which this replaced, adds a group's values in row
    order when the groups' rows follow each other, and with Kahan's compensation when they do
    not: the same sums but in the last bits of some.)"""
    sums = np.zeros(groups)
    known = ~np.isnan(values)
    np.add.at(sums, codes[known], values[known])
    return sums


def logical_columns(table: Table, names: Iterable[str] = FIGURE_COLUMNS) -> dict[str, np.ndarray]:
    """Columns ``names`` of the logical jobs of ``table`` (:func:`fold_attempts`), with
    ``attempts`` and ``wasted_area``: ``job_id`` and ``workload_name`` are the original job's,
    ``submission_time`` its first submission, the other columns the final attempt's."""
    fold = fold_attempts(table)
    out: dict[str, np.ndarray] = {}
    for name in names:
        values = column(table, name)
        if fold is not None:
            rows = fold.final
            if name in ("job_id", "workload_name"):
                rows = fold.named_by
            elif name == "submission_time":
                rows = fold.submitted_by
            values = values[rows]
        out[name] = values
    rows_count = len(out[next(iter(out))]) if out else 0
    if fold is None:
        out["attempts"] = np.ones(rows_count, dtype=np.int64)
        out["wasted_area"] = np.zeros(rows_count)
    else:
        out["attempts"] = fold.attempts
        out["wasted_area"] = fold.wasted_area
    return out


def killed_jobs(jobs: Table) -> int:
    """Logical jobs (:func:`logical_columns`) that had at least one attempt killed: resubmitted
    (more than one attempt; an attempt is resubmitted only when killed) or killed for good."""
    attempts = column(jobs, "attempts")
    return int(((attempts > 1) | (column(jobs, "final_state") == "COMPLETED_KILLED")).sum())


def job_waits(
    submission: np.ndarray, finish: np.ndarray, runtime: np.ndarray, tau: float = TAU
) -> tuple[np.ndarray, np.ndarray]:
    """Each executed logical job's wait (from its original submission to the start of its
    final attempt, so a killed job's lost time counts as waiting) and bounded slowdown."""
    wait = finish - submission - runtime
    return wait, bounded_slowdown(wait, runtime, tau)


def month_labels(
    submission: np.ndarray, unix_start_time: float | None, time_zone: str | None
) -> np.ndarray:
    """Label each submission time with its month ("1996-09", or "m00" without a calendar), as
    pandas' ``strftime("%Y-%m")`` of the times in the zone: each month's first instant found
    once (the zone's local midnight on the 1st), every time placed between them by a sorted
    search. An unknown zone name leaves the months in UTC rather than failing the report. A
    missing time has no month (None)."""
    submission = np.asarray(submission, dtype=np.float64)
    labels = np.empty(len(submission), dtype=object)
    known = ~np.isnan(submission)
    if unix_start_time is None:
        months = (submission[known] // MONTH).astype(int)
        numbers, which = np.unique(months, return_inverse=True)
        texts = text_column([f"m{m:02d}" for m in numbers.tolist()])
        labels[known] = texts[which.reshape(-1)]
        return labels
    zone = _zone(time_zone)
    stamps = unix_start_time + submission[known]
    if not len(stamps):
        return labels
    first = datetime.fromtimestamp(float(stamps.min()), zone)
    last = datetime.fromtimestamp(float(stamps.max()), zone)
    year, month = first.year, first.month
    starts: list[float] = []  # each month's first instant, from the first time's month on
    names: list[str] = []
    while (year, month) <= (last.year, last.month):
        starts.append(datetime(year, month, 1, tzinfo=zone).timestamp())
        names.append(f"{year}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    place = np.searchsorted(np.array(starts), stamps, side="right") - 1
    texts = text_column(names)
    labels[known] = texts[np.maximum(place, 0)]
    return labels


def _zone(name: str | None) -> ZoneInfo:
    if name:
        try:
            return ZoneInfo(name)
        except (KeyError, ValueError, TypeError, OSError):
            pass
    return ZoneInfo("UTC")


def round_figure(value: float) -> float | None:
    """Six decimals, and ``None`` (JSON null) for an undefined value such as 0/0."""
    value = float(value)
    return float(round(value, 6)) if np.isfinite(value) else None


def summarize(
    jobs: Table,
    *,
    nb_machines: int,
    unix_start_time: float | None = None,
    time_zone: str | None = None,
    tau: float = TAU,
) -> dict[str, Any]:
    """The summary of a run: counts, bounded slowdown, waiting time, makespan, utilisation, and
    the same per month and per actual class. Values are rounded to 6 decimals so the JSON is
    stable. ``jobs`` is a Batsim job table (its :data:`FIGURE_COLUMNS` at least): attempts are
    folded into logical jobs here."""
    state = column(jobs, "final_state")
    res = column(jobs, "requested_number_of_resources")
    execution = column(jobs, "execution_time").astype(np.float64)
    logical = logical_columns(jobs)
    logical_state = logical["final_state"]
    executed = logical_state != "REJECTED"
    submission = logical["submission_time"].astype(np.float64)
    runtime = logical["execution_time"].astype(np.float64)[executed]
    finish = logical["finish_time"].astype(np.float64)[executed]
    wait, bsld = job_waits(submission[executed], finish, runtime, tau)
    done = len(runtime)
    success = int((logical_state[executed] == "COMPLETED_SUCCESSFULLY").sum())
    count = len(logical_state)
    first = _nan_min(submission) if count else 0.0
    makespan = _nan_max(finish) - first if done else 0.0
    ran = state != "REJECTED"
    area = _nan_sum(res[ran] * execution[ran])
    killed_rows = state == "COMPLETED_KILLED"
    killed = int(killed_rows.sum())
    wasted = _nan_sum(res[killed_rows] * execution[killed_rows])
    capacity = nb_machines * makespan
    summary: dict[str, Any] = {
        "jobs": count,
        "finished": success,
        "killed_or_failed": done - success,
        "rejected": count - done,
        "kills": killed,
        "killed_jobs": killed_jobs(logical),
        "wasted_area": round_figure(wasted),
        "mean_bsld": round_figure(_nan_mean(bsld)) if done else 0.0,
        "cumulative_bsld": round_figure(_nan_sum(bsld)),
        "mean_wait": round_figure(_nan_mean(wait)) if done else 0.0,
        "max_wait": round_figure(_nan_max(wait)) if done else 0.0,
        "makespan": round_figure(makespan),
        "utilisation": round_figure(area / capacity) if makespan > 0 else 0.0,
        # the cost side: the killed attempts' processor time, in core-hours and as a share of
        # the machine's capacity over the makespan, and the utilisation without it
        "wasted_core_hours": round_figure(wasted / HOUR),
        "wasted_share": round_figure(wasted / capacity) if makespan > 0 else 0.0,
        "useful_utilisation": round_figure((area - wasted) / capacity) if makespan > 0 else 0.0,
    }
    if done:
        divider = float(np.nanmedian(runtime[~np.isnan(runtime)]))
        small = runtime < divider
        summary["divider"] = round_figure(divider)
        summary["bsld_small"] = round_figure(_nan_mean(bsld[small])) if small.any() else 0.0
        summary["bsld_large"] = round_figure(_nan_mean(bsld[~small])) if (~small).any() else 0.0
        months = month_labels(submission[executed], unix_start_time, time_zone)
        summary["monthly"] = {
            month: {
                "jobs": len(rows),
                "mean_bsld": round_figure(_nan_mean(bsld[rows])),
                "mean_wait": round_figure(_nan_mean(wait[rows])),
            }
            for month, rows in _groups(months)
        }
    return summary


def _groups(labels: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each label's rows, in row order, labels sorted (pandas' ``groupby(sort=True)``); rows
    without a label (None) in no group."""
    named = np.flatnonzero(labels != None)  # noqa: E711 - elementwise, on objects
    names = sorted(set(labels[named].tolist()))
    if not names:
        return []
    number = {name: i for i, name in enumerate(names)}
    codes = np.fromiter(map(number.__getitem__, labels[named].tolist()), np.int64, len(named))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(1, len(names)))
    return list(zip(names, np.split(named[order], bounds), strict=True))


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
        "APA": round_figure(ratio.mean()),
        "MAE": round_figure(np.abs(predicted - actual).mean()),
        "UR": round_figure(under.mean()),
    }


def max_machines_in_use(jobs: Table) -> int:
    """The largest number of machines used at once (a sweep over starts and finishes; at equal
    times, finishes first, as a machine freed at t can be used from t)."""
    done = column(jobs, "final_state") != "REJECTED"
    res = column(jobs, "requested_number_of_resources")[done]
    times = np.concatenate([column(jobs, "finish_time")[done], column(jobs, "starting_time")[done]])
    deltas = np.concatenate([-res, res])
    kinds = np.concatenate([np.zeros(len(res)), np.ones(len(res))])
    order = np.lexsort((kinds, times))
    return int(np.cumsum(deltas[order]).max()) if len(res) else 0
