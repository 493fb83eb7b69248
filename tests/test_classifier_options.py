"""The classifier's options (``--classifier-option``): threshold, small_order and
divider_quantile each change exactly what they say, and the defaults change nothing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from batsched_ml.errors import ConfigError
from batsched_ml.experiments.campaign import RunSpec, expand, load_campaign
from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import FastForest, train_forest
from batsched_ml.predict.params import ForestParams
from batsched_ml.predict.training import InProcessTrainer, WeeklyModel, divider_of, fit_week
from batsched_ml.results.gap import method_label
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler, run_replay
from batsched_ml.scheduler.classified import Classifier
from tests.test_classified import rows, workload


class ProbaByRequest:
    """A stand-in forest: the probability of small is read from the requested time (feature
    0), ``P[walltime]``; ``predict_one`` is the forest's vote on those probabilities."""

    classes = (False, True)

    def __init__(self, p: dict[float, float]) -> None:
        self.p = p

    def proba(self, row):
        small = self.p[row[0]]
        return 1.0 - small, small

    def predict_one(self, row):
        first, second = self.proba(row)
        return second > first


class StubTrainer:
    """Divider 100 s from week 0 on, the stand-in forest."""

    def __init__(self, p: dict[float, float], params: ForestParams | None = None) -> None:
        self.p = p
        if params is not None:
            self.params = params

    def add_finished(self, features, runtime, week=0):
        pass

    def model_for(self, week):
        return WeeklyModel(week, 100.0, ProbaByRequest(self.p))


# walltime -> probability of small
P = {1000: 0.55, 2000: 0.65, 3000: 0.8, 4000: 0.5, 9000: 0.1}

QUEUE = workload(
    (1, 0, 4, 100, 9000),  # large, holds the machine 0-100
    (2, 10, 4, 10, 1000),  # p_small 0.55
    (3, 20, 4, 10, 3000),  # 0.8
    (4, 30, 4, 10, 2000),  # 0.65
    (5, 40, 4, 10, 4000),  # 0.5: a tie, large under the forest's vote
)


def replay(wl=QUEUE, variant="classification-idempotent", **options):
    config = ReplayConfig(policy="fcfs", variant=variant, classifier_params=options)
    return run_replay(wl, config, trainer=StubTrainer(P))


def classes(result) -> dict[str, bool]:
    return {r.job_id.split("!")[1]: r.predicted_small for r in result.scheduler.records}


def starts(result) -> list[tuple[str, float]]:
    return [(row[0], row[3]) for row in rows(result)]


def test_default_threshold_is_the_forest_vote_ties_large() -> None:
    result = replay()
    assert classes(result) == {"1": False, "2": True, "3": True, "4": True, "5": False}
    # small jobs first, in FCFS order; the tie (job 5) is large, after them
    assert starts(result) == [("1", 0.0), ("2", 100.0), ("3", 110.0), ("4", 120.0), ("5", 130.0)]


@pytest.mark.parametrize(
    ("threshold", "small"),
    [
        (0.5, {"2", "3", "4"}),  # the probability path at 0.5: the vote, the tie large
        (0.49, {"2", "3", "4", "5"}),
        (0.6, {"3", "4"}),
        (0.7, {"3"}),
        (0.8, set()),  # strictly above: 0.8 is not small at 0.8
        (0.05, {"1", "2", "3", "4", "5"}),
        (1.0, set()),
    ],
)
def test_threshold_moves_the_classes_only(threshold: float, small: set[str]) -> None:
    result = replay(threshold=str(threshold))
    assert {job for job, is_small in classes(result).items() if is_small} == small
    # the queue order within each class stays the policy's (FCFS), small ones first
    expected = ["1", *sorted(small - {"1"}), *sorted({"2", "3", "4", "5"} - small)]
    assert [job for job, _ in starts(result)] == expected


