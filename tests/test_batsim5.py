"""Batsim 5: our scheduler against the recordings of a real Batsim 5.0.0-rc2.

The recordings (``tests/data/batsim5-reference``, gzipped copies of ``../shared``'s) hold every
ZeroMQ frame both ways. Fed the recorded Batsim messages through the Batsim 5 codec, the
scheduler makes the recorded decisions, message by message; over a real socket, ``serve``
answers the init with its hello and then the recorded decisions; the codec parses and dumps
every recorded frame back to the same JSON.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import zmq
from procset import ProcSet

from batsched_ml.protocol.codec import ProtocolError
from batsched_ml.protocol.codec_v5 import (
    UINT32_MINUS_ONE,
    Batsim5Codec,
    CallMeLaterV5,
    call_time,
    requested_features,
)
from batsched_ml.protocol.dialect import OtherProtocolError
from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    Message,
    Notify,
    RegisterJob,
    RegisterProfile,
    RequestedCall,
    SimulationBegins,
    SimulationEnds,
)
from batsched_ml.protocol.framing_v5 import (
    batsim_frame,
    init_data,
    init_frame,
    is_batsim5_init,
    protocol_of,
    split_hello,
)
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler
from batsched_ml.transport.v5 import features_for, serve
from tests.conftest import ROOT, SHARED
from tests.test_cli import CMD, free_port

REFERENCE5 = ROOT / "tests" / "data" / "batsim5-reference"
SHARED_REFERENCE5 = SHARED / "batsim5-reference"
ALL_CASES = sorted(p.name for p in REFERENCE5.iterdir() if p.is_dir())

# the recordings' EDC: EASY in the easy_* cases, list scheduling (FCFS that stops at the first
# job that does not fit) in the others, rejecting the job that can never fit in `reject`
CASES = {
    "fcfs_small": False,
    "fcfs_small_latency": False,
    "easy_backfill": True,
    "easy_kth2000": True,
    "walltime_kill": False,
    "reject": False,
    "clock_drift": False,
}


def records(name: str) -> list[dict[str, Any]]:
    with gzip.open(REFERENCE5 / name / "messages.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line in handle]


def messages(name: str, direction: str) -> list[dict[str, Any]]:
    return [r["msg"] for r in records(name) if r["kind"] == "message" and r["dir"] == direction]


def config_of(backfilling: bool) -> ReplayConfig:
    return ReplayConfig(backfilling=backfilling, starvation_threshold=None)


def test_every_case_is_here_and_the_copies_are_the_recordings() -> None:
    assert sorted([*CASES, "kill_resubmit", "invalid_decision"]) == ALL_CASES
    if not SHARED_REFERENCE5.is_dir():
        pytest.skip("../shared is not beside the clone")
    for name in ALL_CASES:
        original = SHARED_REFERENCE5 / name / "messages.jsonl"
        if original.exists():
            text = original.read_bytes()
        else:
            text = gzip.decompress((SHARED_REFERENCE5 / name / "messages.jsonl.gz").read_bytes())
        assert gzip.decompress((REFERENCE5 / name / "messages.jsonl.gz").read_bytes()) == text


# --- the scheduler, fed the recorded messages ----------------------------------------------


@pytest.mark.parametrize(("name", "backfilling"), sorted(CASES.items()))
def test_same_decisions_as_the_recorded_edc(name: str, backfilling: bool) -> None:
    config = config_of(backfilling)
    scheduler = make_scheduler(config)
    codec = Batsim5Codec(features_for(config))
    ours = []
    for message in messages(name, "batsim->edc"):
        reply = scheduler.handle(codec.from_batsim(json.dumps(message)))
        ours.append(json.loads(codec.to_batsim(reply)))
    recorded = messages(name, "edc->batsim")
    assert len(ours) == len(recorded)
    for i, (mine, theirs) in enumerate(zip(ours, recorded, strict=True)):
        assert mine == theirs, f"reply {i}"
    scheduler.check_consistency()
    assert not scheduler.waiting and not scheduler.running


def test_the_scheduler_sees_batsim_4s_times() -> None:
    """Batsim 5's 1e-12 hops are rounded away: the scheduler sees the times Batsim 4 sends."""
    codec = Batsim5Codec()
    seen = [codec.from_batsim(json.dumps(m)) for m in messages("fcfs_small", "batsim->edc")[:3]]
    assert seen[0].now == 0.0 and seen[1].now == 3.0 and seen[2].now == 8.0
    latency = Batsim5Codec()
    first = latency.from_batsim(json.dumps(messages("fcfs_small_latency", "batsim->edc")[1]))
    assert first.now == 3.0006
    assert latency.batsim_now == 3.000600008
    # the reply is stamped with Batsim's exact now, never the rounded one
    reply = json.loads(
        latency.to_batsim(Message(3.0006, [ExecuteJob(3.0006, "w0!0", ProcSet((0, 3)))]))
    )
    assert reply["now"] == 3.000600008 and reply["events"][0]["timestamp"] == 3.000600008


