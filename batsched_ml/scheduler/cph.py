"""CPH, the hybrid constraint-programming dispatcher (seed 001, section 4; Borghesi et al.).

At each decision CPH

1. *schedules* the first ``window`` jobs of the queue (taken in PRB's urgency order, see
   :class:`~batsched_ml.scheduler.policies.PriorityRule`) with OR-Tools CP-SAT over the *relaxed*
   resource model: the machine is one pool of ``nb_machines`` processors (a cumulative
   constraint), the running jobs hold theirs until their expected end, each queued job holds its
   processors for its predicted runtime. The objective is the total waiting time (the sum of
   start times). The search is guided by PRB: the start variables are branched on in urgency
   order, earliest value first, and the PRB list schedule is given as the first solution (a
   hint). The best solution found within the budget is the plan;
2. *repairs* the plan's allocation: the jobs the plan starts now get machines in urgency
   order (the lowest-numbered free ones); a job that does not fit is postponed.

On one homogeneous resource the relaxed model is exact, so the repair never postpones; it is
there for what the relaxation could not see (it costs one pass).

Time budget: CP-SAT stops after ``budget`` units of its *deterministic* time (about seconds on a
recent core, but counted in work done, not read from a clock), with one worker and a fixed seed,
so that a replay is byte-for-byte reproducible; the wall time a decision takes is what
``benchmarks/bench_cph.py`` measures. When no solution is found within the budget, the PRB list
schedule (the hint) is the plan. Decisions that need no search are taken without calling the
solver: nothing fits (nothing starts) and everything fits (everything starts).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from importlib.util import find_spec
from typing import Protocol, TypeVar

from batsched_ml.alloc import MachineSet, Runs
from batsched_ml.errors import UserError, check_integer
from batsched_ml.scheduler.easy import greedy_allocation


class Candidate(Protocol):
    res: int
    est: float


C = TypeVar("C", bound=Candidate)


class ConstraintPlanner:
    """The CP stage and the repair of CPH; ``plan`` is one decision.

    Parameters
    ----------
    window:
        How many jobs, from the head of the urgency-ordered queue, the CP model schedules.
    budget:
        CP-SAT's deterministic time limit per decision.
    wall_limit:
        An optional cap in wall-clock seconds per decision (default: none). ``budget`` alone
        bounds the work of a decision and keeps the run reproducible; a decision that hits a
        wall-clock cap depends on how loaded the machine was, so each one is counted
        (:attr:`wall_capped`, in the run's ``timing.json``) and the command warns.
    random_state:
        CP-SAT's random seed.
    """

    def __init__(
        self,
        window: int = 32,
        budget: float = 0.001,
        wall_limit: float | None = None,
        random_state: int = 0,
    ) -> None:
        if window < 1:
            raise ValueError(f"CPH window must be at least 1 job, not {window}")
        if not budget > 0 or (wall_limit is not None and not wall_limit > 0):
            raise ValueError(f"CPH budget and wall_limit must be positive: {budget}, {wall_limit}")
        check_integer("random_state", random_state, 0)
        if find_spec("ortools") is None:  # imported by solve(); said here, before the run starts
            raise UserError(
                "the cph dispatcher needs OR-Tools, not installed here: pip install ortools"
            )
        self.window = window
        self.budget = budget
        self.wall_limit = wall_limit
        self.random_state = random_state
        self.calls = 0  # decisions the solver was asked for
        self.improved = 0  # ... where it starts other jobs now than PRB's list schedule
        self.fallbacks = 0  # ... where it found no solution in the budget (the hint was used)
        self.wall_capped = 0  # ... stopped by wall_limit: their outcome depends on the machine

    def plan(
        self,
        queue: Sequence[C],
        free: MachineSet,
        ends: Sequence[tuple[float, int, int]],
        now: float,
    ) -> list[tuple[C, Runs]]:
        """The jobs to start now, with their machines (taken from ``free``), in urgency
        order."""
        free_count = free.count
        if not queue or free_count == 0 or min(job.res for job in queue) > free_count:
            return []
        if sum(job.res for job in queue) <= free_count:
            chosen: Sequence[C] = queue
        else:
            window = queue[: self.window]
            starts = self.solve(window, free_count, ends, now)
            chosen = [job for job, start in zip(window, starts, strict=True) if start == 0]
        return repair(chosen, free)

    def solve(
        self,
        window: Sequence[C],
        free_count: int,
        ends: Sequence[tuple[float, int, int]],
        now: float,
    ) -> list[int]:
        """The CP plan: each window job's start, in seconds from now (see the module
        docstring)."""
        from ortools.sat.python import cp_model

        durations = [max(1, math.ceil(job.est)) for job in window]
        releases: dict[int, int] = {}  # remaining time -> processors released then
        for end, _tie, res in ends:
            remaining = max(1, math.ceil(end - now))
            releases[remaining] = releases.get(remaining, 0) + res
        capacity = free_count + sum(releases.values())
        hint = list_schedule(window, durations, free_count, sorted(releases.items()))
        horizon = max(releases, default=0) + sum(durations)  # room for any schedule

        model = cp_model.CpModel()
        starts, intervals, demands = [], [], []
        for i, job in enumerate(window):
            start = model.new_int_var(0, horizon - durations[i], f"s{i}")
            model.add_hint(start, hint[i])
            starts.append(start)
            intervals.append(model.new_fixed_size_interval_var(start, durations[i], f"j{i}"))
            demands.append(job.res)
        for remaining, res in releases.items():
            intervals.append(model.new_fixed_size_interval_var(0, remaining, f"r{remaining}"))
            demands.append(res)
        model.add_cumulative(intervals, demands, capacity)
        model.minimize(sum(starts))
        model.add_decision_strategy(
            starts, cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE
        )  # PRB's order: the window is in urgency order

        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = self.random_state
        solver.parameters.max_deterministic_time = self.budget
        if self.wall_limit is not None:
            solver.parameters.max_time_in_seconds = self.wall_limit
        # no handler of its own: OR-Tools' SIGINT handler swallowed Ctrl-C (or deadlocked);
        # Python's raises KeyboardInterrupt as soon as this short solve returns
        solver.parameters.catch_sigint_signal = False
        status = solver.solve(model)
        self.calls += 1
        if self.wall_limit is not None and solver.wall_time >= self.wall_limit:
            self.wall_capped += 1
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            values = [solver.value(start) for start in starts]
        else:
            self.fallbacks += 1
            values = hint
        if [v == 0 for v in values] != [h == 0 for h in hint]:
            self.improved += 1
        return values


def list_schedule(
    jobs: Sequence[Candidate],
    durations: Sequence[int],
    free_count: int,
    releases: Sequence[tuple[int, int]],
) -> list[int]:
    """PRB's serial schedule over the relaxed model: each job in order at the earliest time
    enough processors are free for its whole duration (times relative to now). ``releases`` are
    ``(time, processors)`` sorted by time, the running jobs' expected ends."""
    # the free-processor profile as breakpoints: profile[k] = (time, free from then on)
    times = [0]
    free = [free_count]
    for t, res in releases:
        if t == times[-1]:
            free[-1] += res
        else:
            times.append(t)
            free.append(free[-1] + res)
    starts = []
    for job, duration in zip(jobs, durations, strict=True):
        k = 0
        while True:
            start = times[k]
            end = start + duration
            j = k
            while j < len(times) and times[j] < end:
                if free[j] < job.res:
                    break
                j += 1
            else:
                break
            k = j + 1  # the profile dips below the demand at j: try after it
        starts.append(start)
        _occupy(times, free, start, end, job.res)
    return starts


def _occupy(times: list[int], free: list[int], start: int, end: int, res: int) -> None:
    """Take ``res`` processors of the profile over [start, end)."""
    for t in (start, end):
        k = bisect_left(times, t)
        if k == len(times) or times[k] != t:
            times.insert(k, t)
            free.insert(k, free[k - 1])
    k = bisect_left(times, start)
    while k < len(times) and times[k] < end:
        free[k] -= res
        k += 1


def repair(chosen: Sequence[C], free: MachineSet) -> list[tuple[C, Runs]]:
    """PRB's allocation of the planned starts: in order, the lowest-numbered free machines; a
    job that does not fit any more is postponed to a later decision."""
    return greedy_allocation(chosen, free)
