"""Batsim 5's library mode: the library loaded the way Batsim 5 loads it, against the recordings.

A C driver (``tests/edc_driver.c``, compiled here with the system's ``cc``) does what Batsim
5.0.0-rc2 does with a decision-component library: ``dlopen`` (``RTLD_NOW | RTLD_LOCAL |
RTLD_DEEPBIND``), the three symbols by ``dlsym``, ``batsim_edc_init`` with the init string, then
``batsim_edc_take_decisions`` with each recorded Batsim message (the JSON text and its NUL),
``batsim_edc_deinit``. The replies must be the recorded decisions, message by message, as
``serve``'s are in ``tests/test_batsim5.py``. Its Python side (:mod:`batsched_ml.serving.edc`) and the
init string are also tested without the library.

Without the library these tests fail where ``BATSCHED_ML_REQUIRE_COMPILED=1`` is set (CI, which
has a compiler) and skip elsewhere, or where Python has no shared libpython to build it with.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from batsched_ml.cli import edc_library as cli_edc
from batsched_ml.cli import main
from batsched_ml.errors import ConfigError
from batsched_ml.predict.params import ForestParams
from batsched_ml.protocol.codec_v5 import requested_features
from batsched_ml.protocol.framing_v5 import batsim_frame
from batsched_ml.runs.replaying import ReplayConfig
from batsched_ml.serving import edc
from tests.conftest import ROOT
from tests.test_batsim5 import CASES, config_of, messages

DRIVER = ROOT / "tests" / "edc_driver.c"
CLASSIFIED = "(classified)"
_U32 = struct.Struct("<I")


def _required(what: str) -> None:
    if os.environ.get("BATSCHED_ML_REQUIRE_COMPILED") == "1":
        pytest.fail(f"{what} (BATSCHED_ML_REQUIRE_COMPILED=1)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def library() -> Path:
    """The library built from this source (``batsched-ml edc-library``'s path). Where Python
    has no shared libpython, setup.py does not build it, and the tests skip even in CI."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython: the library is not built")
    try:
        return cli_edc.library_path()
    except cli_edc.NotBuilt as exc:
        _required(str(exc))
        raise