def test_a_decision_stamped_before_batsims_now_is_raised_to_it() -> None:
    codec = Batsim5Codec()
    codec.from_batsim('{"now": 8.000000000002, "events": []}')
    reply = json.loads(codec.to_batsim(Message(7.0, [ExecuteJob(7.5, "w0!1", ProcSet(4))])))
    assert reply["now"] == 8.000000000002
    assert reply["events"][0]["timestamp"] == 8.000000000002
    later = json.loads(codec.to_batsim(Message(9.0, [ExecuteJob(9.0, "w0!2", ProcSet(5))])))
    assert later["now"] == 9.0 and later["events"][0]["timestamp"] == 9.0


# --- the codec on every recorded frame -----------------------------------------------------


@pytest.mark.parametrize("name", ALL_CASES)
def test_every_recorded_message_round_trips(name: str) -> None:
    """parse then dump gives back every recorded message, both directions (the allocations
    carried from the ExecuteJobEvent to the JobCompletedEvent)."""
    codec = Batsim5Codec()
    count = 0
    for record in records(name):
        if record["kind"] != "message":
            continue
        message = codec.parse_message(record["msg"])
        assert codec.dump_message(message) == record["msg"]
        count += 1
    assert count > 0 and not codec.allocations


def test_parsed_values_are_batsim_4s_events() -> None:
    """kill_resubmit's frames (its EDC is a test scheduler of its own): every Batsim 5 event
    becomes the Batsim 4 event the scheduler knows, with Batsim 4's values."""
    features = {
        "dynamic_registration": True,
        "acknowledge_dynamic_jobs": True,
        "forward_profiles_on_simulation_begins": True,
        "forward_profiles_on_jobs_killed": True,
    }
    codec = Batsim5Codec(features, "{}")
    events = [
        ev
        for r in records("kill_resubmit")
        if r["kind"] == "message"
        for ev in codec.parse_message(r["msg"]).events
    ]
    begins = events[0]
    assert isinstance(begins, SimulationBegins)
    assert begins.nb_compute_resources == 8 and begins.nb_resources == 8
    assert begins.config["dynamic-jobs-enabled"] is True
    assert begins.config["dynamic-jobs-acknowledged"] is True
    assert begins.config["sched-config"] == "{}"
    assert begins.workloads == {"w0": "/data/workload.json"}
    assert begins.profiles["w0"]["delay_500"] == {"type": "delay", "delay": 500.0}
    submitted = [ev for ev in events if isinstance(ev, JobSubmitted)]
    assert submitted[0].job == {
        "id": "w0!0",
        "subtime": 0.0,
        "res": 4,
        "profile": "delay_100",
        "walltime": 200.0,
    }
    dynamic = next(ev for ev in submitted if ev.job_id == "dyn!3_r1")
    assert dynamic.job["profile"] == "resub_3_r1" and dynamic.job["subtime"] == 150.000000000006
    completed = [ev for ev in events if isinstance(ev, JobCompleted)]
    assert completed[0].job_id == "w0!1" and completed[0].alloc == ProcSet((4, 5))
    killed = next(ev for ev in completed if ev.job_id == "w0!3")
    assert killed.job_state == "COMPLETED_KILLED" and killed.return_code == -1
    assert killed.alloc == ProcSet((4, 7))
    jobs_killed = [ev for ev in events if isinstance(ev, JobKilled)]
    assert jobs_killed[0].job_ids == ["w0!3"]
    assert jobs_killed[0].job_progress == {"w0!3": {"profile_name": "delay_500", "progress": 0.12}}
    calls = [ev for ev in events if isinstance(ev, CallMeLater)]
    assert calls[0].when == 150.0
    assert isinstance(calls[0], CallMeLaterV5) and calls[0].call_me_later_id == "kill_w0!3"
    assert sum(isinstance(ev, RequestedCall) for ev in events) == 1
    profiles = [ev for ev in events if isinstance(ev, RegisterProfile)]
    assert (profiles[0].workload_name, profiles[0].profile_name) == ("dyn", "resub_3_r1")
    assert profiles[0].profile == {"type": "delay", "delay": 500.0}
    registered = [ev for ev in events if isinstance(ev, RegisterJob)]
    assert registered[0].job_id == "dyn!3_r1"
    assert registered[0].job["res"] == 4 and registered[0].job["walltime"] == 2000.0
    notifies = [ev.type for ev in events if isinstance(ev, Notify)]
    assert notifies == ["registration_finished", "no_more_static_job_to_submit"]
    assert isinstance(events[-1], SimulationEnds)


