"""The command line as a user runs it: replay, serve against the Batsim stand-in over ZeroMQ,
and clear one-line errors with a non-zero exit."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from batsched_ml.cli import main
from tests.conftest import KTH, ROOT, workload_head

CMD = [sys.executable, "-m", "batsched_ml"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_slice(kth_workload, path: Path, count: int = 400) -> Path:
    path.write_text(json.dumps(workload_head(kth_workload, count)))
    return path


def serve_against_standin(
    serve_args: list[str], batsim_args: list[str], *, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], int, str, str]:
    """``batsched-ml serve SERVE_ARGS`` answering the Batsim stand-in ``batsched-ml batsim
    BATSIM_ARGS`` on a free port: the stand-in's completed process, then the server's exit
    status, standard output and standard error."""
    port = free_port()
    socket = f"tcp://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*CMD, "serve", "--socket", socket, *serve_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        peer = subprocess.run(
            [*CMD, "batsim", *batsim_args, "-s", socket],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    return peer, server.returncode, out, err


def test_replay_prints_a_summary_and_writes_outputs(kth_workload, tmp_path: Path, capsys) -> None:
    workload = write_slice(kth_workload, tmp_path / "w.json")
    assert (
        main(["replay", str(workload), "-o", str(tmp_path / "out"), "--policy", "spf", "-q"]) == 0
    )
    out = capsys.readouterr().out
    assert "mean bounded slowdown" in out and "spf" in out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["jobs"] == 400 and summary["config"]["policy"] == "spf"


@pytest.mark.parametrize("policy", ["fcfs", "spf"])  # the compiled engine and the Python path
def test_the_progress_bar_counts_the_jobs_unless_quiet(
    kth_workload, tmp_path: Path, capsys, policy: str
) -> None:
    workload = write_slice(kth_workload, tmp_path / "w.json", 300)
    assert main(["replay", str(workload), "-o", str(tmp_path / "a"), "--policy", policy]) == 0
    bar = capsys.readouterr().err
    assert f"w.json {policy}" in bar and "300/300" in bar
    assert main(["replay", str(workload), "-o", str(tmp_path / "q"), "--policy", policy, "-q"]) == 0
    assert capsys.readouterr().err == ""
    same = ("jobs.csv", "summary.json")
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "q" / f).read_bytes() for f in same)


@pytest.mark.parametrize(
    ("options", "with_calendar"),
    [
        (["--policy", "saf"], False),
        # the related work over ZeroMQ as in process: SU reads the calendar of the workload
        # (CPH's solver makes it the suite's slowest: a long run, `pytest -m long`)
        pytest.param(
            ["--dispatcher", "cph", "--predictor", "su", "--correction", "power"],
            True,
            marks=pytest.mark.long,
        ),
        # without --calendar, SU and the classifier take it from the workload Batsim names
        (["--predictor", "su"], False),
        (["--variant", "classification-idempotent", "--trees", "4"], False),
    ],
)
def test_serve_answers_the_batsim_stand_in_like_an_in_process_replay(
    kth_workload, tmp_path: Path, options: list[str], with_calendar: bool
) -> None:
    workload = write_slice(kth_workload, tmp_path / "w.json", 1500)
    calendar = ["--calendar", str(workload)] if with_calendar else []
    dynamic = (
        ["--enable-dynamic-jobs", "--acknowledge-dynamic-jobs"] if "--variant" in options else []
    )
    platform = ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml"
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            *options,
            *calendar,
            "--timeout",
            "30",
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
                "-p",
                str(platform),
                "-w",
                str(workload),
                "-e",
                str(tmp_path / "out"),
                "-s",
                f"tcp://127.0.0.1:{port}",
                "--timeout",
                "30",
                *dynamic,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert peer.returncode == 0, peer.stderr
        out, err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert "simulation ended" in out
    assert main(["replay", str(workload), "-o", str(tmp_path / "inproc"), *options, "-q"]) == 0
    assert (tmp_path / "out_jobs.csv").read_bytes() == (
        tmp_path / "inproc" / "jobs.csv"
    ).read_bytes()
    served = json.loads((tmp_path / "served" / "serve.json").read_text())
    needs = "su" in options or "--variant" in options
    expected = str(workload.resolve()) if needs and not with_calendar else None
    assert served.get("calendar_from") == expected
    assert "warnings" not in served


def test_serve_refuses_a_batsim_running_another_workload_than_its_calendar(
    kth_workload, tmp_path: Path
) -> None:
    """Same job ids, other jobs: the calendar would date them wrongly and run.json would name
    the wrong workload. The first mismatching submission ends the run in one line, exit 2."""
    calendar = write_slice(kth_workload, tmp_path / "calendar.json", 300)
    other = copy.deepcopy(workload_head(kth_workload, 300))  # the fixture is shared: not moved
    for job in other["jobs"]:
        job["subtime"] += 7
    (tmp_path / "other.json").write_text(json.dumps(other))
    _peer, code, _out, err = serve_against_standin(
        ["--calendar", str(calendar), "--timeout", "30", "-o", str(tmp_path / "served")],
        [
            *("-p", str(ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml")),
            *("-w", str(tmp_path / "other.json"), "-e", str(tmp_path / "out"), "--timeout", "30"),
        ],
    )
    assert code == 2, err
    first = other["jobs"][0]
    assert err.strip().splitlines()[-1] == (
        f"batsched-ml: error: Batsim submitted w0!{first['id']} (subtime {first['subtime']}, "
        f"res {first['res']}, walltime {first['walltime']}) but --calendar {calendar} has it "
        f"with subtime {first['subtime'] - 7}, res {first['res']}, walltime "
        f"{first['walltime']}: Batsim runs another workload than the calendar's"
    )
    served = json.loads((tmp_path / "served" / "serve.json").read_text())
    assert served["status"] == "partial"


def test_serve_warns_loudly_without_any_calendar(tmp_path: Path, capsys) -> None:
    from batsched_ml.predict.forest import ForestParams
    from batsched_ml.protocol.events import Message, SimulationBegins
    from batsched_ml.runs.replaying import ReplayConfig, make_scheduler
    from batsched_ml.serving.served import ServedRun

    config = ReplayConfig(variant="classification", forest=ForestParams(n_estimators=2))
    run = ServedRun(make_scheduler(config))
    begins = SimulationBegins(
        timestamp=0.0,
        nb_resources=4,
        nb_compute_resources=4,
        nb_storage_resources=0,
        allow_compute_sharing=False,
        allow_storage_sharing=True,
        config={"dynamic-jobs-enabled": True, "dynamic-jobs-acknowledged": True},
        compute_resources=[],
        storage_resources=[],
        workloads={"w0": str(tmp_path / "gone.json")},
        profiles={"w0": {}},
    )
    run.handle(Message(0.0, [begins]))
    err = capsys.readouterr().err
    assert err.startswith("batsched-ml: warning: no calendar: no --calendar, none in --sched-cfg")
    assert str(tmp_path / "gone.json") in err
    assert run.status(None)["warnings"] == [err.strip().removeprefix("batsched-ml: warning: ")]


def test_serve_gives_up_on_a_silent_peer(tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    run = subprocess.run(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            "1",
            "-o",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert (
        run.stderr.strip().splitlines()[-1]
        == "batsched-ml: error: no message from Batsim within 1 s"
    )
    assert "Traceback" not in run.stderr
    assert time.monotonic() - started < 30
    run_record = json.loads((tmp_path / "s" / "run.json").read_text())
    assert run_record["status"] == "failed"
    assert "no message from Batsim within 1 s" in run_record["reason"]


def test_serve_rejects_an_unparsable_message(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            "serve",
            "--socket",
            f"tcp://127.0.0.1:{port}",
            "--timeout",
            "30",
            "-o",
            str(tmp_path / "s"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        context = zmq.Context.instance()
        req = context.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(f"tcp://127.0.0.1:{port}")
        req.send_string(
            '{"now": 0, "events": [{"timestamp": 0, "type": "JOB_SUBMITTED", "data": {}}]}'
        )
        _, err = server.communicate(timeout=30)
        req.close()
    finally:
        server.kill()
    assert server.returncode == 2
    assert (
        err.strip() == "batsched-ml: error: invalid JOB_SUBMITTED message: field 'job_id': missing"
    )


def test_bad_inputs_end_with_one_line_and_non_zero_exit(tmp_path: Path) -> None:
    cases = [
        (["replay", str(tmp_path / "missing.swf"), "-o", str(tmp_path / "o")], "cannot read"),
        (["replay", "-o", str(tmp_path / "o"), "--policy", "nope"], "invalid choice"),
        (
            ["replay", "-o", str(tmp_path / "o"), "--dispatcher-option", "window=4"],
            "the easy dispatcher has no parameters",
        ),
        (
            [
                "replay",
                "-o",
                str(tmp_path / "o"),
                "--dispatcher",
                "cph",
                "--dispatcher-option",
                "window",
            ],
            "expected KEY=VALUE",
        ),
    ]
    for args, fragment in cases:
        run = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, args
        assert fragment in run.stderr
        assert "Traceback" not in run.stderr


def test_trainer_with_a_bad_endpoint_ends_with_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [*CMD, "trainer", "--socket", "bogus://x", "--store", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert (
        run.stderr.strip().splitlines()[-1].startswith("batsched-ml: error: cannot bind bogus://x")
    )
    assert "Traceback" not in run.stderr


def _one_line_error(args: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("batsched-ml: error: ")
    return code, err


def test_configuration_mistakes_end_with_one_line_and_a_non_zero_exit(
    tmp_path: Path, capsys
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    missing = str(tmp_path / "missing.swf")
    cases = [
        (["replay", "--policy", "nope"], "argument --policy: invalid choice: 'nope'"),
        (["replay", "--variant", "nope"], "argument --variant: invalid choice: 'nope'"),
        (["replay", "--starvation-threshold", "soon"], "--starvation-threshold"),
        (["replay", "--trees", "many"], "argument --trees: invalid int value"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["replay", missing, "-o", str(tmp_path / "o")], f"{missing}: cannot read"),
        (["replay", "-o", str(a_file / "out")], "cannot write into the output directory"),
        (["serve", "-o", str(a_file / "out")], "cannot write into the output directory"),
        (["workload", "convert", missing, "-o", str(tmp_path / "c")], f"{missing}: cannot read"),
        (["workload", "convert", str(KTH), "-o", str(a_file / "c")], "cannot write into"),
        (
            ["serve", "--calendar", str(tmp_path / "none.json"), "-o", str(tmp_path / "s")],
            "none.json",
        ),
        (["batsim", "-p", str(tmp_path / "none.xml"), "-w", missing], "cannot read"),
        (["trainer", "--store", str(a_file / "m")], "a-file"),
    ]
    for args, fragment in cases:
        code, err = _one_line_error(args, capsys)
        assert code == 2, (args, err)
        assert fragment in err, (args, err)


def test_class_clairvoyant_through_the_trainer_process_matches_in_process(
    kth_workload, tmp_path: Path, capsys
) -> None:
    # regression: the trainer process was started with the forest set-up of the other variants
    # (40 trees) while this variant asks for none, so every week was refused and every job ran
    # as large; the job tables must agree
    workload = write_slice(kth_workload, tmp_path / "w.json", 1500)
    for trainer in ("process", "inprocess"):
        code = main(
            [
                "replay",
                str(workload),
                "--variant",
                "class-clairvoyant",
                "--trainer",
                trainer,
                "-q",
                "-o",
                str(tmp_path / trainer),
            ]
        )
        assert code == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "process" / "summary.json").read_text())
    assert summary["trainer_events"] == []
    assert summary["classification"]["weeks_with_model"] == 0  # the true class needs no model
    assert (tmp_path / "process" / "jobs.csv").read_bytes() == (
        tmp_path / "inprocess" / "jobs.csv"
    ).read_bytes()


def test_help_shows_the_defaults_that_exist(capsys) -> None:
    def help_of(*command: str) -> str:
        assert main([*command, "--help"]) == 0
        return " ".join(capsys.readouterr().out.split())  # argparse wraps lines

    replay = help_of("replay")
    assert "Random Forest size (default: 40)" in replay
    assert "(default: fcfs)" in replay and "(default: None)" not in replay
    assert "model store (relative to here) (default: models)" in help_of("trainer")
    batsim = help_of("batsim")
    assert "write PREFIX_jobs.csv, as Batsim 4 does (default: out), or PREFIXjobs.csv" in batsim
    assert "as Batsim 5 does (default: out/)" in batsim
    assert "(default: 4)" in batsim and "(default: None)" not in batsim
    assert "the scheduler to connect to (default: tcp://localhost:28000)" in batsim
    assert "RUN_DIR a run folder (replay, collect), a campaign's output folder" in help_of("report")


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],  # printed while the command line is parsed
        ["replay", "-q", "--policy", "spf"],  # printed at the end of a run
    ],
)
def test_a_closed_stdout_ends_a_command_quietly(
    kth_workload, tmp_path: Path, command: list[str]
) -> None:
    """``batsched-ml ... | head``: the reader closes the pipe early; the command ends with 141
    (128 + SIGPIPE, as ``cat`` or ``grep`` would report), no error line, no traceback."""
    if command[0] == "replay":
        command += [str(write_slice(kth_workload, tmp_path / "w.json", 200))]
        command += ["-o", str(tmp_path / "out")]
    process = subprocess.Popen(
        [*CMD, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader goes away before the command writes anything
    err = process.stderr.read()
    assert process.wait(timeout=120) == 141, err
    assert err == ""
    if command[0] == "replay":  # the run itself is whole
        assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "complete"


def test_collect_writes_the_predictions_as_the_replay_does(kth_workload, tmp_path: Path) -> None:
    """A served run collected gives the replay's ``predictions.csv`` byte for byte: the
    requested time, an integer, is ``3600`` in both (collect used to write ``3600.0``)."""
    workload = write_slice(kth_workload, tmp_path / "w.json", 300)
    port = free_port()
    serve = ["serve", "--socket", f"tcp://127.0.0.1:{port}", "--calendar", str(workload)]
    server = subprocess.Popen(
        [*CMD, *serve, "--timeout", "60", "-o", str(tmp_path / "served")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        platform = ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml"
        batsim = ["batsim", "-p", str(platform), "-w", str(workload), "-e", str(tmp_path / "b")]
        peer = subprocess.run(
            [*CMD, *batsim, "-s", f"tcp://127.0.0.1:{port}", "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert peer.returncode == 0, peer.stderr
        _, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode == 0, err
    command = ["collect", "--batsim-jobs", str(tmp_path / "b_jobs.csv"), "--workload"]
    command += [str(workload), "--scheduler", str(tmp_path / "served")]
    assert main([*command, "-o", str(tmp_path / "collected")]) == 0
    assert main(["replay", str(workload), "-o", str(tmp_path / "replayed"), "-q"]) == 0
    collected = (tmp_path / "collected" / "predictions.csv").read_text()
    assert collected == (tmp_path / "replayed" / "predictions.csv").read_text()
    assert collected.splitlines()[1].split(",")[1].isdigit()  # e.g. w0!1,14400,...


def test_serve_and_the_trainer_listen_on_loopback_unless_told_otherwise() -> None:
    """Neither listens on every interface by default (the compose file names ``tcp://*``
    itself: tests/test_compose.py)."""
    from batsched_ml.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["serve", "-o", "x"]).socket == "tcp://127.0.0.1:28000"
    assert parser.parse_args(["trainer"]).socket == "tcp://127.0.0.1:28100"
    assert parser.parse_args(["serve", "-o", "x", "--socket", "tcp://*:1"]).socket == "tcp://*:1"


def test_the_program_freezes_what_is_left_only_once_its_command_is_done(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """``batsched-ml`` and ``python -m batsched_ml`` end through ``program``: the command's
    code, and every object frozen for the exit only after the command returned (``main``,
    which a process that goes on calls, leaves the collector as it was)."""
    import gc
    import tomllib

    from batsched_ml import cli

    events: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: events.append("freeze"))
    real_main = cli.main
    monkeypatch.setattr(cli, "main", lambda argv=None: events.append("main") or real_main(argv))
    assert cli.program(["--version"]) == 0
    assert events == ["main", "freeze"]
    assert capsys.readouterr().out.startswith("batsched-ml ")
    assert main(["--version"]) == 0
    assert events == ["main", "freeze"]  # main alone: no freeze
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"batsched-ml": "batsched_ml.cli:program"}
    assert "program()" in (ROOT / "batsched_ml" / "__main__.py").read_text()
