"""Property-based tests: whatever bytes arrive, the codec answers a parsed message or one
ProtocolError naming the problem; the SWF reader answers a trace or one SwfError naming the file
and line. CI runs a few hundred cases; `pytest -m long` runs 10,000 per property."""

from __future__ import annotations

import gzip
import json
import math
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batsched_ml.protocol.codec import ProtocolError, dump_message, parse_message
from batsched_ml.protocol.events import EVENT_TYPES
from batsched_ml.workload.swf import SwfError, read_swf
from tests.conftest import REFERENCE_CASES, load_case

CI_CASES = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
LONG_CASES = settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.text(alphabet=string.printable, min_size=500, max_size=2000),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    [
        "job_id",
        "job",
        "alloc",
        "job_state",
        "return_code",
        "job_ids",
        "job_progress",
        "timestamp",
        "type",
        "resources",
        "state",
        "profile",
        "workload_name",
        "profile_name",
        "metadata",
        "res",
        "subtime",
        "walltime",
        "id",
        "nb_resources",
        "config",
        "compute_resources",
    ]
)


def recorded_events() -> list[dict]:
    events = []
    for name in REFERENCE_CASES:
        for record in load_case(name).records:
            events.extend(record["msg"]["events"])
    return events


RECORDED = recorded_events() if REFERENCE_CASES else []


@st.composite
def mutated_messages(draw) -> str:
    """A recorded event with fields dropped, replaced or added, in a message envelope."""
    event = json.loads(json.dumps(draw(st.sampled_from(RECORDED))))
    for _ in range(draw(st.integers(0, 3))):
        target = (
            event
            if draw(st.booleans()) or not isinstance(event.get("data"), dict)
            else event["data"]
        )
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        keys = list(target)
        if action == "drop" and keys:
            target.pop(draw(st.sampled_from(keys)))
        elif action == "replace" and keys:
            target[draw(st.sampled_from(keys))] = draw(json_values)
        else:
            target[draw(field_names)] = draw(json_values)
    if draw(st.booleans()):
        event["type"] = draw(st.sampled_from([*EVENT_TYPES, "BOGUS", ""]))
    now = draw(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=3)
        )
    )
    return json.dumps({"now": now, "events": [event]}, allow_nan=True)


def check_codec(text: str | bytes) -> None:
    try:
        message = parse_message(text)
    except ProtocolError as exc:
        assert exc.message_type and exc.field and str(exc).startswith("invalid ")
        return
    assert math.isfinite(message.now)
    again = parse_message(dump_message(message))  # what parses, serialises and parses back
    assert dump_message(again) == dump_message(message)


pytestmark = pytest.mark.skipif(not RECORDED, reason="no Batsim recordings in tests/data")


@CI_CASES
@given(mutated_messages())
def test_mutated_recorded_messages(text: str) -> None:
    check_codec(text)


@CI_CASES
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300), json_values.map(json.dumps)))
def test_random_input(data) -> None:
    check_codec(data)


@pytest.mark.long
@LONG_CASES
@given(mutated_messages())
def test_mutated_recorded_messages_long(text: str) -> None:
    check_codec(text)


@pytest.mark.long
@LONG_CASES
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300), json_values.map(json.dumps)))
def test_random_input_long(data) -> None:
    check_codec(data)


GOOD_LINE = "1 0 5 100 4 -1 -1 4 200 -1 1 7 3 2 1 -1 -1 -1"
swf_lines = st.lists(
    st.one_of(
        st.just(GOOD_LINE),
        st.lists(
            st.sampled_from(["1", "-1", "0", "3.5", "1e9", "x", "nan", "inf", "--", ""]),
            max_size=20,
        ).map(" ".join),
        st.text(alphabet=string.printable, max_size=60),
        st.just("; MaxProcs: 16"),
    ),
    max_size=12,
)


def check_swf(tmp: Path, lines: list[str], packed: bool, cut: int | None) -> None:
    body = ("\n".join(lines) + "\n").encode()
    path = tmp / ("t.swf.gz" if packed else "t.swf")
    data = gzip.compress(body) if packed else body
    if cut is not None:
        data = data[: max(0, len(data) - cut)]
    path.write_bytes(data)
    for lenient in (False, True):
        try:
            trace = read_swf(path, lenient=lenient)
        except SwfError as exc:
            assert str(exc).startswith(str(path))
            continue
        assert next(iter(trace.jobs)) == "job_number"
        assert {len(values) for values in trace.jobs.values()} == {len(trace.line_numbers)}


