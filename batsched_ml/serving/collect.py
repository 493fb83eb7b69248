"""Collecting a served run: Batsim's job table and the scheduler's status, into the same outputs
a replay writes (``jobs.csv``, ``summary.json``) plus a short ``report.md``.

This is the last step of the docker compose experiment (``batsched-ml collect``), and works the
same for a real Batsim as for the stand-in. It waits for the scheduler's ``serve.json`` (written
when the simulation ends, or when the run stops early) and for Batsim's ``_jobs.csv``, then
refuses to report a run that is not whole: a partial scheduler status, a missing job table, or a
table in which some workload job does not appear exactly once as finished ends with
:class:`CollectError` and the reason.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batsched_ml.errors import UserError
from batsched_ml.registry import run_title
from batsched_ml.results.frames import logical_jobs, read_jobs_csv
from batsched_ml.results.outputs import (
    JOBS,
    PREDICTED,
    REPORT,
    SCHEDULER_TABLES,
    SUMMARY,
    run_summary,
    summary_table,
    write_json,
    write_predictions,
)
from batsched_ml.results.runfolder import (
    COMPLETE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    RunIdentity,
    claim,
    file_sha256,
    read_run,
)
from batsched_ml.runs.replaying import config_of_record
from batsched_ml.serving.status import failed_service
from batsched_ml.workload.io import dropped_jobs, load_workload, report_dropped

if TYPE_CHECKING:
    import pandas as pd


class CollectError(UserError, RuntimeError):
    """The run cannot be reported; the message says why."""


def wait_for(
    path: Path,
    timeout: float,
    what: str,
    sleep: Callable[[float], None],
    status_dir: Path | None = None,
    failed: Callable[[], str | None] | None = None,
) -> None:
    """Wait for ``path``; give up after ``timeout`` seconds, or at once when another service
    has failed, or ``failed()`` says why it will never come."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        failure = failed_service(status_dir) or (failed() if failed is not None else None)
        if failure is not None:
            raise CollectError(failure)
        if time.monotonic() >= deadline:
            raise CollectError(f"{what} ({path}) did not appear within {timeout:g} s")
        sleep(1.0)


#: How long after the scheduler's run ended Batsim's job table may take to appear whole, in
#: seconds. Batsim writes its last rows when the simulation ends, a moment after the scheduler's
#: last answer; a table that does not come by then never will (a Batsim left running by an
#: earlier compose ``up`` writes into the files that ``up``'s reset removed).
BATSIM_GRACE = 20.0


def _whole_table(
    path: Path,
    expected: set[str],
    grace: float,
    sleep: Callable[[float], None],
    status_dir: Path | None,
) -> pd.DataFrame:
    """Batsim's job table at ``path`` once every workload job in ``expected`` is in it exactly
    once as finished, read again for up to ``grace`` seconds while it is missing or being
    written; then one :class:`CollectError` naming the file and what is missing."""
    deadline = time.monotonic() + grace
    while True:
        problem: str
        if not path.exists():
            problem = "missing"
        else:
            try:
                table = read_jobs_csv(path)
            except (OSError, ValueError) as exc:  # being written: a truncated last row
                problem = f"unreadable ({exc})"
            else:
                seen = logical_jobs(table)["job_id"].astype(str)
                if len(seen) == len(expected) and set(seen) == expected:
                    return table
                missing = len(expected - set(seen))
                problem = f"{len(seen)} jobs for a workload of {len(expected)} ({missing} missing)"
        failure = failed_service(status_dir)
        if failure is not None:
            raise CollectError(failure)
        if time.monotonic() >= deadline:
            break
        sleep(1.0)
    if problem != "missing":
        raise CollectError(f"{path}: {problem} (another workload's run? {STALE_BATSIM})")
    after = f" within {grace:g} s of the scheduler's run ending" if grace else ""
    raise CollectError(
        f"Batsim's job table {path} did not appear{after}, although the scheduler's run is "
        f"complete: Batsim wrote it elsewhere or not at all ({STALE_BATSIM})"
    )


STALE_BATSIM = (
    "under docker compose, a Batsim container left running by an earlier `up` is reused by a "
    "plain `up`: it simulates that `up`'s workload and writes into files removed since; "
    "`up --force-recreate --always-recreate-deps`, as documented, starts a fresh one"
)


def _failed_start(scheduler_dir: Path) -> Callable[[], str | None]:
    """Why the scheduler's run will never write serve.json: its run.json says it failed (a
    start that failed leaves run.json alone)."""

    def failed() -> str | None:
        run = read_run(scheduler_dir)
        if run is None or run.get("status") not in (FAILED, INTERRUPTED):
            return None
        return f"the scheduler's run is {run['status']}: {run.get('reason')} ({scheduler_dir})"

    return failed


