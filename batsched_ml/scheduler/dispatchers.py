"""Dispatchers: given the ordered queue, which jobs start now, on which machines.

Every dispatcher is an object with one method,
``decide(queue, free, ends, now, starving) -> (started, reservation)``:

- ``queue``: the waiting jobs in the scheduler's order (starving jobs first, then the class rank,
  then the queue order), each with ``res`` (machines) and ``est`` (the runtime it plans with);
- ``free``: the free machines (:class:`~batsched_ml.alloc.MachineSet`), from which the
  dispatcher takes the machines of the jobs it starts (the scheduler starts all of them);
  ``ends``: the running jobs as ``(expected_end, tie, res)`` sorted by expected end;
- ``starving``: whether the queue head has waited past the starvation threshold;
- it returns the jobs to start, in start order, each with its machines, and EASY's reservation
  (``None`` when it made none).

========================  =====================================================================
:class:`Easy`             EASY backfilling (:mod:`.easy`); ``shortest_first``: SJBF (EASY++)
:class:`ListScheduling`   start queue heads while they fit, nothing else (sjf, ljf,
                          ``--no-backfilling``)
:class:`Greedy`           PRB: every job that fits starts, in queue order, nothing is reserved
:class:`Planned`          CPH: a CP-SAT plan of the first jobs (:mod:`.cph`)
``Probabilistic``         EASY whose backfilling also takes a job that probably ends before
                          the reservation (:mod:`.probabilistic`; it learns from finished
                          jobs, so it is also a component of the scheduler)
========================  =====================================================================

Under :class:`Greedy` and :class:`Planned` a starving queue head gets EASY's reservation (their
``fallback``), or the starvation threshold would bound nothing.

The dispatchers of Galleguillos et al. come with their own queue order (:func:`order_for`):
sjf the shortest estimate first (``spf``), ljf the longest (:data:`~.policies.LJF`), prb and cph
by urgency (:class:`~.policies.PriorityRule`); EASY and the probabilistic dispatcher take
``--policy``'s. A job's class rank, when
jobs are classified, stays ahead of any of them (:mod:`.core`).
"""

from __future__ import annotations

from typing import Any, Protocol

from batsched_ml import registry
from batsched_ml.alloc import MachineSet, Runs
from batsched_ml.errors import ConfigError
from batsched_ml.scheduler.cph import ConstraintPlanner
from batsched_ml.scheduler.easy import (
    Ends,
    QueueBlocks,
    Reservation,
    easy_pass,
    greedy_allocation,
)
from batsched_ml.scheduler.parameters import constructor_kwargs
from batsched_ml.scheduler.parts import WaitingJob
from batsched_ml.scheduler.policies import LJF, POLICIES, PriorityRule
from batsched_ml.scheduler.probabilistic import Probabilistic

#: The dispatchers with a planner, whose constructor parameters ``--dispatcher-option`` sets.
PLANNERS: dict[str, type[ConstraintPlanner]] = {"cph": ConstraintPlanner}


def _parameterised(name: str) -> type | None:
    """The class whose constructor parameters ``--dispatcher-option`` sets for ``name``: the
    planner (cph), the probabilistic dispatcher itself, or ``None``."""
    if name == "probabilistic":
        return Probabilistic
    return PLANNERS.get(name)


class Dispatcher(Protocol):
    """What the scheduler asks of a dispatcher (see the module docstring)."""

    name: str

    def decide(
        self, queue: list[WaitingJob], free: MachineSet, ends: Ends, now: float, starving: bool
    ) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]: ...


class Easy:
    """EASY backfilling; ``backfilling=False`` stops at the first job that does not fit (then
    it is :class:`ListScheduling`); ``shortest_first`` backfills the shortest estimate first.

    ``incremental``: the scheduler gives :meth:`decide` the jobs queued since the previous
    pass when nothing else changed, and the pass tests only those (:func:`.easy.easy_pass`,
    the same decisions); ``False`` walks the whole queue every time (the tests compare). The
    scheduler also gives it a kept queue's blocks (:class:`.easy.QueueBlocks`), which the walk
    behind the head passes over where no job may start."""

    name = "easy"

    def __init__(
        self, *, backfilling: bool = True, shortest_first: bool = False, incremental: bool = True
    ) -> None:
        self.backfilling = backfilling
        self.shortest_first = shortest_first
        self.incremental = incremental
        self.previous: Reservation | None = None  # the last pass's reservation

    def decide(
        self,
        queue: list[WaitingJob],
        free: MachineSet,
        ends: Ends,
        now: float,
        starving: bool,
        fresh: list[WaitingJob] | None = None,
        blocks: QueueBlocks | None = None,
    ) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]:
        started, reservation = easy_pass(
            queue,
            free,
            ends,
            now,
            backfilling=self.backfilling,
            shortest_first=self.shortest_first,
            previous=self.previous if self.incremental else None,
            fresh=fresh,
            blocks=blocks,
        )
        self.previous = reservation
        return started, reservation


