"""EASY backfilling: the one implementation every policy and variant of batsched-ml uses.

Given the queue in priority order, the free machines and the running jobs' expected ends, one
pass does what EASY (Lifka, 1995) does:

1. start queue heads, in order, while they fit;
2. the first job that does not fit (the *head*) gets a reservation: walking the running jobs by
   expected end, the *shadow time* is the first end at which enough machines are free for it, and
   the *extra* machines are those free at the shadow time beyond what the head needs;
3. every later job that fits now starts if it does not delay that reservation: it is expected to
   end by the shadow time, or it uses no more than the extra machines (which it then consumes).

The probabilistic dispatcher (:mod:`.probabilistic`) adds a fourth way, on the same pass: a job
that passes neither test may still start when the chance that it outlives the shadow time (its
``risk``) fits what is left of the pass's risk budget, which it then consumes; such a job may
delay the head (see that module).

Expected ends come from the runtime estimate (requested time by default). A running job that has
outlived its estimate is expected to end *now*: the reservation then cannot be pushed later by
anything that is backfilled, since a backfilled job must either end by ``now`` (impossible) or
use extra machines, which are counted as if the overdue job had already released its machines.
The head is therefore never delayed by a backfilled job, whatever the estimates.

A pass after one that left a reservation, when nothing but new jobs came since (no completion, no
corrected estimate: the same free machines and the same expected ends, the same head first in
the queue), tests only the new jobs (:func:`easy_pass`'s ``previous`` and ``fresh``): every
other job behind the head was refused by the previous pass, and still is, since the rule is
monotone. A job is refused when it needs more machines than are free, or when it would end
after the shadow time and needs more than the extra machines; between the two passes the free
machines did not grow, time did not go back, and the pass checks that the shadow time is the
same and the extra machines no more than the previous pass left. Queues of thousands of waiting
jobs (RICC, CEA-Curie) made that walk most of a replay's time. An edit of the rule that keeps it
monotone keeps this exact; ``tests/test_easy.py`` compares the two passes on random workloads
under every policy, so an edit that breaks it fails there.

A long kept queue (:class:`QueueBlocks`, which the scheduler keeps under the built-in static
orders from hundreds of jobs waiting) lets the walk behind the head pass over whole blocks of
jobs: within a walk the free machines and the extra ones only fall, and the shadow time stays,
so a block whose smallest job needs more machines than are free, or more than the extra ones
while its shortest estimate ends after the shadow time, has no job that may start. On RICC
under SPF a walk passed over 1,293 jobs to test 8; ``tests/test_policies.py`` compares the walk
with and without the blocks.

The free machines are a :class:`~batsched_ml.alloc.MachineSet`; a started job takes the
lowest-numbered free machines, which the pass removes from that set as it goes (the scheduler
starts every job the pass returns), so that no allocation copies or walks the whole machine.

This is the only EASY: every run, whichever simulator plays Batsim, is decided here.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from batsched_ml.alloc import MachineSet, Runs
from batsched_ml.scheduler.parts import WaitingJob

#: The running jobs' expected ends, ``(expected_end, tie, res)`` sorted by expected end.
Ends = list[tuple[float, int, int]]


class Candidate(Protocol):
    """What PRB's allocation needs of a job (:func:`greedy_allocation`, CPH's repair)."""

    res: int
    est: float


@dataclass(slots=True)
class Reservation:
    """The reservation of one pass: ``head`` may start at ``shadow`` at the latest (if the
    estimates hold), with ``extra`` machines to spare at that time; ``left``: the extra
    machines the pass's backfilled jobs did not take. ``gambled``: the jobs the pass started on
    their risk (the probabilistic dispatcher), which may delay ``head``."""

    head: WaitingJob
    shadow: float
    extra: int
    left: int = 0
    gambled: int = 0

    def __init__(  # written out: see parts.WaitingJob
        self, head: WaitingJob, shadow: float, extra: int, left: int = 0, gambled: int = 0
    ) -> None:
        self.head = head
        self.shadow = shadow
        self.extra = extra
        self.left = left
        self.gambled = gambled


class QueueBlocks:
    """The jobs of a queue behind its starving head (from position :attr:`start`), in queue
    order, cut into blocks of at most ``2 * size`` jobs that each know their smallest ``res``
    and ``est`` (and how many jobs have it): what lets EASY's walk behind the head pass over a
    block none of whose jobs may start (see the module docstring).

    The scheduler that keeps the queue tells the blocks each change, by position behind
    :attr:`start` (:meth:`insert`, :meth:`remove`): a position found by counting the blocks'
    sizes from the nearer end, never by comparing keys (the queue's own bisection has found
    it). ``check_consistency`` checks that they hold the queue. A job's ``res`` and ``est`` do
    not change while it waits."""

    def __init__(self, size: int = 64) -> None:
        if size < 1:
            raise ValueError(f"blocks of {size} jobs")
        self.size = size
        self.blocks: list[list[WaitingJob]] = []
        self.least_res: list[int] = []
        self.least_est: list[float] = []
        self.ties_res: list[int] = []  # how many jobs of the block have its least res
        self.ties_est: list[int] = []
        self.count = 0
        self.start = 0  # the position in the walked queue of the first block's first job

    def __len__(self) -> int:
        return self.count

    def jobs(self) -> list[WaitingJob]:
        """Every job, in order."""
        return [job for block in self.blocks for job in block]

    def _find(self, at: int) -> tuple[int, int]:
        """The block of position ``at`` (``count`` for the end) and the position in it."""
        blocks = self.blocks
        if 2 * at <= self.count:
            b = 0
            last = len(blocks) - 1
            while b < last and at >= len(blocks[b]):
                at -= len(blocks[b])
                b += 1
            return b, at
        rest = self.count - at  # the jobs from ``at`` to the end
        b = len(blocks) - 1
        while b > 0 and rest > len(blocks[b]):
            rest -= len(blocks[b])
            b -= 1
        return b, len(blocks[b]) - rest

    def insert(self, at: int, entry: WaitingJob) -> None:
        """Put ``entry`` at position ``at``."""
        if not self.blocks:
            self.count = 1
            self.blocks.append([entry])
            self.least_res.append(entry.res)
            self.least_est.append(entry.est)
            self.ties_res.append(1)
            self.ties_est.append(1)
            return
        b, i = self._find(at)
        block = self.blocks[b]
        block.insert(i, entry)
        self.count += 1
        res = entry.res
        if res < self.least_res[b]:
            self.least_res[b] = res
            self.ties_res[b] = 1
        elif res == self.least_res[b]:
            self.ties_res[b] += 1
        est = entry.est
        if est < self.least_est[b]:
            self.least_est[b] = est
            self.ties_est[b] = 1
        elif est == self.least_est[b]:
            self.ties_est[b] += 1
        if len(block) > 2 * self.size:  # split in two
            self.blocks.insert(b + 1, block[self.size :])
            del block[self.size :]
            for values in (self.least_res, self.ties_res, self.ties_est):
                values.insert(b + 1, 0)
            self.least_est.insert(b + 1, 0.0)
            self._measure(b)
            self._measure(b + 1)

    def remove(self, at: int, entry: WaitingJob) -> None:
        """Take out ``entry``, at position ``at``."""
        b, i = self._find(at)
        block = self.blocks[b]
        if i >= len(block) or block[i] is not entry:
            # a bug, not the peer's doing: a traceback
            raise RuntimeError(f"job {entry.job.id} is not at its place in the queue's blocks")
        del block[i]
        self.count -= 1
        if not block:
            self._drop(b)
            return
        if b + 1 < len(self.blocks) and 2 * len(block) < self.size:
            following = self.blocks[b + 1]
            if len(block) + len(following) <= 2 * self.size:  # a small block joins the next
                block.extend(following)
                self._drop(b + 1)
                self._measure(b)
                return
        if entry.res == self.least_res[b]:
            self.ties_res[b] -= 1
        if entry.est == self.least_est[b]:
            self.ties_est[b] -= 1
        if not self.ties_res[b] or not self.ties_est[b]:  # its least was the last of its kind
            self._measure(b)

    def _drop(self, b: int) -> None:
        del self.blocks[b], self.least_res[b], self.least_est[b]
        del self.ties_res[b], self.ties_est[b]

    def _measure(self, b: int) -> None:
        """The least ``res`` and ``est`` of block ``b``, and their ties, counted again."""
        block = self.blocks[b]
        least_res = block[0].res
        least_est = block[0].est
        ties_res = 0
        ties_est = 0
        for job in block:
            res = job.res
            if res < least_res:
                least_res = res
                ties_res = 1
            elif res == least_res:
                ties_res += 1
            est = job.est
            if est < least_est:
                least_est = est
                ties_est = 1
            elif est == least_est:
                ties_est += 1
        self.least_res[b] = least_res
        self.least_est[b] = least_est
        self.ties_res[b] = ties_res
        self.ties_est[b] = ties_est


def reservation_for(head_res: int, free_count: int, ends: Ends, now: float) -> tuple[float, int]:
    """Shadow time and extra machines for a head of ``head_res`` machines.

    ``ends`` are the running jobs as ``(expected_end, tie, res)`` sorted by expected end (jobs
    started earlier in the same pass included). Every job ending at the shadow time counts as
    released then.
    """
    available = free_count
    shadow = None
    for end, _tie, res in ends:
        if shadow is not None and end > shadow:
            break
        available += res
        if shadow is None and available >= head_res:
            shadow = end if end > now else now
    if shadow is None:  # cannot happen when the head fits the machine
        raise ValueError(f"a job of {head_res} machines can never start on this machine")
    return shadow, available - head_res


def reservation_after(
    head_res: int, started: list[WaitingJob], free_count: int, ends: Ends, now: float
) -> tuple[float, int]:
    """:func:`reservation_for` the head of a pass that has just started ``started`` (in that
    order, ``free_count`` machines left): their expected ends count too."""
    if started:
        ends = list(ends)
        for k, job in enumerate(started):
            insort(ends, (now + job.est, -1 - k, job.res))
    return reservation_for(head_res, free_count, ends, now)


C = TypeVar("C", bound=Candidate)

#: Rounding allowed when risks are summed against the budget: three risks of 0.1 fit a budget of
#: 0.3 (whose float differences would otherwise leave 0.09999999999999998 for the third).
RISK_TOLERANCE: Final = 1e-9


def greedy_allocation(queue: Sequence[C], free: MachineSet) -> list[tuple[C, Runs]]:
    """PRB's allocation: in queue order, every job that fits gets the lowest-numbered free
    machines (taken from ``free``); one that does not fit is passed over (the PRB dispatcher,
    CPH's repair)."""
    started: list[tuple[C, Runs]] = []
    for job in queue:
        if job.res <= free.count:
            started.append((job, free.take_lowest(job.res)))
            if free.count == 0:
                break
    return started


def easy_pass(
    queue: list[WaitingJob],
    free: MachineSet,
    ends: Ends,
    now: float,
    *,
    backfilling: bool = True,
    shortest_first: bool = False,
    greedy: bool = False,
    previous: Reservation | None = None,
    fresh: list[WaitingJob] | None = None,
    risk: Callable[[WaitingJob, float], float] | None = None,
    budget: float = 0.0,
    blocks: QueueBlocks | None = None,
) -> tuple[list[tuple[WaitingJob, Runs]], Reservation | None]:
    """One EASY pass. Returns the jobs to start with their machines (taken from ``free``), in
    start order, and the reservation made (``None`` if the whole queue started). With
    ``backfilling=False`` the pass stops at the head (plain list scheduling), which makes no
    reservation. With ``shortest_first`` the jobs behind the head are tried for backfilling in
    order of their estimate, shortest first, queue order among equals (SJBF, as EASY++ does).
    With ``greedy`` every job that fits starts, in queue order, and nothing is reserved (the PRB
    dispatcher's allocation). With ``risk``, a job behind the head that fits now but passes
    neither of EASY's tests starts when ``risk(job, shadow - now)`` (the chance that it runs
    longer than that) is at most what is left of ``budget``, and uses that much of it: the
    chance that the pass's risky starts delay the head stays within ``budget`` (a union
    bound).

    ``previous`` and ``fresh``: the reservation of the previous pass and the jobs queued since
    (in queue order), given when nothing else changed (the same free machines and expected
    ends): only those jobs are tested, if the head and the reservation are still the same
    (see the module docstring); else the whole queue is walked. Not with ``risk``, whose
    budget is the pass's own (a job refused for want of it may start at the next pass).

    ``blocks``: ``queue`` from ``blocks.start`` on, in blocks (:class:`QueueBlocks`), for the
    walk behind the head to pass over the blocks that have no job to test (not with ``risk``,
    nor ``shortest_first``, which walks its own order)."""
    if greedy:
        return greedy_allocation(queue, free), None
    if backfilling and risk is None and previous is not None and fresh is not None:
        after = _pass_after(queue, free, ends, now, previous, fresh, shortest_first)
        if after is not None:
            return after
    started: list[tuple[WaitingJob, Runs]] = []
    free_count = free.count
    index = 0
    size = len(queue)
    while index < size:
        job = queue[index]
        if job.res > free_count:
            break
        started.append((job, free.take_lowest(job.res)))
        free_count -= job.res
        index += 1
    if index == size or not backfilling:
        return started, None
    head = queue[index]
    shadow, extra = reservation_after(head.res, [job for job, _ in started], free_count, ends, now)
    reservation = Reservation(head, shadow, extra, extra)
    if free_count == 0:
        return started, reservation
    if shortest_first:  # stable: queue order among equals
        behind, first = sorted(queue[index + 1 :], key=_estimate), 0
    elif blocks is not None and risk is None:
        reservation.left = _backfill_blocks(
            queue, index + 1, blocks, free, now, shadow, extra, started
        )
        return started, reservation
    else:
        behind, first = queue, index + 1
    reservation.left, reservation.gambled = _backfill(
        behind, first, free, now, shadow, extra, started, risk, budget
    )
    return started, reservation


def _estimate(job: WaitingJob) -> float:
    return job.est


def backfill_room(res: int, est: float, now: float, shadow: float, extra: int) -> int:
    """EASY's rule for a job behind the head that fits the free machines: it may start if it
    is expected to end by the shadow time (the extra machines are left as they are) or if it
    fits the extra machines (it uses that many of them). The extra machines left when it may,
    -1 when it may not."""
    if now + est <= shadow:
        return extra
    if res <= extra:
        return extra - res
    return -1


def _backfill(
    behind: list[WaitingJob],
    first: int,
    free: MachineSet,
    now: float,
    shadow: float,
    extra: int,
    started: list[tuple[WaitingJob, Runs]],
    risk: Callable[[WaitingJob, float], float] | None = None,
    budget: float = 0.0,
    stop: int | None = None,
) -> tuple[int, int]:
    """EASY's rule for the jobs behind the head, ``behind[first:stop]`` in that order: a job that
    fits starts (appended to ``started``, its machines taken from ``free``) if it is expected to
    end by the shadow time or uses no more than the extra machines (which it then consumes), or,
    with ``risk``, if its risk fits what is left of ``budget`` (which it then consumes). Returns the
    extra machines left and the number of jobs started on their risk.

    Typed on the concrete :class:`WaitingJob` and walked by index (no iterator, no copy of the
    queue): compiled, each job's ``res`` and ``est`` are then read as native fields, and this
    walk of queues of thousands of jobs was most of a long replay's scheduling time."""
    free_count = free.count
    gambled = 0
    for k in range(first, len(behind) if stop is None else stop):
        job = behind[k]
        res = job.res
        if res > free_count:
            continue
        room = backfill_room(res, job.est, now, shadow, extra)
        if room >= 0:
            extra = room
        elif risk is not None and (chance := risk(job, shadow - now)) <= budget + RISK_TOLERANCE:
            budget -= chance
            gambled += 1
        else:
            continue
        started.append((job, free.take_lowest(res)))
        free_count -= res
        if free_count == 0:
            break
    return extra, gambled


def _backfill_blocks(
    queue: list[WaitingJob],
    first: int,
    blocks: QueueBlocks,
    free: MachineSet,
    now: float,
    shadow: float,
    extra: int,
    started: list[tuple[WaitingJob, Runs]],
) -> int:
    """:func:`_backfill` of ``queue[first:]`` (without ``risk``), ``queue[blocks.start:]`` being
    ``blocks``: the jobs before ``blocks.start`` one by one, then the blocks, passing over each
    that has no job to test. Within the walk ``free_count`` and ``extra`` only fall and ``now``
    and ``shadow`` stay; a job is tested when ``res <= free_count``, and may start when
    ``now + est <= shadow`` or ``res <= extra`` (:func:`backfill_room`). A block whose smallest
    ``res`` is above ``free_count``, or above ``extra`` while ``now`` plus its smallest ``est``
    is after ``shadow`` (a float sum grows with its term), has none: the same jobs start, in
    the same order, as in :func:`_backfill`. Returns the extra machines left."""
    start = blocks.start
    extra, _ = _backfill(queue, first, free, now, shadow, extra, started, stop=start)
    if free.count == 0:  # (the starving jobs behind the head, one by one, above)
        return extra
    skip = max(first - start, 0)  # the jobs of the blocks before the first to walk
    parts = blocks.blocks
    least_res = blocks.least_res
    least_est = blocks.least_est
    b = 0
    while b < len(parts) and skip >= len(parts[b]):
        skip -= len(parts[b])
        b += 1
    while b < len(parts):
        least = least_res[b]
        if least <= free.count and (least <= extra or now + least_est[b] <= shadow):
            extra, _ = _backfill(parts[b], skip, free, now, shadow, extra, started)
            if free.count == 0:
                return extra
        b += 1
        skip = 0
    return extra


def _pass_after(
    queue: list[WaitingJob],
    free: MachineSet,
    ends: Ends,
    now: float,
    previous: Reservation,
    fresh: list[WaitingJob],
    shortest_first: bool,
) -> tuple[list[tuple[WaitingJob, Runs]], Reservation] | None:
    """The pass that tests only ``fresh`` behind the previous head, or ``None`` when the head
    or its reservation changed (the whole queue must be walked)."""
    head = previous.head
    free_count = free.count
    if not queue or queue[0] is not head or head.res <= free_count:
        return None
    shadow, extra = reservation_for(head.res, free_count, ends, now)
    if shadow != previous.shadow or extra > previous.left:
        return None
    reservation = Reservation(head, shadow, extra, extra)
    started: list[tuple[WaitingJob, Runs]] = []
    if free_count and fresh:
        order = sorted(fresh, key=_estimate) if shortest_first else fresh
        reservation.left, _ = _backfill(order, 0, free, now, shadow, extra, started)
    return started, reservation