def test_probability_path_at_one_half_agrees_with_the_vote_on_a_real_forest() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((600, 3)).astype(np.float32)
    y = x[:, 0] + 0.3 * rng.random(600) < 0.6
    params = ForestParams(n_estimators=15, min_samples_leaf=5, n_jobs=1)
    forest = train_forest(x, y, params).predictor
    assert isinstance(forest, FastForest)
    model = WeeklyModel(1, 100.0, forest)
    classifier = Classifier(trainer=StubTrainer(P), small_order="probability")
    classifier.model = model
    probe = rng.random((2000, 3)).astype(np.float32)
    for row in probe.tolist():
        small, rank = classifier._classify(row)
        assert small == model.is_small(row)
        p_large, p_small = model.probabilities(row)
        assert (p_large, p_small) == forest.proba(row)  # classes (False, True): large first
        assert rank == (-round(p_small * 10**9) if small else 1)


def test_small_order_probability_orders_the_small_queue_only() -> None:
    result = replay(small_order="probability")
    assert classes(result) == {"1": False, "2": True, "3": True, "4": True, "5": False}
    # small jobs by decreasing probability: 3 (0.8), 4 (0.65), 2 (0.55); the large one last
    assert starts(result) == [("1", 0.0), ("3", 100.0), ("4", 110.0), ("2", 120.0), ("5", 130.0)]
    # with a threshold too
    result = replay(small_order="probability", threshold="0.6")
    assert starts(result) == [("1", 0.0), ("3", 100.0), ("4", 110.0), ("2", 120.0), ("5", 130.0)]
    assert classes(result)["2"] is False


def test_small_order_probability_ties_follow_the_policy() -> None:
    wl = workload(
        (1, 0, 4, 100, 9000),
        (2, 10, 4, 30, 2000),  # 0.65, the longest
        (3, 20, 4, 10, 3000),  # 0.8
        (4, 30, 4, 20, 2000),  # 0.65
        (5, 40, 4, 5, 2000),  # 0.65, the shortest
    )
    config = ReplayConfig(
        policy="spf",
        variant="classification-idempotent",
        classifier_params={"small_order": "probability"},
    )
    result = run_replay(wl, config, trainer=StubTrainer(P))
    # 3 first (0.8), then the 0.65 jobs by SPF's order (requested time, then submission)
    assert [job for job, _ in starts(result)] == ["1", "3", "2", "4", "5"]


def test_a_small_job_ordered_by_probability_is_still_killed_at_the_divider() -> None:
    wl = workload((1, 0, 4, 300, 3000))  # small (0.8), runs 300 s > divider 100
    result = replay(wl, small_order="probability")
    assert [(r[0], r[2], r[4]) for r in rows(result)] == [
        ("1", "COMPLETED_KILLED", 100.0),
        ("1_r1", "COMPLETED_SUCCESSFULLY", 400.0),
    ]
    assert result.scheduler.kill_decisions == 1


def test_divider_quantile() -> None:
    runtime = np.arange(1.0, 9.0)
    assert divider_of(runtime) == 4.5 == float(np.median(runtime))
    assert divider_of(runtime, 0.25) == 2.75
    x = np.zeros((8, 3), dtype=np.float32)
    model = fit_week(x, runtime, 3, ForestParams(n_estimators=0, divider_quantile=0.25))
    assert model.divider == 2.75 and model.params["divider_quantile"] == 0.25
    model = fit_week(x, runtime, 3, ForestParams(n_estimators=0))
    assert model.divider == 4.5 and "divider_quantile" not in model.params
    trainer = InProcessTrainer(ForestParams(n_estimators=0, divider_quantile=0.75))
    for value in runtime:
        trainer.add_finished([0.0] * len(FEATURE_NAMES), value)
    assert trainer.divider() == 6.25 == trainer.model_for(1).divider


WEEK = 7 * 86_400


def two_weeks():
    """Week 0: runtimes 10, 20, 30, 40; week 1: 15, 25, 35 (one machine each, no waits)."""
    return workload(
        *[(i, i * 1000, 1, runtime, 100) for i, runtime in enumerate((10, 20, 30, 40), 1)],
        *[(i, WEEK + i * 1000, 1, runtime, 100) for i, runtime in enumerate((15, 25, 35), 5)],
    )


