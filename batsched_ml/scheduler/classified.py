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
``classification-guarded``      ``classification-idempotent`` in the weeks where it pays on the
                                machine, else every job queued as the base queues it (not the
                                paper's: :mod:`batsched_ml.scheduler.guard`)
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
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mypy_extensions import mypyc_attr

from batsched_ml import registry
from batsched_ml.errors import ConfigError
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
    cut_short,
)
from batsched_ml.scheduler.correction import Correction
from batsched_ml.scheduler.dispatchers import Dispatcher
from batsched_ml.scheduler.guard import Guard, GuardOptions, split_options
from batsched_ml.scheduler.predictors import Predictor

RESUBMIT_SUFFIX = "_resub"
#: ``small_order`` values: within the small queue, the policy's order or decreasing probability
SMALL_ORDERS = ("policy", "probability")
#: ``small_order="probability"``: a small job's rank is ``-round(p_small * PROBABILITY_SCALE)``
PROBABILITY_SCALE = 10**9
#: the classifier's constructor parameters that are not options (``--classifier-option``)
NOT_OPTIONS = ("trainer", "calendar", "feature_mode", "clairvoyant", "cap_small")
#: ``threshold_rule`` values: the fixed ``threshold``, or one chosen each week by expected cost
THRESHOLD_RULES = ("fixed", "cost")
#: ``threshold_rule="cost"``: the thresholds searched each week (0.05, 0.10, ..., 0.95)
COST_GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: the bound (seconds) of the bounded slowdown the cost rule weighs its errors by: 10 s, not the
#: reports' 60 s (:data:`batsched_ml.slowdown.TAU`); the cost rule's published figures
#: (docs/closing-the-gap.md) were made with it, so it stays
BSLD_TAU = 10.0
#: ``leaky_features`` values. LEAKY: "all" and "weekly" read the runtimes of earlier jobs that
#: have not finished (the paper's offline features); for the study of the paper's figures only
LEAKY_FEATURES = ("off", "all", "weekly")
#: ``drift_retrain``: the error of the jobs finished in the last DRIFT_PERIOD seconds is
#: compared with the error of all jobs judged so far, once at least DRIFT_MIN_JOBS finished in
#: it, and the model is retrained at most once per DRIFT_PERIOD
DRIFT_PERIOD = 86_400.0
DRIFT_MIN_JOBS = 50


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
    p_small: float | None = None  # the forest's probability (threshold_rule="cost" only)
    p_large: float | None = None
    first_start: float | None = None  # the first attempt's start (threshold_rule="cost" only)
    modelled: bool = False  # classified by a forest (drift_retrain only)


@dataclass(slots=True)
class CostSample:
    """A finished job as the cost-based threshold sees it: its out-of-sample probabilities
    (from the model in force at its submission, trained before it finished), runtime,
    processors, first wait and predicted class, and the week of its submission."""

    week: int
    p_small: float
    p_large: float
    runtime: float
    res: int
    wait: float
    predicted_small: bool


@dataclass
class ThresholdChoice:
    """One week's threshold under ``threshold_rule="cost"``, and what it was chosen from."""

    week: int
    threshold: float
    samples: int
    wait_gap: float = 0.0  # mean first wait, predicted large minus predicted small (s)
    queue: float = 0.0  # mean number of waiting jobs at a submission
    costs: dict[float, float] = field(default_factory=dict)


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


