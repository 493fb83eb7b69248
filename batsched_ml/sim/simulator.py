"""An embedded discrete-event simulator that plays Batsim 4.2.1's side of the protocol.

It supports what batsched-ml needs of Batsim for ``delay`` profiles, on a homogeneous cluster with
the exact-timing conventions of ``shared/batsim-reference`` (latency 0, 1 TBps links), or with
link latencies given as the routes of Batsim's messages (``routes``, see below): static
submissions, EXECUTE_JOB, completion and walltime kills, KILL_JOB, REJECT_JOB, CALL_ME_LATER,
dynamic jobs (REGISTER_PROFILE, REGISTER_JOB, registration NOTIFYs) and SET_JOB_METADATA. It is
a pure request/reply state machine: :meth:`BatsimSimulator.start` gives the first message,
:meth:`BatsimSimulator.step` takes the scheduler's reply and gives the next one. The transports
(in-process loop, ZeroMQ) sit outside.

How it reproduces real Batsim exactly: it runs Batsim's own actors (``job_submitter.cpp``,
``server.cpp``, ``network.cpp``, ``jobs_execution.cpp``, ``protocol.cpp`` of v4.2.1, rewritten
here as generators) on an emulation of SimGrid 3.32's kernel (:mod:`batsched_ml.sim.simgrid`,
whose design note says which SimGrid rule each piece mirrors). The order and grouping of events
therefore follow from the same mechanics as in Batsim:

* every message between Batsim's actors (a submission, a job's end, each decision forwarded by
  the REQ-REP actor, its final "ready") is a 1-byte SimGrid communication to the server, which
  takes ``1e-12`` s on the exact platform; with link latencies (``routes``:
  :func:`~batsched_ml.workload.platform.message_routes`) it takes its route's latency, then 1
  byte at the narrowest link's bandwidth, from the master host (every actor's but a job's) or
  from the first host of the job's allocation (``fcfs_small_latency`` of both reference
  folders: 600 us + 8 ns and 1.6 ms + 8 ns); the server handles one at a time and sends the
  scheduler a message only
  when it is free (its last message answered) and its mailbox is empty, so whatever is already
  queued at that moment goes in the same message;
* the submitter sends each group of jobs with the same ``subtime`` in one communication (ordered
  by job id as a string), sleeps until the next ``subtime`` (``sleep_for(subtime - clock)``,
  computed in ``long double``) and reads the clock again;
* a job's actor sleeps its delay (or its walltime, if not longer: a walltime kill), then reports;
* the REQ-REP actor applies each decision at its timestamp, sleeping ``timestamp - clock`` when
  the timestamp (as the scheduler read it, six decimals) is later than SimGrid's clock.

SimGrid's clock is a double advanced by floating-point steps (a communication's ``1e-12`` s moves
it by an ulp or not at all; a sleep's remaining duration loses its own roundings at each step), so
it is not always on the integer that Batsim's six decimals show. Most of the time this changes
nothing visible; sometimes the submitter wakes an ulp before a ``subtime`` and splits a burst of
submissions (``clock_drift``), or same-instant completions land more than 1e-9 s apart and come
in separate messages (``ctc_sp2_full``). Times handed to the scheduler are printed as Batsim
prints them (``%f``) and read back; jobs.csv is computed from the clock in ``long double`` as
Batsim's ``export.cpp`` does.

Invalid decisions raise :class:`InvalidDecision` naming the decision, where Batsim would abort.

Batsim 5.0.0-rc2 is played too (:class:`Batsim5`): its actors (``server.cpp``, ``edc.cpp``,
``periodic.cpp`` of that tag) on the same kernel (Batsim 5 runs on SimGrid 4.0, which the
recordings show keeping the emulated 3.32's rules). Fed the decisions of every recording of
``shared/batsim5-reference``, the simulator sends the very text Batsim 5 sent and
writes its ``jobs.csv`` byte for byte (``tests/test_batsim5_standin.py``).

This module is also the reference of ``_csim.c``, the compiled simulator: the same actors,
simcalls and order in C, for static workloads, with the same scheduler attached as its decision
callback (:mod:`batsched_ml.sim.csim`); both give the same messages and files byte for byte
(``tests/test_compiled_sim.py``). A change here is a change there. The errors both raise are
written once, in :class:`problems`. Routes (link latencies) are this module's only, on the
Python kernel (:data:`RoutedKernel`): the compiled simulator and kernel leave them to it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from procset import ProcSet

from batsched_ml.alloc import MachineSet, Runs, intervals_of, procset_of_runs, runs_of, size_of
from batsched_ml.errors import UserError
from batsched_ml.gc_control import collector_paused
from batsched_ml.protocol.codec_v5 import (
    JobKilledV5,
    RequestedCallV5,
    SimulationBeginsV5,
    fixed,
    profile_and_id,
)
from batsched_ml.protocol.events import (
    CallMeLater,
    Event,
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
    SimulationBegins,
    SimulationEnds,
)
from batsched_ml.sim import jobs_csv, simgrid
from batsched_ml.sim.simgrid import (
    CREATE,
    EXCHANGE,
    GET,
    KILL,
    PUT,
    SLEEP,
    Actor,
    Simcall,
    kernel_class,
)
from batsched_ml.workload.platform import MessageRoutes, batsim5_host_order

# The kernel the simulator runs (the compiled one unless BATSCHED_ML_KERNEL=python or it is not
# built); chosen once, at import; tests replace it to run another.
Kernel = kernel_class()
# The kernel of a platform with link latencies (routes): the Python one, the only one that takes
# routes, whichever the above is; tests replace it too.
RoutedKernel: type[simgrid.Kernel] = simgrid.Kernel


class SimulationError(UserError, RuntimeError):
    """The simulation cannot go on (an invalid decision, or a scheduler that left it stuck)."""


class InvalidDecision(SimulationError):
    """A decision real Batsim would abort on; names the decision type and what is wrong."""

    def __init__(self, decision: str, subject: str, reason: str) -> None:
        super().__init__(f"invalid {decision} ({subject}): {reason}")
        self.decision = decision
        self.subject = subject
        self.reason = reason


_SUBMITTED, _RUNNING, _DONE, _REJECTED = 1, 2, 3, 4
# why a job that is not waiting cannot be executed or rejected (a finished or rejected job is
# still known until the message telling it is sent)
_NOT_WAITING = {
    _RUNNING: "job is already running",
    _DONE: "job has already finished",
    _REJECTED: "job was rejected",
}
_STATES = {"running": _RUNNING, "done": _DONE, "rejected": _REJECTED}


class problems:
    """What is wrong with a decision or a simulation, as the exception to raise: written once
    for the two simulators (this module's and ``_csim.c``, which calls these on its error
    paths), so that both say the same thing."""

    @staticmethod
    def parse(decision: Event, dynamic_jobs: bool = False) -> InvalidDecision:
        """A decision a simulator without dynamic jobs does not take (or not a decision)."""
        match decision:
            case RegisterProfile():
                return InvalidDecision(decision.TYPE, decision.profile_name, _NO_DYNAMIC)
            case RegisterJob():
                return InvalidDecision(decision.TYPE, decision.job_id, _NO_DYNAMIC)
            case Notify():
                return InvalidDecision(decision.TYPE, decision.type, _NO_DYNAMIC)
            case SetJobMetadata():
                return InvalidDecision(decision.TYPE, decision.job_id, "metadata contains '\"'")
        return InvalidDecision(decision.TYPE, "type", "not a decision Batsim accepts")

    @staticmethod
    def register_profile(
        decision: RegisterProfile, profiles: dict[str, dict[str, Any]]
    ) -> InvalidDecision | None:
        """What is wrong with a REGISTER_PROFILE into a workload holding ``profiles``."""
        name = decision.workload_name
        if not name or "!" in name:
            return InvalidDecision(decision.TYPE, name, "invalid workload name")
        if decision.profile_name in profiles:
            return InvalidDecision(
                decision.TYPE,
                f"{decision.workload_name}/{decision.profile_name}",
                "profile already exists",
            )
        try:
            delay_of(decision.profile, f"profile {decision.profile_name}")
        except SimulationError as exc:
            return InvalidDecision(decision.TYPE, decision.profile_name, str(exc))
        return None

    @staticmethod
    def register_job(
        decision: RegisterJob,
        finished: bool,
        profiles: dict[str, dict[str, Any]] | None,
        used: bool,
    ) -> InvalidDecision | None:
        """What is wrong with a REGISTER_JOB (``profiles``: those of its workload, None if
        the workload is unknown; ``used``: its id was already given to a job)."""
        kind, job_id, obj = decision.TYPE, decision.job_id, decision.job
        if finished:
            return InvalidDecision(kind, job_id, "registration is already finished")
        if obj.get("id") != job_id:
            return InvalidDecision(kind, job_id, f"job.id {obj.get('id')!r} differs from job_id")
        if profiles is None:
            workload_name = job_id.partition("!")[0]
            return InvalidDecision(kind, job_id, f"unknown workload {workload_name!r}")
        if used:
            return InvalidDecision(kind, job_id, "job id already used (even a finished job's)")
        subtime = obj.get("subtime")
        if subtime is None:
            return InvalidDecision(kind, job_id, "job has no 'subtime' (Batsim 4.2.1 aborts)")
        res = obj.get("res")
        if isinstance(res, bool) or not isinstance(res, int) or res <= 0:
            return InvalidDecision(kind, job_id, f"'res' must be a positive integer, got {res!r}")
        walltime = obj.get("walltime", -1)
        if walltime != -1 and not walltime > 0:
            return InvalidDecision(kind, job_id, f"'walltime' must be -1 or > 0, got {walltime!r}")
        profile = obj.get("profile")
        if profile not in profiles:
            return InvalidDecision(
                kind, job_id, f"profile {profile!r} does not exist (or was already forgotten)"
            )
        return None

    @staticmethod
    def notify(decision: Notify) -> InvalidDecision:
        return InvalidDecision(decision.TYPE, decision.type, "unknown NOTIFY type")

    @staticmethod
    def unknown_job(decision: Event, job_id: str, used: bool) -> InvalidDecision:
        if used:
            return InvalidDecision(
                decision.TYPE,
                job_id,
                "job is not submitted yet or already finished (Batsim 4 forgets finished jobs)",
            )
        return InvalidDecision(decision.TYPE, job_id, "unknown job")

    @staticmethod
    def not_waiting(decision: Event, job_id: str, state: str) -> InvalidDecision:
        """A job that is ``running``, ``done`` or ``rejected`` cannot be executed or rejected."""
        return InvalidDecision(decision.TYPE, job_id, _NOT_WAITING[_STATES[state]])

    @staticmethod
    def execute(
        decision: ExecuteJob, job_id: str, res: int, hosts: int, busy: MachineSet | int
    ) -> InvalidDecision | None:
        """What is wrong with the allocation of an EXECUTE_JOB (``busy``: the machines in use,
        a set, or a bitmask from the compiled simulator), or None."""
        problem = problems.fields(decision, job_id)
        if problem is not None:
            return problem
        return problems.allocation(decision, job_id, res, hosts, busy, runs_of(decision.alloc))

    @staticmethod
    def fields(decision: ExecuteJob, job_id: str) -> InvalidDecision | None:
        """An EXECUTE_JOB with fields Batsim's delay jobs do not take, or no machine."""
        if decision.extra:
            return InvalidDecision(
                decision.TYPE, job_id, f"unsupported fields {sorted(decision.extra)}"
            )
        if not decision.alloc:
            return InvalidDecision(decision.TYPE, job_id, "empty allocation")
        return None

    @staticmethod
    def allocation(
        decision: ExecuteJob, job_id: str, res: int, hosts: int, busy: MachineSet | int, runs: Runs
    ) -> InvalidDecision | None:
        """:meth:`execute`'s checks of a non-empty allocation given as its runs (the Python
        simulator has them at hand: it keeps them)."""
        alloc = decision.alloc
        # counted on the runs (a ProcSet's len is a generator over ProcInt lengths)
        size = size_of(runs)
        if size != res:
            return InvalidDecision(
                decision.TYPE,
                job_id,
                f"allocation {alloc} has {size} machines, the job requests {res}",
            )
        if runs[0][0] < 0 or runs[-1][1] >= hosts:
            return InvalidDecision(
                decision.TYPE,
                job_id,
                f"allocation {alloc} names machines outside 0-{hosts - 1}",
            )
        in_use = busy if isinstance(busy, MachineSet) else MachineSet(intervals_of(busy))
        if not in_use.isdisjoint(runs):
            taken = procset_of_runs(in_use.intersection(runs))
            return InvalidDecision(decision.TYPE, job_id, f"machines {taken} are already in use")
        return None

    @staticmethod
    def not_running(decision: Event, job_id: str) -> InvalidDecision:
        return InvalidDecision(decision.TYPE, job_id, "job is not running")

    @staticmethod
    def call_not_later(decision: CallMeLater, now: float) -> InvalidDecision:
        return InvalidDecision(
            decision.TYPE,
            "timestamp",
            f"call requested at {decision.when}, not strictly after now {json_time(now)}",
        )

    @staticmethod
    def stuck(now: float, waiting: list[str], dynamic_jobs: bool = False) -> SimulationError:
        """The simulation cannot go on: jobs never executed nor rejected, or (dynamic jobs) no
        NOTIFY registration_finished."""
        if waiting:
            shown = ", ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
            return SimulationError(
                f"simulation stuck at t={now}: {len(waiting)} submitted job(s) never "
                f"executed nor rejected ({shown}) and nothing else can happen"
            )
        return SimulationError(
            f"simulation stuck at t={now}: dynamic jobs are enabled and the scheduler "
            "never sent NOTIFY registration_finished"
        )


