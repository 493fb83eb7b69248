"""Scheduling with online job-size classification (Zrigui et al., JPDC 2022, Algorithms 1-2).

Each submitted job is classified *small* or *large* by the model of the current week; small jobs
form their own queue ahead of the large one, each ordered by the policy, and the one EASY of
:mod:`batsched_ml.scheduler.easy` places the concatenation (the class is the first element of
the queue key). Starving jobs still go first.

Variants (``--variant``):

==============================  ===============================================================
``classification``              classify, no safeguard: a false small job runs to its end
``classification-idempotent``   classify; a small job still running after the divider is killed
                                and resubmitted as large (the safeguard; jobs are idempotent)
``class-clairvoyant``           the true class (runtime below the divider) replaces the model
==============================  ===============================================================

(``base`` and ``runtime-clairvoyant`` need no classes: see :data:`batsched_ml.registry.VARIANTS`.)

Runtime estimate EASY plans with for a job classified small: ``min(requested time, divider)``
when the class is enforced (idempotent: the job is killed at the divider; clairvoyant: a truly
small job ends before it), which is an upper bound of its run, so reservations stay valid and small
jobs backfill where their requested time would forbid it. Without the safeguard a false small job
may run to its requested time, so the requested time is kept. Queue order still uses the
requested time, as in the paper.

The safeguard: a small job started at ``s`` gets a CALL_ME_LATER at ``s + divider`` (unless its
walltime ends it by then); at that call, if it is still running, KILL_JOB; when Batsim answers
with JOB_KILLED, the job is resubmitted through Batsim's dynamic jobs: a fresh copy of its profile
(REGISTER_PROFILE; Batsim 4.2.1 forgets the killed job's own) and a REGISTER_JOB under a new id
``<workload>_resub!<name>_r<n>`` with ``subtime`` = now. The new job is large, keeps its original
submission time for ordering and starvation, and restarts from scratch. Batsim must run with
``--enable-dynamic-jobs --acknowledge-dynamic-jobs``; the scheduler sends ``NOTIFY
registration_finished`` once no static job is left to come and no small job is left that could
be killed, so that the simulation can end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from batsched_ml import registry
from batsched_ml.job import Job
from batsched_ml.predict.features import FeatureTracker, Submission
from batsched_ml.predict.training import InProcessTrainer, Trainer, WeeklyModel, week_of
from batsched_ml.protocol.events import (
    CallMeLater,
    Event,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    KillJob,
    RegisterJob,
    RegisterProfile,
    RequestedCall,
    SimulationBegins,
)
from batsched_ml.scheduler.core import (
    DEFAULT_STARVATION_THRESHOLD,
    EasyScheduler,
    RunningJob,
    SchedulerError,
    WaitingJob,
)
from batsched_ml.scheduler.estimators import RequestedTime

RESUBMIT_SUFFIX = "_resub"


@dataclass(slots=True)
class LogicalJob:
    """A workload job across its attempts (the original and its resubmissions)."""

    job: Job
    submission: Submission | None
    week: int
    small: bool
    divider: float | None
    attempts: int = 1
    start: float = 0.0


@dataclass
class ClassificationRecord:
    """One finished job: what it was predicted, what it was."""

    job_id: str
    week: int
    divider: float | None
    predicted_small: bool
    runtime: float
    attempts: int


@dataclass
class WeekInfo:
    week: int
    divider: float | None
    n_train: int
    train_seconds: float
    importances: list[float] | None
    has_model: bool


class ClassifyingScheduler(EasyScheduler):
    """EASY with a small and a large queue, fed by weekly models (see the module docstring)."""

    def __init__(
        self,
        policy: str = "fcfs",
        *,
        variant: str = "classification-idempotent",
        trainer: Trainer | None = None,
        calendar: dict[str, Any] | None = None,
        feature_mode: str = "online",
        starvation_threshold: float | None = DEFAULT_STARVATION_THRESHOLD,
        audit: bool = False,
    ) -> None:
        if variant not in registry.CLASSIFIED_VARIANTS:
            raise ValueError(f"unknown classified variant {variant!r}")
        super().__init__(
            policy, RequestedTime(), starvation_threshold=starvation_threshold, audit=audit
        )
        self.variant = variant
        self.kills = variant == "classification-idempotent"
        self.clairvoyant = variant == "class-clairvoyant"
        self.cap_small = variant != "classification"
        self.trainer: Trainer = trainer if trainer is not None else InProcessTrainer()
        calendar = calendar or {}
        self.tracker = FeatureTracker(
            unix_start_time=calendar.get("unix_start_time"),
            time_zone_string=calendar.get("time_zone_string"),
            time_zone=calendar.get("time_zone"),
            mode=feature_mode,
        )
        self.week = -1
        self.model = WeeklyModel(week=0, divider=None, predictor=None)
        self.logical: dict[str, LogicalJob] = {}
        self.origin_of: dict[str, str] = {}  # resubmitted id -> original id
        self.records: list[ClassificationRecord] = []
        self.weeks: list[WeekInfo] = []
        self.kill_decisions = 0
        self._to_kill_at: dict[str, float] = {}  # running small job -> time it reaches the divider
        self._killed: set[str] = set()
        self._awaiting_ack: dict[str, WaitingJob] = {}
        self._call_received = False

    # --- weeks and models -----------------------------------------------------------------

    def handle(self, message):
        week = week_of(message.now)
        if week > self.week:
            self._new_week(week)
        return super().handle(message)

    def _new_week(self, week: int) -> None:
        self.week = week
        self.tracker.new_week()
        self.model = self.trainer.model_for(week)
        self.weeks.append(
            WeekInfo(
                week,
                self.model.divider,
                self.model.n_train,
                self.model.train_seconds,
                self.model.importances,
                self.model.predictor is not None,
            )
        )

    # --- events ---------------------------------------------------------------------------

    def on_event(self, event: Event, now: float) -> bool:
        if isinstance(event, JobKilled):
            self._resubmit(event, now)
            return True
        if isinstance(event, RequestedCall):
            self._call_received = True  # kills are decided once the whole message is read
            return True
        return super().on_event(event, now)

    @property
    def needs_calendar(self) -> bool:
        return self.tracker.origin is None

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        self.tracker = FeatureTracker(
            unix_start_time=calendar.get("unix_start_time"),
            time_zone_string=calendar.get("time_zone_string"),
            time_zone=calendar.get("time_zone"),
            mode=self.tracker.mode,
        )

    def on_begins(self, event: SimulationBegins) -> None:
        super().on_begins(event)
        if self.tracker.origin is None:  # calendar given as JSON in batsim --sched-cfg?
            try:
                config = json.loads(event.config.get("sched-config") or "{}")
            except ValueError:
                config = {}
            if isinstance(config, dict) and config.get("unix_start_time") is not None:
                self.tracker = FeatureTracker(
                    unix_start_time=config["unix_start_time"],
                    time_zone_string=config.get("time_zone_string"),
                    time_zone=config.get("time_zone"),
                    mode=self.tracker.mode,
                )
        if self.kills and not self.dynamic_jobs:
            raise SchedulerError(
                "the classification-idempotent variant resubmits killed jobs: start Batsim with "
                "--enable-dynamic-jobs --acknowledge-dynamic-jobs"
            )

    def on_submitted(self, event: JobSubmitted) -> WaitingJob | None:
        pending = self._awaiting_ack.pop(event.job_id, None)
        if pending is not None:  # Batsim acknowledges a resubmission we registered
            self.add_waiting(pending)
            return pending
        return super().on_submitted(event)

    def admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        """Classify the job: its queue (rank) and the runtime EASY plans with."""
        job = entry.job
        requested = entry.est
        submission = self.tracker.submit(job)
        divider = self.model.divider
        if self.clairvoyant:
            profile = self.profile_of(job, event) or {}
            small = divider is not None and float(profile.get("delay", 0.0)) < divider
        else:
            small = self.model.is_small(submission.features)
        if small and self.cap_small and divider is not None:
            entry.est = min(requested, divider)
        entry.rank_est = requested
        entry.rank = 0 if small else 1
        self.logical[job.id] = LogicalJob(job, submission, self.week, small, divider)

    def start(self, entry: WaitingJob, mask: int, now: float) -> list[Event]:
        decisions = super().start(entry, mask, now)
        info = self.logical.get(self.origin_of.get(entry.job.id, entry.job.id))
        if info is not None:
            info.start = now
        if self.kills and entry.rank == 0 and info is not None and info.divider is not None:
            limit = now + info.divider
            walltime = entry.job.walltime
            if walltime is None or now + walltime > limit:
                self._to_kill_at[entry.job.id] = limit
                decisions.append(CallMeLater(now, limit))
        return decisions

    def on_completed(self, event: JobCompleted, now: float) -> RunningJob:
        running = super().on_completed(event, now)
        job_id = event.job_id
        self._to_kill_at.pop(job_id, None)
        if event.job_state == "COMPLETED_KILLED" and job_id in self._killed:
            return running  # resubmitted when JOB_KILLED arrives
        original = self.origin_of.get(job_id, job_id)
        info = self.logical.pop(original, None)
        if info is None:
            return running
        runtime = now - running.start
        if info.submission is not None:
            divider = self.model.divider
            cls = 1 if divider is not None and runtime < divider else 0
            self.tracker.finished(info.submission, cls)
            self.trainer.add_finished(info.submission.features, runtime, info.week)
        self.records.append(
            ClassificationRecord(
                original, info.week, info.divider, info.small, runtime, info.attempts
            )
        )
        return running

    # --- the safeguard --------------------------------------------------------------------

    def after_events(self, now: float) -> None:
        """Kill the small jobs that reached the divider. Only now, after every event of the
        message: a job whose runtime equals the divider completes in the same message as the
        call, possibly after it, and Batsim 4 aborts on a kill of a finished job."""
        if self._call_received:
            self._call_received = False
            self._kill_overdue(now)

    def _kill_overdue(self, now: float) -> None:
        due = [job_id for job_id, limit in self._to_kill_at.items() if limit <= now]
        if not due:
            return
        for job_id in due:
            del self._to_kill_at[job_id]
            self._killed.add(job_id)
        self.kill_decisions += len(due)
        self._immediate.append(KillJob(now, due))

    def _resubmit(self, event: JobKilled, now: float) -> None:
        for job_id in event.job_ids:
            if job_id not in self._killed or job_id in self.running:
                continue  # not ours, or it ended before the kill landed
            self._killed.discard(job_id)
            original = self.origin_of.get(job_id, job_id)
            info = self.logical[original]
            info.attempts += 1
            self._immediate.extend(self._resubmission(info, now))

    def _resubmission(self, info: LogicalJob, now: float) -> list[Event]:
        job = info.job
        workload, name = job.workload + RESUBMIT_SUFFIX, f"{job.name}_r{info.attempts - 1}"
        new_id = f"{workload}!{name}"
        profile = self.profiles.get(job.workload, {}).get(job.profile)
        if profile is None:
            raise SchedulerError(
                f"cannot resubmit {job.id}: its profile {job.profile!r} is unknown"
            )
        profile_name = f"{job.profile}__{name}"
        obj: dict[str, Any] = {
            "id": new_id,
            "subtime": now,
            "res": job.res,
            "profile": profile_name,
        }
        if job.walltime is not None:
            obj["walltime"] = job.walltime
        for key, value in job.fields.items():
            if key not in obj and key not in ("id", "subtime", "res", "profile", "walltime"):
                obj[key] = value
        obj["resubmission_of"] = job.id
        self.origin_of[new_id] = job.id
        new_job = Job.from_batsim(new_id, obj)
        entry = self.new_waiting(new_job, self.estimator.estimate(new_job, None), job.subtime)
        entry.rank = 1  # large from now on
        if self.acknowledge_dynamic_jobs:
            self._awaiting_ack[new_id] = entry
        else:
            self.add_waiting(entry)
        return [
            RegisterProfile(now, workload, profile_name, dict(profile)),
            RegisterJob(now, new_id, obj),
        ]

    def deferred(self) -> bool:
        """A resubmission awaits Batsim's acknowledgement, which comes in the next message at
        the same time: schedule then, with the resubmitted job in the queue, so that no later
        job takes the machines the killed job has just released."""
        return bool(self._awaiting_ack)

    def may_register_more(self) -> bool:
        if not self.kills:
            return False
        if self._killed or self._awaiting_ack or self._to_kill_at:
            return True
        return any(entry.rank == 0 for entry in self.waiting.values())
