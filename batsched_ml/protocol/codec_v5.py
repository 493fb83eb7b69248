"""The Batsim 5 codec: batprotocol's JSON messages <-> the typed :mod:`events` of Batsim 4.

The scheduler knows one set of events, Batsim 4's (:mod:`batsched_ml.protocol.events`); this
module translates Batsim 5's JSON messages (batprotocol, serialised by flatbuffers' JSON printer:
``{"now", "events": [{"timestamp", "event_type": "XEvent", "event": {...}}]}``) to them and back,
in both directions, so that a parsed message dumps to the JSON it came from.

What is translated, Batsim 5 -> Batsim 4:

- ``SimulationBeginsEvent`` -> ``SimulationBegins``: ``host_number`` -> ``nb_resources``, ...;
  forwarded profiles ``w0!delay_10`` -> ``profiles["w0"]["delay_10"]``; ``config`` says which
  features were requested (``dynamic-jobs-enabled``, ...) and holds the EDC init string as
  ``sched-config`` (Batsim 5's ``-s ENDPOINT INIT_STRING``);
- ``JobSubmittedEvent`` -> ``JobSubmitted``: ``job`` = ``{id, subtime, res, profile, walltime}``
  (``walltime`` absent when Batsim 5 sends ``null``; ``profile`` without its ``workload!``
  prefix; an ``extra_data`` holding a JSON object gives its keys as fields of the job);
- ``AllStaticJobsHaveBeenSubmittedEvent`` -> ``Notify("no_more_static_job_to_submit")``;
- ``JobCompletedEvent`` -> ``JobCompleted``: ``state`` -> ``job_state``; return code 4294967295
  (uint32 -1) -> -1; ``alloc`` from the job's ``ExecuteJobEvent`` (Batsim 5 does not send it:
  the codec remembers every allocation it sees);
- ``JobsKilledEvent`` -> ``JobKilled``: ``job_progress[job] = {profile_name, progress}`` for
  atomic profiles;
- ``RequestedCallEvent`` -> ``RequestedCall``; ``SimulationEndsEvent`` -> ``SimulationEnds``;

and the decisions, Batsim 4 -> Batsim 5: ``ExecuteJob`` -> ``ExecuteJobEvent`` (``host_allocation``
plus the predefined placement ``SpreadOverHostsFirst``), ``RejectJob``, ``KillJob`` ->
``KillJobsEvent``, ``CallMeLater`` -> ``CallMeLaterEvent`` (see :func:`call_time`),
``RegisterProfile``, ``RegisterJob`` (no ``subtime``: Batsim 5 submits it at the event's time;
the job's fields other than ``res``, ``profile`` and ``walltime`` go as JSON in ``extra_data``) and
``Notify("registration_finished")`` -> ``FinishRegistrationEvent``.

Values only Batsim 5 has (a call's id, the simulator's version, forwarded profiles of killed jobs,
a non-default placement) ride along in small subclasses of the Batsim 4 events (``...V5``) or in
``extra`` fields, so that a round trip loses nothing; the scheduler sees plain Batsim 4 events.

Times: :class:`Batsim5Codec` gives the scheduler Batsim 5's times rounded to
:data:`TIME_DECIMALS` decimals, as Batsim 4 writes them: Batsim 5 advances its clock by about
1e-12 s at each internal message hop (``now`` 3.000000000001), which would make the scheduler's
times differ from Batsim 4's for the same run. Its replies carry Batsim's exact ``now`` back:
a reply or decision stamped with the rounded ``now`` (3.0 for 3.000000000001) is stamped with
Batsim's, and nothing is stamped earlier (a decision at 3.0 in a reply to 3.000000000001 would
be in the past).

:func:`through_batsim5_json` puts Batsim 5's JSON between the embedded simulator and a scheduler
in process, both ways, as between Batsim 5 and a served scheduler.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from procset import ProcSet

from batsched_ml.protocol.codec import (
    ProtocolError,
    _boolean,
    _describe,
    _get,
    _integer,
    _job_id,
    _job_ids,
    _list,
    _number,
    _object,
    _procset,
    _string,
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
    SimulationBegins,
    SimulationEnds,
)

#: the version of batprotocol spoken (Batsim 5.0.0-rc2's)
BATPROTOCOL_VERSION = "0.1.0"
#: Batsim 4 writes times with 6 decimals; the scheduler sees Batsim 5's rounded so
TIME_DECIMALS = 6
#: Batsim 5's return code of a job killed or past its walltime: uint32 -1
UINT32_MINUS_ONE = 4294967295
#: the executor placement written with every allocation (batprotocol's default)
DEFAULT_PLACEMENT: dict[str, Any] = {
    "executor_placement_type": "PredefinedExecutorPlacementStrategyWrapper",
    "executor_placement": {"strategy": "SpreadOverHostsFirst"},
}
#: the features an EDC may request in its hello (batprotocol ``EDCRequestedSimulationFeatures``)
FEATURES = (
    "dynamic_registration",
    "profile_reuse",
    "acknowledge_dynamic_jobs",
    "forward_profiles_on_job_submission",
    "forward_profiles_on_jobs_killed",
    "forward_profiles_on_simulation_begins",
    "forward_unknown_external_events",
)
#: profile types: Batsim 4's workload names <-> batprotocol's tables (others pass unchanged)
_PROFILE_TYPES = {"delay": "DelayProfile"}
_PROFILE_TYPES_V4 = {v5: v4 for v4, v5 in _PROFILE_TYPES.items()}
#: Batsim 4's job fields that have a Batsim 5 field of their own
_JOB_FIELDS = ("id", "subtime", "res", "profile", "walltime")


# --- the Batsim 5 values the Batsim 4 events lack --------------------------------------------


@dataclass(slots=True)
class SimulationBeginsV5(SimulationBegins):
    """``extra``: Batsim 5's fields with no Batsim 4 counterpart (``batsim_arguments``,
    ``batsim_execution_context_json``, ``external_event_lists``, ``batsim_version``,
    ``batsim_commit``)."""

    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class JobKilledV5(JobKilled):
    """``profiles``: the killed jobs' profiles, as Batsim 5 forwards them
    (``forward_profiles_on_jobs_killed``), else ``None``."""

    profiles: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class RequestedCallV5(RequestedCall):
    call_me_later_id: str = ""
    last_periodic_call: bool = False


@dataclass(slots=True)
class CallMeLaterV5(CallMeLater):
    """A call with its Batsim 5 id (a plain :class:`CallMeLater` gets one when dumped)."""

    call_me_later_id: str = ""


def requested_features(*, dynamic_jobs: bool = False, profiles: bool = False) -> dict[str, bool]:
    """The ``requested_simulation_features`` of the EDC hello: ``{}`` (all false) unless the
    scheduler registers jobs (``dynamic_jobs``: dynamic registration, acknowledged, the
    profiles forwarded at the beginning and with killed jobs, as Batsim 4's
    ``--enable-dynamic-jobs --acknowledge-dynamic-jobs``) or reads the jobs' profiles
    (``profiles``: forwarded at the beginning, as Batsim 4 always did)."""
    features: dict[str, bool] = {}
    if dynamic_jobs:
        features["dynamic_registration"] = True
        features["acknowledge_dynamic_jobs"] = True
    if dynamic_jobs or profiles:
        features["forward_profiles_on_simulation_begins"] = True
    if dynamic_jobs:
        features["forward_profiles_on_jobs_killed"] = True
    return features


#: the EDC name the hello gives (socket and library mode alike)
EDC_NAME = "batsched-ml"


def features_for(config: Any) -> dict[str, bool]:
    """What a scheduler built from ``config`` (a :class:`~batsched_ml.runs.replaying.ReplayConfig`)
    asks of Batsim 5: dynamic jobs for the classified variants (as Batsim 4 is started with
    ``--enable-dynamic-jobs --acknowledge-dynamic-jobs`` for them), the workload's profiles
    when the scheduler reads them (the classified variants, the clairvoyant runtimes), nothing
    otherwise."""
    reads_profiles = config.variant == "runtime-clairvoyant" or config.predictor == "actual"
    return requested_features(dynamic_jobs=config.classified, profiles=reads_profiles)


def call_time(when: float) -> int:
    """The whole second of a ``CallMeLaterEvent`` for a call wanted at ``when``: Batsim 5 takes
    an unsigned integer, so the time is rounded *up*, and a call never comes before the
    scheduler asked for it (it comes up to a second later when ``when`` is not whole)."""
    if not math.isfinite(when) or when < 0:
        raise ValueError(f"cannot ask Batsim 5 for a call at {when}")
    return math.ceil(when)


# --- profiles and jobs ------------------------------------------------------------------------


def _split_id(text: str, kind: str, name: str) -> tuple[str, str]:
    workload, sep, rest = text.partition("!")
    if not sep or not workload or not rest:
        raise ProtocolError(kind, name, f"expected an id 'WORKLOAD!NAME', got {_describe(text)}")
    return workload, rest


def _profile_v4(value: Any, kind: str, name: str) -> tuple[str, str, dict[str, Any]]:
    """A ``ProfileAndId`` -> (workload, profile name, Batsim 4 profile ``{"type", ...}``)."""
    item = _object(value, kind, name)
    workload, profile_name = _split_id(
        _string(_get(item, kind, "id", f"{name}."), kind, f"{name}.id"), kind, f"{name}.id"
    )
    profile_type = _string(
        _get(item, kind, "profile_type", f"{name}."), kind, f"{name}.profile_type"
    )
    body = _object(_get(item, kind, "profile", f"{name}."), kind, f"{name}.profile")
    profile = {"type": _PROFILE_TYPES_V4.get(profile_type, profile_type), **body}
    if "extra_data" in item:
        profile["extra_data"] = item["extra_data"]
    return workload, profile_name, profile


def _profile_v5(profile_id: str, profile: dict[str, Any]) -> dict[str, Any]:
    """A Batsim 4 profile ``{"type", ...}`` -> batprotocol's ``ProfileAndId``."""
    kind = profile.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"profile {profile_id}: no type")
    body = {k: v for k, v in profile.items() if k not in ("type", "extra_data")}
    if kind == "delay":
        body["delay"] = float(body["delay"])  # batprotocol's float64 (written 100.0)
    out: dict[str, Any] = {
        "id": profile_id,
        "profile_type": _PROFILE_TYPES.get(kind, kind),
        "profile": body,
    }
    if "extra_data" in profile:
        out["extra_data"] = profile["extra_data"]
    return out


