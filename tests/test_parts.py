"""The scheduler's parts through their interfaces, with exact values on hand-made queues and
event streams: each dispatcher's ``decide``, the hooks, and classification combined with a
runtime predictor (EASY++) and with another dispatcher (PRB)."""

from __future__ import annotations

import pytest
from procset import ProcSet

from batsched_ml.alloc import MachineSet, Runs, mask_of
from batsched_ml.job import Job
from batsched_ml.predict.features import FeatureTracker, Submission
from batsched_ml.predict.forest import ForestParams
from batsched_ml.protocol.events import (
    CallMeLater,
    Event,
    ExecuteJob,
    JobCompleted,
    JobKilled,
    JobSubmitted,
    KillJob,
    Message,
    RegisterJob,
    RegisterProfile,
    RequestedCall,
    SimulationBegins,
)
from batsched_ml.runs.replaying import ReplayConfig, make_scheduler, run_replay
from batsched_ml.scheduler.classified import Classifier, ClassifyingScheduler, Safeguard
from batsched_ml.scheduler.core import BatchScheduler, Component, RunningJob, WaitingJob
from batsched_ml.scheduler.cph import ConstraintPlanner
from batsched_ml.scheduler.dispatchers import (
    Easy,
    Greedy,
    ListScheduling,
    Planned,
    make_dispatcher,
    order_for,
)
from batsched_ml.scheduler.policies import LJF, POLICIES, PriorityRule
from batsched_ml.scheduler.predictors import EasyPlusPlus
from batsched_ml.sim.jobs_csv import HEADER
from tests.conftest import waiting, workload_head
from tests.test_classified import FixedTrainer

JOBS_COLUMNS = HEADER.split(",")


# 4 machines: 2 and 3 busy until 100 (one running job of 2 machines), 0 and 1 free; the head
# A needs all four; B, C, D could start now
QUEUE = [waiting("A", 4, 50), waiting("B", 1, 200), waiting("C", 1, 80), waiting("D", 2, 10)]
FREE = [(0, 1)]
ENDS = [(100.0, 0, 2)]


def names(started: list[tuple[WaitingJob, Runs]]) -> list[tuple[str, int]]:
    """Each started job's name and machines as a bitmask."""
    return [(entry.job.id, mask_of(alloc)) for entry, alloc in started]


def test_easy_reserves_for_the_head_and_backfills_what_ends_before_it() -> None:
    started, reservation = Easy().decide(QUEUE, MachineSet(FREE), ENDS, 0.0, False)
    # A's shadow is 100 with no machine to spare: B (200 s) would delay it, C (80 s) does not;
    # D (2 machines) no longer fits
    assert names(started) == [("C", 0b0001)]
    assert (reservation.head.job.id, reservation.shadow, reservation.extra) == ("A", 100.0, 0)


def test_easy_with_shortest_first_backfills_the_shortest_estimate_first() -> None:
    started, reservation = Easy(shortest_first=True).decide(
        QUEUE, MachineSet(FREE), ENDS, 0.0, False
    )
    assert names(started) == [("D", 0b0011)]  # D (10 s) before C (80 s): both machines
    assert reservation.shadow == 100.0


def test_list_scheduling_stops_at_the_first_job_that_does_not_fit() -> None:
    assert ListScheduling().decide(QUEUE, MachineSet(FREE), ENDS, 0.0, False) == ([], None)
    started, reservation = ListScheduling().decide(QUEUE[1:], MachineSet(FREE), ENDS, 0.0, False)
    assert names(started) == [("B", 0b0001), ("C", 0b0010)] and reservation is None


def test_greedy_starts_every_job_that_fits_unless_the_head_starves() -> None:
    started, reservation = Greedy().decide(QUEUE, MachineSet(FREE), ENDS, 0.0, False)
    assert names(started) == [("B", 0b0001), ("C", 0b0010)] and reservation is None
    # a starving head gets EASY's reservation: only C, which ends before 100, starts
    started, reservation = Greedy().decide(QUEUE, MachineSet(FREE), ENDS, 0.0, True)
    assert names(started) == [("C", 0b0001)] and reservation.shadow == 100.0
    # the fallback is any EASY: with shortest-first backfilling, D
    fallback = Easy(shortest_first=True)
    started, _ = Greedy(fallback).decide(QUEUE, MachineSet(FREE), ENDS, 0.0, True)
    assert names(started) == [("D", 0b0011)]


