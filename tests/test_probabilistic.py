"""Probabilistic backfilling (Nissimov and Feitelson): the runtime distribution, the risk, the
backfill decision on EASY's pass, small replays whose schedules are checked, and the option's
names in the registry, the run configuration, the command line and campaigns."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from batsched_ml import registry
from batsched_ml.alloc import MachineSet
from batsched_ml.cli import main
from batsched_ml.errors import ConfigError
from batsched_ml.experiments.campaign import expand, load_campaign
from batsched_ml.job import Job
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.scheduler.dispatchers import make_dispatcher, planner_kwargs
from batsched_ml.scheduler.easy import easy_pass
from batsched_ml.scheduler.parts import WaitingJob
from batsched_ml.scheduler.probabilistic import Probabilistic
from batsched_ml.sim.jobs_csv import HEADER
from tests.conftest import waiting, workload_head
from tests.test_classified import SCENARIO, FixedTrainer


def job(name: str, walltime: float | None, user: int = 1, res: int = 1) -> Job:
    return Job(name, 0.0, res, walltime, "p", {"user": user})


# --- the runtime distribution and the risk ---------------------------------------------------


def test_risk_is_the_share_of_the_users_ratios_above_the_time_left() -> None:
    dispatcher = Probabilistic(epsilon=0.1, min_history=2, window=3)
    for runtime in (10.0, 50.0, 150.0):  # ratios 0.1, 0.5 and 1.5 counted as 1
        dispatcher.observe(job("old", 100.0), runtime)
    assert dispatcher.users[1].sorted == [0.1, 0.5, 1.0]
    candidate = job("new", 200.0)
    assert dispatcher.risk(candidate, 20.0) == pytest.approx(2 / 3)  # ratio 0.1: 1 of 3 below
    assert dispatcher.risk(candidate, 19.0) == 1.0  # ratio 0.095: none below
    assert dispatcher.risk(candidate, 100.0) == pytest.approx(1 / 3)  # ratio 0.5
    assert dispatcher.risk(candidate, 199.0) == pytest.approx(1 / 3)
    assert dispatcher.risk(candidate, 200.0) == 0.0  # never past its walltime


def test_the_window_keeps_the_last_jobs_only() -> None:
    dispatcher = Probabilistic(epsilon=0.1, min_history=2, window=3)
    for runtime in (10.0, 50.0, 100.0, 30.0):  # 0.1 leaves when 0.3 comes
        dispatcher.observe(job("old", 100.0), runtime)
    assert dispatcher.users[1].sorted == [0.3, 0.5, 1.0]
    assert list(dispatcher.machine.order) == [0.5, 1.0, 0.3]
    assert dispatcher.risk(job("new", 200.0), 20.0) == 1.0


def test_a_user_with_few_jobs_gets_the_machines_distribution() -> None:
    dispatcher = Probabilistic(epsilon=0.1, min_history=2, window=4)
    dispatcher.observe(job("a", 100.0, user=1), 10.0)  # 0.1
    dispatcher.observe(job("b", 100.0, user=1), 20.0)  # 0.2
    dispatcher.observe(job("c", 100.0, user=2), 90.0)  # 0.9: user 2 has one job only
    # user 2 (one job < min_history) reads the machine's 0.1, 0.2, 0.9: 2 of 3 end by 0.5
    assert dispatcher.risk(job("d", 100.0, user=2), 50.0) == pytest.approx(1 / 3)
    # user 1 reads its own 0.1, 0.2
    assert dispatcher.risk(job("e", 100.0, user=1), 50.0) == 0.0
    # a user never seen: the machine's
    assert dispatcher.risk(job("f", 100.0, user=3), 15.0) == pytest.approx(2 / 3)


def test_nothing_known_means_no_risk_taken() -> None:
    dispatcher = Probabilistic()
    assert dispatcher.risk(job("a", 100.0), 50.0) == 1.0  # no finished job yet
    dispatcher.observe(job("b", None), 10.0)  # no walltime: no ratio learned
    assert len(dispatcher.machine) == 0
    dispatcher.observe(job("c", 100.0), 10.0)
    assert dispatcher.risk(job("d", None), 50.0) == 1.0  # no walltime: nothing to scale


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"epsilon": 1.0}, "epsilon must be in"),
        ({"epsilon": -0.1}, "epsilon must be in"),
        ({"min_history": 0}, "min_history must be at least 1"),
        ({"min_history": 5, "window": 4}, r"window \(4\) must be at least min_history"),
    ],
)
def test_parameters_out_of_range_are_refused(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Probabilistic(**params)


# --- the decision on EASY's pass -------------------------------------------------------------


def pass_with(risks: dict[str, float] | None, budget: float, queue: list[WaitingJob]):
    """4 machines, 2 free; a running job holds 2 until 100: a head of 4 is reserved at 100
    with no extra machine. ``risks``: each job's risk over the 100 s left (``None``: EASY)."""
    free = MachineSet.full(4)
    free.take_lowest(2)

    def risk(entry: WaitingJob, seconds: float) -> float:
        assert risks is not None and seconds == 100.0
        return risks[entry.job.id]

    return easy_pass(
        queue, free, [(100.0, 0, 2)], 0.0, risk=None if risks is None else risk, budget=budget
    )


