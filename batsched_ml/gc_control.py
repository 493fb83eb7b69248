"""Python's cyclic garbage collector, paused where a run builds many objects that all stay
alive."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector paused while the block runs, then as it was (enabled or not).

    Reading and converting a trace and loading it into the simulator make hundreds of thousands
    of containers that all stay alive (the jobs' dicts, the simulator's jobs), and each of the
    collector's passes in the meantime traversed all of them again: on HPC2N (202,871 jobs)
    four full passes and about a hundred partial ones, 3 % of a whole replay's CPU. Nothing
    made there is cyclic garbage, and nothing else changes: the objects are the same."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def alive_frozen(compiled: ModuleType | None = None) -> Iterator[None]:
    """The objects alive on entry (the workload, the simulator's jobs loaded with the collector
    paused, the modules) left out of the collector's passes until exit (``gc.freeze``), then
    back in its oldest generation (``gc.unfreeze``). Without it the first passes after the
    load still traversed them all: a young one, two middle ones and a full one, about 3 % of a
    whole HPC2N replay's CPU (entered with the collector paused, the jobs just loaded are
    frozen before any pass). They stay alive through the replay anyway, and they are freed as before
    when their last reference goes (freezing only hides them from the cyclic collector).

    While inside, the survivors of each *full* pass are frozen too. A replay's state grows all
    along (the rows, the classifier's categories and records, the predictions), and each full
    pass traversed all of it again: on full HPC2N classified, 2.6 s in the collector's passes,
    0.75 s with the survivors frozen (``benchmarks/gc_passes.py``, which also checks that the
    files are the same). The young and middle passes run as before, and they are where the
    cyclic garbage is found. A cycle that survives a full pass and dies later is reclaimed after
    exit, when the objects are unfrozen, instead of at a later full pass inside. Only the full
    passes of the thread that entered freeze their survivors. A process that froze objects
    itself is left as it is.

    The callback that freezes them is the compiled simulator's (``compiled``: its
    ``_gc_freezer``), written in C on purpose: a signal's Python handler runs at the next
    bytecode that checks for signals, and in a callback written in Python that was the
    callback's own first one. The ``KeyboardInterrupt`` of a Ctrl-C (or of a SIGTERM) raised
    there is lost (printed as "unraisable" by the collector) and the run went on. Without the
    compiled simulator only the objects alive on entry are frozen."""
    if gc.get_freeze_count():
        yield
        return

    # only the entering thread's passes (the callback knows its thread): a pass run by another
    # thread (a side trainer's, in process) could call it after this thread's exit had
    # unfrozen everything (a thread switch inside the callback), and leave the process frozen
    freezer = None if compiled is None else compiled._gc_freezer(gc.freeze)
    gc.freeze()
    if freezer is not None:
        gc.callbacks.append(freezer)
    try:
        yield
    finally:
        if freezer is not None:
            gc.callbacks.remove(freezer)
        gc.unfreeze()


def release_freed_memory() -> None:
    """Give the memory freed so far back to the system, where the C library keeps it.

    glibc's ``malloc`` keeps the large blocks a step frees (a trace's columns and text while
    it is converted: about 100 MiB on HPC2N) in its heap for later requests, but the objects
    made next are Python's small ones, which come from its own arenas, not from that heap: the
    freed blocks stayed in the process's resident memory through the whole replay.
    ``malloc_trim`` returns them. Other C libraries (or none found) are left as they are; no
    result depends on it."""
    try:
        import ctypes

        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # the process's own symbols
    except (ImportError, OSError):
        return
    if trim is not None:
        trim(0)
