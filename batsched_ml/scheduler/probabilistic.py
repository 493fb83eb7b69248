"""Probabilistic backfilling (Nissimov and Feitelson, "Probabilistic backfilling", JSSPP 2007).

EASY trusts one number per job: a job behind the queue head backfills only if its requested time
ends by the head's reservation (the *shadow time*) or it fits in the *extra* machines. Users
request far more than they use, so most jobs that would have ended in time are refused. The
paper's idea is to use the whole distribution of a job's runtime instead, learned from the
history, and to backfill a job when the chance that it delays the head is small.

What this dispatcher does, on EASY's own pass (:func:`~batsched_ml.scheduler.easy.easy_pass`:
the same queue order, heads started in order, the same reservation, shadow time and extra
machines, computed on the requested times of the running jobs):

- a job behind the head that fits now starts as under EASY when its requested time ends by the
  shadow time or it fits in the extra machines: every job EASY would start, this starts too;
- otherwise its *risk*, the probability that it runs longer than ``shadow - now``, is computed
  from its runtime distribution (below). It starts if that risk fits what is left of the pass's
  budget ``epsilon``, which it then consumes. One job alone thus starts when
  ``P(runtime <= shadow - now) >= 1 - epsilon``; several risky starts of one pass share
  ``epsilon``, so that the chance that the pass delays the head at all stays within
  ``epsilon`` (a union bound), not ``epsilon`` per job.

The runtime distribution, as in the paper, is the empirical distribution of the ratio of runtime
to requested time (walltime), per user: the ratios of the user's last ``window`` finished jobs
when there are at least ``min_history`` of them, else those of the machine's last ``window``
finished jobs (a user new to the machine). A job's runtime is its ratio times its own walltime,
so it never exceeds the walltime (Batsim kills a job there; ratios above 1 count as 1). With no
finished job at all, or a job without walltime, the risk is 1: no risky start. The
distribution learns online from finished jobs only (a completion, with its runtime); an attempt
the scheduler killed (the classified variants' safeguard) says nothing of the job's runtime and
is not learned from, as with the predictors.

The paper's text was not available to this project; this is the formulation above, EASY's
structure with one probability per candidate. A public simulator implementation of the method
(the probabilistic EASY scheduler of the pyss simulator) goes further: per-user distributions of
runtimes (not ratios) in power-of-two bins over the last 150 jobs, the running jobs' remaining
runtimes as distributions too (conditioned on how long they have run), and, instead of a
shadow time, the expected probability that the candidate is the job whose machines the head
lacks, summed over the candidate's possible ends, against a threshold of 0.2. That costs a
dynamic programme over the running jobs and processors per candidate and time bin; the
formulation here costs one bisection per candidate.

Semantics, the method's trade-off. Nothing here changes when a job ends: Batsim kills a job only
at its walltime, which the dispatcher never shortens. What it gives up is EASY's guarantee to the
head: a risky start that runs past the shadow time holds machines the head was promised, so the
head starts later than its reservation said (at the latest when that job's walltime ends). Under
EASY with requested times and FCFS that never happens; the study counts how often it does here
(:attr:`Probabilistic.risky_starts`, ``summary.json``, and ``benchmarks/probabilistic_study.py``
for the heads that started after their first reservation). A starving head (waiting past the
starvation threshold) gets EASY's guarantee: no risky start while it waits.

The dispatcher plans with requested times: it refuses another ``--predictor``, the
runtime-clairvoyant variant and ``--no-backfilling``
(:class:`batsched_ml.runs.replaying.ReplayConfig`). Under the classified variants the class rank
still orders the queue, and a small job whose planned runtime is capped at the divider is judged
against that cap first (EASY's test); the risk only speaks for times below it, where the cap does
not change the distribution.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections import deque
from typing import Any

from batsched_ml.alloc import MachineSet, Runs
from batsched_ml.job import Job
from batsched_ml.protocol.events import JobCompleted
from batsched_ml.scheduler.easy import Ends, Reservation, easy_pass
from batsched_ml.scheduler.parts import Component, RunningJob, WaitingJob, cut_short


class RatioWindow:
    """The last ``size`` ratios of runtime to walltime, kept sorted for the distribution."""

    __slots__ = ("order", "size", "sorted")

    def __init__(self, size: int) -> None:
        self.size = size
        self.order: deque[float] = deque()
        self.sorted: list[float] = []

    def add(self, ratio: float) -> None:
        self.order.append(ratio)
        insort(self.sorted, ratio)
        if len(self.order) > self.size:
            oldest = self.order.popleft()
            del self.sorted[bisect_right(self.sorted, oldest) - 1]

    def __len__(self) -> int:
        return len(self.order)

    def exceed(self, ratio: float) -> float:
        """The share of the ratios above ``ratio``: ``P(R > ratio)``."""
        return 1.0 - bisect_right(self.sorted, ratio) / len(self.sorted)


class Probabilistic(Component):
    """EASY with probabilistic backfilling (see the module docstring).

    Parameters
    ----------
    epsilon:
        The chance a pass may take of delaying the head (its risky starts share it).
    min_history:
        Finished jobs of a user needed before the user's own distribution is used (else the
        machine's).
    window:
        Finished jobs kept per user and for the machine (the most recent).
    """

    name = "probabilistic"

    def __init__(self, epsilon: float = 0.1, min_history: int = 5, window: int = 100) -> None:
        if not 0.0 <= epsilon < 1.0:
            raise ValueError(f"epsilon must be in [0, 1), not {epsilon}")
        if min_history < 1:
            raise ValueError(f"min_history must be at least 1, not {min_history}")
        if window < min_history:
            raise ValueError(f"window ({window}) must be at least min_history ({min_history})")
        self.epsilon = epsilon
        self.min_history = min_history
        self.window = window
        self.users: dict[Any, RatioWindow] = {}
        self.machine = RatioWindow(window)
        #: jobs started on their risk so far (``summary.json``)
        self.risky_starts = 0

    # --- learning ---------------------------------------------------------------------------

    def observe(self, job: Job, runtime: float) -> None:
        """Learn a finished job's ratio of runtime to walltime (none without a walltime)."""
        walltime = job.walltime
        if walltime is None:
            return
        ratio = min(runtime / walltime, 1.0)
        user = job.field("user")
        history = self.users.get(user)
        if history is None:
            history = self.users[user] = RatioWindow(self.window)
        history.add(ratio)
        self.machine.add(ratio)

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        if not cut_short(running, event):
            self.observe(running.job, now - running.start)

    # --- deciding ---------------------------------------------------------------------------

    def risk(self, job: Job, seconds: float) -> float:
        """``P(runtime > seconds)`` for ``job``: its user's distribution of ratios (or the
        machine's) times its walltime; 1 when nothing is known, 0 from the walltime on."""
        walltime = job.walltime
        if walltime is None:
            return 1.0
        if seconds >= walltime:
            return 0.0
        history = self.users.get(job.field("user"))
        if history is None or len(history) < self.min_history:
            history = self.machine
        if not len(history):
            return 1.0
        return history.exceed(seconds / walltime)

    def _entry_risk(self, entry: WaitingJob, seconds: float) -> float:
        return self.risk(entry.job, seconds)

    def decide(
        self,
        queue: list[WaitingJob],
        free: MachineSet,
        ends: Ends,
        now: float,
        starving: bool,
    ) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]:
        """EASY's pass with the risky starts (none while the head is starving)."""
        started, reservation = easy_pass(
            queue,
            free,
            ends,
            now,
            risk=None if starving else self._entry_risk,
            budget=self.epsilon,
        )
        if reservation is not None:
            self.risky_starts += reservation.gambled
        return started, reservation