def test_walltime_null_is_a_job_without_walltime() -> None:
    codec = Batsim5Codec()
    jobs = [
        event.job
        for record in records("walltime_kill")
        if record["kind"] == "message"
        for event in codec.parse_message(record["msg"]).events
        if isinstance(event, JobSubmitted)
    ]
    without = [job for job in jobs if "walltime" not in job]
    assert len(without) == 1 and without[0]["res"] > 0


def test_the_scheduler_decisions_dump_as_batsim_5_events() -> None:
    """What the scheduler sends, in Batsim 5's shape: a plain CallMeLater gets an id and a
    whole second rounded up; a registered job keeps its extra fields in extra_data."""
    codec = Batsim5Codec()
    message = Message(
        90.0,
        [
            ExecuteJob(90.0, "w0!3", ProcSet((4, 7))),
            CallMeLater(90.0, 150.25),
            RegisterProfile(90.0, "w0_resub", "delay_500__3_r0", {"type": "delay", "delay": 500}),
            RegisterJob(
                90.0,
                "w0_resub!3_r0",
                {
                    "id": "w0_resub!3_r0",
                    "subtime": 90.0,
                    "res": 4,
                    "profile": "delay_500__3_r0",
                    "walltime": 1000,
                    "resubmission_of": "w0!3",
                },
            ),
            Notify(90.0, "registration_finished"),
        ],
    )
    events = codec.dump_message(message)["events"]
    assert [e["event_type"] for e in events] == [
        "ExecuteJobEvent",
        "CallMeLaterEvent",
        "RegisterProfileEvent",
        "RegisterJobEvent",
        "FinishRegistrationEvent",
    ]
    assert events[0]["event"]["allocation"]["host_allocation"] == "4-7"
    assert events[1]["event"] == {
        "call_me_later_id": "call_1",
        "when_type": "OneShot",
        "when": {"time": 151, "time_unit": "Second"},
    }
    assert events[2]["event"] == {
        "profile": {
            "id": "w0_resub!delay_500__3_r0",
            "profile_type": "DelayProfile",
            "profile": {"delay": 500.0},
        }
    }
    assert events[3]["event"] == {
        "job_id": "w0_resub!3_r0",
        "job": {
            "resource_request": 4,
            "walltime": 1000.0,
            "extra_data": '{"resubmission_of": "w0!3"}',
            "profile_id": "w0_resub!delay_500__3_r0",
        },
    }
    assert codec.allocations == {"w0!3": ProcSet((4, 7))}


