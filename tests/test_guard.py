"""The ``classification-guarded`` variant: the guard's decision rule on hand-made finished-job
histories, its weeks on and off in a replay and in ``weekly_quality.csv``, its options checked,
and the paper's five variants unchanged by it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from batsched_ml.cli import main
from batsched_ml.errors import ConfigError
from batsched_ml.predict.training import WEEK
from batsched_ml.results.outputs import write_replay
from batsched_ml.results.textfile import write_jobs_csv
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler, run_replay
from batsched_ml.scheduler.guard import FinishedJob, GuardDecision, GuardOptions, decide
from tests.conftest import workload_head
from tests.test_classified import rows, workload
from tests.test_classifier_options import StubTrainer
from tests.test_cli import _one_line_error, write_slice


def done(wait: float, runtime: float = 60.0, small: bool = False, divider: float | None = 100.0):
    return FinishedJob(0.0, wait, runtime, small, divider)


# --- the decision rule ---------------------------------------------------------------------


def test_no_model_is_off_whatever_the_waits() -> None:
    history = [done(5000.0)] * 60
    assert decide(3, history, None, True, slowdown=2.0, min_jobs=50) == GuardDecision(
        3, False, "no model", 60
    )


@pytest.mark.parametrize("previous", [False, True])
def test_too_few_finished_jobs_keep_the_state_in_force(previous: bool) -> None:
    history = [done(5000.0)] * 49
    state = "on" if previous else "off"
    assert decide(4, history, 100.0, previous, slowdown=2.0, min_jobs=50) == GuardDecision(
        4, previous, f"49 finished jobs < 50: stays {state}", 49, divider=100.0
    )


def test_the_pressure_is_the_mean_bounded_slowdown_of_the_first_waits() -> None:
    # runtime 60 s: bounded slowdowns 1, 2, 3 and 6, mean 3; a 10 s job that waited 110 s
    # counts as a 60 s one, (110 + 10) / 60 = 2; one that waited 20 s is at the bound, 1
    history = [done(0.0), done(60.0), done(120.0), done(300.0)]
    on = decide(7, history, 80.0, False, slowdown=3.0, min_jobs=4)
    assert on == GuardDecision(
        7, True, "slowdown 3.000 >= 3, waiting 50.0% >= 5%", 4, 120.0, 3.0, 0.5, 80.0, None
    )
    off = decide(7, history, 80.0, True, slowdown=3.1, min_jobs=4, off_after=1)
    assert off == GuardDecision(7, False, "slowdown 3.000 < 3.1", 4, 120.0, 3.0, 0.25, 80.0, None)
    short = decide(7, [done(110.0, 10.0), done(20.0, 10.0)], 80.0, False, slowdown=1.5, min_jobs=2)
    assert (short.on, short.reason, short.mean_wait, short.slowdown) == (
        True,
        "slowdown 1.500 >= 1.5, waiting 50.0% >= 5%",
        65.0,
        1.5,
    )


def test_a_burst_that_few_jobs_wait_through_moves_the_mean_not_the_share() -> None:
    # 96 jobs that did not wait and 4 of 60 s that waited 3,600 s (bounded slowdown 61): the
    # mean is 3.4, but only 4 % of the jobs waited as long as they ran
    history = [done(0.0)] * 96 + [done(3600.0)] * 4
    burst = decide(9, history, 100.0, False, slowdown=2.0, min_jobs=50)
    assert burst == GuardDecision(
        9, False, "slowdown 3.400 >= 2, waiting 4.0% < 5%", 100, 144.0, 3.4, 0.04, 100.0, None
    )
    # one more waiting job of the same kind instead of one that did not: 5 %, on
    spread = decide(9, [done(0.0)] * 95 + [done(3600.0)] * 5, 100.0, False, slowdown=2, min_jobs=50)
    assert (spread.on, spread.reason, spread.waiting_share) == (
        True,
        "slowdown 4.000 >= 2, waiting 5.0% >= 5%",
        0.05,
    )
    # the share is judged at guard_slowdown: at 61 all four count, at 62 none (and the mean
    # decides first)
    assert decide(9, history, 100.0, False, slowdown=3.4, min_jobs=50, waiting_share=0.04).on
    assert not decide(9, history, 100.0, False, slowdown=3.4, min_jobs=50, waiting_share=0.041).on
    # a share of 0: the mean alone (the rule before the share)
    assert decide(9, history, 100.0, False, slowdown=2.0, min_jobs=50, waiting_share=0.0).on


def test_a_machine_where_jobs_do_not_wait_is_off() -> None:
    history = [done(0.0)] * 99 + [done(60.0)]  # mean bounded slowdown 1.01
    decision = decide(1, history, 100.0, False, slowdown=2.0, min_jobs=50)
    assert (decision.on, decision.reason, decision.slowdown) == (
        False,
        "slowdown 1.010 < 2",
        pytest.approx(1.01),
    )


def test_with_off_after_an_isolated_week_below_keeps_classification_on() -> None:
    """``guard_off_after=2``: on stays on through one week below (said in the reason), goes
    off at the second in a row; off goes on at once; at 1 it is the rule of each week alone."""
    low = [done(0.0)] * 99 + [done(60.0)]  # mean bounded slowdown 1.01: the rule says off
    high = [done(300.0)] * 100  # 6: on
    first = decide(5, low, 100.0, True, slowdown=2.0, min_jobs=50, off_after=2, below=0)
    assert (first.on, first.held, first.reason) == (
        True,
        True,
        "slowdown 1.010 < 2: stays on (1 of 2 weeks below in a row)",
    )
    second = decide(6, low, 100.0, True, slowdown=2.0, min_jobs=50, off_after=2, below=1)
    assert (second.on, second.held, second.reason) == (False, False, "slowdown 1.010 < 2")
    assert decide(6, low, 100.0, False, slowdown=2.0, min_jobs=50, off_after=2).on is False
    back = decide(7, high, 100.0, False, slowdown=2.0, min_jobs=50, off_after=2, below=0)
    assert (back.on, back.held) == (True, False)
    alone = decide(5, low, 100.0, True, slowdown=2.0, min_jobs=50, off_after=1)
    assert alone == decide(5, low, 100.0, True, slowdown=2.0, min_jobs=50, off_after=1, below=3)
    assert decide(5, low, 100.0, True, slowdown=2.0, min_jobs=50) == first  # 2 by default
    assert (alone.on, alone.held) == (False, False)
    with pytest.raises(ValueError, match="guard_off_after must be at least 1, not 0"):
        GuardOptions(guard_off_after=0)


def test_the_guard_counts_the_weeks_below_in_a_row() -> None:
    """The component carries the count from week to week and starts it again after a week on
    by the rule: below, above, below, below with ``guard_off_after=2`` is on, on, on, off."""
    from batsched_ml.protocol.events import Message
    from batsched_ml.scheduler.guard import Guard

    class Model:
        divider = 100.0

    class Classifier:
        model = Model()

    guard = Guard(Classifier(), GuardOptions(guard_off_after=2, guard_min_jobs=1))
    guard.on = True
    low, high = [done(0.0)] * 10, [done(300.0)] * 10
    states = []
    for week, history in enumerate([low, high, low, low], start=1):
        guard._finished.clear()
        guard._finished.extend(
            FinishedJob(week * WEEK - 1.0, f.wait, f.runtime, f.predicted_small, f.divider)
            for f in history
        )
        guard.on_message(Message(now=week * WEEK, events=[]))
        states.append((guard.on, guard.decisions[-1].held))
    assert states == [(True, True), (True, False), (True, True), (False, False)]


def test_false_small_share_counts_the_forests_smalls_against_their_own_divider() -> None:
    history = [
        done(10.0, runtime=150.0, small=True, divider=100.0),  # false small
        done(10.0, runtime=90.0, small=True, divider=100.0),  # true small
        done(10.0, runtime=110.0, small=True, divider=120.0),  # true small (its divider)
        done(10.0, runtime=120.0, small=True, divider=120.0),  # false small: not below it
        done(10.0, runtime=30.0, small=True, divider=None),  # no divider: not judged
        done(10.0, runtime=900.0, small=False, divider=100.0),  # called large: not judged
    ]
    decision = decide(2, history, 100.0, False, slowdown=1.0, min_jobs=1)
    assert decision.false_small_share == 0.5
    assert decision.mean_wait == 10.0
    assert decision.on


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"guard_weeks": 0}, "guard_weeks must be at least 1, not 0"),
        ({"guard_slowdown": 0.5}, "guard_slowdown must be at least 1, not 0.5"),
        ({"guard_slowdown": float("nan")}, "guard_slowdown must be at least 1, not nan"),
        ({"guard_min_jobs": 0}, "guard_min_jobs must be at least 1, not 0"),
        ({"guard_waiting_share": -0.1}, "guard_waiting_share must be between 0 and 1, not -0.1"),
        ({"guard_waiting_share": 1.5}, "guard_waiting_share must be between 0 and 1, not 1.5"),
        (
            {"guard_waiting_share": float("nan")},
            "guard_waiting_share must be between 0 and 1, not nan",
        ),
    ],
)
def test_options_out_of_range(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        GuardOptions(**options)


# --- the options in the run configuration ------------------------------------------------


def test_guard_options_are_typed_and_refused_where_they_do_not_apply() -> None:
    config = ReplayConfig(
        variant="classification-guarded",
        classifier_params={"guard_weeks": "3", "guard_slowdown": "1.5", "threshold": "0.6"},
    )
    assert config.classifier_params == {
        "guard_weeks": 3,
        "guard_slowdown": 1.5,
        "threshold": 0.6,
    }
    assert "guard_weeks=3" in config.title()
    with pytest.raises(ConfigError, match="guard_weeks: the guard's options go with the "):
        ReplayConfig(variant="classification-idempotent", classifier_params={"guard_weeks": 3})
    with pytest.raises(ConfigError, match="the guard has no parameter 'guard_window'"):
        ReplayConfig(variant="classification-guarded", classifier_params={"guard_window": 3})
    with pytest.raises(ConfigError, match="guard_weeks must be at least 1, not 0"):
        ReplayConfig(variant="classification-guarded", classifier_params={"guard_weeks": 0})
    with pytest.raises(ConfigError, match="threshold_rule=cost does not go with"):
        ReplayConfig(variant="classification-guarded", classifier_params={"threshold_rule": "cost"})


def test_the_guarded_scheduler_is_the_classifier_the_safeguard_and_the_guard() -> None:
    config = ReplayConfig(variant="classification-guarded", classifier_params={"guard_weeks": 4})
    scheduler = make_scheduler(config, trainer=StubTrainer({}))
    kinds = [type(c).__name__ for c in scheduler.components]
    assert kinds == ["Classifier", "Safeguard", "Guard"]
    assert scheduler.guard.options == GuardOptions(guard_weeks=4)


# --- weeks on and off in a replay --------------------------------------------------------

W1, W2 = WEEK, 2 * WEEK
# (id, subtime, res, delay, walltime); the stand-in forest calls walltime 3000 small (0.8),
# 9000 large (0.1); the divider is 100 s from week 0 on
WEEKS = workload(
    (1, 0, 4, 1000, 9000),  # week 0, guard off (no finished job yet): large, 0-1000
    (2, 10, 4, 300, 3000),  # called small, queued large (off): waits 990, not killed
    (3, 20, 4, 50, 3000),  # called small, queued large: waits 1280
    (4, W1 + 10, 4, 300, 3000),  # week 1, on (slowdown 9.16): small, killed at the divider
    (5, W1 + 2000, 4, 50, 3000),  # small, runs at once
    (6, W2, 4, 300, 3000),  # week 2, off (slowdown 1): called small, queued large, not killed
)


def guarded(wl, **options):
    config = ReplayConfig(
        variant="classification-guarded",
        classifier_params={"guard_weeks": 1, "guard_min_jobs": 2, **options},
    )
    return run_replay(wl, config, trainer=StubTrainer({3000: 0.8, 9000: 0.1}))


def test_weeks_on_and_off_in_the_schedule_and_weekly_quality(tmp_path: Path) -> None:
    result = guarded(WEEKS, guard_off_after=1)
    assert rows(result) == [
        ("1", "w0", "COMPLETED_SUCCESSFULLY", 0.0, 1000.0),
        ("2", "w0", "COMPLETED_SUCCESSFULLY", 1000.0, 1300.0),
        ("3", "w0", "COMPLETED_SUCCESSFULLY", 1300.0, 1350.0),
        ("4", "w0", "COMPLETED_KILLED", W1 + 10, W1 + 110),
        ("4_r1", "w0_resub", "COMPLETED_SUCCESSFULLY", W1 + 110, W1 + 410),
        ("5", "w0", "COMPLETED_SUCCESSFULLY", W1 + 2000, W1 + 2050),
        ("6", "w0", "COMPLETED_SUCCESSFULLY", W2, W2 + 300),
    ]
    assert result.scheduler.kill_decisions == 1
    assert result.scheduler.guard.demoted == 3  # jobs 2, 3 and 6
    summary = write_replay(result, tmp_path)
    assert summary["classification"]["guard_weeks_on"] == 1
    assert summary["classification"]["guard_demoted_jobs"] == 3
    assert summary["kills"] == 1
    table = pd.read_csv(tmp_path / "weekly_quality.csv")
    guard = table[
        ["week", "guard_on", "guard_reason", "guard_jobs", "guard_mean_wait", "guard_slowdown"]
    ]
    assert guard.to_dict("records") == [
        {
            "week": 0,
            "guard_on": False,
            "guard_reason": "0 finished jobs < 2: stays off",
            "guard_jobs": 0,
            "guard_mean_wait": pytest.approx(float("nan"), nan_ok=True),
            "guard_slowdown": pytest.approx(float("nan"), nan_ok=True),
        },
        {
            "week": 1,
            "guard_on": True,
            "guard_reason": "slowdown 9.156 >= 2, waiting 66.7% >= 5%",
            "guard_jobs": 3,
            "guard_mean_wait": pytest.approx(2270 / 3, abs=1e-6),
            # bounded slowdowns 1 (job 1), 1290 / 300 (job 2) and 1330 / 60 (job 3)
            "guard_slowdown": pytest.approx((1 + 1290 / 300 + 1330 / 60) / 3, abs=1e-6),
        },
        {
            "week": 2,
            "guard_on": False,
            "guard_reason": "slowdown 1.000 < 2",
            "guard_jobs": 2,
            "guard_mean_wait": 0.0,
            "guard_slowdown": 1.0,
        },
    ]
    # week 1 judged the forest's smalls of week 0 (jobs 2 and 3: one false), week 2 those of
    # week 1 (jobs 4 and 5: one false)
    assert table["guard_false_small_share"].tolist()[1:] == [0.5, 0.5]
    # the classifier kept the forest's classes, on or off (the weekly quality is the forest's)
    assert table["FS"].tolist() == [1, 1, 1] and table["TS"].tolist() == [1, 1, 0]


def test_by_default_one_week_below_keeps_classification_on(tmp_path: Path) -> None:
    """The same weeks with the default ``guard_off_after`` (2): week 2 is below, the first in a
    row, so classification stays on and job 6, called small, is killed at the divider."""
    result = guarded(WEEKS)
    assert rows(result)[6:] == [
        ("6", "w0", "COMPLETED_KILLED", W2, W2 + 100),
        ("6_r1", "w0_resub", "COMPLETED_SUCCESSFULLY", W2 + 100, W2 + 400),
    ]
    assert result.scheduler.kill_decisions == 2
    assert result.scheduler.guard.demoted == 2  # jobs 2 and 3
    write_replay(result, tmp_path)
    table = pd.read_csv(tmp_path / "weekly_quality.csv")
    assert table["guard_on"].tolist() == [False, True, True]
    assert table["guard_reason"].tolist()[2] == (
        "slowdown 1.000 < 2: stays on (1 of 2 weeks below in a row)"
    )


def test_a_guard_always_on_is_the_paper_method_and_always_off_is_the_base(kth_workload) -> None:
    """Through the same scheduler code: on every week, the schedule of
    classification-idempotent byte for byte; off every week, the base's starts and no kill."""
    wl = workload_head(kth_workload, 2500)

    def replayed(variant: str, **options):
        return run_replay(wl, ReplayConfig(variant=variant, classifier_params=options))

    paper = replayed("classification-idempotent")
    on = replayed("classification-guarded", guard_slowdown=1.0, guard_min_jobs=1)
    assert on.rows == paper.rows
    assert paper.scheduler.kill_decisions > 0
    off = replayed("classification-guarded", guard_slowdown=1e12)
    assert rows(off) == rows(run_replay(wl, ReplayConfig()))
    assert off.scheduler.kill_decisions == 0
    assert off.scheduler.guard.demoted == sum(r.predicted_small for r in off.scheduler.records)