_NO_DYNAMIC = "dynamic jobs are disabled"


# Messages to Batsim's server (``IPMessageType``): (kind, data).
(
    _HELLO,
    _BYE,
    _JOBS_SUBMITTED,
    _JOB_COMPLETED,
    _EXECUTE,
    _REJECT,
    _KILL,
    _CALL_ME_LATER,
    _READY,
    _WAITING_DONE,
    _KILLING_DONE,
    _JOB_REGISTERED,
    _PROFILE_REGISTERED,
    _END_REGISTRATION,
    _CONTINUE_REGISTRATION,
    _SET_METADATA,
    _DIE,
) = range(17)

_SERVER = "server"
_PERIODIC = "periodic"  # Batsim 5's actor of periodic calls, told to die at the end
_INFINITIES = (float("inf"), float("-inf"))
_Code = Generator[Simcall, Any, None]


def delay_of(profile: dict[str, Any], where: str) -> float:
    """The delay of a profile the simulators simulate (``delay`` profiles only)."""
    if profile.get("type") != "delay":
        raise SimulationError(f"{where}: only 'delay' profiles are simulated")
    delay = profile.get("delay")
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not delay > 0:
        raise SimulationError(f"{where}: a delay profile needs a delay > 0, got {delay!r}")
    return float(delay)


