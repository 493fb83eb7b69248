"""EASY backfilling: hand-made passes with exact expected results, and an independent check of
every pass of random replays (the reservation is never delayed, the pass leaves nothing that
could have been backfilled, the heads ahead of the reservation all started)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from batsched_ml.alloc import MachineSet, procset_of_runs
from batsched_ml.protocol.events import (
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    Message,
    RequestedCall,
)
from batsched_ml.results.frames import read_jobs_csv
from batsched_ml.results.metrics import max_machines_in_use
from batsched_ml.results.textfile import write_jobs_csv
from batsched_ml.scheduler.core import EasyScheduler
from batsched_ml.scheduler.easy import easy_pass, reservation_for
from batsched_ml.scheduler.predictors import ActualRuntime
from batsched_ml.sim.simulator import BatsimSimulator
from tests.conftest import waiting


def test_pass_starts_heads_reserves_and_backfills() -> None:
    # 10 machines, 4 free (6-9). Running: 3 machines until 100, 3 machines until 200.
    free = MachineSet([(6, 9)])
    ends = [(100.0, 0, 3), (200.0, 1, 3)]
    queue = [
        waiting("head-fits", 2, 150),  # starts (ends after the shadow): 2 free left
        waiting("blocked", 5, 10),  # needs 5: at 100, 2 + 3 = 5 -> shadow 100, extra 0
        waiting("too-long", 1, 150),  # ends at 150 > 100 and no extra: waits
        waiting("short", 1, 90),  # ends at 90 <= 100: backfilled
        waiting("too-wide", 2, 10),  # only 1 free left
        waiting("short2", 1, 100),  # ends exactly at the shadow time: backfilled
    ]
    started, reservation = easy_pass(queue, free, ends, 0.0)
    assert [(job.job.id, str(procset_of_runs(alloc))) for job, alloc in started] == [
        ("head-fits", "6-7"),
        ("short", "8"),
        ("short2", "9"),
    ]
    assert reservation is not None
    assert (reservation.head.job.id, reservation.shadow, reservation.extra) == ("blocked", 100.0, 0)


def test_extra_machines_let_long_jobs_through_once() -> None:
    free = MachineSet.full(4)  # machines 0-3 free; 4-9 busy until 100
    ends = [(100.0, 0, 6)]
    queue = [
        waiting("big", 8, 10),
        waiting("long1", 1, 1000),
        waiting("long2", 1, 1000),
        waiting("long3", 1, 1000),
    ]
    started, reservation = easy_pass(queue, free, ends, 0.0)
    # at 100: 4 + 6 = 10 free, big needs 8 -> extra 2: two long jobs may run past the shadow
    assert reservation is not None and (reservation.shadow, reservation.extra) == (100.0, 2)
    assert [job.job.id for job, _ in started] == ["long1", "long2"]


def test_overdue_running_job_is_expected_to_end_now() -> None:
    shadow, extra = reservation_for(3, 1, [(50.0, 0, 2), (500.0, 1, 4)], now=80.0)
    assert (shadow, extra) == (80.0, 0)


def test_jobs_started_in_the_same_pass_count_in_the_reservation() -> None:
    # 4 machines, all free; a 3-machine job of 100 s starts, then a 4-machine job is blocked:
    # its reservation must wait for the job that has just started (shadow 100, not "never").
    started, reservation = easy_pass(
        [waiting("a", 3, 100), waiting("b", 4, 10), waiting("c", 1, 50)],
        MachineSet.full(4),
        [],
        0.0,
    )
    assert [job.job.id for job, _ in started] == ["a", "c"]
    assert reservation is not None and reservation.shadow == 100.0


# --- independent check of every pass on random replays ------------------------------------


def earliest_start(now: float, machines: int, running: list[tuple[float, int]], need: int) -> float:
    """Brute force: the first instant at which ``need`` machines are free, given running jobs
    as (expected end, machines); a job frees its machines at its end."""
    times = sorted({now, *(max(end, now) for end, _ in running)})
    for t in times:
        used = sum(res for end, res in running if max(end, now) > t)
        if machines - used >= need:
            return t
    raise AssertionError("never")


class CheckedScheduler:
    """Wraps the scheduler; re-derives and checks each pass from scratch."""

    def __init__(self, scheduler: EasyScheduler) -> None:
        self.scheduler = scheduler
        self.passes = 0
        self.backfilled = 0
        self.skipped = 0

    def __call__(self, message: Message) -> Message:
        s = self.scheduler
        now = message.now
        dirty = any(
            isinstance(e, JobSubmitted | JobCompleted | RequestedCall) for e in message.events
        )
        reply = s.handle(message) if not dirty else None
        if reply is not None:
            return reply
        # record the events first (without deciding), to see the queue the pass will get
        for event in message.events:
            s.on_event(event, now)
        if s.ended or not s.waiting:
            return Message(now, [*s._immediate])
        queue = list(s.ordered_queue(now))
        running = [(r.start + r.est, r.job.res) for r in s.running.values()]
        decisions = s._immediate + s.schedule(now)
        s._immediate = []
        started = [d.job_id for d in decisions if isinstance(d, ExecuteJob)]
        self.check(now, queue, running, started)
        return Message(now, decisions)

    def check(self, now: float, queue: list, running: list, started: list[str]) -> None:
        self.passes += 1
        machines = self.scheduler.nb_machines
        ids = [entry.job.id for entry in queue]
        by_id = {entry.job.id: entry for entry in queue}
        assert len(set(started)) == len(started)
        # phase 1: a prefix of the queue
        prefix = 0
        while prefix < len(ids) and ids[prefix] in started:
            prefix += 1
        if prefix == len(ids):
            return
        if self.scheduler.last_reservation is None:
            # a skipped pass (a dynamic order with nothing that fits): nothing started, and
            # nothing could have
            assert not started
            free = machines - sum(res for end, res in running)
            assert all(entry.res > free for entry in queue)
            self.skipped += 1
            return
        head = by_id[ids[prefix]]
        heads = [by_id[i] for i in ids[:prefix]]
        base = running + [(now + e.est, e.res) for e in heads]
        shadow = earliest_start(now, machines, base, head.res)
        assert self.scheduler.last_reservation.shadow == shadow
        backfilled = [by_id[i] for i in started[prefix:]]
        self.backfilled += len(backfilled)
        after = base + [(now + e.est, e.res) for e in backfilled]
        # the reservation is not delayed by what was backfilled
        assert earliest_start(now, machines, after, head.res) <= shadow
        # nothing left waiting could have been backfilled without delaying it
        free_after = machines - sum(res for end, res in after if max(end, now) > now)
        for job_id in ids[prefix + 1 :]:
            if job_id in started:
                continue
            entry = by_id[job_id]
            if entry.res <= free_after:
                trial = [*after, (now + entry.est, entry.res)]
                assert earliest_start(now, machines, trial, head.res) > shadow, job_id


def random_workload(rng: random.Random, jobs: int, machines: int) -> dict[str, Any]:
    out: dict[str, Any] = {"nb_res": machines, "jobs": [], "profiles": {}}
    t = 0
    for i in range(jobs):
        t += rng.choice([0, 0, 1, 5, 20, 60])
        walltime = rng.choice([10, 30, 60, 120, 600, 1800])
        delay = max(1, int(walltime * rng.choice([0.05, 0.3, 0.9, 1.0, 1.2])))
        res = rng.choice([1, 1, 2, 3, machines // 2, machines])
        out["jobs"].append(
            {"id": i, "subtime": t, "res": res, "profile": f"d{delay}", "walltime": walltime}
        )
        out["profiles"][f"d{delay}"] = {"type": "delay", "delay": delay}
    return out


@pytest.mark.parametrize("policy", ["fcfs", "wfp", "spf", "saf"])
@pytest.mark.parametrize("estimator", ["requested", "actual"])
def test_every_pass_of_random_replays_is_sound_and_maximal(policy: str, estimator: str) -> None:
    rng = random.Random(f"{policy}-{estimator}")
    passes = backfilled = skipped = 0
    for _ in range(12):
        machines = rng.choice([4, 8, 13])
        workload = random_workload(rng, 60, machines)
        scheduler = EasyScheduler(
            policy,
            ActualRuntime() if estimator == "actual" else None,
            starvation_threshold=rng.choice([None, 300.0]),
        )
        checked = CheckedScheduler(scheduler)
        sim = BatsimSimulator([workload], [f"h{i}" for i in range(machines)])
        message = sim.start()
        while message is not None:
            message = sim.step(checked(message))
            scheduler.check_consistency()
        passes += checked.passes
        backfilled += checked.backfilled
        skipped += checked.skipped
        assert len(sim.rows) == 60
    assert passes > 300 and backfilled > 50  # the check really exercised backfilling
    # a dynamic order skips the passes where nothing fits (and only it)
    assert (skipped > 0) == (policy == "wfp")


def test_fcfs_reservations_hold_with_requested_times(tmp_path) -> None:
    """With walltimes as estimates and FCFS, each reserved job starts by its shadow time."""
    rng = random.Random(3)
    for _ in range(10):
        workload = random_workload(rng, 80, 8)
        scheduler = EasyScheduler("fcfs", starvation_threshold=None, audit=True)
        sim = BatsimSimulator([workload], [f"h{i}" for i in range(8)])
        message = sim.start()
        while message is not None:
            message = sim.step(scheduler.handle(message))
        write_jobs_csv(tmp_path / "jobs.csv", sim.rows)
        table = read_jobs_csv(tmp_path / "jobs.csv")
        start = dict(zip("w0!" + table["job_id"], table["starting_time"], strict=True))
        assert scheduler.reservations
        for _now, job_id, shadow in scheduler.reservations:
            assert start[job_id] <= shadow + 1e-9
        assert max_machines_in_use(table) <= 8


# --- the pass after a pass: only the new jobs tested, the same decisions ----------------------


def _replay_rows(workload: dict[str, Any], config: Any, incremental: bool, monkeypatch) -> Any:
    from batsched_ml.runs.replaying import run_replay
    from batsched_ml.scheduler import dispatchers

    original = dispatchers.Easy.__init__

    def init(self: Any, **kwargs: Any) -> None:
        original(self, **{**kwargs, "incremental": incremental})

    with monkeypatch.context() as patch:
        patch.setattr(dispatchers.Easy, "__init__", init)
        return run_replay(workload, config).rows


INCREMENTAL_CASES = [
    {"policy": "fcfs"},
    {"policy": "spf"},
    {"policy": "saf"},
    {"policy": "fcfs", "starvation_threshold": 3600.0},
    {"policy": "spf", "starvation_threshold": 3600.0},
    {"policy": "fcfs", "predictor": "easy++"},
    {"policy": "spf", "predictor": "easy++", "correction": "power"},
    {"policy": "fcfs", "predictor": "fixed", "correction": "simple"},
    {"policy": "fcfs", "variant": "classification-idempotent"},
    {"policy": "spf", "variant": "class-clairvoyant"},
    {"policy": "fcfs", "variant": "runtime-clairvoyant"},
]


@pytest.mark.parametrize(
    "settings", INCREMENTAL_CASES, ids=lambda s: "-".join(map(str, s.values()))
)
@pytest.mark.scheduler_source  # patches easy
def test_the_pass_after_a_pass_decides_as_the_whole_walk(settings, monkeypatch) -> None:
    """The pass that tests only the jobs queued since the previous one (nothing else having
    changed) starts exactly what a walk of the whole queue starts: the same job table on the
    first 3,000 jobs of KTH-SP2, and the shortcut was taken in a good share of the passes."""
    from batsched_ml.runs.replaying import ReplayConfig
    from batsched_ml.scheduler import easy
    from batsched_ml.workload.io import load_workload
    from batsched_ml.workload.shipped import resolve

    workload = load_workload(resolve(None))
    workload["jobs"] = workload["jobs"][:3000]
    config = ReplayConfig(**settings)
    taken = []
    original = easy._pass_after

    def counted(*args: Any) -> Any:
        out = original(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(easy, "_pass_after", counted)
    walked = _replay_rows(workload, config, False, monkeypatch)
    assert not taken
    shortcut = _replay_rows(workload, config, True, monkeypatch)
    assert shortcut == walked
    assert sum(taken) > 200, (sum(taken), len(taken))


@pytest.mark.parametrize("policy", ["fcfs", "spf", "saf"])
def test_the_pass_after_a_pass_on_random_workloads(policy: str, monkeypatch) -> None:
    from batsched_ml.runs.replaying import ReplayConfig

    rng = random.Random(f"after-{policy}")
    for _ in range(10):
        machines = rng.choice([4, 8, 13])
        workload = random_workload(rng, 200, machines)
        config = ReplayConfig(
            policy=policy,
            predictor=rng.choice(["requested", "easy++", "fixed"]),
            starvation_threshold=rng.choice([None, 300.0]),
        )
        walked = _replay_rows(workload, config, False, monkeypatch)
        assert _replay_rows(workload, config, True, monkeypatch) == walked
