"""An embedded discrete-event simulator that plays Batsim 4.2.1's side of the protocol.

It supports what batsched-ml needs of Batsim for ``delay`` profiles, on a homogeneous cluster with
the exact-timing conventions of ``shared/batsim-reference`` (finish = start + delay exactly):
static submissions, EXECUTE_JOB, completion and walltime kills, KILL_JOB, REJECT_JOB,
CALL_ME_LATER, dynamic jobs (REGISTER_PROFILE, REGISTER_JOB, registration NOTIFYs) and
SET_JOB_METADATA. It is a pure request/reply state machine: :meth:`BatsimSimulator.start` gives the
first message, :meth:`BatsimSimulator.step` takes the scheduler's reply and gives the next one.
The transports (in-process loop, ZeroMQ) sit outside.

How the order and grouping of events reproduce real Batsim (each rule is checked against the
recorded transcripts):

* every timer (next static submission, a job's end, a requested call) gets a sequence number when
  it is set; timers of the same instant fire in that order. The static submitter sets its next
  wake-up when it submits, before the scheduler answers, which is why jobs submitted at ``t`` come
  before the completion at ``t`` of a job started at the previous submission, and after the
  completion of a job started earlier (``fcfs_small`` at 38 s, ``kill_resubmit`` at 50 s);
* jobs of one workload with the same ``subtime`` are submitted together, ordered by job name as a
  *string* (``fcfs_small`` at 63 s: 10, 11, 8, 9);
* all timers of one instant go in one message; events caused by the scheduler's reply (the answer
  to KILL_JOB, the acknowledgement of a dynamic job) and the ``no_more_static_job_to_submit``
  NOTIFY, which follows the message holding the last static submission, come in the next message
  at the same time, NOTIFY first;
* the scheduler is busy until its reply's ``now``: a decision stamped later than Batsim's ``now``
  is applied at its timestamp, and timers that fire while the scheduler is busy are delivered
  together at the reply's ``now`` with their own timestamps (not covered by the recordings).

Invalid decisions raise :class:`InvalidDecision` naming the decision, where Batsim would abort.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from procset import ProcSet

from batsched_ml.alloc import mask_of, procset_of
from batsched_ml.errors import UserError
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
from batsched_ml.sim import jobs_csv


class SimulationError(UserError, RuntimeError):
    """The simulation cannot go on (an invalid decision, or a scheduler that left it stuck)."""


class InvalidDecision(SimulationError):
    """A decision real Batsim would abort on; names the decision type and what is wrong."""

    def __init__(self, decision: str, subject: str, reason: str) -> None:
        super().__init__(f"invalid {decision} ({subject}): {reason}")
        self.decision = decision
        self.subject = subject
        self.reason = reason


_SUBMITTED, _RUNNING = 1, 2
_TIMER_SUBMIT, _TIMER_END, _TIMER_CALL = 0, 1, 2


@dataclass(slots=True)
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
    alloc: ProcSet | None = None
    mask: int = 0
    token: int = -1
    metadata: str = ""


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


class BatsimSimulator:
    """Batsim's side of the protocol, in process.

    Parameters mirror Batsim's command line: ``workloads`` is a list of parsed workload JSON
    objects (named ``w0``, ``w1``, ... as ``-w`` does), ``hosts`` the compute host names (ids are
    their positions), and the flags are ``--enable-dynamic-jobs``,
    ``--acknowledge-dynamic-jobs``, ``--enable-profile-reuse`` and
    ``--forward-profiles-on-submission``. ``workload_paths`` is only what SIMULATION_BEGINS
    reports as each workload's file.
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
        sched_config: str = "",
    ) -> None:
        if not hosts:
            raise ValueError("a platform needs at least one compute host")
        self.hosts = list(hosts)
        self.dynamic_jobs = dynamic_jobs
        self.acknowledge_dynamic_jobs = acknowledge_dynamic_jobs
        self.profile_reuse = profile_reuse
        self.forward_profiles = forward_profiles
        self.sched_config = sched_config
        self._paths = workload_paths or [f"workload{i}.json" for i in range(len(workloads))]
        self._workloads: dict[str, _Workload] = {}
        self._groups: list[list[_LiveJob]] = []
        self._timers: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._now: float = 0.0
        self._outbox: list[Event] = []
        self._live: dict[str, _LiveJob] = {}
        self._used_ids: set[str] = set()
        self._busy = 0
        self._pending_calls = 0
        self._static_left = 0
        self._notify_after_send = False
        self._notify_pending = False
        self._registration_finished = not dynamic_jobs
        self._started = False
        self._ended = False
        self._finished = False
        self.rows: list[str] = []
        self.events_sent = 0
        self._load(workloads)

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
                        obj["subtime"],
                    )
                )
                refcount[profile] = refcount.get(profile, 0) + 1
            jobs.sort(key=lambda job: (job.subtime, job.name))
            groups: list[list[_LiveJob]] = []
            for job in jobs:
                if groups and groups[-1][0].subtime == job.subtime:
                    groups[-1].append(job)
                else:
                    groups.append([job])
            if groups:
                self._static_left += 1
                self._groups.append(groups)  # type: ignore[arg-type]
                self._push(groups[0][0].subtime, _TIMER_SUBMIT, (len(self._groups) - 1, 0))
        if not self._static_left:
            self._notify_pending = True

    @staticmethod
    def _delay_of(profile: dict[str, Any], where: str) -> float:
        if profile.get("type") != "delay":
            raise SimulationError(f"{where}: only 'delay' profiles are simulated")
        delay = profile.get("delay")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not delay > 0:
            raise SimulationError(f"{where}: a delay profile needs a delay > 0, got {delay!r}")
        return delay

    def _push(self, time: float, kind: int, ref: Any) -> int:
        """Set a timer; Batsim's clock is a double, so times are floats whatever the input."""
        seq = self._seq
        self._seq += 1
        heapq.heappush(self._timers, (float(time), seq, kind, ref))
        return seq

    # --- the protocol -------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self._now

    @property
    def finished(self) -> bool:
        """True once SIMULATION_ENDS was sent and answered."""
        return self._finished

    def start(self) -> Message:
        """The first message: SIMULATION_BEGINS, alone, at time 0."""
        if self._started:
            raise SimulationError("the simulation has already started")
        self._started = True
        config = {
            "redis-enabled": False,
            "redis-hostname": "127.0.0.1",
            "redis-port": 6379,
            "redis-prefix": "default",
            "profiles-forwarded-on-submission": self.forward_profiles,
            "dynamic-jobs-enabled": self.dynamic_jobs,
            "dynamic-jobs-acknowledged": self.acknowledge_dynamic_jobs,
            "profile-reuse-enabled": self.profile_reuse,
            "sched-config": self.sched_config,
            "forward-unknown-events": False,
        }
        resources = [
            {"id": i, "name": name, "state": "idle", "properties": {"role": ""}}
            | {"zone_properties": {}}
            for i, name in enumerate(self.hosts)
        ]
        begins = SimulationBegins(
            timestamp=0.0,
            nb_resources=len(self.hosts),
            nb_compute_resources=len(self.hosts),
            nb_storage_resources=0,
            allow_compute_sharing=False,
            allow_storage_sharing=True,
            config=config,
            compute_resources=resources,
            storage_resources=[],
            workloads={name: self._paths[i] for i, name in enumerate(self._workloads)},
            profiles={name: dict(wl.profiles) for name, wl in self._workloads.items()},
        )
        self.events_sent += 1
        return Message(now=0.0, events=[begins])

    def step(self, reply: Message) -> Message | None:
        """Apply the scheduler's ``reply`` and return Batsim's next message, or ``None`` once
        the reply to SIMULATION_ENDS has been received."""
        if not self._started:
            raise SimulationError("step() before start()")
        if self._finished:
            raise SimulationError("the simulation is over")
        if isinstance(reply.now, bool) or not math.isfinite(reply.now) or reply.now < self._now:
            raise InvalidDecision(
                "message", "now", f"reply 'now' {reply.now} is before Batsim's now {self._now}"
            )
        if self._ended:
            self._finished = True
            return None
        if self._notify_pending:
            self._notify_pending = False
            self._outbox.append(Notify(timestamp=self._now, type="no_more_static_job_to_submit"))
        for decision in reply.events:
            stamp = decision.timestamp
            if stamp > reply.now:
                raise InvalidDecision(
                    decision.TYPE,
                    "timestamp",
                    f"stamped {stamp}, later than the reply's now {reply.now}",
                )
            if stamp > self._now:
                self._fire_until(stamp, inclusive=False)
                self._now = stamp
            self._apply(decision)
        if reply.now > self._now:
            self._fire_until(reply.now, inclusive=True)
            self._now = reply.now
        return self._next_message()

    # --- time -----------------------------------------------------------------------------

    def _fire_until(self, limit: float, *, inclusive: bool) -> None:
        timers = self._timers
        while timers and (timers[0][0] < limit or (inclusive and timers[0][0] == limit)):
            time, seq, kind, ref = heapq.heappop(timers)
            self._now = time
            self._fire(time, seq, kind, ref)

    def _next_message(self) -> Message:
        while not self._outbox:
            if self._can_end():
                self._ended = True
                self.events_sent += 1
                return Message(now=self._now, events=[SimulationEnds(timestamp=self._now)])
            if not self._timers:
                raise SimulationError(self._stuck_reason())
            time = self._timers[0][0]
            self._now = time
            self._fire_until(time, inclusive=True)
        events, self._outbox = self._outbox, []
        if self._notify_after_send:
            self._notify_after_send = False
            self._notify_pending = True
        self.events_sent += len(events)
        return Message(now=self._now, events=events)

    def _can_end(self) -> bool:
        return (
            not self._static_left
            and not self._notify_pending
            and not self._live
            and not self._pending_calls
            and self._registration_finished
        )

    def _stuck_reason(self) -> str:
        waiting = [job.job_id for job in self._live.values() if job.state == _SUBMITTED]
        if waiting:
            shown = ", ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
            return (
                f"simulation stuck at t={self._now}: {len(waiting)} submitted job(s) never "
                f"executed nor rejected ({shown}) and nothing else can happen"
            )
        return (
            f"simulation stuck at t={self._now}: dynamic jobs are enabled and the scheduler "
            "never sent NOTIFY registration_finished"
        )

    def _fire(self, time: float, seq: int, kind: int, ref: Any) -> None:
        if kind == _TIMER_END:
            job = self._live.get(ref[0])
            if job is None or job.token != seq:
                return  # killed before its end
            self._finish(job, ref[1])
        elif kind == _TIMER_SUBMIT:
            self._submit_group(time, ref)
        else:
            self._pending_calls -= 1
            self._outbox.append(RequestedCall(timestamp=time))

    def _submit_group(self, time: float, ref: tuple[int, int]) -> None:
        workload_index, group_index = ref
        groups: list[list[_LiveJob]] = self._groups[workload_index]  # type: ignore[assignment]
        for job in groups[group_index]:
            self._live[job.job_id] = job
            job.obj = {**job.obj, "id": job.job_id}
            profile = None
            if self.forward_profiles:
                profile = self._workloads[job.workload].profiles[job.profile]
            self._outbox.append(
                JobSubmitted(timestamp=time, job_id=job.job_id, job=job.obj, profile=profile)
            )
        if group_index + 1 < len(groups):
            following = (workload_index, group_index + 1)
            self._push(groups[group_index + 1][0].subtime, _TIMER_SUBMIT, following)
        else:
            self._static_left -= 1
            if not self._static_left:
                self._notify_after_send = True

    def _finish(self, job: _LiveJob, state: str) -> None:
        self._busy &= ~job.mask
        del self._live[job.job_id]
        assert job.alloc is not None
        self.rows.append(
            jobs_csv.finished_row(
                name=job.name,
                workload=job.workload,
                profile=job.profile,
                subtime=job.subtime,
                res=job.res,
                walltime=job.walltime,
                state=state,
                start=job.start,
                finish=self._now,
                alloc=job.alloc,
                metadata=job.metadata,
            )
        )
        code = 0 if state == "COMPLETED_SUCCESSFULLY" else -1
        self._outbox.append(
            JobCompleted(
                timestamp=self._now,
                job_id=job.job_id,
                job_state=state,
                return_code=code,
                alloc=job.alloc,
            )
        )
        self._release_profile(job)

    def _release_profile(self, job: _LiveJob) -> None:
        """Batsim 4 forgets a finished job, and its profile once no live job uses it."""
        workload = self._workloads[job.workload]
        left = workload.refcount.get(job.profile, 1) - 1
        workload.refcount[job.profile] = left
        if left <= 0 and not self.profile_reuse:
            workload.profiles.pop(job.profile, None)
            workload.refcount.pop(job.profile, None)

    # --- decisions ------------------------------------------------------------------------

    def _apply(self, decision: Event) -> None:
        match decision:
            case ExecuteJob():
                self._execute(decision)
            case RejectJob():
                self._reject(decision)
            case KillJob():
                self._kill(decision)
            case CallMeLater():
                if not decision.when > self._now:
                    raise InvalidDecision(
                        decision.TYPE,
                        "timestamp",
                        f"call requested at {decision.when}, not strictly after now {self._now}",
                    )
                self._pending_calls += 1
                self._push(decision.when, _TIMER_CALL, None)
            case RegisterProfile():
                self._register_profile(decision)
            case RegisterJob():
                self._register_job(decision)
            case Notify():
                self._notify(decision)
            case SetJobMetadata():
                job = self._known_job(decision.TYPE, decision.job_id)
                if '"' in decision.metadata:
                    raise InvalidDecision(decision.TYPE, decision.job_id, "metadata contains '\"'")
                job.metadata = decision.metadata
            case _:
                raise InvalidDecision(decision.TYPE, "type", "not a decision Batsim accepts")

    def _known_job(self, decision: str, job_id: str) -> _LiveJob:
        job = self._live.get(job_id)
        if job is not None:
            return job
        if job_id in self._used_ids:
            raise InvalidDecision(
                decision,
                job_id,
                "job is not submitted yet or already finished (Batsim 4 forgets finished jobs)",
            )
        raise InvalidDecision(decision, job_id, "unknown job")

    def _execute(self, decision: ExecuteJob) -> None:
        job = self._known_job(decision.TYPE, decision.job_id)
        if job.state != _SUBMITTED:
            raise InvalidDecision(decision.TYPE, job.job_id, "job is already running")
        if decision.extra:
            raise InvalidDecision(
                decision.TYPE, job.job_id, f"unsupported fields {sorted(decision.extra)}"
            )
        alloc = decision.alloc
        if len(alloc) == 0:
            raise InvalidDecision(decision.TYPE, job.job_id, "empty allocation")
        if len(alloc) != job.res:
            raise InvalidDecision(
                decision.TYPE,
                job.job_id,
                f"allocation {alloc} has {len(alloc)} machines, the job requests {job.res}",
            )
        if alloc.min < 0 or alloc.max >= len(self.hosts):
            raise InvalidDecision(
                decision.TYPE,
                job.job_id,
                f"allocation {alloc} names machines outside 0-{len(self.hosts) - 1}",
            )
        mask = mask_of(alloc)
        if mask & self._busy:
            busy = procset_of(mask & self._busy)
            raise InvalidDecision(decision.TYPE, job.job_id, f"machines {busy} are already in use")
        self._busy |= mask
        job.state = _RUNNING
        job.start = self._now
        job.alloc = alloc
        job.mask = mask
        if job.walltime is not None and job.delay >= job.walltime:
            end, state = self._now + job.walltime, "COMPLETED_WALLTIME_REACHED"
        else:
            end, state = self._now + job.delay, "COMPLETED_SUCCESSFULLY"
        job.token = self._push(end, _TIMER_END, (job.job_id, state))

    def _reject(self, decision: RejectJob) -> None:
        job = self._known_job(decision.TYPE, decision.job_id)
        if job.state != _SUBMITTED:
            raise InvalidDecision(decision.TYPE, job.job_id, "job is already running")
        del self._live[job.job_id]
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
        self._release_profile(job)

    def _kill(self, decision: KillJob) -> None:
        progress: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        for job_id in decision.job_ids:
            if job_id in seen:
                continue
            seen.add(job_id)
            job = self._known_job(decision.TYPE, job_id)
            if job.state != _RUNNING:
                raise InvalidDecision(decision.TYPE, job_id, "job is not running")
            job.token = -1
            elapsed = self._now - job.start
            progress[job_id] = {
                "profile_name": job.profile,
                "progress": round(elapsed / job.delay, 6),
            }
            self._finish(job, "COMPLETED_KILLED")
        self._outbox.append(
            JobKilled(timestamp=self._now, job_ids=list(decision.job_ids), job_progress=progress)
        )

    def _register_profile(self, decision: RegisterProfile) -> None:
        if not self.dynamic_jobs:
            raise InvalidDecision(decision.TYPE, decision.profile_name, "dynamic jobs are disabled")
        name = decision.workload_name
        if not name or "!" in name:
            raise InvalidDecision(decision.TYPE, name, "invalid workload name")
        workload = self._workloads.setdefault(name, _Workload(name=name, profiles={}))
        if decision.profile_name in workload.profiles:
            raise InvalidDecision(
                decision.TYPE, f"{name}/{decision.profile_name}", "profile already exists"
            )
        try:
            self._delay_of(decision.profile, f"profile {decision.profile_name}")
        except SimulationError as exc:
            raise InvalidDecision(decision.TYPE, decision.profile_name, str(exc)) from None
        workload.profiles[decision.profile_name] = decision.profile
        workload.refcount[decision.profile_name] = 0

    def _register_job(self, decision: RegisterJob) -> None:
        kind, job_id, obj = decision.TYPE, decision.job_id, decision.job
        if not self.dynamic_jobs:
            raise InvalidDecision(kind, job_id, "dynamic jobs are disabled")
        if self._registration_finished:
            raise InvalidDecision(kind, job_id, "registration is already finished")
        if obj.get("id") != job_id:
            raise InvalidDecision(kind, job_id, f"job.id {obj.get('id')!r} differs from job_id")
        workload_name, _, name = job_id.partition("!")
        workload = self._workloads.get(workload_name)
        if workload is None:
            raise InvalidDecision(kind, job_id, f"unknown workload {workload_name!r}")
        if job_id in self._used_ids:
            raise InvalidDecision(kind, job_id, "job id already used (even a finished job's)")
        subtime = obj.get("subtime")
        if subtime is None:
            raise InvalidDecision(kind, job_id, "job has no 'subtime' (Batsim 4.2.1 aborts)")
        res = obj.get("res")
        if isinstance(res, bool) or not isinstance(res, int) or res <= 0:
            raise InvalidDecision(kind, job_id, f"'res' must be a positive integer, got {res!r}")
        walltime = obj.get("walltime", -1)
        if walltime != -1 and not walltime > 0:
            raise InvalidDecision(kind, job_id, f"'walltime' must be -1 or > 0, got {walltime!r}")
        profile = obj.get("profile")
        if profile not in workload.profiles:
            raise InvalidDecision(
                kind, job_id, f"profile {profile!r} does not exist (or was already forgotten)"
            )
        self._used_ids.add(job_id)
        workload.refcount[profile] = workload.refcount.get(profile, 0) + 1
        job = _LiveJob(
            job_id=job_id,
            workload=workload_name,
            name=name,
            obj=obj,
            profile=profile,
            delay=self._delay_of(workload.profiles[profile], f"job {job_id}"),
            res=res,
            walltime=_walltime(obj),
            subtime=subtime,
        )
        self._live[job_id] = job
        if self.acknowledge_dynamic_jobs:
            forwarded = workload.profiles[profile] if self.forward_profiles else None
            self._outbox.append(
                JobSubmitted(timestamp=self._now, job_id=job_id, job=obj, profile=forwarded)
            )

    def _notify(self, decision: Notify) -> None:
        if not self.dynamic_jobs:
            raise InvalidDecision(decision.TYPE, decision.type, "dynamic jobs are disabled")
        if decision.type == "registration_finished":
            self._registration_finished = True
        elif decision.type == "continue_registration":
            self._registration_finished = False
        else:
            raise InvalidDecision(decision.TYPE, decision.type, "unknown NOTIFY type")
