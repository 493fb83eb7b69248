"""Running the embedded simulator in process, and the simplest scheduler that can face it.

:func:`drive` is the in-process transport: it hands each Batsim message to a handler and the
handler's reply back to the simulator, without any serialisation. :class:`SerialFcfs` is a
deliberately trivial first-come-first-served scheduler without backfilling; it exists to measure
and test the simulator on its own (the real policies live in the scheduler package).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from procset import ProcSet

from batsched_ml.protocol.events import (
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

    def __init__(self, nb_machines: int | None = None) -> None:
        self.free: list[int] = list(range(nb_machines)) if nb_machines else []
        self.queue: deque[tuple[str, int]] = deque()

    def __call__(self, message: Message) -> Message:
        now = message.now
        for event in message.events:
            if isinstance(event, JobSubmitted):
                self.queue.append((event.job_id, event.job["res"]))
            elif isinstance(event, JobCompleted):
                self.free.extend(event.alloc)
            elif isinstance(event, SimulationBegins):
                self.free = list(range(event.nb_compute_resources))
        decisions = []
        if self.queue and len(self.free) >= self.queue[0][1]:
            self.free.sort()
            while self.queue and len(self.free) >= self.queue[0][1]:
                job_id, res = self.queue.popleft()
                hosts, self.free = self.free[:res], self.free[res:]
                decisions.append(ExecuteJob(now, job_id, ProcSet(*hosts)))
        return Message(now, decisions)
