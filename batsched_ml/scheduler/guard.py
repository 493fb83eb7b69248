"""The guard of the ``classification-guarded`` variant: the paper's method (the classifier and
its kill-and-resubmit safeguard, :mod:`.classified`) applied only in the weeks where it pays on
this machine, judged online from finished jobs only.

Why a guard. Classification gains only when jobs wait: a small job put ahead of the large ones
saves the wait it would have had. Its cost does not depend on the waits: every false small job
(a large job the forest calls small) is killed at the divider and resubmitted, losing a
divider-long run and the machines it held. On a machine or in a stretch of time where jobs
hardly wait, the paper's method can only lose (docs/closing-the-gap.md: worse than its base in
11 of 52 trace x policy cells, mostly on such machines).

The decision, once a week (:func:`decide`), from the jobs that finished in the last
``guard_weeks`` weeks (their true runtimes are known), when the week's model arrives:

- no model yet (no divider): off (the classifier calls nothing small anyway);
- fewer than ``guard_min_jobs`` such jobs: the state in force stays (initially off);
- otherwise on iff their mean bounded slowdown, each job's first wait (start of its first
  attempt minus its submission) over its runtime, bounded as the reports bound it
  (:func:`batsched_ml.slowdown.bounded_slowdown`), is at least ``guard_slowdown`` (the
  *pressure*), **and** at least ``guard_waiting_share`` of them had a bounded slowdown of at
  least ``guard_slowdown`` themselves (the pressure is shared). The first wait leaves out the
  runs the safeguard killed, so that the kills of the weeks on do not keep the guard on by
  themselves.
- classification that is on goes off only when that rule says off ``guard_off_after`` weeks
  in a row (2 by default; :class:`GuardOptions` says why); off goes on at once.

Why this measure, and not the others measured (docs/guarded.md says how): the gain of
classification is the bounded slowdown the small jobs do not spend waiting, so it is large
exactly when the recent jobs' bounded slowdown is; while the kills cost each false small at
most about one slowdown unit of its own (a lost divider-long run, the divider below its
runtime). A mean wait in units of the divider, the exchange rate of that trade in seconds,
kept classification off in 29 % of HPC2N-2002's weeks under FCFS (its divider is long) and
lost a fifth of the gain there; an absolute wait (hours) does not transfer between machines.
With 2 (jobs waited on average at least as long as they ran) the weeks off held at most 2 % of
the paper's method's gain on the paper traces (``benchmarks/guard_candidates.py``).

Why the share as well. A mean is moved by a few jobs: on LLNL-Atlas-2006 one burst made about
2 % of a fortnight's jobs wait hours, the mean bounded slowdown of the window went just above
2 for two weeks, and the guard switched on and killed some 200 jobs for a loss. Classification
pays when many small jobs wait, since it kills a fixed share of the jobs it calls small
(one in six to one in five on every trace measured) wherever it is on. With 5 %, a burst that
hits one job in fifty no longer switches it on, and on the paper traces the weeks the share
keeps off held at most 2 % of the method's gain (``benchmarks/guard_candidates.py``).

While off, every job is queued and planned as the base variant would queue it (class rank 1
for all, planned runtime the uncapped estimate), so none is killed; the classifier still
classifies and learns (its features, training set and the weekly quality of its predictions
are those of the forest, on or off), so that the guard's weeks on have the paper's model.
Jobs already queued keep the class they were admitted with.

The decision and every quantity it used are written week by week into ``weekly_quality.csv``
(:meth:`Guard.table`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from batsched_ml.predict.training import WEEK, week_of
from batsched_ml.protocol.events import JobCompleted, Message
from batsched_ml.scheduler.core import Component, RunningJob, WaitingJob
from batsched_ml.slowdown import bounded_slowdown

#: the guard's options (``--classifier-option``) and their defaults (:class:`GuardOptions`)
GUARD_DEFAULTS: dict[str, Any] = {
    "guard_weeks": 2,
    "guard_slowdown": 2.0,
    "guard_waiting_share": 0.05,
    "guard_min_jobs": 50,
    "guard_off_after": 2,
}

#: the columns the guard adds to ``weekly_quality.csv``
GUARD_COLUMNS = (
    "guard_on",
    "guard_reason",
    "guard_jobs",
    "guard_mean_wait",
    "guard_slowdown",
    "guard_waiting_share",
    "guard_divider",
    "guard_false_small_share",
)


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """A finished workload job as the guard sees it: when it finished, how long its first
    attempt waited, its final runtime, and (for the kill share) whether the forest called it
    small and the divider in force at its submission."""

    finish: float
    wait: float
    runtime: float
    predicted_small: bool
    divider: float | None


@dataclass(frozen=True)
class GuardDecision:
    """One week's decision and what it was made from (``None``: not computed)."""

    week: int
    on: bool
    reason: str
    jobs: int
    mean_wait: float | None = None  # the window's mean first wait (s)
    slowdown: float | None = None  # the window's mean bounded slowdown (first waits)
    waiting_share: float | None = None  # the share of them at or above ``guard_slowdown``
    divider: float | None = None  # the new week's
    false_small_share: float | None = None  # among finished jobs the forest called small
    held: bool = False  # the rule said off, and the state in force (on) was kept


