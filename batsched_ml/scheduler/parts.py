"""The scheduler's state and parts, apart from the scheduler itself: a waiting job, a running
job, and :class:`Component`, the base of the parts attached through named hooks (see
:mod:`.core`'s docstring). Here so that a dispatcher that is also a component (it learns:
:mod:`.probabilistic`) and the scheduler that holds it both import them from below."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from batsched_ml.alloc import Runs
from batsched_ml.job import Job
from batsched_ml.protocol.events import (
    Event,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    Message,
    SimulationBegins,
)

if TYPE_CHECKING:
    from batsched_ml.scheduler.core import BatchScheduler


@dataclass(slots=True)
class WaitingJob:
    """A submitted job not yet started, with what the scheduler derived for it.

    ``est`` is the runtime the dispatcher plans with; ``rank_est`` the estimate the policy orders
    by (the same, except for jobs whose planned runtime is capped, see :mod:`.classified`);
    ``rank`` puts whole classes of jobs first (0 before 1: small before large).
    """

    job: Job
    seq: int
    est: float
    res: int
    subtime: float
    rank_est: float = 0.0
    rank: int = 0
    key: tuple[Any, ...] = ()

    # written out, not generated: compiled (mypyc), a generated __init__ stays interpreted
    # Python and was a tenth of a replay's scheduling time (the same for any other reason)
    def __init__(
        self,
        job: Job,
        seq: int,
        est: float,
        res: int,
        subtime: float,
        rank_est: float = 0.0,
        rank: int = 0,
        key: tuple[Any, ...] = (),
    ) -> None:
        self.job = job
        self.seq = seq
        self.est = est
        self.res = res
        self.subtime = subtime
        self.rank_est = rank_est
        self.rank = rank
        self.key = key


@dataclass(slots=True)
class RunningJob:
    job: Job
    start: float
    est: float
    alloc: Runs
    entry: WaitingJob | None = None
    end_entry: tuple[float, int, int] = (0.0, 0, 0)
    corrections: int = 0
    killed: bool = False  # the scheduler asked Batsim to kill it

    def __init__(  # written out: see WaitingJob
        self,
        job: Job,
        start: float,
        est: float,
        alloc: Runs,
        entry: WaitingJob | None = None,
        end_entry: tuple[float, int, int] = (0.0, 0, 0),
        corrections: int = 0,
        killed: bool = False,
    ) -> None:
        self.job = job
        self.start = start
        self.est = est
        self.alloc = alloc
        self.entry = entry
        self.end_entry = end_entry
        self.corrections = corrections
        self.killed = killed


def cut_short(running: RunningJob, event: JobCompleted) -> bool:
    """Whether ``running`` ended because the scheduler killed it: such an attempt says nothing
    of the job's runtime (the predictor and the probabilistic dispatcher do not learn from it)."""
    return running.killed and event.job_state == "COMPLETED_KILLED"


# compiled (mypyc), a class is closed to interpreted subclasses unless it says otherwise: the
# components of classified.py, the plug-ins and the tests derive from this one
@mypyc_attr(allow_interpreted_subclasses=True)
class Component:
    """A part attached to a :class:`BatchScheduler` through the named hooks of the module
    docstring. Every hook here does nothing; a component overrides those it needs (only those
    are called). :attr:`scheduler` is the scheduler it is attached to."""

    scheduler: BatchScheduler

    def attach(self, scheduler: BatchScheduler) -> None:
        self.scheduler = scheduler

    def on_message(self, message: Message) -> None:
        return None

    def on_begins(self, event: SimulationBegins) -> None:
        return None

    def take_submission(self, event: JobSubmitted) -> WaitingJob | None:
        return None

    def on_admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        return None

    def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Event]:
        return []

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        return None

    def on_requested_call(self, now: float) -> None:
        return None

    def on_jobs_killed(self, event: JobKilled, now: float) -> None:
        return None

    def after_events(self, now: float) -> None:
        return None

    def deferred(self) -> bool:
        return False

    def may_register_more(self) -> bool:
        return False

    @property
    def needs_calendar(self) -> bool:
        return False

    def set_calendar(self, calendar: dict[str, Any]) -> None:
        return None


HOOKS: tuple[str, ...] = (
    "on_message",
    "on_begins",
    "take_submission",
    "on_admit",
    "on_started",
    "on_completed",
    "on_requested_call",
    "on_jobs_killed",
    "after_events",
    "deferred",
    "may_register_more",
)