def test_a_job_that_probably_ends_before_the_shadow_time_backfills() -> None:
    queue = [waiting("head", 4, 10.0), waiting("a", 2, 500.0)]
    started, reservation = pass_with({"a": 0.05}, 0.1, queue)
    assert [entry.job.id for entry, _ in started] == ["a"]
    assert reservation is not None
    assert (reservation.shadow, reservation.extra, reservation.gambled) == (100.0, 0, 1)
    started, reservation = pass_with({"a": 0.15}, 0.1, queue)
    assert started == [] and reservation is not None and reservation.gambled == 0
    started, reservation = pass_with(None, 0.1, queue)
    assert started == [] and reservation is not None  # plain EASY: 500 s end after 100


def test_the_risky_starts_of_a_pass_share_the_budget() -> None:
    queue = [waiting("head", 4, 10.0), waiting("a", 1, 500.0), waiting("b", 1, 500.0)]
    started, reservation = pass_with({"a": 0.06, "b": 0.06}, 0.1, queue)
    assert [entry.job.id for entry, _ in started] == ["a"]  # 0.06 + 0.06 > 0.1
    started, reservation = pass_with({"a": 0.05, "b": 0.05}, 0.1, queue)
    assert [entry.job.id for entry, _ in started] == ["a", "b"]  # 0.05 + 0.05 = 0.1
    assert reservation is not None and reservation.gambled == 2
    queue = [waiting("head", 4, 10.0), waiting("a", 1, 500.0), waiting("b", 1, 50.0)]
    started, _ = pass_with({"a": 0.1, "b": 0.9}, 0.1, queue)
    assert [entry.job.id for entry, _ in started] == ["a", "b"]  # b passes EASY's own test


def test_a_starving_head_gets_easys_guarantee() -> None:
    dispatcher = Probabilistic(epsilon=0.5, min_history=1, window=5)
    dispatcher.observe(job("old", 100.0), 10.0)  # ratio 0.1: certain to end in time
    queue = [waiting("head", 4, 10.0, 10.0), waiting("a", 2, 500.0, 500.0)]
    for starving, expected in ((False, ["a"]), (True, [])):
        free = MachineSet.full(4)
        free.take_lowest(2)
        started, _ = dispatcher.decide(queue, free, [(100.0, 0, 2)], 0.0, starving)
        assert [entry.job.id for entry, _ in started] == expected
    assert dispatcher.risky_starts == 1


# --- replays ---------------------------------------------------------------------------------


def workload(*jobs: tuple) -> dict:
    """(id, subtime, res, runtime, walltime, user) on 4 machines."""
    out: dict = {"nb_res": 4, "jobs": [], "profiles": {}}
    for name, subtime, res, runtime, walltime, user in jobs:
        out["jobs"].append(
            {
                "id": name,
                "subtime": subtime,
                "res": res,
                "profile": f"d{runtime}",
                "walltime": walltime,
                "user": user,
            }
        )
        out["profiles"][f"d{runtime}"] = {"type": "delay", "delay": runtime}
    return out


def starts(result) -> dict[str, float]:
    table = pd.read_csv(
        io.StringIO(HEADER + "\n" + "\n".join(result.rows) + "\n"), dtype={"job_id": str}
    )
    return dict(zip(table["job_id"], table["starting_time"], strict=True))


def scenario(runtime_d: int) -> dict:
    return workload(
        ("a", 0, 4, 10, 100, 1),  # user 1 used a tenth of its request: ratio 0.1
        ("b", 20, 2, 100, 100, 2),  # runs 20-120
        ("c", 30, 4, 10, 100, 2),  # the head: reserved at 120 with no extra machine
        ("d", 40, 2, runtime_d, 200, 1),  # requests 200 s: EASY cannot backfill it at 40
    )


PARAMS = {"epsilon": 0.1, "min_history": 1, "window": 5}


