"""WFP's first waiting jobs at any time, and the jobs an EASY pass backfills, in WFP's order,
without every waiting job's priority computed at each pass.

WFP (:mod:`.policies`) orders the queue by ``(wait / estimate)^3 * processors``, a priority that
grows with the wait at a different pace for each job, so the order changes between passes and a
pass cannot keep a sorted queue as the static orders do. A pass needs only the first jobs in
that order (the jobs that start at the head and the head, :meth:`.core.BatchScheduler.
_wfp_pass_queue`); finding each by computing every waiting job's priority costs what the queue
is long, at every pass: on RICC, with thousands waiting for weeks, nearly all of a WFP replay.

:class:`WfpTournament` is a kinetic tournament (Basch, Guibas and Hershberger's kinetic data
structures): a binary tree over the waiting jobs whose every node holds the first of its two
children's winners, with a certificate, the time until which that comparison cannot change.
Advancing to a pass's time compares again only the nodes whose certificate has expired (and their
ancestors), and an arrival or a start compares again one path: the first job costs about the
logarithm of the queue, not its length.

The comparisons are the exact ones, :func:`.policies.wfp_value` computed at the pass's time with
its ties (class rank first, then the priority, then arrival), so the tree's first job is exactly
the first of a sort of the queue (``tests/test_kinetic.py`` compares them). Only the
certificates are approximations, and they err early: a job's priority is, up to the rounding,
the cube of ``slope * (t - subtime)`` with ``slope = processors^(1/3) / estimate``, a line in
time, so the loser can catch the winner only once their lines are within a relative
:data:`MARGIN`, a gap a million times the floats' rounding: a certificate expires when the
lines come that close, the node is compared again at every later pass while they stay that
close, and anything the lines cannot vouch for (a zero, infinite or missing estimate) is compared
at every pass. Two jobs with the same processors and estimate have the same priority function of
their wait: the older stays first for good.

:class:`WfpGroups` keeps the same jobs in groups of one size and estimate, each in arrival order
(which is its WFP order), for the jobs behind the head: a group passes or fails EASY's
backfilling tests whole, and the groups that pass are merged by their first jobs' priorities.
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


class WfpTournament:
    """The waiting jobs of one class of WFP passes, and the first of them in WFP's order at a
    time: :meth:`add` and :meth:`remove` a job (by its arrival number ``seq``), :meth:`first`
    at a time no earlier than the last one asked for (time only goes forward; a scheduler that
    goes back builds a new tournament)."""

    def __init__(self) -> None:
        # leaves: a power of two, at least 2 (node 1, the root, is no leaf); node k's children
        # are 2k and 2k + 1, slot i's leaf is node size + i
        self._size = 2
        self._entries: list[WaitingJob | None] = [None, None]  # by slot
        self._slopes: list[float] = [math.nan, math.nan]  # by slot: processors^(1/3) / estimate
        self._free_slots: list[int] = [1, 0]
        self._slot_of: dict[int, int] = {}  # seq -> slot
        self._win: list[int] = [-1] * 4  # by node: the winner's slot, -1 for none
        self._cert: list[float] = [_INF] * 4  # by node: its comparison holds until then
        self._sub: list[float] = [_INF] * 4  # by node: the earliest certificate below it
        self.time = -_INF  # the last time asked for

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, entry: WaitingJob) -> bool:
        return entry.seq in self._slot_of

    def add(self, entry: WaitingJob) -> None:
        """Take ``entry`` in (compared at the next :meth:`first`)."""
        if entry.seq in self._slot_of:
            return
        if not self._free_slots:
            self._grow()
        slot = self._free_slots.pop()
        self._slot_of[entry.seq] = slot
        self._entries[slot] = entry
        slope = math.nan
        estimate = entry.rank_est
        if estimate > 0.0 and entry.res > 0 and abs(entry.subtime) < HORIZON:
            slope = math.pow(float(entry.res), 1.0 / 3.0) / estimate
            if not SLOPES[0] <= slope <= SLOPES[1]:
                slope = math.nan
        self._slopes[slot] = slope
        node = self._size + slot
        self._win[node] = slot
        self._expire(node >> 1)

    def remove(self, entry: WaitingJob) -> bool:
        """Take ``entry`` out; whether it was in."""
        slot = self._slot_of.pop(entry.seq, -1)
        if slot < 0:
            return False
        self._entries[slot] = None
        self._free_slots.append(slot)
        node = self._size + slot
        self._win[node] = -1
        self._expire(node >> 1)
        return True

    def first(self, now: float) -> WaitingJob | None:
        """The first job in WFP's order at ``now`` (``None`` when empty)."""
        if now < self.time:
            raise ValueError("a kinetic tournament's time only goes forward")
        self.time = now
        if self._sub[1] < now:
            self._fix(1, now)
        slot = self._win[1]
        return None if slot < 0 else self._entries[slot]

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
        self._entries.extend([None] * old)
        self._slopes.extend([math.nan] * old)
        self._free_slots.extend(range(size - 1, old - 1, -1))
        win = [-1] * (2 * size)
        for slot in range(old):
            if self._entries[slot] is not None:
                win[size + slot] = slot
        self._win = win
        self._cert = [-_INF] * size + [_INF] * size
        self._sub = [-_INF] * size + [_INF] * size
        self._size = size

    def _fix(self, node: int, now: float) -> None:
        """Compare again, at ``now``, every node below ``node`` (itself included) whose
        certificate, or one below it, has expired."""
        size = self._size
        left = 2 * node
        if left < size:
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
            if self._before(b, a, now):
                a, b = b, a
            winner = a
            cert = self._certificate(a, b, now)
        self._win[node] = winner
        self._cert[node] = cert
        self._sub[node] = min(cert, self._sub[left], self._sub[left + 1])

    def _before(self, a: int, b: int, now: float) -> bool:
        """Whether slot ``a``'s job comes before slot ``b``'s in WFP's order at ``now``: the
        smaller ``(rank, wfp_value, subtime, seq)``, :func:`.core._wfp_sorted`'s order."""
        x = self._entries[a]
        y = self._entries[b]
        assert x is not None and y is not None
        if x.rank != y.rank:
            return x.rank < y.rank
        px = wfp_value(now - x.subtime, x.rank_est, x.res)
        py = wfp_value(now - y.subtime, y.rank_est, y.res)
        if px != py:
            return px < py
        if x.subtime != y.subtime:
            return x.subtime < y.subtime
        return x.seq < y.seq

    def _certificate(self, w: int, lo: int, now: float) -> float:
        """Until when slot ``w``'s job stays before slot ``lo``'s (it is at ``now``): for good
        when their ranks differ or their priorities are one function of the wait; else while
        the loser's line stays under ``1 - MARGIN`` times the winner's; ``now`` (compare again
        at the next time) when the lines cannot tell."""
        x = self._entries[w]
        y = self._entries[lo]
        assert x is not None and y is not None
        if x.rank != y.rank:
            return _INF
        if x.res == y.res and x.rank_est == y.rank_est:
            return _INF  # one function of the wait: the older (then the earlier) first
        aw = self._slopes[w]
        al = self._slopes[lo]
        sw = x.subtime
        sl = y.subtime
        if not (aw > 0.0 and al > 0.0) or not (sw <= now and sl <= now < HORIZON):
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


