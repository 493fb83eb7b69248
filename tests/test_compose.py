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


def services(env: dict[str, str] | None = None, standin: bool = False) -> dict[str, Any]:
    found = load(COMPOSE)["services"]
    if standin:
        for name, override in load(STANDIN)["services"].items():
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
    assert list(found) == ["reset", *SERVICES]
    ours = ["reset", *(name for name in SERVICES if name != "batsim")]
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
    # every `up` starts from an empty /data/out and /data/status, before anything else runs
    assert found["prepare"]["depends_on"] == {
        "reset": {"condition": "service_completed_successfully"}
    }
    assert found["reset"]["volumes"] == ["data:/data"]


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


def slice_of_kth(folder: Path, jobs: int) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(KTH, "rt") as source:
        lines = [line for line in source if line.startswith(";")]
    with gzip.open(KTH, "rt") as source:
        body = [line for line in source if not line.startswith(";")][:jobs]
    (folder / "kth-slice.swf").write_text("".join(lines + body))
    return "kth-slice.swf"


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


def compose_as_processes(tmp_path: Path, env: dict[str, str]) -> str:
    """Run the compose services as plain processes, in compose's order (reset, prepare,
    trainer and scheduler together, the Batsim stand-in, experiment), with the container
    folders under ``tmp_path`` and the ports on loopback; return what experiment printed."""
    found = services(env, standin=True)
    traces = Path(env["TRACE_DIR"])
    places = {"/data": str(tmp_path / "data"), "/traces": str(traces), "/out": str(tmp_path / "o")}
    ports = {28000: free_port(), 28100: free_port()}
    python = [sys.executable, "-m", "batsched_ml"]

    def argv(name: str) -> list[str]:
        service = found[name]
        entry = service.get("entrypoint", ["batsched-ml"])
        assert entry[0] == "batsched-ml"
        return python + entry[1:] + localise(service["command"], places, ports)

    def environment(name: str) -> dict[str, str]:
        extra = localise(found[name].get("environment", {}), places, ports)
        return {**os.environ, **extra}

    def run(name: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            argv(name), env=environment(name), capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (name, done.stderr)
        return done

    # reset: a shell line on the container's folders, run here on their local stand-ins
    shell, flag, line = found["reset"]["entrypoint"]
    assert (shell, flag) == ("sh", "-c") and found["reset"]["command"] == []
    subprocess.run([shell, flag, line.replace("/data/", places["/data"] + "/")], check=True)
    background: list[subprocess.Popen] = []
    try:
        run("prepare")
        for name in ("trainer", "scheduler"):  # started together, as compose does
            background.append(
                subprocess.Popen(
                    argv(name),
                    env=environment(name),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        run("batsim")
        shown = run("experiment").stdout
        for process in background:  # the scheduler ends with the simulation, the trainer on stop
            assert process.wait(timeout=60) == 0, process.stderr.read()
    finally:
        for process in background:
            process.kill()
    return shown


@pytest.mark.parametrize(("settings", "jobs", "config", "title"), PLAIN_RUNS)
def test_the_compose_services_run_as_plain_processes_on_loopback(
    tmp_path: Path, settings: dict[str, str], jobs: int, config: ReplayConfig, title: str
) -> None:
    traces = tmp_path / "traces"
    env = {"TRACE": slice_of_kth(traces, jobs), "TRACE_DIR": str(traces), **settings}
    shown = compose_as_processes(tmp_path, env)
    out = tmp_path / "o"
    assert re.search(rf"^policy +{re.escape(title)}$", shown, re.M), shown
    statuses = sorted(p.name for p in (tmp_path / "data" / "status").iterdir())
    assert statuses == ["batsim.json", "prepare.json", "scheduler.json", "trainer.json"]
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
    first = compose_as_processes(tmp_path, env)
    assert re.search(r"^policy +fcfs \(base\)$", first, re.M), first
    # the second `up`, other settings, same volume: reset empties it, the report is the new run's
    second = compose_as_processes(tmp_path, {**env, "POLICY": "spf"})
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


# --- for real, with a Docker engine ----------------------------------------------------------


def compose_command() -> list[str] | None:
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
def test_docker_compose_up_experiment_with_the_stand_in(tmp_path: Path) -> None:
    """Two `up`s with other settings and no `down -v` in between: each reports its own run,
    byte-identical to the replay with its settings, and `up`'s exit code is the verdict."""
    compose = compose_command()
    if compose is None:
        pytest.skip("no Docker engine (or no compose) here")
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    traces = tmp_path / "traces"
    trace = slice_of_kth(traces, 3000)
    env = {
        **os.environ,
        "TRACE": trace,
        "TRACE_DIR": str(traces),
        "OUT_DIR": str(out),
        "HOST_UID": str(os.getuid()),
        "HOST_GID": str(os.getgid()),
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
            [*compose, *project, "up", "--no-build", "--exit-code-from=experiment", "experiment"],
            cwd=ROOT,
            env={**env, **settings},
            capture_output=True,
            text=True,
            timeout=1800,
        )

    workload = load_workload(traces / trace)
    try:
        for settings, config in (
            ({}, ReplayConfig(variant="classification-idempotent")),
            ({"POLICY": "spf", "VARIANT": "base"}, ReplayConfig(policy="spf")),
        ):
            done = up(**settings)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            summary = json.loads((out / "summary.json").read_text())
            assert summary["config"] == config.as_dict()
            assert summary["finished"] == summary["jobs"] == len(workload["jobs"])
            expected = tmp_path / f"replay-{config.policy}-{config.variant}"
            write_replay(run_replay(workload, config), expected)
            assert (out / "jobs.csv").read_bytes() == (expected / "jobs.csv").read_bytes()
            assert json.loads((out / "run.json").read_text())["run_id"] == summary["run_id"]
        # the second run's folder holds nothing of the first (a classified run's tables)
        assert not (out / "classification.csv").exists()
        failed = up(POLICY="nope")
        assert failed.returncode == 2, failed.stdout[-3000:]
        assert "invalid choice: 'nope'" in failed.stdout
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