def test_easy_keeps_the_job_back_and_probabilistic_backfills_it() -> None:
    easy = run_replay(scenario(20), ReplayConfig(dispatcher="easy"))
    assert starts(easy) == {"a": 0.0, "b": 20.0, "c": 120.0, "d": 130.0}
    config = ReplayConfig(dispatcher="probabilistic", dispatcher_params=PARAMS)
    result = run_replay(scenario(20), config)
    # user 1's ratio 0.1 says d ends within 80 s of its 200: it runs 40-60, the head keeps 120
    assert starts(result) == {"a": 0.0, "b": 20.0, "c": 120.0, "d": 40.0}
    assert result.scheduler.dispatcher.risky_starts == 1


def test_a_risky_start_that_runs_long_delays_the_head_never_past_its_walltime() -> None:
    config = ReplayConfig(dispatcher="probabilistic", dispatcher_params=PARAMS)
    result = run_replay(scenario(100), config, audit=True)
    # d runs 40-140 against the odds: the head, reserved at 120, starts at 140
    assert starts(result) == {"a": 0.0, "b": 20.0, "c": 140.0, "d": 40.0}
    assert ("w0!c", 120.0) in [
        (job_id, shadow) for _, job_id, shadow in result.scheduler.reservations
    ]
    easy = run_replay(scenario(100), ReplayConfig(dispatcher="easy"), audit=True)
    assert starts(easy) == {"a": 0.0, "b": 20.0, "c": 120.0, "d": 130.0}


def test_with_classes_the_killed_attempt_is_not_learned_from() -> None:
    config = ReplayConfig(
        variant="classification-idempotent", dispatcher="probabilistic", dispatcher_params=PARAMS
    )
    result = run_replay(SCENARIO, config, trainer=FixedTrainer())
    assert result.scheduler.kill_decisions == 1
    # jobs 1 (50 of 5000 s), 3 (30 of 900), 2's resubmission (300 of 600), 4 (10 of 2000); the
    # killed attempt of 2 (100 of 600 s) says nothing of its runtime
    assert result.scheduler.dispatcher.machine.sorted == pytest.approx(
        sorted([50 / 5000, 30 / 900, 300 / 600, 10 / 2000])
    )


def test_summary_counts_the_risky_starts(tmp_path: Path) -> None:
    from batsched_ml.results.outputs import write_replay

    config = ReplayConfig(dispatcher="probabilistic", dispatcher_params=PARAMS)
    summary = write_replay(run_replay(scenario(20), config), tmp_path)
    assert summary["risky_starts"] == 1
    assert json.loads((tmp_path / "summary.json").read_text())["risky_starts"] == 1
    easy = write_replay(run_replay(scenario(20), ReplayConfig()), tmp_path / "easy")
    assert "risky_starts" not in easy


# --- names and settings ----------------------------------------------------------------------


def test_the_requested_times_own_option_applies() -> None:
    """A job without walltime plans with ``no_walltime_estimate`` and is never a risky start."""
    config = ReplayConfig(
        dispatcher="probabilistic", predictor_params={"no_walltime_estimate": "3600"}
    )
    assert config.predictor_params == {"no_walltime_estimate": 3600.0}


