"""The stand-in and the embedded replay as Batsim 5.0.0-rc2, against its recordings.

Fed the decisions recorded in each case of ``tests/data/batsim5-reference`` (copies of
``../shared``'s), the embedded simulator in Batsim 5 mode sends the very text real Batsim 5 sent
(every ``Sending '...'`` line of its log, byte for byte) and writes its ``jobs.csv`` byte for
byte; the stand-in does it over ZeroMQ (init frame, hello, NUL-terminated frames), and with our
scheduler served on the other side (or in process: ``replay --batsim 5``) gives the recorded
job table. ``fcfs_small_latency`` too (links with latencies: its messages take their routes'
time, read from its platform); a platform with latencies shaped otherwise is refused in one line,
and so is the Batsim 4 stand-in's, which gives Batsim 4.2.1's recording of the case.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import zmq

from batsched_ml.cli import main
from batsched_ml.protocol.codec_v5 import Batsim5Codec, batsim_json, fixed
from batsched_ml.protocol.framing_v5 import init_data
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.sim import jobs_csv, simulator
from batsched_ml.sim.simulator import BATSIM5_COMMIT, Batsim5, BatsimSimulator
from batsched_ml.workload.batsim5 import from_batsim5, to_batsim5
from batsched_ml.workload.platform import compute_host_names, message_routes
from tests.conftest import REFERENCE, ROOT, load_case
from tests.test_cli import CMD, _one_line_error, free_port
from tests.test_sim_kernel import KERNELS, kernel_named

REFERENCE5 = ROOT / "tests" / "data" / "batsim5-reference"
EXACT = [
    "clock_drift",
    "easy_backfill",
    "easy_kth2000",
    "fcfs_small",
    "invalid_decision",
    "kill_resubmit",
    "reject",
    "walltime_kill",
]
LATENCY = ["fcfs_small_latency"]  # links with latencies: the Python kernel, whichever is chosen


def text(name: str, file: str) -> str:
    path = REFERENCE5 / name / file
    if path.exists():
        return path.read_text()
    return gzip.decompress(path.with_name(file + ".gz").read_bytes()).decode()


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text(name, "messages.jsonl").splitlines()]


def sent(name: str) -> list[str]:
    """Every message real Batsim 5 sent, as its log shows it (the frame without its NUL)."""
    return re.findall(r"Sending '(.*)'$", text(name, "batsim.log"), re.M)


def replies(name: str) -> list[dict[str, Any]]:
    return [r["msg"] for r in records(name) if r["kind"] == "message" and r["dir"] == "edc->batsim"]


def features(name: str) -> dict[str, bool]:
    hello = records(name)[1]["msg"]["message"]["events"][0]["event"]
    return hello["requested_simulation_features"]


def as_recorded(name: str) -> Batsim5:
    """The case's simulation, with the command line and context its Batsim reported."""
    begins = records(name)[2]["msg"]["events"][0]["event"]
    return Batsim5(
        features(name),
        tuple(begins["batsim_arguments"]),
        begins["batsim_execution_context_json"],
    )


def workload(name: str) -> dict[str, Any]:
    return from_batsim5(json.loads(text(name, "workload.json")), name)


def hosts(name: str) -> list[str]:
    return compute_host_names(REFERENCE5 / name / "platform.xml")


def ours_as_recorded(frame: str) -> str:
    """Our SIMULATION_BEGINS says the stand-in is not Batsim, where Batsim's commit goes."""
    return frame.replace(f'"batsim_commit": "{BATSIM5_COMMIT}"', '"batsim_commit": ""')


def table(rows: list[str]) -> str:
    return jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in rows)


@pytest.fixture(params=KERNELS)
def kernel(request, monkeypatch) -> str:
    monkeypatch.setattr(simulator, "Kernel", kernel_named(request.param))
    return request.param