#: the profile of a job as Batsim 5 forwards it (batprotocol's ``ProfileAndId``)
profile_and_id = _profile_v5


def _profile_name(profile_id: str, workload: str) -> str:
    """``w0!delay_10`` -> ``delay_10`` for a job of workload ``w0`` (Batsim 4 names a profile
    inside the job's workload); a profile of another workload keeps its full id."""
    prefix, sep, name = profile_id.partition("!")
    return name if sep and prefix == workload else profile_id


def _profile_id(profile: str, workload: str) -> str:
    return profile if "!" in profile else f"{workload}!{profile}"


def _extra_fields(text: str) -> dict[str, Any]:
    """The fields a job's ``extra_data`` holds when it is a JSON object (as :func:`_job_v5`
    writes a Batsim 4 job's extra fields), but for Batsim 4's own; else none."""
    try:
        fields = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(fields, dict):
        return {}
    return {k: v for k, v in fields.items() if k not in (*_JOB_FIELDS, "extra_data", "rigid")}


def _job_v4(job_id: str, value: Any, kind: str, name: str, subtime: float | None) -> dict[str, Any]:
    """A batprotocol ``Job`` -> Batsim 4's job object ``{id, subtime, res, profile, walltime}``
    (``extra_data`` and ``rigid`` kept when not empty/true; the fields of an ``extra_data``
    that is a JSON object become fields of the job, as Batsim 4 gives a workload's extra
    fields)."""
    data = _object(value, kind, name)
    workload = job_id.partition("!")[0]
    job: dict[str, Any] = {"id": job_id}
    if subtime is not None:
        job["subtime"] = subtime
    job["res"] = _integer(
        _get(data, kind, "resource_request", f"{name}."), kind, f"{name}.resource_request"
    )
    profile_id = _string(_get(data, kind, "profile_id", f"{name}."), kind, f"{name}.profile_id")
    job["profile"] = _profile_name(profile_id, workload)
    walltime = data.get("walltime")
    if walltime is not None:
        job["walltime"] = _number(walltime, kind, f"{name}.walltime")
    extra_data = data.get("extra_data")
    if extra_data is not None and _string(extra_data, kind, f"{name}.extra_data"):
        job.update(_extra_fields(extra_data))
        job["extra_data"] = extra_data
    if "rigid" in data and not _boolean(data["rigid"], kind, f"{name}.rigid"):
        job["rigid"] = False
    return job


