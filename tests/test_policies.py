"""Queue orders and the starvation threshold, on hand-made queues."""

from __future__ import annotations

import itertools
import random

import pytest
from procset import ProcSet

from batsched_ml.job import Job
from batsched_ml.protocol.events import JobCompleted, JobSubmitted, Message, SimulationBegins
from batsched_ml.scheduler.core import BatchScheduler, Component, EasyScheduler, WaitingJob
from batsched_ml.scheduler.dispatchers import Easy, ListScheduling
from batsched_ml.scheduler.predictors import ActualRuntime
from batsched_ml.sim.simulator import BatsimSimulator
from tests.test_easy import random_workload


def begins(machines: int) -> SimulationBegins:
    return SimulationBegins(0.0, machines, machines, 0, False, True, {}, [], [], {}, {})


def submitted(t: float, name: str, res: int, walltime: float) -> JobSubmitted:
    job = {"id": f"w0!{name}", "subtime": t, "res": res, "profile": "p", "walltime": walltime}
    return JobSubmitted(t, f"w0!{name}", job)


# (name, subtime, res, walltime): wait at t=100 is 100 - subtime
QUEUE = [("a", 0, 2, 400), ("b", 10, 1, 100), ("c", 20, 4, 50), ("d", 20, 1, 100), ("e", 30, 3, 10)]


def queue_order(policy: str, now: float = 100.0, threshold: float | None = None) -> list[str]:
    scheduler = EasyScheduler(policy, starvation_threshold=threshold)
    scheduler.handle(Message(0.0, [begins(8)]))
    for name, t, res, walltime in QUEUE:
        scheduler.on_event(submitted(t, name, res, walltime), t)
    return [entry.job.name for entry in scheduler.ordered_queue(now)]


def test_fcfs_orders_by_submission_then_arrival() -> None:
    assert queue_order("fcfs") == ["a", "b", "c", "d", "e"]


def test_spf_orders_by_requested_time_ties_by_submission() -> None:
    # b and d both ask 100 s: b was submitted first
    assert queue_order("spf") == ["e", "c", "b", "d", "a"]


def test_saf_orders_by_requested_area() -> None:
    # areas: a 800, b 100, c 200, d 100, e 30
    assert queue_order("saf") == ["e", "b", "d", "c", "a"]


def test_wfp_orders_by_wait_over_requested_cubed_times_processors() -> None:
    # at t=100: a (100/400)^3*2=0.03125, b (90/100)^3*1=0.729, c (80/50)^3*4=16.384,
    # d (80/100)^3=0.512, e (70/10)^3*3=1029
    assert queue_order("wfp", 100.0) == ["e", "c", "b", "d", "a"]
    # it depends on time: at t=30 e has not waited yet and goes last
    # (c 0.032, b 0.008, d 0.001, a 0.00084, e 0)
    assert queue_order("wfp", 30.0) == ["c", "b", "d", "a", "e"]


def test_starving_jobs_go_first_oldest_first() -> None:
    # threshold 75 s at t=100: a (waited 100) and b (90) starve, c/d (80) too, e (70) does not
    assert queue_order("spf", 100.0, threshold=75.0) == ["a", "b", "c", "d", "e"]
    assert queue_order("spf", 100.0, threshold=85.0) == ["a", "b", "e", "c", "d"]
    assert queue_order("saf", 100.0, threshold=95.0) == ["a", "e", "b", "d", "c"]


