"""The numbers behind the report's figures, computed from run folders (no drawing here, so that
tests check the values plotted).

A run folder is what ``replay`` (or ``collect``) writes: ``summary.json`` and ``jobs.csv``, and
for classified variants ``weekly_quality.csv`` and ``feature_importance.csv``. Runs are grouped
by trace, then by *setting*: everything the run's configuration says (policy, variant,
predictor, correction, dispatcher, their options, the forest...), but not which copy of the
trace it replayed (``summary.json``'s ``shaking``: its seed and seconds; none: the trace
itself, copy 0). The copies of one setting are aggregated into means with 95 % intervals
(:func:`batsched_ml.results.gap.estimate`) and paired by copy against a baseline; a setting is
named by its label (:func:`label_runs`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from batsched_ml.errors import UserError
from batsched_ml.registry import run_title
from batsched_ml.results.frames import logical_jobs, read_jobs_csv, with_job_metrics
from batsched_ml.results.gap import Estimate, estimate, share_of_ceiling
from batsched_ml.results.metrics import killed_jobs
from batsched_ml.results.runfolder import require_complete
from batsched_ml.results.table import read_results
from batsched_ml.scheduler.guard import GUARD_DEFAULTS

DAY = 86_400.0
#: The paper's variants, in the order its figures show them, then the guarded one.
VARIANT_ORDER = (
    "base",
    "classification",
    "classification-idempotent",
    "class-clairvoyant",
    "runtime-clairvoyant",
    "classification-guarded",
)
POLICY_ORDER = ("fcfs", "wfp", "spf", "saf")


@dataclass
class Run:
    path: Path
    summary: dict[str, Any]
    #: the setting's name (:func:`label_runs`), and the same without the policy
    label: str = ""
    method: str = ""
    #: the trace file's SHA-256 as run.json records it (None: no run.json)
    workload_sha256: str | None = None
    _jobs: pd.DataFrame | None = field(default=None, repr=False)
    _attempts: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def trace(self) -> str:
        return str(self.summary.get("trace"))

    @property
    def policy(self) -> str:
        return str(self.summary["config"]["policy"])

    @property
    def variant(self) -> str:
        return str(self.summary["config"]["variant"])

    @property
    def copy(self) -> tuple[int, int]:
        """The copy of the trace this run replayed: the shaking's seed and seconds, ``(0, 0)``
        for the trace itself (a campaign's copy 0). Copies pair runs of two settings."""
        shaking = self.summary.get("shaking") or {}
        return (int(shaking.get("seed", 0)), int(shaking.get("seconds", 0)) if shaking else 0)

    @property
    def copy_name(self) -> str:
        seed, seconds = self.copy
        return f"copy {seed} (shaken by {seconds} s)" if seed else "copy 0 (the trace itself)"

    def setting(self) -> dict[str, Any]:
        """What makes the run what it is, but the copy: the configuration, flattened
        (``forest.random_state``)."""
        return _flatten(self.summary["config"])

    def setting_key(self) -> str:
        return json.dumps(self.setting(), sort_keys=True)

    def attempts(self) -> pd.DataFrame:
        """The job table as written (a killed job and its resubmission are two rows), read
        once: what occupied the machines and the queue."""
        if self._attempts is None:
            self._attempts = read_jobs_csv(self.path / "jobs.csv")
        return self._attempts

    def jobs(self) -> pd.DataFrame:
        """Logical jobs (attempts folded), read once."""
        if self._jobs is None:
            self._jobs = logical_jobs(self.attempts())
        return self._jobs

    def table(self, name: str) -> pd.DataFrame | None:
        path = self.path / name
        return pd.read_csv(path) if path.exists() else None


class ReportError(UserError, ValueError):
    """Runs that cannot be reported together; the message names the folders."""


def find_runs(paths: list[str | Path]) -> list[Run]:
    """Every run under ``paths`` (a run folder, or a folder holding run folders at any depth),
    sorted by trace, policy and variant in the paper's order."""
    found: dict[Path, Run] = {}
    for root in map(Path, paths):
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such run folder")
        candidates = [root / "summary.json"] if (root / "summary.json").exists() else []
        results = root / "results.csv"
        if results.exists():  # a campaign's table names its runs (failed ones have no folder)
            table = read_results(results)
            table = table[table["status"] != "failed"]
            candidates += [root / p / "summary.json" for p in table["path"]]
        else:
            candidates += sorted(root.rglob("*/summary.json"))
        for summary_path in candidates:
            folder = summary_path.parent.resolve()
            if folder in found or not summary_path.exists() or not (folder / "jobs.csv").exists():
                continue
            summary = json.loads(summary_path.read_text())
            if "config" in summary:
                found[folder] = Run(folder, summary)
    if not found:
        raise FileNotFoundError(
            f"no run (summary.json and jobs.csv) under {', '.join(map(str, paths))}"
        )
    runs = sorted(found.values(), key=_order)
    files: dict[str, Run] = {}
    for run in runs:
        # an interrupted or failed run is not reported as a result
        record = require_complete(run.path) or {}
        run.workload_sha256 = (record.get("workload") or {}).get("sha256")
        # one trace name, one file: copies of two files are not one trace's copies
        first = files.setdefault(run.trace, run)
        if None not in (first.workload_sha256, run.workload_sha256) and (
            first.workload_sha256 != run.workload_sha256
        ):
            raise ReportError(
                f"{first.path} and {run.path} replay two different files under the one trace "
                f"name {run.trace} (run.json): give the report the runs of one of them"
            )
        if first.workload_sha256 is None:
            files[run.trace] = run
    label_runs(runs)
    seen: dict[tuple[str, str, tuple[int, int]], Run] = {}
    for run in runs:  # only truly identical runs are refused: they would count twice
        key = (run.trace, run.setting_key(), run.copy)
        if key in seen:
            raise ReportError(
                f"{seen[key].path} and {run.path} are the same run ({run.label} on "
                f"{run.trace}, {run.copy_name}, same settings): give the report one of them"
            )
        seen[key] = run
    return runs


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def label_runs(runs: list[Run]) -> None:
    """Give every run its label, the one name of its setting in the page, its tables and
    ``--baseline``: the run's title (:func:`batsched_ml.registry.run_title`, what ``replay``
    prints), then, when settings that the title does not show tell apart runs of the same
    title (a forest seed, a starvation threshold), those settings in braces:
    ``fcfs (classification-idempotent) {forest.random_state=3}``. The copies of a setting
    share its label."""
    by_title: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        by_title.setdefault(run_title(run.summary["config"]), {})[run.setting_key()] = run.setting()
    suffix: dict[str, str] = {}
    for settings in by_title.values():
        keys = sorted({k for setting in settings.values() for k in setting})
        differing = [k for k in keys if len({json.dumps(s.get(k)) for s in settings.values()}) > 1]
        for setting_key, setting in settings.items():
            suffix[setting_key] = (
                " {" + ", ".join(f"{k}={_text(setting.get(k))}" for k in differing) + "}"
                if differing
                else ""
            )
    for run in runs:
        title = run_title(run.summary["config"])
        run.label = title + suffix[run.setting_key()]
        # the label without its policy: the name of a method among one policy's runs
        run.method = title[len(run.policy) + 2 : -1] + suffix[run.setting_key()]


def _text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def short_label(label: str) -> str:
    """The label as one command-line word: its words joined by hyphens (``fcfs (base)`` ->
    ``fcfs-base``); ``--baseline`` takes either."""
    return re.sub(r"[\s(){};,\[\]]+", "-", label).strip("-")


def _order(run: Run) -> tuple:
    policy = POLICY_ORDER.index(run.policy) if run.policy in POLICY_ORDER else len(POLICY_ORDER)
    variant = (
        VARIANT_ORDER.index(run.variant) if run.variant in VARIANT_ORDER else len(VARIANT_ORDER)
    )
    return (run.trace, policy, variant, run_title(run.summary["config"]), run.copy, str(run.path))


def cumulative_bsld(run: Run) -> pd.DataFrame:
    """The cumulative figure: bounded slowdown (the metrics module's) summed over jobs in
    order of submission, against the day of submission (from the first)."""
    jobs = with_job_metrics(run.jobs()).sort_values(["submission_time", "job_id"], kind="stable")
    return pd.DataFrame(
        {
            "day": jobs["submission_time"].to_numpy(dtype=float) / DAY,
            "cumulative_bsld": np.cumsum(jobs["bsld"].to_numpy(dtype=float)),
        }
    )


def monthly_bsld(run: Run) -> pd.DataFrame:
    """The monthly figure: mean bounded slowdown per calendar month of the trace."""
    monthly = run.summary.get("monthly") or {}
    return pd.DataFrame(
        [(month, values["mean_bsld"], values["jobs"]) for month, values in monthly.items()],
        columns=["month", "mean_bsld", "jobs"],
    )


def weekly_quality(run: Run) -> pd.DataFrame | None:
    """The weekly quality figure: accuracy, precision and recall of each week's model on that
    week's jobs."""
    table = run.table("weekly_quality.csv")
    if table is None:
        return None
    table = table[table["model"].astype(bool)]
    return table[["week", "accuracy", "precision", "recall"]].dropna(subset=["accuracy"])


def guard_weeks(run: Run) -> tuple[pd.DataFrame, float] | None:
    """The guard's decision week by week (``classification-guarded``): on or off, why, and the
    mean bounded slowdown of the recently finished jobs it judged by (and the share of them at
    the threshold or above); with the threshold the run used (its ``guard_slowdown``)."""
    table = run.table("weekly_quality.csv")
    if table is None or "guard_on" not in table:
        return None
    params = (run.summary.get("config") or {}).get("classifier_params") or {}
    threshold = float(params.get("guard_slowdown", GUARD_DEFAULTS["guard_slowdown"]))
    columns = ["week", "guard_on", "guard_reason", "guard_jobs", "guard_slowdown"]
    if "guard_waiting_share" in table:  # (runs of the rule before the share lack it)
        columns.append("guard_waiting_share")
    return table[columns], threshold


def importances(run: Run) -> pd.DataFrame | None:
    """The importances figure: the Gini importance of each feature, one row per week (the
    feature ``week``,
    the week of the year, is renamed ``week_of_year``: the first column already is ``week``)."""
    path = run.path / "feature_importance.csv"
    if not path.exists():
        return None
    lines = path.read_text().splitlines()
    if len(lines) < 2:  # a header alone: no week had a model (a trace shorter than training)
        return None
    table = pd.read_csv(path, header=None, skiprows=1)
    header = path.read_text().split("\n", 1)[0].split(",")
    table.columns = ["week", *("week_of_year" if h == "week" else h for h in header[1:])]
    return table


def runtime_distribution(run: Run) -> dict[str, Any]:
    """The runtimes figure: requested and actual runtimes (seconds) of every job, and the
    divider (the
    median of actual runtimes, the paper's definition of small)."""
    jobs = with_job_metrics(run.jobs())
    actual = jobs["runtime"].to_numpy(dtype=float)
    requested = jobs["requested_time"].to_numpy(dtype=float)
    return {
        "requested": requested[requested > 0],
        "actual": actual[actual > 0],
        "divider": float(np.median(actual)) if len(actual) else None,
    }


# --- the system's view: machines busy, jobs waiting, waits, policies side by side -----------

HOUR = 3_600.0
#: Widths the timeline's bins may take, the shortest that gives at most MAX_BINS bins.
BIN_WIDTHS = ((HOUR, "hourly"), (6 * HOUR, "6-hour"), (DAY, "daily"), (7 * DAY, "weekly"))
MAX_BINS = 400


def step_function(times: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A counter changed by ``deltas`` at ``times`` (any order), as a step function: the
    distinct times, sorted, and the counter's value from each of them until the next (every
    change at a time applied, so a job starting when another ends costs nothing)."""
    times = np.asarray(times, dtype=float)
    deltas = np.asarray(deltas, dtype=float)
    if not len(times):
        return np.empty(0), np.empty(0)
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    distinct, first = np.unique(times, return_index=True)
    return distinct, np.cumsum(np.add.reduceat(deltas, first))


def busy_machines(attempts: pd.DataFrame) -> pd.DataFrame:
    """Machines in use over time (``time`` in seconds, ``busy`` from then on): each attempt of
    a job holds its processors from its start to its finish, killed attempts included."""
    ran = attempts[(attempts["final_state"] != "REJECTED") & attempts["starting_time"].notna()]
    size = ran["requested_number_of_resources"].to_numpy(dtype=float)
    times, busy = step_function(
        np.concatenate([ran["starting_time"].to_numpy(dtype=float), ran["finish_time"]]),
        np.concatenate([size, -size]),
    )
    return pd.DataFrame({"time": times, "busy": busy})


def queue_length(attempts: pd.DataFrame) -> pd.DataFrame:
    """Jobs submitted but not started over time (``time`` in seconds, ``queued`` from then
    on). A job killed at the divider is waiting again from its resubmission; rejected jobs
    never wait."""
    kept = attempts[attempts["final_state"] != "REJECTED"]
    started = kept["starting_time"].dropna().to_numpy(dtype=float)
    times, queued = step_function(
        np.concatenate([kept["submission_time"].to_numpy(dtype=float), started]),
        np.concatenate([np.ones(len(kept)), -np.ones(len(started))]),
    )
    return pd.DataFrame({"time": times, "queued": queued})


def step_means(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The time-weighted mean of a step function (``values[i]`` from ``times[i]`` to
    ``times[i + 1]``, 0 before the first time, the last value after the last) over each bin
    ``edges[k]`` to ``edges[k + 1]``: the difference of its integral at the edges."""
    times = np.asarray(times, dtype=float)
    values = np.asarray(values, dtype=float)
    edges = np.asarray(edges, dtype=float)
    if not len(times):
        return np.zeros(len(edges) - 1)
    integral_at_times = np.concatenate([[0.0], np.cumsum(values[:-1] * np.diff(times))])
    index = np.searchsorted(times, edges, side="right") - 1
    inside = index >= 0
    clipped = np.maximum(index, 0)
    integral = np.where(
        inside, integral_at_times[clipped] + values[clipped] * (edges - times[clipped]), 0.0
    )
    return np.diff(integral) / np.diff(edges)


def bin_width(span: float) -> tuple[float, str]:
    """The timeline's bin width (seconds) and its name for a run of ``span`` seconds."""
    for width, name in BIN_WIDTHS:
        if span / width <= MAX_BINS:
            return width, name
    return BIN_WIDTHS[-1]


def machines(run: Run) -> int:
    """The number of machines of the run's platform. A run folder does not write it down (a
    summary that does, as ``nb_machines``, is believed): it is the count that turns the
    processor time of the job table into the summary's utilisation (processor time over
    machines x makespan), never fewer than the most machines in use at once."""
    recorded = run.summary.get("nb_machines")
    if isinstance(recorded, int) and recorded > 0:
        return recorded
    attempts = run.attempts()
    busy = busy_machines(attempts)["busy"]
    peak = int(busy.max()) if len(busy) else 0
    ran = attempts[attempts["final_state"] != "REJECTED"]
    area = float((ran["requested_number_of_resources"] * ran["execution_time"]).sum())
    utilisation = run.summary.get("utilisation") or 0.0
    makespan = run.summary.get("makespan") or 0.0
    if utilisation > 0 and makespan > 0:
        return max(round(area / (utilisation * makespan)), peak, 1)
    return max(peak, 1)


def timeline(run: Run, nb_machines: int | None = None) -> tuple[pd.DataFrame, str]:
    """The utilisation (share of machines busy) and the queue length (jobs waiting), averaged
    over time in bins from the first submission to the last finish (``start`` and ``end`` in
    days from the trace's time 0; the last bin ends with the run), and the bins' name
    (``daily``...)."""
    attempts = run.attempts()
    nb_machines = nb_machines or machines(run)
    busy = busy_machines(attempts)
    queued = queue_length(attempts)
    if busy.empty:
        return pd.DataFrame(columns=["start", "end", "utilisation", "queued"]), "daily"
    first = float(attempts["submission_time"].min())
    last = float(busy["time"].iloc[-1])
    width, name = bin_width(last - first)
    edges = np.append(np.arange(first, last, width), last)
    return (
        pd.DataFrame(
            {
                "start": edges[:-1] / DAY,
                "end": edges[1:] / DAY,
                "utilisation": step_means(busy["time"].to_numpy(), busy["busy"].to_numpy(), edges)
                / nb_machines,
                "queued": step_means(queued["time"].to_numpy(), queued["queued"].to_numpy(), edges),
            }
        ),
        name,
    )


def wait_cdf(waits: np.ndarray) -> pd.DataFrame:
    """The empirical distribution of waiting times: each distinct wait (``wait_hours``) and
    the share of jobs that waited at most that long."""
    values, counts = np.unique(np.asarray(waits, dtype=float), return_counts=True)
    return pd.DataFrame(
        {"wait_hours": values / HOUR, "share": np.cumsum(counts) / max(counts.sum(), 1)}
    )


def waits(run: Run) -> np.ndarray:
    """Every executed job's wait in seconds, from its first submission to the start of its
    last attempt (the summary's ``mean_wait`` is their mean)."""
    return with_job_metrics(run.jobs())["wait"].to_numpy(dtype=float)


# --- settings: the copies of one run's settings together, their means and the costs ---------


@dataclass
class Setting:
    """The runs of one label on one trace, one per shaken copy, by copy."""

    trace: str
    label: str
    method: str
    runs: list[Run]

    @property
    def first(self) -> Run:
        """The run drawn where a figure shows one run (a time series): the lowest copy, the
        trace itself when it is there."""
        return self.runs[0]

    @property
    def policy(self) -> str:
        return self.first.policy

    @property
    def variant(self) -> str:
        return self.first.variant

    @property
    def copies(self) -> list[tuple[int, int]]:
        return [run.copy for run in self.runs]

    def by_copy(self) -> dict[tuple[int, int], Run]:
        return {run.copy: run for run in self.runs}


def settings(runs: list[Run]) -> list[Setting]:
    """The runs grouped by trace and label, in the runs' order (:func:`find_runs`)."""
    if any(not run.label for run in runs):
        label_runs(runs)
    grouped: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        grouped.setdefault((run.trace, run.label), []).append(run)
    return [
        Setting(trace, label, group[0].method, sorted(group, key=lambda r: r.copy))
        for (trace, label), group in grouped.items()
    ]


def _hours(value: object) -> float | None:
    return value / HOUR if isinstance(value, int | float) else None


def share_killed(run: Run) -> float:
    """The share of the run's jobs that had an attempt killed
    (:func:`batsched_ml.results.metrics.killed_jobs`: the summary's ``killed_jobs``, or, in a
    summary written before it existed, counted from the job table)."""
    killed, jobs = run.summary.get("killed_jobs"), run.summary.get("jobs")
    if isinstance(killed, int) and isinstance(jobs, int):
        return killed / jobs if jobs else 0.0
    table = run.jobs()
    return killed_jobs(table) / len(table) if len(table) else 0.0


#: The metrics of the page's tables: key, header, and how to get it from a run (None: the run
#: does not have it; a setting's mean then has none either, never a mean of fewer copies).
METRICS: tuple[tuple[str, str, Any], ...] = (
    ("mean_bsld", "mean bounded slowdown", lambda r: r.summary.get("mean_bsld")),
    ("cumulative_bsld", "total bounded slowdown", lambda r: r.summary.get("cumulative_bsld")),
    ("mean_wait_hours", "mean wait (h)", lambda r: _hours(r.summary.get("mean_wait"))),
    ("max_wait_hours", "max wait (h)", lambda r: _hours(r.summary.get("max_wait"))),
    ("bsld_small", "bounded slowdown, small jobs", lambda r: r.summary.get("bsld_small")),
    ("bsld_large", "bounded slowdown, large jobs", lambda r: r.summary.get("bsld_large")),
    (
        "accuracy",
        "accuracy",
        lambda r: (r.summary.get("classification") or {}).get("accuracy"),
    ),
    ("utilisation", "utilisation", lambda r: r.summary.get("utilisation")),
    ("useful_utilisation", "useful utilisation", lambda r: r.summary.get("useful_utilisation")),
    ("kills", "kills", lambda r: r.summary.get("kills")),
    ("share_killed", "jobs killed (share)", share_killed),
    ("wasted_core_hours", "wasted core-hours", lambda r: r.summary.get("wasted_core_hours")),
    ("wasted_share", "wasted (share of machine)", lambda r: r.summary.get("wasted_share")),
)


def metric(run: Run, key: str) -> float | None:
    getter = next(get for name, _header, get in METRICS if name == key)
    value = getter(run)
    return float(value) if isinstance(value, int | float) else None


def _estimate(values: list[float | None]) -> Estimate | None:
    if not values or any(v is None for v in values):
        return None
    return estimate([float(v) for v in values if v is not None])


def means(setting: Setting) -> dict[str, Estimate | None]:
    """Each metric's mean over the setting's copies with its 95 % Student-t interval."""
    return {key: _estimate([metric(run, key) for run in setting.runs]) for key, _h, _g in METRICS}


def find_baseline(all_settings: list[Setting], name: str) -> str:
    """The label ``name`` names, as given or in its short form (:func:`short_label`), or a
    :class:`ReportError` listing the labels."""
    labels = list(dict.fromkeys(s.label for s in all_settings))
    for label in labels:
        if name in (label, short_label(label)):
            return label
    known = "; ".join(f"{short_label(label)}" for label in labels)
    raise ReportError(f"--baseline {name}: no run has that label (the runs' labels: {known})")


#: What the differences against the baseline are given for: a gain (lower bounded slowdown and
#: waits) beside its cost (utilisation left for useful work, kills, wasted processor time).
DIFFERENCES = (
    "mean_bsld",
    "mean_wait_hours",
    "useful_utilisation",
    "kills",
    "share_killed",
    "wasted_core_hours",
)


@dataclass
class Difference:
    """A setting against the baseline on one trace, paired copy by copy."""

    setting: Setting
    copies: list[tuple[int, int]]
    #: setting - baseline per copy, the mean and its interval, per metric of DIFFERENCES
    values: dict[str, Estimate | None]
    #: the relative change of the mean bounded slowdown, (setting - baseline) / baseline
    relative_bsld: Estimate | None


def differences(all_settings: list[Setting], baseline: str) -> dict[str, list[Difference]]:
    """Per trace that has the baseline: every other setting's differences from it, paired by
    copy (the copies both have; a setting that shares none has no row). Traces without the
    baseline are absent."""
    out: dict[str, list[Difference]] = {}
    for trace in dict.fromkeys(s.trace for s in all_settings):
        on_trace = [s for s in all_settings if s.trace == trace]
        base = next((s for s in on_trace if s.label == baseline), None)
        if base is None:
            continue
        rows = []
        base_runs = base.by_copy()
        for setting in on_trace:
            if setting is base:
                continue
            runs = setting.by_copy()
            copies = sorted(set(runs) & set(base_runs))
            if not copies:
                continue
            values = {}
            for key in DIFFERENCES:
                pairs = [(metric(runs[c], key), metric(base_runs[c], key)) for c in copies]
                values[key] = _estimate(
                    [None if a is None or b is None else a - b for a, b in pairs]
                )
            relative = [
                (metric(runs[c], "mean_bsld"), metric(base_runs[c], "mean_bsld")) for c in copies
            ]
            rows.append(
                Difference(
                    setting,
                    copies,
                    values,
                    _estimate([None if not b or a is None else (a - b) / b for a, b in relative]),
                )
            )
        out[trace] = rows
    return out


# --- the trade-off: share of the ceiling's gain against share of jobs killed ----------------

BASE_VARIANT, CEILING_VARIANT = "base", "class-clairvoyant"
CLASSIFIED_VARIANTS = ("classification", "classification-idempotent")
#: what a variant and its classifier set, left out when a run's base and ceiling are looked for
_CLASSIFIER_KEYS = ("variant", "classifier_params", "feature_mode", "forest")


def _yardstick_key(setting: Setting) -> str:
    flat = setting.first.setting()
    return json.dumps(
        {k: v for k, v in flat.items() if not k.startswith(_CLASSIFIER_KEYS)}, sort_keys=True
    )


def trade_off(trace_settings: list[Setting]) -> tuple[pd.DataFrame, list[str]]:
    """One row per setting of the trace that has a base and a ceiling (the base and
    class-clairvoyant runs of the same policy and of the same other settings: predictor,
    dispatcher, options...): its share of the ceiling's gain in total bounded slowdown
    (:func:`batsched_ml.results.gap.share_of_ceiling`, 0 for the base, 1 for the ceiling) and
    its share of jobs killed, each the mean over the copies that have all three (a copy whose
    ceiling gains nothing is left out) with its 95 % interval. Also the labels of the
    classified settings that lack a base or a ceiling: the page names them."""
    yardsticks: dict[tuple[str, str], Setting] = {}
    for setting in trace_settings:
        if setting.variant in (BASE_VARIANT, CEILING_VARIANT):
            yardsticks.setdefault((setting.variant, _yardstick_key(setting)), setting)
    rows = []
    missing = []
    for setting in trace_settings:
        key = _yardstick_key(setting)
        base = yardsticks.get((BASE_VARIANT, key))
        ceiling = yardsticks.get((CEILING_VARIANT, key))
        if base is None or ceiling is None:
            if setting.variant in CLASSIFIED_VARIANTS:
                missing.append(setting.label)
            continue
        runs, base_runs, ceiling_runs = setting.by_copy(), base.by_copy(), ceiling.by_copy()
        shares, killed, used = [], [], []
        for copy in sorted(set(runs) & set(base_runs) & set(ceiling_runs)):
            cumulative = [
                float(r.summary["cumulative_bsld"])
                for r in (base_runs[copy], runs[copy], ceiling_runs[copy])
            ]
            share = share_of_ceiling(*cumulative)
            if setting is base:
                share = 0.0  # by definition, even where the ceiling gains nothing
            elif setting is ceiling:
                share = 1.0 if share is not None else None
            if share is None:
                continue
            shares.append(share)
            killed.append(share_killed(runs[copy]))
            used.append(copy)
        if not used:
            continue
        share_estimate, killed_estimate = estimate(shares), estimate(killed)
        rows.append(
            {
                "policy": setting.policy,
                "label": setting.label,
                "variant": setting.variant,
                "copies": len(used),
                "share_of_ceiling": share_estimate.mean,
                "share_of_ceiling_low": share_estimate.low,
                "share_of_ceiling_high": share_estimate.high,
                "share_killed": killed_estimate.mean,
                "share_killed_low": killed_estimate.low,
                "share_killed_high": killed_estimate.high,
            }
        )
    return pd.DataFrame(rows, columns=TRADE_OFF_COLUMNS), missing


TRADE_OFF_COLUMNS = [
    "policy",
    "label",
    "variant",
    "copies",
    "share_of_ceiling",
    "share_of_ceiling_low",
    "share_of_ceiling_high",
    "share_killed",
    "share_killed_low",
    "share_killed_high",
]


# --- the Gantt chart of a window ------------------------------------------------------------

#: The default window's length and how long before the first kill it starts.
GANTT_HOURS, GANTT_LEAD_HOURS = 12.0, 2.0


def gantt_window(trace_settings: list[Setting]) -> tuple[float, float]:
    """The default window (seconds of the trace): 12 hours from 2 hours before the first
    killed attempt's start in the runs drawn, where the kills show; without a kill, the 12
    hours from the first submission."""
    starts = []
    for setting in trace_settings:
        attempts = setting.first.attempts()
        killed = attempts[attempts["final_state"] == "COMPLETED_KILLED"]["starting_time"]
        if len(killed.dropna()):
            starts.append(float(killed.min()))
    if starts:
        begin = max(min(starts) - GANTT_LEAD_HOURS * HOUR, 0.0)
    else:
        begin = float(
            min(float(s.first.attempts()["submission_time"].min()) for s in trace_settings)
        )
    return begin, begin + GANTT_HOURS * HOUR


def gantt(run: Run, window: tuple[float, float]) -> pd.DataFrame:
    """Every attempt that ran during ``window`` (seconds), one row per contiguous interval of
    machines it held: ``job_id``, ``start``, ``finish``, ``first_machine``, ``machines``,
    ``killed``."""
    from procset import ProcSet

    attempts = run.attempts()
    begin, end = window
    ran = attempts[
        attempts["starting_time"].notna()
        & (attempts["starting_time"] < end)
        & (attempts["finish_time"] > begin)
    ]
    rows = []
    for job_id, start, finish, resources, state in zip(
        ran["job_id"].astype(str),
        ran["starting_time"].to_numpy(dtype=float),
        ran["finish_time"].to_numpy(dtype=float),
        ran["allocated_resources"].astype(str),
        ran["final_state"],
        strict=True,
    ):
        for interval in ProcSet.from_str(resources).intervals():
            rows.append(
                (
                    job_id,
                    float(start),
                    float(finish),
                    int(interval.inf),
                    int(interval.sup - interval.inf + 1),
                    state == "COMPLETED_KILLED",
                )
            )
    return pd.DataFrame(rows, columns=list(GANTT_COLUMNS))


GANTT_COLUMNS = ("job_id", "start", "finish", "first_machine", "machines", "killed")
