"""WFP's queue of groups under a kinetic tournament (``scheduler/kinetic.py``) against the
first of a sort of the same jobs, at every step of random arrivals, starts and passing time."""

from __future__ import annotations

import random

import pytest

from batsched_ml.alloc import MachineSet, Runs
from batsched_ml.job import Job
from batsched_ml.scheduler.easy import _backfill
from batsched_ml.scheduler.kinetic import WfpQueue
from batsched_ml.scheduler.parts import WaitingJob
from batsched_ml.scheduler.policies import wfp_value


def _first(entries: list[WaitingJob], now: float) -> WaitingJob | None:
    """WFP's first job by a sort's key, ``core._wfp_sorted``'s order."""
    if not entries:
        return None
    return min(
        entries,
        key=lambda e: (e.rank, wfp_value(now - e.subtime, e.rank_est, e.res), e.subtime, e.seq),
    )


def _entry(seq: int, subtime: float, res: int, estimate: float, rank: int = 0) -> WaitingJob:
    job = Job(id=f"w!{seq}", subtime=subtime, res=res, walltime=estimate, profile="p", fields={})
    return WaitingJob(job, seq, estimate, res, subtime, rank_est=estimate, rank=rank)


@pytest.mark.parametrize("seed", range(12))
def test_the_tournament_first_is_the_first_of_the_sorted_queue(seed: int) -> None:
    """Random queues whose jobs tie in every way WFP's jobs tie: the same processors and
    estimate (one priority function of the wait), estimates in proportion to the cube root of
    the processors (the same slope: 1 on 3600 s, 8 on 7200 s), arrivals at the same second,
    class ranks, and estimates the lines cannot vouch for (infinite, far below a second)."""
    rng = random.Random(seed)
    tournament = WfpQueue()
    waiting: dict[int, WaitingJob] = {}
    now = 0.0
    seq = 0
    recompared = 0
    for _step in range(3000):
        roll = rng.random()
        if roll < 0.45 or not waiting:
            res, estimate = rng.choice(
                [
                    (1, 3600.0),
                    (8, 7200.0),
                    (64, 14400.0),
                    (rng.randint(1, 128), rng.choice([60.0, 600.0, 3600.0, 86400.0])),
                    (rng.randint(1, 128), rng.uniform(1.0, 1e5)),
                    (4, float("inf")),
                    (2, 1e-70),
                ]
            )
            subtime = now - rng.choice([0.0, 0.0, 0.0, rng.uniform(0.0, 5000.0)])
            entry = _entry(seq, subtime, res, estimate, rank=rng.choice([0, 0, 0, 1]))
            seq += 1
            waiting[entry.seq] = entry
            tournament.add(entry)
        elif roll < 0.75:
            entry = waiting.pop(rng.choice(list(waiting)))
            assert tournament.remove(entry)
            assert not tournament.remove(entry)
        else:
            now += rng.choice([0.0, 1.0, rng.expovariate(1 / 600.0), rng.uniform(0.0, 1e5)])
        expected = _first(list(waiting.values()), now)
        assert tournament.first(now) is expected
        assert len(tournament) == len(waiting)
        recompared += tournament._sub[1] == now  # a node too close to tell, compared again
    assert recompared > 0


def test_a_slow_overtaking_is_seen_at_its_time() -> None:
    """A wide short job overtakes a narrow old one long after both arrived: the certificate
    expires by then, and the first job changes at the pass where the priorities cross."""
    tournament = WfpQueue()
    old = _entry(0, 0.0, 1, 1000.0)  # slope 1e-3
    wide = _entry(1, 5000.0, 1000, 1000.0)  # slope 1e-2: equal lines at t = 5555.6
    tournament.add(old)
    tournament.add(wide)
    firsts = []
    for now in [5000.0 + k for k in range(0, 1200, 7)]:
        first = tournament.first(now)
        assert first is _first([old, wide], now)
        firsts.append((now, first))
    assert max(now for now, first in firsts if first is old) == 5553.0
    assert min(now for now, first in firsts if first is wide) == 5560.0


def test_time_goes_forward() -> None:
    tournament = WfpQueue()
    tournament.add(_entry(0, 0.0, 1, 10.0))
    assert tournament.first(10.0) is not None
    with pytest.raises(ValueError, match="forward"):
        tournament.first(9.0)


@pytest.mark.parametrize("seed", range(8))
def test_the_groups_give_what_easy_backfills_in_wfp_order(seed: int) -> None:
    """``WfpQueue.behind``: the jobs EASY's walk of the whole queue in WFP's order backfills
    behind a head, in that order, for random free and extra machines and shadow times."""
    rng = random.Random(f"groups-{seed}")
    groups = WfpQueue()
    waiting: dict[int, WaitingJob] = {}
    now = 0.0
    checked = 0
    for seq in range(600):
        now += rng.expovariate(1 / 300.0)
        res = rng.choice([1, 1, 2, 4, 8, rng.randint(1, 64)])
        estimate = rng.choice([600.0, 3600.0, 7200.0, rng.uniform(60.0, 86400.0)])
        entry = _entry(seq, now - rng.choice([0.0, 0.0, rng.uniform(0, 9000)]), res, estimate)
        entry.rank = rng.choice([0, 1])
        waiting[seq] = entry
        groups.add(entry)
        if rng.random() < 0.3:
            gone = waiting.pop(rng.choice(list(waiting)))
            assert groups.remove(gone) and not groups.remove(gone)
        free = rng.choice([0, 1, 3, 8, 17, 64, 300])
        shadow = now + rng.choice([0.0, 500.0, 3600.0, 1e5])
        extra = rng.choice([0, 1, 4, 100])
        queue = sorted(
            waiting.values(),
            key=lambda e: (e.rank, wfp_value(now - e.subtime, e.rank_est, e.res), e.subtime, e.seq),
        )
        machines = MachineSet.full(free)
        started: list[tuple[WaitingJob, Runs]] = []
        _backfill(queue, 0, machines, now, shadow, extra, started)
        assert groups.behind([], free, now, shadow, extra) == [job for job, _ in started]
        checked += len(started)
    assert checked > 1000