def compile_driver(folder: Path) -> Path:
    """``tests/edc_driver.c`` compiled into ``folder`` with the system's C compiler."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        _required("no C compiler (cc) to build the Batsim 5 stand-in")
    out = folder / "edc_driver"
    subprocess.run(
        [str(compiler), "-O2", "-o", str(out), str(DRIVER), "-ldl"], check=True, timeout=120
    )
    return out


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_driver(tmp_path_factory.mktemp("driver"))


@dataclass
class Outcome:
    flags: int | None
    hello: dict[str, Any] | None
    replies: list[dict[str, Any]]
    seconds: tuple[float, float] | None  # in init, in all take_decisions


def frames_file(path: Path, frames: list[bytes]) -> Path:
    path.write_bytes(b"".join(_U32.pack(len(frame)) + frame for frame in frames))
    return path


def _replies(path: Path) -> tuple[int | None, list[dict[str, Any]]]:
    """The flags and the JSON texts the driver wrote; each must end with one NUL (Batsim's
    parser reads a C string), which is checked and stripped here."""
    data = path.read_bytes() if path.exists() else b""
    flags = _U32.unpack_from(data)[0] if len(data) >= 4 else None
    texts, pos = [], 4
    while pos < len(data):
        (size,) = _U32.unpack_from(data, pos)
        text = data[pos + 4 : pos + 4 + size]
        assert text.endswith(b"\0") and b"\0" not in text[:-1]
        texts.append(json.loads(text[:-1]))
        pos += 4 + size
    return flags, texts


def run_simulations(
    driver: Path,
    library: Path,
    runs: list[tuple[str, list[bytes]]],
    folder: Path,
    load_method: str = "dlopen",
) -> tuple[int, str, list[Outcome]]:
    """Batsim's calls through the driver, for each ``(init string, frames)`` in turn in one
    process: its exit code, its standard error and each simulation's :class:`Outcome` (those
    after a failing one have none)."""
    arguments = []
    for i, (init, frames) in enumerate(runs):
        frames_path = frames_file(folder / f"frames{i}.bin", frames)
        arguments += [init, str(frames_path), str(folder / f"replies{i}.bin")]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["EDC_DRIVER_LOAD_METHOD"] = load_method
    done = subprocess.run(
        [str(driver), str(library), *arguments],
        capture_output=True,
        text=True,
        env=env,  # the library finds its package by its own path, not by PYTHONPATH
        timeout=600,
    )
    times = [tuple(float(x) for x in line.split()) for line in done.stdout.splitlines()]
    outcomes = []
    for i in range(len(runs)):
        flags, texts = _replies(folder / f"replies{i}.bin")
        seconds = (times[i][0], times[i][1]) if i < len(times) else None
        outcomes.append(Outcome(flags, texts[0] if texts else None, texts[1:], seconds))
    return done.returncode, done.stderr, outcomes


def run_driver(
    driver: Path, library: Path, init: str, frames: list[bytes], folder: Path
) -> tuple[int, str, Outcome]:
    """One simulation through the driver: (exit code, standard error, its outcome)."""
    code, stderr, outcomes = run_simulations(driver, library, [(init, frames)], folder)
    return code, stderr, outcomes[0]


def batsim_frames(name: str) -> list[bytes]:
    """The recorded Batsim messages of case ``name`` as Batsim passes them (NUL-terminated)."""
    return [batsim_frame(json.dumps(message)) for message in messages(name, "batsim->edc")]


def init_of(config: ReplayConfig) -> str:
    return json.dumps(config.as_dict())


# --- through the library, as Batsim 5 calls it ----------------------------------------------


@pytest.fixture(scope="module")
def recorded_cases(
    driver: Path, library: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Outcome]:
    """The library fed every case's recorded messages, one simulation after the other in one
    driver process (the library loaded and closed for each, Python started once); then a
    classified run's start (``CLASSIFIED``), which gets no message."""
    names = [*sorted(CASES), CLASSIFIED]
    runs = [(init_of(config_of(CASES[name])), batsim_frames(name)) for name in sorted(CASES)]
    runs.append((init_of(ReplayConfig(variant="classification-idempotent", policy="spf")), []))
    code, stderr, outcomes = run_simulations(
        driver, library, runs, tmp_path_factory.mktemp("cases")
    )
    assert code == 0, stderr
    return dict(zip(names, outcomes, strict=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_library_gives_the_recorded_decisions(
    name: str, recorded_cases: dict[str, Outcome]
) -> None:
    outcome = recorded_cases[name]
    assert outcome.flags == 0x2  # JSON
    assert outcome.hello is not None
    assert [e["event_type"] for e in outcome.hello["events"]] == ["EDCHelloEvent"]
    hello = outcome.hello["events"][0]["event"]
    assert hello["decision_component_name"] == "batsched-ml"
    assert hello["requested_simulation_features"] == {}
    recorded = messages(name, "edc->batsim")
    assert len(outcome.replies) == len(recorded)
    for i, (mine, theirs) in enumerate(zip(outcome.replies, recorded, strict=True)):
        assert mine == theirs, f"reply {i}"


def test_a_classified_init_asks_batsim_for_dynamic_jobs(
    recorded_cases: dict[str, Outcome],
) -> None:
    outcome = recorded_cases[CLASSIFIED]
    assert outcome.flags == 0x2 and outcome.hello is not None and not outcome.replies
    features = outcome.hello["events"][0]["event"]["requested_simulation_features"]
    assert features == requested_features(dynamic_jobs=True)


def test_an_unknown_setting_fails_the_init_with_one_line(
    driver: Path, library: Path, tmp_path: Path
) -> None:
    code, stderr, outcome = run_driver(
        driver, library, '{"polcy": "spf"}', batsim_frames("fcfs_small"), tmp_path
    )
    assert code == 10  # batsim_edc_init returned non-zero
    assert stderr.strip().splitlines() == [
        "batsched-ml: error: the init string: unknown key(s) polcy (known: "
        + ", ".join(edc._KINDS)
        + ")"
    ]
    assert outcome.flags is None


def test_a_load_into_a_namespace_of_its_own_is_refused(
    driver: Path, library: Path, tmp_path: Path
) -> None:
    """``batsim --edc-library-load-method dlmopen``: CPython would crash there; the init says
    so in one line instead."""
    code, stderr, outcomes = run_simulations(
        driver, library, [("", batsim_frames("fcfs_small"))], tmp_path, load_method="dlmopen"
    )
    assert code == 10
    assert stderr.strip().splitlines() == [
        "batsched-ml: error: the batsched-ml library runs Python and must be loaded into "
        "Batsim's own namespace: use batsim's default --edc-library-load-method dlopen, not "
        "dlmopen"
    ]
    assert outcomes[0].flags is None


def test_a_broken_message_fails_the_call_with_one_line(
    driver: Path, library: Path, tmp_path: Path
) -> None:
    frames = batsim_frames("fcfs_small")
    code, stderr, outcome = run_driver(
        driver, library, "", [frames[0], b'{"now": 1.0, "ev\0'], tmp_path
    )
    assert code == 11  # batsim_edc_take_decisions returned non-zero
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batsched-ml: error: ")
    assert "malformed JSON" in lines[0]
    assert len(outcome.replies) == 1  # the first message was answered


def test_a_completion_of_a_job_never_started_fails_the_call(
    driver: Path, library: Path, tmp_path: Path
) -> None:
    frames = batsim_frames("fcfs_small")
    completed = {
        "now": 5.0,
        "events": [
            {
                "timestamp": 5.0,
                "event_type": "JobCompletedEvent",
                "event": {"job_id": "w0!99", "state": "COMPLETED_SUCCESSFULLY", "return_code": 0},
            }
        ],
    }
    code, stderr, outcome = run_driver(
        driver, library, "", [frames[0], batsim_frame(json.dumps(completed))], tmp_path
    )
    assert code == 11
    assert len(outcome.replies) == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batsched-ml: error: ")
    assert "never started" in lines[0]


# --- the Python side, without the library ----------------------------------------------------


def test_the_module_answers_as_serve() -> None:
    """batsched_ml.serving.edc's three calls (what the library calls) on easy_backfill."""
    assert edc.init(init_of(config_of(True)).encode()) is not None
    try:
        replies = [edc.take_decisions(frame) for frame in batsim_frames("easy_backfill")]
    finally:
        assert edc.deinit() is True
    assert [json.loads(r or b"") for r in replies] == messages("easy_backfill", "edc->batsim")


def test_the_module_refuses_a_second_init_and_calls_before_init(capsys) -> None:
    assert edc.take_decisions(b'{"now": 0, "events": []}') is None
    assert "called before batsim_edc_init" in capsys.readouterr().err
    assert edc.init(b"") is not None
    try:
        assert edc.init(b"") is None
        assert "called twice" in capsys.readouterr().err
    finally:
        edc.deinit()


def test_a_bug_keeps_its_traceback(capsys) -> None:
    """What the library is told of a failure: ``None``, after one line for the user's error
    and the traceback for anything else."""

    def bug() -> bytes:
        raise KeyError("internal")

    def users() -> bytes:
        raise ConfigError("a setting")

    assert edc._reported(bug) is None
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "KeyError: 'internal'" in err
    assert edc._reported(users) is None
    assert capsys.readouterr().err == "batsched-ml: error: a setting\n"
    assert edc._reported(lambda: b"ok") == b"ok"


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--policy", "spf", "--no-backfilling", "--starvation-threshold", "none"],
        [
            "--variant",
            "classification-idempotent",
            "--trees",
            "10",
            "--window",
            "all",
            "--max-samples",
            "all",
        ],
        ["--variant", "classification", "--classifier-option", "threshold=0.6"],
        ["--predictor", "su", "--predictor-option", "alpha=1.5"],
        ["--dispatcher", "cph", "--dispatcher-option", "window=16"],
        ["--predictor", "easy++", "--correction", "power"],
    ],
)
def test_the_init_string_carries_the_command_lines_settings(options: list[str], capsys) -> None:
    """``edc-library --init OPTIONS`` prints an init string that gives back the scheduler
    ``serve OPTIONS`` builds."""
    from batsched_ml.cli import build_parser
    from batsched_ml.cli.options import config as _config

    assert main(["edc-library", "--init", *options]) == 0
    text = capsys.readouterr().out.strip()
    args = build_parser().parse_args(
        ["serve", "--socket", "tcp://127.0.0.1:1", "-o", "unused", *options]
    )
    assert edc.config_of_init(text) == _config(args)


