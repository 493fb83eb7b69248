"""Bitmask <-> ProcSet conversions and the lowest-first placement rule."""

from __future__ import annotations

import random

from procset import ProcSet

from batsched_ml.alloc import full_mask, intervals_of, lowest, mask_of, procset_of


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


def test_procset_of_gives_a_new_procset_each_time() -> None:
    """Built ProcSets are cached by mask: changing one handed out must not change the next."""
    mask = mask_of(ProcSet((0, 3), 7))
    first = procset_of(mask)
    first.update(ProcSet(9))
    first.difference_update(ProcSet(0))
    assert procset_of(mask) == ProcSet((0, 3), 7)
    assert procset_of(mask) is not procset_of(mask)
    assert procset_of(0) == ProcSet()


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