def test_calls_are_rounded_up_to_the_next_whole_second() -> None:
    assert call_time(150.0) == 150
    assert call_time(150.000000000001) == 151
    assert call_time(0.5) == 1
    with pytest.raises(ValueError):
        call_time(float("nan"))


def test_a_completion_of_a_job_never_started_is_a_protocol_error() -> None:
    codec = Batsim5Codec()
    text = json.dumps(
        {
            "now": 1.0,
            "events": [
                {
                    "timestamp": 1.0,
                    "event_type": "JobCompletedEvent",
                    "event": {
                        "job_id": "w0!1",
                        "state": "COMPLETED_SUCCESSFULLY",
                        "return_code": 0,
                    },
                }
            ],
        }
    )
    with pytest.raises(ProtocolError, match="never started"):
        codec.from_batsim(text)
    codec.to_batsim(Message(0.5, [ExecuteJob(0.5, "w0!1", ProcSet(0))]))
    completed = codec.from_batsim(text).events[0]
    assert isinstance(completed, JobCompleted) and completed.alloc == ProcSet(0)
    assert UINT32_MINUS_ONE == 2**32 - 1


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", "(json)"),
        (
            '{"now": 1, "events": [{"timestamp": 1, "event_type": "HostsTurnedOnOffEvent", "event": {}}]}',
            "event_type",
        ),
        (
            '{"now": 1, "events": [{"timestamp": 1, "event_type": "JobSubmittedEvent", "event": {}}]}',
            "job_id",
        ),
        ('{"now": "x", "events": []}', "now"),
    ],
)
def test_defects_are_protocol_errors(text: str, field: str) -> None:
    with pytest.raises(ProtocolError) as error:
        Batsim5Codec().from_batsim(text)
    assert error.value.field == field


def test_hello_asks_for_dynamic_jobs_only_for_the_classified_variants() -> None:
    assert features_for(ReplayConfig()) == {}
    assert features_for(ReplayConfig(backfilling=False)) == {}
    classified = features_for(ReplayConfig(variant="classification-idempotent"))
    assert (
        classified
        == requested_features(dynamic_jobs=True)
        == {
            "dynamic_registration": True,
            "acknowledge_dynamic_jobs": True,
            "forward_profiles_on_simulation_begins": True,
            "forward_profiles_on_jobs_killed": True,
        }
    )
    # kill_resubmit's EDC asked for the same features
    hello = records("kill_resubmit")[1]["msg"]["message"]["events"][0]["event"]
    assert hello["requested_simulation_features"] == classified
    clairvoyant = features_for(ReplayConfig(variant="runtime-clairvoyant"))
    assert clairvoyant == {"forward_profiles_on_simulation_begins": True}


# --- framing -------------------------------------------------------------------------------


def test_the_first_frame_tells_the_protocol() -> None:
    assert protocol_of(b"\0\0\0\0") == 5
    assert protocol_of(init_frame('{"a": 1}')) == 5
    assert init_data(init_frame('{"a": 1}')) == '{"a": 1}'
    assert protocol_of(b'{"now": 0.0, "events": []}') == 4
    assert not is_batsim5_init(b'{"now": 0.0, "events": []}')
    with pytest.raises(ProtocolError, match="neither"):
        protocol_of(b"\x10\x00\x00\x00binary")
    first = records("fcfs_small")[0]
    assert first["kind"] == "init" and first["raw"]["frame_bytes"] == 4


# --- over ZeroMQ ---------------------------------------------------------------------------