#: SHA-256 of jobs.csv of the paper's five variants (and classification-idempotent under SPF)
#: on KTH-SP2's first 3,000 jobs, in-process trainer, made by the code before the guarded
#: variant existed: the guard changes none of them
PAPER_DIGESTS = {
    ("fcfs", "base"): "7850c1848dc8b3796508a97dbb738ee2e2682122410214381c2d36f68383eb61",
    ("fcfs", "classification"): "b3f0c60bde4fdc390e70be66c7d9675c942025c3229810d8e3a56726e8bcd881",
    ("fcfs", "classification-idempotent"): (
        "82e70109ad5122b51d42394ad385bcd02965a8925e2a16a9e2f37402fd4a2198"
    ),
    ("fcfs", "class-clairvoyant"): (
        "270207f2128e6fd5c9aa9e18865b97b2ad4d096e61c4af8b512a206cc89c464d"
    ),
    ("fcfs", "runtime-clairvoyant"): (
        "3952440ec1d511e75462bbbdcb5e5af92635cc119016dc3308a5ac9a09181d0b"
    ),
    ("spf", "classification-idempotent"): (
        "f8a8ef949624cc5aac6079b791ad79603cb9d320b0f6adc4cf857e9139a0e2d1"
    ),
}


@pytest.mark.parametrize(("policy", "variant"), sorted(PAPER_DIGESTS))
def test_the_paper_variants_are_unchanged(kth_workload, tmp_path, policy, variant) -> None:
    result = run_replay(
        workload_head(kth_workload, 3000), ReplayConfig(policy=policy, variant=variant)
    )
    write_jobs_csv(tmp_path / "jobs.csv", result.rows)
    digest = hashlib.sha256((tmp_path / "jobs.csv").read_bytes()).hexdigest()
    assert digest == PAPER_DIGESTS[(policy, variant)]