def test_an_init_string_of_a_few_settings_takes_the_defaults_for_the_others() -> None:
    assert edc.config_of_init("") == ReplayConfig()
    assert edc.config_of_init("  ") == ReplayConfig()
    config = edc.config_of_init('{"variant": "classification", "forest": {"n_estimators": 8}}')
    assert config == ReplayConfig(variant="classification", forest=ForestParams(n_estimators=8))
    config = edc.config_of_init('{"starvation_threshold": 3600, "backfilling": false}')
    assert config == ReplayConfig(starvation_threshold=3600.0, backfilling=False)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1]", "not a JSON object"),
        ("{policy: spf}", "not JSON"),
        ('{"policy": "spf", "trainer": "process"}', "unknown key(s) trainer"),
        ('{"backfilling": "no"}', 'backfilling cannot be "no"'),
        ('{"starvation_threshold": true}', "starvation_threshold cannot be true"),
        ('{"predictor_params": "alpha=1"}', "predictor_params cannot be"),
        ('{"feature_mode": "daily"}', "feature_mode is one of online, weekly"),
        ('{"variant": "classification", "forest": {"trees": 3}}', "forest has no trees"),
        ('{"variant": "classification", "forest": {"n_estimators": null}}', "n_estimators"),
        ('{"variant": "classification", "forest": {"n_estimators": 2.5}}', "n_estimators"),
        ('{"policy": "nope"}', "nope"),
        ('{"forest": {"n_estimators": 8}}', "not applied"),  # a base run reads no forest
    ],
)
def test_a_setting_that_cannot_be_used_is_refused(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        config = edc.config_of_init(text)
        from batsched_ml.runs.replaying import make_scheduler

        make_scheduler(config)
    assert says in str(error.value)


# --- the command ----------------------------------------------------------------------------


def test_the_command_prints_the_librarys_path(library: Path, capsys) -> None:
    assert main(["edc-library"]) == 0
    assert capsys.readouterr().out == f"{library}\n"
    assert library.is_absolute() and library.is_file()


def test_the_command_says_when_the_library_is_not_built(
    monkeypatch, tmp_path: Path, capsys
) -> None:
    monkeypatch.setattr(cli_edc, "MODULE", "batsched_ml._not_built")
    assert main(["edc-library"]) == cli_edc.NOT_BUILT == 69
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not built" in err[0]


def test_the_command_refuses_a_library_of_another_source(
    library: Path, monkeypatch, tmp_path: Path, capsys
) -> None:
    other = tmp_path / "_edc.c"
    other.write_text(cli_edc.SOURCE.read_text() + "/* edited */\n")
    monkeypatch.setattr(cli_edc, "SOURCE", other)
    assert main(["edc-library"]) == 69
    assert "built from another _edc.c" in capsys.readouterr().err


def test_scheduler_options_without_init_are_refused(capsys) -> None:
    assert main(["edc-library", "--policy", "spf"]) == 2
    assert "--policy: the scheduler options go with --init" in capsys.readouterr().err