def test_the_registry_names_it_and_it_keeps_the_policys_order() -> None:
    assert "probabilistic" in registry.DISPATCHERS
    assert "probabilistic" not in registry.DISPATCHER_ORDERS
    config = ReplayConfig(policy="spf", dispatcher="probabilistic")
    assert config.title() == "spf (base; dispatcher probabilistic)"
    assert isinstance(make_dispatcher("probabilistic"), Probabilistic)
    assert planner_kwargs("probabilistic", {"epsilon": "0.2", "window": "50"}) == {
        "epsilon": 0.2,
        "window": 50,
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"predictor": "easy++"}, "--predictor easy\\+\\+ does not go with the probabilistic"),
        ({"variant": "runtime-clairvoyant"}, "runtime-clairvoyant variant"),
        ({"backfilling": False}, "--no-backfilling does not go with the probabilistic"),
        ({"dispatcher_params": {"epsilon": "x"}}, "epsilon: 'x' is not a number"),
        ({"dispatcher_params": {"eps": 0.1}}, "has no parameter 'eps'"),
    ],
)
def test_what_it_cannot_honour_is_refused(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReplayConfig(dispatcher="probabilistic", **settings)


def test_the_command_line_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(scenario(20)))
    out = tmp_path / "out"
    code = main(
        [
            "replay",
            str(path),
            "-o",
            str(out),
            "--dispatcher",
            "probabilistic",
            "--dispatcher-option",
            "epsilon=0.1",
            "--dispatcher-option",
            "min_history=1",
            "--dispatcher-option",
            "window=5",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["dispatcher"] == "probabilistic"
    assert summary["config"]["dispatcher_params"] == PARAMS
    assert summary["risky_starts"] == 1


def test_campaigns_expand_it_with_any_policy_and_its_options(tmp_path: Path) -> None:
    runs = expand(
        ["T"],
        ["fcfs", "spf"],
        ["base", "classification-idempotent", "runtime-clairvoyant"],
        [0],
        dispatchers=["probabilistic"],
        dispatcher_options=["epsilon=0.3"],
    )
    folders = sorted(spec.folder(Path("o")).name for spec in runs)
    assert folders == [
        "fcfs-base-probabilistic-epsilon=0.3",
        "fcfs-classification-idempotent-probabilistic-epsilon=0.3",
        "spf-base-probabilistic-epsilon=0.3",
        "spf-classification-idempotent-probabilistic-epsilon=0.3",
    ]
    toml = tmp_path / "c.toml"
    toml.write_text(
        '[campaign]\noutput = "o"\ntraces = ["T"]\npolicies = ["spf"]\nvariants = ["base"]\n'
        "dispatchers = ['probabilistic']\ndispatcher_options = [{epsilon = 0.2, window = 50}]\n"
    )
    (spec,) = load_campaign(toml).runs
    assert spec.config().dispatcher_params == {"epsilon": 0.2, "window": 50}


def first_reservation_delays(result) -> list[float]:
    """How late each job that was ever the head started after its first reservation."""
    table = pd.read_csv(
        io.StringIO(HEADER + "\n" + "\n".join(result.rows) + "\n"), dtype={"job_id": str}
    )
    start = dict(zip(table["job_id"], table["starting_time"], strict=True))
    first: dict[str, float] = {}
    for _now, job_id, shadow in result.scheduler.reservations:
        first.setdefault(job_id.partition("!")[2], shadow)
    return [start[name] - shadow for name, shadow in first.items()]


def test_on_a_kth_slice_it_trades_head_delays_for_backfills_and_kills_nothing(
    kth_workload: dict,
) -> None:
    """EASY under FCFS never starts a head after its first reservation; the probabilistic
    dispatcher does, for some, and every job ends as it does under EASY (completed, or killed
    at its walltime: nothing is killed that EASY would let finish)."""
    workload = workload_head(kth_workload, 2000)
    easy = run_replay(workload, ReplayConfig(), audit=True)
    result = run_replay(workload, ReplayConfig(dispatcher="probabilistic"), audit=True)
    assert max(first_reservation_delays(easy)) <= 0.0
    assert result.scheduler.dispatcher.risky_starts > 0
    assert max(first_reservation_delays(result)) > 0.0

    def states(run) -> dict[str, str]:
        table = pd.read_csv(
            io.StringIO(HEADER + "\n" + "\n".join(run.rows) + "\n"), dtype={"job_id": str}
        )
        return dict(zip(table["job_id"], table["final_state"], strict=True))

    assert states(result) == states(easy)
    assert len(states(result)) == 2000


@pytest.mark.long
def test_the_pages_kth_figures_come_from_this_code(kth_workload: dict) -> None:
    """The study's KTH-SP2 rows (the trace itself, FCFS and SPF, the defaults) replayed again:
    the page's figures are this dispatcher's, not an older one's."""
    from batsched_ml.results.metrics import summarize

    root = Path(__file__).resolve().parents[1]
    rows = json.loads((root / "benchmarks/results/probabilistic-study.json").read_text())["rows"]
    for policy in ("fcfs", "spf"):
        (row,) = [
            r
            for r in rows
            if r["trace"].startswith("KTH-SP2")
            and r["copy"] == 0
            and r["policy"] == policy
            and r["dispatcher"] == "probabilistic"
            and not r["params"]
        ]
        result = run_replay(kth_workload, ReplayConfig(policy=policy, dispatcher="probabilistic"))
        table = pd.read_csv(
            io.StringIO(HEADER + "\n" + "\n".join(result.rows) + "\n"), dtype={"job_id": str}
        )
        summary = summarize(table, nb_machines=int(kth_workload["nb_res"]))
        assert (summary["mean_bsld"], summary["max_wait"]) == (row["mean_bsld"], row["max_wait"])
        assert result.scheduler.dispatcher.risky_starts == row["risky_starts"]
