"""SimGrid's floating-point clock in the embedded simulator (issue 17).

Three kinds of checks:

* the kernel's fast ``run`` and ``solve`` (a put's or a get's wait registered with it, sleeps
  of 2**14 s or more skipped on a transfer's 1e-12 s step, the sleeps kept sorted by remaining
  duration), and the compiled kernel (``_ckernel.c``), give exactly what a plain, line-by-line transcription of SimGrid's ``run`` and
  ``solve`` gives, on random workloads built to drift (bursts of equal submission times, long
  overlapping sleeps, times large enough for the clock's ulp to exceed 1e-9);
* the emulated arithmetic's own invariants on such workloads, while hunting for splits (a
  burst of same-``subtime`` jobs delivered in two messages at the same printed time);
* the arithmetic itself on hand-made cases whose every step can be worked out by hand.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batsched_ml.protocol.events import (
    CallMeLater,
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    KillJob,
    Message,
    RequestedCall,
)
from batsched_ml.sim import simgrid, simulator
from batsched_ml.sim.loop import SerialFcfs
from batsched_ml.sim.simgrid import TIMING_PRECISION, WORK_PRECISION, Comm, Kernel
from batsched_ml.sim.simulator import BatsimSimulator, json_time
from tests.test_sim_kernel import KERNELS, compiled_kernel, kernel_named


class NaiveKernel(Kernel):
    """``EngineImpl::run`` and ``EngineImpl::solve`` written out plainly: a put or a get is
    ``start()`` then, next sub-round, a ``wait()`` simcall of its own; every action updated at
    every step, in creation order; the lowest sleep searched for afresh."""

    def run(self):  # type: ignore[override]
        waits: dict[int, Comm] = {}  # the actors whose next simcall is the wait
        while True:
            while self.to_run:
                ran = self.to_run
                self.to_run = []
                calls: list[tuple[simgrid.Actor, Any]] = []
                for actor in ran:
                    if id(actor) in waits:
                        calls.append((actor, ("wait", waits.pop(id(actor)))))
                        continue
                    try:
                        call = actor.gen.send(actor.answer)
                        while call[0] == simgrid.EXCHANGE:
                            reply = yield call[1]
                            call = actor.gen.send(reply)
                    except StopIteration:
                        actor.dead = True
                        continue
                    calls.append((actor, call))
                for actor, call in calls:
                    kind = call[0]
                    if kind == "wait":
                        if call[1].done:
                            actor.answer = call[1].payload
                            self.to_run.append(actor)
                        else:
                            call[1].waiting.append(actor)
                    elif kind in (simgrid.PUT, simgrid.GET):
                        is_send = kind == simgrid.PUT
                        box = self.mailboxes.setdefault(call[1], deque())
                        peer = next((c for c in box if c.is_send != is_send), None)
                        if peer is None:
                            comm = Comm(is_send, call[2] if is_send else None)
                            box.append(comm)
                        else:
                            box.remove(peer)
                            comm = peer
                            if is_send:
                                comm.payload = call[2]
                        if is_send:  # the route runs from the sender's host to the receiver's
                            comm.src = actor.host
                        else:
                            comm.dst = actor.host
                        if peer is not None:
                            self._start(comm)
                        waits[id(actor)] = comm
                        self.to_run.append(actor)
                    elif kind == simgrid.SLEEP:
                        self._sleep(actor, call[1])
                    elif kind == simgrid.CREATE:
                        actor.answer = self.spawn(call[1], call[2])
                        if len(call) > 3:  # a job's actor, on a compute host
                            actor.answer.host = call[3]
                        self.to_run.append(actor)
                    else:
                        assert kind == simgrid.KILL
                        victim = call[1]
                        if not victim.dead:
                            victim.dead = True
                            if victim.sleep is not None:
                                self._cancel(victim.sleep)
                                victim.sleep = None
                            victim.gen.close()
                        actor.answer = None
                        self.to_run.append(actor)
            if not self.solve():
                return

    # its own sleeps: a list in creation order, each with its remaining duration
    def _sleep(self, actor: simgrid.Actor, duration: float) -> None:
        if not hasattr(self, "plain_sleeps"):
            self.plain_sleeps: list[PlainSleep] = []
        sleep = PlainSleep(next(self._keys), float(duration), actor)
        actor.sleep = sleep  # type: ignore[assignment]
        self.plain_sleeps.append(sleep)

    def _cancel(self, sleep: Any) -> None:
        self.plain_sleeps.remove(sleep)

    def remaining(self, sleep: Any) -> float:
        return sleep.m

    def solve(self) -> bool:
        sleeps = list(getattr(self, "plain_sleeps", []))
        comm = self._comm
        step = -1.0
        # next_occurring_event_full: a transfer counts once it has a rate (its latency paid)
        rate = 0.0 if comm is None or comm.latency > 0 else comm.rate
        if comm is not None and rate > 0:
            step = comm.remains / rate if comm.remains > 0 else 0.0
        for sleep in sleeps:
            if step < 0 or sleep.m < step:
                step = sleep.m
        # HostL07Model::next_occurring_event: then the latencies left
        if comm is not None and comm.latency > 0 and (step < 0 or comm.latency < step):
            step = comm.latency
        if step < 0:
            return False
        self.steps += 1
        self.now += step
        actions: list[Any] = sorted(sleeps + ([comm] if comm else []), key=lambda a: a.key)
        ended = []
        for action in actions:
            if isinstance(action, Comm):
                if action.latency > 0:  # HostL07Model::update_actions_state
                    if action.latency > step:
                        action.latency -= step
                        if action.latency < TIMING_PRECISION:
                            action.latency = 0.0
                    else:
                        action.latency = 0.0
                remains = action.remains - rate * step
                action.remains = 0.0 if remains < WORK_PRECISION else remains
                if action.remains <= 0 and rate > 0:
                    ended.append(action)
                    self._comm = None
                continue
            m = action.m - step
            if m < TIMING_PRECISION:
                ended.append(action)
                self.plain_sleeps.remove(action)
            else:
                action.m = m
        for action in ended:
            if isinstance(action, Comm):
                action.done = True
                for waiting in action.waiting:
                    waiting.answer = action.payload
                    self.to_run.append(waiting)
                action.waiting = []
            else:
                action.actor.sleep = None
                action.actor.answer = None
                self.to_run.append(action.actor)
        return True


class PlainSleep:
    """A sleep action of the plain kernel: its key, its remaining duration, its actor."""

    def __init__(self, key: int, m: float, actor: simgrid.Actor) -> None:
        self.key = key
        self.m = m
        self.actor = actor


def drift_prone_workload(rng: random.Random, jobs: int) -> dict[str, Any]:
    """Bursts of equal submission times far from 0, delays up to ~14 h (across 2**14 s)."""
    nb_res = 16
    t = rng.choice([0, 5_000, 16_384, 200_000, 3_000_000])
    rows = []
    profiles: dict[str, dict[str, Any]] = {}
    for i in range(jobs):
        if rng.random() < 0.6:
            t += rng.choice([1, 2, 7, 60, 3_600, 20_000])
        delay = rng.choice([1, 3, 10, 97, 1_000, 4_096, 8_191, 16_383, 16_384, 16_385, 50_000])
        walltime = rng.choice([None, delay, delay + 60, 2 * delay])
        name = f"delay_{delay}"
        profiles[name] = {"type": "delay", "delay": delay}
        job: dict[str, Any] = {"id": i, "subtime": t, "res": rng.randint(1, 6), "profile": name}
        if walltime is not None:
            job["walltime"] = walltime
        rows.append(job)
    return {"nb_res": nb_res, "jobs": rows, "profiles": profiles}


def run(workload: dict[str, Any], kernel: Any, monkeypatch) -> tuple[list, list, Any]:
    monkeypatch.setattr(simulator, "Kernel", kernel)
    sim = BatsimSimulator([workload], [f"host{i}" for i in range(workload["nb_res"])])
    scheduler = SerialFcfs(workload["nb_res"])
    messages = []
    clocks = []
    message: Message | None = sim.start()
    while message is not None:
        messages.append(message)
        clocks.append(sim.now)
        message = sim.step(scheduler(message))
    return messages, sim.rows, clocks


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), jobs=st.integers(5, 60))
@example(seed=1265, jobs=5)  # a sleep left at exactly 2**14 s: a 1e-12 step does move it
def test_fast_solve_is_simgrids_plain_solve(seed: int, jobs: int) -> None:
    workload = drift_prone_workload(random.Random(seed), jobs)
    with pytest.MonkeyPatch.context() as patch:
        plain = run(workload, NaiveKernel, patch)
    for kernel in (Kernel, compiled_kernel()):  # the Python kernel and the compiled one
        with pytest.MonkeyPatch.context() as patch:
            fast = run(workload, kernel, patch)
        assert fast[0] == plain[0]  # every message, event by event
        assert fast[1] == plain[1]  # jobs.csv
        assert fast[2] == plain[2]  # SimGrid's clock at every message, bit for bit


class KillingFcfs(SerialFcfs):
    """SerialFcfs that also asks for calls and kills, and answers some messages late: every
    simcall (kills of sleeping actors, waiters, the REQ-REP actor's sleeps) and the sleeps'
    cancellation take part."""

    def __init__(self, nb_machines: int, rng: random.Random) -> None:
        super().__init__(nb_machines)
        self.rng = rng
        self.watched: list[str] = []
        self.done: set[str] = set()

    def __call__(self, message: Message) -> Message:
        reply = super().__call__(message)
        late = self.rng.choice([0.0, 0.0, 0.0, 0.25, 1.0, 3.0])
        now = message.now + late
        extra: list[Any] = []
        for event in message.events:
            if isinstance(event, JobCompleted):
                self.done.add(event.job_id)
            elif isinstance(event, RequestedCall) and self.watched:
                job_id = self.watched.pop(0)
                if job_id not in self.done:
                    extra.append(KillJob(now, [job_id]))
        for decision in reply.events:
            if isinstance(decision, ExecuteJob) and self.rng.random() < 0.4:
                self.watched.append(decision.job_id)
                delay = self.rng.choice([0.5, 1, 2, 59, 600, 5_000, 20_000])
                extra.append(CallMeLater(now, now + delay))
        events = reply.events + extra
        if late:  # the decisions apply later than the message: the REQ-REP actor sleeps
            for event in events:
                event.timestamp = now
        return Message(now, events)


def driven(sim: BatsimSimulator, scheduler: Any) -> tuple[Any, ...]:
    """Everything a simulation driven by ``scheduler`` shows: its messages, job table, clock at
    each message, kernel steps, and the error that ended it (a kill after the job's end)."""
    messages, clocks = [], []
    message: Message | None = sim.start()
    error = None
    while message is not None:
        messages.append(message)
        clocks.append(sim.now)
        try:
            message = sim.step(scheduler(message))
        except simulator.InvalidDecision as exc:
            error = str(exc)
            break
    return messages, sim.rows, clocks, sim.steps, error


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), jobs=st.integers(5, 40))
def test_fast_kernel_with_kills_and_calls_is_the_plain_one(seed: int, jobs: int) -> None:
    workload = drift_prone_workload(random.Random(seed), jobs)
    results = []
    for kernel in (Kernel, compiled_kernel(), NaiveKernel):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(simulator, "Kernel", kernel)
            hosts = [f"host{i}" for i in range(workload["nb_res"])]
            sim = BatsimSimulator([workload], hosts)
            results.append(driven(sim, KillingFcfs(workload["nb_res"], random.Random(seed))))
    assert results[0] == results[2]
    assert results[1] == results[2]