def test_the_planned_dispatcher_starts_what_the_cp_plan_starts_now() -> None:
    # 2 free machines, nothing running: X (2 machines, 100 s) first in the queue, Y and Z (1
    # machine, 10 s each). PRB's list schedule starts X now (total wait 0 + 100 + 100); the
    # plan starts Y and Z now and X at 10 (total wait 10)
    queue = [waiting("X", 2, 100), waiting("Y", 1, 10), waiting("Z", 1, 10)]
    planned = Planned(ConstraintPlanner(budget=1.0))
    started, reservation = planned.decide(queue, MachineSet.full(2), [], 0.0, False)
    assert names(started) == [("Y", 0b01), ("Z", 0b10)] and reservation is None
    assert (planned.planner.calls, planned.planner.improved) == (1, 1)
    # a starving head: EASY instead (X starts, Y is reserved for), no solver call
    started, reservation = planned.decide(queue, MachineSet.full(2), [], 0.0, True)
    assert names(started) == [("X", 0b11)] and planned.planner.calls == 1


def test_each_dispatcher_name_builds_its_part_and_its_queue_order() -> None:
    kinds = {name: type(make_dispatcher(name)) for name in ("easy", "sjf", "ljf", "prb")}
    assert kinds == {"easy": Easy, "sjf": ListScheduling, "ljf": ListScheduling, "prb": Greedy}
    prb = make_dispatcher("prb", backfilling=False, shortest_first=True)
    assert isinstance(prb, Greedy)
    assert (prb.fallback.backfilling, prb.fallback.shortest_first) == (False, True)
    cph = make_dispatcher("cph", {"window": 4})
    assert isinstance(cph, Planned) and cph.planner.window == 4
    assert order_for("easy") is None
    assert order_for("sjf") is POLICIES["spf"] and order_for("ljf") is LJF
    assert isinstance(order_for("prb"), PriorityRule) and order_for("cph") is not order_for("cph")


# --- event streams ----------------------------------------------------------------------------


def begins(machines: int, dynamic: bool = False, delay: float = 300.0) -> SimulationBegins:
    config = {"dynamic-jobs-enabled": dynamic, "dynamic-jobs-acknowledged": dynamic}
    profiles = {"w0": {"p": {"type": "delay", "delay": delay}}}
    return SimulationBegins(0.0, machines, machines, 0, False, True, config, [], [], {}, profiles)


def submitted(t: float, name: str, res: int, walltime: float, user: int) -> JobSubmitted:
    job = {
        "id": f"w0!{name}",
        "subtime": t,
        "res": res,
        "profile": "p",
        "walltime": walltime,
        "user": user,
    }
    return JobSubmitted(t, f"w0!{name}", job)


def completed(t: float, name: str, state: str = "COMPLETED_SUCCESSFULLY") -> JobCompleted:
    return JobCompleted(t, name if "!" in name else f"w0!{name}", state, 0, ProcSet())


def decided(reply: Message) -> list[tuple]:
    """The reply's decisions as plain tuples."""
    out: list[tuple] = []
    for event in reply.events:
        if isinstance(event, ExecuteJob):
            out.append(("execute", event.job_id, str(event.alloc)))
        elif isinstance(event, CallMeLater):
            out.append(("call", event.when))
        elif isinstance(event, KillJob):
            out.append(("kill", *event.job_ids))
        elif isinstance(event, RegisterProfile):
            out.append(("profile", event.workload_name, event.profile_name))
        elif isinstance(event, RegisterJob):
            out.append(("register", event.job_id, event.job["subtime"]))
        else:
            out.append((type(event).__name__,))
    return out