def test_starvation_threshold_starts_the_starving_job_in_a_replay() -> None:
    """SPF on a machine of 2: a long 2-machine job starves behind a stream of short ones
    unless the threshold moves it to the head."""

    def run(threshold: float | None) -> float:
        scheduler = EasyScheduler("spf", starvation_threshold=threshold)
        scheduler.handle(Message(0.0, [begins(2)]))
        scheduler.handle(Message(0.0, [submitted(0.0, "s0", 1, 10)]))
        start_of_long = None
        scheduler.handle(Message(1.0, [submitted(1.0, "long", 2, 1000)]))
        for i in range(1, 40):  # a short job every 10 s keeps one machine busy
            t = 10.0 * i
            events = [
                JobCompleted(t, f"w0!s{i - 1}", "COMPLETED_SUCCESSFULLY", 0, ProcSet(0)),
                submitted(t, f"s{i}", 1, 10),
            ]
            reply = scheduler.handle(Message(t, events))
            for decision in reply.events:
                if decision.job_id == "w0!long":
                    start_of_long = t
                    return start_of_long
                assert decision.alloc == ProcSet(0)
        return float("inf")

    assert run(None) == float("inf")
    assert run(50.0) == 60.0  # waited 59 s > 50 at t=60: goes first, takes both machines


class Backdating(Component):
    """Queues some jobs as waiting since earlier (as a resubmission waits since its first
    submission), and ranks some of them first (as a classifier does)."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)

    def on_admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        if self.rng.random() < 0.2:
            entry.subtime -= self.rng.choice([10.0, 100.0, 1000.0])
        entry.rank = self.rng.choice([0, 1, 1])


def twin_schedulers(
    policy: str, predictor: type[ActualRuntime] | None, threshold: float, round: int
) -> tuple[EasyScheduler, EasyScheduler]:
    """Two schedulers alike, to be compared message by message: each with its own
    :class:`Backdating` of the round's seed on odd rounds."""
    parts = [[Backdating(f"{round}")], [Backdating(f"{round}")]] if round % 2 else [[], []]
    first, second = (
        EasyScheduler(
            policy,
            predictor() if predictor is not None else None,
            starvation_threshold=threshold,
            components=components,
        )
        for components in parts
    )
    return first, second


@pytest.mark.parametrize("policy", ["fcfs", "spf", "saf"])
def test_the_kept_queue_is_the_walks(policy: str) -> None:
    """Under a built-in static order the queue is kept from pass to pass (the starving jobs
    moved to the head as they start starving); it is, at every message and at earlier times
    asked afterwards, the queue the walk of the whole queue makes, and the decisions the same
    (backdated and ranked jobs too, and once the threshold is changed midway)."""
    rng = random.Random(f"kept-{policy}")
    moved = 0
    for round in range(12):
        machines = rng.choice([4, 8, 13])
        workload = random_workload(rng, 150, machines)
        threshold = rng.choice([0.0, 30.0, 120.0, 600.0])
        predictor = rng.choice([None, ActualRuntime])
        kept, walked = twin_schedulers(policy, predictor, threshold, round)
        assert kept._kept
        walked._unkeep()
        sim = BatsimSimulator([workload], [f"h{i}" for i in range(machines)])
        message = sim.start()
        while message is not None:
            reply = kept.handle(message)
            assert walked.handle(message) == reply
            now = message.now
            for t in (now, now - rng.choice([1.0, 50.0, 500.0]), now):
                queue = kept.ordered_queue(t)
                assert [e.job.id for e in queue] == [e.job.id for e in walked.ordered_queue(t)]
            moved += kept._starving_count
            if round == 5 and len(sim.rows) >= 75 and kept.starvation_threshold == threshold:
                kept.starvation_threshold = walked.starvation_threshold = threshold + 50.0
            message = sim.step(reply)
        assert len(sim.rows) == 150
        assert kept._kept == (round != 5)  # a changed threshold: the walk from then on
    assert moved > 100  # starving jobs were really kept at the head


