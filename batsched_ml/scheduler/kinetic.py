"""WFP's waiting jobs, kept so that a pass finds its first jobs, and the jobs EASY backfills
behind them, without computing every waiting job's priority.

WFP (:mod:`.policies`) orders the queue by ``(wait / estimate)^3 * processors``, a priority that
grows with the wait at a different pace for each job, so the order changes between passes and a
pass cannot keep a sorted queue as the static orders do. A pass needs only the jobs that start
at the head, the head and the jobs it backfills (:meth:`.core.BatchScheduler._wfp_pass_queue`);
computing and sorting every waiting job's priority at each pass costs what the queue is long:
on RICC, with thousands waiting for weeks, nearly all of a WFP replay.

:class:`WfpQueue` keeps the jobs in groups of one size, estimate, WFP estimate and class rank
(:class:`_Group`): one priority function of the wait, so a group's WFP order is its arrival
order at any time, and one answer to EASY's backfilling tests. The groups' first jobs are the
leaves of a kinetic tournament (Basch, Guibas and Hershberger's kinetic data structures): a
binary tree whose every node holds the first of its two children's winners, with a
certificate, the time until which that comparison cannot change. Advancing to a pass's time
compares again only the nodes whose certificate has expired (and their ancestors), and a group
whose first job changes compares again one path; a job queued behind others of its group costs
the tree nothing.

The comparisons are the exact ones, :func:`.policies.wfp_value` computed at the pass's time with
its ties (class rank first, then the priority, then arrival), so the first job is exactly the
first of a sort of the queue (``tests/test_kinetic.py`` compares them). Only the certificates
are approximations, and they err early: a job's priority is, up to the rounding, the cube of
``slope * (t - subtime)`` with ``slope = processors^(1/3) / estimate``, a line in time, so the
loser can catch the winner only once their lines are within a relative :data:`MARGIN`, a gap a
million times the floats' rounding: a certificate expires when the lines come that close, the
node is compared again at every later pass while they stay that close, and anything the lines
cannot vouch for (an estimate far from any real one, a time beyond :data:`HORIZON`) is compared
at every pass. Two groups with the same processors and WFP estimate have the same priority
function of the wait: the older first job stays first for good.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from heapq import heapify, heappop, heapreplace

from batsched_ml.scheduler.easy import backfill_room
from batsched_ml.scheduler.parts import WaitingJob
from batsched_ml.scheduler.policies import wfp_value

#: How close (relatively) two jobs' lines may come before their comparison is made again at every
#: pass: far above the floats' rounding of a priority (a few times 1e-16), far below the gaps
#: between the priorities of jobs that arrived at different times.
MARGIN = 1e-7

#: The lines vouch only for slopes within these bounds and times before :data:`HORIZON`: there a
#: priority is far from the floats' overflow and underflow (about 1e308 and 1e-308), where the
#: rounding is no longer relative.
SLOPES = (1e-60, 1e60)
HORIZON = 1e15

_INF = math.inf


class _Group:
    """The waiting jobs of one size, estimate, WFP estimate and class rank, by arrival (subtime,
    then arrival number), which is their WFP order at any time; its leaf in the tournament."""

    def __init__(self, res: int, est: float, rank_est: float, rank: int, slot: int) -> None:
        self.res = res
        self.est = est
        self.rank_est = rank_est
        self.rank = rank
        self.slot = slot
        self.members: list[WaitingJob] = []
        slope = math.nan  # processors^(1/3) / estimate, where the lines vouch for it
        if rank_est > 0.0 and res > 0:
            slope = math.pow(float(res), 1.0 / 3.0) / rank_est
            if not SLOPES[0] <= slope <= SLOPES[1]:
                slope = math.nan
        self.slope = slope


def _arrival(entry: WaitingJob) -> tuple[float, int]:
    return (entry.subtime, entry.seq)


def _group_order(group: _Group) -> tuple[float, float, int]:
    return (group.est, group.rank_est, group.rank)


def _group_key(entry: WaitingJob) -> tuple[int, float, float, int]:
    return (entry.res, entry.est, entry.rank_est, entry.rank)


class WfpQueue:
    """Waiting jobs in groups (:class:`_Group`), with the first in WFP's order at a time
    (:meth:`first`, at a time no earlier than the last one asked for: a scheduler whose time
    goes back makes a new queue) and the jobs an EASY pass backfills (:meth:`behind`)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[int, float, float, int], _Group] = {}
        self._by_res: dict[int, list[_Group]] = {}  # sorted by (est, rank_est, rank)
        self._sizes: list[int] = []  # the sizes of _by_res, sorted
        self._count = 0
        # the tournament: a power of two of leaves, at least 2 (node 1, the root, is no leaf);
        # node k's children are 2k and 2k + 1; slot i's leaf is node size + i, its group's
        self._size = 2
        self._slots: list[_Group | None] = [None, None]
        self._free_slots: list[int] = [1, 0]
        self._win: list[int] = [-1] * 4  # by node: the winner's slot, -1 for none
        self._cert: list[float] = [_INF] * 4  # by node: its comparison holds until then
        self._sub: list[float] = [_INF] * 4  # by node: the earliest certificate below it
        self.time = -_INF  # the last time asked for

    def __len__(self) -> int:
        return self._count

    def add(self, entry: WaitingJob) -> None:
        """Take ``entry`` in (its size and estimates fixed while it is in)."""
        key = _group_key(entry)
        group = self._groups.get(key)
        if group is None:
            if not self._free_slots:
                self._grow()
            slot = self._free_slots.pop()
            group = _Group(entry.res, entry.est, entry.rank_est, entry.rank, slot)
            self._groups[key] = group
            self._slots[slot] = group
            self._win[self._size + slot] = slot
            groups = self._by_res.get(entry.res)
            if groups is None:
                groups = self._by_res[entry.res] = []
                insort(self._sizes, entry.res)
            insort(groups, group, key=_group_order)
        members = group.members
        self._count += 1
        if members and _arrival(members[-1]) < _arrival(entry):
            members.append(entry)  # behind its group's first job: the tree is as it was
            return
        insort(members, entry, key=_arrival)
        if members[0] is entry:
            self._expire((self._size + group.slot) >> 1)

    def remove(self, entry: WaitingJob) -> bool:
        """Take ``entry`` out; whether it was in."""
        key = _group_key(entry)
        group = self._groups.get(key)
        if group is None:
            return False
        members = group.members
        at = bisect_left(members, _arrival(entry), key=_arrival)
        if at == len(members) or members[at] is not entry:
            return False
        del members[at]
        self._count -= 1
        if members:
            if at == 0:  # a new first job
                self._expire((self._size + group.slot) >> 1)
            return True
        del self._groups[key]
        groups = self._by_res[entry.res]
        del groups[bisect_left(groups, _group_order(group), key=_group_order)]
        if not groups:
            del self._by_res[entry.res]
            del self._sizes[bisect_left(self._sizes, entry.res)]
        slot = group.slot
        self._slots[slot] = None
        self._free_slots.append(slot)
        self._win[self._size + slot] = -1
        self._expire((self._size + slot) >> 1)
        return True

    def first(self, now: float) -> WaitingJob | None:
        """The first job in WFP's order at ``now`` (``None`` when empty)."""
        if now < self.time:
            raise ValueError("a kinetic tournament's time only goes forward")
        self.time = now
        if self._sub[1] < now:
            self._fix(1, now)
        slot = self._win[1]
        if slot < 0:
            return None
        group = self._slots[slot]
        assert group is not None
        return group.members[0]

    def smallest(self) -> int:
        """The smallest size of a job in (0 when none is)."""
        return self._sizes[0] if self._sizes else 0

    def _expire(self, node: int) -> None:
        """Mark ``node`` and its ancestors to be compared again at the next :meth:`first`."""
        cert = self._cert
        sub = self._sub
        while node:
            cert[node] = -_INF
            sub[node] = -_INF
            node >>= 1

    def _grow(self) -> None:
        """Double the leaves, the old ones first; every node is compared again."""
        old = self._size
        size = old * 2
        self._slots.extend([None] * old)
        self._free_slots.extend(range(size - 1, old - 1, -1))
        win = [-1] * (2 * size)
        for slot in range(old):
            if self._slots[slot] is not None:
                win[size + slot] = slot
        self._win = win
        self._cert = [-_INF] * size + [_INF] * size
        self._sub = [-_INF] * size + [_INF] * size
        self._size = size

    def _fix(self, node: int, now: float) -> None:
        """Compare again, at ``now``, every node below ``node`` (itself included) whose
        certificate, or one below it, has expired."""
        left = 2 * node
        if left < self._size:
            if self._sub[left] < now:
                self._fix(left, now)
            if self._sub[left + 1] < now:
                self._fix(left + 1, now)
        a = self._win[left]
        b = self._win[left + 1]
        if a < 0:
            winner, cert = b, _INF
        elif b < 0:
            winner, cert = a, _INF
        else:
            x = self._slots[a]
            y = self._slots[b]
            assert x is not None and y is not None
            if _before(y, x, now):
                winner, cert = b, _certificate(y, x, now)
            else:
                winner, cert = a, _certificate(x, y, now)
        self._win[node] = winner
        self._cert[node] = cert
        self._sub[node] = min(cert, self._sub[left], self._sub[left + 1])

    def behind(
        self,
        ahead: list[WaitingJob],
        free: int,
        now: float,
        shadow: float,
        extra: int,
    ) -> list[WaitingJob]:
        """The jobs an EASY pass backfills behind its head (whose reservation is ``shadow`` and
        ``extra``, ``free`` machines left), in the order it starts them: first those of
        ``ahead`` (the starving jobs behind a starving head, in their order), then these jobs
        in WFP's order, each started if it fits what is left free and passes EASY's own rule
        (:func:`.easy.backfill_room`: it ends by ``shadow`` or fits what is left of
        ``extra``), until no machine is left free. A job the pass would pass over is left out,
        and with it the rest of its group (the same size and estimate: passed over too, as
        the free and extra machines only shrink), so the pass given these jobs starts the
        same ones. Only the groups that fit ``free`` and end by ``shadow`` or fit ``extra`` are
        looked at, merged by their first jobs' priorities: the priorities computed are those
        of the groups' first jobs and of the jobs started (on RICC, the thousands waiting that
        fit a few free machines were all sorted at every pass)."""
        out: list[WaitingJob] = []
        for job in ahead:
            if free == 0:
                return out
            if job.res <= free:
                room = backfill_room(job.res, job.est, now, shadow, extra)
                if room >= 0:
                    out.append(job)
                    extra = room
                    free -= job.res
        if free == 0:
            return out
        heap: list[tuple[int, float, float, int, int]] = []
        sources: list[list[WaitingJob]] = []
        for k in range(bisect_right(self._sizes, free)):
            res = self._sizes[k]
            groups = self._by_res[res]
            stop = len(groups) if res <= extra else _ending_by(groups, now, shadow)
            for i in range(stop):
                members = groups[i].members
                head = members[0]
                heap.append(
                    (
                        head.rank,
                        wfp_value(now - head.subtime, head.rank_est, head.res),
                        head.subtime,
                        head.seq,
                        len(sources),
                    )
                )
                sources.append(members)
        heapify(heap)
        taken = [0] * len(sources)
        while heap and free > 0:
            source = heap[0][4]
            members = sources[source]
            job = members[taken[source]]
            room = -1
            if job.res <= free:
                room = backfill_room(job.res, job.est, now, shadow, extra)
            if room < 0:  # neither it nor the rest of its group can start in this pass
                heappop(heap)
                continue
            out.append(job)
            extra = room
            free -= job.res
            taken[source] += 1
            if taken[source] < len(members):
                after = members[taken[source]]
                heapreplace(
                    heap,
                    (
                        after.rank,
                        wfp_value(now - after.subtime, after.rank_est, after.res),
                        after.subtime,
                        after.seq,
                        source,
                    ),
                )
            else:
                heappop(heap)
        return out


