"""The docker compose set-up: checked statically, run as plain processes (what CI can do), and
run for real with a Docker engine (``pytest -m docker``; skipped without an engine).

The process-level run reads the very commands, arguments and environment of the compose file,
maps the container paths (/data, /traces, /out) to folders and the service host names to
loopback, and runs the services in the compose order: prepare, then trainer and scheduler, then
the Batsim stand-in, then experiment."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from batsched_ml.cli import build_parser
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload
from tests.conftest import KTH, ROOT

COMPOSE = ROOT / "docker-compose.yml"
STANDIN = ROOT / "docker-compose.standin.yml"
BATSIM5 = ROOT / "docker-compose.batsim5.yml"
STANDIN5 = ROOT / "docker-compose.standin5.yml"
SERVICES = ["prepare", "trainer", "scheduler", "batsim", "experiment"]
VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def expand(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${VAR:-default}`` substitution, from ``env`` or the default."""
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [expand(v, env) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, env) for k, v in value.items()}
    return value


def services(
    env: dict[str, str] | None = None, standin: bool = False, batsim5: bool = False
) -> dict[str, Any]:
    """The services of the compose file, with the overrides compose applies for ``-f``: the
    stand-in's (``standin``), Batsim 5's (``batsim5``), both (Batsim 5's stand-in)."""
    found = load(COMPOSE)["services"]
    overrides = [BATSIM5] if batsim5 else []
    if standin:
        overrides.append(STANDIN5 if batsim5 else STANDIN)
    for path in overrides:
        for name, override in load(path)["services"].items():
            found[name] = {**found[name], **override}
    return expand(found, env or {})


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def port(endpoint: str) -> tuple[str, int]:
    host, number = endpoint.removeprefix("tcp://").rsplit(":", 1)
    return host, int(number)


# --- static checks ---------------------------------------------------------------------------


