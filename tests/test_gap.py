"""Input shaking and the closing-the-gap figures (issue 19's yardstick), on hand-made values."""

from __future__ import annotations

import math

import pytest

from batsched_ml.results.gap import estimate, gap_rows, gap_table, share_of_ceiling
from batsched_ml.workload.shake import shake

WORKLOAD = {
    "nb_res": 4,
    "jobs": [
        {"id": 1, "subtime": 0, "res": 1},
        {"id": 2, "subtime": 30, "res": 1},
        {"id": 3, "subtime": 100, "res": 2},
        {"id": 4, "subtime": 1000, "res": 1},
    ],
    "profiles": {},
}


def test_a_shaken_copy_moves_each_job_by_its_drawn_seconds_and_keeps_submission_order():
    # numpy's PCG64 with seed 7 draws [54, 15, 22, 48] in [-60, 60]: 0+54, 30+15, 100+22, 1000+48
    shaken = shake(WORKLOAD, 7)
    assert [(j["id"], j["subtime"]) for j in shaken["jobs"]] == [
        (2, 45),
        (1, 54),
        (3, 122),
        (4, 1048),
    ]
    assert shaken["shaking"] == {"seed": 7, "seconds": 60}
    assert WORKLOAD["jobs"][0]["subtime"] == 0  # the input is left alone
    assert shake(WORKLOAD, 7) == shaken  # the same seed, the same copy
    assert shake(WORKLOAD, 8) != shaken


def test_seed_zero_is_the_trace_itself_and_no_job_moves_before_zero():
    assert shake(WORKLOAD, 0) == WORKLOAD
    for seed in range(1, 30):
        jobs = shake(WORKLOAD, seed, seconds=500)["jobs"]
        assert all(j["subtime"] >= 0 for j in jobs)
        assert sorted(j["id"] for j in jobs) == [1, 2, 3, 4]
        assert [j["subtime"] for j in jobs] == sorted(j["subtime"] for j in jobs)
        original = {j["id"]: j["subtime"] for j in WORKLOAD["jobs"]}
        assert all(abs(j["subtime"] - original[j["id"]]) <= 500 or j["subtime"] == 0 for j in jobs)
    with pytest.raises(ValueError):
        shake(WORKLOAD, -1)


def test_share_of_the_ceiling():
    assert share_of_ceiling(100.0, 70.0, 40.0) == 0.5
    assert share_of_ceiling(100.0, 110.0, 40.0) == pytest.approx(-1 / 6)
    assert share_of_ceiling(100.0, 70.0, 100.0) is None  # no gap to close
    assert share_of_ceiling(100.0, 70.0, 120.0) is None
    assert share_of_ceiling(100.0, 105.0, 99.5) is None  # a gap of 0.5 %: nothing to share
    assert share_of_ceiling(100.0, 99.5, 99.0) == pytest.approx(0.5)  # 1 %: a gap


def test_estimate_is_the_mean_with_a_student_t_interval():
    assert estimate([-0.004]).text() == "0"  # never "-0"
    assert estimate([-0.006]).text() == "-1"
    one = estimate([3.0])
    assert (one.mean, one.low, one.high, one.n) == (3.0, 3.0, 3.0, 1)
    three = estimate([1.0, 2.0, 3.0])
    # sd 1, t(0.975, 2 df) = 4.302653 (tables): half width 4.302653 / sqrt(3)
    assert three.mean == 2.0
    assert three.high - 2.0 == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)
    assert 2.0 - three.low == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)


def test_gap_rows_pair_base_method_and_ceiling_within_each_copy():
    runs = [
        {"trace": "T", "policy": "fcfs", "variant": "base", "copy": 1, "cumulative_bsld": 100},
        {"trace": "T", "policy": "fcfs", "variant": "m", "copy": 1, "cumulative_bsld": 70},
        {"trace": "T", "policy": "fcfs", "variant": "class-clairvoyant", "copy": 1,
         "cumulative_bsld": 40},
        {"trace": "T", "policy": "fcfs", "variant": "base", "copy": 2, "cumulative_bsld": 200},
        {"trace": "T", "policy": "fcfs", "variant": "m", "copy": 2, "cumulative_bsld": 120},
        {"trace": "T", "policy": "fcfs", "variant": "class-clairvoyant", "copy": 2,
         "cumulative_bsld": 100},
        # a copy without its base is never compared with another copy's base
        {"trace": "T", "policy": "fcfs", "variant": "m", "copy": 3, "cumulative_bsld": 1},
    ]  # fmt: skip
    rows = gap_rows(runs)
    assert [r.method for r in rows] == ["base", "m", "class-clairvoyant"]
    m = rows[1]
    assert m.copies == 2
    # gains 0.3 and 0.4; shares 0.5 and 0.8; t(0.975, 1 df) = 12.706205
    assert m.gain.mean == pytest.approx(0.35)
    assert m.gain.high - m.gain.mean == pytest.approx(12.706205 * 0.05, abs=1e-6)
    assert m.share is not None and m.share.mean == pytest.approx(0.65)
    assert m.share.high - m.share.mean == pytest.approx(12.706205 * 0.15, abs=1e-6)
    table = gap_table(rows)
    assert "| T | fcfs | m | n/a | 35 ± 64 | 65 ± 191 | n/a | 2 |" in table
    assert "| T | fcfs | class-clairvoyant | n/a | 55 ± 64 | 100 | n/a | 2 |" in table
    assert "| T | fcfs | base | n/a | 0 | 0 | n/a | 2 |" in table


