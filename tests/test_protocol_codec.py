"""The protocol codec: every recorded message round-trips; every defect is one ProtocolError."""

from __future__ import annotations

import json

import pytest
from procset import ProcSet

from batsched_ml.protocol.codec import (
    ProtocolError,
    dump_message,
    message_from_dict,
    parse_message,
)
from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    Message,
    Notify,
    RegisterJob,
    SimulationBegins,
)
from tests.conftest import REFERENCE_CASES, load_case


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_every_recorded_message_round_trips_to_the_same_json_text(name: str) -> None:
    case = load_case(name)
    assert case.records, "empty transcript"
    for record in case.records:
        text = json.dumps(record["msg"])
        assert dump_message(parse_message(text)) == text


def test_parsed_values_are_typed() -> None:
    case = load_case("kill_resubmit")
    messages = [message_from_dict(r["msg"]) for r in case.records]
    begins = messages[0].events[0]
    assert isinstance(begins, SimulationBegins)
    assert begins.nb_compute_resources == 8
    assert begins.config["dynamic-jobs-enabled"] is True
    events = [ev for m in messages for ev in m.events]
    submitted = [ev for ev in events if isinstance(ev, JobSubmitted)]
    assert submitted[0].job_id == "w0!0" and submitted[0].job["res"] == 4
    completed = [ev for ev in events if isinstance(ev, JobCompleted)]
    assert completed[0].alloc == ProcSet((4, 5))
    killed = [ev for ev in events if isinstance(ev, JobKilled)]
    assert killed[0].job_progress == {"w0!3": {"profile_name": "delay_500", "progress": 0.12}}
    calls = [ev for ev in events if isinstance(ev, CallMeLater)]
    assert calls[0].when == 150.0
    registered = [ev for ev in events if isinstance(ev, RegisterJob)]
    assert registered[0].job["subtime"] == 150.0
    notifies = [ev.type for ev in events if isinstance(ev, Notify)]
    assert notifies == ["registration_finished", "no_more_static_job_to_submit"]


def test_allocations_serialise_as_batsim_interval_strings() -> None:
    message = Message(now=1.5, events=[ExecuteJob(1.5, "w0!1", ProcSet((0, 3), 7, (9, 10)))])
    assert json.loads(dump_message(message))["events"][0]["data"]["alloc"] == "0-3 7 9-10"


BAD = [
    ("{not json", "message", "(json)"),
    ("[]", "message", "(root)"),
    ('{"events": []}', "message", "now"),
    ('{"now": "1", "events": []}', "message", "now"),
    ('{"now": 1, "events": {}}', "message", "events"),
    ('{"now": 1, "events": [{"timestamp": 1, "type": "BOGUS", "data": {}}]}', "BOGUS", "type"),
    ('{"now": 1, "events": [{"timestamp": 1, "data": {}}]}', "message", "events[0].type"),
    (
        '{"now": 1, "events": [{"type": "REQUESTED_CALL", "data": {}}]}',
        "REQUESTED_CALL",
        "timestamp",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "REQUESTED_CALL"}]}',
        "REQUESTED_CALL",
        "data",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "EXECUTE_JOB", "data": {"job_id": "w0!1"}}]}',
        "EXECUTE_JOB",
        "alloc",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "EXECUTE_JOB", '
        '"data": {"job_id": "w0!1", "alloc": "3-x"}}]}',
        "EXECUTE_JOB",
        "alloc",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "EXECUTE_JOB", '
        '"data": {"job_id": "nobang", "alloc": "1"}}]}',
        "EXECUTE_JOB",
        "job_id",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "JOB_COMPLETED", "data": '
        '{"job_id": "w0!1", "job_state": "COMPLETED_KILLED", "return_code": "x", "alloc": "1"}}]}',
        "JOB_COMPLETED",
        "return_code",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "JOB_SUBMITTED", '
        '"data": {"job_id": "w0!1", "job": {"id": "w0!1", "profile": "p"}}}]}',
        "JOB_SUBMITTED",
        "job.res",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "KILL_JOB", "data": {"job_ids": []}}]}',
        "KILL_JOB",
        "job_ids",
    ),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "CALL_ME_LATER", "data": {"timestamp": true}}]}',
        "CALL_ME_LATER",
        "timestamp",
    ),
    ('{"now": NaN, "events": []}', "message", "now"),
    (
        '{"now": 1, "events": [{"timestamp": 1, "type": "SIMULATION_BEGINS", "data": {}}]}',
        "SIMULATION_BEGINS",
        "compute_resources",
    ),
]


@pytest.mark.parametrize(("text", "kind", "field"), BAD)
def test_defects_raise_one_protocol_error_naming_type_and_field(
    text: str, kind: str, field: str
) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_message(text)
    assert (info.value.message_type, info.value.field) == (kind, field)
    assert kind in str(info.value) and field in str(info.value)


def test_deep_nesting_is_a_protocol_error_not_a_recursion_crash() -> None:
    with pytest.raises(ProtocolError):
        parse_message("[" * 100_000 + "]" * 100_000)


def test_a_binary_message_names_the_likely_cause_batsim_5() -> None:
    from batsched_ml.protocol.codec import ProtocolError, parse_message

    with pytest.raises(ProtocolError, match="is the peer Batsim 5 or later"):
        parse_message(b"\x10\x00\x00\x00\x0c\x00binary")
    with pytest.raises(ProtocolError) as plain:
        parse_message(b'{"now": 0, "events": [')  # JSON cut short: no such hint
    assert "Batsim 5" not in str(plain.value)