@pytest.mark.parametrize("policy", ["fcfs", "spf", "saf"])
@pytest.mark.parametrize("size", [(1, 0, 0), (2, 0, 0), (5, 12, 4), (16, 0, 0), (3, 30, 10)])
def test_a_walk_by_blocks_decides_as_the_walk_job_by_job(
    policy: str, size: tuple[int, int, int]
) -> None:
    """EASY's walk behind the head of a kept queue passes over the blocks with no job that may
    start (``easy.QueueBlocks``): message by message the replies and the reservation (head,
    shadow time, extra machines and those left) are those of the walk job by job, and the
    blocks are the queue behind its starving jobs; with blocks split and joined (small sizes),
    starving jobs moved out and back (earlier times asked), backdated and ranked jobs, and a
    threshold changed midway (the queue no longer kept: no blocks); blocked throughout, or
    from and below a queue length (``size``: the blocks' size, from, below)."""
    rng = random.Random(f"blocks-{policy}-{size}")
    compared = 0
    modes: set[bool] = set()  # whether the queue was in blocks, message by message
    for round in range(10):
        machines = rng.choice([4, 8, 13, 32])
        workload = random_workload(rng, 150, machines)
        threshold = rng.choice([0.0, 30.0, 120.0, 600.0, 1e9])
        predictor = rng.choice([None, ActualRuntime])
        blocked, plain = twin_schedulers(policy, predictor, threshold, round)
        blocked.block_size, blocked.blocks_from, blocked.blocks_below = size
        plain.block_walk = False
        sim = BatsimSimulator([workload], [f"h{i}" for i in range(machines)])
        message = sim.start()
        while message is not None:
            reply = blocked.handle(message)
            assert plain.handle(message) == reply
            assert plain._blocks is None
            made, whole = blocked.last_reservation, plain.last_reservation
            assert (made is None) == (whole is None)
            if made is not None and whole is not None:
                assert (made.head.job.id, made.shadow, made.extra, made.left) == (
                    whole.head.job.id,
                    whole.shadow,
                    whole.extra,
                    whole.left,
                )
                compared += blocked._blocks is not None and len(blocked._blocks.blocks) > 1
            blocked.check_consistency()
            if blocked._kept and len(blocked._sorted) > blocked._starving_count:
                modes.add(blocked._blocks is not None)
            now = message.now
            for t in (now - rng.choice([1.0, 50.0, 500.0]), now):
                assert [e.job.id for e in blocked.ordered_queue(t)] == [
                    e.job.id for e in plain.ordered_queue(t)
                ]
                blocked.check_consistency()
            if round == 5 and len(sim.rows) >= 75 and blocked.starvation_threshold == threshold:
                blocked.starvation_threshold = plain.starvation_threshold = threshold + 50.0
            message = sim.step(reply)
        assert len(sim.rows) == 150
        if round == 5:  # (the queue is no longer kept)
            assert blocked._blocks is None
    assert compared > 100  # passes walked by more than one block were many
    assert modes == ({True, False} if size[1] else {True})  # from 0: blocks as soon as kept


def test_wfp_s_float_sort_is_the_tuple_sort() -> None:
    """The WFP queue sorted by its float priority, ranks apart and ties put in arrival order
    (``core._wfp_sorted``), is the list the tuple key sorts, on queues full of ties (jobs
    queued at the pass's very time, equal waits over equal estimates, -0.0 and 0.0), mixed
    ranks and any input order (shuffled, or in arrival order, where the ties are already in
    theirs and are not sorted again)."""
    from batsched_ml.scheduler.core import _wfp_sorted
    from batsched_ml.scheduler.policies import POLICIES

    key = POLICIES["wfp"].key
    rng = random.Random(7)
    ties = 0
    for case in range(400):
        now = rng.choice([100.0, 250.0, 1e6])
        entries = []
        for seq in range(rng.randint(0, 40)):
            subtime = rng.choice([now, now, 0.0, 50.0, 99.5, now - 1e-9])
            res = rng.choice([1, 2, 4, 64])
            job = Job.from_batsim(f"w!{seq}", {"subtime": subtime, "res": res, "profile": "p"})
            estimate = rng.choice([10.0, 100.0, 3600.0, 1e-3])
            rank = rng.choice([0, 0, 1]) if case % 2 else 0
            entries.append(WaitingJob(job, seq, estimate, res, subtime, estimate, rank))
        rng.shuffle(entries)
        expected = sorted(entries, key=lambda e: (e.rank, *key(e, now)))
        assert _wfp_sorted(entries, now) == expected
        assert [e.seq for e in _wfp_sorted(entries, now)] == [e.seq for e in expected]
        # in arrival order, as a pass gives them: the ties need no sort of their own (skipped)
        arrived = sorted(entries, key=lambda e: (e.subtime, e.seq))
        assert [e.seq for e in _wfp_sorted(arrived, now)] == [e.seq for e in expected]
        ties += sum(key(a, now)[0] == key(b, now)[0] for a, b in itertools.pairwise(expected))
    assert ties > 1000  # the ties were many


