"""Runtime predictors, walltime correction and dispatchers of the related work (issue 8, first
part): exact values on hand-made job streams."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from batsched_ml.alloc import MachineSet
from batsched_ml.job import Job
from batsched_ml.protocol.events import ExecuteJob, JobSubmitted, Message
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler
from batsched_ml.scheduler.core import EasyScheduler
from batsched_ml.scheduler.correction import Correction, get_correction
from batsched_ml.scheduler.easy import easy_pass
from batsched_ml.scheduler.predictors import EasyPlusPlus, FixedPrediction
from tests.conftest import waiting
from tests.test_policies import begins


def job(name: str, user: int, walltime: float | None = 1000.0) -> Job:
    fields = {"id": name, "subtime": 0, "res": 1, "profile": "p", "user": user}
    return Job(name, 0.0, 1, walltime, "p", fields)


def submitted(t: float, name: str, res: int, walltime: float, user: int = 1) -> JobSubmitted:
    data = {"id": f"w0!{name}", "subtime": t, "res": res, "profile": "p", "walltime": walltime}
    return JobSubmitted(t, f"w0!{name}", {**data, "user": user})


# --- predictors -----------------------------------------------------------------------------


def test_easy_plus_plus_is_the_mean_of_the_user_s_last_two_runtimes_capped_by_the_request() -> None:
    p = EasyPlusPlus()
    assert p.estimate(job("a", 1), None) == 1000.0  # no history: the requested time
    p.observe(job("a", 1), 100.0)
    assert p.estimate(job("b", 1), None) == 100.0  # one runtime known
    p.observe(job("b", 1), 300.0)
    assert p.estimate(job("c", 1), None) == 200.0
    p.observe(job("c", 1), 500.0)
    assert p.estimate(job("d", 1), None) == 400.0  # the last two: 300 and 500
    assert p.estimate(job("e", 1, walltime=150.0), None) == 150.0  # the cap
    assert p.estimate(job("f", 2), None) == 1000.0  # another user: no history
    p.observe(job("g", 3), 0.0)
    assert p.estimate(job("h", 3), None) == 1.0  # never zero
    assert p.backfill_shortest_first


def test_fixed_prediction_is_ten_minutes_capped_by_the_request() -> None:
    p = FixedPrediction()
    assert p.estimate(job("a", 1), None) == 600.0
    assert p.estimate(job("b", 1, walltime=100.0), None) == 100.0
    assert p.estimate(job("c", 1, walltime=None), None) == 600.0


# --- walltime correction --------------------------------------------------------------------


def test_simple_correction_adds_an_hour_each_time_within_a_minute_of_the_estimate() -> None:
    c = Correction("simple")
    assert c.correct(600.0, 500.0, 0, None) == (600.0, 0)  # 100 s left: not yet
    assert c.correct(600.0, 541.0, 0, None) == (4200.0, 1)  # 59 s left
    assert c.correct(4200.0, 4150.0, 1, None) == (7800.0, 2)
    assert c.correct(600.0, 8000.0, 0, None) == (11400.0, 3)  # overdue by far: until ahead
    assert c.correct(600.0, 7 * 86400.0 + 1, 0, None) == (600.0, 0)  # past the 7-day limit
    # never beyond the requested time; a job at its limit stays there
    assert c.correct(600.0, 600.0, 0, 5000.0) == (4200.0, 1)
    assert c.correct(4200.0, 4200.0, 1, 5000.0) == (5000.0, 2)
    assert c.correct(5000.0, 5000.0, 2, 5000.0) == (5000.0, 2)


def test_power_correction_adds_15_times_2_to_the_i_minus_2_minutes() -> None:
    c = Correction("power")
    assert [c.step(i) for i in (1, 2, 3, 4)] == [900.0, 1800.0, 3600.0, 7200.0]
    assert c.correct(600.0, 600.0, 0, None) == (1500.0, 1)
    assert c.correct(1500.0, 1500.0, 1, None) == (3300.0, 2)
    assert c.correct(600.0, 4000.0, 0, None) == (6900.0, 3)  # 1500, 3300, then 6900
    assert get_correction("none") is None
    with pytest.raises(ValueError, match="unknown correction 'double'"):
        get_correction("double")


def reservations_with(correction: str) -> tuple[list, EasyScheduler]:
    """4 machines; A takes all four (predicted 10 min, requested 100,000 s); B arrives at
    t=650, after A's prediction: where does B's reservation go?"""
    config = ReplayConfig(predictor="fixed", correction=correction)
    scheduler = make_scheduler(config, audit=True)
    scheduler.handle(Message(0.0, [begins(4), submitted(0.0, "A", 4, 100_000.0)]))
    scheduler.handle(Message(650.0, [submitted(650.0, "B", 1, 100_000.0)]))
    return scheduler.reservations, scheduler


def test_the_scheduler_corrects_a_running_job_past_its_prediction() -> None:
    reservations, _ = reservations_with("none")
    assert reservations == [(650.0, "w0!B", 650.0)]  # A expected to end at once
    reservations, scheduler = reservations_with("simple")
    assert reservations == [(650.0, "w0!B", 4200.0)]  # 600 + 1 h
    running = scheduler.running["w0!A"]
    assert (running.est, running.corrections) == (4200.0, 1)
    assert scheduler._ends == [(4200.0, 0, 4)]
    reservations, _ = reservations_with("power")
    assert reservations == [(650.0, "w0!B", 1500.0)]  # 600 + 15 min


# --- backfilling order and dispatchers ------------------------------------------------------


def test_sjbf_backfills_the_shortest_estimate_first() -> None:
    # 2 machines, one free; a running job ends at 100; head H needs both
    queue = [waiting("H", 2, 50), waiting("long", 1, 90), waiting("short", 1, 10)]
    ends = [(100.0, 0, 1)]
    started, reservation = easy_pass(queue, MachineSet([(1, 1)]), ends, 0.0)
    assert [e.job.id for e, _ in started] == ["long"] and reservation.shadow == 100.0
    started, _ = easy_pass(queue, MachineSet([(1, 1)]), ends, 0.0, shortest_first=True)
    assert [e.job.id for e, _ in started] == ["short"]


def decisions(dispatcher: str) -> list[str]:
    """2 machines, one busy until 1000; X (2 machines, 10 s) and Y (1 machine, 100 s) wait."""
    scheduler = make_scheduler(ReplayConfig(dispatcher=dispatcher))
    scheduler.handle(Message(0.0, [begins(2), submitted(0.0, "busy", 1, 1000.0)]))
    reply = scheduler.handle(
        Message(5.0, [submitted(5.0, "X", 2, 10.0), submitted(5.0, "Y", 1, 100.0)])
    )
    return [e.job_id for e in reply.events if isinstance(e, ExecuteJob)]


def test_dispatchers_order_by_prediction_without_backfilling() -> None:
    assert decisions("easy") == ["w0!Y"]  # FCFS: X blocked, Y backfilled (ends before 1000)
    assert decisions("sjf") == []  # X first (shortest), it does not fit: the pass stops
    assert decisions("ljf") == ["w0!Y"]  # Y first (longest), it fits; then X does not


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"variant": "runtime-clairvoyant", "predictor": "easy++"},
            "--predictor does not go with the runtime-clairvoyant variant",
        ),
        (
            {"variant": "runtime-clairvoyant", "predictor_params": {"no_walltime_estimate": 9}},
            "--predictor-option does not go with the runtime-clairvoyant variant",
        ),
        ({"dispatcher": "sjf", "policy": "spf"}, "the sjf dispatcher orders the queue itself"),
        (
            {"dispatcher": "prb", "variant": "classification", "policy": "wfp"},
            "the prb dispatcher orders the queue itself",
        ),
        ({"dispatcher": "fifo"}, "unknown dispatcher 'fifo'"),
        ({"predictor": "oracle"}, "unknown predictor 'oracle'"),
        ({"policy": "lifo"}, "unknown policy 'lifo'"),
    ],
)
def test_combinations_that_make_no_sense_are_refused_clearly(config, message) -> None:
    with pytest.raises(ValueError, match=message):
        ReplayConfig(**config)


class Waiting:
    def __init__(self, name: str, queue: int, subtime: float, res: int, est: float, seq: int):
        self.job = Job(name, subtime, res, est, "p", {"queue": queue})
        self.name, self.subtime, self.res, self.rank_est, self.seq = name, subtime, res, est, seq


def test_prb_orders_by_urgency_then_demand_with_expected_waits_learnt_per_queue() -> None:
    from batsched_ml.scheduler.policies import PriorityRule

    rule = PriorityRule()
    assert rule.expected_wait(1) is None  # nothing learnt: every urgency is 0
    for queue, subtime, start in ((1, 0, 100), (1, 0, 300), (2, 0, 1000)):
        rule.started(Waiting("x", queue, subtime, 1, 1, 0), start)
    assert rule.expected_wait(1) == 200.0 and rule.expected_wait(2) == 1000.0
    assert rule.expected_wait(3) == pytest.approx(1400 / 3)  # unseen queue: the overall mean
    jobs = [
        Waiting("a", 1, 800, 2, 100, 0),  # wait 200 / 200 = 1.0, demand 200
        Waiting("b", 2, 0, 1, 100, 1),  # wait 1000 / 1000 = 1.0, demand 100
        Waiting("c", 2, 500, 1, 10, 2),  # wait 500 / 1000 = 0.5
    ]
    ordered = sorted(jobs, key=lambda j: rule.key(j, 1000.0))
    assert [j.name for j in ordered] == ["b", "a", "c"]


def test_the_prb_pass_starts_every_job_that_fits_and_reserves_nothing() -> None:
    queue = [waiting("wide", 3, 10), waiting("one", 1, 500), waiting("two", 1, 500)]
    started, reservation = easy_pass(queue, MachineSet([(0, 1)]), [(100.0, 0, 2)], 0.0, greedy=True)
    assert [e.job.id for e, _ in started] == ["one", "two"] and reservation is None
    # EASY reserves for "wide" at 100 with one machine to spare: only "one" may use it
    started, reservation = easy_pass(queue, MachineSet([(0, 1)]), [(100.0, 0, 2)], 0.0)
    assert [e.job.id for e, _ in started] == ["one"]
    assert (reservation.shadow, reservation.extra) == (100.0, 1)


def test_under_prb_a_starving_head_still_gets_its_reservation() -> None:
    config = ReplayConfig(dispatcher="prb", starvation_threshold=100.0)
    scheduler = make_scheduler(config, audit=True)
    scheduler.handle(Message(0.0, [begins(2), submitted(0.0, "busy", 1, 1000.0)]))
    scheduler.handle(Message(10.0, [submitted(10.0, "wide", 2, 50.0)]))
    # at 200 "wide" has waited 190 s > 100 s: a one-machine job must not pass it
    reply = scheduler.handle(Message(200.0, [submitted(200.0, "small", 1, 5000.0)]))
    assert [e for e in reply.events if isinstance(e, ExecuteJob)] == []
    assert scheduler.reservations[-1] == (200.0, "w0!wide", 1000.0)
    # before it starves, the greedy pass lets the small job through
    scheduler = make_scheduler(ReplayConfig(dispatcher="prb"), audit=True)
    scheduler.handle(Message(0.0, [begins(2), submitted(0.0, "busy", 1, 1000.0)]))
    scheduler.handle(Message(10.0, [submitted(10.0, "wide", 2, 50.0)]))
    reply = scheduler.handle(Message(200.0, [submitted(200.0, "small", 1, 5000.0)]))
    assert [e.job_id for e in reply.events if isinstance(e, ExecuteJob)] == ["w0!small"]


# --- prediction quality (seed 003, equations 6-8) -------------------------------------------


def test_apa_mae_and_ur_by_hand() -> None:
    from batsched_ml.results.metrics import prediction_quality

    quality = prediction_quality([50, 200, 100, 0], [100, 100, 100, 10])
    # APA: 50/100, 100/200, 1, 0/10 -> mean 0.5; MAE: (50 + 100 + 0 + 10) / 4; UR: 2 of 4
    assert quality == {"jobs": 4, "APA": 0.5, "MAE": 40.0, "UR": 0.5}
    assert prediction_quality([], [])["APA"] is None


def test_a_replay_reports_each_prediction_and_its_quality(kth_workload, tmp_path) -> None:
    from batsched_ml.results.metrics import prediction_quality
    from batsched_ml.results.outputs import write_replay
    from batsched_ml.runs.replaying import run_replay
    from tests.conftest import workload_head

    workload = workload_head(kth_workload, 800)
    summary = write_replay(run_replay(workload, ReplayConfig(predictor="easy++")), tmp_path / "pp")
    table = pd.read_csv(tmp_path / "pp" / "predictions.csv")
    assert len(table) == 800 and summary["prediction"]["jobs"] == 800
    expected = prediction_quality(table["predicted"].to_numpy(), table["actual"].to_numpy())
    assert {k: summary["prediction"][k] for k in ("APA", "MAE", "UR")} == {
        k: expected[k] for k in ("APA", "MAE", "UR")
    }
    assert 0 < summary["prediction"]["UR"] < 1 and summary["prediction"]["predictor"] == "easy++"
    timing = json.loads((tmp_path / "pp" / "timing.json").read_text())
    assert 0 < timing["predict_us_per_job"] < 1000
    # a user's first job is predicted with its requested time
    first = workload["jobs"][0]
    row = table[table["job_id"] == f"w0!{first['id']}"].iloc[0]
    assert row["predicted"] == first["walltime"]
    clairvoyant = write_replay(
        run_replay(workload, ReplayConfig(predictor="actual")), tmp_path / "cl"
    )
    assert clairvoyant["prediction"]["APA"] == 1.0 and clairvoyant["prediction"]["UR"] == 0.0


def test_adaboost_retrains_on_its_schedule_and_predicts_what_its_model_says() -> None:
    from sklearn.ensemble import AdaBoostRegressor

    from batsched_ml.scheduler.predictors import AdaBoostPrediction

    def user_job(name: str, user: int, subtime: float, walltime: float = 5000.0) -> Job:
        fields = {"user": user, "group": 1, "executable": user, "queue": 0, "partition": 0}
        return Job(name, subtime, 2, walltime, "p", fields)

    p = AdaBoostPrediction(retrain_every=100.0, min_train=50, n_estimators=10)
    first = user_job("a", 1, 10.0)
    assert p.estimate(first, None) == 5000.0 and p.fits == 0  # nothing learnt yet
    for i in range(60):
        p.observe(user_job(f"j{i}", 1 + i % 3, 20.0), 100.0 * (1 + i % 3))
    assert p.estimate(user_job("b", 2, 90.0), None) == 5000.0  # before the first boundary
    assert p.fits == 0
    late = user_job("c", 2, 250.0)
    predicted = p.estimate(late, None)
    assert p.fits == 1 and p.trained_until == 200.0  # boundaries at 100 and 200: one fit
    reference = AdaBoostRegressor(n_estimators=10, random_state=0).fit(p.rows, p.runtimes)
    assert predicted == pytest.approx(reference.predict([p.features(late)])[0])
    assert predicted == pytest.approx(200.0)  # user 2 always ran 200 s
    assert p.estimate(user_job("d", 3, 260.0, walltime=150.0), None) == 150.0  # the cap
    assert p.fits == 1  # same period: no retraining
    assert p.features(user_job("e", 0, 0.0))[0] == 0.0  # user 0 is a user, not a missing value


def test_the_profile_heuristic_follows_its_cascade_in_order() -> None:
    from batsched_ml.scheduler.predictors import ProfileHeuristic

    def named(name: str, queue: int, walltime: float, res: int, user: int = 1) -> Job:
        fields = {"user": user, "name": name, "queue": queue}
        return Job(name, 0.0, res, walltime, "p", fields)

    p = ProfileHeuristic()
    assert p.estimate(named("run1", 1, 1000, 4), None) == 1000 and p.last_rule == 0
    p.observe(named("run1", 1, 1000, 4), 100)  # rule 1 key for run1/q1/1000/4
    p.observe(named("run7", 1, 1000, 4), 200)  # the latest "run" prefix with q1/1000/4
    p.observe(named("run1", 1, 1000, 8), 300)  # run1/q1/1000, other processors
    p.observe(named("run1", 2, 500, 2), 400)  # the latest job named run1 at all
    p.observe(named("test3", 1, 1000, 4), 50)
    cases = [
        (named("run1", 1, 1000, 4), 1, 100),  # full profile
        (named("run2", 1, 1000, 4), 2, 200),  # prefix "run", same queue, walltime, processors
        (named("run1", 1, 1000, 16), 3, 300),  # name, queue, walltime; processors differ
        (named("run9", 1, 1000, 16), 4, 300),  # prefix, queue, walltime
        (named("run1", 3, 2000, 1), 5, 400),  # only the name: its last job
        (named("run5", 3, 2000, 1), 6, 400),  # only the prefix: the last "run*" job
        (named("other", 1, 1000, 4), 0, 1000),  # nothing similar: the requested time
        (named("run1", 1, 1000, 4, user=2), 0, 1000),  # another user's history is not used
        (named("run1", 3, 250, 1), 5, 250),  # capped by the requested time
    ]
    for job_, rule, expected in cases:
        assert (p.estimate(job_, None), p.last_rule) == (expected, rule), job_.id


def test_on_swf_fields_the_name_is_the_executable() -> None:
    from batsched_ml.scheduler.predictors import ProfileHeuristic

    p = ProfileHeuristic()
    job_a = Job("a", 0, 4, 1000.0, "p", {"user": 1, "executable": 12, "queue": 1})
    p.observe(job_a, 321)
    other_res = Job("b", 0, 8, 1000.0, "p", {"user": 1, "executable": 12, "queue": 1})
    assert (p.estimate(other_res, None), p.last_rule) == (321, 3)
    other_exe = Job("c", 0, 4, 1000.0, "p", {"user": 1, "executable": 13, "queue": 1})
    assert (p.estimate(other_exe, None), p.last_rule) == (1000.0, 0)


# --- SU (seed 003) --------------------------------------------------------------------------


def su_job(
    name: str, user: int, res: int = 1, t: float = 0.0, exe: str | None = None, wall=1e6
) -> Job:
    fields = {"id": name, "subtime": t, "res": res, "profile": "p", "user": user}
    if exe is not None:
        fields["name"] = exe
    return Job(name, t, res, wall, "p", fields)


def test_su_clusters_strings_by_levenshtein_distance() -> None:
    from batsched_ml.scheduler.su import cluster_strings

    labels = cluster_strings(["7_abc", "7_abd", "7_xyzzy", "7_xyzzz", "7_abe"], [3, 1, 2, 2, 1], 15)
    assert labels[0] == labels[1] == labels[4]
    assert labels[2] == labels[3] != labels[0]
    assert cluster_strings(["a"], [4], 15) == [0]
    assert cluster_strings(["a", "b"], [1, 1], 15) == [0, 1]  # two names stay apart


def test_su_regresses_on_the_k_nearest_jobs_times_alpha_capped_by_the_request() -> None:
    from batsched_ml.scheduler.su import SUPrediction

    su = SUPrediction(regressor="linear", n_neighbors=3)
    assert su.estimate(su_job("a", 1, res=4), None) == 1e6  # nothing known: the request
    assert su.last_source == "requested"
    for res in (1, 2, 3, 4, 6, 8, 64):
        su.observe(su_job(f"r{res}", 1, res=res), 100.0 * res)
    # the 3 nearest in processors of a 5-processor job are 4, 6 and 3 (or 4, 6, 8 by distance
    # after standardising: 3 and 8 are not equally far); all lie on runtime = 100 x processors
    assert su.estimate(su_job("q", 1, res=5), None) == pytest.approx(500.0)
    assert su.last_source == "cluster"
    su.alpha = 1.2
    assert su.estimate(su_job("q", 1, res=5), None) == pytest.approx(600.0)
    assert su.estimate(su_job("q", 1, res=5, wall=550.0), None) == 550.0  # the cap
    # a user never seen: neighbours from everyone's recent jobs
    assert su.estimate(su_job("n", 2, res=5), None) == pytest.approx(600.0)
    assert su.last_source == "all"


def test_su_takes_neighbours_in_the_cluster_of_the_nearest_name() -> None:
    from batsched_ml.scheduler.su import SUPrediction

    su = SUPrediction(regressor="linear", n_neighbors=50, recluster_every=10.0)
    for i in range(4):
        su.observe(su_job(f"a{i}", 1, exe="solver_a"), 100.0)
        su.observe(su_job(f"b{i}", 1, exe="solver_b"), 100.0)
        su.observe(su_job(f"z{i}", 1, exe="postprocessing"), 5000.0)
    # before the first clustering: every job of the user (mean of 100s and 5000s)
    assert su.estimate(su_job("x", 1, exe="solver_c", t=5.0), None) == pytest.approx(
        (8 * 100 + 4 * 5000) / 12
    )
    # at t=10 the user is clustered: solver_c (never seen) joins solver_a / solver_b
    assert su.estimate(su_job("y", 1, exe="solver_c", t=10.0), None) == 100.0
    assert su.clusterings == 1
    assert su.estimate(su_job("z", 1, exe="postprocessin", t=11.0), None) == 5000.0
    cluster_of = su.users[1].cluster_of
    assert cluster_of["1_solver_c"] == cluster_of["1_solver_a"] == cluster_of["1_solver_b"]
    assert cluster_of["1_postprocessing"] != cluster_of["1_solver_a"]


def test_su_neighbours_are_near_in_the_hour_of_submission_local_to_the_trace() -> None:
    from batsched_ml.scheduler.su import SUPrediction

    # 1996-09-23 00:00 UTC is 02:00 in Stockholm (summer time)
    calendar = {"unix_start_time": 843436800, "time_zone_string": "Europe/Stockholm"}
    su = SUPrediction(n_neighbors=2, calendar=calendar)
    for day in range(2):
        su.observe(su_job(f"n{day}", 1, t=day * 86400.0), 100.0)  # 02:00 local
        su.observe(su_job(f"d{day}", 1, t=day * 86400.0 + 12 * 3600), 900.0)  # 14:00 local
    assert su.hour(0.0) == 2.0
    assert su.estimate(su_job("q1", 1, t=5 * 86400.0 + 600), None) == 100.0
    assert su.estimate(su_job("q2", 1, t=5 * 86400.0 + 12 * 3600 + 600), None) == 900.0


def test_predictor_options_are_checked_and_typed() -> None:
    config = ReplayConfig(predictor="su", predictor_params={"alpha": "1.5", "regressor": "rf"})
    assert config.predictor_params == {"alpha": 1.5, "regressor": "rf"}
    assert config.as_dict()["predictor_params"] == {"alpha": 1.5, "regressor": "rf"}
    scheduler = make_scheduler(config)
    assert scheduler.predictor.inner.alpha == 1.5
    with pytest.raises(ValueError, match="predictor su has no parameter 'beta'"):
        ReplayConfig(predictor="su", predictor_params={"beta": "1"})
    with pytest.raises(ValueError, match="unknown SU regressor 'tree'"):
        make_scheduler(ReplayConfig(predictor="su", predictor_params={"regressor": "tree"}))


# --- CPH (seed 001, section 4) --------------------------------------------------------------


class Queued:
    def __init__(self, name: str, res: int, est: float) -> None:
        self.name, self.res, self.est = name, res, est

    def __repr__(self) -> str:
        return self.name


def test_prb_list_schedule_over_the_relaxed_model() -> None:
    from batsched_ml.scheduler.cph import list_schedule

    jobs = [Queued("a", 3, 5), Queued("b", 1, 20), Queued("c", 2, 5)]
    # 2 processors free now, 2 more when a running job ends at t=10
    assert list_schedule(jobs, [5, 20, 5], 2, [(10, 2)]) == [10, 0, 15]


def test_cph_starts_what_minimises_the_total_wait_not_the_urgency_order() -> None:
    from batsched_ml.scheduler.cph import ConstraintPlanner

    a, b, c = Queued("a", 3, 100), Queued("b", 2, 10), Queued("c", 2, 10)
    planner = ConstraintPlanner()
    # PRB's list schedule starts a now and b, c at 100 (total wait 200); waiting 10 s for a
    # makes the total 10
    assert planner.solve([a, b, c], 4, [], 0.0) == [10, 0, 0]
    assert planner.plan([a, b, c], MachineSet.full(4), [], 0.0) == [
        (b, ((0, 1),)),
        (c, ((2, 3),)),
    ]
    assert planner.calls == 2 and planner.improved == 2 and planner.fallbacks == 0


def test_cph_counts_the_decisions_a_wall_clock_cap_stopped() -> None:
    """No wall-clock cap by default (the deterministic budget keeps a run reproducible); with
    one, every decision it stops is counted, since its outcome depends on the machine."""
    from batsched_ml.scheduler.cph import ConstraintPlanner

    a, b, c = Queued("a", 3, 100), Queued("b", 2, 10), Queued("c", 2, 10)
    free = ConstraintPlanner()
    assert free.wall_limit is None
    free.solve([a, b, c], 4, [], 0.0)
    assert free.calls == 1 and free.wall_capped == 0
    capped = ConstraintPlanner(wall_limit=1e-9)
    capped.solve([a, b, c], 4, [], 0.0)
    capped.solve([a, b, c], 4, [], 0.0)
    assert capped.calls == 2 and capped.wall_capped == 2
    with pytest.raises(ValueError, match="must be positive"):
        ConstraintPlanner(wall_limit=0.0)


def test_cph_window_bounds_what_the_cp_model_sees() -> None:
    from batsched_ml.scheduler.cph import ConstraintPlanner

    a, b, c = Queued("a", 3, 100), Queued("b", 2, 10), Queued("c", 2, 10)
    # one job in the model: the most urgent starts, as PRB would; two: b first (total wait
    # 10 instead of 100), c waits outside the model; all three: b and c
    assert ConstraintPlanner(window=1).plan([a, b, c], MachineSet.full(4), [], 0.0) == [
        (a, ((0, 2),))
    ]
    assert ConstraintPlanner(window=2).plan([a, b, c], MachineSet.full(4), [], 0.0) == [
        (b, ((0, 1),))
    ]
    assert ConstraintPlanner(window=3).plan([a, b, c], MachineSet.full(4), [], 0.0) == [
        (b, ((0, 1),)),
        (c, ((2, 3),)),
    ]


def test_dispatcher_options_are_checked_and_typed() -> None:
    config = ReplayConfig(dispatcher="cph", dispatcher_params={"window": "8", "budget": "0.01"})
    assert config.dispatcher_params == {"window": 8, "budget": 0.01}
    assert config.as_dict()["dispatcher_params"] == {"budget": 0.01, "window": 8}
    planner = make_scheduler(config).planner
    assert (planner.window, planner.budget, planner.wall_limit) == (8, 0.01, None)
    with pytest.raises(ValueError, match="the prb dispatcher has no parameters"):
        ReplayConfig(dispatcher="prb", dispatcher_params={"window": "8"})
    with pytest.raises(ValueError, match="dispatcher cph has no parameter 'depth'"):
        ReplayConfig(dispatcher="cph", dispatcher_params={"depth": "3"})
    with pytest.raises(
        ValueError, match="dispatcher cph parameter window: 'eight' is not an integer"
    ):
        ReplayConfig(dispatcher="cph", dispatcher_params={"window": "eight"})
    with pytest.raises(ValueError, match="CPH window must be at least 1 job, not 0"):
        ReplayConfig(dispatcher="cph", dispatcher_params={"window": "0"})
    with pytest.raises(ValueError, match="must be positive"):
        ReplayConfig(dispatcher="cph", dispatcher_params={"budget": "-1"})


def test_text_parameters_take_the_type_of_their_default() -> None:
    from batsched_ml.scheduler.parameters import constructor_kwargs

    class Thing:
        def __init__(
            self,
            n: int = 1,
            x: float = 0.5,
            flag: bool = False,
            name: str = "a",
            limit: float | None = None,
            calendar: dict | None = None,
        ) -> None: ...

    typed = constructor_kwargs(
        Thing, "thing", {"n": "3", "x": "2", "flag": "false", "name": "b", "limit": "7"}
    )
    assert typed == {"n": 3, "x": 2.0, "flag": False, "name": "b", "limit": 7.0}
    assert type(typed["x"]) is float
    assert constructor_kwargs(Thing, "thing", {"flag": "Yes"}) == {"flag": True}
    with pytest.raises(ValueError, match="thing parameter flag: 'maybe' is not true or false"):
        constructor_kwargs(Thing, "thing", {"flag": "maybe"})
    with pytest.raises(ValueError, match="thing has no parameter 'calendar'"):
        constructor_kwargs(Thing, "thing", {"calendar": "{}"}, exclude=("calendar",))


def test_cph_takes_trivial_decisions_without_the_solver() -> None:
    from batsched_ml.scheduler.cph import ConstraintPlanner

    planner = ConstraintPlanner()
    big, small = Queued("big", 8, 10), Queued("small", 1, 10)
    assert planner.plan([big], MachineSet.full(4), [(50.0, 0, 4)], 0.0) == []  # nothing fits
    assert planner.plan([small, small], MachineSet([(1, 2)]), [], 0.0) == [
        (small, ((1, 1),)),
        (small, ((2, 2),)),
    ]
    assert planner.calls == 0


def test_cph_repair_postpones_a_planned_job_that_does_not_fit() -> None:
    from batsched_ml.scheduler.cph import repair

    jobs = [Queued("a", 2, 1), Queued("b", 3, 1), Queued("c", 1, 1)]
    assert repair(jobs, MachineSet.full(4)) == [(jobs[0], ((0, 1),)), (jobs[2], ((2, 2),))]


def test_cph_plans_are_feasible_and_never_worse_than_prb() -> None:
    """Random instances: the CP plan never exceeds the machine at any time (the running jobs
    included) and its total wait is at most the PRB list schedule's."""
    import random

    from batsched_ml.scheduler.cph import ConstraintPlanner, list_schedule

    rng = random.Random(7)
    planner = ConstraintPlanner(budget=0.01)
    for _ in range(40):
        machines = rng.randint(4, 16)
        running = []
        used = 0
        while used < machines - 1 and rng.random() < 0.7:
            res = rng.randint(1, machines - 1 - used)
            running.append((float(rng.randint(1, 500)), len(running), res))
            used += res
        running.sort()
        free = machines - used
        window = [Queued(f"j{i}", rng.randint(1, machines), rng.randint(1, 300)) for i in range(8)]
        starts = planner.solve(window, free, running, 0.0)
        events = [(0, res) for _, _, res in running] + [(int(end), -res) for end, _, res in running]
        for job, start in zip(window, starts, strict=True):
            events += [(start, job.res), (start + int(job.est), -job.res)]
        load = 0
        for _time, delta in sorted(events, key=lambda e: (e[0], e[1])):
            load += delta
            assert load <= machines
        releases = sorted((int(end), res) for end, _, res in running)
        hint = list_schedule(window, [int(j.est) for j in window], free, releases)
        assert sum(starts) <= sum(hint)


