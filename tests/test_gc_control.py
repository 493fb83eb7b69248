"""The collector paused, or the alive objects frozen, then as before, even on an error."""

from __future__ import annotations

import gc
import threading
from types import FrameType, ModuleType

import pytest

from batsched_ml.gc_control import alive_frozen, collector_paused
from batsched_ml.sim import csim
from tests.conftest import missing_compiled


@pytest.fixture
def compiled() -> ModuleType:
    """The compiled simulator, whose C callback freezes the survivors of full passes: a failure
    where it must be there (CI sets BATSCHED_ML_REQUIRE_COMPILED=1), else a skip."""
    module = csim.module()
    if module is None:
        missing_compiled("the compiled simulator")
    return module


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


def test_survivors_of_a_full_pass_are_frozen_inside(compiled: ModuleType) -> None:
    """Inside, a full pass's survivors leave the later passes (frozen); young passes leave
    them in; cyclic garbage made inside is still found; at exit nothing stays frozen."""
    callbacks = list(gc.callbacks)
    with alive_frozen(compiled):
        at_entry = gc.get_freeze_count()
        state = [[i] for i in range(5000)]  # a replay's growing state
        gc.collect(0)
        assert gc.get_freeze_count() == at_entry
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # the full pass finds the cycle, then freezes the rest
        assert gc.get_freeze_count() >= at_entry + len(state)
    assert gc.get_freeze_count() == 0 and gc.callbacks == callbacks


def _resident_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def test_freed_memory_goes_back_to_the_system() -> None:
    """Blocks the C library kept after they were freed (between live ones, so it cannot give
    them back on its own) leave the resident memory once ``release_freed_memory`` runs."""
    import ctypes
    import sys

    from batsched_ml.gc_control import release_freed_memory

    libc = ctypes.CDLL(None)
    if not sys.platform.startswith("linux") or not hasattr(libc, "malloc_trim"):
        pytest.skip("glibc's malloc_trim and /proc are Linux's")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = [libc.malloc(100_000) for _ in range(600)]  # the heap's (mmap's start higher)
    try:
        for block in blocks:
            libc.memset(block, 1, 100_000)  # resident
        for block in blocks[::2]:  # 30 MB freed, each block between two live ones
            libc.free(block)
        kept = _resident_mib()
        release_freed_memory()
        assert _resident_mib() < kept - 15
    finally:
        for block in blocks[1::2]:
            libc.free(block)


def test_a_full_pass_of_another_thread_freezes_nothing(compiled: ModuleType) -> None:
    """Only the entering thread's full passes freeze their survivors: another thread's pass
    (an in-process side trainer's) could run its callback after the exit had unfrozen
    everything, and leave the process frozen for good."""
    with alive_frozen(compiled):
        at_entry = gc.get_freeze_count()
        kept = [[i] for i in range(2000)]  # made inside: not frozen yet
        other = threading.Thread(target=gc.collect)
        other.start()
        other.join()
        assert gc.get_freeze_count() == at_entry
        gc.collect()  # this thread's full pass freezes them
        assert gc.get_freeze_count() >= at_entry + len(kept)
    assert gc.get_freeze_count() == 0


def test_without_the_compiled_simulator_only_the_objects_alive_on_entry_are_frozen() -> None:
    callbacks = list(gc.callbacks)
    with alive_frozen(None):
        at_entry = gc.get_freeze_count()
        kept = [[i] for i in range(2000)]
        assert gc.callbacks == callbacks
        gc.collect()
        assert gc.get_freeze_count() == at_entry and kept
    assert gc.get_freeze_count() == 0


def test_no_python_code_runs_inside_the_collector_s_passes(compiled: ModuleType) -> None:
    """A signal's Python handler runs at the next bytecode that checks for signals; inside a
    gc callback written in Python its KeyboardInterrupt is lost (printed as unraisable) and a
    Ctrl-C'd replay went on. The callback is C: a profiler sees none of the module's Python
    code run during a full pass."""
    import sys

    callbacks = list(gc.callbacks)
    calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    with alive_frozen(compiled):
        sys.setprofile(profile)
        try:
            gc.collect()
        finally:
            sys.setprofile(None)
    assert [call for call in calls if call.startswith("alive_frozen")] == []
    assert gc.callbacks == callbacks