# --- the command line ----------------------------------------------------------------------


def test_the_command_line_refuses_guard_settings_in_one_line(tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "o")
    cases = [
        (
            ["--variant", "classification-idempotent", "--classifier-option", "guard_weeks=3"],
            "guard_weeks: the guard's options go with the classification-guarded variant",
        ),
        (
            ["--variant", "classification-guarded", "--classifier-option", "guard_slowdown=0.5"],
            "guard_slowdown must be at least 1, not 0.5",
        ),
        (
            ["--variant", "classification-guarded", "--classifier-option", "guard_slow=3"],
            "the guard has no parameter 'guard_slow'",
        ),
    ]
    for args, fragment in cases:
        code, err = _one_line_error(["replay", "-o", out, *args], capsys)
        assert code == 2, (args, err)
        assert fragment in err, (args, err)


def test_the_side_trainer_process_gives_the_same_guarded_run(kth_workload, tmp_path: Path, capsys):
    workload = write_slice(kth_workload, tmp_path / "w.json", 3000)
    for trainer in ("process", "inprocess"):
        options = ["--variant", "classification-guarded", "--trainer", trainer, "-q"]
        assert main(["replay", str(workload), *options, "-o", str(tmp_path / trainer)]) == 0
    capsys.readouterr()
    for name in ("jobs.csv", "weekly_quality.csv"):
        mine = (tmp_path / "process" / name).read_bytes()
        assert mine == (tmp_path / "inprocess" / name).read_bytes(), name
    weekly = pd.read_csv(tmp_path / "process" / "weekly_quality.csv")
    assert weekly["guard_reason"].iloc[0] == "no model"
    assert weekly["guard_on"].iloc[1:].all()  # KTH-SP2's first weeks: jobs wait