def json_time(clock: float) -> float:
    """A time as the scheduler reads it: Batsim prints SimGrid's clock with ``%f``."""
    return clock if clock.is_integer() else float(f"{clock:.6f}")


@dataclass(slots=True, eq=False)
class _LiveJob:
    """A job Batsim knows and has not finished (submitted or running)."""

    job_id: str
    workload: str
    name: str
    obj: dict[str, Any]
    profile: str
    delay: float
    res: int
    walltime: float | None
    subtime: float
    state: int = _SUBMITTED
    start: float = 0.0
    end: float = 0.0
    final: str = ""
    alloc: ProcSet | None = None
    runs: Runs = ()
    actor: Actor | None = None
    kill_requested: bool = False
    metadata: str = ""
    registered: bool = False  # registered by the scheduler (a dynamic job)


@dataclass(slots=True)
class _Workload:
    name: str
    profiles: dict[str, dict[str, Any]]
    refcount: dict[str, int] = field(default_factory=dict)


def _walltime(obj: dict[str, Any]) -> float | None:
    value = obj.get("walltime")
    if value is None or value == -1:
        return None
    return value


#: what the stand-in says it is in Batsim 5's SIMULATION_BEGINS: the version it reproduces,
#: and in place of Batsim's commit, that it is not Batsim
BATSIM5_VERSION = "5.0.0-rc2"
BATSIM5_COMMIT = "batsched-ml stand-in"


@dataclass(frozen=True, slots=True)
class Batsim5:
    """A simulation as Batsim 5.0.0-rc2 runs it: ``features``, the EDC's
    ``requested_simulation_features`` (they replace Batsim 4's command-line flags for dynamic
    jobs and profiles); ``arguments`` and ``execution_context``, what SIMULATION_BEGINS reports
    as Batsim's command line and its execution context (JSON text)."""

    features: dict[str, bool] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()
    execution_context: str = "{}"