class Watched(Kernel):
    """The Python kernel, noting which kind of container held its sleeps at each step and
    after each new sleep, and the most sleeps pending at once."""

    kinds: ClassVar[set[type]] = set()
    most: ClassVar[int] = 0

    def _sleep(self, actor: simgrid.Actor, duration: float) -> None:
        super()._sleep(actor, duration)
        Watched.kinds.add(type(self._ms))
        Watched.most = max(Watched.most, len(self._ms))

    def solve(self) -> bool:
        Watched.kinds.add(type(self._ms))
        return super().solve()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    jobs=st.integers(5, 40),
    array_from=st.sampled_from([2, 3, 4, 8]),
)
@example(seed=3, jobs=40, array_from=4)
def test_the_kernel_keeping_its_sleeps_in_an_array_is_the_plain_one(
    seed: int, jobs: int, array_from: int
) -> None:
    """From ``ARRAY_FROM`` pending sleeps the kernel keeps their durations in a numpy array
    (hundreds of jobs running): with the threshold that low, on workloads built to drift, with
    kills, calls and sleeps of 2**14 s on a transfer's step, the same messages, job table and
    clock bit for bit as the plain transcription, going from list to array and back."""
    workload = drift_prone_workload(random.Random(seed), jobs)
    hosts = [f"host{i}" for i in range(workload["nb_res"])]
    results = []
    Watched.kinds, Watched.most = set(), 0
    for kernel in (Watched, NaiveKernel):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(simgrid, "ARRAY_FROM", array_from)
            patch.setattr(simulator, "Kernel", kernel)
            sim = BatsimSimulator([workload], hosts)
            results.append(driven(sim, KillingFcfs(workload["nb_res"], random.Random(seed))))
    assert results[0] == results[1]
    # the array held the sleeps whenever ARRAY_FROM of them were pending at once
    assert (np.ndarray in Watched.kinds) == (Watched.most >= array_from)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    jobs=st.integers(5, 30),
    master=st.sampled_from([0.0006000000000000001, 5e-10, 0.0, 0.25, 1.0]),
    compute=st.sampled_from([0.0016, 3e-3, 0.0, 0.5, 7.0]),
    rates=st.sampled_from([(125e6, 125e6), (1e12, 1.25e9), (1e3, 8.0)]),
)
@example(seed=7, jobs=20, master=0.0006000000000000001, compute=0.0016, rates=(125e6, 125e6))
def test_the_kernel_with_link_latencies_is_the_plain_one(
    seed: int, jobs: int, master: float, compute: float, rates: tuple[float, float]
) -> None:
    """Routes with latencies (the recorded ones, and latencies and rates long enough for sleeps
    to end and kills and calls to come while a message pays its latency or crosses): the
    kernel gives what the plain transcription of L07's latency phase gives, clock bit for bit."""
    from batsched_ml.workload.platform import MessageRoutes

    workload = drift_prone_workload(random.Random(seed), jobs)
    hosts = [f"host{i}" for i in range(workload["nb_res"])]
    routes = MessageRoutes((master, rates[0]), (compute, rates[1]), frozenset(hosts))
    results = []
    for kernel in (Kernel, NaiveKernel):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(simulator, "RoutedKernel", kernel)
            sim = BatsimSimulator([workload], hosts, routes=routes)
            assert type(sim._kernel) is kernel
            results.append(driven(sim, KillingFcfs(workload["nb_res"], random.Random(seed))))
    assert results[0] == results[1]


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_hunting_splits_keeps_the_arithmetics_invariants(kernel_name: str, monkeypatch) -> None:
    splits = drifted = 0
    for seed in range(40):
        workload = drift_prone_workload(random.Random(seed), 80)
        messages, rows, clocks = run(workload, kernel_named(kernel_name), monkeypatch)
        subtime = {f"w0!{job['id']}": job["subtime"] for job in workload["jobs"]}
        delay = {f"w0!{j['id']}": float(j["profile"].split("_")[1]) for j in workload["jobs"]}
        previous_now = -1.0
        seen_burst: dict[float, int] = {}
        for index, (message, clock) in enumerate(zip(messages, clocks, strict=True)):
            # the scheduler reads SimGrid's clock as Batsim prints it, never going back
            assert message.now == json_time(clock)
            assert message.now >= previous_now
            previous_now = message.now
            # the clock stays within far less than Batsim's printed precision of the integers
            assert abs(clock - round(clock)) < 1e-7
            drifted += clock != round(clock)
            for event in message.events:
                assert event.timestamp == message.now
                if isinstance(event, JobSubmitted):
                    # a submission is always seen at its own subtime, split or not
                    assert event.timestamp == subtime[event.job_id]
                    first = seen_burst.setdefault(event.timestamp, index)
                    if first != index:
                        splits += 1
                        # a split burst lands in consecutive messages at the same printed time
                        assert messages[index - 1].now == event.timestamp
                if isinstance(event, JobCompleted):
                    assert event.job_id in delay
        # every job ran for its delay or its walltime exactly, as Batsim prints it
        for row in rows:
            fields = row.split(",")
            job_id, requested, state = f"w0!{fields[0]}", float(fields[5]), fields[7]
            execution = float(fields[9])
            expected = delay[job_id] if state == "COMPLETED_SUCCESSFULLY" else requested
            assert execution == expected, row
            assert float(fields[10]) == float(fields[8]) + execution  # finish = start + run
        assert len(rows) == len(workload["jobs"])
    # the hunt finds what it hunts: the clock drifts and some bursts split
    assert drifted > 0
    assert splits > 0