class FakeBatsim5:
    """A Batsim 5 replaying a recording over a REQ socket: the init frame, then every
    recorded Batsim message, NUL-terminated as Batsim 5 sends them."""

    def __init__(self, endpoint: str) -> None:
        self.socket = zmq.Context.instance().socket(zmq.REQ)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    def request(self, frame: bytes) -> bytes:
        self.socket.send(frame)
        assert self.socket.poll(20_000), "no reply within 20 s"
        return self.socket.recv()

    def replay(self, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the hello, the replies) of the scheduler to recording ``name``."""
        init = records(name)[0]
        assert init["kind"] == "init"
        flags, hello = split_hello(self.request(init_frame(init["msg"]["init_data"])))
        assert flags == 0x2
        replies = []
        for message in messages(name, "batsim->edc"):
            reply = self.request(batsim_frame(json.dumps(message)))
            assert not reply.endswith(b"\0")
            replies.append(json.loads(reply))
        return json.loads(hello), replies

    def close(self) -> None:
        self.socket.close(linger=0)


class Serving:
    """:func:`batsched_ml.transport.v5.serve` in a thread, on a free port (``endpoint``);
    ``outcome``: its ``count`` and ``protocol``, or the ``error`` it raised."""

    def __init__(self, handler: Any, **kwargs: Any) -> None:
        self.outcome: dict[str, Any] = {}
        self.endpoint = ""
        ready = threading.Event()

        def on_bound(endpoint: str) -> None:
            self.endpoint = endpoint
            ready.set()

        def run() -> None:
            try:
                self.outcome["count"] = serve(
                    "tcp://127.0.0.1:*",
                    handler,
                    timeout=20,
                    on_bound=on_bound,
                    on_protocol=lambda found: self.outcome.setdefault("protocol", found),
                    **kwargs,
                )
            except BaseException as exc:  # reported by the test
                self.outcome["error"] = exc
                ready.set()

        self.thread = threading.Thread(target=run)
        self.thread.start()
        assert ready.wait(20)

    def join(self) -> dict[str, Any]:
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.outcome


@pytest.mark.parametrize("name", ["fcfs_small", "reject"])
def test_serve_answers_a_batsim_5_over_zeromq(name: str) -> None:
    config = config_of(CASES[name])
    serving = Serving(make_scheduler(config).handle, features=features_for(config))
    batsim = FakeBatsim5(serving.endpoint)
    try:
        hello, replies = batsim.replay(name)
    finally:
        batsim.close()
        outcome = serving.join()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["protocol"] == 5
    assert outcome["count"] == len(replies)
    assert [e["event_type"] for e in hello["events"]] == ["EDCHelloEvent"]
    event = hello["events"][0]["event"]
    assert event["decision_component_name"] == "batsched-ml"
    assert event["requested_simulation_features"] == {}
    assert replies == messages(name, "edc->batsim")


def test_serve_answers_a_batsim_4_on_the_same_socket() -> None:
    """protocol auto, a Batsim 4 replaying its fcfs_small recording: Batsim 4's decisions."""
    from tests.conftest import load_case

    case = load_case("fcfs_small")
    serving = Serving(make_scheduler(config_of(False)).handle)
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(serving.endpoint)
    replies = []
    try:
        for record in case.records:
            if record["dir"] == "batsim->sched":
                socket.send_string(json.dumps(record["msg"]))
                assert socket.poll(20_000)
                replies.append(json.loads(socket.recv()))
    finally:
        socket.close(linger=0)
        outcome = serving.join()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["protocol"] == 4
    assert replies == [r["msg"] for r in case.records if r["dir"] == "sched->batsim"]


@pytest.mark.parametrize(
    ("protocol", "first", "says"),
    [
        ("5", b'{"now": 0.0, "events": []}', "a Batsim 4 message"),
        ("4", b"\0\0\0\0", "--protocol auto (the default) or 5"),
    ],
)
def test_a_forced_protocol_refuses_the_other_batsim(protocol: str, first: bytes, says: str) -> None:
    serving = Serving(lambda message: message, protocol=protocol)
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(serving.endpoint)
    try:
        socket.send(first)
        outcome = serving.join()
    finally:
        socket.close(linger=0)
    assert isinstance(outcome["error"], ProtocolError | OtherProtocolError)
    assert says in str(outcome["error"])