def collect(
    batsim_jobs: str | Path,
    workload_path: str | Path,
    scheduler_dir: str | Path,
    out_dir: str | Path,
    *,
    wait: float = 0.0,
    status_dir: str | Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
    settings: Mapping[str, Any] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Check the run and write ``OUT/jobs.csv``, ``OUT/summary.json``, ``OUT/report.md`` and
    copies of the scheduler's tables; return the summary.

    The run's settings and its calendar are those ``serve`` recorded (its run.json and
    serve.json): nothing has to be given twice. ``settings`` (the experiment's, as given to
    ``collect``: :class:`~batsched_ml.runs.replaying.ReplayConfig` fields, ``forest`` a dict of
    forest fields) are checked against them: a scheduler folder holding another run than the
    one these settings make is refused, whatever its state, and so is one whose calendar came
    from another workload than ``workload_path``: an experiment only ever reports its own run.
    """
    batsim_jobs = Path(batsim_jobs)
    scheduler_dir = Path(scheduler_dir)
    status_path = scheduler_dir / "serve.json"
    statuses = None if status_dir is None else Path(status_dir)
    wait_for(
        status_path, wait, "the scheduler's status", sleep, statuses, _failed_start(scheduler_dir)
    )
    run = _scheduler_run(scheduler_dir, wait, sleep, required=settings is not None)
    if run is not None:
        _check_settings(scheduler_dir, run, settings)
        _check_calendar(scheduler_dir, run, Path(workload_path))
    status = json.loads(status_path.read_text())
    if status.get("status") != "complete":
        raise CollectError(f"the scheduler stopped early: {status.get('reason')}")
    if run is not None and status.get("run_id") != run["run_id"]:
        raise CollectError(
            f"{status_path} belongs to run {status.get('run_id')}, its folder's run.json to "
            f"run {run['run_id']}"
        )
    workload = load_workload(workload_path)
    dropped = dropped_jobs(workload)
    expected = {str(job["id"]) for job in workload["jobs"]}
    table = _whole_table(batsim_jobs, expected, min(wait, BATSIM_GRACE), sleep, statuses)
    batsim_version = _batsim_version(batsim_jobs)
    summary = {
        **run_summary(
            table,
            workload,
            status.get("config", {}),
            status.get("rejected", []),
            workload_jobs=len(expected),
        ),
        "scheduler": {
            k: status[k]
            for k in ("status", "messages", "decisions", "batsim_protocol", "calendar_from")
            if k in status
        },
        "batsim_version": batsim_version,
    }
    if dropped:
        summary["input_cleaning"] = dropped
    for key in ("classification", "trainer_events"):
        if key in status:
            summary[key] = status[key]
    if run is not None:  # the served run's identity: the collected run has its run id
        identity = RunIdentity(run["command"], run["config"], run["workload"])
    else:  # a folder from before run identities: nothing to check against
        identity = RunIdentity("serve", status.get("config", {}), {})
    claimed = claim(out_dir, identity, force=force)
    claimed.notes["input_cleaning"] = report_dropped(workload, workload_path)
    summary = {"run_id": claimed.run_id, **summary}
    with claimed.running():
        _write(summary, status, batsim_jobs, table, scheduler_dir, Path(out_dir))
    return summary


def _asked(recorded: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration ``settings`` ask for, the other settings being the recorded ones."""
    import dataclasses

    base = config_of_record(recorded)
    fields = {key: value for key, value in settings.items() if key != "forest"}
    if settings.get("forest"):
        fields["forest"] = dataclasses.replace(base.forest, **settings["forest"])
    return dataclasses.replace(base, **fields).as_dict()


def _check_settings(
    scheduler_dir: Path, run: Mapping[str, Any], settings: Mapping[str, Any] | None
) -> None:
    if not settings:
        return
    recorded = run.get("config") or {}
    try:
        asked = _asked(recorded, settings)
    except (KeyError, TypeError) as exc:
        raise CollectError(
            f"{scheduler_dir}/run.json: an unreadable configuration ({exc})"
        ) from None
    if asked == recorded:
        return
    differ = [k for k in sorted(set(asked) | set(recorded)) if asked.get(k) != recorded.get(k)]
    workload = run.get("workload") or {}
    identity = RunIdentity("serve", asked, workload)
    raise CollectError(
        f"{scheduler_dir} holds run {run.get('run_id')} ({recorded.get('policy')} "
        f"{recorded.get('variant')} on {_workload_name(workload)}), not this experiment's run "
        f"{identity.run_id} ({identity.describe()}): its settings differ ("
        + "; ".join(
            f"{key}: {_text(recorded.get(key))} served, {_text(asked.get(key))} asked"
            for key in differ
        )
        + ")"
    )


def _text(value: Any) -> str:
    return "none" if value is None else json.dumps(value) if isinstance(value, dict) else str(value)


def _workload_name(workload: Mapping[str, Any]) -> str:
    return str(workload.get("name") or "the workload Batsim named")


