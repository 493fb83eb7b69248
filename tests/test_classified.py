"""Scheduling with classes: the small queue first, the kill-and-resubmit safeguard (in process
and over ZeroMQ), the variants, and no job lost."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from batsched_ml.predict.training import WeeklyModel
from batsched_ml.protocol.events import RegisterJob, RegisterProfile
from batsched_ml.results.frames import logical_jobs, read_jobs_csv
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.sim.jobs_csv import HEADER
from tests.conftest import workload_head


class SmallIfShortRequest:
    """A stand-in model: small when the requested time is at most 1,000 s."""

    def predict_one(self, row):
        return row[0] <= 1000


class FixedTrainer:
    """Divider 100 s from week 0 on, and the stand-in model: fully predictable schedules."""

    def __init__(self) -> None:
        self.finished: list[float] = []

    def add_finished(self, features, runtime, week=0):
        self.finished.append(runtime)

    def model_for(self, week):
        return WeeklyModel(week, 100.0, SmallIfShortRequest())


def workload(*jobs):
    """(id, subtime, res, delay, walltime)"""
    out = {"nb_res": 4, "jobs": [], "profiles": {}}
    for job_id, subtime, res, delay, walltime in jobs:
        out["jobs"].append(
            {
                "id": job_id,
                "subtime": subtime,
                "res": res,
                "profile": f"d{delay}",
                "walltime": walltime,
                "user": 1,
            }
        )
        out["profiles"][f"d{delay}"] = {"type": "delay", "delay": delay}
    return out


SCENARIO = workload(
    (1, 0, 4, 50, 5000),  # large: runs 0-50
    (2, 10, 2, 300, 600),  # classified small, runs past the divider: killed at 150, resubmitted
    (3, 20, 2, 30, 900),  # small, really: 50-80
    (4, 20, 4, 10, 2000),  # large: waits behind the resubmitted job 2 (submitted earlier)
)


def replay(variant: str, wl=SCENARIO, **kwargs):
    return run_replay(
        wl, ReplayConfig(policy="fcfs", variant=variant), trainer=FixedTrainer(), **kwargs
    )


def rows(result) -> list[tuple]:
    table = pd.read_csv(
        io.StringIO(HEADER + "\n" + "\n".join(result.rows) + "\n"), dtype={"job_id": str}
    )
    return list(
        table[
            ["job_id", "workload_name", "final_state", "starting_time", "finish_time"]
        ].itertuples(index=False, name=None)
    )


def test_false_small_job_is_killed_at_the_divider_and_resubmitted_as_large() -> None:
    result = replay("classification-idempotent")
    assert rows(result) == [
        ("1", "w0", "COMPLETED_SUCCESSFULLY", 0.0, 50.0),
        ("3", "w0", "COMPLETED_SUCCESSFULLY", 50.0, 80.0),
        ("2", "w0", "COMPLETED_KILLED", 50.0, 150.0),
        ("2_r1", "w0_resub", "COMPLETED_SUCCESSFULLY", 150.0, 450.0),
        ("4", "w0", "COMPLETED_SUCCESSFULLY", 450.0, 460.0),
    ]
    assert result.scheduler.kill_decisions == 1
    assert result.scheduler.registration_finished


def test_resubmission_uses_a_fresh_profile_copy_and_a_new_id(tmp_path: Path) -> None:
    sent = []
    result = replay("classification-idempotent", on_reply=sent.append)
    registered = [e for m in sent for e in m.events if isinstance(e, RegisterProfile | RegisterJob)]
    assert [type(e).__name__ for e in registered] == ["RegisterProfile", "RegisterJob"]
    profile, job = registered
    assert (profile.workload_name, profile.profile_name, profile.profile) == (
        "w0_resub",
        "d300__2_r1",
        {"type": "delay", "delay": 300},
    )
    assert job.job_id == "w0_resub!2_r1"
    assert job.job == {
        "id": "w0_resub!2_r1",
        "subtime": 150.0,
        "res": 2,
        "profile": "d300__2_r1",
        "walltime": 600,
        "user": 1,
        "resubmission_of": "w0!2",
    }
    assert result.messages > 0


def test_logical_jobs_fold_the_attempts(tmp_path: Path) -> None:
    result = replay("classification-idempotent")
    summary = write_replay(result, tmp_path)
    table = logical_jobs(read_jobs_csv(tmp_path / "jobs.csv"))
    job2 = table[table["job_id"] == "2"].iloc[0]
    assert (job2["submission_time"], job2["starting_time"], job2["finish_time"]) == (
        10.0,
        150.0,
        450.0,
    )
    assert (job2["attempts"], job2["wasted_area"], job2["workload_name"]) == (2, 200.0, "w0")
    assert len(table) == 4 and (table["final_state"] == "COMPLETED_SUCCESSFULLY").all()
    assert summary["jobs"] == 4 and summary["kills"] == 1 and summary["wasted_area"] == 200.0
    # job 2: wait = 450 - 10 - 300 = 140 -> bsld (140 + 300) / 300
    assert summary["cumulative_bsld"] == pytest.approx(
        round(1 + 440 / 300 + 1 + (430 + 10) / 60, 6)
    )
    assert (tmp_path / "classification.csv").exists() and (tmp_path / "weekly_quality.csv").exists()


def test_the_safeguard_works_the_same_over_zeromq() -> None:
    local = replay("classification-idempotent")
    served = replay("classification-idempotent", zmq_endpoint="tcp://127.0.0.1:*")
    assert served.rows == local.rows


def test_without_the_safeguard_the_false_small_job_runs_to_its_end() -> None:
    result = replay("classification")
    assert ("2", "w0", "COMPLETED_SUCCESSFULLY", 50.0, 350.0) in rows(result)
    assert result.scheduler.kill_decisions == 0


def test_class_clairvoyant_knows_the_true_class() -> None:
    result = replay("class-clairvoyant")
    # jobs 3 and 4 (30 s, 10 s) are truly small and go first; job 2 (300 s) is large: at 50 it
    # could start beside job 3, but it would delay job 4's reservation (150 = 50 + divider)
    assert rows(result)[1:] == [
        ("3", "w0", "COMPLETED_SUCCESSFULLY", 50.0, 80.0),
        ("4", "w0", "COMPLETED_SUCCESSFULLY", 80.0, 90.0),
        ("2", "w0", "COMPLETED_SUCCESSFULLY", 90.0, 390.0),
    ]
    assert result.scheduler.kill_decisions == 0


def test_small_queue_goes_first_even_in_fcfs() -> None:
    wl = workload((1, 0, 4, 50, 5000), (2, 10, 4, 10, 2000), (3, 20, 4, 10, 500))
    result = replay("classification", wl)
    assert [r[0] for r in rows(result)] == ["1", "3", "2"]  # 3 (small) overtakes 2 (large)
    base = run_replay(wl, ReplayConfig(policy="fcfs"))
    assert [r[0] for r in rows(base)] == ["1", "2", "3"]


def test_variant_and_predictor_combinations_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        ReplayConfig(variant="magic")
    ReplayConfig(variant="classification", predictor="actual")  # a predictor with classes
    with pytest.raises(ValueError, match="does not go with the runtime-clairvoyant variant"):
        ReplayConfig(variant="runtime-clairvoyant", predictor="easy++")


def test_runtime_clairvoyant_plans_with_actual_runtimes() -> None:
    wl = workload((1, 0, 3, 100, 1000), (2, 1, 4, 10, 1000), (3, 2, 1, 50, 1000))
    # base: job 3 (walltime 1000) cannot backfill before job 2's reservation at 1000
    assert [r[0] for r in rows(run_replay(wl, ReplayConfig()))] == ["1", "2", "3"]
    # clairvoyant: job 1 ends at 100, job 3 ends at 52 <= 100: backfilled
    result = run_replay(wl, ReplayConfig(variant="runtime-clairvoyant"))
    assert [r[0] for r in rows(result)] == ["3", "1", "2"]


@pytest.mark.parametrize(
    "variant", ["classification", "classification-idempotent", "class-clairvoyant"]
)
def test_no_job_lost_on_a_real_trace(variant: str, kth_workload, tmp_path: Path) -> None:
    wl = workload_head(kth_workload, 2500)
    result = run_replay(wl, ReplayConfig(policy="saf", variant=variant))
    summary = write_replay(result, tmp_path)
    attempts = read_jobs_csv(tmp_path / "jobs.csv")
    table = logical_jobs(attempts)
    assert sorted(table["job_id"].astype(int)) == sorted(j["id"] for j in wl["jobs"])
    assert (table["final_state"] == "COMPLETED_SUCCESSFULLY").all()
    killed = attempts[attempts["final_state"] == "COMPLETED_KILLED"]
    resubmitted = attempts[attempts["workload_name"] == "w0_resub"]
    assert len(killed) == len(resubmitted) == summary["kills"]
    assert set(killed["job_id"]) == {j.rsplit("_r", 1)[0] for j in resubmitted["job_id"]}
    if variant != "classification-idempotent":
        assert summary["kills"] == 0
    quality = summary["classification"]
    assert quality["jobs_scored"] + quality["jobs_unscored_first_week"] == 2500
    if variant == "class-clairvoyant":
        assert quality["FS"] == quality["FL"] == 0
    assert summary["jobs"] == 2500 and summary["finished"] == 2500


def test_a_job_ending_exactly_at_the_divider_is_not_killed() -> None:
    """Job 2's call (at 100) comes before job 3's completion at 100 in the same message: job 3
    (runtime = divider, started after job 2's call was set) must not be killed once finished."""
    wl = workload(
        (1, 0, 1, 150, 600),  # small by request; started at 0: call at 100, killed then
        (2, 0, 1, 100, 600),  # small by request; started at 0: ends at 100, same instant
    )
    result = replay("classification-idempotent", wl)
    states = {r[0]: r[2] for r in rows(result)}
    assert states == {
        "1": "COMPLETED_KILLED",
        "2": "COMPLETED_SUCCESSFULLY",
        "1_r1": "COMPLETED_SUCCESSFULLY",
    }
