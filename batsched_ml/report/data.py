"""The numbers behind the report's figures, computed from run folders (no drawing here, so that
tests check the values plotted).

A run folder is what ``replay`` (or ``collect``) writes: ``summary.json`` and ``jobs.csv``, and
for classified variants ``weekly_quality.csv`` and ``feature_importance.csv``. Runs are grouped
by trace, then policy and variant as their ``summary.json`` says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from batsched_ml.errors import UserError
from batsched_ml.metrics import logical_jobs, read_jobs_csv, with_job_metrics
from batsched_ml.runfolder import require_complete

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
            table = pd.read_csv(results)
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
    seen: dict[tuple[str, str], Run] = {}
    for run in sorted(found.values(), key=_order):
        require_complete(run.path)  # an interrupted or failed run is not reported as a result
        key = (run.trace, json.dumps(run.summary["config"], sort_keys=True))
        if key in seen:
            raise ReportError(
                f"{seen[key].path} and {run.path} hold the same run ({run.policy} "
                f"({run.variant}) on {run.trace}, same settings): give the report one of them"
            )
        seen[key] = run
    return list(seen.values())


def one_per_figure(runs: list[Run]) -> None:
    """The figures show one run per trace, policy and variant: two runs that differ in other
    settings (a seed, a predictor) are named rather than drawn on top of each other."""
    seen: dict[tuple[str, str, str], Run] = {}
    for run in runs:
        key = (run.trace, run.policy, run.variant)
        if key in seen:
            raise ReportError(
                f"{seen[key].path} and {run.path} are both {run.policy} ({run.variant}) on "
                f"{run.trace}: the report shows one run per trace, policy and variant; "
                "give it one of them"
            )
        seen[key] = run


def _order(run: Run) -> tuple:
    policy = POLICY_ORDER.index(run.policy) if run.policy in POLICY_ORDER else len(POLICY_ORDER)
    variant = (
        VARIANT_ORDER.index(run.variant) if run.variant in VARIANT_ORDER else len(VARIANT_ORDER)
    )
    return (run.trace, policy, variant, str(run.path))


def by_trace(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for run in runs:
        out.setdefault(run.trace, []).append(run)
    return out


def cumulative_bsld(run: Run) -> pd.DataFrame:
    """Figure 6: bounded slowdown (the metrics module's) summed over jobs in order of
    submission, against the day of submission (from the first)."""
    jobs = with_job_metrics(run.jobs()).sort_values(["submission_time", "job_id"], kind="stable")
    return pd.DataFrame(
        {
            "day": jobs["submission_time"].to_numpy(dtype=float) / DAY,
            "cumulative_bsld": np.cumsum(jobs["bsld"].to_numpy(dtype=float)),
        }
    )


def monthly_bsld(run: Run) -> pd.DataFrame:
    """Figure 7: mean bounded slowdown per calendar month of the trace."""
    monthly = run.summary.get("monthly") or {}
    return pd.DataFrame(
        [(month, values["mean_bsld"], values["jobs"]) for month, values in monthly.items()],
        columns=["month", "mean_bsld", "jobs"],
    )


def class_bsld(runs: list[Run]) -> pd.DataFrame:
    """Figure 8: mean bounded slowdown of the actually small and the actually large jobs, per
    policy and variant (runs that report them)."""
    rows = [
        (run.policy, run.variant, run.summary.get("bsld_small"), run.summary.get("bsld_large"))
        for run in runs
        if run.summary.get("bsld_small") is not None
    ]
    return pd.DataFrame(rows, columns=["policy", "variant", "bsld_small", "bsld_large"])


def total_bsld(runs: list[Run]) -> pd.DataFrame:
    """Figure 9: total (summed) bounded slowdown per policy and variant."""
    rows = [(run.policy, run.variant, run.summary["cumulative_bsld"]) for run in runs]
    return pd.DataFrame(rows, columns=["policy", "variant", "total_bsld"])


def weekly_quality(run: Run) -> pd.DataFrame | None:
    """Figure 4: accuracy, precision and recall of each week's model on that week's jobs."""
    table = run.table("weekly_quality.csv")
    if table is None:
        return None
    table = table[table["model"].astype(bool)]
    return table[["week", "accuracy", "precision", "recall"]].dropna(subset=["accuracy"])


def importances(run: Run) -> pd.DataFrame | None:
    """Figure 5: the Gini importance of each feature, one row per week (the feature ``week``,
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
    """Figure 1: requested and actual runtimes (seconds) of every job, and the divider (the
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


def comparison(runs: list[Run]) -> pd.DataFrame:
    """Per policy and variant: mean bounded slowdown, mean wait (hours) and utilisation, as
    the runs' summaries say."""
    rows = [
        (
            run.policy,
            run.variant,
            run.summary.get("mean_bsld"),
            (run.summary.get("mean_wait") or 0.0) / HOUR,
            run.summary.get("utilisation"),
        )
        for run in runs
    ]
    return pd.DataFrame(
        rows, columns=["policy", "variant", "mean_bsld", "mean_wait_hours", "utilisation"]
    )