def _check_calendar(scheduler_dir: Path, run: Mapping[str, Any], workload_path: Path) -> None:
    """A scheduler given ``--calendar FILE`` dated the jobs from FILE: it must be the workload
    this experiment collects (one served without takes its calendar from Batsim's)."""
    recorded = (run.get("workload") or {}).get("sha256")
    if not recorded:
        return
    try:
        actual = file_sha256(workload_path)
    except OSError:
        return  # load_workload says it, naming the file
    if actual != recorded:
        raise CollectError(
            f"{scheduler_dir} holds run {run.get('run_id')}, whose calendar came from "
            f"{_workload_name(run['workload'])} (sha256 {recorded[:12]}...), not from "
            f"{workload_path} (sha256 {actual[:12]}...), the workload collected: not this "
            "experiment's run"
        )


def _batsim_version(batsim_jobs: Path) -> str | None:
    """The version Batsim wrote into its ``PREFIX_schedule.csv`` (beside ``PREFIX_jobs.csv``),
    as written (``4.2.1``; ``commit SHA (built by Nix from master branch)`` for an image built
    from Batsim's master branch), or Batsim 5 into its ``PREFIXschedule.json`` (beside
    ``PREFIXjobs.csv``: ``5.0.0-rc2``), ``None`` without that file (the stand-in writes none).
    The protocol, not this string, says whether batsched-ml can work with a Batsim: ``serve``
    judges it by Batsim's first message (:mod:`batsched_ml.protocol.dialect`)."""
    name = batsim_jobs.name
    if not name.endswith("_jobs.csv"):
        if not name.endswith("jobs.csv"):
            return None
        schedule = batsim_jobs.with_name(name.removesuffix("jobs.csv") + "schedule.json")
        try:
            version = json.loads(schedule.read_text()).get("batsim_version")
        except (OSError, ValueError, AttributeError):
            return None
        return version if isinstance(version, str) else None
    path = batsim_jobs.with_name(name.removesuffix("_jobs.csv") + "_schedule.csv")
    try:
        with path.open(newline="") as handle:
            row = next(csv.DictReader(handle), None)
    except OSError:
        return None
    return (row or {}).get("batsim_version")


def _scheduler_run(
    scheduler_dir: Path,
    wait: float,
    sleep: Callable[[float], None],
    *,
    required: bool = False,
) -> dict[str, Any] | None:
    """The scheduler's run record once it is final (``serve.json`` is written just before
    run.json says complete); refused when incomplete, or missing when ``required``."""
    deadline = time.monotonic() + max(wait, 10.0)
    run = read_run(scheduler_dir)
    while run is not None and run.get("status") == RUNNING and time.monotonic() < deadline:
        sleep(0.2)
        run = read_run(scheduler_dir)
    if run is None:
        if required:
            raise CollectError(
                f"{scheduler_dir} has no run.json: not a run this experiment can check"
            )
        return None
    if run.get("status") != COMPLETE:
        reason = f": {run['reason']}" if run.get("reason") else ""
        raise CollectError(f"the scheduler's run is {run.get('status')}{reason}")
    return run


def _write(
    summary: dict[str, Any],
    status: dict[str, Any],
    batsim_jobs: Path,
    table: pd.DataFrame,
    scheduler_dir: Path,
    out: Path,
) -> None:
    if "predictor" in status and (scheduler_dir / PREDICTED).exists():
        summary["prediction"] = _predictions(table, scheduler_dir, status["predictor"], out)
    shutil.copyfile(batsim_jobs, out / JOBS)
    for name in SCHEDULER_TABLES:
        if (scheduler_dir / name).exists():
            shutil.copyfile(scheduler_dir / name, out / name)
    write_json(out / SUMMARY, summary)
    (out / REPORT).write_text(report_text(summary))


def _predictions(table: pd.DataFrame, scheduler_dir: Path, name: str, out: Path) -> dict[str, Any]:
    """The served run's predictions against Batsim's runtimes: ``predictions.csv``,
    ``timing.json`` and the quality, as a replay writes them (one :func:`write_predictions`)."""
    with (scheduler_dir / PREDICTED).open(newline="") as handle:
        predictions = {row["job_id"]: _number(row["predicted"]) for row in csv.DictReader(handle)}
    timing_path = scheduler_dir / "timing.json"
    seconds = (
        json.loads(timing_path.read_text()).get("predict_seconds") if timing_path.exists() else None
    )
    return write_predictions(predictions, name, table, out, seconds=seconds)


def _number(text: str) -> int | float:
    """A prediction as the predictor gave it: ``predicted.csv`` has Python's text of each value
    (``3600`` for the requested time, an integer; ``553.5``), and an integer read back as a
    float would make the column float and ``predictions.csv`` say ``3600.0`` where the replay
    of the same run says ``3600``."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def report_text(summary: dict[str, Any]) -> str:
    lines = [
        f"# {summary.get('trace')}: {run_title(summary['config'])}",
        "",
        *(
            [f"Run `{summary['run_id']}` (its `run.json` says what and which code).", ""]
            if summary.get("run_id")
            else []
        ),
        "```",
        summary_table(summary),
        "```",
        "",
    ]
    events = summary.get("trainer_events") or []
    if events:
        lines += ["Trainer events:", ""]
        lines += [f"- week {e['week']}: {e['event']} ({e.get('detail', '')})" for e in events]
        lines.append("")
    return "\n".join(lines)
