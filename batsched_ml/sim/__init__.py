"""The embedded Batsim 4.2.1: :class:`BatsimSimulator` plays Batsim's side of the protocol in
process (``batsched-ml replay``, and ``batsched-ml batsim`` as a stand-in over ZeroMQ)."""

from batsched_ml.sim.simulator import BatsimSimulator, InvalidDecision, SimulationError

__all__ = ["BatsimSimulator", "InvalidDecision", "SimulationError"]
