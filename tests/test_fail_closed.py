"""A run never records a setting it did not apply: settings nothing reads are refused.

The scheduler is built from the run's configuration by :func:`batsched_ml.runs.replaying.
make_scheduler`, which notes which fields its parts read; a field set away from its default
that nothing read fails the run with one line naming it. A new field added to
:class:`ReplayConfig` and not wired is therefore refused, never silently dropped, and a setting
that does not apply to a run (a forest parameter of a base run) is refused too.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from batsched_ml.errors import ConfigError
from batsched_ml.predict.params import ForestParams
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler, run_replay
from tests.conftest import workload_head


@dataclasses.dataclass(frozen=True)
class WithNewOption(ReplayConfig):
    """A configuration with a field no part of the scheduler knows (yet)."""

    strict_backfill: bool = False


def test_a_new_field_left_at_its_default_runs(kth_workload: dict[str, Any]) -> None:
    workload = workload_head(kth_workload, 300)
    assert run_replay(workload, WithNewOption()).rows == run_replay(workload, ReplayConfig()).rows


def test_a_new_field_that_nothing_reads_is_refused(kth_workload: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"^strict_backfill=True: not applied by a fcfs \(base\)"):
        run_replay(workload_head(kth_workload, 300), WithNewOption(strict_backfill=True))


@pytest.mark.parametrize(
    "options",
    [
        {"feature_mode": "weekly"},
        {"forest": ForestParams(n_estimators=3)},
    ],
)
def test_settings_of_another_variant_are_refused_for_a_base_run(options: dict[str, Any]) -> None:
    name = next(iter(options))
    with pytest.raises(ConfigError, match=f"^{name}="):
        make_scheduler(ReplayConfig(**options))


@pytest.mark.parametrize(
    ("options", "changed"),
    [
        ({"policy": "spf"}, True),
        ({"backfilling": False}, True),
        ({"predictor": "actual"}, True),
        ({"correction": "power", "predictor": "easy++"}, True),
        ({"dispatcher": "prb"}, True),
        ({"variant": "runtime-clairvoyant"}, True),
    ],
)
def test_every_setting_a_base_run_reads_changes_its_schedule(
    kth_workload: dict[str, Any], options: dict[str, Any], changed: bool
) -> None:
    """The other side: the fields it reads are applied (each changes the job table here)."""
    workload = workload_head(kth_workload, 2000)
    base = run_replay(workload, ReplayConfig()).rows
    assert (run_replay(workload, ReplayConfig(**options)).rows != base) is changed


def test_a_plug_in_order_identical_to_fcfs_gives_fcfs_job_table(
    kth_workload: dict[str, Any], tmp_path: Any
) -> None:
    """A new queue order is decided by the same scheduler and simulated by the same simulator
    as FCFS: the same job table, byte for byte (and, measured by benchmarks/speed_table.py's
    hpc2n-plugin row, in FCFS's time)."""
    from batsched_ml.results.outputs import write_replay

    workload = workload_head(kth_workload, 3000)
    fcfs = run_replay(workload, ReplayConfig())
    plugin = run_replay(workload, ReplayConfig(policy="tests.plugin_parts:ArrivalOrder"))
    assert fcfs.engine == plugin.engine
    write_replay(fcfs, tmp_path / "fcfs")
    write_replay(plugin, tmp_path / "plugin")
    assert (tmp_path / "fcfs" / "jobs.csv").read_bytes() == (
        tmp_path / "plugin" / "jobs.csv"
    ).read_bytes()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"n_estimators": -1}, "forest n_estimators must be an integer >= 0, not -1"),
        ({"window": 0}, "forest window must be an integer >= 1, not 0"),
        ({"max_depth": 0}, "forest max_depth must be an integer >= 1, not 0"),
        ({"min_samples_leaf": 0}, "forest min_samples_leaf must be an integer >= 1"),
        ({"max_samples": 1.5}, "forest max_samples must be a share in (0, 1] or all"),
        ({"max_samples": 2}, "forest max_samples must be a share in (0, 1] or all"),
        ({"max_features": "half"}, "forest max_features must be 'sqrt', 'log2', None"),
        ({"n_jobs": 0}, "forest n_jobs must not be 0"),
        ({"random_state": -1}, "forest random_state must be an integer >= 0"),
        ({"n_estimators": True}, "forest n_estimators must be an integer, not True"),
    ],
)
def test_a_forest_it_cannot_grow_is_refused_when_made(
    setting: dict[str, Any], message: str
) -> None:
    """A forest setting the trainer cannot grow with is refused where it is made, with one
    line naming the field: it failed in the trainer at every week of the run before (each
    failure restarting the trainer, the run going on with every job large)."""
    with pytest.raises(ConfigError, match=re_escape(message)):
        ForestParams(**setting)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_the_values_a_forest_takes() -> None:
    assert ForestParams(max_samples=1).max_samples == 1.0  # a share, not a count of one row
    assert ForestParams(window=None, max_depth=None, max_samples=None).as_dict()["window"] is None
    assert ForestParams(max_features=0.5, n_jobs=-1, n_estimators=0).n_estimators == 0


