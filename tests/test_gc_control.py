"""The collector paused, or the alive objects frozen, then as before, even on an error."""

from __future__ import annotations

import gc

import pytest

from batsched_ml.gc_control import alive_frozen, collector_paused


def test_the_collector_is_paused_then_as_before() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # left disabled, as the caller had it
    finally:
        gc.enable()


def test_alive_objects_are_frozen_then_back() -> None:
    assert gc.get_freeze_count() == 0
    kept = [{"job": i} for i in range(1000)]
    with alive_frozen():
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0
    with pytest.raises(ValueError), alive_frozen():
        raise ValueError
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a process that froze objects itself keeps them frozen
    try:
        count = gc.get_freeze_count()
        with alive_frozen():
            pass
        assert gc.get_freeze_count() == count
    finally:
        gc.unfreeze()
