"""Typed values for the messages of the Batsim 4 JSON protocol.

Every event and decision is a small slotted dataclass, to be treated as an immutable value (they
are not ``frozen`` only because a frozen dataclass costs three times as much to build, which shows
on a replay of 10^5 jobs); a :class:`Message` is ``now`` plus a list of them. Numbers are kept as
they came (an ``int`` stays an ``int``) so that re-serialising a parsed message gives back the
same JSON text. Allocations are :class:`procset.ProcSet` values.

The class names follow Batsim's event ``type`` strings; :data:`EVENT_TYPES` maps one to the other.
Directions: Batsim sends the first group, the scheduler the second; ``NOTIFY`` and ``QUERY`` /
``ANSWER`` go both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from procset import ProcSet


@dataclass(slots=True)
class Event:
    """Base of every protocol event; ``timestamp`` is the simulated time it refers to."""

    TYPE: ClassVar[str] = ""
    timestamp: float


# --- Batsim -> scheduler ---------------------------------------------------------------------


@dataclass(slots=True)
class SimulationBegins(Event):
    TYPE: ClassVar[str] = "SIMULATION_BEGINS"
    nb_resources: int
    nb_compute_resources: int
    nb_storage_resources: int
    allow_compute_sharing: bool
    allow_storage_sharing: bool
    config: dict[str, Any]
    compute_resources: list[dict[str, Any]]
    storage_resources: list[dict[str, Any]]
    workloads: dict[str, str]
    profiles: dict[str, dict[str, dict[str, Any]]]


@dataclass(slots=True)
class JobSubmitted(Event):
    """A job arrives. ``job`` is the workload's job object with ``id`` rewritten to ``job_id``
    (extra keys kept); ``profile`` is set only with ``--forward-profiles-on-submission``."""

    TYPE: ClassVar[str] = "JOB_SUBMITTED"
    job_id: str
    job: dict[str, Any]
    profile: dict[str, Any] | None = None


@dataclass(slots=True)
class JobCompleted(Event):
    TYPE: ClassVar[str] = "JOB_COMPLETED"
    job_id: str
    job_state: str
    return_code: int
    alloc: ProcSet


@dataclass(slots=True)
class JobKilled(Event):
    """Answer to KILL_JOB, after the killed jobs' JOB_COMPLETED. ``job_progress`` maps each job
    really killed to ``{"profile_name": ..., "progress": elapsed / delay}``."""

    TYPE: ClassVar[str] = "JOB_KILLED"
    job_ids: list[str]
    job_progress: dict[str, dict[str, Any]]


@dataclass(slots=True)
class RequestedCall(Event):
    TYPE: ClassVar[str] = "REQUESTED_CALL"


@dataclass(slots=True)
class ResourceStateChanged(Event):
    TYPE: ClassVar[str] = "RESOURCE_STATE_CHANGED"
    resources: ProcSet
    state: str


@dataclass(slots=True)
class SimulationEnds(Event):
    TYPE: ClassVar[str] = "SIMULATION_ENDS"


@dataclass(slots=True)
class Answer(Event):
    TYPE: ClassVar[str] = "ANSWER"
    data: dict[str, Any]


# --- both directions -----------------------------------------------------------------------


@dataclass(slots=True)
class Notify(Event):
    """``type`` is e.g. ``no_more_static_job_to_submit`` (from Batsim) or
    ``registration_finished`` (from the scheduler); other keys of ``data`` go in ``extra``."""

    TYPE: ClassVar[str] = "NOTIFY"
    type: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Query(Event):
    TYPE: ClassVar[str] = "QUERY"
    requests: dict[str, Any]


# --- scheduler -> Batsim ---------------------------------------------------------------------


@dataclass(slots=True)
class ExecuteJob(Event):
    """Start ``job_id`` on ``alloc``; ``extra`` holds Batsim's optional ``mapping`` /
    ``storage_mapping`` / ``additional_io_job``."""

    TYPE: ClassVar[str] = "EXECUTE_JOB"
    job_id: str
    alloc: ProcSet
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RejectJob(Event):
    TYPE: ClassVar[str] = "REJECT_JOB"
    job_id: str


@dataclass(slots=True)
class KillJob(Event):
    TYPE: ClassVar[str] = "KILL_JOB"
    job_ids: list[str]


@dataclass(slots=True)
class CallMeLater(Event):
    """Ask for a REQUESTED_CALL at ``when`` (``data.timestamp``; strictly in the future)."""

    TYPE: ClassVar[str] = "CALL_ME_LATER"
    when: float


@dataclass(slots=True)
class RegisterProfile(Event):
    TYPE: ClassVar[str] = "REGISTER_PROFILE"
    workload_name: str
    profile_name: str
    profile: dict[str, Any]


@dataclass(slots=True)
class RegisterJob(Event):
    """A dynamic job; ``job`` needs ``id``, ``subtime``, ``res`` and ``profile``."""

    TYPE: ClassVar[str] = "REGISTER_JOB"
    job_id: str
    job: dict[str, Any]


@dataclass(slots=True)
class SetJobMetadata(Event):
    TYPE: ClassVar[str] = "SET_JOB_METADATA"
    job_id: str
    metadata: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        SimulationBegins,
        JobSubmitted,
        JobCompleted,
        JobKilled,
        RequestedCall,
        ResourceStateChanged,
        SimulationEnds,
        Answer,
        Notify,
        Query,
        ExecuteJob,
        RejectJob,
        KillJob,
        CallMeLater,
        RegisterProfile,
        RegisterJob,
        SetJobMetadata,
    )
}


@dataclass(slots=True)
class Message:
    """One protocol message: the sender's current time and its events, in order."""

    now: float
    events: list[Event] = field(default_factory=list)