def decide(
    week: int,
    finished: list[FinishedJob],
    divider: float | None,
    previous: bool,
    *,
    slowdown: float,
    min_jobs: int,
    waiting_share: float = GUARD_DEFAULTS["guard_waiting_share"],
    off_after: int = GUARD_DEFAULTS["guard_off_after"],
    below: int = 0,
) -> GuardDecision:
    """The guard's decision for ``week`` (see the module docstring): ``finished`` are the jobs
    that finished in the window, ``divider`` the new week's (``None``: no model yet),
    ``previous`` the state in force, ``slowdown`` the least mean bounded slowdown to be on,
    ``waiting_share`` the least share of the jobs with a bounded slowdown of at least
    ``slowdown`` to be on. With ``off_after`` above 1, classification that is on goes off only
    when the rule says off for that many weeks in a row: ``below`` is how many weeks in a row
    before this one it said off while the state was kept on (a held week says so in its reason).
    Pure: the same inputs give the same decision."""
    n = len(finished)
    judged = [f.runtime >= f.divider for f in finished if f.predicted_small and f.divider]
    false_small = sum(judged) / len(judged) if judged else None
    if divider is None or divider <= 0.0:
        return GuardDecision(week, False, "no model", n, false_small_share=false_small)
    if n < min_jobs:
        reason = f"{n} finished jobs < {min_jobs}: stays {'on' if previous else 'off'}"
        return GuardDecision(week, previous, reason, n, divider=divider)
    waits = np.array([f.wait for f in finished])
    runtimes = np.array([f.runtime for f in finished])
    wait = float(waits.mean())
    slowdowns = bounded_slowdown(waits, runtimes)
    mean = float(slowdowns.mean())
    share = float(np.count_nonzero(slowdowns >= slowdown)) / n
    pressed, shared = mean >= slowdown, share >= waiting_share
    reason = f"slowdown {mean:.3f} {'>=' if pressed else '<'} {slowdown:g}"
    if pressed:
        reason += f", waiting {100 * share:.1f}% {'>=' if shared else '<'} {100 * waiting_share:g}%"
    on = pressed and shared
    held = not on and previous and below + 1 < off_after
    if held:
        reason += f": stays on ({below + 1} of {off_after} weeks below in a row)"
    return GuardDecision(
        week, on or held, reason, n, wait, mean, share, divider, false_small, held=held
    )


@dataclass(frozen=True)
class GuardOptions:
    """The guard's settings (``--classifier-option guard_weeks=4``), checked when made.

    ``guard_weeks`` (2)
        The window: the jobs that finished in the last this many weeks. Two weeks: one is a few
        hundred jobs on the smaller paper traces, a noisy mean; longer windows react later to
        a machine that fills up.
    ``guard_slowdown`` (2.0)
        Classification is on for the week iff those jobs' mean bounded slowdown (first waits)
        is at least this: at 2, they waited on average at least as long as they ran. At 1 the
        guard is on whenever it has a model and enough jobs (the paper's method).
    ``guard_waiting_share`` (0.05)
        ... and at least this share of those jobs had a bounded slowdown of at least
        ``guard_slowdown`` themselves: a burst that makes a few jobs wait long moves the mean,
        not the share. Between 0 and 1; at 0 only the mean counts.
    ``guard_min_jobs`` (50)
        Fewer finished jobs in the window than this: the state in force stays (a mean of a few
        jobs decides nothing).
    ``guard_off_after`` (2)
        Classification that is on goes off only when the rule says off this many weeks in a
        row (switching on is at once). One isolated week off costs a run more than that week:
        on RICC-2010-2 under SAF, one burst of short jobs put the guard off for a single week
        of 21, and the five weeks after it held 5 to 57 % more false smalls than the paper's
        method's in each shaken copy. At 1 the rule decides each week alone.
    """

    guard_weeks: int = GUARD_DEFAULTS["guard_weeks"]
    guard_slowdown: float = GUARD_DEFAULTS["guard_slowdown"]
    guard_waiting_share: float = GUARD_DEFAULTS["guard_waiting_share"]
    guard_min_jobs: int = GUARD_DEFAULTS["guard_min_jobs"]
    guard_off_after: int = GUARD_DEFAULTS["guard_off_after"]

    def __post_init__(self) -> None:
        if self.guard_weeks < 1:
            raise ValueError(f"guard_weeks must be at least 1, not {self.guard_weeks}")
        if not self.guard_slowdown >= 1.0:  # (NaN too)
            raise ValueError(f"guard_slowdown must be at least 1, not {self.guard_slowdown}")
        if not 0.0 <= self.guard_waiting_share <= 1.0:
            raise ValueError(
                f"guard_waiting_share must be between 0 and 1, not {self.guard_waiting_share}"
            )
        if self.guard_min_jobs < 1:
            raise ValueError(f"guard_min_jobs must be at least 1, not {self.guard_min_jobs}")
        if self.guard_off_after < 1:
            raise ValueError(f"guard_off_after must be at least 1, not {self.guard_off_after}")