def replay_recorded(name: str) -> tuple[BatsimSimulator, list[str]]:
    """The simulator fed the recorded decisions; the text of every message it sent."""
    sim = BatsimSimulator(
        [workload(name)],
        hosts(name),
        workload_paths=["/data/workload.json"],
        batsim5=as_recorded(name),
        routes=message_routes(REFERENCE5 / name / "platform.xml", speed=True),
    )
    codec = Batsim5Codec(features(name))
    frames = []
    message = sim.start()
    for reply in replies(name):
        assert message is not None
        frames.append(codec.encode(message))
        message = sim.step(codec.decode(json.dumps(reply)))
    assert message is None and sim.finished
    return sim, frames


@pytest.mark.parametrize("name", EXACT + LATENCY)
def test_the_simulator_sends_batsim_5s_text_and_writes_its_jobs_csv(name: str, kernel: str) -> None:
    if name == "easy_kth2000" and kernel != KERNELS[0]:
        pytest.skip("the 2,000 jobs once, with the default kernel")
    if name in LATENCY and kernel != KERNELS[0]:
        pytest.skip("routes run on the Python kernel whichever is chosen")
    sim, frames = replay_recorded(name)
    real = sent(name)
    assert len(frames) == len(real) == len(replies(name))
    frames[0] = ours_as_recorded(frames[0])
    for i, (ours, theirs) in enumerate(zip(frames, real, strict=True)):
        assert ours == theirs, f"message {i}"
    assert table(sim.rows) == text(name, "jobs.csv")


def test_the_1e_12_hops_and_the_v5_columns_show() -> None:
    """What sets Batsim 5 apart, seen in the frames and the job tables: times in full,
    profile ids, a dynamic job's energy 0, no metadata, -0.000000 waits."""
    _, frames = replay_recorded("fcfs_small")
    assert frames[1].startswith('{"now": 3.000000000001,"events": [{"timestamp": 3.000000000001,')
    rows = text("kill_resubmit", "jobs.csv").splitlines()
    assert rows[8] == (
        "3_r1,dyn,dyn!resub_3_r1,150.000000,4,2000.000000,1,COMPLETED_SUCCESSFULLY,210.000000,"
        "500.000000,710.000000,60.000000,560.000000,1.120000,0-3,0.000000,"
    )
    kth, _ = replay_recorded("easy_kth2000")
    # 29 rows (the recordings' README says 30; its jobs.csv has 29)
    assert sum(",-0.000000," in row for row in kth.rows) == 29
    assert fixed(7860.0) == "7860.0" and fixed(0.000600008) == "0.000600008"
    assert fixed(1e-12) == "0.000000000001" and fixed(1e9) == "1000000000.0"
    assert batsim_json({"a": [1, 2.5, None, True, 'x"y']}) == '{"a": [1,2.5,null,true,"x\\"y"]}'


def test_the_copies_are_the_recordings() -> None:
    """tests/data holds copies of ../shared's files (gzipped for the large ones)."""
    from tests.conftest import SHARED, need_shared

    need_shared()
    copies = [p for p in REFERENCE5.rglob("*") if p.is_file() and p.name != "README.md"]
    assert len(copies) >= 9 * 6
    for copy in copies:
        original = SHARED / "batsim5-reference" / copy.relative_to(REFERENCE5)
        if original.exists():
            assert copy.read_bytes() == original.read_bytes(), copy
        elif original.with_suffix("").exists():  # gzipped here
            data = gzip.decompress(copy.read_bytes())
            assert data == original.with_suffix("").read_bytes(), copy
        else:
            assert copy.suffix == ".gz", copy
            assert gzip.decompress(copy.read_bytes()) == gzip.decompress(original.read_bytes())


def test_hosts_are_numbered_as_batsim_5_numbers_them() -> None:
    """Batsim 4 numbers ``host10`` 2 (string order), Batsim 5 ``host2`` (digits as numbers)."""
    begins = json.loads(replay_recorded("easy_backfill")[1][0])["events"][0]["event"]
    assert [h["name"] for h in begins["computation_hosts"][:3]] == ["host0", "host1", "host2"]
    v4 = json.loads((REFERENCE / "easy_backfill" / "messages.jsonl").read_text().splitlines()[0])
    assert v4["msg"]["events"][0]["data"]["compute_resources"][2]["name"] == "host10"


# --- over ZeroMQ --------------------------------------------------------------------------