class WholeQueueEasy:
    """EASY as it is, behind another class: the scheduler then gives it the whole ordered queue
    at every pass (and skips none), as it did before WFP's passes were given only what fits."""

    def __init__(self, backfilling: bool) -> None:
        self.easy = Easy(backfilling=backfilling)

    def decide(self, queue, free, ends, now, starving):
        return self.easy.decide(queue, free, ends, now, starving)


@pytest.mark.parametrize("kept", [(256, 64), (0, 0), (12, 4)])
def test_a_wfp_pass_given_what_fits_decides_as_one_given_the_whole_queue(
    kept: tuple[int, int],
) -> None:
    """Under WFP an EASY or list-scheduling pass is given the heads, the first job that does
    not fit and the jobs behind it that it backfills (``_wfp_pass_queue``), and skipped when
    nothing fits: the replies are those of a pass given the whole ordered queue, message by
    message, with starving, backdated and ranked jobs, and bursts of more heads than it finds
    one by one; from a walk of the waiting jobs (short queues), from the kept groups and their
    tournament (``kept``: from and below which queue length it is kept; always), and switching
    between the two as the queue grows and shrinks."""
    rng = random.Random("wfp-pass")
    filtered = 0
    modes: set[bool] = set()  # whether the groups were kept, message by message
    for round in range(16):
        machines = rng.choice([4, 8, 13, 32])
        workload = random_workload(rng, 150, machines)
        threshold = rng.choice([None, 0.0, 30.0, 600.0])
        predictor = rng.choice([None, ActualRuntime])
        backfilling = round % 4 != 3
        parts = [[Backdating(f"{round}")], [Backdating(f"{round}")]] if round % 2 else [[], []]
        given_what_fits, given_all = (
            BatchScheduler(
                "wfp",
                predictor and predictor(),
                dispatcher,
                starvation_threshold=threshold,
                components=components,
            )
            for dispatcher, components in zip(
                (
                    Easy(backfilling=True) if backfilling else ListScheduling(),
                    WholeQueueEasy(backfilling=backfilling),
                ),
                parts,
                strict=True,
            )
        )
        given_what_fits.wfp_queue_from, given_what_fits.wfp_queue_below = kept
        sim = BatsimSimulator([workload], [f"h{i}" for i in range(machines)])
        message = sim.start()
        while message is not None:
            waiting = len(given_what_fits.waiting)
            reply = given_what_fits.handle(message)
            assert given_all.handle(message) == reply
            modes.add(given_what_fits._wfp is not None)
            if given_what_fits._wfp is not None and not given_what_fits._wfp_fresh:
                # the kept groups hold every waiting job but the starving ones taken out
                out = given_what_fits._wfp_out
                assert len(given_what_fits._wfp) + len(out) == len(given_what_fits.waiting)
                assert out <= {entry.seq for entry in given_what_fits.waiting.values()}
            made = given_what_fits.last_reservation
            if made is not None:  # the same head and reservation (None: a skipped pass)
                whole = given_all.last_reservation
                assert whole is not None
                assert (made.head.job.id, made.shadow, made.extra, made.left) == (
                    whole.head.job.id,
                    whole.shadow,
                    whole.extra,
                    whole.left,
                )
                filtered += waiting > 0
            message = sim.step(reply)
        assert len(sim.rows) == 150
    assert filtered > 200  # passes with a head were many
    expected_modes = {(256, 64): {False}, (0, 0): {False, True}, (12, 4): {False, True}}
    assert modes == expected_modes[kept]  # (0, 0): none kept before the first pass
