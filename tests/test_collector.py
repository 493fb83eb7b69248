"""The collector pause leaves the collector as it found it, even on an error."""

from __future__ import annotations

import gc

import pytest

from batsched_ml.collector import collector_paused


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
