"""Scheduling with online job-size classification (Zrigui et al., JPDC 2022, Algorithms 1-2).

Two components of the one scheduler (:class:`~batsched_ml.scheduler.core.BatchScheduler`),
attached through its hooks:

- :class:`Classifier`: each submitted job is classified *small* or *large* by the model of the
  current week (``on_message``: a new week takes the trainer's new model; ``on_admit``: the
  class; ``on_completed``: the finished job feeds the features and the next week's training set).
  The class is the job's ``rank``, the first element of the queue order: small jobs form their
  own queue ahead of the large one, each ordered by the policy (or the dispatcher's order), and
  the dispatcher places the concatenation. Starving jobs still go first.
- :class:`Safeguard`: the kill-and-resubmit safeguard of the ``classification-idempotent``
  variant (``on_started``, ``on_requested_call``, ``after_events``, ``on_jobs_killed``,
  ``take_submission``, ``deferred``, ``may_register_more``).

:class:`ClassifyingScheduler` is a convenience constructor of the scheduler with both.

Variants (``--variant``):

==============================  ===============================================================
``classification``              classify, no safeguard: a false small job runs to its end
``classification-idempotent``   classify; a small job still running after the divider is killed
                                and resubmitted as large (the safeguard; jobs are idempotent)
``class-clairvoyant``           the true class (runtime below the divider) replaces the model
==============================  ===============================================================

(``base`` and ``runtime-clairvoyant`` need no classes: see :data:`batsched_ml.registry.VARIANTS`.)

Runtimes. A job's estimate is the predictor's (the requested time by default; any
``--predictor``). For a job classified small the runtime the dispatcher plans with is
``min(estimate, divider)`` when the class is enforced (idempotent: the job is killed at the
divider; clairvoyant: a truly small job ends before it), an upper bound of its run when the
estimate is, so that reservations stay valid and small jobs backfill where their estimate would
forbid it. Without the safeguard a false small job may run past the divider, so the estimate is
kept. The queue order uses the uncapped estimate (``rank_est``), as the paper does with the
requested time. A ``--correction`` extends the planned runtime of a running job that outlives it,
capped or not. With a non-EASY dispatcher (sjf, ljf, prb, cph) the class rank still comes first,
before the dispatcher's own order.

The safeguard: a small job started at ``s`` gets a CALL_ME_LATER at ``s + divider`` (unless its
walltime ends it by then); at that call, if it is still running, KILL_JOB; when Batsim answers
with JOB_KILLED, the job is resubmitted through Batsim's dynamic jobs: a fresh copy of its profile
(REGISTER_PROFILE; Batsim 4.2.1 forgets the killed job's own) and a REGISTER_JOB under a new id
``<workload>_resub!<name>_r<n>`` with ``subtime`` = now. The new job is large, keeps its original
submission time for ordering and starvation, restarts from scratch and is estimated afresh by the
predictor (which is not told the killed attempt's truncated runtime). Batsim must run with
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
from batsched_ml.predict.params import ForestParams
from batsched_ml.predict.training import InProcessTrainer, Trainer, WeeklyModel, week_of
from batsched_ml.protocol.events import (
    CallMeLater,
    Event,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    Message,
    RegisterJob,
    RegisterProfile,
    SimulationBegins,
)
from batsched_ml.scheduler.core import (
    DEFAULT_STARVATION_THRESHOLD,
    BatchScheduler,
    Component,
    RunningJob,
    SchedulerError,
    WaitingJob,
)
from batsched_ml.scheduler.correction import Correction
from batsched_ml.scheduler.dispatchers import Dispatcher
from batsched_ml.scheduler.predictors import Predictor

RESUBMIT_SUFFIX = "_resub"
#: ``small_order`` values: within the small queue, the policy's order or decreasing probability
SMALL_ORDERS = ("policy", "probability")
#: ``small_order="probability"``: a small job's rank is ``-round(p_small * PROBABILITY_SCALE)``
PROBABILITY_SCALE = 10**9
#: the classifier's constructor parameters that are not options (``--classifier-option``)
NOT_OPTIONS = ("trainer", "calendar", "feature_mode", "clairvoyant", "cap_small")


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


def _tracker(calendar: dict[str, Any], mode: str) -> FeatureTracker:
    return FeatureTracker(
        unix_start_time=calendar.get("unix_start_time"),
        time_zone_string=calendar.get("time_zone_string"),
        time_zone=calendar.get("time_zone"),
        mode=mode,
    )


class Classifier(Component):
    """Classifies each submitted job small or large by the week's model (or, ``clairvoyant``,
    by its true runtime) and keeps the record of every job (see the module docstring).

    ``cap_small``: a small job plans with ``min(estimate, divider)`` (its class is enforced).

    The options (``--classifier-option KEY=VALUE``; the defaults are the paper's method, and
    give the same decisions bit for bit):

    ``threshold`` (0.5)
        A job is small iff the forest's probability of small exceeds it: ``p_small >
        threshold``, computed as ``(1 - threshold) * p_small > threshold * p_large`` on the two
        probabilities the forest averages. At 0.5 this is exactly the forest's vote
        (``predict``: small iff ``p_small > p_large``, a tie is large), which the default
        path still calls; above 0.5 fewer jobs are small (fewer kills, more false larges).
    ``small_order`` (``"policy"``)
        The order within the small queue: the policy's (``"policy"``), or by decreasing
        probability of being small, the policy's order breaking ties (``"probability"``: the
        job's ``rank`` is ``-round(p_small * 1e9)`` instead of 0, still before every large
        job's 1, so the class still comes first in the queue key).
    ``divider_quantile`` (0.5)
        The divider is this quantile of the finished jobs' runtimes rather than their median
        (:func:`batsched_ml.predict.training.divider_of`; it is the trainer's
        ``ForestParams.divider_quantile``, which must agree). Below 0.5 fewer jobs are small
        and small jobs are killed sooner.

    ``threshold`` and ``small_order`` need the forest's probabilities: not with the true
    classes (``clairvoyant``), whose ceiling moves only with ``divider_quantile``.
    """

    def __init__(
        self,
        *,
        trainer: Trainer | None = None,
        calendar: dict[str, Any] | None = None,
        feature_mode: str = "online",
        clairvoyant: bool = False,
        cap_small: bool = True,
        threshold: float = 0.5,
        small_order: str = "policy",
        divider_quantile: float = 0.5,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], not {threshold}")
        if small_order not in SMALL_ORDERS:
            raise ValueError(
                f"small_order must be one of {', '.join(SMALL_ORDERS)}, not {small_order!r}"
            )
        if not 0.0 < divider_quantile < 1.0:
            raise ValueError(f"divider_quantile must be in (0, 1), not {divider_quantile}")
        if clairvoyant and (threshold != 0.5 or small_order != "policy"):
            raise ValueError(
                "the true classes have no probability: threshold and small_order do not go "
                "with class-clairvoyant"
            )
        self.clairvoyant = clairvoyant
        self.cap_small = cap_small
        self.threshold = threshold
        self.small_order = small_order
        self.divider_quantile = divider_quantile
        # the forest's own vote (predict_one), as always, unless an option needs probabilities
        self._vote = threshold == 0.5 and small_order == "policy"
        if trainer is None:
            trainer = InProcessTrainer(ForestParams(divider_quantile=divider_quantile))
        else:
            params = getattr(trainer, "params", None)
            theirs = getattr(params, "divider_quantile", divider_quantile)
            if theirs != divider_quantile:
                raise ValueError(
                    f"the trainer's divider is the {theirs} quantile, not {divider_quantile}"
                )
        self.trainer: Trainer = trainer
        self.tracker = _tracker(calendar or {}, feature_mode)
        self.week = -1
        self.model = WeeklyModel(week=0, divider=None, predictor=None)
        self.logical: dict[str, LogicalJob] = {}
        self.origin_of: dict[str, str] = {}  # resubmitted id -> original id
        self.records: list[ClassificationRecord] = []
        self.weeks: list[WeekInfo] = []

    def info(self, job_id: str) -> LogicalJob | None:
        """The workload job that ``job_id`` (an original or a resubmission) is an attempt of."""
        return self.logical.get(self.origin_of.get(job_id, job_id))

    # --- weeks and models -----------------------------------------------------------------

    def on_message(self, message: Message) -> None:
        week = week_of(message.now)
        if week > self.week:
            self._new_week(week)

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

    @property
    def needs_calendar(self) -> bool:
        return self.tracker.origin is None

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        self.tracker = _tracker(calendar, self.tracker.mode)

    def on_begins(self, event: SimulationBegins) -> None:
        if self.tracker.origin is None:  # calendar given as JSON in batsim --sched-cfg?
            try:
                config = json.loads(event.config.get("sched-config") or "{}")
            except ValueError:
                config = {}
            if isinstance(config, dict) and config.get("unix_start_time") is not None:
                self.tracker = _tracker(config, self.tracker.mode)

    # --- jobs -----------------------------------------------------------------------------

    def on_admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        """Classify the job: its queue (rank) and the runtime the dispatcher plans with."""
        job = entry.job
        estimate = entry.est
        submission = self.tracker.submit(job)
        divider = self.model.divider
        if self.clairvoyant:
            profile = self.scheduler.profile_of(job, event) or {}
            small = divider is not None and float(profile.get("delay", 0.0)) < divider
            rank = 0 if small else 1
        elif self._vote:
            small = self.model.is_small(submission.features)
            rank = 0 if small else 1
        else:
            small, rank = self._classify(submission.features)
        if small and self.cap_small and divider is not None:
            entry.est = min(estimate, divider)
        entry.rank_est = estimate
        entry.rank = rank
        self.logical[job.id] = LogicalJob(job, submission, self.week, small, divider)

    def _classify(self, features: list[float]) -> tuple[bool, int]:
        """The class (small?) and queue rank of a job under ``threshold`` and ``small_order``."""
        model = self.model
        if model.predictor is None:
            return False, 1
        p_large, p_small = model.probabilities(features)
        threshold = self.threshold
        if not (1.0 - threshold) * p_small > threshold * p_large:
            return False, 1
        if self.small_order == "probability":
            return True, -round(p_small * PROBABILITY_SCALE)
        return True, 0

    def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Event]:
        info = self.info(entry.job.id)
        if info is not None:
            info.start = now
        return []

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        if running.killed and event.job_state == "COMPLETED_KILLED":
            return  # the safeguard resubmits it when JOB_KILLED arrives
        original = self.origin_of.get(event.job_id, event.job_id)
        info = self.logical.pop(original, None)
        if info is None:
            return
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


class Safeguard(Component):
    """Kills a job classified small that is still running at the divider and resubmits it as
    large (see the module docstring); attached after its :class:`Classifier`."""

    def __init__(self, classifier: Classifier) -> None:
        self.classifier = classifier
        self.kill_decisions = 0
        self._to_kill_at: dict[str, float] = {}  # running small job -> time it reaches the divider
        self._killed: set[str] = set()
        self._awaiting_ack: dict[str, WaitingJob] = {}
        self._call_received = False

    def on_begins(self, event: SimulationBegins) -> None:
        if not self.scheduler.dynamic_jobs:
            raise SchedulerError(
                "the classification-idempotent variant resubmits killed jobs: start Batsim with "
                "--enable-dynamic-jobs --acknowledge-dynamic-jobs"
            )

    def take_submission(self, event: JobSubmitted) -> WaitingJob | None:
        pending = self._awaiting_ack.pop(event.job_id, None)
        if pending is not None:  # Batsim acknowledges a resubmission we registered
            self.scheduler.add_waiting(pending)
        return pending

    def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Event]:
        info = self.classifier.info(entry.job.id)
        if entry.rank < 1 and info is not None and info.divider is not None:  # a small job
            limit = now + info.divider
            walltime = entry.job.walltime
            if walltime is None or now + walltime > limit:
                self._to_kill_at[entry.job.id] = limit
                return [CallMeLater(now, limit)]
        return []

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        self._to_kill_at.pop(event.job_id, None)

    def on_requested_call(self, now: float) -> None:
        self._call_received = True  # kills are decided once the whole message is read

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
        self.scheduler.kill(due, now)

    def on_jobs_killed(self, event: JobKilled, now: float) -> None:
        scheduler = self.scheduler
        for job_id in event.job_ids:
            if job_id not in self._killed or job_id in scheduler.running:
                continue  # not ours, or it ended before the kill landed
            self._killed.discard(job_id)
            info = self.classifier.info(job_id)
            assert info is not None
            info.attempts += 1
            scheduler._immediate.extend(self._resubmission(info, now))

    def _resubmission(self, info: LogicalJob, now: float) -> list[Event]:
        scheduler = self.scheduler
        job = info.job
        workload, name = job.workload + RESUBMIT_SUFFIX, f"{job.name}_r{info.attempts - 1}"
        new_id = f"{workload}!{name}"
        profile = scheduler.profiles.get(job.workload, {}).get(job.profile)
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
        self.classifier.origin_of[new_id] = job.id
        new_job = Job.from_batsim(new_id, obj)
        estimate = scheduler.predictor.estimate(new_job, profile)
        entry = scheduler.new_waiting(new_job, estimate, job.subtime)
        entry.rank = 1  # large from now on
        if scheduler.acknowledge_dynamic_jobs:
            self._awaiting_ack[new_id] = entry
        else:
            scheduler.add_waiting(entry)
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
        if self._killed or self._awaiting_ack or self._to_kill_at:
            return True
        return any(entry.rank < 1 for entry in self.scheduler.waiting.values())


class ClassifyingScheduler(BatchScheduler):
    """A convenience constructor: the scheduler with a :class:`Classifier` for ``variant``
    (and the :class:`Safeguard` for ``classification-idempotent``), over any ``predictor``,
    ``dispatcher`` and ``correction``; ``classifier_options``: the :class:`Classifier`'s
    options (``threshold``, ``small_order``, ``divider_quantile``). The classifier's records
    are read through it."""

    def __init__(
        self,
        policy: Any = "fcfs",
        *,
        variant: str = "classification-idempotent",
        trainer: Trainer | None = None,
        calendar: dict[str, Any] | None = None,
        feature_mode: str = "online",
        starvation_threshold: float | None = DEFAULT_STARVATION_THRESHOLD,
        audit: bool = False,
        predictor: Predictor | None = None,
        dispatcher: Dispatcher | None = None,
        correction: Correction | None = None,
        classifier_options: dict[str, Any] | None = None,
    ) -> None:
        if variant not in registry.CLASSIFIED_VARIANTS:
            raise ValueError(f"unknown classified variant {variant!r}")
        self.variant = variant
        self.classifier = Classifier(
            trainer=trainer,
            calendar=calendar,
            feature_mode=feature_mode,
            clairvoyant=variant == "class-clairvoyant",
            cap_small=variant != "classification",
            **(classifier_options or {}),
        )
        components: list[Component] = [self.classifier]
        self.safeguard: Safeguard | None = None
        if variant == "classification-idempotent":
            self.safeguard = Safeguard(self.classifier)
            components.append(self.safeguard)
        super().__init__(
            policy,
            predictor,
            dispatcher,
            starvation_threshold=starvation_threshold,
            correction=correction,
            components=components,
            audit=audit,
        )

    @property
    def trainer(self) -> Trainer:
        return self.classifier.trainer

    @property
    def model(self) -> WeeklyModel:
        return self.classifier.model

    @property
    def tracker(self) -> FeatureTracker:
        return self.classifier.tracker

    @property
    def records(self) -> list[ClassificationRecord]:
        return self.classifier.records

    @property
    def weeks(self) -> list[WeekInfo]:
        return self.classifier.weeks

    @property
    def kill_decisions(self) -> int:
        return self.safeguard.kill_decisions if self.safeguard is not None else 0
