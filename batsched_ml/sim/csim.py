"""The simulator a replay runs: the compiled one (``_csim.c``) where it simulates what is asked,
else the Python reference (:class:`~batsched_ml.sim.simulator.BatsimSimulator`).

``_csim.c`` is Batsim's actors on SimGrid's kernel in C, transcribed from
:mod:`batsched_ml.sim.simulator` (the reference, kept and compared with it byte for byte by
``tests/test_compiled_sim.py``). It holds no scheduler: at each message it builds the protocol's
typed events, calls the scheduler's ``handle`` and reads its decisions, so every policy,
variant, predictor, dispatcher and plug-in decides through the one Python source.

Which simulator runs is decided by what the compiled one *supports*, never by the run's
settings (it does not see them): one workload of ``delay`` profiles, with or without dynamic
jobs, without forwarded profiles, as Batsim 4 (Batsim 5's actors are the reference's only), on
the exact platform (its messages take 1e-12 s: given a platform's ``routes``, links with
latencies, the reference runs).
Asked for anything else, or given a workload it is not sure of (``simulate`` answers ``None``
before the first message), the reference runs, which gives the same messages and files.
``BATSCHED_ML_KERNEL=python`` (:mod:`batsched_ml.compiled`) turns it off
with the other compiled parts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from batsched_ml import compiled
from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    RegisterJob,
    RegisterProfile,
    RejectJob,
    RequestedCall,
    SetJobMetadata,
    SimulationEnds,
)
from batsched_ml.sim.simulator import (
    Batsim5,
    BatsimSimulator,
    InvalidDecision,
    begins_event,
    problems,
)
from batsched_ml.workload.platform import MessageRoutes

NAME = "batsched_ml.sim._csim"
SOURCE = Path(__file__).with_name("_csim.c")

#: the classes the C simulator makes and reads, in the order of its ``T_*`` constants
TYPES = (
    Message,
    JobSubmitted,
    JobCompleted,
    JobKilled,
    RequestedCall,
    SimulationEnds,
    Notify,
    ExecuteJob,
    RejectJob,
    KillJob,
    CallMeLater,
    SetJobMetadata,
    RegisterProfile,
    RegisterJob,
    InvalidDecision,
)


def module() -> ModuleType | None:
    """The compiled simulator, if built from the source beside it and not turned off."""
    return compiled.compiled_module(NAME, SOURCE)


class Simulator:
    """One simulation, by the compiled simulator when it supports it, else by the reference.

    Takes :class:`BatsimSimulator`'s arguments (``routes`` too: the reference takes them);
    :meth:`run` plays it to its end with a scheduler's ``handle`` deciding. Afterwards ``rows``
    holds ``jobs.csv``'s rows, ``messages`` the number of messages sent and ``engine`` what
    simulated: ``"compiled"`` or ``"python"``.
    """

    def __init__(
        self,
        workloads: list[dict[str, Any]],
        hosts: list[str],
        *,
        dynamic_jobs: bool = False,
        acknowledge_dynamic_jobs: bool = False,
        profile_reuse: bool = False,
        forward_profiles: bool = False,
        workload_paths: list[str] | None = None,
        compiled_module: ModuleType | None = None,
        batsim5: Batsim5 | None = None,
        routes: MessageRoutes | None = None,
    ) -> None:
        if not hosts:
            raise ValueError("a platform needs at least one compute host")
        self.workloads = workloads
        self.hosts = list(hosts)
        self.flags = {
            "dynamic_jobs": dynamic_jobs,
            "acknowledge_dynamic_jobs": acknowledge_dynamic_jobs,
            "profile_reuse": profile_reuse,
            "forward_profiles": forward_profiles,
        }
        self.workload_paths = workload_paths
        self.batsim5 = batsim5
        self.routes = routes
        self.module = compiled_module if compiled_module is not None else module()
        self.rows: list[str] = []
        self.messages = 0
        self.engine = ""
        self._reference: BatsimSimulator | None = None

    def supported(self) -> bool:
        """Whether the compiled simulator simulates what is asked (the workload itself is
        judged when it loads it)."""
        return (
            self.module is not None
            and len(self.workloads) == 1
            and not self.flags["forward_profiles"]
            and self.batsim5 is None  # Batsim 5's actors are the reference's only
            and self.routes is None  # its messages take 1e-12 s: the exact platform only
        )

    def prepare(self) -> None:
        """Load the workload now where that makes objects (the reference's jobs), so that a
        caller can do it with the garbage collector paused (:mod:`batsched_ml.gc_control`)."""
        if not self.supported() and self._reference is None:
            self._reference = BatsimSimulator(
                self.workloads,
                self.hosts,
                workload_paths=self.workload_paths,
                batsim5=self.batsim5,
                routes=self.routes,
                **self.flags,
            )

    def run(
        self, handler: Callable[[Message], Message], progress: Callable[[int], None] | None = None
    ) -> int:
        """Play the simulation to its end with ``handler`` deciding; the messages sent."""
        if self.supported():
            out = self._run_compiled(handler, progress)
            if out is not None:
                return out
        self.module = None  # the reference simulates this one
        self.prepare()
        assert self._reference is not None
        self.rows = self._reference.rows
        self.messages = self._reference.run(handler, progress)
        self.engine = "python"
        return self.messages

    def _run_compiled(
        self, handler: Callable[[Message], Message], progress: Callable[[int], None] | None
    ) -> int | None:
        assert self.module is not None
        workload = self.workloads[0]
        jobs, profiles = workload.get("jobs", []), workload.get("profiles", {})
        if type(jobs) is not list or type(profiles) is not dict:
            return None
        paths = self.workload_paths or ["workload0.json"]
        begins = begins_event(
            self.hosts,
            workloads={"w0": paths[0]},
            profiles={"w0": dict(profiles)},
            **self.flags,
        )
        out = self.module.simulate(
            jobs,
            profiles,
            len(self.hosts),
            handler,
            TYPES,
            begins,
            problems,
            progress,
            dynamic_jobs=self.flags["dynamic_jobs"],
            acknowledge_dynamic_jobs=self.flags["acknowledge_dynamic_jobs"],
            profile_reuse=self.flags["profile_reuse"],
        )
        if out is None:
            return None
        self.rows, self.messages, _events = out
        if progress is not None:
            progress(sum(",COMPLETED_KILLED," not in row for row in self.rows))
        self.engine = "compiled"
        return self.messages
