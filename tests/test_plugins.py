"""Plug-in predictors and queue orders: by import path, by entry point, their parameters, the
command line, and a clear error for each way a name can be wrong."""

from __future__ import annotations

from importlib import metadata

import pytest

from batsched_ml import plugins
from batsched_ml.cli import UsageError, build_parser
from batsched_ml.errors import ConfigError
from batsched_ml.job import Job
from batsched_ml.protocol.events import ExecuteJob, JobCompleted, Message
from batsched_ml.runs.replaying import MeasuredPredictor, ReplayConfig, make_scheduler
from batsched_ml.scheduler.core import BatchScheduler
from batsched_ml.scheduler.policies import get_policy
from batsched_ml.scheduler.predictors import make_predictor, predictor_kwargs
from tests.plugin_parts import HalfRequested, WidestFirst
from tests.test_policies import begins
from tests.test_predictors import submitted

HALF = "tests.plugin_parts:HalfRequested"
WIDEST = "tests.plugin_parts:WidestFirst"


def test_a_plugin_predictor_loads_by_import_path_with_typed_parameters() -> None:
    predictor = make_predictor(HALF, {"factor": "0.25"})  # command-line text, typed
    assert isinstance(predictor, HalfRequested) and predictor.factor == 0.25
    job = Job("w0!a", 0.0, 1, 1000.0, "p", {})
    assert predictor.estimate(job, None) == 250.0
    assert predictor_kwargs(HALF, {"factor": "1"}) == {"factor": 1.0}
    with pytest.raises(ConfigError, match=f"predictor {HALF} has no parameter 'alpha'"):
        predictor_kwargs(HALF, {"alpha": 2})
    with pytest.raises(ConfigError, match=f"predictor {HALF}: factor must be in"):
        predictor_kwargs(HALF, {"factor": 3})


def test_a_plugin_queue_order_loads_by_import_path() -> None:
    order = get_policy(WIDEST)
    assert isinstance(order, WidestFirst)
    scheduler = BatchScheduler(WIDEST, starvation_threshold=None)
    scheduler.handle(Message(0.0, [begins(8)]))
    for t, name, res in ((0.0, "a", 1), (1.0, "b", 4), (2.0, "c", 2), (3.0, "d", 4)):
        scheduler.on_event(submitted(t, name, res, 100.0), t)
    assert [entry.job.name for entry in scheduler.ordered_queue(5.0)] == ["b", "d", "c", "a"]


def test_a_replay_config_runs_a_plugin_predictor_and_order() -> None:
    """4 machines, 3 busy until (predicted) 50 s of a 100 s request: the plug-ins order the
    queue widest first and predict half the request, so the 1-machine job of 80 s requested
    (40 predicted) backfills before the wide head's reservation at 50."""
    config = ReplayConfig(predictor=HALF, policy=WIDEST, predictor_params={"factor": "0.5"})
    assert config.predictor_params == {"factor": 0.5}
    scheduler = make_scheduler(config, audit=True)
    assert isinstance(scheduler.predictor, MeasuredPredictor)
    assert scheduler.predictor.name == HALF  # a plug-in is reported by the name it was given
    first = scheduler.handle(Message(0.0, [begins(4), submitted(0.0, "busy", 3, 100.0)]))
    assert [e.job_id for e in first.events if isinstance(e, ExecuteJob)] == ["w0!busy"]
    reply = scheduler.handle(
        Message(1.0, [submitted(1.0, "narrow", 1, 80.0), submitted(1.0, "wide", 4, 10.0)])
    )
    assert [e.job_id for e in reply.events if isinstance(e, ExecuteJob)] == ["w0!narrow"]
    assert scheduler.reservations == [(1.0, "w0!wide", 50.0)]
    scheduler.handle(
        Message(30.0, [JobCompleted(30.0, "w0!busy", "COMPLETED_SUCCESSFULLY", 0, None)])
    )
    assert scheduler.predictor.inner.observed == [("w0!busy", 30.0)]
    assert scheduler.predictor.predictions == {"w0!busy": 50.0, "w0!narrow": 40.0, "w0!wide": 5.0}


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        ("predictor", "tests.nowhere:Thing", "predictor 'tests.nowhere:Thing': module "),
        ("predictor", "tests.plugin_parts:Missing", "has no attribute 'Missing'"),
        ("predictor", "tests.plugin_parts:NOT_A_CLASS", "42 is not a class with estimate and"),
        ("predictor", "tests.plugin_parts:EstimateOnly", "not a class with estimate and observe"),
        ("predictor", "tests.plugin_parts:", "an import path is 'package.module:Class'"),
        ("predictor", "oracle", "unknown predictor 'oracle' \\(choose from requested, "),
        ("policy", "tests.plugin_parts:HalfRequested", "not a class with key and dynamic"),
        ("policy", "tests.nowhere:Order", "module 'tests.nowhere' not found"),
        ("policy", "lifo", "unknown policy 'lifo' \\(choose from fcfs, wfp, spf, saf, "),
    ],
)
def test_a_bad_plugin_name_is_a_config_error_naming_what_failed(kind, name, message) -> None:
    config = {"predictor": name} if kind == "predictor" else {"policy": name}
    with pytest.raises(ConfigError, match=message):
        ReplayConfig(**config)


def test_a_plugin_whose_module_fails_to_import_says_so(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken_plugin.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="importing 'broken_plugin' failed: No module named"):
        make_predictor("broken_plugin:Thing")


def fake_entry_points(monkeypatch) -> None:
    points = [
        metadata.EntryPoint("half", HALF, "batsched_ml.predictors"),
        metadata.EntryPoint("widest", WIDEST, "batsched_ml.policies"),
        metadata.EntryPoint("gone", "tests.nowhere:Thing", "batsched_ml.predictors"),
    ]

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        return [point for point in points if point.group == group]

    monkeypatch.setattr(plugins, "_entry_points", entry_points)


def test_plugins_load_by_entry_point_name(monkeypatch) -> None:
    fake_entry_points(monkeypatch)
    assert isinstance(make_predictor("half", {"factor": 0.75}), HalfRequested)
    assert isinstance(get_policy("widest"), WidestFirst)
    config = ReplayConfig(predictor="half", policy="widest")
    scheduler = make_scheduler(config)
    assert scheduler.predictor.name == "half" and isinstance(scheduler.policy, WidestFirst)
    with pytest.raises(ConfigError, match=r"entry point 'tests\.nowhere:Thing' of group"):
        make_predictor("gone")


def test_the_command_line_takes_plugin_names_and_refuses_unknown_ones(monkeypatch, capsys) -> None:
    fake_entry_points(monkeypatch)
    parser = build_parser()
    args = parser.parse_args(["replay", "-o", "x", "--policy", WIDEST, "--predictor", HALF])
    assert (args.policy, args.predictor) == (WIDEST, HALF)
    args = parser.parse_args(["replay", "-o", "x", "--policy", "widest", "--predictor", "half"])
    assert (args.policy, args.predictor) == ("widest", "half")
    with pytest.raises(UsageError):
        parser.parse_args(["replay", "-o", "x", "--policy", "nope"])
    assert (
        "argument --policy: invalid choice: 'nope' (choose from 'fcfs', 'saf', 'spf', 'wfp')"
        in capsys.readouterr().err
    )
