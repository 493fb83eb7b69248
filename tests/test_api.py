"""The Python API (``batsched_ml.replay``): the command line's replay, as tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import batsched_ml
from batsched_ml.cli import main
from batsched_ml.errors import ConfigError
from batsched_ml.results.frames import read_jobs_csv
from batsched_ml.runs.replaying import ReplayConfig
from tests.conftest import workload_head


def test_the_api_gives_what_the_command_writes(kth_workload, tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_head(kth_workload, 600)))
    assert main(["replay", str(path), "-o", str(tmp_path / "out"), "--policy", "spf", "-q"]) == 0
    result = batsched_ml.replay(path, policy="spf")
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    written.pop("run_id")  # the command's run folder has an identity; the API's has none
    assert result.summary == written
    pd_written = read_jobs_csv(tmp_path / "out" / "jobs.csv")
    assert result.jobs.equals(pd_written) and len(result.jobs) == 600
    assert result.classification is None and result.weekly is None
    assert list(result.predictions.columns) == ["job_id", "predicted", "actual"]
    assert result.timing["replay_seconds"] >= 0


def test_the_api_takes_a_workload_object_a_config_and_settings(kth_workload) -> None:
    workload = workload_head(kth_workload, 2500)
    config = ReplayConfig(policy="fcfs", variant="classification-idempotent")
    result = batsched_ml.replay(workload, config, policy="saf")
    assert result.summary["config"]["policy"] == "saf"
    assert result.summary["config"]["variant"] == "classification-idempotent"
    # a job killed at the divider has two rows; the classifier's tables come along
    assert len(result.jobs) == 2500 + result.summary["kills"]
    assert len(result.classification) == 2500
    assert {"week", "accuracy"} <= set(result.weekly.columns)
    assert "train_seconds" in result.timing and "train_seconds" not in result.weekly.columns
    predicted = batsched_ml.replay(workload, predictor="easy++", dispatcher="prb")
    assert predicted.summary["prediction"]["predictor"] == "easy++"


def test_bad_settings_say_why() -> None:
    with pytest.raises(ConfigError, match="unknown variant"):
        batsched_ml.replay({"jobs": []}, variant="nope")
    with pytest.raises(TypeError):
        batsched_ml.replay({"jobs": []}, colour="blue")


def test_importing_the_package_stays_light() -> None:
    """``import batsched_ml`` loads neither scikit-learn nor pandas: the API is imported on
    first use (the command line starts from the package too)."""
    code = "import sys, batsched_ml; print('sklearn' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert callable(batsched_ml.replay) and batsched_ml.Result.__name__ == "Result"


def test_the_command_line_starts_without_the_heavy_libraries() -> None:
    """``batsched-ml --help`` and ``--version`` build the parser from :mod:`batsched_ml.registry`
    alone: no numpy, pandas, scikit-learn, Dask or ZeroMQ until a command needs them (their
    time is measured by the speed benchmarks, not here)."""
    heavy = ("numpy", "pandas", "sklearn", "dask", "zmq", "scipy", "matplotlib", "ortools")
    code = (
        "import sys; from batsched_ml.cli import build_parser; build_parser(); "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_registry_is_what_the_implementations_offer() -> None:
    from batsched_ml import registry
    from batsched_ml.scheduler.correction import get_correction
    from batsched_ml.scheduler.policies import POLICIES
    from batsched_ml.scheduler.predictors import PREDICTORS

    assert {name: p.description for name, p in POLICIES.items()} == registry.POLICIES
    assert tuple(PREDICTORS) == tuple(registry.PREDICTORS)
    # every registered correction is implemented ("none" is no correction)
    assert [get_correction(name) is None for name in registry.CORRECTIONS] == [True, False, False]


def test_the_api_writes_no_file(monkeypatch) -> None:
    """The results are made in memory by the writers a run folder uses: nothing is written."""
    import batsched_ml
    from batsched_ml.results import outputs, textfile
    from batsched_ml.workload.io import load_workload
    from batsched_ml.workload.shipped import resolve

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the API wrote a file")

    monkeypatch.setattr(textfile, "write_text", refuse)
    monkeypatch.setattr(outputs, "write_text", refuse)
    workload = load_workload(resolve(None))
    workload["jobs"] = workload["jobs"][:500]
    result = batsched_ml.replay(workload, policy="spf", predictor="easy++")
    assert len(result.jobs) == 500 and result.summary["jobs"] == 500
    assert result.predictions is not None and len(result.predictions) == 500
    assert set(result.timing) >= {"replay_seconds", "predict_us_per_job"}
