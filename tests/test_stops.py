"""Every command stops cleanly on SIGINT and SIGTERM (one line, exit 130 / 143, children gone,
the run folder marked ``interrupted``), and bad input or a bug each end as they should: one line
for what the user can fix, a traceback and exit 70 for a bug."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batsched_ml.cli import main
from batsched_ml.experiments.campaign import load_campaign
from tests.conftest import KTH

CMD = [sys.executable, "-m", "batsched_ml"]


def _default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default. A suite started in the background
    by a non-interactive shell (``cmd &``, nohup) inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler; a terminal's Ctrl-C is what these tests stand for."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(command: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` with SIGINT at its default in the child (see above)."""
    return subprocess.Popen(command, preexec_fn=_default_sigint, **kwargs)


EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: How long a command may take to stop and a child process to be gone. Generous on purpose: what
#: these tests tell apart is stopping (well under a second on a quiet machine) from not
#: stopping (a CPH replay ran on to its end, 145 s; a campaign's nannies waited 4 s per
#: worker; an orphaned trainer lived an hour), and a loaded machine must not fail them. How
#: fast commands stop is measured by benchmarks/bench_stops.py.
STOP_SECONDS = 30.0


def wait_until(condition, timeout: float = 120.0) -> None:
    """Poll ``condition``; the generous default lets a loaded machine start Dask or a trainer."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def running(folder: Path) -> bool:
    try:
        return json.loads((folder / "run.json").read_text())["status"] == "running"
    except (OSError, ValueError, KeyError):
        return False


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (children that must be gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


def stop(process: subprocess.Popen, sig: int) -> tuple[str, float]:
    process.send_signal(sig)
    started = time.monotonic()
    _, err = process.communicate(timeout=90)
    return err, time.monotonic() - started


def assert_interrupted(process: subprocess.Popen, sig: int, err: str, seconds: float) -> None:
    assert process.returncode == EXIT[sig], err
    # our one line, last; a library may warn before it (Dask: "Port 8787 is already in use"
    # when another cluster runs), never a traceback
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1] == "batsched-ml: interrupted", err
    said = [line for line in lines if "batsched-ml:" in line and "cleaning rule" not in line]
    assert "Traceback" not in err and len(said) == 1, err
    assert seconds < STOP_SECONDS, f"stopped after {seconds:.1f} s"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_classified_replay_with_its_trainer_process_stops(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "run"
    process = start(
        [
            *CMD,
            *("replay", "-q", "-o", str(out), "--variant", "classification-idempotent"),
            *("--trainer", "process", "--trees", "8"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: processes_mentioning(f"--store {out}/models"))  # the trainer is up
    wait_until(lambda: running(out))
    wait_until(lambda: (out / "trainer.sqlite-wal").exists())  # its history open
    err, seconds = stop(process, sig)
    assert_interrupted(process, sig, err, seconds)
    record = json.loads((out / "run.json").read_text())
    assert (record["status"], record["reason"]) == ("interrupted", "interrupted")
    wait_until(lambda: not processes_mentioning(f"--store {out}/models"), timeout=STOP_SECONDS)
    # the trainer was killed (it may have been training): the run closed its history for it
    assert sorted(p.name for p in out.glob("trainer.sqlite*")) == ["trainer.sqlite"]


def test_a_cph_replay_stops_on_ctrl_c(tmp_path: Path) -> None:
    """OR-Tools' own SIGINT handler used to swallow Ctrl-C for the whole replay."""
    out = tmp_path / "run"
    process = start(
        [*CMD, "replay", "-q", "-o", str(out), "--dispatcher", "cph"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: running(out))
    time.sleep(2.0)  # into the replay, where the planner solves at each decision
    err, seconds = stop(process, signal.SIGINT)
    assert_interrupted(process, signal.SIGINT, err, seconds)
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_and_writes_a_partial_status(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "served"
    process = start(
        [*CMD, "serve", "--socket", "tcp://127.0.0.1:0", "-o", str(out), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("listening on tcp://127.0.0.1:")
    err, seconds = stop(process, sig)
    assert_interrupted(process, sig, err, seconds)
    served = json.loads((out / "serve.json").read_text())
    assert (served["status"], served["reason"]) == ("partial", "interrupted")
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"


def test_a_classified_serve_interrupted_before_batsim_came_writes_its_empty_tables(
    tmp_path: Path,
) -> None:
    """No week began: the classification tables are written empty (they used to crash the
    command, exit 70, leaving half of them)."""
    out = tmp_path / "served"
    process = start(
        [
            *CMD,
            *("serve", "--socket", "tcp://127.0.0.1:0", "-o", str(out), "--timeout", "60"),
            *("--variant", "classification-idempotent", "--trainer", "inprocess"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("listening on tcp://127.0.0.1:")
    err, seconds = stop(process, signal.SIGINT)
    assert_interrupted(process, signal.SIGINT, err, seconds)
    served = json.loads((out / "serve.json").read_text())
    assert (served["status"], served["reason"]) == ("partial", "interrupted")
    assert served["classification"]["weeks_with_model"] == 0
    for name in ("classification.csv", "weekly_quality.csv", "feature_importance.csv"):
        assert (out / name).is_file(), name


def test_a_campaign_stops_its_workers_at_once_and_marks_its_runs(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f"""
[campaign]
output = "runs"
trace_dir = "{KTH.parent}"
traces = ["{KTH.name.removesuffix(".swf.gz")}"]
policies = ["fcfs", "spf"]
variants = ["classification-idempotent"]

[dask]
workers = 2
"""
    )
    runs = tmp_path / "runs" / KTH.name.removesuffix(".swf.gz")
    folders = [runs / "fcfs-classification-idempotent", runs / "spf-classification-idempotent"]
    process = start(
        [*CMD, "campaign", str(config), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: all(running(folder) for folder in folders))
    err, seconds = stop(process, signal.SIGINT)
    # no Dask warnings, no CancelledError, no leaked-semaphore warnings: one line
    assert_interrupted(process, signal.SIGINT, err, seconds)
    for folder in folders:
        assert json.loads((folder / "run.json").read_text())["status"] == "interrupted"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [runs.name]  # no scratch
    wait_until(lambda: not processes_mentioning("distributed"), timeout=STOP_SECONDS)


def test_paper_results_stops_its_workers_at_once_on_sigterm(tmp_path: Path) -> None:
    """paper-results runs its grid with the campaign's runner: SIGTERM stops it within a second
    or two (its own process pool used to wait for the replays under way to finish)."""
    runs = tmp_path / "runs"
    command = [*CMD, "paper-results", "--trace-dir", str(KTH.parent), "--runs", str(runs)]
    command += ["--traces", KTH.name.removesuffix(".swf.gz"), "--policies", "fcfs", "spf"]
    command += ["--variants", "classification-idempotent", "--workers", "2"]
    command += ["-o", str(tmp_path / "page.md")]
    process = start(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    trace = runs / KTH.name.removesuffix(".swf.gz")
    folders = [trace / "fcfs-classification-idempotent", trace / "spf-classification-idempotent"]
    wait_until(lambda: all(running(folder) for folder in folders))
    err, seconds = stop(process, signal.SIGTERM)
    assert_interrupted(process, signal.SIGTERM, err, seconds)
    for folder in folders:
        assert json.loads((folder / "run.json").read_text())["status"] == "interrupted"
    assert not (tmp_path / "page.md").exists()
    wait_until(lambda: not processes_mentioning("distributed"), timeout=STOP_SECONDS)


# --- bad input and bugs ------------------------------------------------------------------


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_a_trace_without_jobs_ends_with_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.swf"
    empty.write_text("; Version: 2.2\n; MaxProcs: 100\n")
    expected = (
        f"batsched-ml: error: {empty}: no jobs (0 read, 0 dropped by the cleaning rules, 0 "
        "malformed lines skipped)"
    )
    assert main(["replay", str(empty), "-o", str(tmp_path / "r")]) == 2
    assert one_line(capsys) == expected
    assert not (tmp_path / "r").exists()
    assert main(["workload", "convert", str(empty), "-o", str(tmp_path / "c")]) == 2
    assert one_line(capsys) == expected
    assert not (tmp_path / "c").exists()  # no 1-host platform for a workload of nothing
    empty_json = tmp_path / "w.json"
    empty_json.write_text('{"nb_res": 4, "jobs": [], "profiles": {}}')
    assert main(["replay", str(empty_json), "-o", str(tmp_path / "r")]) == 2
    assert one_line(capsys) == f"batsched-ml: error: {empty_json}: no jobs"


def test_lenient_says_how_many_lines_it_skipped(tmp_path: Path, capsys) -> None:
    with gzip.open(KTH, "rt") as source:
        lines = source.readlines()
    header = [line for line in lines if line.startswith(";")]
    body = [line for line in lines if not line.startswith(";")][:300]
    trace = tmp_path / "t.swf"
    trace.write_text("".join([*header, *body[:100], "garbage\n", *body[100:], "1 2 3\n"]))
    assert main(["replay", str(trace), "-o", str(tmp_path / "strict"), "-q"]) == 2
    assert one_line(capsys).startswith(f"batsched-ml: error: {trace}:")
    assert main(["replay", str(trace), "-o", str(tmp_path / "r"), "-q", "--lenient"]) == 0
    assert "skipped 2 malformed line(s) of t.swf (--lenient)" in capsys.readouterr().out
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["skipped_lines"] == 2


def test_a_bug_shows_its_traceback_and_exit_70(tmp_path: Path, capsys, monkeypatch) -> None:
    from batsched_ml.cli import replay

    def broken(args) -> int:
        return {}["missing key"]  # an internal error, not the user's

    monkeypatch.setattr(replay, "run", broken)
    assert main(["replay", "-o", str(tmp_path / "r")]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'missing key'" in err
    assert err.strip().splitlines()[-1] == (
        "batsched-ml: internal error: KeyError: 'missing key' -- a bug in batsched-ml; please "
        "report it with the traceback above"
    )


def test_a_setting_out_of_range_is_the_users_error(tmp_path: Path, capsys) -> None:
    args = ["replay", "-o", str(tmp_path / "r"), "--predictor", "su"]
    assert main([*args, "--predictor-option", "alpha=-1"]) == 2
    assert one_line(capsys) == (
        "batsched-ml: error: predictor su: SU alpha must be positive, not -1.0"
    )


def test_each_dispatcher_says_how_it_orders_the_queue(tmp_path: Path, capsys) -> None:
    expected = {
        "prb": "by urgency: the wait over the expected wait of its queue",
        "cph": "a CP-SAT plan of the most urgent jobs",
        "sjf": "shortest predicted runtime first",
        "ljf": "longest predicted runtime first",
    }
    for dispatcher, order in expected.items():
        assert (
            main(
                ["replay", "-o", str(tmp_path / "r"), "--policy", "spf", "--dispatcher", dispatcher]
            )
            == 2
        )
        assert one_line(capsys) == (
            f"batsched-ml: error: the {dispatcher} dispatcher orders the queue itself ({order}); "
            "--policy spf goes with the easy dispatcher"
        )


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    with gzip.open(KTH, "rt") as source:
        lines = source.readlines()
    trace = tmp_path / "t.swf"
    trace.write_text(
        "".join(
            [line for line in lines if line.startswith(";")]
            + [line for line in lines if not line.startswith(";")][:200]
        )
    )
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    assert main(["replay", str(trace), "-o", str(a), "-q"]) == 0
    assert main(["replay", str(trace), "-o", str(b), "-q"]) == 0
    return a, b


def test_report_names_two_folders_holding_the_same_run(tmp_path: Path, capsys) -> None:
    a, b = two_runs(tmp_path)
    capsys.readouterr()
    assert main(["report", str(tmp_path / "runs"), "-o", str(tmp_path / "rep")]) == 2
    assert one_line(capsys) == (
        f"batsched-ml: error: {a} and {b} are the same run (fcfs (base) on t, copy 0 (the trace "
        "itself), same settings): give the report one of them"
    )
    assert not (tmp_path / "rep").exists()  # refused before its folder was made
    assert main(["report", str(a), "-o", str(tmp_path / "rep")]) == 0
    # another predictor, same policy and variant: a method of its own, with its own label
    c = tmp_path / "runs" / "c"
    assert (
        main(["replay", str(tmp_path / "t.swf"), "-o", str(c), "-q", "--predictor", "actual"]) == 0
    )
    capsys.readouterr()
    assert main(["report", str(a), str(c), "-o", str(tmp_path / "rep2")]) == 0
    means = (tmp_path / "rep2" / "means.csv").read_text()
    assert "t,fcfs (base),fcfs,base,1," in means
    assert "t,fcfs (base; predictor actual),fcfs,base,1," in means


def test_report_refuses_a_run_that_did_not_complete(tmp_path: Path, capsys) -> None:
    a, _ = two_runs(tmp_path)
    record = json.loads((a / "run.json").read_text())
    (a / "run.json").write_text(
        json.dumps({**record, "status": "interrupted", "reason": "interrupted"})
    )
    capsys.readouterr()
    assert main(["report", str(a), "-o", str(tmp_path / "rep")]) == 2
    assert one_line(capsys) == (
        f"batsched-ml: error: {a}: the run is interrupted: interrupted (run.json), not complete"
    )


def test_related_work_never_blanks_a_page_holding_more_runs(tmp_path: Path, capsys) -> None:
    page = tmp_path / "page.md"
    shipped = Path(__file__).resolve().parents[1] / "docs" / "related-work.md"
    page.write_text(shipped.read_text())
    # the shipped campaign, its runs not made here (a fresh clone)
    shipped_config = shipped.parents[1] / "campaigns" / "related-work.toml"
    config = tmp_path / "related-work.toml"
    config.write_text(
        re.sub(r"(?m)^output = .*$", 'output = "none-here"', shipped_config.read_text())
    )
    assert main(["related-work", str(config), "--no-run", "-o", str(page)]) == 2
    line = one_line(capsys)
    runs = len(load_campaign(shipped_config).runs)
    assert line.startswith(f"batsched-ml: error: {page} holds {runs} runs and these runs make 0")
    assert page.read_text() == shipped.read_text()
    assert main(["related-work", str(config), "--no-run", "-o", str(page), "--force"]) == 0
    assert f"<!-- runs on this page: 0 of {runs} -->" in page.read_text()


@pytest.mark.parametrize(
    "command", [["report", "x"], ["related-work", "--no-run"], ["paper-results"]]
)
def test_pages_and_reports_are_written_where_told_only(command: list[str], capsys) -> None:
    assert main(command) == 2
    assert "required: -o/--output" in one_line(capsys)


def test_a_wait_for_a_peer_lets_a_signal_through_within_half_a_second() -> None:
    """A SIGINT or SIGTERM that lands just before a wait for the peer begins is not acted on
    until the wait returns (Python runs its handler between calls, and nothing interrupts the
    wait): ``serve`` once took its whole 60 s peer timeout to stop on a loaded machine. The
    waits of ``serve``, the Batsim stand-in and the trainer are cut into half-second polls."""
    from batsched_ml.transport.sockets import wait_readable

    class Silent:
        def __init__(self) -> None:
            self.waits: list[int] = []

        def poll(self, milliseconds: int, flags: int = 0) -> int:
            self.waits.append(milliseconds)
            time.sleep(milliseconds / 1000)
            return 0

    socket = Silent()
    started = time.monotonic()
    assert wait_readable(socket, 1.2) is False
    assert time.monotonic() - started >= 1.2
    assert socket.waits and max(socket.waits) <= 500