def test_the_report_shows_the_guards_weeks(kth_workload, tmp_path: Path, capsys) -> None:
    """``report`` over a guarded run draws the guard's weeks: its CSV is the run's decisions
    (weekly_quality.csv's guard columns), with the threshold the run used."""
    trace = write_slice(kth_workload, tmp_path / "w.json", 3000)
    run, report = tmp_path / "run", tmp_path / "report"
    options = ["--classifier-option", "guard_slowdown=3", "--trainer", "inprocess"]
    assert (
        main(
            [
                "replay",
                str(trace),
                "-q",
                "--variant",
                "classification-guarded",
                *options,
                "-o",
                str(run),
            ]
        )
        == 0
    )
    assert main(["report", str(run), "-o", str(report)]) == 0
    (drawn,) = report.glob("*-guard.csv")
    assert (report / drawn.name.replace(".csv", ".png")).is_file()
    shown = pd.read_csv(drawn)
    weekly = pd.read_csv(run / "weekly_quality.csv")
    assert shown["week"].tolist() == weekly["week"].tolist()
    assert shown["guard_on"].tolist() == weekly["guard_on"].tolist()
    assert shown["guard_reason"].tolist() == weekly["guard_reason"].tolist()
    assert set(shown["threshold"]) == {3.0}
    assert shown["guard_on"].any() and not shown["guard_on"].all()  # both kinds of week drawn
    assert drawn.name in (report / "index.html").read_text()  # on the page, with its data
