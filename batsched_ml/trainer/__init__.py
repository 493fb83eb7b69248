"""The side trainer: its server, its client, the process that runs it and the lifecycle of a
run's trainer. This module itself imports nothing, so that the command line can ask
:func:`needs_nothing` before it imports the rest (ZeroMQ among it)."""

from __future__ import annotations


def needs_nothing(classified: bool, choice: str) -> bool:
    """Whether a run with this trainer ``choice`` (``"inprocess"``, ``"process"`` or an
    endpoint) needs no trainer at all: trained in process, or a run that classifies nothing
    with no trainer of its own (one at an endpoint may still be asked to stop at the end)."""
    return choice == "inprocess" or (choice == "process" and not classified)