@pytest.mark.parametrize(
    ("options", "divider", "small"),
    [
        ({}, 25.0, {"5"}),  # the median of 10..40: 15 small; 25 is not below 25
        ({"divider_quantile": "0.75"}, 32.5, {"5", "6"}),
        ({"divider_quantile": "0.25"}, 17.5, {"5"}),
        ({"divider_quantile": "0.1"}, 13.0, set()),
    ],
)
def test_divider_quantile_moves_the_ceilings_classes(
    options: dict, divider: float, small: set[str]
) -> None:
    config = ReplayConfig(variant="class-clairvoyant", classifier_params=options)
    result = run_replay(two_weeks(), config)
    records = {r.job_id.split("!")[1]: r for r in result.scheduler.records}
    assert {job for job, r in records.items() if r.predicted_small} == small
    assert {r.divider for job, r in records.items() if int(job) >= 5} == {divider}
    assert config.forest.divider_quantile == float(options.get("divider_quantile", 0.5))


def test_options_are_checked_typed_and_written_only_when_set() -> None:
    config = ReplayConfig(
        variant="classification-idempotent",
        classifier_params={"threshold": "0.6", "small_order": "probability"},
    )
    assert config.classifier_params == {"threshold": 0.6, "small_order": "probability"}
    assert config.as_dict()["classifier_params"] == {"small_order": "probability", "threshold": 0.6}
    assert "divider_quantile" not in config.as_dict()["forest"]
    plain = ReplayConfig(variant="classification-idempotent")
    assert "classifier_params" not in plain.as_dict()
    assert "divider_quantile" not in plain.as_dict()["forest"]
    assert plain.as_dict()["forest"]["max_samples"] == 0.25  # the default since issue 20
    quantile = ReplayConfig(variant="classification", classifier_params={"divider_quantile": 0.4})
    assert quantile.as_dict()["forest"]["divider_quantile"] == 0.4
    assert quantile.as_dict()["classifier_params"] == {"divider_quantile": 0.4}
    scheduler = make_scheduler(quantile)
    assert scheduler.classifier.divider_quantile == 0.4  # type: ignore[attr-defined]
    assert scheduler.trainer.params.divider_quantile == 0.4  # type: ignore[attr-defined]
    for variant, params, message in [
        ("classification", {"treshold": "0.6"}, "no parameter 'treshold'"),
        ("classification", {"threshold": "high"}, "is not a number"),
        ("classification", {"threshold": "1.5"}, "threshold must be in [0, 1]"),
        ("classification", {"small_order": "size"}, "small_order must be one of"),
        ("classification", {"divider_quantile": "1"}, "divider_quantile must be in (0, 1)"),
        ("classification", {"trainer": "x"}, "no parameter 'trainer'"),
        ("base", {"threshold": "0.6"}, "goes with the classified variants"),
        ("class-clairvoyant", {"threshold": "0.6"}, "no classifier option but divider"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            ReplayConfig(variant=variant, classifier_params=params)
    with pytest.raises(ValueError, match=r"the trainer's divider is the 0\.5 quantile"):
        Classifier(trainer=InProcessTrainer(), divider_quantile=0.4)


def test_campaign_options(tmp_path: Path) -> None:
    runs = expand(
        ["T"],
        ["fcfs"],
        ["base", "classification-idempotent", "class-clairvoyant"],
        [0],
        classifier_options=["", "threshold=0.6", "divider_quantile=0.4"],
    )
    assert [(r.variant, r.classifier_options) for r in runs] == [
        ("base", ""),
        ("classification-idempotent", ""),
        ("classification-idempotent", "threshold=0.6"),
        ("classification-idempotent", "divider_quantile=0.4"),
        ("class-clairvoyant", ""),
        ("class-clairvoyant", "divider_quantile=0.4"),
    ]
    folders = [r.folder(Path("out")).as_posix() for r in runs]
    assert folders[2] == "out/T/fcfs-classification-idempotent-threshold=0.6"
    assert folders[:2] == ["out/T/fcfs-base", "out/T/fcfs-classification-idempotent"]
    assert runs[2].config().classifier_params == {"threshold": 0.6}
    assert runs[3].config().forest.divider_quantile == 0.4
    assert RunSpec("T", "fcfs", "base") == runs[0]  # the field has a default: old specs hold
    assert method_label({"variant": "classification-idempotent"}) == "classification-idempotent"
    assert (
        method_label(
            {"variant": "classification-idempotent", "classifier_options": "threshold=0.6"}
        )
        == "classification-idempotent + [threshold=0.6]"
    )
    path = tmp_path / "c.toml"
    path.write_text(
        "[campaign]\ntraces=['T']\npolicies=['fcfs']\nvariants=['base', 'class-clairvoyant']\n"
        "classifier_options=[{}, {threshold = 0.6}]\n"
    )
    with pytest.raises(ValueError, match=r"classifier_options .threshold=0\.6. fits no run"):
        load_campaign(path)
    path.write_text(
        "[campaign]\ntraces=['T']\npolicies=['fcfs']\nvariants=['classification']\n"
        "classifier_options=[{}, {small_order = 'probability'}]\n"
    )
    assert [r.classifier_options for r in load_campaign(path).runs] == [
        "",
        "small_order=probability",
    ]


def test_shipped_options_campaign_loads() -> None:
    path = Path(__file__).resolve().parents[1] / "campaigns" / "classifier-options-kth.toml"
    campaign = load_campaign(path)
    assert len({r.folder(campaign.output) for r in campaign.runs}) == len(campaign.runs)


def test_the_side_trainer_process_uses_the_runs_divider_quantile(kth_workload, tmp_path) -> None:
    """--trainer process starts the trainer with --divider-quantile: the same job table and
    classes as in process (and a trainer with another quantile is refused at hello)."""
    import json

    from batsched_ml.cli import main
    from tests.conftest import workload_head

    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_head(kth_workload, 2500)))
    common = ["replay", str(path), "-q", "--variant", "classification-idempotent", "--trees", "4"]
    option = ["--classifier-option", "divider_quantile=0.4"]
    for name, extra in (("inprocess", []), ("process", ["--trainer", "process"])):
        assert main([*common, *option, *extra, "-o", str(tmp_path / name)]) == 0
    assert main([*common, "-o", str(tmp_path / "median")]) == 0
    for file in ("jobs.csv", "classification.csv"):
        inprocess = (tmp_path / "inprocess" / file).read_bytes()
        assert (tmp_path / "process" / file).read_bytes() == inprocess
        assert (tmp_path / "median" / file).read_bytes() != inprocess