class BatsimSimulator:
    """Batsim's side of the protocol, in process.

    Parameters mirror Batsim's command line: ``workloads`` is a list of parsed workload JSON
    objects (named ``w0``, ``w1``, ... as ``-w`` does), ``hosts`` the compute host names (ids are
    their positions), and the flags are ``--enable-dynamic-jobs``,
    ``--acknowledge-dynamic-jobs``, ``--enable-profile-reuse`` and
    ``--forward-profiles-on-submission``. ``workload_paths`` is only what SIMULATION_BEGINS
    reports as each workload's file.

    ``batsim5`` simulates Batsim 5.0.0-rc2 instead (:class:`Batsim5`: the flags come from the
    EDC's features, and giving one of them too is an error). Its actors differ from Batsim
    4's: the server calls the scheduler itself and hands its decisions to an injector actor,
    a ``periodic`` actor is told to die before SIMULATION_ENDS, dynamic jobs are registered
    when the server reads them (submitted at that instant), the protocol's times are SimGrid's
    clock in full (Batsim 4 printed six decimals), jobs may share hosts (rc2 does not check),
    and jobs.csv has its own columns (:func:`jobs_csv.finished_row_v5`). Same schedules as
    Batsim 4 otherwise (``shared/batsim5-reference``).

    ``routes``: the routes of Batsim's messages on a platform with link latencies
    (:func:`~batsched_ml.workload.platform.message_routes`; None, the exact platform's 1e-12 s
    hops); the simulation then runs on :data:`RoutedKernel`, the Python kernel.
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
        batsim5: Batsim5 | None = None,
        routes: MessageRoutes | None = None,
    ) -> None:
        if not hosts:
            raise ValueError("a platform needs at least one compute host")
        self.batsim5 = batsim5
        self.routes = routes
        if batsim5 is not None:
            if dynamic_jobs or acknowledge_dynamic_jobs or profile_reuse or forward_profiles:
                raise ValueError("Batsim 5 takes dynamic jobs and profiles as EDC features")
            features = batsim5.features
            dynamic_jobs = features.get("dynamic_registration", False)
            acknowledge_dynamic_jobs = features.get("acknowledge_dynamic_jobs", False)
            profile_reuse = dynamic_jobs and features.get("profile_reuse", False)
            forward_profiles = features.get("forward_profiles_on_job_submission", False)
        self.hosts = list(hosts)
        self.dynamic_jobs = dynamic_jobs
        self.acknowledge_dynamic_jobs = acknowledge_dynamic_jobs
        self.profile_reuse = profile_reuse
        self.forward_profiles = forward_profiles
        self._paths = workload_paths or [f"workload{i}.json" for i in range(len(workloads))]
        self._workloads: dict[str, _Workload] = {}
        self._static: list[deque[_LiveJob]] = []
        self._live: dict[str, _LiveJob] = {}
        self._to_delete: list[_LiveJob] = []  # finished or rejected, until the next message
        self._used_ids: set[str] = set()
        self._busy = MachineSet()
        # links with latencies: the Python kernel, the only one that takes routes
        self._kernel = Kernel() if routes is None else RoutedKernel(routes.route)
        # a job's actor runs on the first host of its allocation, by resource id
        self._host_of_id = self.hosts if batsim5 is None else batsim5_host_order(self.hosts)
        self._run: Generator[Any, Any, None] | None = None
        self._last_now = 0.0
        # The server's state (ServerData)
        self._outbox: list[Event] = []
        self._sched_ready = False
        self._end_sent = False
        self._end_ack = False
        self._submitters_done = 0
        self._running = 0
        self._waiters = 0
        self._killers = 0
        self._registration_finished = not dynamic_jobs
        self._started = False
        self._finished = False
        self.rows: list[str] = []
        self.events_sent = 0
        with collector_paused():  # a _LiveJob per job, all alive: no collector passes over them
            self._load(workloads)
        for index in range(len(self._static)):
            self._kernel.spawn(f"workload_submitter_w{index}", self._submitter(index))
        self._kernel.spawn("server", self._server())

    # --- set-up -------------------------------------------------------------------------

    def _load(self, workloads: list[dict[str, Any]]) -> None:
        for index, data in enumerate(workloads):
            name = f"w{index}"
            profiles = dict(data.get("profiles", {}))
            workload = _Workload(name=name, profiles=profiles)
            self._workloads[name] = workload
            jobs: list[_LiveJob] = []
            used = self._used_ids
            refcount = workload.refcount
            delays = {name: self._delay_of(p, f"profile {name}") for name, p in profiles.items()}
            for obj in data.get("jobs", []):
                job_name = str(obj["id"])
                job_id = f"{name}!{job_name}"
                if job_id in used:
                    raise SimulationError(f"workload {name}: duplicate job id {job_name}")
                profile = obj["profile"]
                if profile not in delays:
                    raise SimulationError(f"job {job_id}: unknown profile {profile!r}")
                used.add(job_id)
                jobs.append(
                    _LiveJob(
                        job_id,
                        name,
                        job_name,
                        obj,  # the forwarded copy (id rewritten) is made at submission
                        profile,
                        delays[profile],
                        obj["res"],
                        _walltime(obj),
                        float(obj["subtime"]),
                    )
                )
                refcount[profile] = refcount.get(profile, 0) + 1
            # job_comparator_subtime_number: by subtime, then by job id as a string
            jobs.sort(key=lambda job: (job.subtime, job.name))
            self._static.append(deque(jobs))

    @staticmethod
    def _delay_of(profile: dict[str, Any], where: str) -> float:
        return delay_of(profile, where)

    # --- the protocol -------------------------------------------------------------------

    @property
    def now(self) -> float:
        """SimGrid's clock (a double, not rounded to Batsim's six decimals)."""
        return self._kernel.now

    @property
    def steps(self) -> int:
        """How many times SimGrid's clock has moved."""
        return self._kernel.steps

    @property
    def finished(self) -> bool:
        """True once SIMULATION_ENDS was sent and answered."""
        return self._finished

    def start(self) -> Message:
        """The first message: SIMULATION_BEGINS, alone, at time 0."""
        if self._started:
            raise SimulationError("the simulation has already started")
        self._started = True
        self._run = self._kernel.run()
        return self._deliver(next(self._run))

    def step(self, reply: Message) -> Message | None:
        """Apply the scheduler's ``reply`` and return Batsim's next message, or ``None`` once
        the reply to SIMULATION_ENDS has been received."""
        if not self._started or self._run is None:
            raise SimulationError("step() before start()")
        if self._finished:
            raise SimulationError("the simulation is over")
        now = reply.now
        if isinstance(now, bool) or not now == now or now in _INFINITIES:
            raise InvalidDecision("message", "now", f"reply 'now' {now} is not a finite number")
        if now < self._last_now:
            raise InvalidDecision(
                "message", "now", f"reply 'now' {now} is before Batsim's now {self._last_now}"
            )
        for decision in reply.events:
            if decision.timestamp > now:
                raise InvalidDecision(
                    decision.TYPE,
                    "timestamp",
                    f"stamped {decision.timestamp}, later than the reply's now {now}",
                )
        try:
            message = self._run.send(reply)
        except StopIteration:
            if self._end_ack:
                self._finished = True
                return None
            raise self._stuck() from None
        return self._deliver(message)

    def _deliver(self, message: Message) -> Message:
        # the now the scheduler read: Batsim 5 writes it with 12 decimals (rounded either way)
        self._last_now = message.now if self.batsim5 is None else float(fixed(message.now))
        self.events_sent += len(message.events)
        return message

    def _stuck(self) -> SimulationError:
        now = self._kernel.now
        waiting = [job.job_id for job in self._live.values() if job.state == _SUBMITTED]
        return problems.stuck(now, waiting)

    # --- Batsim's actors ------------------------------------------------------------------

    def _submitter(self, index: int) -> _Code:
        """``static_job_submitter_process``."""
        kernel = self._kernel
        yield (PUT, _SERVER, (_HELLO, None))
        current = kernel.now
        batch: list[_LiveJob] = []
        jobs = self._static[index]
        while jobs:
            # taken out as submitted: a finished job is then freed, not kept to the end (and
            # traversed by each of the garbage collector's full passes)
            job = jobs.popleft()
            if job.subtime > current:
                if batch:
                    yield (PUT, _SERVER, (_JOBS_SUBMITTED, batch))
                    batch = []
                # long double subtime - clock, exact, then rounded once to double: the same
                # as the double subtraction, which is correctly rounded.
                yield (SLEEP, job.subtime - current)
                current = kernel.now
            batch.append(job)
        if batch:
            yield (PUT, _SERVER, (_JOBS_SUBMITTED, batch))
        yield (PUT, _SERVER, (_BYE, None))

    def _server(self) -> _Code:
        """``server_process``: handle one message at a time; talk to the scheduler when it is
        free and nothing else is queued."""
        if self.batsim5 is not None:
            yield from self._server_v5()
            return
        kernel = self._kernel
        self._outbox.append(self._begins())
        yield from self._send_to_scheduler()
        handlers = self._handlers()
        while not self._end_ack:
            kind, data = yield (GET, _SERVER)
            effect = handlers[kind](data)
            if effect is not None:
                created = yield effect
                if kind == _EXECUTE:
                    self._live[data.job_id].actor = created
            if self._sched_ready and not self._end_ack and not kernel.has_pending(_SERVER):
                if self._outbox:
                    yield from self._send_to_scheduler()
                elif self._simulation_finished() and not self._end_sent:
                    self._outbox.append(SimulationEnds(timestamp=json_time(kernel.now)))
                    yield from self._send_to_scheduler()
                    self._end_sent = True

    def _send_to_scheduler(self) -> _Code:
        """``generate_and_send_message``: the pending events go to a new REQ-REP actor."""
        message = Message(now=json_time(self._kernel.now), events=self._outbox)
        self._outbox = []
        yield (CREATE, "Scheduler REQ-REP", self._request_reply(message))
        self._sched_ready = False
        # the main loop's ``jobs_to_be_deleted``: a job that ended or was rejected is forgotten
        # once the message telling it is sent, not when it ended, so a KILL_JOB in the reply
        # to an earlier message (a call at the very instant the job ends) finds it complete
        # and is acknowledged (JOB_KILLED), as Batsim does (``server_on_kill_jobs``)
        for job in self._to_delete:
            del self._live[job.job_id]
            self._release_profile(job)
        self._to_delete = []

    def _server_v5(self) -> _Code:
        """Batsim 5's ``server_process``: the EDC's hello is behind (SIMULATION_BEGINS, stamped
        0, waits in the message); the ``periodic`` actor is created; then, at each turn, talk
        to the scheduler if it is free and the mailbox empty (the message, or the end once the
        simulation is finished, after telling ``periodic`` to die), and handle one message."""
        kernel = self._kernel
        self._outbox.append(self._begins())
        self._sched_ready = True
        yield (CREATE, _PERIODIC, self._periodic())
        handlers = self._handlers()
        while not self._end_ack:
            if self._sched_ready and not kernel.has_pending(_SERVER):
                if self._outbox:
                    yield from self._call_edc()
                elif self._simulation_finished() and not self._end_sent:
                    yield (PUT, _PERIODIC, (_DIE, None))
                    self._outbox.append(SimulationEnds(timestamp=kernel.now))
                    yield from self._call_edc()
                    self._end_sent = True
            kind, data = yield (GET, _SERVER)
            effect = handlers[kind](data)
            if effect is not None:
                created = yield effect
                if kind == _EXECUTE:
                    self._live[data.job_id].actor = created

    def _call_edc(self) -> _Code:
        """``finish_message_and_call_edc``: the server itself sends the message and reads the
        reply (every decision parsed then), then an injector actor forwards the decisions; the
        jobs told finished are forgotten."""
        message = Message(now=self._kernel.now, events=self._outbox)
        self._outbox = []
        reply: Message = yield (EXCHANGE, message)
        payloads = [self._parse(decision) for decision in reply.events]
        self._sched_ready = False
        yield (CREATE, "Scheduler REQ-REP", self._inject(reply, payloads))
        for job in self._to_delete:
            del self._live[job.job_id]
            self._release_profile(job)
        self._to_delete = []

    def _periodic(self) -> _Code:
        """Batsim 5's ``periodic_main_actor``, without periodic calls: waits for its death."""
        kind = None
        while kind != _DIE:
            kind, _ = yield (GET, _PERIODIC)

    def _request_reply(self, message: Message) -> _Code:
        """``request_reply_scheduler_process`` and ``JsonProtocolReader``: send the message,
        take the reply, forward each decision to the server at its timestamp, then "ready"."""
        reply: Message = yield (EXCHANGE, message)
        yield from self._inject(reply, None)

    def _inject(self, reply: Message, payloads: list[tuple[int, Any]] | None) -> _Code:
        """Forward each decision of ``reply`` to the server at its timestamp, then "ready" at
        the reply's ``now``; ``payloads``: the decisions parsed already (Batsim 5), else each
        is parsed before it is forwarded (Batsim 4)."""
        kernel = self._kernel
        for index, decision in enumerate(reply.events):
            payload = self._parse(decision) if payloads is None else payloads[index]
            # send_message_at_time: sleep until the timestamp if it is later than the clock
            # (each message to the server is a put, ``send_message``)
            if decision.timestamp > kernel.now:
                yield (SLEEP, decision.timestamp - kernel.now)
            yield (PUT, _SERVER, payload)
        if reply.now > kernel.now:
            yield (SLEEP, reply.now - kernel.now)
        yield (PUT, _SERVER, (_READY, None))

    def _job(self, job: _LiveJob) -> _Code:
        """``execute_job_process`` for a delay profile (``do_delay_task``)."""
        kernel = self._kernel
        job.start = kernel.now
        walltime = job.walltime
        if walltime is None or job.delay < walltime:
            yield (SLEEP, job.delay)
            job.final = "COMPLETED_SUCCESSFULLY"
        else:
            yield (SLEEP, walltime)
            job.final = "COMPLETED_WALLTIME_REACHED"
        job.end = kernel.now
        job.state = _DONE
        yield (PUT, _SERVER, (_JOB_COMPLETED, job))

    def _killer(self, jobs: list[_LiveJob]) -> _Code:
        """``killer_process``: kill the jobs still running, then report to the server."""
        kernel = self._kernel
        progress: dict[str, dict[str, Any]] = {}
        killed: list[_LiveJob] = []
        v5 = self.batsim5 is not None
        for job in jobs:
            if job.state != _RUNNING:
                continue  # its sleep is over: it completes on its own
            elapsed = kernel.now - job.start
            ratio = elapsed / job.delay
            progress[job.job_id] = {
                "profile_name": job.profile,
                "progress": ratio if v5 else json_time(ratio),
            }
            yield (KILL, job.actor)
            job.state = _DONE
            job.final = "COMPLETED_KILLED"
            job.end = kernel.now
            killed.append(job)
        yield (PUT, _SERVER, (_KILLING_DONE, (jobs, killed, progress)))

    def _waiter(self, target: float, call_id: str) -> _Code:
        """``waiter_process`` for CALL_ME_LATER (at least 1e-5 s of sleep); Batsim 5's
        ``oneshot_call_me_later_actor`` is the same, and names the call (``call_id``)."""
        now = self._kernel.now
        if now < target:
            yield (SLEEP, max(target - now, 1e-5))
        if not (self._end_sent or self._end_ack):
            yield (PUT, _SERVER, (_WAITING_DONE, call_id))

    # --- the server's handlers (server.cpp) -------------------------------------------------

    def _handlers(self) -> dict[int, Any]:
        return {
            _HELLO: lambda data: None,
            _BYE: self._on_bye,
            _JOBS_SUBMITTED: self._on_submitted,
            _JOB_COMPLETED: self._on_completed,
            _EXECUTE: self._on_execute,
            _REJECT: self._on_reject,
            _KILL: self._on_kill,
            _CALL_ME_LATER: self._on_call_me_later,
            _READY: self._on_ready,
            _WAITING_DONE: self._on_waiting_done,
            _KILLING_DONE: self._on_killing_done,
            _JOB_REGISTERED: self._on_job_registered,
            _PROFILE_REGISTERED: lambda data: None,
            _END_REGISTRATION: self._on_registration(True),
            _CONTINUE_REGISTRATION: self._on_registration(False),
            _SET_METADATA: self._on_set_metadata,
        }

    def _stamp(self) -> float:
        if self.batsim5 is not None:
            return self._kernel.now  # written in full (12 decimals) by Batsim 5
        return json_time(self._kernel.now)

    def _on_bye(self, data: None) -> None:
        self._submitters_done += 1
        if self._submitters_done == len(self._static):
            notify = Notify(timestamp=self._stamp(), type="no_more_static_job_to_submit")
            self._outbox.append(notify)

    def _on_submitted(self, jobs: list[_LiveJob]) -> None:
        stamp = self._stamp()
        outbox = self._outbox
        forward = self.forward_profiles
        v5 = self.batsim5 is not None
        for job in jobs:
            self._live[job.job_id] = job
            job.obj = _job_v5(job) if v5 else {**job.obj, "id": job.job_id}
            profile = self._workloads[job.workload].profiles[job.profile] if forward else None
            outbox.append(JobSubmitted(stamp, job.job_id, job.obj, profile))

    def _on_completed(self, job: _LiveJob) -> None:
        self._running -= 1
        self._finish(job)

    def _finish(self, job: _LiveJob) -> None:
        self._to_delete.append(job)
        job.actor = None  # its code is over: neither kept alive nor traversed by the GC
        assert job.alloc is not None
        if self.batsim5 is not None:  # Batsim 5.0.0-rc2 does not check that hosts are free
            row = jobs_csv.finished_row_v5(
                name=job.name,
                workload=job.workload,
                profile=f"{job.workload}!{job.profile}",
                subtime=job.subtime,
                res=job.res,
                walltime=job.walltime,
                state=job.final,
                start=job.start,
                finish=job.end,
                alloc=jobs_csv.alloc_text(job.runs),
                dynamic=job.registered,
            )
        else:
            self._busy.remove(job.runs)
            row = jobs_csv.finished_row(
                name=job.name,
                workload=job.workload,
                profile=job.profile,
                subtime=job.subtime,
                res=job.res,
                walltime=job.walltime,
                state=job.final,
                start=job.start,
                finish=job.end,
                alloc=jobs_csv.alloc_text(job.runs),
                metadata=job.metadata,
            )
        self.rows.append(row)
        code = 0 if job.final == "COMPLETED_SUCCESSFULLY" else -1
        self._outbox.append(JobCompleted(self._stamp(), job.job_id, job.final, code, job.alloc))

    def _release_profile(self, job: _LiveJob) -> None:
        """Batsim 4 forgets a finished job, and its profile once no live job uses it."""
        workload = self._workloads[job.workload]
        left = workload.refcount.get(job.profile, 1) - 1
        workload.refcount[job.profile] = left
        if left <= 0 and not self.profile_reuse:
            workload.profiles.pop(job.profile, None)
            workload.refcount.pop(job.profile, None)

    def _on_execute(self, decision: ExecuteJob) -> Simcall:
        job = self._known_job(decision, decision.job_id)
        if job.state != _SUBMITTED:
            raise InvalidDecision(decision.TYPE, job.job_id, _NOT_WAITING[job.state])
        problem = problems.fields(decision, job.job_id)
        if problem is not None:
            raise problem
        alloc = decision.alloc
        runs = runs_of(alloc)  # once: checked, kept for the release and the row
        # Batsim 5.0.0-rc2 lets jobs share hosts: only Batsim 4 gets the machines in use
        busy = self._busy if self.batsim5 is None else MachineSet()
        problem = problems.allocation(decision, job.job_id, job.res, len(self.hosts), busy, runs)
        if problem is not None:
            raise problem
        if self.batsim5 is None:
            self._busy.add(runs)
        self._running += 1
        job.state = _RUNNING
        job.alloc = alloc
        job.runs = runs
        if self.routes is not None:  # on the first allocated host: its messages take its route
            host = self._host_of_id[runs[0][0]]
            return (CREATE, f"job_{job.job_id}", self._job(job), host)
        return (CREATE, f"job_{job.job_id}", self._job(job))

    def _on_reject(self, decision: RejectJob) -> None:
        job = self._known_job(decision, decision.job_id)
        if job.state != _SUBMITTED:
            raise InvalidDecision(decision.TYPE, job.job_id, _NOT_WAITING[job.state])
        job.state = _REJECTED
        self._to_delete.append(job)
        if self.batsim5 is not None:
            self.rows.append(
                jobs_csv.rejected_row_v5(
                    name=job.name,
                    workload=job.workload,
                    profile=f"{job.workload}!{job.profile}",
                    subtime=job.subtime,
                    res=job.res,
                    walltime=job.walltime,
                )
            )
            return
        self.rows.append(
            jobs_csv.rejected_row(
                name=job.name,
                workload=job.workload,
                profile=job.profile,
                subtime=job.subtime,
                res=job.res,
                walltime=job.walltime,
                metadata=job.metadata,
            )
        )

    def _on_kill(self, decision: KillJob) -> Simcall | None:
        jobs: list[_LiveJob] = []
        for job_id in decision.job_ids:
            job = self._known_job(decision, job_id)
            if job.kill_requested:
                continue
            if job.state == _SUBMITTED or job.state == _REJECTED:
                raise problems.not_running(decision, job_id)
            job.kill_requested = True
            jobs.append(job)
        if not jobs and self.batsim5 is None:
            return None
        self._killers += 1
        return (CREATE, "killer_process", self._killer(jobs))

    def _on_call_me_later(self, decision: CallMeLater) -> Simcall:
        now = self._kernel.now
        call_id = getattr(decision, "call_me_later_id", "")
        if self.batsim5 is None and not decision.when > now:
            raise problems.call_not_later(decision, now)  # Batsim 5 calls a past time at once
        self._waiters += 1
        return (CREATE, f"waiter {decision.when:f}", self._waiter(decision.when, call_id))

    def _on_ready(self, data: None) -> None:
        self._sched_ready = True
        if self._end_sent:
            self._end_ack = True

    def _on_waiting_done(self, call_id: str) -> None:
        if self.batsim5 is not None:
            self._outbox.append(RequestedCallV5(self._stamp(), call_me_later_id=call_id))
        else:
            self._outbox.append(RequestedCall(timestamp=self._stamp()))
        self._waiters -= 1

    def _on_killing_done(self, data: tuple[list[_LiveJob], list[_LiveJob], dict]) -> None:
        jobs, killed, progress = data
        for job in killed:
            self._running -= 1
            self._finish(job)
        job_ids = [job.job_id for job in jobs]
        if self.batsim5 is None:
            self._outbox.append(JobKilled(self._stamp(), job_ids, progress))
        else:
            profiles = None  # forwarded on request, each once, in Batsim's order (by id)
            if self.batsim5.features.get("forward_profiles_on_jobs_killed", False):
                named = {f"{job.workload}!{job.profile}": job for job in killed}
                profiles = [
                    profile_and_id(name, self._workloads[job.workload].profiles[job.profile])
                    for name, job in sorted(named.items())
                ]
            self._outbox.append(JobKilledV5(self._stamp(), job_ids, progress, profiles))
        self._killers -= 1

    def _on_job_registered(self, job: _LiveJob) -> None:
        if self.batsim5 is not None:  # submitted now, as the server reads it
            job.subtime = self._kernel.now
            job.obj = _job_v5(job)
        if self.acknowledge_dynamic_jobs:
            workload = self._workloads[job.workload]
            forwarded = workload.profiles[job.profile] if self.forward_profiles else None
            self._outbox.append(JobSubmitted(self._stamp(), job.job_id, job.obj, forwarded))

    def _on_registration(self, finished: bool) -> Any:
        def handle(data: None) -> None:
            self._registration_finished = finished

        return handle

    def _on_set_metadata(self, decision: SetJobMetadata) -> None:
        job = self._known_job(decision, decision.job_id)
        job.metadata = decision.metadata

    def _simulation_finished(self) -> bool:
        """``is_simulation_finished``."""
        return (
            self._submitters_done == len(self._static)
            and self._registration_finished
            and len(self._live) == len(self._to_delete)  # nb_completed == nb_submitted
            and not self._running
            and not self._waiters
            and not self._killers
        )

    # --- decisions, as the protocol reader parses them ---------------------------------------

    def _parse(self, decision: Event) -> tuple[int, Any]:
        """The server message a decision becomes; registrations take effect at parse time, as
        in ``JsonProtocolReader``."""
        match decision:
            case ExecuteJob():
                return (_EXECUTE, decision)
            case RejectJob():
                return (_REJECT, decision)
            case KillJob():
                return (_KILL, decision)
            case CallMeLater():
                return (_CALL_ME_LATER, decision)
            case RegisterProfile():
                self._register_profile(decision)
                return (_PROFILE_REGISTERED, None)
            case RegisterJob():
                return (_JOB_REGISTERED, self._register_job(decision))
            case Notify():
                return self._notify(decision)
            case SetJobMetadata():
                if '"' in decision.metadata:
                    raise problems.parse(decision)
                return (_SET_METADATA, decision)
            case _:
                raise problems.parse(decision)

    def _known_job(self, decision: Event, job_id: str) -> _LiveJob:
        job = self._live.get(job_id)
        if job is not None:
            return job
        raise problems.unknown_job(decision, job_id, job_id in self._used_ids)

    def _register_profile(self, decision: RegisterProfile) -> None:
        if not self.dynamic_jobs:
            raise problems.parse(decision)
        name = decision.workload_name
        known = self._workloads.get(name)
        problem = problems.register_profile(decision, {} if known is None else known.profiles)
        if problem is not None:
            raise problem
        workload = self._workloads.setdefault(name, _Workload(name=name, profiles={}))
        workload.profiles[decision.profile_name] = decision.profile
        workload.refcount[decision.profile_name] = 0

    def _register_job(self, decision: RegisterJob) -> _LiveJob:
        job_id, obj = decision.job_id, decision.job
        if not self.dynamic_jobs:
            raise problems.parse(decision)
        workload_name, _, name = job_id.partition("!")
        known = self._workloads.get(workload_name)
        problem = problems.register_job(
            decision,
            self._registration_finished,
            None if known is None else known.profiles,
            job_id in self._used_ids,
        )
        if problem is not None:
            raise problem
        assert known is not None
        workload = known
        profile = obj["profile"]
        self._used_ids.add(job_id)
        workload.refcount[profile] = workload.refcount.get(profile, 0) + 1
        job = _LiveJob(
            job_id=job_id,
            workload=workload_name,
            name=name,
            obj=obj,
            profile=profile,
            delay=self._delay_of(workload.profiles[profile], f"job {job_id}"),
            res=obj["res"],
            walltime=_walltime(obj),
            subtime=float(obj["subtime"]),
            registered=True,
        )
        self._live[job_id] = job
        return job

    def _notify(self, decision: Notify) -> tuple[int, Any]:
        if not self.dynamic_jobs:
            raise problems.parse(decision)
        if decision.type == "registration_finished":
            return (_END_REGISTRATION, None)
        if decision.type == "continue_registration":
            return (_CONTINUE_REGISTRATION, None)
        raise problems.notify(decision)

    # --- SIMULATION_BEGINS --------------------------------------------------------------------

    def _begins(self) -> SimulationBegins:
        if self.batsim5 is not None:
            return self._begins_v5(self.batsim5)
        return begins_event(
            self.hosts,
            workloads={name: self._paths[i] for i, name in enumerate(self._workloads)},
            profiles={name: dict(wl.profiles) for name, wl in self._workloads.items()},
            dynamic_jobs=self.dynamic_jobs,
            acknowledge_dynamic_jobs=self.acknowledge_dynamic_jobs,
            profile_reuse=self.profile_reuse,
            forward_profiles=self.forward_profiles,
        )

    def _begins_v5(self, batsim5: Batsim5) -> SimulationBeginsV5:
        """Batsim 5's SIMULATION_BEGINS: its hosts (one core of 1 Gflops, as the exact
        platforms have; numbered in Batsim 5's order, which only their names show), the
        profiles the jobs use (Batsim 5 drops the others when it loads a workload) only if the
        EDC asked for them, Batsim's command line and version."""
        hosts = [
            {"id": i, "name": name, "pstate": 0, "pstate_count": 1, "state": "IDLE"}
            | {"properties": [], "zone_properties": [], "core_count": 1}
            | {"computation_speed": [1e9]}
            for i, name in enumerate(batsim5_host_order(self.hosts))
        ]
        profiles: dict[str, dict[str, dict[str, Any]]] = {}
        if batsim5.features.get("forward_profiles_on_simulation_begins", False):
            for name, workload in sorted(self._workloads.items()):
                used = sorted(p for p in workload.profiles if workload.refcount.get(p, 0) > 0)
                profiles[name] = {p: workload.profiles[p] for p in used}
        return SimulationBeginsV5(
            timestamp=0.0,
            nb_resources=len(hosts),
            nb_compute_resources=len(hosts),
            nb_storage_resources=0,
            allow_compute_sharing=False,
            allow_storage_sharing=True,
            config={},
            compute_resources=hosts,
            storage_resources=[],
            workloads={name: self._paths[i] for i, name in enumerate(self._workloads)},
            profiles=profiles,
            extra={
                "batsim_arguments": list(batsim5.arguments),
                "batsim_execution_context_json": batsim5.execution_context,
                "external_event_lists": [],
                "batsim_version": BATSIM5_VERSION,
                "batsim_commit": BATSIM5_COMMIT,
            },
        )

    # --- the in-process loop ----------------------------------------------------------------

    def run(
        self, handler: Callable[[Message], Message], progress: Callable[[int], None] | None = None
    ) -> int:
        """Run the simulation to its end with ``handler`` (a scheduler's ``handle``) deciding;
        the number of messages sent. ``progress`` is called now and then with the jobs of the
        workload finished for good (an attempt killed by the scheduler does not count: its
        resubmission's row comes later)."""
        message: Message | None = self.start()
        count = 0
        rows = self.rows
        seen = killed = 0

        def workload_jobs_done() -> int:
            nonlocal seen, killed
            killed += sum(",COMPLETED_KILLED," in row for row in rows[seen:])
            seen = len(rows)
            return seen - killed

        while message is not None:
            count += 1
            if progress is not None and count % 2048 == 0:
                progress(workload_jobs_done())
            message = self.step(handler(message))
        if progress is not None:
            progress(workload_jobs_done())
        return count