@CI_CASES
@given(swf_lines, st.booleans(), st.one_of(st.none(), st.integers(1, 30)))
def test_swf_reader_on_garbage(tmp_path_factory, lines, packed, cut) -> None:
    check_swf(tmp_path_factory.mktemp("swf"), lines, packed, cut)


@pytest.mark.long
@LONG_CASES
@given(swf_lines, st.booleans(), st.one_of(st.none(), st.integers(1, 30)))
def test_swf_reader_on_garbage_long(tmp_path_factory, lines, packed, cut) -> None:
    check_swf(tmp_path_factory.mktemp("swf"), lines, packed, cut)


# --- the converter: well-formed lines with wild values --------------------------------------

wild = st.one_of(
    st.integers(-5, 50),
    st.sampled_from([-1, 0, 1, 2**31, 10**12]),
    st.floats(-1e3, 1e13, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 2)),
)
swf_records = st.lists(
    st.tuples(
        st.integers(1, 8),  # job number: duplicates likely
        wild,  # submit time: negative, unsorted, huge
        wild,  # run time
        wild,  # allocated processors
        wild,  # requested processors
        wild,  # requested time
    ),
    max_size=15,
)


def check_conversion(tmp: Path, records, max_procs: int | None) -> None:
    from batsched_ml.sim.loop import SerialFcfs, drive
    from batsched_ml.sim.simulator import BatsimSimulator
    from batsched_ml.workload.convert import MAX_MACHINE_SIZE, convert_trace

    lines = [] if max_procs is None else [f"; MaxProcs: {max_procs}"]
    for number, submit, run, alloc, req, req_time in records:
        lines.append(
            f"{number} {submit} -1 {run} {alloc} -1 -1 {req} {req_time} -1 1 1 1 1 1 -1 -1 -1"
        )
    path = tmp / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    trace = read_swf(path)
    try:
        workload = convert_trace(trace)
    except SwfError as exc:
        assert str(exc).startswith(str(path))
        if "no jobs" in str(exc):  # every record dropped (or none at all): one clear line
            assert str(exc) == (
                f"{path}: no jobs ({len(records)} read, {len(records)} dropped by the cleaning "
                "rules, 0 malformed lines skipped)"
            )
        else:
            assert "processors" in str(exc)
        return
    data = workload.data
    report = workload.report
    assert report.kept_jobs + sum(report.dropped.values()) == len(records)
    jobs = data["jobs"]
    assert len(jobs) == report.kept_jobs
    assert 1 <= data["nb_res"] <= MAX_MACHINE_SIZE
    json.dumps(data, allow_nan=False)  # finite numbers only
    assert len({job["id"] for job in jobs}) == len(jobs)
    subtimes = [job["subtime"] for job in jobs]
    assert subtimes == sorted(subtimes) and (not jobs or subtimes[0] == 0)
    for job in jobs:
        assert 1 <= job["res"] <= data["nb_res"]
        delay = data["profiles"][job["profile"]]["delay"]
        assert delay > 0
        assert "walltime" not in job or delay < job["walltime"]
    if jobs and data["nb_res"] <= 64:  # every kept job completes, and only once
        sim = BatsimSimulator([data], [f"h{i}" for i in range(data["nb_res"])])
        drive(sim, SerialFcfs())
        assert len(sim.rows) == len(jobs)
        assert all(",COMPLETED_SUCCESSFULLY," in row for row in sim.rows)


@CI_CASES
@given(swf_records, st.one_of(st.none(), st.sampled_from([1, 4, 32, 10**9])))
def test_converter_on_wild_values(tmp_path_factory, records, max_procs) -> None:
    check_conversion(tmp_path_factory.mktemp("conv"), records, max_procs)


@pytest.mark.long
@LONG_CASES
@given(swf_records, st.one_of(st.none(), st.sampled_from([1, 4, 32, 10**9])))
def test_converter_on_wild_values_long(tmp_path_factory, records, max_procs) -> None:
    check_conversion(tmp_path_factory.mktemp("conv"), records, max_procs)
