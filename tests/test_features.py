"""Features of the size classifier on hand-made job streams, with exact expected values."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from batsched_ml.job import Job
from batsched_ml.predict.features import FEATURE_NAMES, FeatureTracker
from batsched_ml.predict.forest import FastForest, ForestParams
from batsched_ml.predict.training import InProcessTrainer, week_of

# 1996-09-23 14:00:31 Europe/Stockholm (CEST), KTH-SP2's UnixStartTime
START = 843480031


def job(name: str, subtime: float, user: int, res: int, requested: float, **extra) -> Job:
    fields = {
        "id": f"w0!{name}",
        "subtime": subtime,
        "res": res,
        "profile": "p",
        "walltime": requested + 1,
        "user": user,
        "swf_requested_time": requested,
        **extra,
    }
    return Job.from_batsim(f"w0!{name}", fields)


def tracker(mode: str = "online") -> FeatureTracker:
    return FeatureTracker(unix_start_time=START, time_zone_string="Europe/Stockholm", mode=mode)


def named(features: list[float]) -> dict[str, float]:
    assert len(features) == len(FEATURE_NAMES)
    return dict(zip(FEATURE_NAMES, features, strict=True))


def test_calendar_features_in_the_traces_time_zone() -> None:
    t = tracker()
    # + 10 h: 1996-09-24 00:00:31 CEST, a Tuesday, ISO week 39, third quarter
    f = named(t.submit(job("a", 10 * 3600, 1, 4, 600)).features)
    assert (
        f["hour"],
        f["day_of_week"],
        f["day_of_month"],
        f["month"],
        f["week"],
        f["quarter"],
    ) == (
        0,
        1,
        24,
        9,
        39,
        3,
    )
    moment = datetime.fromtimestamp(START + 10 * 3600, ZoneInfo("Europe/Stockholm"))
    assert moment.hour == 0 and moment.utcoffset().total_seconds() == 7200
    # the trace's requested time, not the (raised) walltime; processors
    assert (f["requested_time"], f["requested_processors"]) == (600, 4)


def test_lags_and_shares_use_only_finished_jobs_in_submission_order() -> None:
    t = tracker()
    a = t.submit(job("a", 0, 7, 4, 600))
    b = t.submit(job("b", 10, 7, 4, 600))
    c = t.submit(job("c", 20, 7, 8, 600))
    # nothing finished yet: no lag, no share
    f = named(t.submit(job("d", 30, 7, 4, 600)).features)
    assert [f[f"lag{i}_user_time"] for i in (1, 2, 3)] == [-1, -1, -1]
    assert f["small_share_user_time"] == -1
    # b finishes small, then a large, then c small (finish order b, a, c)
    t.finished(b, 1)
    t.finished(a, 0)
    t.finished(c, 1)
    f = named(t.submit(job("e", 40, 7, 4, 600)).features)
    # (user 7, 600 s): a, b, c in submission order -> previous = c (1), then b (1), then a (0)
    assert [f[f"lag{i}_user_time"] for i in (1, 2, 3)] == [1, 1, 0]
    assert f["small_share_user_time"] == pytest.approx(2 / 3)
    # (user 7, 4 procs): a and b only -> b (1), a (0)
    assert [f[f"lag{i}_user_procs"] for i in (1, 2, 3)] == [1, 0, -1]
    assert f["small_share_user_procs"] == 0.5
    # (user 7, same day): all three
    assert [f[f"lag{i}_user_day"] for i in (1, 2, 3)] == [1, 1, 0]
    # another user sees nothing
    g = named(t.submit(job("f", 50, 8, 4, 600)).features)
    assert g["lag1_user_time"] == -1 and g["small_share_user_procs"] == -1


def test_only_the_last_three_are_kept_and_late_finishers_slot_in_by_submission() -> None:
    t = tracker()
    subs = [t.submit(job(str(i), i, 1, 1, 60)) for i in range(5)]
    for i in (4, 3, 2, 1):
        t.finished(subs[i], i % 2)  # classes: 4->0, 3->1, 2->0, 1->1
    f = named(t.submit(job("x", 10, 1, 1, 60)).features)
    assert [f[f"lag{i}_user_time"] for i in (1, 2, 3)] == [0, 1, 0]  # jobs 4, 3, 2
    t.finished(subs[0], 1)  # older than the three kept: counts in the share only
    f = named(t.submit(job("y", 11, 1, 1, 60)).features)
    assert [f[f"lag{i}_user_time"] for i in (1, 2, 3)] == [0, 1, 0]
    assert f["small_share_user_time"] == pytest.approx(3 / 5)


def test_weekly_mode_hides_this_weeks_finishes_until_the_boundary() -> None:
    t = tracker("weekly")
    a = t.submit(job("a", 0, 1, 1, 60))
    t.finished(a, 1)
    assert named(t.submit(job("b", 5, 1, 1, 60)).features)["lag1_user_time"] == -1
    t.new_week()
    assert named(t.submit(job("c", 7 * 86400, 1, 1, 60)).features)["lag1_user_time"] == 1


def test_divider_is_the_median_of_finished_runtimes_and_labels_strictly_below() -> None:
    trainer = InProcessTrainer(ForestParams(min_train=4, n_estimators=5, n_jobs=1))
    assert trainer.model_for(1).predictor is None and trainer.model_for(1).divider is None
    rng = np.random.default_rng(0)
    runtimes = [10, 20, 30, 40, 50, 60]
    for r in runtimes:
        trainer.add_finished(list(rng.normal(size=len(FEATURE_NAMES))), r)
    model = trainer.model_for(2)
    assert model.divider == 35.0
    assert model.n_train == 6 and model.predictor is not None
    assert len(model.importances) == len(FEATURE_NAMES)
    assert week_of(7 * 86400 - 1) == 0 and week_of(7 * 86400) == 1


def test_too_little_data_or_one_class_means_every_job_is_large() -> None:
    trainer = InProcessTrainer(ForestParams(min_train=100))
    for r in range(50):
        trainer.add_finished([0.0] * len(FEATURE_NAMES), r)
    model = trainer.model_for(1)
    assert model.predictor is None and not model.is_small([0.0] * len(FEATURE_NAMES))


def test_fast_forest_predicts_exactly_what_scikit_learn_predicts() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3000, 20)).astype(np.float32)
    x[:, 5] = rng.integers(0, 4, size=3000)
    y = x[:, 0] + x[:, 5] * 0.3 + rng.normal(size=3000) > 0.5
    forest = RandomForestClassifier(n_estimators=25, max_depth=12, random_state=0, n_jobs=1).fit(
        x, y
    )
    fast = FastForest.from_forest(forest)
    test = rng.normal(size=(2000, 20))
    expected = forest.predict(test)
    assert [fast.predict_one(row) for row in test] == list(expected)
    assert np.allclose([fast.proba(row) for row in test[:200]], forest.predict_proba(test[:200]))