def _job_v5(job: _LiveJob) -> dict[str, Any]:
    """A job as Batsim 5 reads it from a workload and sends it: its id, submission time,
    resources, profile, walltime (if any) and ``extra_data`` (the workload's text, or its
    object as compact JSON); Batsim 5 ignores the job's other fields."""
    obj: dict[str, Any] = {
        "id": job.job_id,
        "subtime": float(job.subtime),
        "res": job.res,
        "profile": job.profile,
    }
    if job.walltime is not None:
        obj["walltime"] = float(job.walltime)
    extra = job.obj.get("extra_data", "")
    if not isinstance(extra, str):
        extra = json.dumps(extra, separators=(",", ":"), ensure_ascii=False)
    obj["extra_data"] = extra
    return obj


def begins_event(
    hosts: list[str],
    *,
    workloads: dict[str, str],
    profiles: dict[str, dict[str, dict[str, Any]]],
    dynamic_jobs: bool,
    acknowledge_dynamic_jobs: bool,
    profile_reuse: bool,
    forward_profiles: bool,
) -> SimulationBegins:
    """SIMULATION_BEGINS as Batsim 4.2.1 sends it (``workloads``: each workload's name and
    file, ``profiles``: its profiles), for both simulators."""
    config = {
        "redis-enabled": False,
        "redis-hostname": "127.0.0.1",
        "redis-port": 6379,
        "redis-prefix": "default",
        "profiles-forwarded-on-submission": forward_profiles,
        "dynamic-jobs-enabled": dynamic_jobs,
        "dynamic-jobs-acknowledged": acknowledge_dynamic_jobs,
        "profile-reuse-enabled": profile_reuse,
        "sched-config": "",
        "forward-unknown-events": False,
    }
    resources = [
        {"id": i, "name": name, "state": "idle", "properties": {"role": ""}}
        | {"zone_properties": {}}
        for i, name in enumerate(hosts)
    ]
    return SimulationBegins(
        timestamp=0.0,
        nb_resources=len(hosts),
        nb_compute_resources=len(hosts),
        nb_storage_resources=0,
        allow_compute_sharing=False,
        allow_storage_sharing=True,
        config=config,
        compute_resources=resources,
        storage_resources=[],
        workloads=workloads,
        profiles=profiles,
    )
