"""Faults of the peer: a Batsim that repeats a message, sends events out of time order, goes
silent or disconnects; a scheduler that dies under the Batsim stand-in. Each ends the run with
one clear line and a non-zero exit, and the outputs written so far are marked partial."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest
import zmq

from batsched_ml.protocol.codec import dump_message, parse_message
from batsched_ml.protocol.events import JobSubmitted, Message
from batsched_ml.runs.replaying import ReplayConfig, make_peer_simulator, make_scheduler
from batsched_ml.scheduler.core import SchedulerError
from batsched_ml.sim.simulator import BatsimSimulator
from tests.conftest import KTH, ROOT, workload_head
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


def start_serve(tmp_path: Path, timeout: float = 20, *options: str) -> tuple[subprocess.Popen, int]:
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
            *options,
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


# --- the Batsim stand-in facing a scheduler that dies, goes silent or is slow -----------------


def start_stand_in(
    kth_workload, tmp_path: Path, port: int, *options: str, jobs: int = 200
) -> subprocess.Popen:
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(workload_head(kth_workload, jobs)))
    platform = ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml"
    return subprocess.Popen(
        [
            *CMD,
            *("batsim", "-p", str(platform), "-w", str(workload)),
            *("-e", str(tmp_path / "res" / "out"), "-s", f"tcp://127.0.0.1:{port}", *options),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rep_socket(port: int) -> zmq.Socket:
    rep = zmq.Context.instance().socket(zmq.REP)
    rep.setsockopt(zmq.LINGER, 0)
    rep.bind(f"tcp://127.0.0.1:{port}")
    return rep


def answer(rep: zmq.Socket, scheduler, count: int, pause_at: int | None = None) -> None:
    for number in range(1, count + 1):
        assert rep.poll(20_000)
        message = parse_message(rep.recv())
        if number == pause_at:
            time.sleep(3.0)  # a long decision
        rep.send_string(dump_message(scheduler.handle(message)))


def assert_partial_table(tmp_path: Path, out: str) -> None:
    assert not (tmp_path / "res" / "out_jobs.csv").exists()
    partial = (tmp_path / "res" / "out_jobs.partial.csv").read_text().splitlines()
    assert partial[0].startswith("job_id,") and 1 < len(partial) < 201
    assert "out_jobs.partial.csv" in out


def test_the_batsim_stand_in_keeps_a_partial_job_table_when_the_scheduler_goes_silent(
    kth_workload, tmp_path: Path
) -> None:
    port = free_port()
    rep = rep_socket(port)
    peer = start_stand_in(kth_workload, tmp_path, port, "--timeout", "2")
    try:
        answer(rep, make_scheduler(ReplayConfig()), 30)  # answer 30 messages, then nothing
        out, err = peer.communicate(timeout=60)
    finally:
        peer.kill()
        rep.close()
    assert peer.returncode == 1
    assert err.strip().splitlines()[-1] == (
        "batsched-ml: error: no message from the scheduler within 2 s"
    )
    assert_partial_table(tmp_path, out)


def test_the_batsim_stand_in_notices_at_once_a_scheduler_that_is_gone(
    kth_workload, tmp_path: Path
) -> None:
    """Its connection closes when its process ends: the stand-in says so within seconds, with
    its own exit code, rather than waiting out its 600 s timeout (real Batsim 4 waits for
    ever)."""
    port = free_port()
    rep = rep_socket(port)
    peer = start_stand_in(kth_workload, tmp_path, port)  # the default timeout, 600 s
    try:
        answer(rep, make_scheduler(ReplayConfig()), 30)
        assert rep.poll(20_000)  # the 31st message, never answered: the scheduler is gone
        rep.close()
        started = time.monotonic()
        out, err = peer.communicate(timeout=60)
        seconds = time.monotonic() - started
    finally:
        peer.kill()
    assert peer.returncode == 3, err
    assert seconds < 10
    assert err.strip().splitlines()[-1] == (
        f"batsched-ml: error: the scheduler at tcp://127.0.0.1:{port} closed the connection "
        "while Batsim waited for its answer to message 31 (its process ended? its own output "
        "says why); no answer can come"
    )
    assert_partial_table(tmp_path, out)


def test_the_batsim_stand_in_waits_for_a_slow_scheduler(kth_workload, tmp_path: Path) -> None:
    """A long decision is not a scheduler gone: its connection stays open."""
    port = free_port()
    rep = rep_socket(port)
    peer = start_stand_in(kth_workload, tmp_path, port, "--timeout", "0", jobs=20)
    scheduler = make_scheduler(ReplayConfig())
    try:
        answer(rep, scheduler, 5, pause_at=3)
        while peer.poll() is None and rep.poll(5_000):
            rep.send_string(dump_message(scheduler.handle(parse_message(rep.recv()))))
        out, err = peer.communicate(timeout=60)
    finally:
        peer.kill()
        rep.close()
    assert peer.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["jobs"] == 20
    assert (tmp_path / "res" / "out_jobs.csv").is_file()


def test_a_classified_serve_refusing_the_stand_in_ends_both_within_seconds(
    kth_workload, tmp_path: Path
) -> None:
    """The stand-in started without --enable-dynamic-jobs: the scheduler refuses its first
    message and exits; the stand-in notices at once, and the scheduler's folder holds no
    outputs of a run that never started, only run.json saying why."""
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            *("serve", "--socket", f"tcp://127.0.0.1:{port}", "--trainer", "inprocess"),
            *("--variant", "classification-idempotent", "-o", str(tmp_path / "served")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdout.readline().startswith("listening on")
    started = time.monotonic()
    peer = start_stand_in(kth_workload, tmp_path, port)
    try:
        _peer_out, err = peer.communicate(timeout=60)
        seconds = time.monotonic() - started
        code, _out, serve_err = finish(server)
    finally:
        peer.kill()
    assert code == 2
    assert serve_err.strip() == (
        "batsched-ml: error: the classification-idempotent variant resubmits killed jobs: "
        "start Batsim with --enable-dynamic-jobs --acknowledge-dynamic-jobs"
    )
    assert peer.returncode == 3 and seconds < 15, err
    assert "closed the connection while Batsim waited for its answer to message 1" in err
    assert sorted(p.name for p in (tmp_path / "served").iterdir()) == ["run.json"]
    run = json.loads((tmp_path / "served" / "run.json").read_text())
    assert run["status"] == "failed" and "--enable-dynamic-jobs" in run["reason"]


# --- which protocol Batsim speaks: judged by its first frame -----------------------------------

BATSIM5_BEGINS = json.dumps(
    {
        "now": 1e-12,
        "events": [
            {
                "timestamp": 0.0,
                "event_type": "SimulationBeginsEvent",
                "event": {"host_number": 6, "batsim_version": "5.0.0-rc2"},
            }
        ],
    }
).encode()


@pytest.mark.parametrize(
    ("frame", "what"),
    [
        (b"\0\0\0\0", "its first frame is a 4-byte size and an init string of 0 byte(s)"),
        (b"\x03\0\0\0abc", "its first frame is a 4-byte size and an init string of 3 byte(s)"),
        (BATSIM5_BEGINS + b"\0", "events with event_type"),
    ],
    ids=["init", "init-string", "message"],
)
def test_serve_for_batsim4_refuses_a_batsim5_peer_at_its_first_frame_and_writes_no_run(
    tmp_path: Path, frame: bytes, what: str
) -> None:
    """Asked for Batsim 4 (``--protocol 4``; the default, auto, answers a Batsim 5)."""
    server, port = start_serve(tmp_path, 20, "--protocol", "4")
    req = zmq.Context.instance().socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(f"tcp://127.0.0.1:{port}")
    try:
        req.send(frame)
        code, _out, err = finish(server)
    finally:
        req.close()
    assert code == 2
    line = err.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("batsched-ml: error: the peer speaks the Batsim 5 protocol")
    assert what in line
    assert line.endswith(
        "this serve was asked for Batsim 4 (--protocol 4): serve with --protocol auto (the "
        "default) or 5 for a Batsim 5, or run a Batsim 4 (in docker compose, a Batsim 4 image "
        "in BATSIM_IMAGE, which collect needs) or the stand-in `batsched-ml batsim`"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run.json"]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["status"] == "failed" and "Batsim 5 protocol" in run["reason"]


def test_a_batsim4_first_message_is_accepted_and_recorded() -> None:
    from batsched_ml.protocol.dialect import BATSIM4_PROTOCOL, judge_first_frame

    first = ROOT / "tests" / "data" / "batsim-reference" / "fcfs_small" / "messages.jsonl"
    record = json.loads(first.read_text().splitlines()[0])
    assert record["dir"] == "batsim->sched"
    assert judge_first_frame(json.dumps(record["msg"]).encode()) == BATSIM4_PROTOCOL
    # a malformed Batsim 4 message is the codec's to refuse, naming its field
    assert judge_first_frame(b'{"now": 0, "events": [{"type": "X"}]}') == BATSIM4_PROTOCOL


# --- a start that failed leaves nothing that looks like a run ---------------------------------


@pytest.mark.parametrize("variant", ["base", "classification-idempotent"])
def test_a_failed_bind_leaves_only_run_json_saying_why(tmp_path: Path, variant: str) -> None:
    port = free_port()
    busy = rep_socket(port)
    try:
        done = subprocess.run(
            [
                *CMD,
                *("serve", "--socket", f"tcp://127.0.0.1:{port}", "--variant", variant),
                *("-o", str(tmp_path / "out")),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        busy.close()
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"batsched-ml: error: cannot bind tcp://127.0.0.1:{port}: Address already in use "
        f"(addr='tcp://127.0.0.1:{port}')"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["run.json"]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["status"] == "failed" and "cannot bind" in run["reason"]
    # the experiment waiting for this scheduler stops at once, with the reason
    started = time.monotonic()
    collected = subprocess.run(
        [
            *CMD,
            *("collect", "--batsim-jobs", str(tmp_path / "b_jobs.csv"), "--workload"),
            *(str(KTH), "--scheduler", str(tmp_path / "out"), "-o", str(tmp_path / "c")),
            *("--wait", "600"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 2 and time.monotonic() - started < 30
    assert collected.stderr.startswith("batsched-ml: error: the scheduler's run is failed: ")
    assert "cannot bind" in collected.stderr and not (tmp_path / "c").exists()
