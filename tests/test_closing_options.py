"""The classifier options of the second closing-the-gap session (issue 19): the cost-based weekly
threshold (``threshold_rule=cost``), the LEAKY offline features (``leaky_features``), and the
drift monitor (``drift_retrain``): exact values on hand-made job streams."""

from __future__ import annotations

import re

import pytest

from batsched_ml.errors import ConfigError
from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.training import WeeklyModel
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler import classified
from batsched_ml.scheduler.classified import COST_GRID, CostSample, choose_threshold
from tests.test_classified import rows, workload
from tests.test_classifier_options import ProbaByRequest

WEEK = 7 * 86_400
LAG1 = FEATURE_NAMES.index("lag1_user_time")
SHARE = FEATURE_NAMES.index("small_share_user_time")


class RecordingTrainer:
    """Divider 100 s from week 0 on, a stand-in forest reading the probability of small from
    the requested time; keeps the features and runtimes it is given, in finish order."""

    def __init__(self, p: dict[float, float] | None = None) -> None:
        self.p = p or {}
        self.finished: list[tuple[list[float], float, int]] = []
        self.asked: list[int] = []

    def add_finished(self, features, runtime, week=0):
        self.finished.append((list(features), runtime, week))

    def model_for(self, week):
        self.asked.append(week)
        return WeeklyModel(week, 100.0, ProbaByRequest(self.p) if self.p else None)


# --- threshold_rule=cost -------------------------------------------------------------------


def sample(p_small, runtime, res, wait, predicted_small):
    return CostSample(0, p_small, round(1.0 - p_small, 10), runtime, res, wait, predicted_small)


SAMPLES = [
    sample(0.9, 50.0, 1, 0.0, True),  # truly small, called small
    sample(0.3, 20.0, 1, 1000.0, False),  # truly small, called large
    sample(0.6, 1000.0, 5, 0.0, True),  # truly large, called small (killed at 100 s)
    sample(0.2, 5.0, 1, 600.0, False),  # truly small (bound 10 s), called large
    sample(0.1, 400.0, 2, 200.0, False),  # truly large, called large
]


def test_cost_of_each_threshold_by_hand(monkeypatch) -> None:
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 5)
    choice = choose_threshold(SAMPLES, 100.0, 10, 2.0)
    assert choice is not None
    # wait gap: predicted large wait (1000 + 600 + 200) / 3 = 600, predicted small 0
    assert choice.wait_gap == 600.0 and choice.queue == 2.0 and choice.samples == 5
    # a false large costs 600 / max(runtime, 10): 12 (0.9), 30 (0.3), 60 (0.2);
    # a false small 100 / runtime + 100 * res / 10 * 2 * mean(1 / max(runtime, 10)), the mean
    # being (1/50 + 1/20 + 1/1000 + 1/10 + 1/400) / 5 = 0.0347: 3.57 (0.6), 1.638 (0.1)
    others = 2 * (1 / 50 + 1 / 20 + 1 / 1000 + 1 / 10 + 1 / 400) / 5
    fs_c, fs_e = 0.1 + 50 * others, 0.25 + 20 * others
    expected = {0.05: fs_c + fs_e, 0.1: fs_c, 0.15: fs_c, 0.2: fs_c + 60, 0.25: fs_c + 60}
    expected |= {0.3: fs_c + 60 + 30, 0.35: fs_c + 90, 0.55: fs_c + 90, 0.6: 90.0, 0.85: 90.0}
    expected |= {0.9: 102.0, 0.95: 102.0}
    for t, cost in expected.items():
        assert choice.costs[t] == pytest.approx(cost), t
    assert list(choice.costs) == list(COST_GRID)
    # 0.10 and 0.15 cost the same: the one nearer 0.5 wins
    assert choice.threshold == 0.15


def test_without_a_wait_gap_false_larges_are_free_and_the_threshold_rises(monkeypatch) -> None:
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 5)
    same_wait = [CostSample(0, s.p_small, s.p_large, s.runtime, s.res, 300.0, s.predicted_small)
                 for s in SAMPLES]  # fmt: skip
    choice = choose_threshold(same_wait, 100.0, 10, 2.0)
    assert choice is not None and choice.wait_gap == 0.0
    # no large job is called small from 0.6 up (the largest is 0.6, not above 0.6): cost 0;
    # 0.6 is the one nearest 0.5
    assert choice.threshold == 0.6 and choice.costs[0.6] == 0.0 and choice.costs[0.55] > 0