def test_a_bad_forest_on_the_command_line_is_one_line_and_nothing_written(tmp_path, capsys) -> None:
    from batsched_ml.cli import main

    out = tmp_path / "out"
    code = main(["replay", "-o", str(out), "--variant", "classification", "--trees", "-1", "-q"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "batsched-ml: error: forest n_estimators must be an integer >= 0, not -1"
    assert not out.exists()


def test_the_class_clairvoyant_variant_refuses_forest_settings_it_never_applies() -> None:
    """It trains no forest: only the divider's quantile applies (a classifier option)."""
    with pytest.raises(ConfigError, match=r"^forest n_estimators=8: the class-clairvoyant"):
        ReplayConfig(variant="class-clairvoyant", forest=ForestParams(n_estimators=8))
    config = ReplayConfig(
        variant="class-clairvoyant", classifier_params={"divider_quantile": "0.6"}
    )
    assert config.forest.divider_quantile == 0.6
    make_scheduler(config)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--variant", "classification", "--trainer-deadline", "-5"], "--trainer-deadline: -5"),
        (["--variant", "classification", "--trainer-deadline", "nan"], "--trainer-deadline: nan"),
        (["--starvation-threshold", "nan"], "--starvation-threshold: the starvation threshold"),
    ],
)
def test_a_deadline_or_threshold_that_is_no_number_of_seconds_is_refused(
    tmp_path, capsys, options: list[str], message: str
) -> None:
    """A trainer deadline of -5 s (or NaN) ran a classified replay to its end with no model
    at all (every week's model "unavailable", every job large, no kill); a starvation threshold
    of NaN never starved a job and wrote ``NaN`` into summary.json. Both are refused."""
    from batsched_ml.cli import main

    out = tmp_path / "out"
    assert main(["replay", "-o", str(out), *options, "-q"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_every_way_in_refuses_them_too(tmp_path) -> None:
    """The run configuration and the trainer's lifecycle (the API's way in); a campaign file's:
    tests/test_campaign.py."""
    from batsched_ml.trainer.lifecycle import trainer

    for value in (float("nan"), float("inf"), -1.0, 0.0):
        with pytest.raises(ConfigError, match="starvation threshold"):
            ReplayConfig(starvation_threshold=value)
        with (
            pytest.raises(ConfigError, match="trainer deadline"),
            trainer(ReplayConfig(variant="classification"), tmp_path, deadline=value),
        ):
            pass
    assert not any(tmp_path.iterdir())  # the trainer was refused before anything was made


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["trainer", "--idle-timeout", "-1"], "argument --idle-timeout: -1 is not a positive"),
        (["trainer", "--divider-quantile", "2"], "divider_quantile must be in (0, 1), not 2.0"),
        (["serve", "--timeout", "-5"], "argument --timeout: -5 is not a number of seconds >= 0"),
        (["serve", "--timeout", "nan"], "argument --timeout: nan is not a number of seconds"),
        (["batsim", "--timeout", "-1"], "argument --timeout: -1 is not a number of seconds"),
        (["collect", "x", "--wait", "-2"], "argument --wait: -2 is not a number of seconds"),
        (["campaign", "c.toml", "--workers", "0"], "argument --workers: 0 is not a whole number"),
        (["paper-results", "--workers", "-1"], "argument --workers: -1 is not a whole number"),
        (
            ["workload", "convert", "t.swf", "-o", "w", "--machine-size", "0"],
            "argument --machine-size: 0 is not a whole number >= 1",
        ),
    ],
)
def test_a_duration_or_count_that_means_nothing_is_refused_by_every_command(
    tmp_path, monkeypatch, capsys, command: list[str], message: str
) -> None:
    """A negative timeout waited forever (ZeroMQ's poll), a trainer's negative idle timeout
    stopped it at once, a divider quantile of 2 was an internal error: each is one line now,
    and nothing is started or written."""
    from batsched_ml.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


