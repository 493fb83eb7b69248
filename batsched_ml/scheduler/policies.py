"""Queue orders (paper, section 5.1), looked up by name.

Each policy gives a sort key for a waiting job; smaller keys go first. Ties are broken by
submission time, then by arrival order (Batsim submits simultaneous jobs in string order of their
ids), so that a schedule is a deterministic function of the event stream. ``p̃`` is the job's
runtime estimate for ordering (``rank_est``: the requested time by default, see
:mod:`batsched_ml.scheduler.predictors`), ``q`` its processors. The scheduler puts its class rank
before these keys (small jobs first, when jobs are classified), whatever the order and the
dispatcher.

========  =====================================================  ==============================
name      order                                                  depends on the current time?
========  =====================================================  ==============================
``fcfs``  submission time                                        no
``wfp``   (wait / p̃)^3 * q, highest first (Argonne's WFP)       yes: re-sorted at every pass
``spf``   p̃ (shortest requested processing time first)           no
``saf``   p̃ * q (smallest requested area first)                  no
========  =====================================================  ==============================

A queue order is any object with ``key(job, now) -> tuple`` (smaller first) and ``dynamic`` (True:
the key depends on ``now``, the queue is re-sorted at each pass; False: it is kept sorted as jobs
arrive, with the key computed once at ``now = 0``), and optionally ``started(job, now)`` (told
each start: an order that learns, as PRB's). Besides the built-in names, :func:`get_policy`
takes a plug-in class (built with no argument): an import path ``mypkg.module:MyOrder`` or an
entry point of group ``batsched_ml.policies`` (:mod:`batsched_ml.plugins`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from batsched_ml import registry
from batsched_ml.plugins import load_plugin


class Waiting(Protocol):
    subtime: float
    seq: int
    rank_est: float
    res: int


class Order(Protocol):
    """A queue order: what the scheduler asks of a policy (see the module docstring)."""

    @property
    def dynamic(self) -> bool: ...

    def key(self, job: Any, now: float) -> tuple[Any, ...]: ...


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    key: Callable[[Waiting, float], tuple[float, float, int]]
    dynamic: bool


def _fcfs(job: Waiting, now: float) -> tuple[float, float, int]:
    return (job.subtime, job.subtime, job.seq)


def _spf(job: Waiting, now: float) -> tuple[float, float, int]:
    return (job.rank_est, job.subtime, job.seq)


def _saf(job: Waiting, now: float) -> tuple[float, float, int]:
    return (job.rank_est * job.res, job.subtime, job.seq)


def wfp_value(wait: float, estimate: float, processors: int) -> float:
    """WFP's key before its ties (by arrival): minus the cube of the wait over the estimate,
    times the processors (the largest first). ``math.pow``, which is what ``**`` computes
    for floats (C's ``pow``), because compiled it is C's ``pow`` on unboxed floats."""
    return -math.pow(wait / estimate, 3.0) * processors


def _wfp(job: Waiting, now: float) -> tuple[float, float, int]:
    return (wfp_value(now - job.subtime, job.rank_est, job.res), job.subtime, job.seq)


POLICIES: dict[str, Policy] = {
    policy.name: policy
    for policy in (
        Policy("fcfs", registry.POLICIES["fcfs"], _fcfs, dynamic=False),
        Policy("wfp", registry.POLICIES["wfp"], _wfp, dynamic=True),
        Policy("spf", registry.POLICIES["spf"], _spf, dynamic=False),
        Policy("saf", registry.POLICIES["saf"], _saf, dynamic=False),
    )
}
assert tuple(POLICIES) == tuple(registry.POLICIES), "the policies are registry.POLICIES"


#: The longest-estimate-first order of the LJF dispatcher (seed 001); not a ``--policy``.
LJF = Policy(
    "ljf",
    "longest estimated processing time first",
    lambda job, now: (-job.rank_est, job.subtime, job.seq),
    dynamic=False,
)


class PriorityRule:
    """The PRB dispatcher's order (seed 001, section 4): decreasing urgency, the job's wait over
    the expected wait of its queue, ties by demand (processors x estimate), smaller first. The
    expected wait of a queue (the SWF queue number) is the mean wait of the jobs of that queue
    started so far, at least one second; a queue with no started job yet uses the mean over all
    queues (urgency 0 before any job started). One instance per scheduler: it learns."""

    name = "prb"
    description = "urgency (wait / expected wait of the queue), ties by demand"
    dynamic = True

    def __init__(self) -> None:
        self.total: dict[object, float] = {}
        self.count: dict[object, int] = {}

    def expected_wait(self, queue: object) -> float | None:
        if self.count.get(queue):
            return max(1.0, self.total[queue] / self.count[queue])
        if self.count:
            return max(1.0, sum(self.total.values()) / sum(self.count.values()))
        return None

    def key(self, job: Waiting, now: float) -> tuple[float, float, float, int]:
        expected = self.expected_wait(_queue_of(job))
        urgency = 0.0 if expected is None else (now - job.subtime) / expected
        return (-urgency, job.res * job.rank_est, job.subtime, job.seq)

    def started(self, job: Waiting, now: float) -> None:
        queue = _queue_of(job)
        self.total[queue] = self.total.get(queue, 0.0) + (now - job.subtime)
        self.count[queue] = self.count.get(queue, 0) + 1


def _queue_of(job: Waiting) -> object:
    inner = getattr(job, "job", None)
    return inner.field("queue") if inner is not None else getattr(job, "queue", None)


def get_policy(name: str) -> Any:
    """The queue order called ``name``: a built-in one (:data:`POLICIES`, any case), else a
    plug-in class built with no argument; :class:`~batsched_ml.errors.ConfigError` naming what
    failed."""
    policy = POLICIES.get(name.lower())
    if policy is not None:
        return policy
    return load_plugin(name, "policy", ("key", "dynamic"), tuple(POLICIES))()
