"""Faults of the peer: a Batsim that repeats a message, sends events out of time order, goes
silent or disconnects; a scheduler that dies under the Batsim stand-in. Each ends the run with
one clear line and a non-zero exit, and the outputs written so far are marked partial."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
import zmq

from batsched_ml.protocol.codec import dump_message, parse_message
from batsched_ml.protocol.events import JobSubmitted, Message
from batsched_ml.replaying import ReplayConfig, make_peer_simulator, make_scheduler
from batsched_ml.scheduler.core import SchedulerError
from batsched_ml.sim.simulator import BatsimSimulator
from tests.conftest import ROOT, workload_head
from tests.test_cli import CMD, free_port

# --- the pure core refuses what Batsim never sends ----------------------------------------


def first_messages(kth_workload, count: int) -> tuple[list[Message], object]:
    """The first ``count`` messages of a 60-job KTH replay, and the scheduler that answered."""
    workload = workload_head(kth_workload, 60)
    config = ReplayConfig()
    sim = make_peer_simulator(workload, config)
    scheduler = make_scheduler(config)
    messages = [sim.start()]
    while len(messages) < count:
        messages.append(sim.step(scheduler.handle(messages[-1])))
    scheduler.handle(messages[-1])
    return messages, scheduler


def test_a_repeated_submission_is_refused(kth_workload) -> None:
    messages, scheduler = first_messages(kth_workload, 3)
    submitted = next(m for m in messages if any(isinstance(e, JobSubmitted) for e in m.events))
    job = next(e for e in submitted.events if isinstance(e, JobSubmitted)).job_id
    now = messages[-1].now
    again = Message(
        now,
        [
            dataclasses.replace(e, timestamp=now)
            for e in submitted.events
            if isinstance(e, JobSubmitted)
        ],
    )
    with pytest.raises(SchedulerError, match=f"job {job} submitted twice"):
        scheduler.handle(again)


def test_time_going_back_is_refused(kth_workload) -> None:
    messages, scheduler = first_messages(kth_workload, 6)
    late = messages[-1].now
    with pytest.raises(SchedulerError, match=rf"now=0.0 after one at now={late}: time went back"):
        scheduler.handle(Message(0.0, []))


def test_an_event_after_now_or_out_of_order_is_refused(kth_workload) -> None:
    messages, scheduler = first_messages(kth_workload, 6)
    now = messages[-1].now
    event = JobSubmitted(now + 5, "w0!999", {"id": "w0!999", "subtime": now, "res": 1})
    with pytest.raises(SchedulerError, match="events out of time order"):
        scheduler.handle(Message(now + 1, [event]))


def test_nothing_is_accepted_after_the_end() -> None:
    workload = {
        "nb_res": 2,
        "jobs": [{"id": "1", "subtime": 0, "res": 1, "walltime": 10, "profile": "p"}],
        "profiles": {"p": {"type": "delay", "delay": 5}},
    }
    config = ReplayConfig()
    sim = make_peer_simulator(workload, config)
    scheduler = make_scheduler(config)
    message = sim.start()
    last = message
    while message is not None:
        last = message
        message = sim.step(scheduler.handle(message))
    assert scheduler.ended
    with pytest.raises(SchedulerError, match="after SIMULATION_ENDS"):
        scheduler.handle(Message(last.now, []))


# --- over ZeroMQ, against `batsched-ml serve` -----------------------------------------------


class FakeBatsim:
    """The embedded simulator driven by hand over a REQ socket, so a test can misbehave."""

    def __init__(self, sim: BatsimSimulator, port: int) -> None:
        self.sim = sim
        self.socket = zmq.Context.instance().socket(zmq.REQ)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(f"tcp://127.0.0.1:{port}")
        self.message: Message | None = sim.start()
        self.sent: list[str] = []

    def send(self, text: str, wait: float = 20.0) -> Message | None:
        """Send ``text``; the reply, or ``None`` when none comes within ``wait`` seconds (a
        message the scheduler refuses gets none: it stops)."""
        self.sent.append(text)
        self.socket.send_string(text)
        if not self.socket.poll(int(wait * 1000)):
            return None
        return parse_message(self.socket.recv())

    def step(self) -> None:
        reply = self.send(dump_message(self.message))
        self.message = self.sim.step(reply)

    def close(self) -> None:
        self.socket.close(linger=0)


def start_serve(tmp_path: Path, timeout: float = 20) -> tuple[subprocess.Popen, int]:
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            str(timeout),
            "-o",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return server, port


def fake(kth_workload, port: int) -> FakeBatsim:
    return FakeBatsim(make_peer_simulator(workload_head(kth_workload, 200), ReplayConfig()), port)


def finish(server: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    return server.returncode, out, err


def partial_status(tmp_path: Path) -> tuple[dict, list[dict]]:
    status = json.loads((tmp_path / "out" / "serve.json").read_text())
    with (tmp_path / "out" / "decisions.csv").open() as handle:
        decisions = list(csv.DictReader(handle))
    return status, decisions


def test_serve_marks_its_outputs_partial_when_batsim_repeats_a_message(
    kth_workload, tmp_path: Path
) -> None:
    server, port = start_serve(tmp_path)
    peer = fake(kth_workload, port)
    try:
        for _ in range(4):
            peer.step()
        # the last message again: its submissions are known already (no reply: it stops)
        assert peer.send(peer.sent[-1], wait=1.0) is None
    finally:
        peer.close()
    code, _out, err = finish(server)
    assert code == 2
    assert err.strip().startswith("batsched-ml: error: job w0!")
    assert err.strip().endswith("submitted twice")
    assert len(err.strip().splitlines()) == 1
    status, decisions = partial_status(tmp_path)
    assert status["status"] == "partial" and "submitted twice" in status["reason"]
    assert status["messages"] == 5
    # every job the scheduler heard of is accounted for: started (a decision) or waiting
    started = {d["job_id"] for d in decisions if d["type"] == "EXECUTE_JOB"}
    submitted = {
        e.job_id
        for text in peer.sent[:4]
        for e in parse_message(text).events
        if isinstance(e, JobSubmitted)
    }
    assert started | set(status["waiting"]) == submitted
    assert set(status["running"]) <= started


def test_serve_refuses_time_going_back_and_says_so(kth_workload, tmp_path: Path) -> None:
    server, port = start_serve(tmp_path)
    peer = fake(kth_workload, port)
    try:
        for _ in range(5):
            peer.step()
        assert peer.send(dump_message(Message(0.0, [])), wait=1.0) is None
    finally:
        peer.close()
    code, _out, err = finish(server)
    assert code == 2
    assert "time went back" in err and len(err.strip().splitlines()) == 1
    status, _decisions = partial_status(tmp_path)
    assert status["status"] == "partial" and "time went back" in status["reason"]


def test_serve_gives_up_on_a_batsim_that_disconnects_mid_run(kth_workload, tmp_path: Path) -> None:
    server, port = start_serve(tmp_path, timeout=2)
    peer = fake(kth_workload, port)
    for _ in range(6):
        peer.step()
    peer.close()  # gone, mid-run
    code, _out, err = finish(server)
    assert code == 1
    assert err.strip() == "batsched-ml: error: no message from Batsim within 2 s"
    status, decisions = partial_status(tmp_path)
    assert status["status"] == "partial" and status["messages"] == 6
    assert status["reason"] == "no message from Batsim within 2 s"
    assert status["running"] and decisions


def test_serve_writes_a_complete_status_after_a_whole_run(kth_workload, tmp_path: Path) -> None:
    server, port = start_serve(tmp_path)
    peer = fake(kth_workload, port)
    try:
        while peer.message is not None:
            peer.step()
    finally:
        peer.close()
    code, out, _err = finish(server)
    assert code == 0 and "wrote" in out
    status, decisions = partial_status(tmp_path)
    assert status["status"] == "complete" and status["reason"] is None
    assert status["waiting"] == [] and status["running"] == []
    started = [d["job_id"] for d in decisions if d["type"] == "EXECUTE_JOB"]
    finished = [row.split(",")[1] + "!" + row.split(",")[0] for row in peer.sim.rows]
    assert sorted(started) == sorted(finished)
    assert len(started) == 200


# --- the Batsim stand-in facing a scheduler that dies ---------------------------------------


def test_the_batsim_stand_in_keeps_a_partial_job_table_when_the_scheduler_dies(
    kth_workload, tmp_path: Path
) -> None:
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 200)))
    platform = ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml"
    port = free_port()
    rep = zmq.Context.instance().socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind(f"tcp://127.0.0.1:{port}")
    peer = subprocess.Popen(
        [
            *CMD,
            "batsim",
            "-p",
            str(platform),
            "-w",
            str(workload),
            "-e",
            str(tmp_path / "res" / "out"),
            "-s",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    scheduler = make_scheduler(ReplayConfig())
    try:
        for _ in range(30):  # answer 30 messages, then die
            assert rep.poll(20_000)
            rep.send_string(dump_message(scheduler.handle(parse_message(rep.recv()))))
        rep.close()
        out, err = peer.communicate(timeout=60)
    finally:
        peer.kill()
    assert peer.returncode == 1
    assert err.strip().splitlines()[-1] == (
        "batsched-ml: error: no message from the scheduler within 2 s"
    )
    assert not (tmp_path / "res" / "out_jobs.csv").exists()
    partial = (tmp_path / "res" / "out_jobs.partial.csv").read_text().splitlines()
    assert partial[0].startswith("job_id,") and 1 < len(partial) < 201
    assert "out_jobs.partial.csv" in out