def _before(x: _Group, y: _Group, now: float) -> bool:
    """Whether ``x``'s first job comes before ``y``'s in WFP's order at ``now``: the smaller
    ``(rank, wfp_value, subtime, seq)``, :func:`.core._wfp_sorted`'s order."""
    if x.rank != y.rank:
        return x.rank < y.rank
    a = x.members[0]
    b = y.members[0]
    pa = wfp_value(now - a.subtime, a.rank_est, a.res)
    pb = wfp_value(now - b.subtime, b.rank_est, b.res)
    if pa != pb:
        return pa < pb
    if a.subtime != b.subtime:
        return a.subtime < b.subtime
    return a.seq < b.seq


def _certificate(w: _Group, lo: _Group, now: float) -> float:
    """Until when ``w``'s first job stays before ``lo``'s (it is at ``now``): for good when
    their ranks differ or their priorities are one function of the wait; else while the
    loser's line stays under ``1 - MARGIN`` times the winner's; ``now`` (compare again at the
    next time) when the lines cannot tell."""
    if w.rank != lo.rank:
        return _INF
    if w.res == lo.res and w.rank_est == lo.rank_est:
        return _INF  # one function of the wait: the older (then the earlier) first
    aw = w.slope
    al = lo.slope
    sw = w.members[0].subtime
    sl = lo.members[0].subtime
    if not (aw > 0.0 and al > 0.0) or not (-HORIZON < sw <= now and -HORIZON < sl <= now < HORIZON):
        return now  # no line (NaN), a wait not yet begun, or beyond the horizon
    keep = 1.0 - MARGIN
    if al * (now - sl) > keep * aw * (now - sw):
        return now  # too close to tell
    rate = al - keep * aw
    if rate <= 0.0:
        return HORIZON  # the loser's line never comes within the margin
    until = (al * sl - keep * aw * sw) / rate
    if not (until >= now) or al * (until - sl) > (1.0 - MARGIN / 2.0) * aw * (until - sw):
        return now  # the rounding of the crossing time: no promise
    return min(until, HORIZON)


def _ending_by(groups: list[_Group], now: float, shadow: float) -> int:
    """How many of ``groups`` (sorted by estimate) are expected to end by ``shadow`` if they
    start at ``now``: ``now + est <= shadow``, EASY's test, holds for a prefix."""
    low = 0
    high = len(groups)
    while low < high:
        mid = (low + high) // 2
        if now + groups[mid].est <= shadow:
            low = mid + 1
        else:
            high = mid
    return low