def test_the_compose_file_has_the_services_and_our_image_is_built_from_this_repository() -> None:
    found = services()
    assert list(found) == ["reset", "clear-out", *SERVICES]
    ours = ["reset", "clear-out", *(name for name in SERVICES if name != "batsim")]
    for name in ours:
        assert found[name]["image"].startswith("batsched-ml:")
        build = found[name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()
    assert found["batsim"]["image"] == "oarteam/batsim:latest"  # the only tag Batsim publishes
    assert services({"BATSIM_IMAGE": "me/batsim:4.2.1"})["batsim"]["image"] == "me/batsim:4.2.1"
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    # the sources the build copies from the repository exist (a COPY --from=STAGE copies
    # from an earlier stage of the build, not from the repository)
    copies = [line.split()[1:] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert any(words[0] == "--from=builder" for words in copies)
    for words in copies:
        if not words[0].startswith("--from="):
            for source in words[:-1]:
                assert (ROOT / source).exists(), source
    assert "USER batsched" in dockerfile and 'ENTRYPOINT ["batsched-ml"]' in dockerfile
    standin = services(standin=True)["batsim"]
    assert standin["image"] == found["prepare"]["image"]
    assert standin["entrypoint"] == ["batsched-ml", "batsim"]
    assert standin["command"] == found["batsim"]["command"]  # the same arguments
    # every `up` starts from an empty /data/out and /data/status, and an OUT_DIR without the
    # previous run's files (written by the experiment's user), before anything else runs
    assert found["prepare"]["depends_on"] == {
        "reset": {"condition": "service_completed_successfully"},
        "clear-out": {"condition": "service_completed_successfully"},
    }
    assert found["reset"]["volumes"] == ["data:/data"]
    assert found["clear-out"]["command"] == ["clear", "/out"]
    assert found["clear-out"]["user"] == found["experiment"]["user"] == "1000:1000"
    assert found["clear-out"]["volumes"] == ["./out:/out"]
    assert "./out:/out" in found["experiment"]["volumes"]


def test_every_command_parses_and_the_batsim_arguments_suit_the_stand_in() -> None:
    found = services()
    parser = build_parser()
    for name in SERVICES:
        command = found[name]["command"]
        args = ["batsim", *command] if name == "batsim" else command
        parsed = parser.parse_args(args)  # a refused argument raises
        assert parsed.handler is not None
    batsim = found["batsim"]["command"]
    assert "--enable-dynamic-jobs" in batsim and "--acknowledge-dynamic-jobs" in batsim


def test_ports_host_names_and_files_agree_between_services() -> None:
    found = services()
    cmd = {name: found[name]["command"] for name in SERVICES}
    # Batsim connects where the scheduler binds; the scheduler where the trainer binds
    assert port(option(cmd["batsim"], "-s")) == ("scheduler", 28000)
    assert port(option(cmd["scheduler"], "--socket")) == ("*", 28000)
    assert port(option(cmd["scheduler"], "--trainer")) == ("trainer", 28100)
    assert port(option(cmd["trainer"], "--socket")) == ("*", 28100)
    for name, number in (("scheduler", 28000), ("trainer", 28100)):
        assert f"('127.0.0.1', {number})" in " ".join(found[name]["healthcheck"]["test"])
    # prepare writes what the others read
    out = option(cmd["prepare"], "-o")
    name = option(cmd["prepare"], "--name")
    workload, platform = f"{out}/{name}.json", f"{out}/{name}_platform.xml"
    assert option(cmd["batsim"], "-w") == workload and option(cmd["batsim"], "-p") == platform
    assert option(cmd["scheduler"], "--calendar") == workload
    assert option(cmd["experiment"], "--workload") == workload
    assert option(cmd["experiment"], "--batsim-jobs") == option(cmd["batsim"], "-e") + "_jobs.csv"
    assert option(cmd["experiment"], "--scheduler") == option(cmd["scheduler"], "-o")
    status_dir = option(cmd["experiment"], "--status-dir")
    standin = services(standin=True)
    for name in ("prepare", "trainer", "scheduler", "batsim"):
        status = standin[name]["environment"]["BATSCHED_ML_STATUS_FILE"]
        assert status == f"{status_dir}/{name}.json"
    # the default trace exists where the bind mount takes it from
    trace = option(cmd["prepare"], "convert")
    mount = next(v for v in found["prepare"]["volumes"] if v.endswith(":/traces:ro"))
    assert (ROOT / mount.split(":")[0] / trace.removeprefix("/traces/")).is_file()
    assert "/out" in [v.split(":")[1] for v in found["experiment"]["volumes"]]


def test_every_setting_of_the_compose_file_is_documented() -> None:
    readme = (ROOT / "docs" / "docker.md").read_text()
    names = set(VARIABLE.findall(COMPOSE.read_text()))
    assert {n for n, _ in names} >= {"TRACE", "TRACE_DIR", "POLICY", "VARIANT", "BATSIM_IMAGE"}
    for name, _default in names:
        assert f"`{name}`" in readme, name


# --- the same commands as plain processes -------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def localise(value: Any, places: dict[str, str], ports: dict[int, int]) -> Any:
    if isinstance(value, list):
        return [localise(v, places, ports) for v in value]
    if isinstance(value, dict):
        return {k: localise(v, places, ports) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    for inside, outside in places.items():
        if value == inside or value.startswith(inside + "/"):
            return outside + value[len(inside) :]
    match = re.fullmatch(r"tcp://([^:]+):(\d+)", value)
    if match:
        return f"tcp://127.0.0.1:{ports[int(match.group(2))]}"
    return value


def slice_of_kth(folder: Path, jobs: int, name: str = "kth-slice.swf") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(KTH, "rt") as source:
        lines = [line for line in source if line.startswith(";")]
    with gzip.open(KTH, "rt") as source:
        body = [line for line in source if not line.startswith(";")][:jobs]
    (folder / name).write_text("".join(lines + body))
    return name


PLAIN_RUNS = [
    (
        {"POLICY": "saf"},
        2500,
        ReplayConfig(policy="saf", variant="classification-idempotent"),
        "saf (classification-idempotent)",
    ),
    (  # a base run does not use the trainer; the scheduler still stops it at the end
        {"VARIANT": "base", "PREDICTOR": "easy++", "CORRECTION": "power", "DISPATCHER": "prb"},
        1500,
        ReplayConfig(variant="base", predictor="easy++", correction="power", dispatcher="prb"),
        "fcfs (base; predictor easy++, correction power, dispatcher prb)",
    ),
]


class Processes:
    """The compose services as plain processes: the container folders under ``tmp_path``
    (/data, /out) and ``TRACE_DIR`` (/traces), the ports on loopback."""

    def __init__(self, tmp_path: Path, env: dict[str, str], batsim5: bool = False) -> None:
        self.found = services(env, standin=True, batsim5=batsim5)
        self.places = {
            "/data": str(tmp_path / "data"),
            "/traces": env.get("TRACE_DIR", str(tmp_path)),
            "/out": str(tmp_path / "o"),
        }
        self.ports = {28000: free_port(), 28100: free_port()}

    def argv(self, name: str) -> list[str]:
        service = self.found[name]
        entry = service.get("entrypoint", ["batsched-ml"])
        assert entry[0] == "batsched-ml"
        command = localise(service["command"], self.places, self.ports)
        return [sys.executable, "-m", "batsched_ml", *entry[1:], *command]

    def environment(self, name: str) -> dict[str, str]:
        extra = localise(self.found[name].get("environment", {}), self.places, self.ports)
        return {**os.environ, **extra}

    def run(self, name: str, code: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run(
            self.argv(name), env=self.environment(name), capture_output=True, text=True, timeout=300
        )
        assert done.returncode == code, (name, done.stderr)
        return done

    def start(self, name: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.argv(name),
            env=self.environment(name),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def reset(self) -> None:
        """reset (a shell line on the volume, run here on its local stand-in), then
        clear-out: what every `up` runs first."""
        shell, flag, line = self.found["reset"]["entrypoint"]
        assert (shell, flag) == ("sh", "-c") and self.found["reset"]["command"] == []
        subprocess.run(
            [shell, flag, line.replace("/data/", self.places["/data"] + "/")], check=True
        )
        self.run("clear-out")


def compose_as_processes(
    tmp_path: Path,
    env: dict[str, str],
    *,
    before_experiment: Callable[[], None] | None = None,
    experiment_code: int = 0,
    batsim5: bool = False,
) -> subprocess.CompletedProcess:
    """Run the compose services as plain processes, in compose's order (reset, clear-out,
    prepare, trainer and scheduler together, the Batsim stand-in, experiment); return the
    experiment's process (its exit code checked against ``experiment_code``)."""
    services = Processes(tmp_path, env, batsim5)
    services.reset()
    background: list[subprocess.Popen] = []
    try:
        services.run("prepare")
        for name in ("trainer", "scheduler"):  # started together, as compose does
            background.append(services.start(name))
        services.run("batsim")
        if before_experiment is not None:
            before_experiment()
        experiment = services.run("experiment", experiment_code)
        for process in background:  # the scheduler ends with the simulation, the trainer on stop
            assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    finally:
        for process in background:
            process.kill()
    return experiment


@pytest.mark.parametrize(("settings", "jobs", "config", "title"), PLAIN_RUNS)
def test_the_compose_services_run_as_plain_processes_on_loopback(
    tmp_path: Path, settings: dict[str, str], jobs: int, config: ReplayConfig, title: str
) -> None:
    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, jobs), "TRACE_DIR": str(traces), **settings}
    shown = compose_as_processes(tmp_path, env).stdout
    out = tmp_path / "o"
    assert re.search(rf"^policy +{re.escape(title)}$", shown, re.M), shown
    statuses = sorted(p.name for p in (tmp_path / "data" / "status").iterdir())
    assert statuses == ["batsim.json", "prepare.json", "run", "scheduler.json", "trainer.json"]
    token = (tmp_path / "data" / "status" / "run").read_text().strip()
    for name in statuses[:2] + statuses[3:]:  # each service recorded its exit in this run
        record = json.loads((tmp_path / "data" / "status" / name).read_text())
        assert (record["exit_code"], record["run"]) == (0, token), name
    # the same experiment in one process gives the same job table and figures
    workload = load_workload(tmp_path / "data" / "input" / "workload.json")
    expected = write_replay(run_replay(workload, config), tmp_path / "replay")
    assert (out / "jobs.csv").read_bytes() == (tmp_path / "replay" / "jobs.csv").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    for key in ("jobs", "finished", "mean_bsld", "mean_wait", "kills", "monthly", "prediction"):
        assert summary.get(key) == expected.get(key), key
    assert summary["config"] == expected["config"] == config.as_dict()
    # no measured duration in summary.json (they are in timing.json): equal, classification too
    assert summary.get("classification") == expected.get("classification")
    assert summary["jobs"] == len(workload["jobs"]) > jobs - 100
    assert summary.get("trainer_events") == ([] if config.classified else None)
    if not config.classified:  # the predictor's quality, from Batsim's runtimes
        assert summary["prediction"]["predictor"] == config.predictor
        assert (out / "predictions.csv").read_bytes() == (
            tmp_path / "replay" / "predictions.csv"
        ).read_bytes()
    assert (out / "report.md").read_text().startswith(f"# kth-slice: {title}")


def test_the_batsim5_compose_files_run_as_plain_processes_with_the_batsim5_stand_in(
    tmp_path: Path,
) -> None:
    """docker-compose.batsim5.yml (and the Batsim 5 stand-in's file): the workload converted for
    Batsim 5, Batsim 5's command line, the same scheduler and experiment; the collected job
    table is the one ``replay --batsim 5`` writes."""
    found = services(standin=False, batsim5=True)
    assert found["batsim"]["image"] == "oarteam/batsim:latest"  # BATSIM_IMAGE names Batsim 5's
    assert found["batsim"]["command"][-3:] == ["-s", "tcp://scheduler:28000", ""]
    assert found["prepare"]["command"][-2:] == ["--batsim", "5"]
    traces = tmp_path / "traces"
    trace = slice_of_kth(traces, 2000)
    env = {"TRACE": trace, "TRACE_DIR": str(traces), "POLICY": "spf"}
    shown = compose_as_processes(tmp_path, env, batsim5=True).stdout
    assert re.search(r"^policy +spf \(classification-idempotent\)$", shown, re.M), shown
    replayed = subprocess.run(
        [
            sys.executable,
            "-m",
            "batsched_ml",
            "replay",
            str(traces / trace),
            "-q",
            "--batsim",
            "5",
            "--policy",
            "spf",
            "--variant",
            "classification-idempotent",
            "--trainer",
            "inprocess",
            "-o",
            str(tmp_path / "replay"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replayed.returncode == 0, replayed.stderr
    out = tmp_path / "o"
    assert (out / "jobs.csv").read_bytes() == (tmp_path / "replay" / "jobs.csv").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scheduler"]["batsim_protocol"] == "batsim5-json"


def test_experiment_fails_at_once_with_the_reason_when_a_service_failed(tmp_path: Path) -> None:
    found = services(standin=True)
    places = {"/data": str(tmp_path / "data"), "/traces": str(tmp_path), "/out": str(tmp_path)}
    status = tmp_path / "data" / "status"
    status.mkdir(parents=True)
    failed = subprocess.run(
        [sys.executable, "-m", "batsched_ml", "serve", "--policy", "nope"],
        env={**os.environ, "BATSCHED_ML_STATUS_FILE": str(status / "scheduler.json")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 2
    started = time.monotonic()
    command = localise(found["experiment"]["command"], places, {})
    done = subprocess.run(
        [sys.executable, "-m", "batsched_ml", *command], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and time.monotonic() - started < 30
    assert done.stderr.strip() == (
        "batsched-ml: error: scheduler failed (exit 2): batsched-ml: error: argument --policy: "
        "invalid choice: 'nope' (choose from 'fcfs', 'saf', 'spf', 'wfp') "
        "(see: batsched-ml serve --help)"
    )


def test_a_second_experiment_reports_its_own_run_never_the_previous_one(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, 800), "TRACE_DIR": str(traces), "VARIANT": "base"}
    first = compose_as_processes(tmp_path, env).stdout
    assert re.search(r"^policy +fcfs \(base\)$", first, re.M), first
    # the second `up`, other settings, same volume: reset empties it, the report is the new run's
    second = compose_as_processes(tmp_path, {**env, "POLICY": "spf"}).stdout
    assert re.search(r"^policy +spf \(base\)$", second, re.M), second
    out = tmp_path / "o"
    workload = load_workload(tmp_path / "data" / "input" / "workload.json")
    write_replay(run_replay(workload, ReplayConfig(policy="spf")), tmp_path / "replay")
    assert (out / "jobs.csv").read_bytes() == (tmp_path / "replay" / "jobs.csv").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    run = json.loads((out / "run.json").read_text())
    served = json.loads((tmp_path / "data" / "out" / "scheduler" / "run.json").read_text())
    assert summary["run_id"] == run["run_id"] == served["run_id"]
    assert summary["config"]["policy"] == "spf" and run["status"] == "complete"


def test_experiment_refuses_a_scheduler_folder_holding_another_run(tmp_path: Path) -> None:
    """Without the reset (a volume kept from an earlier `up`), the experiment of an SPF run
    finds the FCFS run's files: it names both runs and reports nothing."""
    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, 300), "TRACE_DIR": str(traces), "VARIANT": "base"}
    compose_as_processes(tmp_path, env)
    found = services({**env, "POLICY": "spf"}, standin=True)
    places = {"/data": str(tmp_path / "data"), "/traces": str(traces), "/out": str(tmp_path / "o2")}
    command = localise(found["experiment"]["command"], places, {})
    done = subprocess.run(
        [sys.executable, "-m", "batsched_ml", *command], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert line.startswith(
        f"batsched-ml: error: {tmp_path / 'data' / 'out' / 'scheduler'} holds run "
    )
    assert "(fcfs base on workload.json), not this experiment's run" in line
    assert "serve spf (base) on workload.json" in line
    assert not (tmp_path / "o2").exists()


@pytest.mark.long  # waits out the grace, 20 s: the rule itself is the test below
def test_experiment_fails_within_a_minute_when_batsim_s_table_does_not_appear(
    tmp_path: Path,
) -> None:
    """A Batsim container left running by an earlier `up` writes its job table into the file
    the new `up`'s reset removed: the scheduler's run completes and the table never appears
    where the experiment looks. The experiment (its compose command: --wait 86400) stops
    within a minute of the scheduler's end, naming the file, and writes nothing."""
    from batsched_ml.serving.collect import BATSIM_GRACE

    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, 300), "TRACE_DIR": str(traces), "VARIANT": "base"}
    table = tmp_path / "data" / "out" / "batsim_jobs.csv"
    ended: list[float] = []

    def batsim_writes_elsewhere() -> None:
        table.rename(tmp_path / "removed_jobs.csv")
        ended.append(time.monotonic())

    done = compose_as_processes(
        tmp_path, env, before_experiment=batsim_writes_elsewhere, experiment_code=2
    )
    seconds = time.monotonic() - ended[0]
    assert BATSIM_GRACE <= seconds < 60, seconds
    assert done.stderr.strip() == (
        f"batsched-ml: error: Batsim's job table {table} did not appear within "
        f"{BATSIM_GRACE:g} s of the scheduler's run ending, although the scheduler's run is "
        "complete: Batsim wrote it elsewhere or not at all (under docker compose, a Batsim "
        "container left running by an earlier `up` is reused by a plain `up`: it simulates "
        "that `up`'s workload and writes into files removed since; `up --force-recreate "
        "--always-recreate-deps`, as documented, starts a fresh one)"
    )
    assert list((tmp_path / "o").iterdir()) == []


@pytest.mark.parametrize("appears_after", [None, 0, 7, 19])
def test_batsim_s_table_is_awaited_for_the_grace_and_no_longer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appears_after: int | None
) -> None:
    """Collect waits for Batsim's job table, read again each second, for the grace after the
    scheduler's run ended (on a clock of its own here: no test waits 20 s): a table that comes
    within it is taken; none by then, and it stops with the one line naming the file."""
    from batsched_ml.serving import collect

    clock = [1000.0]
    monkeypatch.setattr(collect.time, "monotonic", lambda: clock[0])
    table = tmp_path / "batsim_jobs.csv"
    workload = load_workload(tmp_path / slice_of_kth(tmp_path, 20))
    expected = {str(job["id"]) for job in workload["jobs"]}  # as collect makes it
    written = write_replay(run_replay(workload, ReplayConfig()), tmp_path / "r")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds
        if appears_after is not None and len(slept) == appears_after:
            shutil.copy(tmp_path / "r" / "jobs.csv", table)

    if appears_after == 0:
        shutil.copy(tmp_path / "r" / "jobs.csv", table)
    grace = collect.BATSIM_GRACE
    if appears_after is None:
        with pytest.raises(collect.CollectError) as info:
            collect._whole_table(table, expected, grace, sleep, None)
        assert str(info.value) == (
            f"Batsim's job table {table} did not appear within {grace:g} s of the scheduler's "
            f"run ending, although the scheduler's run is complete: Batsim wrote it elsewhere "
            f"or not at all ({collect.STALE_BATSIM})"
        )
        assert slept == [1.0] * int(grace)  # read again each second, for the grace
    else:
        found = collect._whole_table(table, expected, grace, sleep, None)
        assert len(found) == written["jobs"] == len(expected)
        assert slept == [1.0] * appears_after


def test_a_failed_up_leaves_the_output_folder_empty_never_the_previous_results(
    tmp_path: Path,
) -> None:
    """A whole run, then an `up` with POLICY=nope: clear-out, the first step of every `up`,
    removed the first run's files, so OUT_DIR holds nothing; the scheduler and the experiment
    each refuse the setting with one line."""
    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, 300), "TRACE_DIR": str(traces), "VARIANT": "base"}
    compose_as_processes(tmp_path, env)
    out = tmp_path / "o"
    assert {"run.json", "jobs.csv", "summary.json", "report.md"} <= {p.name for p in out.iterdir()}
    failed = Processes(tmp_path, {**env, "POLICY": "nope"})
    failed.reset()
    assert list(out.iterdir()) == []
    failed.run("prepare")
    for name in ("scheduler", "experiment"):
        done = failed.run(name, 2)
        assert done.stderr.startswith(
            "batsched-ml: error: argument --policy: invalid choice: 'nope' "
        ), done.stderr
    assert list(out.iterdir()) == []


def test_a_service_of_an_earlier_up_records_nothing_in_the_new_run(tmp_path: Path) -> None:
    """Compose recreates a container still running from an earlier `up` only when its turn
    comes, after reset: the old process, stopped then, found another run token and records
    nothing (before: the stand-in's `batsim failed (exit 143): interrupted` landed in the new
    run's status folder and the experiment of a whole run stopped with it, seen with compose
    v1); a record of another token is not this run's failure."""
    from batsched_ml.serving.status import failed_service

    services = Processes(tmp_path, {})
    services.reset()
    status = tmp_path / "data" / "status"
    first = (status / "run").read_text()
    trainer = services.start("trainer")  # an earlier `up`'s trainer, still running
    try:
        assert listening(trainer, services.ports[28100])  # it has started
        services.reset()  # the next `up`
        assert (status / "run").read_text() != first
        trainer.terminate()  # compose recreates the trainer
        assert trainer.wait(timeout=300) == 143
    finally:
        trainer.kill()
    assert sorted(p.name for p in status.iterdir()) == ["run"]
    token = (status / "run").read_text().strip()
    for run, failure in ((first.strip(), None), (token, "trainer failed (exit 143): interrupted")):
        record = {"command": ["trainer"], "exit_code": 143, "error": "interrupted", "run": run}
        (status / "trainer.json").write_text(json.dumps(record))
        assert failed_service(status) == failure


def listening(process: subprocess.Popen, port: int, seconds: float = 300.0) -> bool:
    """Whether ``process`` listens on ``port`` within ``seconds``: generous, since a start
    under a loaded machine (imports, the trainer's scikit-learn) can take a minute; a process
    that has exited fails at once, with its error output."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"exited with {process.returncode} before listening: {error}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


def test_a_scheduler_of_an_earlier_up_does_not_stop_the_new_run_s_trainer(tmp_path: Path) -> None:
    """Compose recreates the trainer before the scheduler: a scheduler of an earlier `up`
    (here waiting for Batsim), stopped then, used to send its `stop` to the new `up`'s trainer,
    which had greeted no run yet and obeyed; the new run then found no trainer and ran every
    week without a model (seen with compose v1: `trainer_unavailable` twice, 300 s each,
    classification accuracy 0.0%, exit 0). Now it asks nothing and the trainer stays."""
    traces = tmp_path / "traces"
    services = Processes(tmp_path, {"TRACE": slice_of_kth(traces, 100), "TRACE_DIR": str(traces)})
    services.reset()
    services.run("prepare")
    stale = services.start("scheduler")  # an earlier `up`'s scheduler, waiting for Batsim
    trainer = None
    try:
        assert listening(stale, services.ports[28000])
        services.reset()  # the new `up`; compose recreates the trainer, then the scheduler
        trainer = services.start("trainer")
        assert listening(trainer, services.ports[28100])
        stale.terminate()
        assert stale.wait(timeout=300) == 143
        time.sleep(1.0)
        assert trainer.poll() is None, trainer.stderr.read() if trainer.stderr else ""
    finally:
        stale.kill()
        if trainer is not None:
            trainer.kill()


def test_clear_out_refuses_a_folder_holding_other_files_and_one_it_cannot_write(
    tmp_path: Path,
) -> None:
    """clear-out empties a run's files only: an OUT_DIR pointing at a folder with other files
    stops the `up` in seconds with one line, nothing removed; so does one that cannot be
    written (before: only the experiment found out, after the whole simulation)."""
    from tests.test_cli import CMD

    out = tmp_path / "o"
    out.mkdir()
    for name in ("run.json", "jobs.csv", "notes.txt"):
        (out / name).write_text("x")
    done = subprocess.run([*CMD, "clear", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"batsched-ml: error: {out} holds notes.txt, which no run writes: not writing a run "
        "there; choose an empty or new folder"
    )
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "notes.txt", "run.json"]
    (out / "notes.txt").unlink()
    (out / "models").mkdir()
    done = subprocess.run([*CMD, "clear", str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}: removed an earlier run's jobs.csv, models, run.json\n"
    assert list(out.iterdir()) == []
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = subprocess.run(
        [*CMD, "clear", str(blocked / "out")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith(
        f"batsched-ml: error: cannot write into the output directory {blocked / 'out'}: "
    )


# --- for real, with a Docker engine ----------------------------------------------------------


#: What follows `up` in every documented compose command: every service recreated (compose
#: otherwise reuses a container still running from an earlier `up`), with options both compose
#: v1 (1.29) and v2 take.
UP = [
    "--force-recreate",
    "--always-recreate-deps",
    "--renew-anon-volumes",
    "--exit-code-from",
    "experiment",
    "experiment",
]


def documented_ups() -> list[list[str]]:
    """The compose commands of docs/docker.md's and the compose files' shell lines, as words
    from ``docker compose`` or ``docker-compose`` on (continuation lines joined)."""
    texts = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "docker.md").read_text(), re.S)
    for path in (COMPOSE, STANDIN):
        header = [line[1:] for line in path.read_text().splitlines() if line.startswith("#")]
        texts.append("\n".join(header))
    found = []
    for text in texts:
        for line in text.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = part.split()
                for start, word in enumerate(words):
                    if word == "docker-compose" or words[start : start + 2] == [
                        "docker",
                        "compose",
                    ]:
                        if "up" in words[start:]:
                            found.append(words[start:])
                        break
    return found


def test_every_documented_up_recreates_every_service_with_options_v1_and_v2_take() -> None:
    ups = documented_ups()
    assert len(ups) >= 4, ups
    for words in ups:
        assert words[words.index("up") + 1 :] == UP, words
    stand_in = [w for w in ups if "docker-compose.standin.yml" in w]
    assert stand_in and all(
        w[: w.index("up")]
        == ["docker", "compose", "-f", "docker-compose.yml", "-f", "docker-compose.standin.yml"]
        for w in stand_in
    ), stand_in


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) if the engine answers and the plug-in is there, else
    ``docker-compose`` (v1), else ``None``."""
    if shutil.which("docker") is None:
        return None
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return None
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.mark.docker
def test_docker_compose_failed_up_then_another_trace_then_up_again(tmp_path: Path) -> None:
    """The documented stand-in command (no Batsim image can be pulled here, so the stand-in
    plays Batsim), with no `down` in between: a failed `up` (POLICY=nope) leaves OUT_DIR
    empty; a valid `up` with another trace reports that trace (its job count, its workload,
    the replay's job table byte for byte); a failed `up` again removes those results; and
    a last valid `up` with the first trace reports the first trace. `up`'s exit code is the
    experiment's."""
    compose = compose_command()
    if compose is None:
        pytest.skip("no Docker engine (or no compose) here")
    out = tmp_path / "out"
    out.mkdir()
    traces = tmp_path / "traces"
    first, other = slice_of_kth(traces, 400, "kth-a.swf"), slice_of_kth(traces, 700, "kth-b.swf")
    env = {
        **os.environ,
        "TRACE_DIR": str(traces),
        "OUT_DIR": str(out),
        "HOST_UID": str(os.getuid()),
        "HOST_GID": str(os.getgid()),
        "VARIANT": "base",
    }
    project = ["-p", f"bsmltest{os.getpid()}", "-f", str(COMPOSE), "-f", str(STANDIN)]
    build = subprocess.run(
        ["docker", "build", "-f", "docker/Dockerfile", "-t", "batsched-ml:local", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]

    def up(**settings: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*compose, *project, "up", "--no-build", *UP],
            cwd=ROOT,
            env={**env, **settings},
            capture_output=True,
            text=True,
            timeout=1800,
        )

    def failed_up(trace: str) -> None:
        done = up(TRACE=trace, POLICY="nope")
        assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
        assert "batsched-ml: error: argument --policy: invalid choice: 'nope'" in done.stdout
        assert list(out.iterdir()) == []

    def valid_up(trace: str) -> None:
        done = up(TRACE=trace)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        workload = load_workload(traces / trace)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["finished"] == summary["jobs"] == len(workload["jobs"])
        assert summary["trace"] == Path(trace).stem
        expected = tmp_path / f"replay-{trace}"
        write_replay(run_replay(workload, ReplayConfig()), expected)
        assert (out / "jobs.csv").read_bytes() == (expected / "jobs.csv").read_bytes()
        run = json.loads((out / "run.json").read_text())
        assert run["run_id"] == summary["run_id"] and run["status"] == "complete"
        assert run["config"] == ReplayConfig().as_dict()

    try:
        failed_up(first)
        valid_up(other)
        failed_up(other)
        valid_up(first)
    finally:
        subprocess.run([*compose, *project, "down", "-v"], cwd=ROOT, env=env, capture_output=True)


NIX_MASTER = "commit 5e9a3c1f0b7d2a4e6c8b0d1f3a5c7e9b1d3f5a7c (built by Nix from master branch)"


def test_the_experiment_records_the_batsim_version_as_written(tmp_path: Path) -> None:
    """The version string is recorded as Batsim wrote it, never judged: an image built from
    Batsim's master branch calls itself ``commit SHA (built by Nix from master branch)``, and
    whether batsched-ml can work with a Batsim is judged by the protocol it speaks (its first
    message, in ``serve``: tests/test_peer_faults.py)."""
    from batsched_ml.serving.collect import _batsim_version

    jobs = tmp_path / "batsim_jobs.csv"
    assert _batsim_version(jobs) is None  # the stand-in writes no schedule file
    reference = ROOT / "tests" / "data" / "batsim-reference" / "fcfs_small" / "out_schedule.csv"
    header = reference.read_text().splitlines()[0]  # what a real Batsim 4.2.1 wrote
    assert header.startswith("batsim_version,")
    schedule = tmp_path / "batsim_schedule.csv"
    fields = len(header.split(",")) - 1
    for version in ("4.2.1", NIX_MASTER, "5.0.0"):
        schedule.write_text(f"{header}\n{version}{',0' * fields}\n")
        assert _batsim_version(jobs) == version


# --- collect takes the run's settings and calendar from what serve recorded ----------------


def serve_and_play(tmp_path: Path, workload: Path, *serve_options: str) -> Path:
    """`serve` (its options) and the stand-in (dynamic jobs on) on ``workload``; the folder of
    Batsim's outputs, its schedule file written as a Batsim built by Nix from its master
    branch writes it."""
    from tests.test_cli import CMD

    port = free_port()
    server = subprocess.Popen(
        [
            *CMD,
            *("serve", "--socket", f"tcp://127.0.0.1:{port}", "--trainer", "inprocess"),
            *serve_options,
            *("-o", str(tmp_path / "served")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        peer = subprocess.run(
            [
                *CMD,
                *("batsim", "-p", str(ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml")),
                *("-w", str(workload), "-e", str(tmp_path / "b" / "run")),
                *("-s", f"tcp://127.0.0.1:{port}"),
                *("--enable-dynamic-jobs", "--acknowledge-dynamic-jobs"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        _, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert peer.returncode == 0 and server.returncode == 0, (peer.stderr, err)
    reference = ROOT / "tests" / "data" / "batsim-reference" / "fcfs_small" / "out_schedule.csv"
    header = reference.read_text().splitlines()[0]
    fields = len(header.split(",")) - 1
    (tmp_path / "b" / "run_schedule.csv").write_text(f"{header}\n{NIX_MASTER}{',0' * fields}\n")
    return tmp_path / "b"


def run_collect(tmp_path: Path, workload: Path, out: str, *options: str):
    from tests.test_cli import CMD

    return subprocess.run(
        [
            *CMD,
            *("collect", "--batsim-jobs", str(tmp_path / "b" / "run_jobs.csv")),
            *("--workload", str(workload), "--scheduler", str(tmp_path / "served")),
            *("-o", str(tmp_path / out), *options),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collect_takes_the_settings_and_calendar_a_classified_serve_recorded(
    kth_workload, tmp_path: Path
) -> None:
    """`serve` of a classified variant without --calendar reads the calendar from the
    workload Batsim names; collect takes it, and every setting, from serve's record: given
    the experiment's settings it checks them, given none it reads them; and the version string
    of a Batsim built from its master branch is recorded as written."""
    from tests.conftest import workload_head

    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 300)))
    serve_and_play(tmp_path, workload, "--variant", "classification-idempotent")
    asked = run_collect(tmp_path, workload, "o", "--variant", "classification-idempotent")
    assert asked.returncode == 0, asked.stderr
    served = json.loads((tmp_path / "served" / "serve.json").read_text())
    assert served["calendar_from"] == str(workload.resolve())
    assert served["batsim_protocol"] == "batsim4-json"
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    run = json.loads((tmp_path / "served" / "run.json").read_text())
    assert summary["run_id"] == run["run_id"]
    assert summary["config"] == run["config"] and summary["config"]["variant"] == (
        "classification-idempotent"
    )
    assert summary["batsim_version"] == NIX_MASTER
    assert summary["scheduler"]["calendar_from"] == str(workload.resolve())
    assert f"batsim                  {NIX_MASTER}" in asked.stdout
    read = run_collect(tmp_path, workload, "o2")  # no settings: serve's
    assert read.returncode == 0, read.stderr
    assert (tmp_path / "o2" / "summary.json").read_bytes() == (
        tmp_path / "o" / "summary.json"
    ).read_bytes()
    other = run_collect(tmp_path, workload, "o3", "--policy", "spf")
    assert other.returncode == 2
    assert other.stderr.strip().endswith("its settings differ (policy: fcfs served, spf asked)"), (
        other.stderr
    )
    assert not (tmp_path / "o3").exists()


def test_collect_refuses_a_run_dated_from_another_workload(kth_workload, tmp_path: Path) -> None:
    from tests.conftest import workload_head

    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 100)))
    serve_and_play(tmp_path, workload, "--calendar", str(workload))
    assert run_collect(tmp_path, workload, "o").returncode == 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps(workload_head(kth_workload, 100)) + "\n")
    refused = run_collect(tmp_path, other, "o2")
    assert refused.returncode == 2
    assert "whose calendar came from w.json" in refused.stderr
    assert refused.stderr.strip().endswith("the workload collected: not this experiment's run")