@pytest.mark.parametrize(("small_est", "starts_now"), [(1500.0, True), (2500.0, False)])
def test_the_cph_scheduler_weighs_the_total_wait(small_est, starts_now) -> None:
    scheduler = make_scheduler(ReplayConfig(dispatcher="cph"))
    scheduler.handle(Message(0.0, [begins(4), submitted(0.0, "busy", 2, 1000.0)]))
    scheduler.handle(Message(10.0, [submitted(10.0, "wide", 3, 100.0)]))
    reply = scheduler.handle(Message(20.0, [submitted(20.0, "small", 2, small_est)]))
    # "wide" can start when "busy" ends (980 s from now). Starting "small" now delays it to
    # the end of "small": total wait small_est; holding "small" gives 980 + 1080 = 2060
    started = [e.job_id for e in reply.events if isinstance(e, ExecuteJob)]
    assert started == (["w0!small"] if starts_now else [])
    assert scheduler.planner.calls == 1


def test_adaboost_fast_prediction_is_scikit_learn_s() -> None:
    import numpy as np
    from sklearn.ensemble import AdaBoostRegressor

    from batsched_ml.scheduler.predictors import BoostedTrees

    rng = np.random.default_rng(3)
    x = rng.integers(0, 300, size=(2000, 7)).astype(float)
    x[:, 6] = rng.choice([60.0, 600.0, 3600.0, 14400.0, 86400.0], size=2000)
    y = x[:, 6] * rng.uniform(0.05, 1.0, size=2000) + x[:, 5]
    model = AdaBoostRegressor(n_estimators=50, random_state=0).fit(x, y)
    fast = BoostedTrees(model)
    rows = rng.integers(0, 300, size=(500, 7)).astype(float)
    rows[:, 6] = rng.choice([60.0, 600.0, 3600.0, 14400.0, 86400.0], size=500)
    expected = model.predict(rows)
    assert [fast.predict(list(row)) for row in rows] == expected.tolist()