class Guard(Component):
    """Switches its classifier's classes on or off week by week (the module docstring), with
    :class:`GuardOptions`; attached after the :class:`~.classified.Classifier` and the
    :class:`~.classified.Safeguard`, so that it sees the week's new model and each job's class
    before it is queued."""

    def __init__(self, classifier: Any, options: GuardOptions | None = None) -> None:
        self.classifier = classifier
        self.options = options if options is not None else GuardOptions()
        self.on = False
        self.week = -1
        self.decisions: list[GuardDecision] = []
        self.demoted = 0  # jobs the forest called small, queued large because the guard was off
        self._finished: deque[FinishedJob] = deque()
        self._first_start: dict[str, float] = {}  # workload job -> its first attempt's start
        self._records = 0  # the classifier's records seen so far
        self._below = 0  # weeks in a row the rule said off while classification stayed on

    def on_message(self, message: Message) -> None:
        week = week_of(message.now)
        if week > self.week:
            self.week = week
            options = self.options
            oldest = message.now - options.guard_weeks * WEEK
            finished = self._finished
            while finished and finished[0].finish < oldest:
                finished.popleft()
            decision = decide(
                week,
                list(finished),
                self.classifier.model.divider,
                self.on,
                slowdown=options.guard_slowdown,
                min_jobs=options.guard_min_jobs,
                waiting_share=options.guard_waiting_share,
                off_after=options.guard_off_after,
                below=self._below,
            )
            self._below = self._below + 1 if decision.held else 0
            self.on = decision.on
            self.decisions.append(decision)

    def on_admit(self, entry: WaitingJob, event: Any) -> None:
        if not self.on and entry.rank < 1:  # called small while the guard is off: large
            entry.rank = 1
            entry.est = entry.rank_est
            self.demoted += 1

    def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Any]:
        original = self.classifier.origin_of.get(entry.job.id, entry.job.id)
        self._first_start.setdefault(original, now)
        return []

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        records = self.classifier.records
        if len(records) == self._records:  # a killed attempt (resubmitted), not the job's end
            return
        self._records = len(records)
        record = records[-1]
        first = self._first_start.pop(record.job_id, running.start)
        submitted = running.entry.subtime if running.entry is not None else running.job.subtime
        self._finished.append(
            FinishedJob(
                now, first - submitted, record.runtime, record.predicted_small, record.divider
            )
        )

    def table(self) -> list[dict[str, Any]]:
        """The decisions, one row per week, as ``weekly_quality.csv``'s guard columns."""
        return [
            {
                "week": d.week,
                "guard_on": d.on,
                "guard_reason": d.reason,
                "guard_jobs": d.jobs,
                "guard_mean_wait": d.mean_wait,
                "guard_slowdown": d.slowdown,
                "guard_waiting_share": d.waiting_share,
                "guard_divider": d.divider,
                "guard_false_small_share": d.false_small_share,
            }
            for d in self.decisions
        ]


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--classifier-option`` settings split into the classifier's and the guard's (the
    ``guard_*`` keys): one option list for the variant, one constructor for each part."""
    guard = {key: value for key, value in options.items() if key.startswith("guard_")}
    return {k: v for k, v in options.items() if k not in guard}, guard