def test_max_samples_reaches_the_side_trainer(kth_workload, tmp_path) -> None:
    """--max-samples trains other trees (another job table), the same in process and in a side
    trainer process, and is part of the run's identity: 0.25 by default, and 'all' (the whole
    training set, the former default) is not listed, so runs made before keep their ids."""
    import json

    from batsched_ml.cli import main
    from tests.conftest import workload_head

    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_head(kth_workload, 2500)))
    common = ["replay", str(path), "-q", "--variant", "classification", "--trees", "4"]
    for name, extra in (
        ("inprocess", []),
        ("process", ["--max-samples", "0.25", "--trainer", "process"]),
        ("all", ["--max-samples", "all", "--trainer", "process"]),
        ("all-inprocess", ["--max-samples", "all"]),
    ):
        assert main([*common, *extra, "-o", str(tmp_path / name)]) == 0
    for file in ("jobs.csv", "classification.csv"):
        inprocess = (tmp_path / "inprocess" / file).read_bytes()
        assert (tmp_path / "process" / file).read_bytes() == inprocess
        everything = (tmp_path / "all" / file).read_bytes()
        assert (tmp_path / "all-inprocess" / file).read_bytes() == everything
    assert (tmp_path / "all" / "classification.csv").read_bytes() != (
        tmp_path / "inprocess" / "classification.csv"
    ).read_bytes()
    forest = json.loads((tmp_path / "inprocess" / "run.json").read_text())["config"]["forest"]
    assert forest["max_samples"] == 0.25
    plain = json.loads((tmp_path / "all" / "run.json").read_text())["config"]["forest"]
    assert "max_samples" not in plain
