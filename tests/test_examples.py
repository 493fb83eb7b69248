"""The examples of ``examples/`` (a custom predictor, a custom queue order): their classes on
hand-made jobs, their scripts as a user runs them, and each one served unchanged to the Batsim
stand-in over ZeroMQ, which must give the embedded replay's job table byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from batsched_ml.errors import ConfigError
from batsched_ml.job import Job
from tests.conftest import ROOT, workload_head
from tests.test_cli import CMD, free_port

EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(ROOT)])}


@pytest.fixture()
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))


def job(user: int, walltime: float | None = 1000.0, name: str = "1") -> Job:
    return Job(f"w!{name}", 0.0, 1, walltime, "p", {"user": user})


def test_user_median_predicts_the_median_of_the_users_last_runtimes(examples_on_path) -> None:
    from user_median import UserMedian

    predictor = UserMedian(history=3)
    assert predictor.estimate(job(1), None) == 1000.0  # no history: the request
    assert predictor.estimate(job(1, walltime=None), None) == 86_400.0
    for runtime in (100.0, 400.0, 200.0, 900.0):  # the last 3: 400, 200, 900
        predictor.observe(job(1), runtime)
    assert predictor.estimate(job(1), None) == 400.0
    assert predictor.estimate(job(1, walltime=300.0), None) == 300.0  # capped by the request
    assert predictor.estimate(job(2), None) == 1000.0  # another user's history is not shared
    predictor.observe(job(2), 0.0)
    assert predictor.estimate(job(2), None) == 1.0  # never 0: EASY needs a positive estimate
    with pytest.raises(ValueError):
        UserMedian(history=0)


def test_fewest_processors_orders_by_width_then_submission(examples_on_path) -> None:
    from types import SimpleNamespace

    from fewest_processors import FewestProcessorsFirst

    order = FewestProcessorsFirst()
    entries = [
        SimpleNamespace(res=8, subtime=0.0, seq=0),
        SimpleNamespace(res=2, subtime=50.0, seq=2),
        SimpleNamespace(res=2, subtime=10.0, seq=1),
    ]
    assert [e.seq for e in sorted(entries, key=lambda e: order.key(e, 99.0))] == [1, 2, 0]
    assert order.dynamic is False


def test_the_example_scripts_run_and_print_their_comparison(tmp_path: Path) -> None:
    for script, lines in (("user_median.py", 2), ("fewest_processors.py", 2)):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / script), "--jobs", "600"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=ENV,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        printed = done.stdout.strip().splitlines()
        assert len(printed) == lines and all("mean bounded slowdown" in line for line in printed)
        values = [float(line.rsplit(" ", 1)[1]) for line in printed]
        assert values[0] != values[1], "the plug-in changed nothing"


def test_a_plug_in_path_that_does_not_import_is_one_clear_error(examples_on_path) -> None:
    import batsched_ml

    with pytest.raises(ConfigError, match="no attribute 'Nope'"):
        batsched_ml.replay({"nb_res": 1, "jobs": [], "profiles": {}}, predictor="user_median:Nope")


@pytest.mark.parametrize(
    "options",
    [
        ["--policy", "spf", "--predictor", "user_median:UserMedian", "--predictor-option",
         "history=3"],
        ["--policy", "fewest_processors:FewestProcessorsFirst"],
        # the custom order under classification, killed jobs and resubmissions included
        ["--policy", "fewest_processors:FewestProcessorsFirst", "--variant",
         "classification-idempotent", "--trees", "4"],
    ],
)  # fmt: skip
def test_an_example_served_to_the_stand_in_gives_the_embedded_replays_job_table(
    kth_workload, tmp_path: Path, options: list[str], examples_on_path
) -> None:
    from batsched_ml.cli import main

    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 1200)))
    dynamic = (
        ["--enable-dynamic-jobs", "--acknowledge-dynamic-jobs"] if "--variant" in options else []
    )
    port = free_port()
    server = subprocess.Popen(
        [*CMD, "serve", "--socket", f"tcp://127.0.0.1:{port}", *options, "--timeout", "30",
         "-o", str(tmp_path / "served")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )  # fmt: skip
    try:
        peer = subprocess.run(
            [*CMD, "batsim", "-p", str(ROOT / "platforms" / "KTH-SP2-1996-2.1-cln.xml"),
             "-w", str(workload), "-e", str(tmp_path / "out"), "-s", f"tcp://127.0.0.1:{port}",
             "--timeout", "30", *dynamic],
            capture_output=True,
            text=True,
            timeout=180,
            env=ENV,
        )  # fmt: skip
        assert peer.returncode == 0, peer.stderr
        _out, err = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert main(["replay", str(workload), "-o", str(tmp_path / "embedded"), *options, "-q"]) == 0
    embedded = (tmp_path / "embedded" / "jobs.csv").read_bytes()
    assert (tmp_path / "out_jobs.csv").read_bytes() == embedded
    summary = json.loads((tmp_path / "embedded" / "summary.json").read_text())
    if "--predictor" in options:
        assert summary["prediction"]["predictor"] == "user_median:UserMedian"
