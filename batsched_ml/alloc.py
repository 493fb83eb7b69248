"""Machine sets: ``procset.ProcSet`` at the protocol boundary, sorted runs of machines inside.

Placement rule (used by the scheduler): a job gets the *lowest-numbered* free machines, taking
whole runs of consecutive free machines from the bottom up. It is the rule of the scheduler that
produced the Batsim reference transcripts, it is deterministic, and it keeps allocations
contiguous while the machine is not fragmented.

A :class:`MachineSet` keeps its machines as sorted, disjoint, non-adjacent closed intervals, and
an allocation is the tuple of its runs (:data:`Runs`). What an allocation, a release or a busy
check costs then depends on the runs it touches and (by a bisection) on how fragmented the set
is, never on how many machines the platform has. An integer bitmask, the obvious alternative,
makes every such operation walk all the machine's bits: on CEA-Curie's 93,312 processors that
was most of a replay, and the cost per job grew with the machine's width.

The bitmask functions at the end (:func:`lowest`, :func:`mask_of`, :func:`intervals_of`,
:func:`procset_of`) state the placement rule in its plainest form; the tests and
``benchmarks/bench_alloc.py`` compare :class:`MachineSet` with them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Final

from procset import ProcInt, ProcSet

#: a closed interval of machine ids, ``(low, high)`` with ``low <= high``
Run = tuple[int, int]
#: an allocation: its runs, sorted, disjoint and non-adjacent (a ProcSet's intervals)
Runs = tuple[Run, ...]


class MachineSet:
    """A set of machine ids as sorted, disjoint, non-adjacent closed intervals.

    The intervals are two parallel lists (``lows[i]..highs[i]``) so that a bisection on the
    lows finds the run holding a machine; :attr:`count` is the number of machines, kept up to
    date so that asking it costs nothing. Adding machines already in the set, or removing
    machines not in it, raises :class:`ValueError` before changing anything of that run: a
    scheduler or simulator doing so has lost track of its machines.
    """

    __slots__ = ("count", "highs", "lows")

    def __init__(self, runs: Iterable[Run] = ()) -> None:
        self.lows: list[int] = []
        self.highs: list[int] = []
        self.count = 0
        self.add(runs)

    @classmethod
    def full(cls, count: int) -> MachineSet:
        """The machines ``0..count-1``."""
        return cls(((0, count - 1),) if count > 0 else ())

    def runs(self) -> Runs:
        """The maximal runs of the set, lowest first."""
        return tuple(zip(self.lows, self.highs, strict=True))

    def copy(self) -> MachineSet:
        other = MachineSet()
        other.lows = self.lows.copy()
        other.highs = self.highs.copy()
        other.count = self.count
        return other

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MachineSet):
            return NotImplemented
        return self.lows == other.lows and self.highs == other.highs

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"MachineSet({list(self.runs())})"

    def take_lowest(self, count: int) -> Runs:
        """Remove the ``count`` lowest-numbered machines and return them (the placement rule).

        The common case, a job that fits in the lowest free run, changes one number; otherwise
        the whole runs taken leave the front of the lists in one slice."""
        if count > self.count:
            raise ValueError(f"{count} machines asked of a set of {self.count}")
        if count <= 0:
            return ()
        lows, highs = self.lows, self.highs
        self.count -= count
        low = lows[0]
        end = low + count - 1
        if end < highs[0]:
            lows[0] = end + 1
            return ((low, end),)
        whole = 0  # the runs taken whole
        while True:
            size = highs[whole] - lows[whole] + 1
            if count < size:
                break
            whole += 1
            count -= size
            if not count:
                break
        taken = [(lows[k], highs[k]) for k in range(whole)]
        if count:  # and the first machines of the next run
            low = lows[whole]
            taken.append((low, low + count - 1))
            lows[whole] = low + count
        del lows[:whole]
        del highs[:whole]
        return tuple(taken)

    def add(self, runs: Iterable[Run]) -> None:
        """Add the machines of ``runs`` (none of them in the set), merging adjacent runs."""
        lows, highs = self.lows, self.highs
        added = 0
        try:
            for low, high in runs:
                if low > high:
                    raise ValueError(f"empty run {low}-{high}")
                i = bisect_left(lows, low)  # the first run starting at or above low
                if i and highs[i - 1] + 1 >= low:  # touches the run below
                    if highs[i - 1] >= low:
                        raise ValueError(
                            f"machines {low}-{min(high, highs[i - 1])} are already in the set"
                        )
                    if i < len(lows) and lows[i] <= high + 1:  # and the one above
                        if lows[i] <= high:
                            raise ValueError(f"machines {lows[i]}-{high} are already in the set")
                        highs[i - 1] = highs[i]
                        del lows[i]
                        del highs[i]
                    else:
                        highs[i - 1] = high
                elif i < len(lows) and lows[i] <= high + 1:  # touches the run above only
                    if lows[i] <= high:
                        raise ValueError(f"machines {lows[i]}-{high} are already in the set")
                    lows[i] = low
                else:
                    lows.insert(i, low)
                    highs.insert(i, high)
                added += high - low + 1
        finally:
            self.count += added

    def remove(self, runs: Iterable[Run]) -> None:
        """Remove the machines of ``runs`` (all of them in the set), splitting runs."""
        lows, highs = self.lows, self.highs
        for low, high in runs:
            i = bisect_right(lows, low) - 1  # the run that must hold low
            if i < 0 or highs[i] < high or low > high:
                raise ValueError(f"machines {low}-{high} are not all in the set")
            run_low, run_high = lows[i], highs[i]
            if run_low == low:
                if run_high == high:
                    del lows[i]
                    del highs[i]
                else:
                    lows[i] = high + 1
            elif run_high == high:
                highs[i] = low - 1
            else:
                highs[i] = low - 1
                lows.insert(i + 1, high + 1)
                highs.insert(i + 1, run_high)
            self.count -= high - low + 1

    def isdisjoint(self, runs: Iterable[Run]) -> bool:
        """Whether no machine of ``runs`` is in the set."""
        lows, highs = self.lows, self.highs
        for low, high in runs:
            i = bisect_right(lows, high) - 1  # the last run starting at or below high
            if i >= 0 and highs[i] >= low:
                return False
        return True

    def intersection(self, runs: Iterable[Run]) -> Runs:
        """The machines of ``runs`` that are in the set, as sorted runs."""
        lows, highs = self.lows, self.highs
        out: list[Run] = []
        for low, high in runs:
            i = max(bisect_right(lows, low) - 1, 0)
            while i < len(lows) and lows[i] <= high:
                if highs[i] >= low:
                    out.append((max(low, lows[i]), min(high, highs[i])))
                i += 1
        return tuple(sorted(out))


def size_of(runs: Runs) -> int:
    """The number of machines of an allocation."""
    if len(runs) == 1:
        low, high = runs[0]
        return high - low + 1
    return sum(high - low + 1 for low, high in runs)


def runs_of(procs: ProcSet) -> Runs:
    """The runs of a ProcSet (its intervals, which are sorted, disjoint and non-adjacent)."""
    return tuple(procs.intervals())


def procset_of_runs(runs: Runs) -> ProcSet:
    """The ProcSet of an allocation (a new one each time: the caller may change it).

    procset's public constructor merges the intervals one by one (36 microseconds for an
    allocation of a few intervals, about a tenth of a whole replay), but an allocation's runs
    are already disjoint, sorted and non-adjacent, which is exactly a ProcSet's internal form:
    :func:`_from_runs` stores them as they are (9 times faster).
    """
    return _from_runs(runs)


def _from_runs_public(runs: Iterable[Run]) -> ProcSet:
    return ProcSet(*runs)


_new_tuple = tuple.__new__
_new_object = object.__new__


#: The ProcInt of each run handed out so far. A ProcInt is an immutable tuple, which ProcSets
#: share (``ProcSet.copy`` does): a scheduler placing jobs on the lowest-numbered free machines
#: hands out the same runs again and again (60,011 distinct ones in the 2 million of a RICC
#: replay), and a look-up costs a fifth of making one. Emptied when it reaches
#: :data:`_INTERVALS_KEPT` runs, so that it stays small whatever the machine.
_INTERVALS: Final[dict[Run, ProcInt]] = {}
_INTERVALS_KEPT: Final = 1 << 17


def _interval(run: Run) -> ProcInt:
    interval = _INTERVALS.get(run)
    if interval is None:
        if len(_INTERVALS) >= _INTERVALS_KEPT:
            _INTERVALS.clear()
        interval = _INTERVALS[run] = _new_tuple(ProcInt, run)
    return interval


def _from_runs_direct(runs: Iterable[Run]) -> ProcSet:
    # What ``ProcSet.copy`` itself does: a ProcSet is its sorted list of disjoint ProcInts
    # (built without its constructor, which only makes that list empty; nor ProcInt's, which
    # only checks what a run already guarantees)
    procs: ProcSet = _new_object(ProcSet)
    procs._itvs = [_interval(run) for run in runs]
    return procs


def _direct_is_exact() -> bool:
    """Whether this procset version keeps its intervals as :func:`_from_runs_direct` writes
    them: checked once at import on masks with one, several and no runs, so that another
    procset release falls back to the public constructor instead of building wrong sets."""
    try:
        for mask in (0, 1, 0b1011_0111_0001, (1 << 130) - 1 - (1 << 64)):
            runs = intervals_of(mask)
            direct, public = _from_runs_direct(runs), _from_runs_public(runs)
            if direct != public or str(direct) != str(public) or len(direct) != len(public):
                return False
            if list(direct.intervals()) != list(public.intervals()) or mask_of(direct) != mask:
                return False
    except Exception:  # another release's methods may not even read such a set
        return False
    return True


# --- the bitmask reference ------------------------------------------------------------------
# Bit ``i`` of a mask stands for machine ``i``: every operation below costs time in proportion
# to the machine's width, which is why the scheduler and the simulator use MachineSet.


def mask_of(procs: ProcSet | Iterable[Run]) -> int:
    """The bitmask of a ProcSet, or of runs."""
    mask = 0
    for low, high in procs.intervals() if isinstance(procs, ProcSet) else procs:
        mask |= ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
    return mask


def full_mask(count: int) -> int:
    """The mask of machines ``0..count-1``."""
    return (1 << count) - 1


def intervals_of(mask: int) -> list[Run]:
    """The maximal runs of set bits of ``mask``, as closed intervals, lowest first."""
    out: list[Run] = []
    while mask:
        start = (mask & -mask).bit_length() - 1
        shifted = mask >> start
        run = (~shifted & (shifted + 1)).bit_length() - 1
        out.append((start, start + run - 1))
        mask &= ~(((1 << run) - 1) << start)
    return out


def procset_of(mask: int) -> ProcSet:
    """The ProcSet of a bitmask."""
    return _from_runs(intervals_of(mask))


def lowest(mask: int, count: int) -> int:
    """The ``count`` lowest set bits of ``mask`` (which must have at least ``count``)."""
    taken = 0
    while count:
        start = (mask & -mask).bit_length() - 1
        shifted = mask >> start
        run = (~shifted & (shifted + 1)).bit_length() - 1
        take = run if run < count else count
        bits = ((1 << take) - 1) << start
        taken |= bits
        mask ^= bits
        count -= take
    return taken


_DIRECT: Final = _direct_is_exact()
_from_runs = _from_runs_direct if _DIRECT else _from_runs_public
