"""Running the embedded simulator in process, and the simplest scheduler that can face it.

:func:`drive` is the in-process transport: it hands each Batsim message to a handler and the
handler's reply back to the simulator, without any serialisation. :class:`SerialFcfs` is a
deliberately trivial first-come-first-served scheduler without backfilling; it exists to measure
and test the simulator on its own (the real policies live in the scheduler package).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from batsched_ml.alloc import MachineSet, procset_of_runs, runs_of
from batsched_ml.protocol.events import (
    Event,
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    Message,
    SimulationBegins,
)
from batsched_ml.sim.simulator import BatsimSimulator

Handler = Callable[[Message], Message]


def drive(sim: BatsimSimulator, handler: Handler) -> int:
    """Run ``sim`` to its end with ``handler`` answering every message; return the number of
    messages Batsim sent."""
    message: Message | None = sim.start()
    count = 0
    while message is not None:
        count += 1
        message = sim.step(handler(message))
    return count


class SerialFcfs:
    """FCFS without backfilling, lowest free machine ids first."""

    def __init__(self, nb_machines: int = 0) -> None:
        self.free = MachineSet.full(nb_machines)
        self.queue: deque[tuple[str, int]] = deque()

    def __call__(self, message: Message) -> Message:
        now = message.now
        for event in message.events:
            if isinstance(event, JobSubmitted):
                self.queue.append((event.job_id, event.job["res"]))
            elif isinstance(event, JobCompleted):
                self.free.add(runs_of(event.alloc))
            elif isinstance(event, SimulationBegins):
                self.free = MachineSet.full(event.nb_compute_resources)
        decisions: list[Event] = []
        while self.queue and self.free.count >= self.queue[0][1]:
            job_id, res = self.queue.popleft()
            decisions.append(ExecuteJob(now, job_id, procset_of_runs(self.free.take_lowest(res))))
        return Message(now, decisions)