def _job_v5(job: dict[str, Any], workload: str, *, submitted: bool) -> dict[str, Any]:
    """Batsim 4's job object -> a batprotocol ``Job``. ``submitted``: as Batsim 5 sends it
    (every field); else as an EDC registers it (no defaults, the extra fields as JSON in
    ``extra_data``)."""
    out: dict[str, Any] = {"resource_request": job["res"]}
    walltime = job.get("walltime")
    if walltime is not None and walltime > 0:
        out["walltime"] = float(walltime)
    elif submitted:
        out["walltime"] = None
    others = {k: v for k, v in job.items() if k not in (*_JOB_FIELDS, "extra_data", "rigid")}
    extra_data = job.get("extra_data")  # the text the fields came from, kept if still theirs
    if not isinstance(extra_data, str) or (others and _extra_fields(extra_data) != others):
        extra_data = json.dumps(others) if others else ""
    if extra_data or submitted:
        out["extra_data"] = extra_data
    if submitted or job.get("rigid") is False:
        out["rigid"] = job.get("rigid", True)
    out["profile_id"] = _profile_id(job["profile"], workload)
    return out


# --- Batsim's text ----------------------------------------------------------------------------


def fixed(number: float) -> str:
    """A double as flatbuffers' JSON printer writes it (``FloatToString``, precision 12):
    fixed notation with 12 decimals, trailing zeros dropped but one (``7860.0``,
    ``0.000600008``, ``3.000000000001``)."""
    text = f"{number:.12f}"
    end = len(text.rstrip("0"))
    return text[: end + 1] if text[end - 1] == "." else text[:end]


