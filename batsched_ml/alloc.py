"""Machine sets: ``procset.ProcSet`` at the protocol boundary, integer bitmasks inside.

Bit ``i`` of a mask stands for machine ``i``. Python integers make exact, arbitrarily wide
bitsets whose and/or/count run in C, which keeps a busy-check or a release at a few hundred
nanoseconds even on 10^5 machines, where a ``ProcSet`` operation costs microseconds. Conversions
happen only when a decision is written or an event read.

Placement rule (used by the scheduler): a job gets the *lowest-numbered* free machines, taking
whole runs of consecutive free machines from the bottom up. It is the rule of the scheduler that
produced the Batsim reference transcripts, it is deterministic, and it keeps allocations
contiguous while the machine is not fragmented.
"""

from __future__ import annotations

from functools import lru_cache

from procset import ProcInt, ProcSet


def mask_of(procs: ProcSet) -> int:
    """The bitmask of a ProcSet, from its intervals."""
    mask = 0
    for low, high in procs.intervals():
        mask |= ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
    return mask


def full_mask(count: int) -> int:
    """The mask of machines ``0..count-1``."""
    return (1 << count) - 1


def intervals_of(mask: int) -> list[tuple[int, int]]:
    """The maximal runs of set bits of ``mask``, as closed intervals, lowest first."""
    out: list[tuple[int, int]] = []
    while mask:
        start = (mask & -mask).bit_length() - 1
        shifted = mask >> start
        run = (~shifted & (shifted + 1)).bit_length() - 1
        out.append((start, start + run - 1))
        mask &= ~(((1 << run) - 1) << start)
    return out


def procset_of(mask: int) -> ProcSet:
    """The ProcSet of a bitmask (a new one each time: the caller may change it).

    procset's public constructor merges the intervals one by one (36 microseconds for an
    allocation of a few intervals, about a tenth of a whole replay), but the maximal runs of a
    mask are already disjoint, sorted and non-adjacent, which is exactly a ProcSet's internal
    form: :func:`_from_runs` stores them as they are (9 times faster). And a scheduler placing
    jobs on the lowest-numbered free machines hands out the same allocations again and again
    (60 to 80% of a replay's were among its last 1,024 distinct ones), so the ProcSet of a
    recent mask is copied (``ProcSet.copy``, well under a microsecond) instead of built again.
    """
    return _built(mask).copy()


@lru_cache(maxsize=1024)
def _built(mask: int) -> ProcSet:
    return _from_runs(intervals_of(mask))


def _from_runs_public(runs: list[tuple[int, int]]) -> ProcSet:
    return ProcSet(*runs)


def _from_runs_direct(runs: list[tuple[int, int]]) -> ProcSet:
    # What ``ProcSet.copy`` itself does: a ProcSet is its sorted list of disjoint ProcInts.
    procs = ProcSet()
    procs._itvs = [ProcInt(low, high) for low, high in runs]
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


_from_runs = _from_runs_direct if _direct_is_exact() else _from_runs_public


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