class _Group:
    """The waiting jobs of one size, estimate, WFP estimate and class rank: one priority
    function of the wait, so their order is their arrival (by subtime, then arrival number) at
    any time, and one answer to EASY's backfilling tests."""

    def __init__(self, res: int, est: float, rank_est: float, rank: int) -> None:
        self.res = res
        self.est = est
        self.rank_est = rank_est
        self.rank = rank
        self.members: list[WaitingJob] = []  # by (subtime, seq)


def _arrival(entry: WaitingJob) -> tuple[float, int]:
    return (entry.subtime, entry.seq)


def _group_order(group: _Group) -> tuple[float, float, int]:
    return (group.est, group.rank_est, group.rank)


def _group_key(entry: WaitingJob) -> tuple[int, float, float, int]:
    return (entry.res, entry.est, entry.rank_est, entry.rank)


class WfpGroups:
    """The waiting jobs by size, then estimate (:class:`_Group`): the jobs an EASY pass may
    backfill behind its head, in WFP's order, without computing every waiting job's priority
    (:meth:`behind`)."""

    def __init__(self) -> None:
        self._by_res: dict[int, list[_Group]] = {}  # sorted by (est, rank_est, rank)
        self._sizes: list[int] = []  # the sizes of _by_res, sorted
        self._groups: dict[tuple[int, float, float, int], _Group] = {}

    def add(self, entry: WaitingJob) -> None:
        key = _group_key(entry)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(entry.res, entry.est, entry.rank_est, entry.rank)
            groups = self._by_res.get(entry.res)
            if groups is None:
                groups = self._by_res[entry.res] = []
                insort(self._sizes, entry.res)
            insort(groups, group, key=_group_order)
        members = group.members
        if not members or _arrival(members[-1]) < _arrival(entry):
            members.append(entry)
        else:
            insort(members, entry, key=_arrival)

    def remove(self, entry: WaitingJob) -> bool:
        """Take ``entry`` out; whether it was in (its size and estimates as when it came)."""
        key = _group_key(entry)
        group = self._groups.get(key)
        if group is None:
            return False
        members = group.members
        at = bisect_left(members, _arrival(entry), key=_arrival)
        if at == len(members) or members[at] is not entry:
            return False
        del members[at]
        if not members:
            del self._groups[key]
            groups = self._by_res[entry.res]
            del groups[bisect_left(groups, _group_order(group), key=_group_order)]
            if not groups:
                del self._by_res[entry.res]
                del self._sizes[bisect_left(self._sizes, entry.res)]
        return True

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

    def smallest(self) -> int:
        """The smallest size of a job in (0 when none is)."""
        return self._sizes[0] if self._sizes else 0


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