class RecordedEdc:
    """The recorded EDC on a REP socket: answers the init with its hello, then each message
    with its recorded decisions; keeps every frame Batsim sent."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.frames: list[bytes] = []
        self.error: BaseException | None = None
        self.socket = zmq.Context.instance().socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(f"tcp://127.0.0.1:{port}")
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _receive(self) -> bytes:
        assert self.socket.poll(60_000), "no frame from the stand-in within 60 s"
        frame = self.socket.recv()
        self.frames.append(frame)
        return frame

    def _run(self) -> None:
        try:
            init = records(self.name)[0]["msg"]
            assert init_data(self._receive()) == init["init_data"]
            hello = records(self.name)[1]["msg"]
            flags = hello["flags"].to_bytes(4, "little")
            self.socket.send(flags + json.dumps(hello["message"]).encode())
            for reply in replies(self.name):
                self._receive()
                self.socket.send(json.dumps(reply).encode())
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.socket.close(linger=0)

    def join(self) -> list[bytes]:
        self.thread.join(120)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.frames


def stand_in(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``batsched-ml batsim ARGS`` against the scheduler at ``port`` on this machine (60 s of
    silence allowed), its output captured."""
    return subprocess.run(
        [*CMD, "batsim", *args, "-s", f"tcp://127.0.0.1:{port}", "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("name", ["kill_resubmit", "easy_kth2000", "fcfs_small_latency"])
def test_the_stand_in_is_batsim_5_frame_for_frame(name: str, tmp_path: Path) -> None:
    """``batsched-ml batsim --protocol 5`` against the recorded EDC: the init frame, then every
    recorded frame, NUL-terminated; the recorded jobs.csv, as PREFIXjobs.csv."""
    port = free_port()
    edc = RecordedEdc(name, port)
    (tmp_path / "workload.json").write_text(text(name, "workload.json"))
    run = stand_in(
        port,
        "--protocol",
        "5",
        *("-p", str(REFERENCE5 / name / "platform.xml"), "-w", str(tmp_path / "workload.json")),
        *("-e", f"{tmp_path}/out/"),
    )
    frames = edc.join()
    assert run.returncode == 0, run.stderr
    real = sent(name)
    assert frames[0] == b"\0\0\0\0" and len(frames) == len(real) + 1
    assert all(frame.endswith(b"\0") for frame in frames[1:])
    got = [frame[:-1].decode() for frame in frames[1:]]
    assert got[1:] == real[1:]
    # SIMULATION_BEGINS: its own command line, context, workload path and commit
    begins, recorded = json.loads(got[0]), json.loads(real[0])
    ours, theirs = begins["events"][0]["event"], recorded["events"][0]["event"]
    assert ours["batsim_arguments"][-6:] == [
        "-e",
        f"{tmp_path}/out/",
        "-s",
        f"tcp://127.0.0.1:{port}",
        "--timeout",
        "60",
    ]
    assert json.loads(ours["batsim_execution_context_json"]) == {
        "socket_endpoint": f"tcp://127.0.0.1:{port}",
        "export_prefix": f"{tmp_path}/out/",
    }
    assert ours["workloads"] == [{"name": "w0", "filename": str(tmp_path / "workload.json")}]
    assert ours["batsim_commit"] == BATSIM5_COMMIT
    skip = ("batsim_arguments", "batsim_execution_context_json", "workloads", "batsim_commit")
    assert {k: v for k, v in ours.items() if k not in skip} == {
        k: v for k, v in theirs.items() if k not in skip
    }
    assert begins["now"] == recorded["now"]
    assert (tmp_path / "out" / "jobs.csv").read_text() == text(name, "jobs.csv")
    assert json.loads(run.stdout)["messages"] == len(real)


@pytest.mark.parametrize("name", ["easy_backfill", "fcfs_small", "walltime_kill", "clock_drift"])
def test_our_scheduler_served_to_the_stand_in_gives_batsim_5s_jobs_csv(name: str) -> None:
    """Our scheduler (the recordings' EDC is FCFS or EASY) served over ZeroMQ in Batsim 5's
    protocol, the stand-in in Batsim 5 mode on the other side: the recorded job table."""
    config = ReplayConfig(backfilling=name.startswith("easy"), starvation_threshold=None)
    result = run_replay(workload(name), config, batsim=5, zmq_endpoint="tcp://127.0.0.1:*")
    assert table(result.rows) == text(name, "jobs.csv")
    assert result.batsim == 5 and result.messages == len(sent(name))


def test_replay_batsim_5_writes_batsim_5s_jobs_csv(tmp_path: Path) -> None:
    """``replay --batsim 5``: the 2,000 KTH jobs under EASY give real Batsim 5's job table
    byte for byte (and Batsim 4's schedule: its own table differs only in its columns)."""
    path = tmp_path / "kth5.json"
    path.write_text(text("easy_kth2000", "workload.json"))
    out = tmp_path / "run"
    assert (
        main(
            [
                "replay",
                str(path),
                "--batsim",
                "5",
                "--starvation-threshold",
                "none",
                "-o",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    assert (out / "jobs.csv").read_text() == text("easy_kth2000", "jobs.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["batsim"] == 5
    # the compiled simulator plays Batsim 4 only: the Python one ran
    assert json.loads((out / "timing.json").read_text())["engine"] == "python"
    assert json.loads((out / "run.json").read_text())["config"]["batsim"] == 5
    v4 = tmp_path / "run4"
    assert main(["replay", str(path), "--starvation-threshold", "none", "-o", str(v4), "-q"]) != 0


def test_the_classified_variant_served_to_the_stand_in_as_in_process() -> None:
    """The kill-and-resubmit safeguard in Batsim 5's protocol: the features requested in the
    hello (dynamic jobs, acknowledged, profiles forwarded), the workload's job fields carried
    in extra_data; served to the stand-in or replayed in process, the same job table, and the
    schedule of Batsim 4 (start, finish and allocation of every row)."""
    from tests.test_classified import SCENARIO, FixedTrainer

    v5 = to_batsim5(SCENARIO)
    assert "extra_data" in v5["jobs"][0]
    assert all(p["type"] == "DelayProfile" for p in v5["profiles"].values())
    config = ReplayConfig(policy="fcfs", variant="classification-idempotent")
    served = run_replay(
        v5, config, trainer=FixedTrainer(), batsim=5, zmq_endpoint="tcp://127.0.0.1:*"
    )
    inproc = run_replay(SCENARIO, config, trainer=FixedTrainer(), batsim=5)
    batsim4 = run_replay(SCENARIO, config, trainer=FixedTrainer())
    assert served.rows == inproc.rows
    killed = [row for row in served.rows if ",COMPLETED_KILLED," in row]
    resubmitted = [row for row in served.rows if row.split(",")[1] != "w0"]
    assert killed and resubmitted and all(row.endswith(",0.000000,") for row in resubmitted)

    def schedule(rows: list[str]) -> list[list[str]]:
        return [[r.split(",")[i] for i in (0, 1, 7, 8, 10, 14)] for r in rows]

    assert schedule(served.rows) == schedule(batsim4.rows)


# --- refusals -----------------------------------------------------------------------------


def test_what_the_stand_in_does_not_simulate_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    latency = (REFERENCE5 / "fcfs_small_latency" / "platform.xml").read_text()
    (tmp_path / "w.json").write_text(text("fcfs_small_latency", "workload.json"))
    base = ["batsim", "--protocol", "5", "-s", "tcp://127.0.0.1:1", "--timeout", "1"]
    # links with latencies on a platform shaped otherwise than the recorded one
    floyd = latency.replace('routing="Full"', 'routing="Floyd"')
    (tmp_path / "floyd.xml").write_text(floyd)
    code, err = _one_line_error(
        [*base, "-p", str(tmp_path / "floyd.xml"), "-w", str(tmp_path / "w.json")], capsys
    )
    assert code == 2 and "zone AS0: routing='Full' only" in err and "latencies are simulated" in err
    fast = (REFERENCE5 / "fcfs_small" / "platform.xml").read_text().replace('"1Gf"', '"2Gf"', 1)
    (tmp_path / "fast.xml").write_text(fast)
    code, err = _one_line_error(
        [*base, "-p", str(tmp_path / "fast.xml"), "-w", str(tmp_path / "w.json")], capsys
    )
    assert code == 2 and "speed='2Gf'" in err
    (tmp_path / "fast_latency.xml").write_text(latency.replace('"1Gf"', '"2Gf"', 1))
    code, err = _one_line_error(
        [*base, "-p", str(tmp_path / "fast_latency.xml"), "-w", str(tmp_path / "w.json")], capsys
    )
    assert code == 2 and "speed='2Gf'" in err
    exact = str(REFERENCE5 / "fcfs_small" / "platform.xml")
    v4 = str(REFERENCE / "fcfs_small" / "workload.json")
    code, err = _one_line_error([*base, "-p", exact, "-w", v4], capsys)
    assert code == 2 and "'delay' is Batsim 4's name" in err
    code, err = _one_line_error(
        [*base, "-p", exact, "-w", str(tmp_path / "w.json"), "--enable-dynamic-jobs"], capsys
    )
    assert code == 2 and "--enable-dynamic-jobs" in err and "hello" in err
    code, err = _one_line_error(["batsim", "-p", exact, "-w", v4, "--init-string", "x"], capsys)
    assert code == 2 and "--protocol 5" in err
    # the Batsim 4 stand-in refuses the same platforms
    code, err = _one_line_error(["batsim", "-p", str(tmp_path / "floyd.xml"), "-w", v4], capsys)
    assert code == 2 and "routing='Full' only" in err


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('<link id="backbone"', '<host id="extra" speed="1Gf"/><link id="backbone"'), "host"),
        (('bb_lat="500us"/>', 'bb_lat="500us" loopback_bw="1GBps"/>'), "loopback_bw"),
        (('bb_lat="500us"/>', 'bb_lat="500us" topology="TORUS"/>'), "topology"),
        (('bb_lat="500us"/>', 'bb_lat="500us" sharing_policy="SHARED"/>'), "sharing_policy"),
        (('latency="500us"/>', 'latency="500us" sharing_policy="FATPIPE"/>'), "sharing_policy"),
        (('radical="0-0"', 'radical="0-1"'), "one master host only"),
        (('src="compute" dst="master"', 'src="master" dst="compute"'), "src='master'"),
        (('<link_ctn id="backbone"/>', '<link_ctn id="compute_backbone"/>'), "compute_backbone"),
        (('latency="500us"', 'latency="50ms"'), "TCP-gamma"),
        (('lat="50us"', 'lat="50 us"'), "lat='50 us' not read"),
    ],
)
def test_latency_platforms_the_model_does_not_cover_are_refused_naming_the_element(
    change: tuple[str, str], named: str, tmp_path: Path
) -> None:
    """Only the recorded shape is reproduced: one flat compute cluster, one master cluster of
    one host (split-duplex host links, a backbone, no loopback, no limiter), one zoneRoute from
    the compute cluster to the master's over a declared link, a route within TCP-gamma."""
    from batsched_ml.workload.platform import PlatformError

    recorded = (REFERENCE5 / "fcfs_small_latency" / "platform.xml").read_text()
    assert change[0] in recorded
    (tmp_path / "p.xml").write_text(recorded.replace(change[0], change[1], 1))
    with pytest.raises(PlatformError) as info:
        message_routes(tmp_path / "p.xml")
    assert named in str(info.value) and len(str(info.value).splitlines()) == 1


def test_the_routes_of_the_recorded_platform() -> None:
    """Master to itself: 50 us up, 500 us backbone, 50 us down; compute host to master: the
    500 us zoneRoute backbone, then 50 + 500 us to the compute router, 500 + 50 us from the
    master's; 125 MBps the narrowest link. 1 byte: 8 ns. The exact platforms have none."""
    routes = message_routes(REFERENCE5 / "fcfs_small_latency" / "platform.xml")
    assert routes is not None
    assert routes.route(None, None) == (0.0006000000000000001, 125e6)
    assert routes.route("host5", None) == (0.0016, 125e6)
    assert (0.0 + routes.master[0]) + 1 / routes.master[1] == 0.0006000080000000001
    with pytest.raises(ValueError):
        routes.route(None, "host0")
    assert message_routes(REFERENCE5 / "fcfs_small" / "platform.xml") is None


def test_the_batsim_4_stand_in_is_batsim_4_on_links_with_latencies(tmp_path: Path) -> None:
    """``batsched-ml batsim`` (Batsim 4.2.1) on ``fcfs_small_latency``'s platform, fed the
    recorded scheduler's replies over ZeroMQ: every recorded message, then the recorded
    jobs.csv byte for byte."""
    case = REFERENCE / "fcfs_small_latency"
    records = [json.loads(line) for line in (case / "messages.jsonl").read_text().splitlines()]
    received: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    port = free_port()
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(f"tcp://127.0.0.1:{port}")

    def scheduler() -> None:
        try:
            for record in records:
                if record["dir"] == "sched->batsim":
                    socket.send(json.dumps(record["msg"]).encode())
                else:
                    assert socket.poll(60_000), "no message from the stand-in within 60 s"
                    received.append(json.loads(socket.recv()))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            socket.close(linger=0)

    thread = threading.Thread(target=scheduler)
    thread.start()
    run = stand_in(
        port,
        *("-p", str(case / "platform.xml"), "-w", str(case / "workload.json")),
        *("-e", str(tmp_path / "out")),
    )
    thread.join(120)
    assert not errors, errors
    assert run.returncode == 0, run.stderr
    recorded = [r["msg"] for r in records if r["dir"] == "batsim->sched"]
    received[0]["events"][0]["data"]["workloads"] = {"w0": "/data/workload.json"}
    assert received == recorded
    assert (tmp_path / "out_jobs.csv").read_text() == (case / "out_jobs.csv").read_text()


# --- workloads ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in EXACT if n != "easy_kth2000"] + ["fcfs_small_latency"])
def test_batsim_4_workloads_convert_to_the_recordings(name: str) -> None:
    """The recordings' workloads are Batsim 4's with the profile type renamed: so is ours."""
    v4 = load_case(name).workload
    assert to_batsim5(v4) == json.loads(text(name, "workload.json"))
    assert from_batsim5(to_batsim5(v4), name) == v4


def test_workload_convert_writes_batsim_5_workloads(tmp_path: Path) -> None:
    from tests.test_convert import HEADER, JOBS

    (tmp_path / "t.swf").write_text(HEADER + JOBS)
    assert main(["workload", "convert", str(tmp_path / "t.swf"), "-o", str(tmp_path / "4")]) == 0
    assert (
        main(
            [
                "workload",
                "convert",
                str(tmp_path / "t.swf"),
                "-o",
                str(tmp_path / "5"),
                "--batsim",
                "5",
            ]
        )
        == 0
    )
    v4 = json.loads((tmp_path / "4" / "t.json").read_text())
    v5 = json.loads((tmp_path / "5" / "t.json").read_text())
    assert v5 == to_batsim5(v4) and v5 != v4
    job = v5["jobs"][0]
    assert set(job) == {"id", "subtime", "res", "profile", "walltime", "extra_data"}
    assert job["extra_data"] == {k: v for k, v in v4["jobs"][0].items() if k not in job}
    assert {p["type"] for p in v5["profiles"].values()} == {"DelayProfile"}
    assert (tmp_path / "5" / "t_platform.xml").read_text() == (
        tmp_path / "4" / "t_platform.xml"
    ).read_text()


# --- collect ------------------------------------------------------------------------------


def test_collect_takes_a_batsim_5_run(tmp_path: Path) -> None:
    """``serve`` (protocol auto) and the stand-in in Batsim 5 mode, then ``collect``: the
    recorded job table, the protocol recorded as spoken; a Batsim 5's version is read from its
    ``PREFIXschedule.json`` as written."""
    from batsched_ml.serving.collect import _batsim_version

    name = "easy_backfill"
    (tmp_path / "w.json").write_text(text(name, "workload.json"))
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--starvation-threshold",
            "none",
            "--timeout",
            "60",
            "-o",
            str(tmp_path / "served"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        peer = subprocess.run(
            [
                *CMD,
                "batsim",
                "--protocol",
                "5",
                "-p",
                str(REFERENCE5 / name / "platform.xml"),
                "-w",
                str(tmp_path / "w.json"),
                "-e",
                f"{tmp_path}/out/",
                "-s",
                f"tcp://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert peer.returncode == 0, peer.stderr
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert "speaking Batsim 5" in out
    assert (tmp_path / "out" / "jobs.csv").read_text() == text(name, "jobs.csv")
    args = ["--batsim-jobs", str(tmp_path / "out" / "jobs.csv"), "--workload"]
    args += [str(tmp_path / "w.json"), "--scheduler", str(tmp_path / "served")]
    assert main(["collect", *args, "-o", str(tmp_path / "collected")]) == 0
    summary = json.loads((tmp_path / "collected" / "summary.json").read_text())
    assert summary["scheduler"]["batsim_protocol"] == "batsim5-json"
    assert summary["batsim_version"] is None  # the stand-in writes no schedule.json
    assert summary["jobs"] == 50
    (tmp_path / "out" / "schedule.json").write_text('{"batsim_version": "5.0.0-rc2"}')
    assert _batsim_version(tmp_path / "out" / "jobs.csv") == "5.0.0-rc2"


def test_a_hello_the_stand_in_cannot_take_is_a_protocol_error() -> None:
    from batsched_ml.protocol.codec import ProtocolError
    from batsched_ml.protocol.framing_v5 import hello_frame
    from batsched_ml.transport.v5 import hello_of

    def hello(features: dict[str, Any]) -> str:
        event = {"requested_simulation_features": features}
        return json.dumps({"now": 0.0, "events": [{"event_type": "EDCHelloEvent", "event": event}]})

    assert hello_of(hello_frame(hello({"dynamic_registration": True, "profile_reuse": False}))) == {
        "dynamic_registration": True
    }
    for frame, says in [
        (hello_frame(hello({}), flags=0x1), "not flatbuffers"),
        (hello_frame(hello({"teleport": True})), "unknown feature 'teleport'"),
        (hello_frame('{"now": 0.0, "events": []}'), "exactly one EDCHelloEvent"),
        (hello_frame("{"), "malformed JSON"),
    ]:
        with pytest.raises(ProtocolError, match=says):
            hello_of(frame)


def test_a_scheduler_gone_midway_leaves_the_partial_table(tmp_path: Path) -> None:
    """The recorded EDC of fcfs_small answering only its first 10 messages, then gone: the
    stand-in stops at once, saying so, and keeps the jobs finished so far."""
    name = "fcfs_small"
    port = free_port()
    socket = zmq.Context.instance().socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(f"tcp://127.0.0.1:{port}")

    def edc() -> None:
        hello = records(name)[1]["msg"]
        try:
            assert socket.poll(60_000)
            socket.recv()
            socket.send(
                hello["flags"].to_bytes(4, "little") + json.dumps(hello["message"]).encode()
            )
            for reply in replies(name)[:10]:
                assert socket.poll(60_000)
                socket.recv()
                socket.send(json.dumps(reply).encode())
            assert socket.poll(60_000)
            socket.recv()
        finally:
            socket.close(linger=0)

    thread = threading.Thread(target=edc)
    thread.start()
    (tmp_path / "w.json").write_text(text(name, "workload.json"))
    run = subprocess.run(
        [
            *CMD,
            "batsim",
            "--protocol",
            "5",
            "-p",
            str(REFERENCE5 / name / "platform.xml"),
            "-w",
            str(tmp_path / "w.json"),
            "-e",
            f"{tmp_path}/out/",
            "-s",
            f"tcp://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    thread.join(60)
    assert run.returncode == 3, run.stderr
    assert "closed the connection" in run.stderr
    partial = (tmp_path / "out" / "jobs.partial.csv").read_text().splitlines()
    assert partial == text(name, "jobs.csv").splitlines()[: len(partial)] and len(partial) > 2
    assert not (tmp_path / "out" / "jobs.csv").exists()
