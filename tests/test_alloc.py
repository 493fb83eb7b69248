"""Machine sets: MachineSet against the bitmask reference of the lowest-first placement rule,
and the ProcSet conversions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from procset import ProcSet

from batsched_ml.alloc import (
    MachineSet,
    full_mask,
    intervals_of,
    lowest,
    mask_of,
    procset_of,
    procset_of_runs,
    runs_of,
    size_of,
)


def test_round_trip_and_canonical_form_match_procsets_own_constructor() -> None:
    rng = random.Random(7)
    for _ in range(500):
        procs = ProcSet(*rng.sample(range(300), rng.randint(0, 60)))
        mask = mask_of(procs)
        assert mask.bit_count() == len(procs)
        built = procset_of(mask)
        assert built == procs
        assert str(built) == str(procs)
        assert built.intervals().__class__ is procs.intervals().__class__
        assert list(built.intervals()) == list(procs.intervals())


def test_procset_of_runs_gives_a_new_procset_each_time() -> None:
    """Built ProcSets are cached by allocation: changing one handed out must not change the
    next."""
    runs = ((0, 3), (7, 7))
    first = procset_of_runs(runs)
    first.update(ProcSet(9))
    first.difference_update(ProcSet(0))
    assert procset_of_runs(runs) == ProcSet((0, 3), 7)
    assert str(procset_of_runs(runs)) == "0-3 7"
    assert procset_of_runs(runs) is not procset_of_runs(runs)
    assert procset_of_runs(()) == ProcSet()
    assert runs_of(ProcSet((0, 3), 7)) == runs and size_of(runs) == 5


def test_lowest_takes_the_lowest_numbered_free_machines() -> None:
    free = mask_of(ProcSet((2, 4), (8, 9), 15))
    assert procset_of(lowest(free, 1)) == ProcSet(2)
    assert procset_of(lowest(free, 4)) == ProcSet((2, 4), 8)
    assert procset_of(lowest(free, 6)) == ProcSet((2, 4), (8, 9), 15)
    assert intervals_of(full_mask(5)) == [(0, 4)]
    assert intervals_of(0) == []


def test_procsets_built_from_runs_behave_as_the_public_constructors() -> None:
    """procset_of stores a mask's runs as the ProcSet's intervals without merging them (its
    internal form, checked at import): with this procset that fast path is the one taken, and
    the sets it builds answer every operation as those of ``ProcSet(*intervals)`` do."""
    from batsched_ml import alloc

    assert alloc._from_runs is alloc._from_runs_direct
    rng = random.Random(11)
    for _ in range(300):
        mask = rng.getrandbits(rng.choice((8, 64, 300)))
        other = ProcSet(*rng.sample(range(320), rng.randint(0, 40)))
        runs = intervals_of(mask)
        fast, public = alloc._from_runs_direct(runs), ProcSet(*runs)
        assert fast == public and str(fast) == str(public) and len(fast) == len(public)
        assert fast | other == public | other
        assert fast & other == public & other
        assert fast - other == public - other
        assert fast ^ other == public ^ other
        assert (fast.min, fast.max) == (public.min, public.max) if public else not fast
        assert list(fast) == list(public)
        assert fast.isdisjoint(other) == public.isdisjoint(other)


@pytest.mark.scheduler_source  # patches alloc
def test_procset_of_falls_back_to_the_public_constructor_when_the_internals_differ(
    monkeypatch,
) -> None:
    """Another procset release keeping its intervals otherwise: the import-time check fails
    and the public constructor builds the sets."""
    from batsched_ml import alloc

    def other_internals(runs):
        procs = ProcSet()
        procs._itvs = list(reversed(runs))  # not this release's form
        return procs

    monkeypatch.setattr(alloc, "_from_runs_direct", other_internals)
    assert not alloc._direct_is_exact()


# --- MachineSet against the bitmask reference ------------------------------------------------


def expect_same(machines: MachineSet, mask: int) -> None:
    """``machines`` holds exactly the machines of ``mask``, as its maximal runs."""
    assert machines.runs() == tuple(intervals_of(mask))
    assert machines.count == len(machines) == mask.bit_count()


def replay_against_the_reference(width: int, ops: list[tuple[bool, int]]) -> None:
    """Allocate and release on a machine of ``width`` machines with both structures: each
    allocation must name exactly the machines :func:`lowest` picks, and the free sets must stay
    equal. ``(True, n)`` allocates ``1 + n % free`` machines; ``(False, n)`` releases running
    allocation ``n % running``."""
    free, reference = MachineSet.full(width), full_mask(width)
    running: list[tuple[tuple[tuple[int, int], ...], int]] = []
    for allocate, number in ops:
        if allocate and free.count:
            count = 1 + number % free.count
            taken, expected = free.take_lowest(count), lowest(reference, count)
            assert mask_of(taken) == expected
            assert taken == tuple(intervals_of(expected))  # maximal runs, lowest first
            assert size_of(taken) == count
            reference ^= expected
            running.append((taken, expected))
        elif running:
            runs, mask = running.pop(number % len(running))
            free.add(runs)
            reference |= mask
        expect_same(free, reference)
    for runs, mask in running:
        free.add(runs)
        reference |= mask
    assert free == MachineSet.full(width) and reference == full_mask(width)


ops = st.lists(st.tuples(st.booleans(), st.integers(0, 2**20)), max_size=120)


@settings(max_examples=400, deadline=None)
@given(width=st.integers(1, 200), ops=ops)
def test_allocation_and_release_match_the_bitmask_reference(width: int, ops) -> None:
    replay_against_the_reference(width, ops)


@settings(max_examples=40, deadline=None)
@given(ops=ops)
def test_allocation_and_release_match_the_reference_on_a_wide_machine(ops) -> None:
    replay_against_the_reference(93_312, ops)


def test_a_long_random_sequence_of_small_jobs_matches_the_reference() -> None:
    """Many small jobs and out-of-order releases fragment the machine: dozens of free runs,
    allocations spanning several of them."""
    rng = random.Random(3)
    ops = [(rng.random() < 0.55, rng.choice((0, 1, 2, 3, 7, 31, 2**20))) for _ in range(4000)]
    replay_against_the_reference(1_000, ops)


sets = st.lists(st.integers(0, 150), max_size=60).map(lambda ids: mask_of(ProcSet(*ids)))


@settings(max_examples=400, deadline=None)
@given(held=sets, other=sets)
def test_add_remove_and_overlap_queries_match_the_bitmask_operations(held: int, other: int):
    machines = MachineSet(intervals_of(held))
    expect_same(machines, held)
    runs = tuple(intervals_of(other))
    assert machines.isdisjoint(runs) == (held & other == 0)
    assert machines.intersection(runs) == tuple(intervals_of(held & other))
    if held & other == 0:
        grown = machines.copy()
        grown.add(runs)
        expect_same(grown, held | other)
        grown.remove(runs)
        assert grown == machines
    inside = tuple(intervals_of(held & other))
    machines.remove(inside)
    expect_same(machines, held & ~other)


def test_a_set_refuses_what_would_lose_track_of_machines() -> None:
    machines = MachineSet([(2, 5), (9, 9)])
    with pytest.raises(ValueError, match="already in the set"):
        machines.add([(5, 7)])
    with pytest.raises(ValueError, match="already in the set"):
        machines.add([(0, 2)])
    with pytest.raises(ValueError, match="not all in the set"):
        machines.remove([(5, 6)])
    with pytest.raises(ValueError, match="not all in the set"):
        machines.remove([(0, 0)])
    with pytest.raises(ValueError, match="6 machines asked of a set of 5"):
        machines.take_lowest(6)
    assert machines == MachineSet([(2, 5), (9, 9)])
    assert machines.take_lowest(0) == ()
    assert machines.take_lowest(5) == ((2, 5), (9, 9)) and machines == MachineSet()
    assert MachineSet.full(0).count == 0 and repr(MachineSet([(1, 2)])) == "MachineSet([(1, 2)])"