def test_a_transfer_moves_the_clock_by_an_ulp_or_not_at_all() -> None:
    """1e-12 s is 1.1 ulp at 7860 (ulp 2**-40): +1 ulp; 0.27 ulp at 2**14 s: no move."""
    for start, moved in ((7860.0, 2.0**-40), (20_000.0, 0.0)):
        kernel = Kernel()
        kernel.now = start
        comm = Comm(True, None)
        kernel._start(comm)
        assert kernel.solve() and kernel.now - start == moved
        assert comm.done


def test_a_sleep_loses_each_step_with_its_own_rounding() -> None:
    """Ten transfers during a 2147 s sleep. The sleep (ulp 2**-41) loses 1e-12 rounded to two
    of its ulps, 2**-40, per step; the clock gains 1e-12 rounded to its own ulp: at 5713 (ulp
    2**-40) the two cancel and the sleep ends on 7860 exactly, at 10000 (ulp 2**-39) the clock
    gains twice what the sleep loses and the sleep ends five of its ulps late."""
    for start, end in ((5713.0, 7860.0), (10_000.0, 12_147.0 + 5 * 2.0**-39)):
        kernel = Kernel()
        kernel.now = start
        actor = simgrid.Actor("submitter", iter(()))
        kernel._sleep(actor, 2147.0)
        for _ in range(10):
            kernel._start(Comm(True, None))
            assert kernel.solve()
        assert actor.sleep is not None
        assert kernel.remaining(actor.sleep) == 2147.0 - 10 * 2.0**-40
        assert kernel.solve() and actor.sleep is None
        assert kernel.now == end


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_a_sleep_below_the_precision_still_takes_a_step(kernel_name: str) -> None:
    """sleep_for(9.09e-13) only warns in SimGrid: the actor wakes one step later."""
    kernel = kernel_named(kernel_name)()
    kernel.now = 7860.0 - 2.0**-40

    def sleeper():
        yield (simgrid.SLEEP, 2.0**-40)

    kernel.spawn("submitter", sleeper())
    list(kernel.run())
    assert kernel.now == 7860.0 and kernel.steps == 1


@pytest.mark.parametrize("kernel_name", KERNELS)
def test_sleeps_closer_than_the_precision_end_together(kernel_name: str) -> None:
    """double_update: a remaining duration below 1e-9 after a step is 0, so the two sleeps
    end in one step and their actors wake in the order the sleeps were created."""
    kernel = kernel_named(kernel_name)()
    woke: list[str] = []

    def sleeper(name: str, duration: float):
        yield (simgrid.SLEEP, duration)
        woke.append(name)

    kernel.spawn("b", sleeper("b", 10.0 + 5e-10))
    kernel.spawn("a", sleeper("a", 10.0))
    list(kernel.run())
    assert woke == ["b", "a"] and kernel.steps == 1 and kernel.now == 10.0