def test_a_kill_budget_keeps_the_false_smalls_down(monkeypatch) -> None:
    """kill_budget: only thresholds with at most that share of false smalls compete."""
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 5)
    # up to 0.55 the 0.6 job (truly large) is called small; at 0.05 the 0.1 job too
    free = choose_threshold(SAMPLES, 100.0, 10, 2.0)
    assert free is not None and free.threshold == 0.15  # one false small in five: 20 %
    loose = choose_threshold(SAMPLES, 100.0, 10, 2.0, kill_budget=0.25)
    assert loose is not None and loose.threshold == 0.15  # 20 % is within 25 %
    tight = choose_threshold(SAMPLES, 100.0, 10, 2.0, kill_budget=0.1)
    # none allowed: from 0.6 up, of costs 90 (0.6 to 0.85) and 102; 0.6 nearest 0.5
    assert tight is not None and tight.threshold == 0.6
    assert tight.costs == free.costs  # the costs are the same; only the choice is bounded


def test_a_kill_budget_no_threshold_meets_takes_the_fewest_false_smalls(monkeypatch) -> None:
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 5)
    # a truly large job the forest is sure is small: a false small at every threshold
    sure = [*SAMPLES, sample(0.99, 5000.0, 1, 0.0, True)]
    choice = choose_threshold(sure, 100.0, 10, 2.0, kill_budget=0.1)  # 0.6 of 6 jobs: none
    assert choice is not None
    # the fewest false smalls (1, from 0.6 up), then the least cost: 0.6 to 0.85 equal, 0.6
    assert choice.threshold == 0.6
    assert choice.costs[0.6] < choice.costs[0.9]


def test_a_kill_budget_needs_the_cost_rule() -> None:
    with pytest.raises(ValueError, match="kill_budget bounds threshold_rule=cost"):
        classified.Classifier(kill_budget=0.2)
    with pytest.raises(ValueError, match="kill_budget must be in"):
        classified.Classifier(threshold_rule="cost", kill_budget=1.5)


def test_the_samples_must_tell(monkeypatch) -> None:
    assert choose_threshold(SAMPLES, 100.0, 10, 2.0) is None  # fewer than 100 samples
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 5)
    assert choose_threshold(SAMPLES, None, 10, 2.0) is None  # no divider yet
    all_large = [CostSample(0, 0.1, 0.9, 50.0, 1, 0.0, False)] * 5
    assert choose_threshold(all_large, 100.0, 10, 2.0) is None  # no predicted small job


# walltime -> probability of small (requested time is feature 0)
P = {1000: 0.55, 2000: 0.3, 3000: 0.8, 9000: 0.1}


def cost_stream():
    """Week 0: six jobs on the whole machine, one after the other (so they wait); week 1: two
    jobs whose class depends on the threshold chosen at the boundary."""
    return workload(
        (1, 0, 4, 300, 9000),  # p 0.1, large, runs 0-300
        (2, 10, 4, 20, 2000),  # p 0.3, truly small, called large: waits behind 3, 4 and 6
        (3, 20, 4, 50, 1000),  # p 0.55, small
        (4, 30, 4, 40, 3000),  # p 0.8, small
        (5, 40, 4, 30, 2000),  # p 0.3, truly small, called large
        (6, 50, 4, 500, 1000),  # p 0.55, truly large, called small: killed at 100 s
        (7, WEEK + 10, 4, 20, 2000),  # week 1, p 0.3
        (8, WEEK + 100, 4, 20, 1000),  # week 1, p 0.55
    )