def test_su_kmeans_finds_separated_groups_and_ch_is_scikit_learn_s() -> None:
    import numpy as np
    from sklearn.metrics import calinski_harabasz_score

    from batsched_ml.scheduler.su import calinski_harabasz, kmeans

    rng = np.random.default_rng(1)
    blobs = np.concatenate([rng.normal(centre, 0.1, size=(10, 3)) for centre in (0, 5, 10)])
    labels = kmeans(blobs, np.ones(30), 3, random_state=4)
    assert [len(set(labels[i : i + 10].tolist())) for i in (0, 10, 20)] == [1, 1, 1]
    assert len(set(labels.tolist())) == 3
    assert calinski_harabasz(blobs, labels) == pytest.approx(
        calinski_harabasz_score(blobs, labels), rel=1e-12
    )
    # weights pull a centre: one heavy point and two light ones in one cluster
    points = np.array([[0.0], [1.0], [2.0], [100.0]])
    assert kmeans(points, np.array([1.0, 1.0, 50.0, 1.0]), 2).tolist() in (
        [0, 0, 0, 1],
        [1, 1, 1, 0],
    )


@pytest.mark.parametrize(
    ("predictor", "option", "message"),
    [
        ("requested", "no_walltime_estimate=-3", "no_walltime_estimate must be a positive number"),
        ("easy++", "no_walltime_estimate=nan", "no_walltime_estimate must be a positive number"),
        ("fixed", "seconds=nan", "seconds must be a positive number, not nan"),
        ("adaboost", "n_estimators=0", "n_estimators must be an integer >= 1, not 0"),
        ("adaboost", "retrain_every=-1", "retrain_every must be a positive number"),
        ("adaboost", "window=0", "window must be an integer >= 1, not 0"),
        ("su", "n_neighbors=0", "n_neighbors must be an integer >= 1, not 0"),
        ("su", "recluster_every=0", "recluster_every must be a positive number, not 0.0"),
        ("su", "alpha=inf", "SU alpha must be positive, not inf"),
    ],
)
def test_an_option_out_of_range_is_refused_before_the_run(
    tmp_path, capsys, predictor: str, option: str, message: str
) -> None:
    """Each of these ran wrong or stopped half-way before: a hang (AdaBoost retrained "every
    -1 s"), an internal error (SU's division by a zero period, AdaBoost of no tree), a run
    that learnt nothing (a window of 0 jobs) or a NaN estimate found at the first job."""
    from batsched_ml.cli import main

    out = tmp_path / "out"
    code = main(["replay", "-o", str(out), "--predictor", predictor, "--predictor-option", option])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"batsched-ml: error: predictor {predictor}: {message}")
    assert not out.exists()


def test_the_cph_planner_refuses_a_negative_seed() -> None:
    from batsched_ml.errors import ConfigError
    from batsched_ml.runs.replaying import planner_kwargs

    with pytest.raises(ConfigError, match="random_state must be an integer >= 0, not -1"):
        planner_kwargs("cph", {"random_state": "-1"})