class ListScheduling(Easy):
    """List scheduling: queue heads start while they fit; no reservation, no backfilling."""

    name = "list"

    def __init__(self) -> None:
        super().__init__(backfilling=False)


class Greedy:
    """PRB's allocation: every job that fits starts, in queue order; a starving head is served
    by ``fallback`` (EASY) instead."""

    name = "prb"

    def __init__(self, fallback: Easy | None = None) -> None:
        self.fallback = fallback if fallback is not None else Easy()

    def decide(
        self, queue: list[WaitingJob], free: MachineSet, ends: Ends, now: float, starving: bool
    ) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]:
        if starving:
            return self.fallback.decide(queue, free, ends, now, starving)
        return greedy_allocation(queue, free), None


class Planned:
    """CPH: the jobs ``planner`` plans to start now; a starving head is served by ``fallback``
    (EASY) instead. ``planner`` keeps the solver's counters (calls, improvements, fallbacks)."""

    name = "cph"

    def __init__(self, planner: ConstraintPlanner, fallback: Easy | None = None) -> None:
        self.planner = planner
        self.fallback = fallback if fallback is not None else Easy()

    def decide(
        self, queue: list[WaitingJob], free: MachineSet, ends: Ends, now: float, starving: bool
    ) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]:
        if starving:
            return self.fallback.decide(queue, free, ends, now, starving)
        return self.planner.plan(queue, free, ends, now), None


def make_dispatcher(
    name: str,
    params: dict[str, Any] | None = None,
    *,
    backfilling: bool = True,
    shortest_first: bool = False,
) -> Dispatcher:
    """The dispatcher called ``name`` (:data:`batsched_ml.registry.DISPATCHERS`).

    ``backfilling`` and ``shortest_first`` configure EASY, the dispatcher itself for ``easy``,
    the fallback of a starving head for ``prb`` and ``cph``; ``params``: the planner's
    constructor parameters (``cph``), or the probabilistic dispatcher's (which is EASY with
    backfilling on, its own fallback: :class:`~batsched_ml.runs.replaying.ReplayConfig` refuses
    it with ``backfilling=False``)."""
    if name not in registry.DISPATCHERS:
        known = ", ".join(registry.DISPATCHERS)
        raise ConfigError(f"unknown dispatcher {name!r} (choose from {known})")
    easy = Easy(backfilling=backfilling, shortest_first=shortest_first)
    if name == "easy":
        return easy
    if name in ("sjf", "ljf"):
        return ListScheduling()
    if name == "prb":
        return Greedy(easy)
    if name == "probabilistic":
        if not backfilling or shortest_first:
            raise ConfigError("the probabilistic dispatcher backfills, in queue order")

        return Probabilistic(**(params or {}))
    return Planned(PLANNERS[name](**(params or {})), easy)


def order_for(dispatcher: str) -> Any:
    """The queue order a dispatcher imposes (a new one: PRB's learns), ``None`` for EASY."""
    if dispatcher == "sjf":  # list scheduling, shortest predicted runtime first
        return POLICIES["spf"]
    if dispatcher == "ljf":
        return LJF
    if dispatcher in ("prb", "cph"):
        return PriorityRule()
    return None


def planner_kwargs(dispatcher: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked and typed against the planner of ``dispatcher`` (as
    :func:`~batsched_ml.scheduler.predictors.predictor_kwargs` does for predictors), or the
    probabilistic dispatcher's own parameters, their values too (the class is built once);
    :class:`ConfigError` naming what is wrong."""
    kind = _parameterised(dispatcher)
    if kind is None:
        having = ", ".join([*PLANNERS, "probabilistic"])
        raise ConfigError(f"the {dispatcher} dispatcher has no parameters (only {having} have)")
    return constructor_kwargs(kind, f"dispatcher {dispatcher}", params)