def test_cost_rule_in_a_replay(monkeypatch) -> None:
    monkeypatch.setattr(classified, "COST_MIN_SAMPLES", 6)
    config = ReplayConfig(
        variant="classification-idempotent", classifier_params={"threshold_rule": "cost"}
    )
    result = run_replay(cost_stream(), config, trainer=RecordingTrainer(P))
    classifier = result.scheduler.classifier  # type: ignore[attr-defined]
    # week 0: the paper's vote (0.5): 3, 4 and 6 small, in FCFS order after job 1; 6 is
    # killed at the divider and resubmitted large with its submission time (after 2 and 5)
    assert [(r[0], r[2], r[3], r[4]) for r in rows(result)] == [
        ("1", "COMPLETED_SUCCESSFULLY", 0.0, 300.0),
        ("3", "COMPLETED_SUCCESSFULLY", 300.0, 350.0),
        ("4", "COMPLETED_SUCCESSFULLY", 350.0, 390.0),
        ("6", "COMPLETED_KILLED", 390.0, 490.0),
        ("2", "COMPLETED_SUCCESSFULLY", 490.0, 510.0),
        ("5", "COMPLETED_SUCCESSFULLY", 510.0, 540.0),
        ("6_r1", "COMPLETED_SUCCESSFULLY", 540.0, 1040.0),
        ("7", "COMPLETED_SUCCESSFULLY", WEEK + 10.0, WEEK + 30.0),
        ("8", "COMPLETED_SUCCESSFULLY", WEEK + 100.0, WEEK + 120.0),
    ]
    weeks = [(c.week, c.threshold, c.samples) for c in classifier.threshold_choices]
    assert weeks == [(0, 0.5, 0), (1, 0.55, 6)]
    week1 = classifier.threshold_choices[1]
    # first waits: called large 0 (1), 480 (2), 470 (5); called small 280, 320, 340 (3, 4, 6)
    gap = (0 + 480 + 470) / 3 - (280 + 320 + 340) / 3
    assert week1.wait_gap == pytest.approx(gap)
    assert week1.queue == pytest.approx((0 + 0 + 1 + 2 + 3 + 4) / 6)  # waiting at each submission
    others = week1.queue * (1 / 300 + 1 / 20 + 1 / 50 + 1 / 40 + 1 / 30 + 1 / 500) / 6
    false_small = {1: 100 / 300 + 100 * others, 6: 100 / 500 + 100 * others}  # 4 of 4 machines
    false_large = {2: gap / 20, 3: gap / 50, 4: gap / 40, 5: gap / 30}
    assert week1.costs[0.05] == pytest.approx(false_small[1] + false_small[6])
    assert week1.costs[0.1] == pytest.approx(false_small[6])
    assert week1.costs[0.3] == pytest.approx(false_small[6] + false_large[2] + false_large[5])
    assert week1.costs[0.55] == pytest.approx(false_large[2] + false_large[5] + false_large[3])
    assert week1.costs[0.8] == pytest.approx(sum(false_large.values()))
    # job 8 (p 0.55) is large at 0.55, where the vote made it small
    records = {r.job_id.split("!")[1]: r.predicted_small for r in classifier.records}
    assert records == {"1": False, "2": False, "3": True, "4": True, "5": False, "6": True,
                       "7": False, "8": False}  # fmt: skip
    # the default takes the forest's vote and keeps no sample
    plain = run_replay(
        cost_stream(),
        ReplayConfig(variant="classification-idempotent"),
        trainer=RecordingTrainer(P),
    )
    plain_classifier = plain.scheduler.classifier  # type: ignore[attr-defined]
    assert plain_classifier.threshold_choices == [] and plain_classifier._cost_samples == []
    assert {r.job_id.split("!")[1]: r.predicted_small for r in plain_classifier.records}["8"]


# --- leaky_features ------------------------------------------------------------------------


def leaky_stream():
    """One user, one category (same request, same processors, same day); jobs 2 and 3 are
    submitted while job 1 (small: 50 s < 100 s) and job 2 (large) still run."""
    return workload(
        (1, 0, 1, 50, 1000),
        (2, 10, 1, 300, 1000),
        (3, 20, 1, 35, 1000),  # ends at 55
        (4, 400, 1, 30, 1000),  # everything before it has finished
        (5, WEEK + 10, 1, 30, 1000),  # week 1
    )


@pytest.mark.parametrize(
    ("leaky", "expected"),
    [
        (
            "off",  # finished jobs only: job 2 and 3 see nothing, job 4 all three
            [(-1, -1, -1, -1), (-1, -1, -1, -1), (-1, -1, -1, -1), (1, 0, 1, 2 / 3)],
        ),
        (
            "all",  # LEAKY: every earlier job, finished or not
            [(-1, -1, -1, -1), (1, -1, -1, 1.0), (0, 1, -1, 0.5), (1, 0, 1, 2 / 3)],
        ),
        (
            "weekly",  # LEAKY: earlier weeks' jobs only: nothing in week 0
            [(-1, -1, -1, -1), (-1, -1, -1, -1), (-1, -1, -1, -1), (-1, -1, -1, -1)],
        ),
    ],
)
def test_leaky_features_week_zero(leaky: str, expected: list[tuple]) -> None:
    trainer = RecordingTrainer()
    params = {} if leaky == "off" else {"leaky_features": leaky}
    config = ReplayConfig(variant="classification", classifier_params=params)
    run_replay(leaky_stream(), config, trainer=trainer)
    # finish order: 1 (at 50), 3 (55), 2 (310), 4 (430), 5
    by_order = [(*f[LAG1 : LAG1 + 3], f[SHARE]) for f, _r, _w in trainer.finished]
    runtimes = [r for _f, r, _w in trainer.finished]
    assert runtimes == [50.0, 35.0, 300.0, 30.0, 30.0]
    got = {1: by_order[0], 3: by_order[1], 2: by_order[2], 4: by_order[3]}
    assert [got[1], got[2], got[3], got[4]] == [tuple(map(float, e)) for e in expected]
    # job 5, in week 1, sees the four jobs of week 0 in every mode
    assert by_order[4] == (1.0, 1.0, 0.0, 0.75)