def _one_of(name: str, value: str, choices: Sequence[str]) -> None:
    """The classifier's options that name a choice: one line saying which are allowed."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


@mypyc_attr(allow_interpreted_subclasses=True)
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

    ``threshold_rule`` (``"fixed"``)
        ``"cost"``: the threshold is chosen at each week boundary, among 0.05, 0.10, ..., 0.95,
        to minimise the expected cost of the errors it would have made on the jobs of the last
        ``cost_weeks`` weeks that have finished (:meth:`choose_threshold`; ``threshold`` is
        then the first weeks' threshold, until enough such jobs are known). What the scheduler
        knows at that moment only: each finished job's probability from the model in force at
        its submission (out of sample: that model was trained before the job finished), its
        runtime, processors and first wait, the new divider and the machine's size.
    ``cost_weeks`` (4)
        The weeks of finished jobs the cost is estimated on.
    ``kill_budget`` (none)
        With ``threshold_rule="cost"``: only thresholds that would have called at most this
        share of the sampled jobs small wrongly (false smalls, each killed at the divider) are
        eligible; the cheapest of them is chosen, or, when none is, the one with the fewest
        false smalls. The cost rule alone kills a quarter to a half of the jobs
        (docs/closing-the-gap.md); the budget trades gain for kills.
    ``leaky_features`` (``"off"``): LEAKY, for explaining the paper's figures only
        ``"all"``: each job's lag and share features count every earlier job of its category,
        finished or not, with its true class (runtime below the divider in force at its
        submission), as the paper's offline feature extraction does (section 4.2);
        ``"weekly"``: every job of the earlier weeks, finished or not (the paper's stated
        pipeline: features from the previous weeks' jobs, extracted offline from the log). A
        scheduler cannot know these: the runtimes of jobs still running or waiting leak in.
        The training set is unchanged (finished jobs only).
    ``drift_retrain`` (false)
        A drift monitor (the paper's remark on MetaCentrum): when the share of misclassified
        jobs among those finished in the last day (at least 50 of them, each judged against
        the divider of its submission) exceeds the share over every job judged so far by
        ``drift_jump``, the model is retrained at once on every finished job, without waiting
        for the week's end; at most once a day. In-process training only (the side trainer
        trains once a week).
    ``drift_jump`` (0.1)
        The jump of the day's error over the long-run error that triggers a retraining.

    ``threshold``, ``small_order`` and ``threshold_rule`` need the forest's probabilities:
    not with the true classes (``clairvoyant``), whose ceiling moves only with
    ``divider_quantile``.
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
        threshold_rule: str = "fixed",
        cost_weeks: int = 4,
        kill_budget: float | None = None,
        leaky_features: str = "off",
        drift_retrain: bool = False,
        drift_jump: float = 0.1,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], not {threshold}")
        _one_of("small_order", small_order, SMALL_ORDERS)
        if not 0.0 < divider_quantile < 1.0:
            raise ValueError(f"divider_quantile must be in (0, 1), not {divider_quantile}")
        _one_of("threshold_rule", threshold_rule, THRESHOLD_RULES)
        if cost_weeks < 1:
            raise ValueError(f"cost_weeks must be at least 1, not {cost_weeks}")
        if kill_budget is not None:
            if not 0.0 < kill_budget < 1.0:
                raise ValueError(f"kill_budget must be in (0, 1), not {kill_budget}")
            if threshold_rule != "cost":
                raise ValueError("kill_budget bounds threshold_rule=cost's choice: set both")
        _one_of("leaky_features", leaky_features, LEAKY_FEATURES)
        if not 0.0 < drift_jump < 1.0:
            raise ValueError(f"drift_jump must be in (0, 1), not {drift_jump}")
        if clairvoyant and (
            threshold != 0.5
            or small_order != "policy"
            or threshold_rule != "fixed"
            or leaky_features != "off"
            or drift_retrain
        ):
            raise ValueError(
                "the true classes have no probability: threshold, small_order, threshold_rule, "
                "leaky_features and drift_retrain do not go with class-clairvoyant"
            )
        self.clairvoyant = clairvoyant
        self.cap_small = cap_small
        self.threshold = threshold
        self.small_order = small_order
        self.divider_quantile = divider_quantile
        self.threshold_rule = threshold_rule
        self.cost_weeks = cost_weeks
        self.kill_budget = kill_budget
        self.leaky_features = leaky_features
        self._cost = threshold_rule == "cost"
        self._cost_samples: list[CostSample] = []
        self._queue_seen: dict[int, tuple[int, int]] = {}  # week -> (sum of queue lengths, n)
        self.threshold_choices: list[ThresholdChoice] = []
        # the forest's own vote (predict_one), as always, unless an option needs probabilities
        self._vote = threshold == 0.5 and small_order == "policy" and not self._cost
        if trainer is None:
            trainer = InProcessTrainer(ForestParams(divider_quantile=divider_quantile))
        else:
            params = getattr(trainer, "params", None)
            theirs = getattr(params, "divider_quantile", divider_quantile)
            if theirs != divider_quantile:
                raise ValueError(
                    f"the trainer's divider is the {theirs} quantile, not {divider_quantile}"
                )
        # a trainer that can train a model any time (not once a week, as the side trainer)
        anytime = getattr(trainer, "trains_any_time", isinstance(trainer, InProcessTrainer))
        if drift_retrain and not anytime:
            raise ConfigError(
                "drift_retrain retrains within a week: the in-process trainer only "
                "(--trainer inprocess)"
            )
        self.trainer: Trainer = trainer
        self.drift_retrain = drift_retrain
        self.drift_jump = drift_jump
        self._recent: deque[tuple[float, bool]] = deque()  # (finish time, misclassified)
        self._recent_errors = 0
        self._judged = 0
        self._errors = 0
        self._last_fit = 0.0
        #: (time, the day's error, the long-run error) of each early retraining
        self.drift_retrains: list[tuple[float, float, float]] = []
        self.drift_train_seconds = 0.0  # their training time (not in :attr:`weeks`)
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
            self._last_fit = message.now

    def _new_week(self, week: int) -> None:
        self.week = week
        self.tracker.new_week()
        self.model = self.trainer.model_for(week)
        if self._cost:
            self._choose_weekly_threshold(week)
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
        if self.leaky_features != "off":  # LEAKY: the job's true class, known at once
            profile = self.scheduler.profile_of(job, event) or {}
            runtime = float(profile.get("delay", 0.0))
            if job.walltime is not None:
                runtime = min(runtime, float(job.walltime))
            cls = 1 if divider is not None and runtime < divider else 0
            self.tracker.leak(submission, cls, self.leaky_features == "weekly")
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
        info = LogicalJob(job, submission, self.week, small, divider)
        self.logical[job.id] = info
        if self.drift_retrain:
            info.modelled = self.model.predictor is not None
        if self._cost:
            if self.model.predictor is not None:
                info.p_large, info.p_small = self.model.probabilities(submission.features)
            total, count = self._queue_seen.get(self.week, (0, 0))
            self._queue_seen[self.week] = (total + len(self.scheduler.waiting), count + 1)

    # --- the drift monitor ---------------------------------------------------------------

    def _watch_drift(self, now: float, error: bool) -> None:
        recent = self._recent
        recent.append((now, error))
        self._recent_errors += error
        self._judged += 1
        self._errors += error
        while recent[0][0] <= now - DRIFT_PERIOD:
            self._recent_errors -= recent.popleft()[1]
        if len(recent) < DRIFT_MIN_JOBS or now - self._last_fit < DRIFT_PERIOD:
            return
        day = self._recent_errors / len(recent)
        overall = self._errors / self._judged
        if day > overall + self.drift_jump:
            self.model = self.trainer.model_for(self.week)
            self.drift_train_seconds += self.model.train_seconds
            self._last_fit = now
            self.drift_retrains.append((now, day, overall))
            recent.clear()
            self._recent_errors = 0

    # --- the cost-based weekly threshold --------------------------------------------------

    def _choose_weekly_threshold(self, week: int) -> None:
        oldest = week - self.cost_weeks
        self._cost_samples = [s for s in self._cost_samples if s.week >= oldest]
        for seen in [w for w in self._queue_seen if w < oldest]:
            del self._queue_seen[seen]
        total = sum(t for t, _ in self._queue_seen.values())
        count = sum(n for _, n in self._queue_seen.values())
        queue = total / count if count else 0.0
        choice = choose_threshold(
            self._cost_samples,
            self.model.divider,
            self.scheduler.nb_machines,
            queue,
            kill_budget=self.kill_budget,
        )
        if choice is None:  # too few samples: the threshold in force stays
            choice = ThresholdChoice(week, self.threshold, len(self._cost_samples))
        choice.week = week
        self.threshold = choice.threshold
        self.threshold_choices.append(choice)

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
            if info.first_start is None:
                info.first_start = now
        return []

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        if cut_short(running, event):
            return  # the safeguard resubmits it when JOB_KILLED arrives
        original = self.origin_of.get(event.job_id, event.job_id)
        info = self.logical.pop(original, None)
        if info is None:
            return
        runtime = now - running.start
        if info.submission is not None:
            divider = self.model.divider
            cls = 1 if divider is not None and runtime < divider else 0
            if self.leaky_features == "off":  # (leaky: the tracker knew it at submission)
                self.tracker.finished(info.submission, cls)
            self.trainer.add_finished(info.submission.features, runtime, info.week)
        if info.modelled and info.divider is not None:
            self._watch_drift(now, info.small != (runtime < info.divider))
        if info.p_small is not None and info.p_large is not None:
            first = info.first_start if info.first_start is not None else now
            self._cost_samples.append(
                CostSample(
                    info.week,
                    info.p_small,
                    info.p_large,
                    runtime,
                    info.job.res,
                    first - info.job.subtime,
                    info.small,
                )
            )
        self.records.append(
            ClassificationRecord(
                original, info.week, info.divider, info.small, runtime, info.attempts
            )
        )


#: fewer finished jobs with a probability than this, or no job of either predicted class: the
#: threshold stays where it is
COST_MIN_SAMPLES = 100


def choose_threshold(
    samples: list[CostSample],
    divider: float | None,
    machines: int,
    queue: float,
    *,
    kill_budget: float | None = None,
) -> ThresholdChoice | None:
    """The threshold (of :data:`COST_GRID`) with the least expected cost on ``samples``, in
    bounded slowdown summed over jobs (bound :data:`BSLD_TAU`); ``None`` when the samples
    cannot tell (the threshold in force stays). Each sample's true class is its runtime
    against the new ``divider``.

    - A **false large** (a truly small job left in the large queue) waits the large queue's
      extra wait ``G``: the mean first wait of the sampled jobs predicted large minus that of
      those predicted small (at least 0). Its cost is ``G / max(runtime, tau)``.
    - A **false small** (a truly large job classified small) is killed at the divider and
      resubmitted: it loses a divider-length run, ``divider / max(runtime, tau)`` of its own
      bounded slowdown, and the ``divider x processors`` it held are wasted for the others:
      ``divider x processors / machines`` seconds of machine time that every waiting job
      waits longer, ``queue`` jobs (the mean queue length at a submission) of mean
      ``1 / max(runtime, tau)`` (over the samples).

    A job is small at threshold ``t`` when ``(1 - t) p_small > t p_large``, as the classifier
    decides; among equal costs the threshold nearest 0.5 wins (the paper's vote).

    ``kill_budget``: only thresholds with at most this share of false smalls among the samples
    compete; when none has, the one with the fewest false smalls wins (then the cost, then
    the nearness to 0.5)."""
    if divider is None or machines <= 0 or len(samples) < COST_MIN_SAMPLES:
        return None
    p_small = np.array([s.p_small for s in samples])
    p_large = np.array([s.p_large for s in samples])
    runtime = np.array([s.runtime for s in samples])
    res = np.array([s.res for s in samples], dtype=float)
    wait = np.array([s.wait for s in samples])
    predicted = np.array([s.predicted_small for s in samples])
    if predicted.all() or not predicted.any():
        return None
    gap = max(0.0, float(wait[~predicted].mean() - wait[predicted].mean()))
    bounded = np.maximum(runtime, BSLD_TAU)
    small = runtime < divider
    false_large_cost = gap / bounded
    others = queue * float((1.0 / bounded).mean())
    false_small_cost = divider / bounded + divider * res / machines * others
    costs: dict[float, float] = {}
    false_smalls: dict[float, int] = {}
    for t in COST_GRID:
        called_small = (1.0 - t) * p_small > t * p_large
        false_smalls[t] = int((called_small & ~small).sum())
        costs[t] = float(
            false_small_cost[called_small & ~small].sum()
            + false_large_cost[~called_small & small].sum()
        )
    grid = COST_GRID
    if kill_budget is not None:
        allowed = [t for t in COST_GRID if false_smalls[t] <= kill_budget * len(samples)]
        fewest = min(false_smalls.values())
        grid = tuple(allowed) or tuple(t for t in COST_GRID if false_smalls[t] == fewest)
    best = min(grid, key=lambda t: (costs[t], abs(t - 0.5)))
    return ThresholdChoice(0, best, len(samples), gap, queue, costs)


@mypyc_attr(allow_interpreted_subclasses=True)
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
        if event.job_state != "COMPLETED_KILLED":
            # it ended on its own while our kill was on its way: Batsim still acknowledges the
            # kill (JOB_KILLED lists the job, with no progress), and nothing is resubmitted
            self._killed.discard(event.job_id)

    def on_requested_call(self, now: float) -> None:
        self._call_received = True  # kills are decided once the whole message is read

    def after_events(self, now: float) -> None:
        """Kill the small jobs that reached the divider. Only now, after every event of the
        message: a job whose runtime equals the divider completes in the same message as the
        call, possibly after it, and Batsim 4 aborts on a kill of a job it has forgotten (one
        whose completion it has sent). One completing in a later message at the same instant
        is killed while complete, which Batsim acknowledges (see :meth:`on_completed`)."""
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


@mypyc_attr(allow_interpreted_subclasses=True)
class ClassifyingScheduler(BatchScheduler):
    """A convenience constructor: the scheduler with a :class:`Classifier` for ``variant``
    (and the :class:`Safeguard` for ``classification-idempotent``; the :class:`Safeguard` and
    the :class:`~batsched_ml.scheduler.guard.Guard` for ``classification-guarded``), over any
    ``predictor``, ``dispatcher`` and ``correction``; ``classifier_options``: the
    :class:`Classifier`'s options (``threshold``, ``small_order``, ``divider_quantile``) and,
    for the guarded variant, the guard's (``guard_weeks``, ...). The classifier's records are
    read through it."""

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
        options, guard_options = split_options(classifier_options or {})
        if guard_options and variant != "classification-guarded":
            raise ValueError(
                f"{', '.join(guard_options)}: the guard's options go with the "
                f"classification-guarded variant, not {variant}"
            )
        self.classifier = Classifier(
            trainer=trainer,
            calendar=calendar,
            feature_mode=feature_mode,
            clairvoyant=variant == "class-clairvoyant",
            cap_small=variant != "classification",
            **options,
        )
        components: list[Component] = [self.classifier]
        self.safeguard: Safeguard | None = None
        self.guard: Guard | None = None
        if variant in ("classification-idempotent", "classification-guarded"):
            self.safeguard = Safeguard(self.classifier)
            components.append(self.safeguard)
        if variant == "classification-guarded":
            self.guard = Guard(self.classifier, GuardOptions(**guard_options))
            components.append(self.guard)
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
