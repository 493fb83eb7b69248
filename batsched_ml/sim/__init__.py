"""The embedded Batsim 4.2.1: :class:`BatsimSimulator` plays Batsim's side of the protocol in
process (``batsched-ml replay``, and ``batsched-ml batsim`` as a stand-in over ZeroMQ).

The names below are imported when first used (PEP 562): a run that only writes a jobs table
(``batsched_ml.sim.jobs_csv``) or replays with the compiled engine does not import the
simulator, its kernel and the protocol's events with it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batsched_ml.sim.simulator import BatsimSimulator, InvalidDecision, SimulationError

__all__ = ["BatsimSimulator", "InvalidDecision", "SimulationError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from batsched_ml.sim import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