def test_an_older_class_clairvoyant_record_still_reads_back() -> None:
    """A run recorded before 0.25 was the forest's default share holds no ``max_samples``
    (None, the former default): its record is read back (``collect``, the probes of the
    results pages), whatever the variant."""
    from batsched_ml.runs.replaying import config_of_record

    record = ReplayConfig(variant="class-clairvoyant").as_dict()
    del record["forest"]["max_samples"]
    config = config_of_record(record)
    assert config.forest.max_samples is None and config.variant == "class-clairvoyant"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--variant", "classification", "--trainer", "inprocess", "--trainer-deadline", "5"],
            "--trainer-deadline goes with a side trainer (--trainer process or ENDPOINT): "
            "--trainer inprocess trains in this process, with no model store and no wait",
        ),
        (
            [
                *("--variant", "classification-idempotent", "--trainer", "inprocess"),
                *("--trainer-store", "models", "--trainer-deadline", "5"),
            ],
            "--trainer-store and --trainer-deadline go with a side trainer",
        ),
        (["--shake-seconds", "30"], "--shake-seconds goes with --shake SEED"),
        (
            [
                *("--variant", "class-clairvoyant", "--trainer", "inprocess"),
                *("--feature-mode", "weekly"),
            ],
            "feature_mode='weekly': not applied by a fcfs (class-clairvoyant) run",
        ),
    ],
)
def test_options_a_run_would_not_use_are_refused(
    tmp_path, capsys, kth_workload, options: list[str], message: str
) -> None:
    """Each of these ran, and gave the files of the run without the option: the side
    trainer's store and wait with the in-process trainer, the amount of a shaking without a
    shaken copy, the features' mode with the true classes (which use no feature; the mode was
    recorded in summary.json all the same, and a campaign's feature_modes multiplied the
    class-clairvoyant runs into identical copies)."""
    from batsched_ml.cli import main

    workload = tmp_path / "head.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 300)))
    out = tmp_path / "out"
    assert main(["replay", str(workload), "-o", str(out), *options, "-q"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # refused with the options: nothing written


def test_the_trainer_s_options_still_go_with_a_run_that_classifies_nothing() -> None:
    """The docker compose set-up gives every variant the trainer's endpoint, store and
    deadline (a base run has no trainer, and stops the one at the endpoint when told)."""
    from batsched_ml.trainer import unused_trainer_options

    assert unused_trainer_options(False, "inprocess", "models", 5.0) is None
    assert unused_trainer_options(True, "process", "models", 5.0) is None
    assert unused_trainer_options(True, "tcp://trainer:28100", "models", 5.0) is None
    assert unused_trainer_options(True, "inprocess", None, None) is None
    assert unused_trainer_options(False, "tcp://trainer:28100", None, None, stop=True) is None
    for choice in ("inprocess", "process"):  # none left running: nothing to stop
        refusal = unused_trainer_options(False, choice, None, None, stop=True)
        assert refusal == (
            "--stop-trainer goes with --trainer ENDPOINT (a running trainer): "
            f"--trainer {choice} leaves none running when the run ends"
        )


def test_a_setting_the_scheduler_would_not_read_leaves_no_run_folder(
    tmp_path, monkeypatch, capsys, kth_workload
) -> None:
    """Refused by the rule the scheduler is made by (``not_applied``), asked before the run's
    folder is claimed: by ``serve`` (which binds and claims nothing then) and by the run
    pipeline itself (campaigns, ``paper-results``), not only by the command line's replay."""
    from batsched_ml.cli import main
    from batsched_ml.runs.pipeline import replay_into

    monkeypatch.chdir(tmp_path)
    refused = ["--variant", "class-clairvoyant", "--feature-mode", "weekly"]
    assert main(["serve", "-o", "served", "--socket", "tcp://127.0.0.1:0", *refused]) == 2
    assert "feature_mode='weekly': not applied by a fcfs (class-clairvoyant)" in (
        capsys.readouterr().err
    )
    workload = tmp_path / "head.json"
    workload.write_text(json.dumps(workload_head(kth_workload, 50)))
    config = ReplayConfig(variant="class-clairvoyant", feature_mode="weekly")
    with pytest.raises(ConfigError, match="feature_mode='weekly': not applied"):
        replay_into(tmp_path / "replayed", workload, config)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["head.json"]
