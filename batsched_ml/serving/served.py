"""What a served run leaves behind: the scheduler's decisions and a status that says whether the
run is complete.

Against a real Batsim the job table is Batsim's to write; the scheduler's side of the story is
``decisions.csv`` (every decision it sent, in order: time, type, job, machines) and
``serve.json``. When the run ends early (the peer went silent or disconnected, sent a message
that breaks the protocol, or the user interrupted it) both are still written, ``serve.json``
says ``"status": "partial"`` with the reason, and lists the jobs the scheduler knew of that had
not finished, so that no job is lost without a trace.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batsched_ml.errors import UserError
from batsched_ml.protocol.dialect import BATSIM4_PROTOCOL, BATSIM5_PROTOCOL
from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    RegisterJob,
    RejectJob,
    SimulationBegins,
)
from batsched_ml.results.classified_files import write_classification
from batsched_ml.results.measured import MeasuredPredictor
from batsched_ml.results.outputs import (
    DECISIONS,
    PREDICTED,
    SERVE_STATUS,
    training_seconds,
    write_timing,
)
from batsched_ml.scheduler.classified import ClassifyingScheduler
from batsched_ml.workload.io import WorkloadError, load_workload, report_dropped

DECISION_COLUMNS = ("time", "type", "job_id", "detail")

#: What a submitted job must share with its namesake in ``--calendar``'s workload.
CHECKED_FIELDS = ("subtime", "res", "walltime")


class CalendarMismatch(UserError, ValueError):
    """Batsim submits a job that ``--calendar``'s workload does not hold as it is: Batsim runs
    another workload, whose days and hours the calendar would date wrongly (and whose run
    ``run.json`` would name wrongly)."""


def expected_jobs(workload: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """``--calendar``'s jobs by id, as :data:`CHECKED_FIELDS` (what Batsim's submissions of
    them must show)."""
    return {
        str(job["id"]): tuple(job.get(field) for field in CHECKED_FIELDS)
        for job in workload["jobs"]
    }


def _describe(event: Any) -> tuple[str, str, str]:
    if isinstance(event, ExecuteJob):
        return "EXECUTE_JOB", event.job_id, str(event.alloc)
    if isinstance(event, RejectJob):
        return "REJECT_JOB", event.job_id, ""
    if isinstance(event, KillJob):
        return "KILL_JOB", " ".join(event.job_ids), ""
    if isinstance(event, RegisterJob):
        return "REGISTER_JOB", event.job_id, ""
    if isinstance(event, CallMeLater):
        return "CALL_ME_LATER", "", f"{event.when:g}"
    if isinstance(event, Notify):
        return "NOTIFY", "", event.type
    return type(event).__name__, "", ""


class ServedRun:
    """Wraps a scheduler's ``handle`` to keep the decisions and the message count."""

    def __init__(
        self, scheduler: Any, config: dict[str, Any] | None = None, *, run_id: str | None = None
    ) -> None:
        self.scheduler = scheduler
        self.config = config or {}
        self.run_id = run_id
        self.decisions: list[tuple[float, str, str, str]] = []
        self.calendar: str | None = None  # where a calendar found at SIMULATION_BEGINS came from
        self.warnings: list[str] = []
        self.messages = 0
        self.replies = 0  # messages answered: none means the run never started
        self.protocol = 4  # the Batsim protocol spoken, told by Batsim's first frame
        self.last_now: float | None = None
        #: the jobs of the trace the cleaning rules dropped (rule -> count), as the workload
        #: read here (``--calendar``, or Batsim's at SIMULATION_BEGINS) records them
        self.input_cleaning: dict[str, int] = {}
        #: ``--calendar``'s jobs (:func:`expected_jobs`), which Batsim's static workload must be
        self.expected: dict[str, tuple[Any, ...]] | None = None
        self.calendar_file = ""
        self._static: str | None = None  # the name of Batsim's one static workload

    @property
    def started(self) -> bool:
        """Whether the scheduler answered a message: a run that stops before has nothing of
        a run to show (:func:`serve_and_record` writes no outputs for it)."""
        return self.replies > 0

    def handle(self, message: Message) -> Message:
        self.messages += 1
        self.last_now = message.now
        if self.messages == 1:
            for event in message.events:
                if isinstance(event, SimulationBegins):
                    self._find_calendar(event)
                    if len(event.workloads) == 1:
                        self._static = next(iter(event.workloads))
        if self.expected is not None and self._static is not None:
            for event in message.events:
                if isinstance(event, JobSubmitted):
                    self._check_submitted(event)
        reply = self.scheduler.handle(message)
        for event in reply.events:
            self.decisions.append((event.timestamp, *_describe(event)))
        self.replies += 1
        return reply

    def _check_submitted(self, event: JobSubmitted) -> None:
        """A job of Batsim's static workload is ``--calendar``'s job of that id, as it is."""
        workload, _, name = event.job_id.partition("!")
        if workload != self._static or self.expected is None:
            return
        seen = tuple(event.job.get(field) for field in CHECKED_FIELDS)
        wanted = self.expected.get(name)
        if wanted is None or any(
            a is not None and b is not None and float(a) != float(b)
            for a, b in zip(seen, wanted, strict=True)
        ):
            shown = ", ".join(f"{f} {v}" for f, v in zip(CHECKED_FIELDS, seen, strict=True))
            held = (
                "holds no such job"
                if wanted is None
                else "has it with "
                + ", ".join(f"{f} {v}" for f, v in zip(CHECKED_FIELDS, wanted, strict=True))
            )
            raise CalendarMismatch(
                f"Batsim submitted {event.job_id} ({shown}) but --calendar {self.calendar_file} "
                f"{held}: Batsim runs another workload than the calendar's"
            )

    def _find_calendar(self, begins: SimulationBegins) -> None:
        """A scheduler that reads the time of day and was given no calendar (``--calendar``)
        takes it from the workload file Batsim names in SIMULATION_BEGINS (or from
        ``--sched-cfg``, which the scheduler reads itself); failing both, it says so loudly
        and ``serve.json`` records that days and hours count from time 0."""
        if not getattr(self.scheduler, "needs_calendar", False):
            return
        try:
            config = json.loads(begins.config.get("sched-config") or "{}")
        except ValueError:
            config = {}
        if isinstance(config, dict) and config.get("unix_start_time") is not None:
            self.calendar = "--sched-cfg"
            return

        for path in begins.workloads.values():
            try:
                workload = load_workload(path)
            except (OSError, WorkloadError):
                continue
            if workload.get("unix_start_time") is not None:
                self.input_cleaning = report_dropped(workload, path)
                self.scheduler.set_calendar(
                    {
                        key: workload.get(key)
                        for key in ("unix_start_time", "time_zone_string", "time_zone")
                    }
                )
                self.calendar = path
                return
        paths = ", ".join(begins.workloads.values()) or "none"
        self.warnings.append(
            "no calendar: no --calendar, none in --sched-cfg, and no unix_start_time in "
            f"Batsim's workload file(s) ({paths}) readable here; days and hours of the "
            "features count from time 0 as if it were a Monday 00:00"
        )
        print(f"batsched-ml: warning: {self.warnings[-1]}", file=sys.stderr, flush=True)

    def status(self, reason: str | None) -> dict[str, Any]:
        scheduler = self.scheduler
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "status": "complete" if reason is None else "partial",
            "reason": reason,
            "config": self.config,
            "messages": self.messages,
            "last_time": self.last_now,
            "decisions": len(self.decisions),
            "rejected": list(scheduler.rejected),
            "waiting": sorted(scheduler.waiting),
            "running": sorted(scheduler.running),
        }
        if self.messages:  # the protocol of Batsim's first frame (transport.v5.serve judged it)
            out["batsim_protocol"] = BATSIM5_PROTOCOL if self.protocol == 5 else BATSIM4_PROTOCOL
        if self.calendar is not None:
            out["calendar_from"] = self.calendar
        if self.input_cleaning:
            out["input_cleaning"] = dict(self.input_cleaning)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        events = getattr(getattr(scheduler, "trainer", None), "events", None)
        if events is not None:
            out["trainer_events"] = events
        return out

    def write(self, out_dir: str | Path, reason: str | None) -> dict[str, Any]:
        """Write ``decisions.csv`` and ``serve.json``; ``reason`` is ``None`` for a complete
        run, else why it stopped."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        with (out / DECISIONS).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(DECISION_COLUMNS)
            for time, kind, job_id, detail in self.decisions:
                writer.writerow((f"{time:g}", kind, job_id, detail))
        status = self.status(reason)

        timing: dict[str, Any] = {"run_id": self.run_id}
        if isinstance(self.scheduler, ClassifyingScheduler):
            # classification.csv, weekly_quality.csv, feature_importance.csv, as a replay has
            status["classification"] = write_classification(self.scheduler, out)
            timing.update(training_seconds(self.scheduler))
        predictor = getattr(self.scheduler, "predictor", None)
        if isinstance(predictor, MeasuredPredictor):
            # the actual runtimes are Batsim's: `collect` joins these with its job table
            status["predictor"] = predictor.name
            with (out / PREDICTED).open("w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(("job_id", "predicted"))
                writer.writerows(predictor.predictions.items())
            timing["predict_seconds"] = predictor.seconds
            timing["predictions"] = len(predictor.predictions)
        write_timing(out, timing)
        (out / SERVE_STATUS).write_text(json.dumps(status, indent=1) + "\n")
        return status


def serve_and_record(
    run: ServedRun, serve: Callable[[Callable[[Message], Message]], int], out_dir: str | Path
) -> int:
    """Run ``serve(handler)`` and write the outputs whatever happens; errors propagate after
    the outputs are written (marked partial, with the error as the reason). A run that failed
    before answering any message (a Batsim of another protocol, a first message refused, no
    Batsim at all) did not start: nothing is written, the error propagates (the command
    leaves run.json alone to say why). An interruption is written as partial either way."""
    try:
        count = serve(run.handle)
    except BaseException as exc:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, KeyboardInterrupt):
            reason = "interrupted"
        elif not run.started:
            raise
        run.write(out_dir, reason)
        raise
    run.write(out_dir, None)
    return count
