"""The one codec of the Batsim 4 JSON protocol: JSON text <-> typed :mod:`events` values.

Parsing is strict and total: whatever the input, it returns a :class:`Message` or raises a
:class:`ProtocolError` that names the message type and the field at fault. Serialising writes the
keys in Batsim's order, so that a parsed message re-serialises to the text it came from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from procset import ProcSet

from batsched_ml.errors import UserError
from batsched_ml.protocol.events import (
    EVENT_TYPES,
    Answer,
    CallMeLater,
    Event,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    Query,
    RegisterJob,
    RegisterProfile,
    RejectJob,
    RequestedCall,
    ResourceStateChanged,
    SetJobMetadata,
    SimulationBegins,
    SimulationEnds,
)


class ProtocolError(UserError, ValueError):
    """An invalid protocol message. ``message_type`` is the event type (or ``"message"`` for the
    envelope) and ``field`` the offending field."""

    def __init__(self, message_type: str, field: str, detail: str) -> None:
        super().__init__(f"invalid {message_type} message: field {field!r}: {detail}")
        self.message_type = message_type
        self.field = field
        self.detail = detail


# --- field readers --------------------------------------------------------------------------


def _get(data: dict[str, Any], kind: str, name: str, prefix: str = "") -> Any:
    """``data[name]``; a missing key is reported as field ``prefix + name``."""
    try:
        return data[name]
    except KeyError:
        raise ProtocolError(kind, prefix + name, "missing") from None


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any, kind: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(kind, name, f"expected a number, got {_describe(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ProtocolError(kind, name, f"expected a finite number, got {value}")
    return value


def _integer(value: Any, kind: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(kind, name, f"expected an integer, got {_describe(value)}")
    return value


def _string(value: Any, kind: str, name: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(kind, name, f"expected a string, got {_describe(value)}")
    return value


def _boolean(value: Any, kind: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(kind, name, f"expected true or false, got {_describe(value)}")
    return value


def _object(value: Any, kind: str, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(kind, name, f"expected an object, got {_describe(value)}")
    return value


def _list(value: Any, kind: str, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(kind, name, f"expected a list, got {_describe(value)}")
    return value


def _job_id(value: Any, kind: str, name: str) -> str:
    text = _string(value, kind, name)
    workload, sep, job = text.partition("!")
    if not sep or not workload or not job or "!" in job:
        raise ProtocolError(kind, name, f"expected a job id 'WORKLOAD!JOB', got {_describe(text)}")
    return text


def _job_ids(value: Any, kind: str, name: str) -> list[str]:
    items = _list(value, kind, name)
    if not items:
        raise ProtocolError(kind, name, "expected a non-empty list of job ids")
    return [_job_id(item, kind, f"{name}[{i}]") for i, item in enumerate(items)]


def _procset(value: Any, kind: str, name: str) -> ProcSet:
    text = _string(value, kind, name)
    try:
        procs = ProcSet.from_str(text)
    except (ValueError, TypeError):
        detail = f"expected an interval set like '0-3 7', got {text!r}"
        raise ProtocolError(kind, name, detail) from None
    if not text.strip():
        raise ProtocolError(kind, name, "expected a non-empty interval set")
    return procs


def _job_object(value: Any, kind: str, name: str) -> dict[str, Any]:
    job = _object(value, kind, name)
    _job_id(_get(job, kind, "id", f"{name}."), kind, f"{name}.id")
    _integer(_get(job, kind, "res", f"{name}."), kind, f"{name}.res")
    _string(_get(job, kind, "profile", f"{name}."), kind, f"{name}.profile")
    if "subtime" in job:
        _number(job["subtime"], kind, f"{name}.subtime")
    if "walltime" in job:
        _number(job["walltime"], kind, f"{name}.walltime")
    return job


# --- per-type parsers -----------------------------------------------------------------------


def _simulation_begins(ts: float, data: dict[str, Any]) -> Event:
    k = SimulationBegins.TYPE
    resources = []
    for key in ("compute_resources", "storage_resources"):
        items = _list(_get(data, k, key), k, key)
        for i, item in enumerate(items):
            item = _object(item, k, f"{key}[{i}]")
            _integer(_get(item, k, "id", f"{key}[{i}]."), k, f"{key}[{i}].id")
            _string(_get(item, k, "name", f"{key}[{i}]."), k, f"{key}[{i}].name")
        resources.append(items)
    workloads = _object(_get(data, k, "workloads"), k, "workloads")
    profiles = _object(_get(data, k, "profiles"), k, "profiles")
    for name, value in profiles.items():
        _object(value, k, f"profiles.{name}")
    return SimulationBegins(
        timestamp=ts,
        nb_resources=_integer(_get(data, k, "nb_resources"), k, "nb_resources"),
        nb_compute_resources=_integer(
            _get(data, k, "nb_compute_resources"), k, "nb_compute_resources"
        ),
        nb_storage_resources=_integer(
            _get(data, k, "nb_storage_resources"), k, "nb_storage_resources"
        ),
        allow_compute_sharing=_boolean(
            _get(data, k, "allow_compute_sharing"), k, "allow_compute_sharing"
        ),
        allow_storage_sharing=_boolean(
            _get(data, k, "allow_storage_sharing"), k, "allow_storage_sharing"
        ),
        config=_object(_get(data, k, "config"), k, "config"),
        compute_resources=resources[0],
        storage_resources=resources[1],
        workloads=workloads,
        profiles=profiles,
    )


def _job_submitted(ts: float, data: dict[str, Any]) -> Event:
    k = JobSubmitted.TYPE
    job_id = _job_id(_get(data, k, "job_id"), k, "job_id")
    job = _job_object(_get(data, k, "job"), k, "job")
    profile = data.get("profile")
    if profile is not None:
        profile = _object(profile, k, "profile")
    return JobSubmitted(timestamp=ts, job_id=job_id, job=job, profile=profile)


def _job_completed(ts: float, data: dict[str, Any]) -> Event:
    k = JobCompleted.TYPE
    return JobCompleted(
        timestamp=ts,
        job_id=_job_id(_get(data, k, "job_id"), k, "job_id"),
        job_state=_string(_get(data, k, "job_state"), k, "job_state"),
        return_code=_integer(_get(data, k, "return_code"), k, "return_code"),
        alloc=_procset(_get(data, k, "alloc"), k, "alloc"),
    )


def _job_killed(ts: float, data: dict[str, Any]) -> Event:
    k = JobKilled.TYPE
    progress = _object(_get(data, k, "job_progress"), k, "job_progress")
    for name, value in progress.items():
        _object(value, k, f"job_progress.{name}")
    return JobKilled(
        timestamp=ts,
        job_ids=_job_ids(_get(data, k, "job_ids"), k, "job_ids"),
        job_progress=progress,
    )


def _resource_state_changed(ts: float, data: dict[str, Any]) -> Event:
    k = ResourceStateChanged.TYPE
    return ResourceStateChanged(
        timestamp=ts,
        resources=_procset(_get(data, k, "resources"), k, "resources"),
        state=_string(_get(data, k, "state"), k, "state"),
    )


def _notify(ts: float, data: dict[str, Any]) -> Event:
    k = Notify.TYPE
    kind = _string(_get(data, k, "type"), k, "type")
    extra = {key: value for key, value in data.items() if key != "type"}
    return Notify(timestamp=ts, type=kind, extra=extra)


def _execute_job(ts: float, data: dict[str, Any]) -> Event:
    k = ExecuteJob.TYPE
    extra = {key: value for key, value in data.items() if key not in ("job_id", "alloc")}
    for key in extra:
        if key not in ("mapping", "storage_mapping", "additional_io_job"):
            raise ProtocolError(k, repr(key) if not key.strip() else key, "unexpected field")
    return ExecuteJob(
        timestamp=ts,
        job_id=_job_id(_get(data, k, "job_id"), k, "job_id"),
        alloc=_procset(_get(data, k, "alloc"), k, "alloc"),
        extra=extra,
    )


def _call_me_later(ts: float, data: dict[str, Any]) -> Event:
    k = CallMeLater.TYPE
    return CallMeLater(timestamp=ts, when=_number(_get(data, k, "timestamp"), k, "timestamp"))


def _register_profile(ts: float, data: dict[str, Any]) -> Event:
    k = RegisterProfile.TYPE
    return RegisterProfile(
        timestamp=ts,
        workload_name=_string(_get(data, k, "workload_name"), k, "workload_name"),
        profile_name=_string(_get(data, k, "profile_name"), k, "profile_name"),
        profile=_object(_get(data, k, "profile"), k, "profile"),
    )


def _register_job(ts: float, data: dict[str, Any]) -> Event:
    k = RegisterJob.TYPE
    return RegisterJob(
        timestamp=ts,
        job_id=_job_id(_get(data, k, "job_id"), k, "job_id"),
        job=_job_object(_get(data, k, "job"), k, "job"),
    )


def _set_job_metadata(ts: float, data: dict[str, Any]) -> Event:
    k = SetJobMetadata.TYPE
    return SetJobMetadata(
        timestamp=ts,
        job_id=_job_id(_get(data, k, "job_id"), k, "job_id"),
        metadata=_string(_get(data, k, "metadata"), k, "metadata"),
    )


_PARSERS: dict[str, Callable[[float, dict[str, Any]], Event]] = {
    SimulationBegins.TYPE: _simulation_begins,
    JobSubmitted.TYPE: _job_submitted,
    JobCompleted.TYPE: _job_completed,
    JobKilled.TYPE: _job_killed,
    RequestedCall.TYPE: lambda ts, data: RequestedCall(timestamp=ts),
    ResourceStateChanged.TYPE: _resource_state_changed,
    SimulationEnds.TYPE: lambda ts, data: SimulationEnds(timestamp=ts),
    Answer.TYPE: lambda ts, data: Answer(timestamp=ts, data=data),
    Notify.TYPE: _notify,
    Query.TYPE: lambda ts, data: Query(
        timestamp=ts, requests=_object(_get(data, "QUERY", "requests"), "QUERY", "requests")
    ),
    ExecuteJob.TYPE: _execute_job,
    RejectJob.TYPE: lambda ts, data: RejectJob(
        timestamp=ts, job_id=_job_id(_get(data, "REJECT_JOB", "job_id"), "REJECT_JOB", "job_id")
    ),
    KillJob.TYPE: lambda ts, data: KillJob(
        timestamp=ts, job_ids=_job_ids(_get(data, "KILL_JOB", "job_ids"), "KILL_JOB", "job_ids")
    ),
    CallMeLater.TYPE: _call_me_later,
    RegisterProfile.TYPE: _register_profile,
    RegisterJob.TYPE: _register_job,
    SetJobMetadata.TYPE: _set_job_metadata,
}
assert set(_PARSERS) == set(EVENT_TYPES)


def event_from_dict(obj: Any, index: int = 0) -> Event:
    """Parse one event object ``{"timestamp", "type", "data"}``."""
    where = f"events[{index}]"
    if not isinstance(obj, dict):
        raise ProtocolError("message", where, f"expected an event object, got {_describe(obj)}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("message", f"{where}.type", f"expected a string, got {_describe(kind)}")
    parser = _PARSERS.get(kind)
    if parser is None:
        if not kind.strip():
            raise ProtocolError("message", f"{where}.type", "empty event type")
        shown = kind if len(kind) <= 40 and kind.isprintable() else _describe(kind)
        raise ProtocolError(shown, "type", "unknown event type")
    timestamp = _number(_get(obj, kind, "timestamp"), kind, "timestamp")
    data = _object(_get(obj, kind, "data"), kind, "data")
    try:
        return parser(timestamp, data)
    except ProtocolError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # defensive: never escape
        raise ProtocolError(kind, "data", f"cannot parse: {exc}") from None


def message_from_dict(obj: Any) -> Message:
    """Parse a decoded JSON message object."""
    if not isinstance(obj, dict):
        raise ProtocolError("message", "(root)", f"expected an object, got {_describe(obj)}")
    now = _number(_get(obj, "message", "now"), "message", "now")
    events = _list(_get(obj, "message", "events"), "message", "events")
    return Message(now=now, events=[event_from_dict(ev, i) for i, ev in enumerate(events)])


def parse_message(text: str | bytes) -> Message:
    """Parse a message from its JSON text; any defect raises :class:`ProtocolError`."""
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        hint = ""
        if isinstance(text, bytes) and text.lstrip()[:1] not in (b"{", b"["):
            # Batsim 5 opens with a binary init frame (and may speak FlatBuffers after it)
            hint = (
                " (not JSON at all: is the peer Batsim 5 or later? this is the Batsim 4 "
                "protocol; `serve --protocol auto` (the default) or `--protocol 5` speaks "
                "Batsim 5's JSON)"
            )
        raise ProtocolError("message", "(json)", f"malformed JSON: {exc}{hint}") from None
    return message_from_dict(obj)


# --- serialisation --------------------------------------------------------------------------


def _event_data(event: Event) -> dict[str, Any]:
    match event:
        case SimulationBegins():
            return {
                "nb_resources": event.nb_resources,
                "nb_compute_resources": event.nb_compute_resources,
                "nb_storage_resources": event.nb_storage_resources,
                "allow_compute_sharing": event.allow_compute_sharing,
                "allow_storage_sharing": event.allow_storage_sharing,
                "config": event.config,
                "compute_resources": event.compute_resources,
                "storage_resources": event.storage_resources,
                "workloads": event.workloads,
                "profiles": event.profiles,
            }
        case JobSubmitted():
            data: dict[str, Any] = {"job_id": event.job_id, "job": event.job}
            if event.profile is not None:
                data["profile"] = event.profile
            return data
        case JobCompleted():
            return {
                "job_id": event.job_id,
                "job_state": event.job_state,
                "return_code": event.return_code,
                "alloc": str(event.alloc),
            }
        case JobKilled():
            return {"job_ids": list(event.job_ids), "job_progress": event.job_progress}
        case RequestedCall() | SimulationEnds():
            return {}
        case ResourceStateChanged():
            return {"resources": str(event.resources), "state": event.state}
        case Answer():
            return event.data
        case Notify():
            return {"type": event.type, **event.extra}
        case Query():
            return {"requests": event.requests}
        case ExecuteJob():
            return {"job_id": event.job_id, "alloc": str(event.alloc), **event.extra}
        case RejectJob():
            return {"job_id": event.job_id}
        case KillJob():
            return {"job_ids": list(event.job_ids)}
        case CallMeLater():
            return {"timestamp": event.when}
        case RegisterProfile():
            return {
                "workload_name": event.workload_name,
                "profile_name": event.profile_name,
                "profile": event.profile,
            }
        case RegisterJob():
            return {"job_id": event.job_id, "job": event.job}
        case SetJobMetadata():
            return {"job_id": event.job_id, "metadata": event.metadata}
    raise TypeError(f"not a protocol event: {event!r}")


def event_to_dict(event: Event) -> dict[str, Any]:
    return {"timestamp": event.timestamp, "type": event.TYPE, "data": _event_data(event)}


def message_to_dict(message: Message) -> dict[str, Any]:
    return {"now": message.now, "events": [event_to_dict(ev) for ev in message.events]}


def dump_message(message: Message) -> str:
    """The JSON text of ``message`` (``json.dumps`` layout, keys in Batsim's order)."""
    return json.dumps(message_to_dict(message))
