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

from procset import ProcInt, ProcSet


def mask_of(procs: ProcSet) -> int:
    """The bitmask of a ProcSet (read from its interval list, like ``ProcSet.copy`` does)."""
    mask = 0
    for low, high in procs._itvs:
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
    """The ProcSet of a bitmask.

    ``intervals_of`` already yields procset's canonical form (disjoint, maximal, ascending), so
    the ProcSet is filled directly, as ``ProcSet.copy`` does, instead of re-merging interval by
    interval in the public constructor, which costs several microseconds per interval; a test
    checks both ways agree.
    """
    procs = ProcSet()
    procs._itvs = [ProcInt(low, high) for low, high in intervals_of(mask)]
    return procs


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