def test_leaky_options_are_checked_and_labelled() -> None:
    config = ReplayConfig(variant="classification", classifier_params={"leaky_features": "all"})
    assert config.as_dict()["classifier_params"] == {"leaky_features": "all"}
    assert "leaky_features=all" in config.title()
    for variant, params, message in [
        ("classification", {"leaky_features": "yes"}, "leaky_features must be one of"),
        ("classification", {"threshold_rule": "best"}, "threshold_rule must be one of"),
        ("classification", {"cost_weeks": "0"}, "cost_weeks must be at least 1"),
        ("class-clairvoyant", {"leaky_features": "all"}, "no classifier option but divider"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            ReplayConfig(variant=variant, classifier_params=params)


# --- drift_retrain -------------------------------------------------------------------------


class SmallIfRequestAtMost:
    def __init__(self, limit: float) -> None:
        self.limit = limit

    def predict_one(self, row):
        return row[0] <= self.limit


class DriftTrainer:
    """The first model calls a request of 1,000 s small, every later one large."""

    trains_any_time = True

    def __init__(self) -> None:
        self.asked: list[int] = []

    def add_finished(self, features, runtime, week=0):
        pass

    def model_for(self, week):
        self.asked.append(week)
        limit = 1000 if len(self.asked) == 1 else 500
        return WeeklyModel(week, 100.0, SmallIfRequestAtMost(limit))


DAY = 86_400


def drift_stream():
    """Day 0: 60 jobs of 50 s requesting 1,000 s (small, and called small); from day 2 on,
    60 jobs of 150 s requesting the same (large, called small by the first model); one
    processor each, every 100 s: no job waits."""
    good = [(i, 1000 + 100 * i, 1, 50, 1000) for i in range(1, 61)]
    bad = [(60 + k, 2 * DAY + 100 * (k - 1), 1, 150, 1000) for k in range(1, 61)]
    return workload(*good, *bad)


def test_drift_monitor_retrains_when_the_days_error_jumps() -> None:
    trainer = DriftTrainer()
    config = ReplayConfig(variant="classification", classifier_params={"drift_retrain": "true"})
    result = run_replay(drift_stream(), config, trainer=trainer)
    classifier = result.scheduler.classifier  # type: ignore[attr-defined]
    # the 50th wrong job (the day's 50th judged job, all wrong) ends at 2 days + 4,900 + 150 s:
    # the day's error 1.0 against 50 / 110 overall, a jump above 0.1
    assert classifier.drift_retrains == [(2 * DAY + 5050.0, 1.0, 50 / 110)]
    assert trainer.asked == [0, 0]  # week 0's model, then the early one
    small = {int(r.job_id.split("!")[1]) for r in classifier.records if r.predicted_small}
    # job 111 was submitted (at + 5,000 s) before the retraining; 112-120 after it
    assert small == set(range(1, 112))
    plain_trainer = DriftTrainer()
    plain = run_replay(
        drift_stream(), ReplayConfig(variant="classification"), trainer=plain_trainer
    )
    assert plain_trainer.asked == [0]
    assert plain.scheduler.classifier.drift_retrains == []  # type: ignore[attr-defined]
    records = plain.scheduler.classifier.records  # type: ignore[attr-defined]
    assert all(r.predicted_small for r in records)


def test_drift_monitor_needs_a_trainer_that_trains_any_time() -> None:
    from batsched_ml.scheduler.classified import Classifier

    with pytest.raises(ValueError, match="the in-process trainer only"):
        Classifier(trainer=RecordingTrainer(), drift_retrain=True)
    Classifier(drift_retrain=True)  # the in-process trainer
    for params, message in [
        ({"drift_jump": "1.5"}, "drift_jump must be in (0, 1)"),
        ({"drift_retrain": "maybe"}, "is not true or false"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            ReplayConfig(variant="classification", classifier_params=params)


def test_shipped_campaign_loads() -> None:
    from pathlib import Path

    from batsched_ml.experiments.campaign import load_campaign

    path = Path(__file__).resolve().parents[1] / "campaigns" / "closing-the-gap-options.toml"
    campaign = load_campaign(path)
    assert len(campaign.runs) == 108
    assert len({r.folder(campaign.output) for r in campaign.runs}) == 108
    options = {r.classifier_options for r in campaign.runs}
    assert options == {
        "",
        "threshold_rule=cost",
        "threshold=0.05",
        "threshold=0.0",
        "leaky_features=all",
        "leaky_features=weekly",
        "drift_retrain=true",
    }