class Recorder(Component):
    """A component that records the hooks it is called through."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_admit(self, entry: WaitingJob, event: JobSubmitted) -> None:
        self.calls.append(("admit", entry.job.name, entry.est))
        entry.rank = 0 if entry.res == 1 else 1  # narrow jobs first

    def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Event]:
        self.calls.append(("started", entry.job.name, now))
        return [CallMeLater(now, now + 1.0)]

    def on_completed(self, running: RunningJob, event: JobCompleted, now: float) -> None:
        self.calls.append(("completed", running.job.name, now))

    def on_requested_call(self, now: float) -> None:
        self.calls.append(("call", now))


def test_a_component_sees_the_named_hooks_and_sets_the_class_rank() -> None:
    recorder = Recorder()
    scheduler = BatchScheduler("fcfs", components=[recorder])
    scheduler.handle(Message(0.0, [begins(2), submitted(0.0, "busy", 2, 50.0, 1)]))
    reply = scheduler.handle(
        Message(1.0, [submitted(1.0, "wide", 2, 10.0, 1), submitted(1.0, "narrow", 1, 20.0, 1)])
    )
    assert decided(reply) == []
    reply = scheduler.handle(Message(5.0, [completed(5.0, "busy"), RequestedCall(5.0)]))
    # the narrow job's rank puts it ahead of the wide one, submitted before it
    assert decided(reply) == [("execute", "w0!narrow", "0"), ("call", 6.0)]
    assert recorder.calls == [
        ("admit", "busy", 50.0),
        ("started", "busy", 0.0),
        ("admit", "wide", 10.0),
        ("admit", "narrow", 20.0),
        ("completed", "busy", 5.0),
        ("call", 5.0),
        ("started", "narrow", 5.0),
    ]


def test_classification_with_easy_plus_plus_plans_with_the_capped_prediction() -> None:
    """classification-idempotent over EASY++ (divider 100 s; small: requested <= 1000 s).

    A (user 1, 4 machines) runs 0-50. B (user 2, requested 600) is small: EASY++ knows nothing
    of user 2 and predicts 600, planned min(600, 100) = 100. At 50 A's completion teaches EASY++
    user 1's 50 s: C (large, requested 2000) and D (small, requested 900) are predicted 50. B
    and D, small, start before C; C's reservation is at B's capped end, 150. D ends at 80
    (EASY++ for user 1: mean of 50 and 30). B, still running at 150, is killed and resubmitted
    as large; the killed attempt is not shown to EASY++, which still predicts 600 for user 2:
    the resubmission starts at 150 (submitted at 10, before C) and C waits until 750."""
    scheduler = ClassifyingScheduler(
        "fcfs",
        variant="classification-idempotent",
        trainer=FixedTrainer(),
        predictor=EasyPlusPlus(),
        audit=True,
    )
    handle = scheduler.handle
    reply = handle(Message(0.0, [begins(4, dynamic=True), submitted(0.0, "A", 4, 5000.0, 1)]))
    assert decided(reply) == [("execute", "w0!A", "0-3")]
    assert decided(handle(Message(10.0, [submitted(10.0, "B", 2, 600.0, 2)]))) == []
    assert scheduler.waiting["w0!B"].est == 100.0 and scheduler.waiting["w0!B"].rank_est == 600
    reply = handle(
        Message(
            50.0,
            [
                completed(50.0, "A"),
                submitted(50.0, "C", 4, 2000.0, 1),
                submitted(50.0, "D", 2, 900.0, 1),
            ],
        )
    )
    assert decided(reply) == [
        ("execute", "w0!B", "0-1"),
        ("call", 150.0),
        ("execute", "w0!D", "2-3"),
        ("call", 150.0),
    ]
    assert (scheduler.waiting["w0!C"].est, scheduler.waiting["w0!C"].rank) == (50.0, 1)
    assert decided(handle(Message(80.0, [completed(80.0, "D")]))) == []
    assert scheduler.predictor.history == {1: [50.0, 30.0]}
    assert decided(handle(Message(150.0, [RequestedCall(150.0)]))) == [("kill", "w0!B")]
    reply = handle(
        Message(
            150.0,
            [
                completed(150.0, "B", "COMPLETED_KILLED"),
                JobKilled(150.0, ["w0!B"], {}),
            ],
        )
    )
    assert decided(reply) == [
        ("profile", "w0_resub", "p__B_r1"),
        ("register", "w0_resub!B_r1", 150.0),
    ]
    assert 2 not in scheduler.predictor.history  # the killed attempt taught nothing
    job = next(e for e in reply.events if isinstance(e, RegisterJob)).job
    reply = handle(Message(150.0, [JobSubmitted(150.0, "w0_resub!B_r1", job)]))
    assert decided(reply) == [("execute", "w0_resub!B_r1", "0-1")]
    assert scheduler.running["w0_resub!B_r1"].est == 600.0
    assert scheduler.reservations == [
        (10.0, "w0!B", 5000.0),
        (50.0, "w0!C", 150.0),
        (80.0, "w0!C", 150.0),
        (150.0, "w0!C", 150.0),
        (150.0, "w0!C", 750.0),
    ]
    assert scheduler.kill_decisions == 1
    assert [(r.job_id, r.predicted_small, r.runtime) for r in scheduler.records] == [
        ("w0!A", False, 50.0),
        ("w0!D", True, 30.0),
    ]


def test_classification_orders_by_the_predictor_within_each_class() -> None:
    """spf over EASY++: user 1's last job ran 10 s, so its large job (requested 3000) is
    predicted 10 and comes before user 2's (requested 2000, predicted 2000); the small job
    (requested 900) comes first, its class before any order."""
    scheduler = ClassifyingScheduler(
        "spf", variant="classification", trainer=FixedTrainer(), predictor=EasyPlusPlus()
    )
    first = [submitted(0.0, "first", 4, 5000.0, 1), submitted(0.0, "hog", 4, 9000.0, 3)]
    scheduler.handle(Message(0.0, [begins(8), *first]))
    scheduler.handle(
        Message(
            10.0,
            [
                completed(10.0, "first"),
                submitted(10.0, "u2", 8, 2000.0, 2),
                submitted(10.0, "u1", 8, 3000.0, 1),
                submitted(10.0, "small", 8, 900.0, 2),
            ],
        )
    )
    assert [e.job.name for e in scheduler.ordered_queue(10.0)] == ["small", "u1", "u2"]
    assert [(e.job.name, e.rank_est, e.est) for e in scheduler.ordered_queue(10.0)] == [
        ("small", 900.0, 900.0),  # classification without safeguard: not capped
        ("u1", 10.0, 10.0),
        ("u2", 2000.0, 2000.0),
    ]


def test_classification_with_the_prb_dispatcher_keeps_small_jobs_first() -> None:
    """PRB orders by urgency, then demand (machines x estimate): L (1 machine, requested
    1500, large) before S (2 machines, requested 900, small) without classes; with them, S
    goes first, takes the two free machines, and L no longer fits. S is small under the
    safeguard: planned 100 s, called back at the divider."""

    def run(variant: str) -> tuple[list[tuple], BatchScheduler]:
        config = ReplayConfig(variant=variant, dispatcher="prb")
        trainer = FixedTrainer() if variant != "base" else None
        scheduler = make_scheduler(config, trainer=trainer)
        scheduler.handle(
            Message(0.0, [begins(4, dynamic=True), submitted(0.0, "busy", 2, 5000.0, 1)])
        )
        reply = scheduler.handle(
            Message(5.0, [submitted(5.0, "L", 1, 1500.0, 1), submitted(5.0, "S", 2, 900.0, 1)])
        )
        return decided(reply), scheduler

    base, _ = run("base")
    assert base == [("execute", "w0!L", "2")]
    classified, scheduler = run("classification-idempotent")
    assert classified == [("execute", "w0!S", "2-3"), ("call", 105.0)]
    assert scheduler.running["w0!S"].est == 100.0
    assert isinstance(scheduler.policy, PriorityRule) and isinstance(scheduler.dispatcher, Greedy)
    assert isinstance(scheduler.part(Classifier), Classifier)
    assert isinstance(scheduler.part(Safeguard), Safeguard)


@pytest.mark.parametrize(
    "dispatcher",
    # CPH's solver is the slowest dispatcher: it runs with the long runs
    ["easy", "sjf", "ljf", "prb", pytest.param("cph", marks=pytest.mark.long)],
)
def test_classification_runs_with_a_predictor_a_correction_and_any_dispatcher(
    dispatcher: str, kth_workload
) -> None:
    """Every workload job finishes once, whatever the combination (the safeguard's kills and
    resubmissions included: 1,200 jobs are about two weeks, the second one classified by the
    first one's forest), and the classifier and the predictor both keep their records."""
    jobs = 1200
    workload = workload_head(kth_workload, jobs)
    config = ReplayConfig(
        variant="classification-idempotent",
        predictor="easy++",
        correction="power",
        dispatcher=dispatcher,
        forest=ForestParams(n_estimators=4, n_jobs=1),
    )
    result = run_replay(workload, config)
    states = [row.split(",")[JOBS_COLUMNS.index("final_state")] for row in result.rows]
    kills = states.count("COMPLETED_KILLED")
    assert kills > 0 and any(record.predicted_small for record in result.scheduler.records)
    ended = states.count("COMPLETED_SUCCESSFULLY") + states.count("COMPLETED_WALLTIME_REACHED")
    assert ended == jobs
    assert len(states) == jobs + kills == jobs + result.scheduler.kill_decisions
    assert len(result.scheduler.records) == jobs
    assert len(result.scheduler.predictor.predictions) == jobs + kills


def test_a_kill_that_meets_the_jobs_own_completion_resubmits_nothing() -> None:
    """The call at B's divider (150) comes in one message; B completes successfully at 150 in
    the next, before the kill lands. Batsim 4.2.1 acknowledges the kill anyway (JOB_KILLED
    lists B with no progress, ``server_on_kill_jobs`` accepts a complete job): B ended on its
    own, so nothing is resubmitted, and a later job is scheduled as usual."""
    scheduler = ClassifyingScheduler(
        "fcfs", variant="classification-idempotent", trainer=FixedTrainer(), audit=True
    )
    handle = scheduler.handle
    reply = handle(Message(0.0, [begins(4, dynamic=True), submitted(0.0, "A", 2, 5000.0, 1)]))
    assert decided(reply) == [("execute", "w0!A", "0-1")]
    reply = handle(Message(50.0, [submitted(50.0, "B", 2, 600.0, 2)]))
    assert decided(reply) == [("execute", "w0!B", "2-3"), ("call", 150.0)]
    assert decided(handle(Message(150.0, [RequestedCall(150.0)]))) == [("kill", "w0!B")]
    reply = handle(
        Message(
            150.0,
            [
                completed(150.0, "B"),  # COMPLETED_SUCCESSFULLY: it ended before the kill
                JobKilled(150.0, ["w0!B"], {}),
                submitted(150.0, "C", 2, 900.0, 1),
            ],
        )
    )
    assert decided(reply) == [("execute", "w0!C", "2-3"), ("call", 250.0)]
    assert scheduler.kill_decisions == 1


def test_python_subclasses_of_the_compiled_classifier_parts_are_honoured() -> None:
    """The classifier, its safeguard, the classifying scheduler and the feature tracker are
    compiled with the scheduler (when built): a researcher's subclass written in Python is
    still accepted, and the compiled code calls its overrides, not the compiled methods."""
    seen: list[tuple[str, str]] = []

    class CountingTracker(FeatureTracker):
        def submit(self, job: Job) -> Submission:
            seen.append(("features", job.id))
            return super().submit(job)

    class MyClassifier(Classifier):
        def _classify(self, features: list[float]) -> tuple[bool, int]:
            seen.append(("classify", ""))
            return False, 1  # large (the stand-in model would say small: 50 s asked)

    class MySafeguard(Safeguard):
        def on_started(self, entry: WaitingJob, running: RunningJob, now: float) -> list[Event]:
            seen.append(("started", entry.job.id))
            return super().on_started(entry, running, now)

    class MyScheduler(ClassifyingScheduler):
        pass

    scheduler = MyScheduler("fcfs", variant="classification-idempotent", trainer=FixedTrainer())
    classifier = scheduler.part(Classifier)
    classifier.tracker = CountingTracker(mode=classifier.tracker.mode)
    reply = scheduler.handle(
        Message(0.0, [begins(4, dynamic=True), submitted(0.0, "A", 2, 50.0, 1)])
    )
    assert decided(reply) == [("execute", "w0!A", "0-1")]
    assert seen == [("features", "w0!A")]

    seen.clear()
    mine = MyClassifier(trainer=FixedTrainer(), threshold=0.4)  # (at 0.5: the forest's vote)
    assembled = BatchScheduler("fcfs", components=[mine, MySafeguard(mine)])
    reply = assembled.handle(
        Message(0.0, [begins(4, dynamic=True), submitted(0.0, "A", 2, 50.0, 1)])
    )
    assert decided(reply) == [("execute", "w0!A", "0-1")]
    assert seen == [("classify", ""), ("started", "w0!A")]
    assert not mine.logical["w0!A"].small  # the override's class, not the model's