def test_replay_of_a_shaken_copy_is_its_own_run_and_repeats_byte_for_byte(
    kth_workload, tmp_path
) -> None:
    import json

    from batsched_ml.cli import main
    from tests.conftest import workload_head

    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_head(kth_workload, 400)))
    for name, options in (("a", ["--shake", "5"]), ("b", ["--shake", "5"]), ("plain", [])):
        assert main(["replay", str(path), "-o", str(tmp_path / name), "-q", *options]) == 0
    a, b, plain = (tmp_path / name for name in ("a", "b", "plain"))
    for file in ("jobs.csv", "summary.json"):
        assert (a / file).read_bytes() == (b / file).read_bytes()
    assert (a / "jobs.csv").read_bytes() != (plain / "jobs.csv").read_bytes()
    summary = json.loads((a / "summary.json").read_text())
    assert summary["shaking"] == {"seed": 5, "seconds": 60}
    assert "shaking" not in json.loads((plain / "summary.json").read_text())
    run_a = json.loads((a / "run.json").read_text())
    run_plain = json.loads((plain / "run.json").read_text())
    assert run_a["workload"]["shaking"] == {"seed": 5, "seconds": 60}
    assert run_a["run_id"] != run_plain["run_id"]  # a folder never passes one for the other


def test_a_campaigns_results_give_the_gap_table_with_methods_named_by_what_they_change(
    tmp_path,
) -> None:
    from batsched_ml.results.gap import method_label, write_gap

    def row(variant, copy, value, **more):
        return {"trace": "T", "policy": "spf", "variant": variant, "copy": copy, "seed": 0,
                "predictor": "requested", "correction": "none", "dispatcher": "easy",
                "predictor_options": "", "dispatcher_options": "", "status": "done",
                "cumulative_bsld": value, **more}  # fmt: skip

    records = [
        row("base", 0, 100.0),
        row("base", 1, 200.0),
        row("class-clairvoyant", 0, 40.0),
        row("class-clairvoyant", 1, 100.0),
        row(
            "classification-idempotent",
            0,
            70.0,
            mean_bsld=7.0,
            kills=30,
            jobs=100,
            wasted_share=0.01,
        ),
        row(
            "classification-idempotent",
            1,
            120.0,
            mean_bsld=12.0,
            kills=50,
            jobs=100,
            wasted_share=0.03,
        ),
        row("classification-idempotent", 0, 55.0, predictor="easy++"),
        row("classification-idempotent", 1, 110.0, predictor="easy++"),
        row(
            "classification-idempotent", 2, 1.0, status="failed", wasted_share=0.5
        ),  # never counted
    ]
    assert method_label(records[6]) == "classification-idempotent + easy++"
    assert method_label({**records[4], "seed": 3}) == "classification-idempotent + seed 3"
    path = write_gap(records, tmp_path)
    assert path is not None
    text = path.read_text()
    # shares: 0.5 and 0.8 -> 65 ± 191; with easy++: 0.75 and 0.9 -> 82 ± 95
    # with the mean bounded slowdown and the kills where the records have them
    assert (
        "| T | spf | classification-idempotent | 9.50 | 35 ± 64 | 65 ± 191 | 40 (40 % of jobs) "
        "| 2 |" in text
    )
    assert (
        "| T | spf | classification-idempotent + easy++ | n/a | 45 ± 0 | 82 ± 95 | n/a | 2 |"
        in text
    )
    assert write_gap(records[:2] + records[4:6], tmp_path / "none") is None  # no ceiling
    from batsched_ml.results.gap import rows_from_results

    # the wasted share is a mean over the row's copies too (the failed copy 2 is not one)
    rows = {row.method: row for row in rows_from_results(records)}
    assert rows["classification-idempotent"].wasted_share == pytest.approx(0.02)
    assert rows["classification-idempotent + easy++"].wasted_share is None


def test_the_yardsticks_of_each_setting_stay_apart_and_methods_say_their_forest() -> None:
    """A campaign over list scheduling or the Batsim played has a base and a ceiling for each:
    they are compared within their own setting (it raised "two runs of base" before); a
    method's forest and features other than the defaults are part of its name."""
    from batsched_ml.results.gap import method_label, rows_from_results

    def row(variant, value, **more):
        return {"trace": "T", "policy": "fcfs", "variant": variant, "copy": 0, "seed": 0,
                "status": "done", "cumulative_bsld": value, "backfilling": True,
                "starvation_hours": 72.0, "batsim": 4, **more}  # fmt: skip

    records = [
        row("base", 100.0),
        row("class-clairvoyant", 50.0),
        row("classification", 75.0),
        row("base", 200.0, backfilling=False),
        row("class-clairvoyant", 100.0, backfilling=False),
        row("classification", 125.0, backfilling=False),
        row("base", 100.0, batsim=5, starvation_hours=float("nan")),
        row("base", 100.0, starvation_hours=6.0),
    ]
    rows = {(r.policy, r.method): r for r in rows_from_results(records)}
    assert rows[("fcfs", "classification")].share.mean == 0.5  # (100 - 75) / (100 - 50)
    assert rows[("fcfs (no backfilling)", "classification")].share.mean == 0.75
    assert ("fcfs (starvation none h, Batsim 5)", "base") in rows
    assert ("fcfs (starvation 6 h)", "base") in rows
    assert method_label({**records[2], "trees": 8.0, "window": float("nan")}) == (
        "classification + 8 trees + window all"
    )
    assert method_label({**records[2], "trees": 40, "max_samples": 0.25}) == "classification"
    assert method_label({**records[2], "feature_mode": "weekly"}) == (
        "classification + weekly features"
    )
