"""SimGrid's floating-point clock in the embedded simulator (issue 17).

Three kinds of checks:

* the kernel's fast ``solve`` (sleeps of 2**14 s or more skipped on a transfer's 1e-12 s step,
  the lowest sleep tracked) gives exactly what a plain, line-by-line transcription of SimGrid's
  ``solve`` gives, on random workloads built to drift (bursts of equal submission times, long
  overlapping sleeps, times large enough for the clock's ulp to exceed 1e-9);
* the emulated arithmetic's own invariants on such workloads, while hunting for splits (a
  burst of same-``subtime`` jobs delivered in two messages at the same printed time);
* the arithmetic itself on hand-made cases whose every step can be worked out by hand.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batsched_ml.protocol.events import JobCompleted, JobSubmitted, Message
from batsched_ml.sim import simgrid, simulator
from batsched_ml.sim.loop import SerialFcfs
from batsched_ml.sim.simgrid import COMM_RATE, TIMING_PRECISION, WORK_PRECISION, Comm, Kernel
from batsched_ml.sim.simulator import BatsimSimulator, json_time


class NaiveKernel(Kernel):
    """``EngineImpl::solve`` written out plainly: every action, every step, creation order."""

    def solve(self) -> bool:
        sleeps = sorted([*self._short.values(), *self._long.values()], key=lambda s: s.key)
        comm = self._comm
        step = -1.0
        if comm is not None:
            step = comm.remains / COMM_RATE if comm.remains > 0 else 0.0
        for sleep in sleeps:
            if step < 0 or sleep.m < step:
                step = sleep.m
        if step < 0:
            return False
        self.steps += 1
        self.now += step
        actions: list[Any] = sorted(sleeps + ([comm] if comm else []), key=lambda a: a.key)
        ended = []
        for action in actions:
            if isinstance(action, Comm):
                remains = action.remains - COMM_RATE * step
                action.remains = 0.0 if remains < WORK_PRECISION else remains
                if action.remains <= 0:
                    ended.append(action)
                    self._comm = None
                continue
            m = action.m - step
            if m < TIMING_PRECISION:
                ended.append(action)
                self._short.pop(action.key, None)
                self._long.pop(action.key, None)
            else:
                action.m = m
        self._low = self._lowest()
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


def run(workload: dict[str, Any], kernel: type[Kernel], monkeypatch) -> tuple[list, list, Any]:
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
        fast = run(workload, Kernel, patch)
    with pytest.MonkeyPatch.context() as patch:
        plain = run(workload, NaiveKernel, patch)
    assert fast[0] == plain[0]  # every message, event by event
    assert fast[1] == plain[1]  # jobs.csv
    assert fast[2] == plain[2]  # SimGrid's clock at every message, bit for bit


def test_hunting_splits_keeps_the_arithmetics_invariants(monkeypatch) -> None:
    splits = drifted = 0
    for seed in range(40):
        workload = drift_prone_workload(random.Random(seed), 80)
        messages, rows, clocks = run(workload, Kernel, monkeypatch)
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
        assert actor.sleep is not None and actor.sleep.m == 2147.0 - 10 * 2.0**-40
        assert kernel.solve() and actor.sleep is None
        assert kernel.now == end


def test_a_sleep_below_the_precision_still_takes_a_step() -> None:
    """sleep_for(9.09e-13) only warns in SimGrid: the actor wakes one step later."""
    kernel = Kernel()
    kernel.now = 7860.0 - 2.0**-40

    def sleeper():
        yield (simgrid.SLEEP, 2.0**-40)

    kernel.spawn("submitter", sleeper())
    list(kernel.run())
    assert kernel.now == 7860.0 and kernel.steps == 1


def test_sleeps_closer_than_the_precision_end_together() -> None:
    """double_update: a remaining duration below 1e-9 after a step is 0, so the two sleeps
    end in one step and their actors wake in the order the sleeps were created."""
    kernel = Kernel()
    woke: list[str] = []

    def sleeper(name: str, duration: float):
        yield (simgrid.SLEEP, duration)
        woke.append(name)

    kernel.spawn("b", sleeper("b", 10.0 + 5e-10))
    kernel.spawn("a", sleeper("a", 10.0))
    list(kernel.run())
    assert woke == ["b", "a"] and kernel.steps == 1 and kernel.now == 10.0
