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