def batsim_json(value: Any) -> str:
    """A message (as :meth:`Batsim5Codec.dump_message` gives it) as Batsim 5.0.0-rc2 sends
    it: flatbuffers' JSON printer without indentation (``"key": value`` joined by bare
    commas), doubles by :func:`fixed`, integers as they are (the schema's types are the
    values' Python types: a time is a float, a count an int), strings as JSON escapes them."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}: {batsim_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(batsim_json(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no Batsim 5 JSON form")
        return fixed(value)
    if isinstance(value, int) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"{type(value).__name__} has no Batsim 5 JSON form")


# --- the codec --------------------------------------------------------------------------------


class Batsim5Codec:
    """Batsim 5 JSON messages <-> :class:`Message` values, for one simulation.

    It holds what a translation needs from earlier messages: the features the EDC requested
    and its init string (they fill ``SimulationBegins.config``), every job's allocation (from
    the ``ExecuteJob`` decisions it dumps or parses, for ``JobCompleted.alloc``), Batsim's
    last exact ``now`` and a counter naming the calls.

    :meth:`parse_message` / :meth:`dump_message` translate exactly (both directions, times as
    they are); :meth:`from_batsim` / :meth:`to_batsim` are the scheduler's side: Batsim's times
    rounded to :data:`TIME_DECIMALS` decimals in, the reply's times raised to Batsim's exact
    ``now`` out.
    """

    def __init__(self, features: dict[str, bool] | None = None, init_data: str = "") -> None:
        self.features: dict[str, bool] = dict(features or {})
        for name in self.features:
            if name not in FEATURES:
                raise ValueError(f"unknown Batsim 5 feature {name!r}")
        self.init_data = init_data
        self.allocations: dict[str, ProcSet] = {}
        self.batsim_now = 0.0  # the exact now of Batsim's last message
        self._seen_now = 0.0  # the same, as the scheduler saw it (rounded)
        self._calls = 0
        self._round = False
        self._parsers: dict[str, Callable[[float, dict[str, Any]], Event]] = {
            "SimulationBeginsEvent": self._simulation_begins_event,
            "JobSubmittedEvent": self._job_submitted_event,
            "AllStaticJobsHaveBeenSubmittedEvent": self._all_static_jobs_have_been_submitted_event,
            "JobCompletedEvent": self._job_completed_event,
            "JobsKilledEvent": self._jobs_killed_event,
            "RequestedCallEvent": self._requested_call_event,
            "SimulationEndsEvent": self._simulation_ends_event,
            "ExecuteJobEvent": self._execute_job_event,
            "RejectJobEvent": self._reject_job_event,
            "KillJobsEvent": self._kill_jobs_event,
            "CallMeLaterEvent": self._call_me_later_event,
            "RegisterProfileEvent": self._register_profile_event,
            "RegisterJobEvent": self._register_job_event,
            "FinishRegistrationEvent": self._finish_registration_event,
        }

    # --- the hello ------------------------------------------------------------------------

    def hello(self, name: str = "batsched-ml", version: str = "0.1.0") -> dict[str, Any]:
        """The EDC's answer to Batsim's init: one ``EDCHelloEvent`` with the features."""
        event = {
            "batprotocol_version": BATPROTOCOL_VERSION,
            "decision_component_name": name,
            "decision_component_version": version,
            "decision_component_commit": "none",
            "requested_simulation_features": dict(self.features),
        }
        return {
            "now": 0.0,
            "events": [{"timestamp": 0.0, "event_type": "EDCHelloEvent", "event": event}],
        }

    # --- the scheduler's side -------------------------------------------------------------

    def from_batsim(self, text: str | bytes) -> Message:
        """Parse Batsim's message for the scheduler (times rounded, see the module)."""
        try:
            obj = json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ProtocolError("message", "(json)", f"malformed JSON: {exc}") from None
        self._round = True
        try:
            message = self.parse_message(obj)
        finally:
            self._round = False
        self.batsim_now = _number(obj["now"], "message", "now")
        self._seen_now = message.now
        return message

    def to_batsim(self, reply: Message) -> str:
        """The JSON text of the scheduler's ``reply``: a time up to the (rounded) ``now`` the
        scheduler was given is written as Batsim's exact ``now``, a later one as it is (never
        earlier than Batsim's ``now``)."""
        events = [self._event_to_v5(event, self._exact(event.timestamp)) for event in reply.events]
        return json.dumps({"now": self._exact(reply.now), "events": events})

    def _exact(self, time: float) -> float:
        return self.batsim_now if time <= self._seen_now else max(time, self.batsim_now)

    # --- Batsim's side (the stand-in) ------------------------------------------------------

    def encode(self, message: Message) -> str:
        """Batsim's message as Batsim 5 writes it (:func:`batsim_json`, times in full)."""
        return batsim_json(self.dump_message(message))

    def decode(self, text: str | bytes) -> Message:
        """The EDC's reply, its times exact (Batsim reads them as they are written)."""
        try:
            obj = json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ProtocolError("message", "(json)", f"malformed JSON: {exc}") from None
        return self.parse_message(obj)

    # --- exact translation ----------------------------------------------------------------

    def _time(self, value: Any, kind: str, name: str) -> float:
        number = _number(value, kind, name)
        return round(number, TIME_DECIMALS) if self._round else number

    def parse_message(self, obj: Any) -> Message:
        """A decoded Batsim 5 JSON message (either direction) -> :class:`Message`."""
        if not isinstance(obj, dict):
            raise ProtocolError("message", "(root)", f"expected an object, got {_describe(obj)}")
        now = self._time(_get(obj, "message", "now"), "message", "now")
        events = _list(_get(obj, "message", "events"), "message", "events")
        return Message(now=now, events=[self._event(ev, i) for i, ev in enumerate(events)])

    def _event(self, obj: Any, index: int) -> Event:
        where = f"events[{index}]"
        if not isinstance(obj, dict):
            raise ProtocolError("message", where, f"expected an event object, got {_describe(obj)}")
        kind = obj.get("event_type")
        if not isinstance(kind, str):
            raise ProtocolError(
                "message", f"{where}.event_type", f"expected a string, got {_describe(kind)}"
            )
        parser = self._parsers.get(kind)
        if parser is None:
            shown = kind if len(kind) <= 40 and kind.isprintable() else _describe(kind)
            raise ProtocolError(shown, "event_type", "event type not supported")
        ts = self._time(_get(obj, kind, "timestamp"), kind, "timestamp")
        data = _object(_get(obj, kind, "event"), kind, "event")
        try:
            event: Event = parser(ts, data)
        except ProtocolError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # never escape
            raise ProtocolError(kind, "event", f"cannot parse: {exc}") from None
        return event

    # Batsim -> EDC

    def _simulation_begins_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "SimulationBeginsEvent"
        hosts = []
        for key in ("computation_hosts", "storage_hosts"):
            items = _list(_get(data, k, key), k, key)
            for i, item in enumerate(items):
                item = _object(item, k, f"{key}[{i}]")
                _integer(_get(item, k, "id", f"{key}[{i}]."), k, f"{key}[{i}].id")
                _string(_get(item, k, "name", f"{key}[{i}]."), k, f"{key}[{i}].name")
            hosts.append(items)
        workloads: dict[str, str] = {}
        for i, item in enumerate(_list(_get(data, k, "workloads"), k, "workloads")):
            item = _object(item, k, f"workloads[{i}]")
            name = _string(_get(item, k, "name", f"workloads[{i}]."), k, f"workloads[{i}].name")
            path = _get(item, k, "filename", f"workloads[{i}].")
            workloads[name] = _string(path, k, f"workloads[{i}].filename")
        profiles: dict[str, dict[str, dict[str, Any]]] = {}
        for i, item in enumerate(_list(data.get("profiles") or [], k, "profiles")):
            workload, name, profile = _profile_v4(item, k, f"profiles[{i}]")
            profiles.setdefault(workload, {})[name] = profile
        known = (
            "host_number",
            "computation_host_number",
            "computation_hosts",
            "storage_host_number",
            "storage_hosts",
            "workloads",
            "profiles",
        )
        config: dict[str, Any] = {
            "dynamic-jobs-enabled": self.features.get("dynamic_registration", False),
            "dynamic-jobs-acknowledged": self.features.get("acknowledge_dynamic_jobs", False),
            "profiles-forwarded-on-submission": self.features.get(
                "forward_profiles_on_job_submission", False
            ),
            "profile-reuse-enabled": self.features.get("profile_reuse", False),
            "sched-config": self.init_data,
        }
        return SimulationBeginsV5(
            timestamp=ts,
            nb_resources=_integer(_get(data, k, "host_number"), k, "host_number"),
            nb_compute_resources=_integer(
                _get(data, k, "computation_host_number"), k, "computation_host_number"
            ),
            nb_storage_resources=_integer(
                _get(data, k, "storage_host_number"), k, "storage_host_number"
            ),
            allow_compute_sharing=False,
            allow_storage_sharing=True,
            config=config,
            compute_resources=hosts[0],
            storage_resources=hosts[1],
            workloads=workloads,
            profiles=profiles,
            extra={key: value for key, value in data.items() if key not in known},
        )

    def _job_submitted_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "JobSubmittedEvent"
        job_id = _job_id(_get(data, k, "job_id"), k, "job_id")
        subtime = self._time(_get(data, k, "submission_time"), k, "submission_time")
        job = _job_v4(job_id, _get(data, k, "job"), k, "job", subtime)
        profile = None
        if data.get("profile") is not None:
            profile = _profile_v4(data["profile"], k, "profile")[2]
        return JobSubmitted(timestamp=ts, job_id=job_id, job=job, profile=profile)

    def _all_static_jobs_have_been_submitted_event(self, ts: float, data: dict[str, Any]) -> Event:
        return Notify(timestamp=ts, type="no_more_static_job_to_submit")

    def _job_completed_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "JobCompletedEvent"
        job_id = _job_id(_get(data, k, "job_id"), k, "job_id")
        code = _integer(data.get("return_code", 0), k, "return_code")
        alloc = self.allocations.pop(job_id, None)
        if alloc is None:
            raise ProtocolError(k, "job_id", f"{job_id} completed, but it was never started")
        return JobCompleted(
            timestamp=ts,
            job_id=job_id,
            job_state=_string(_get(data, k, "state"), k, "state"),
            return_code=-1 if code == UINT32_MINUS_ONE else code,
            alloc=alloc,
        )

    def _jobs_killed_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "JobsKilledEvent"
        progress: dict[str, dict[str, Any]] = {}
        for i, item in enumerate(_list(_get(data, k, "progresses"), k, "progresses")):
            item = _object(item, k, f"progresses[{i}]")
            job_id = _job_id(_get(item, k, "job_id", f"progresses[{i}]."), k, "job_id")
            wrapper = _object(_get(item, k, "wrapper", f"progresses[{i}]."), k, "wrapper")
            if wrapper.get("kill_progress_type") == "KillProgressAtomicProfile":
                inner = _object(wrapper.get("kill_progress"), k, "kill_progress")
                profile_id = _string(inner.get("profile_id"), k, "kill_progress.profile_id")
                progress[job_id] = {
                    "profile_name": _profile_name(profile_id, job_id.partition("!")[0]),
                    "progress": _number(inner.get("progress"), k, "kill_progress.progress"),
                }
            else:  # a composed profile's progress, as Batsim 5 sends it
                progress[job_id] = dict(wrapper)
        profiles = data.get("profiles")
        if profiles is not None:
            profiles = _list(profiles, k, "profiles")
        return JobKilledV5(
            timestamp=ts,
            job_ids=_job_ids(_get(data, k, "job_ids"), k, "job_ids"),
            job_progress=progress,
            profiles=profiles,
        )

    def _requested_call_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "RequestedCallEvent"
        return RequestedCallV5(
            timestamp=ts,
            call_me_later_id=_string(_get(data, k, "call_me_later_id"), k, "call_me_later_id"),
            last_periodic_call=_boolean(data.get("last_periodic_call", False), k, "last"),
        )

    def _simulation_ends_event(self, ts: float, data: dict[str, Any]) -> Event:
        return SimulationEnds(timestamp=ts)

    # EDC -> Batsim

    def _execute_job_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "ExecuteJobEvent"
        job_id = _job_id(_get(data, k, "job_id"), k, "job_id")
        allocation = _object(_get(data, k, "allocation"), k, "allocation")
        alloc = _procset(
            _get(allocation, k, "host_allocation", "allocation."), k, "allocation.host_allocation"
        )
        extra = {key: value for key, value in data.items() if key not in ("job_id", "allocation")}
        placement = {key: v for key, v in allocation.items() if key != "host_allocation"}
        if placement != DEFAULT_PLACEMENT:
            extra.update(placement)
        self.allocations[job_id] = alloc
        return ExecuteJob(timestamp=ts, job_id=job_id, alloc=alloc, extra=extra)

    def _reject_job_event(self, ts: float, data: dict[str, Any]) -> Event:
        return RejectJob(
            ts, _job_id(_get(data, "RejectJobEvent", "job_id"), "RejectJobEvent", "job_id")
        )

    def _kill_jobs_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "KillJobsEvent"
        return KillJob(timestamp=ts, job_ids=_job_ids(_get(data, k, "job_ids"), k, "job_ids"))

    def _call_me_later_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "CallMeLaterEvent"
        call_id = _string(_get(data, k, "call_me_later_id"), k, "call_me_later_id")
        if data.get("when_type") != "OneShot":
            raise ProtocolError(
                k, "when_type", f"only OneShot, got {_describe(data.get('when_type'))}"
            )
        when = _object(_get(data, k, "when"), k, "when")
        time = _integer(_get(when, k, "time", "when."), k, "when.time")
        unit = when.get("time_unit", "Second")
        if unit not in ("Second", "Millisecond"):
            raise ProtocolError(k, "when.time_unit", f"unknown unit {_describe(unit)}")
        seconds = time / 1000 if unit == "Millisecond" else float(time)
        return CallMeLaterV5(timestamp=ts, when=seconds, call_me_later_id=call_id)

    def _register_profile_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "RegisterProfileEvent"
        workload, name, profile = _profile_v4(_get(data, k, "profile"), k, "profile")
        return RegisterProfile(ts, workload_name=workload, profile_name=name, profile=profile)

    def _register_job_event(self, ts: float, data: dict[str, Any]) -> Event:
        k = "RegisterJobEvent"
        job_id = _job_id(_get(data, k, "job_id"), k, "job_id")
        return RegisterJob(
            ts, job_id=job_id, job=_job_v4(job_id, _get(data, k, "job"), k, "job", ts)
        )

    def _finish_registration_event(self, ts: float, data: dict[str, Any]) -> Event:
        return Notify(timestamp=ts, type="registration_finished")

    # --- dumping --------------------------------------------------------------------------

    def dump_message(self, message: Message) -> dict[str, Any]:
        """A :class:`Message` -> Batsim 5's JSON object (either direction, times as they are)."""
        return {
            "now": message.now,
            "events": [self._event_to_v5(event, event.timestamp) for event in message.events],
        }

    def _event_to_v5(self, event: Event, timestamp: float) -> dict[str, Any]:
        kind, data = self._event_data(event)
        return {"timestamp": timestamp, "event_type": kind, "event": data}

    def _event_data(self, event: Event) -> tuple[str, dict[str, Any]]:
        match event:
            case ExecuteJob():
                self.allocations[event.job_id] = event.alloc
                allocation: dict[str, Any] = {"host_allocation": str(event.alloc)}
                extra = dict(event.extra)
                for key in ("executor_placement_type", "executor_placement"):
                    allocation[key] = extra.pop(key, DEFAULT_PLACEMENT[key])
                for key in extra:
                    if key not in ("profile_allocation_override", "storage_placement"):
                        raise ValueError(f"EXECUTE_JOB's {key!r} has no Batsim 5 counterpart")
                return "ExecuteJobEvent", {
                    "job_id": event.job_id,
                    "allocation": allocation,
                    **extra,
                }
            case RejectJob():
                return "RejectJobEvent", {"job_id": event.job_id}
            case KillJob():
                return "KillJobsEvent", {"job_ids": list(event.job_ids)}
            case CallMeLater():
                if isinstance(event, CallMeLaterV5) and event.call_me_later_id:
                    call_id = event.call_me_later_id
                else:
                    self._calls += 1
                    call_id = f"call_{self._calls}"
                when = {"time": call_time(event.when), "time_unit": "Second"}
                return "CallMeLaterEvent", {
                    "call_me_later_id": call_id,
                    "when_type": "OneShot",
                    "when": when,
                }
            case RegisterProfile():
                profile_id = f"{event.workload_name}!{event.profile_name}"
                return "RegisterProfileEvent", {"profile": _profile_v5(profile_id, event.profile)}
            case RegisterJob():
                workload = event.job_id.partition("!")[0]
                job = _job_v5(event.job, workload, submitted=False)
                return "RegisterJobEvent", {"job_id": event.job_id, "job": job}
            case Notify() if event.type == "registration_finished":
                return "FinishRegistrationEvent", {}
            case Notify() if event.type == "no_more_static_job_to_submit":
                return "AllStaticJobsHaveBeenSubmittedEvent", {}
            case SimulationBegins():
                return "SimulationBeginsEvent", self._begins_data(event)
            case JobSubmitted():
                workload = event.job_id.partition("!")[0]
                data: dict[str, Any] = {
                    "job_id": event.job_id,
                    "job": _job_v5(event.job, workload, submitted=True),
                    "submission_time": event.job.get("subtime", event.timestamp),
                }
                if event.profile is not None:
                    profile_id = _profile_id(event.job["profile"], workload)
                    data["profile"] = _profile_v5(profile_id, event.profile)
                return "JobSubmittedEvent", data
            case JobCompleted():
                code = UINT32_MINUS_ONE if event.return_code == -1 else event.return_code
                self.allocations.pop(event.job_id, None)
                return "JobCompletedEvent", {
                    "job_id": event.job_id,
                    "state": event.job_state,
                    "return_code": code,
                }
            case JobKilled():
                return "JobsKilledEvent", self._killed_data(event)
            case RequestedCall():
                call_id, last = "", False
                if isinstance(event, RequestedCallV5):
                    call_id, last = event.call_me_later_id, event.last_periodic_call
                return "RequestedCallEvent", {
                    "call_me_later_id": call_id,
                    "last_periodic_call": last,
                }
            case SimulationEnds():
                return "SimulationEndsEvent", {}
        raise ValueError(f"{type(event).__name__} has no Batsim 5 counterpart")

    def _begins_data(self, event: SimulationBegins) -> dict[str, Any]:
        profiles = [
            _profile_v5(f"{workload}!{name}", profile)
            for workload, named in event.profiles.items()
            for name, profile in named.items()
        ]
        extra = event.extra if isinstance(event, SimulationBeginsV5) else {}
        return {
            "host_number": event.nb_resources,
            "computation_host_number": event.nb_compute_resources,
            "computation_hosts": event.compute_resources,
            "storage_host_number": event.nb_storage_resources,
            "storage_hosts": event.storage_resources,
            **{
                k: v
                for k, v in extra.items()
                if k in ("batsim_arguments", "batsim_execution_context_json")
            },
            "workloads": [{"name": n, "filename": f} for n, f in event.workloads.items()],
            "profiles": profiles,
            **{
                k: v
                for k, v in extra.items()
                if k not in ("batsim_arguments", "batsim_execution_context_json")
            },
        }

    def _killed_data(self, event: JobKilled) -> dict[str, Any]:
        progresses = []
        for job_id, progress in event.job_progress.items():
            if "profile_name" in progress:
                workload = job_id.partition("!")[0]
                wrapper: dict[str, Any] = {
                    "kill_progress_type": "KillProgressAtomicProfile",
                    "kill_progress": {
                        "profile_id": _profile_id(progress["profile_name"], workload),
                        "progress": progress["progress"],
                    },
                }
            else:
                wrapper = progress
            progresses.append({"job_id": job_id, "wrapper": wrapper})
        data: dict[str, Any] = {"job_ids": list(event.job_ids), "progresses": progresses}
        if isinstance(event, JobKilledV5) and event.profiles is not None:
            data["profiles"] = event.profiles
        return data

    def dumps(self, message: Message) -> str:
        """:meth:`dump_message` as JSON text."""
        return json.dumps(self.dump_message(message))


def through_batsim5_json(
    handler: Callable[[Message], Message], features: dict[str, bool]
) -> Callable[[Message], Message]:
    """``handler`` (a scheduler's) behind Batsim 5's JSON both ways, in process: each of the
    embedded Batsim's messages is written as Batsim 5 writes it and read by the scheduler's
    codec (times rounded), each reply written by that codec and read back as Batsim reads it
    (times exact). The embedded replay of a Batsim 5 run so decides on what a served scheduler
    would read."""
    batsim, edc = Batsim5Codec(features), Batsim5Codec(features)

    def handle(message: Message) -> Message:
        return batsim.decode(edc.to_batsim(handler(edc.from_batsim(batsim.encode(message)))))

    return handle