def test_the_command_line_serves_batsim_5(tmp_path: Path) -> None:
    """``batsched-ml serve`` (protocol auto) against a Batsim 5 replaying easy_backfill: the
    hello, the recorded decisions, a complete serve.json."""
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            "20",
            "--starvation-threshold",
            "none",
            "-o",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    batsim = FakeBatsim5(f"tcp://127.0.0.1:{port}")
    try:
        hello, replies = batsim.replay("easy_backfill")
        out, err = server.communicate(timeout=60)
    finally:
        batsim.close()
        server.kill()
    assert server.returncode == 0, err
    assert "speaking Batsim 5" in out
    assert hello["events"][0]["event"]["requested_simulation_features"] == {}
    assert replies == messages("easy_backfill", "edc->batsim")
    status = json.loads((tmp_path / "out" / "serve.json").read_text())
    assert status["status"] == "complete" and not status["waiting"] and not status["running"]


# --- a classified run, every message through Batsim 5's JSON --------------------------------


def test_a_classified_run_through_batsim_5_json_makes_batsim_4s_decisions() -> None:
    """The kill-and-resubmit safeguard over Batsim 5's protocol: the embedded Batsim's
    messages written as Batsim 5 JSON, the scheduler's replies too, both read back; the
    scheduler decides as it does over Batsim 4 (the kill at the divider, the resubmitted
    job's profile and job registered, acknowledged and run, the registration finished)."""
    from batsched_ml.runs.replaying import calendar_of, make_peer_simulator, run_replay
    from tests.test_classified import SCENARIO, FixedTrainer

    config = ReplayConfig(policy="fcfs", variant="classification-idempotent")
    direct: list[Message] = []
    run_replay(SCENARIO, config, trainer=FixedTrainer(), on_reply=direct.append)

    scheduler = make_scheduler(config, calendar=calendar_of(SCENARIO), trainer=FixedTrainer())
    sim = make_peer_simulator(SCENARIO, config)
    batsim, edc = Batsim5Codec(features_for(config)), Batsim5Codec(features_for(config))
    replies, texts = [], []
    message = sim.start()
    while message is not None:
        sent = json.dumps(batsim.dump_message(message))
        reply = scheduler.handle(edc.from_batsim(sent))
        replies.append(reply)
        texts.append(edc.to_batsim(reply))
        message = sim.step(batsim.parse_message(json.loads(texts[-1])))
    # the same decisions, but for the numbers' types (Batsim 5 sends 300.0 for 300) and the
    # extra fields' way (in the job's extra_data): compared as Batsim 5 JSON
    ours, theirs = Batsim5Codec(), Batsim5Codec()
    assert [ours.dump_message(r) for r in replies] == [theirs.dump_message(r) for r in direct]
    assert len(replies) == len(direct) > 10
    kinds = [e["event_type"] for text in texts for e in json.loads(text)["events"]]
    for kind in ("KillJobsEvent", "RegisterProfileEvent", "RegisterJobEvent"):
        assert kinds.count(kind) == 1, kind
    assert kinds.count("FinishRegistrationEvent") == 1
    assert scheduler.registration_finished and not scheduler.waiting and not scheduler.running
    registered = next(
        e["event"]
        for text in texts
        for e in json.loads(text)["events"]
        if e["event_type"] == "RegisterJobEvent"
    )
    assert registered == {
        "job_id": "w0_resub!2_r1",
        "job": {
            "resource_request": 2,
            "walltime": 600.0,
            "extra_data": '{"user": 1, "resubmission_of": "w0!2"}',
            "profile_id": "w0_resub!d300__2_r1",
        },
    }
