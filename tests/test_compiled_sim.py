"""The compiled simulator (``batsched_ml/sim/_csim.c``, :mod:`batsched_ml.sim.csim`) against
its reference, the Python simulator, and against real Batsim's recordings.

Both simulators are driven by the same Python scheduler; every comparison is of whole files,
byte for byte (``jobs.csv``, ``predictions.csv``, ``summary.json`` written by
:func:`batsched_ml.results.outputs.write_replay`), and of the messages themselves: every message the
scheduler received, event by event. The workloads: the shipped trace under every policy and
the related work's parts, random workloads built to reach what is hard to get right (SimGrid's
clock drifting off the integers, bursts of equal submission times, ids whose string order is not
their numeric order, walltime kills, jobs wider than the machine, machines in several 64-bit
words), a scheduler of the tests that kills jobs, asks to be called later and sets metadata,
wrong decisions (the same error, word for word), and every trace of ``../shared/traces``
(``long``). Against real Batsim 4.2.1: the job tables and message counts of the recorded static
cases, and the whole CTC-SP2 trace (77,205 jobs).

Without the compiled simulator these tests fail where ``BATSCHED_ML_REQUIRE_COMPILED=1`` is set
(CI, which has a compiler) and skip elsewhere.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from procset import ProcSet

from batsched_ml import compiled
from batsched_ml.protocol.events import (
    CallMeLater,
    Event,
    ExecuteJob,
    JobCompleted,
    JobSubmitted,
    KillJob,
    Message,
    Notify,
    RegisterJob,
    RejectJob,
    SetJobMetadata,
)
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, ReplayResult, make_scheduler, run_replay
from batsched_ml.sim import csim, jobs_csv
from batsched_ml.sim.simulator import InvalidDecision, SimulationError
from tests.conftest import REFERENCE, SHARED, missing_compiled, workload_head

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "batsched_ml" / "sim" / "_csim.c"
FILES = ("jobs.csv", "predictions.csv", "summary.json")


@pytest.fixture(scope="module")
def engine() -> Any:
    """The compiled simulator built from this source; a failure where it must be there (CI sets
    BATSCHED_ML_REQUIRE_COMPILED=1), else a skip (no compiler at install)."""
    module = csim.module()
    if module is None:
        missing_compiled("the compiled simulator")
    assert compiled.source_digest(SOURCE) == module.SOURCE_SHA256
    return module


def python_replay(workload: dict[str, Any], config: ReplayConfig, **kwargs: Any) -> ReplayResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(csim, "module", lambda: None)
        result = run_replay(workload, config, **kwargs)
    assert result.engine == "python"
    return result


def files_of(result: ReplayResult, folder: Path) -> dict[str, bytes]:
    """Every file of the run folder but the wall times (``timing.json``)."""
    write_replay(result, folder)
    return {
        path.name: path.read_bytes()
        for path in sorted(folder.iterdir())
        if path.name != "timing.json"
    }


def recorder(messages: list[Message]) -> Callable[[Message], None]:
    return messages.append


def assert_same_replay(
    workload: dict[str, Any], config: ReplayConfig, tmp_path: Path, tag: str = ""
) -> ReplayResult:
    """Replay with each simulator: the same messages in, the same replies out, the same files."""
    seen_c: list[Message] = []
    seen_py: list[Message] = []
    ours = run_replay(workload, config, on_reply=seen_c.append)
    assert ours.engine == "compiled"
    reference = python_replay(workload, config, on_reply=seen_py.append)
    assert ours.messages == reference.messages
    assert seen_c == seen_py  # every reply, decision by decision
    assert ours.scheduler.rejected == reference.scheduler.rejected
    assert ours.rows == reference.rows
    mine = files_of(ours, tmp_path / f"compiled{tag}")
    theirs = files_of(reference, tmp_path / f"python{tag}")
    assert set(mine) == set(theirs) and "jobs.csv" in mine and "summary.json" in mine
    for name in mine:
        assert mine[name] == theirs[name], name
    timing = json.loads((tmp_path / f"compiled{tag}" / "timing.json").read_text())
    assert timing["engine"] == "compiled"
    return ours


# --- every run reaches the one scheduler -------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"backfilling": False},
        {"starvation_threshold": 600.0},
        {"policy": "spf"},
        {"policy": "wfp"},
        {"policy": "saf"},
        {"variant": "runtime-clairvoyant"},
        {"predictor": "easy++"},
        {"predictor": "actual", "dispatcher": "prb"},
        {"predictor": "adaboost", "correction": "simple"},
        {"predictor": "profile", "dispatcher": "sjf"},
        {"predictor": "fixed", "correction": "power"},
    ],
    ids=lambda options: "-".join(f"{k}={v}" for k, v in options.items()) or "fcfs",
)
def test_shipped_trace_gives_the_python_simulators_files(
    engine: Any, kth_workload: dict[str, Any], options: dict[str, Any], tmp_path: Path
) -> None:
    workload = workload_head(kth_workload, 2000)
    assert_same_replay(workload, ReplayConfig(**options), tmp_path)


@pytest.mark.scheduler_source  # patches dispatchers
def test_an_edit_of_the_easy_rule_reaches_an_fcfs_base_replay(
    engine: Any, kth_workload: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FCFS-EASY base run, the most common, is decided by ``scheduler/easy.py`` like any
    other: an EASY pass changed to never backfill changes its schedule, with the compiled
    simulator, into list scheduling's exactly."""
    from batsched_ml.scheduler import dispatchers

    workload = workload_head(kth_workload, 3000)
    before = run_replay(workload, ReplayConfig())
    listed = run_replay(workload, ReplayConfig(backfilling=False))
    assert before.engine == listed.engine == "compiled"
    assert before.rows != listed.rows
    original = dispatchers.easy_pass

    def never_backfill(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "backfilling": False})

    monkeypatch.setattr(dispatchers, "easy_pass", never_backfill)
    after = run_replay(workload, ReplayConfig())
    assert after.engine == "compiled"
    assert after.rows == listed.rows


# --- random workloads -------------------------------------------------------------------------


def random_workload(seed: int, nb_res: int, jobs: int) -> dict[str, Any]:
    """Jobs that reach the hard cases: fractional times on several scales (the clock drifts off
    the integers), bursts of equal submission times, ids shuffled so that their string order
    is not their numeric order, delays past the walltime (kills) and equal to it, no walltime,
    jobs wider than the machine."""
    rng = random.Random(seed)
    profiles: dict[str, Any] = {}
    out = []
    subtime: float = 0.0
    ids = list(range(jobs))
    rng.shuffle(ids)
    for number in ids:
        gap = rng.choice([0, 0, 0, 1, 7, 60, 1 / 3, 0.1, 1e-3, 2.5, 1e5 / 7])
        subtime = round(subtime + gap, 6) if rng.random() < 0.5 else subtime + gap
        delay = rng.choice([1, 5, 60, 3600, 1 / 3, 0.7, 123.456, 1e-6 * rng.randint(1, 9)])
        delay = delay * rng.randint(1, 40)
        name = f"p{number}"
        profiles[name] = {"type": "delay", "delay": delay}
        job: dict[str, Any] = {
            "id": number if rng.random() < 0.7 else str(number),
            "subtime": subtime,
            "res": rng.choice(
                [1, 1, 2, 3, nb_res // 2 or 1, nb_res, nb_res + 1, rng.randint(1, nb_res)]
            ),
            "profile": name,
        }
        walltime = rng.choice(["none", "missing", "above", "equal", "below", "int"])
        if walltime == "none":
            job["walltime"] = -1
        elif walltime == "above":
            job["walltime"] = delay * rng.choice([1.5, 3, 10])
        elif walltime == "equal":
            job["walltime"] = delay
        elif walltime == "below":
            job["walltime"] = delay * rng.choice([0.5, 0.9])
        elif walltime == "int":
            job["walltime"] = rng.randint(1, 7200)
        out.append(job)
    return {"nb_res": nb_res, "jobs": out, "profiles": profiles}


@pytest.mark.parametrize(
    ("seed", "nb_res", "jobs"),
    [(1, 4, 300), (2, 16, 600), (3, 64, 800), (4, 150, 800), (5, 1, 200), (6, 200, 1500)],
)
@pytest.mark.parametrize("backfilling", [True, False], ids=["easy", "list"])
def test_random_workloads_give_the_python_simulators_files(
    engine: Any, seed: int, nb_res: int, jobs: int, backfilling: bool, tmp_path: Path
) -> None:
    workload = random_workload(seed, nb_res, jobs)
    result = assert_same_replay(workload, ReplayConfig(backfilling=backfilling), tmp_path)
    states = {row.split(",")[7] for row in result.rows}
    # the cases are reached: kills at the walltime, rejections, and (below) off-integer times
    assert {"COMPLETED_SUCCESSFULLY", "COMPLETED_WALLTIME_REACHED"} <= states
    if nb_res > 1:
        assert "REJECTED" in states


def edge_workload(seed: int, nb_res: int, jobs: int) -> dict[str, Any]:
    """Times at SimGrid's precision: gaps and delays a nanosecond (``surf/precision``) or a
    transfer (1e-12 s) apart, so that sleeps end in the same step as a transfer, sub-nanosecond
    sleeps and walltimes equal to the delay; thousands of steps end a sleep and a transfer
    together."""
    rng = random.Random(seed)
    profiles: dict[str, Any] = {}
    out = []
    subtime = 0.0
    for number in range(jobs):
        subtime += rng.choice([0, 0, 1, 1e-9, 1.0005e-9, 9.99e-10, 5e-13, 2e-12, 1e-12, 3])
        delay = rng.choice([1, 2, 1 + 1e-9, 1 + 1.0005e-9, 1 - 5e-13, 2e-12, 1e-9, 1.5e-9])
        profiles[f"p{number}"] = {"type": "delay", "delay": delay}
        out.append(
            {
                "id": number,
                "subtime": subtime,
                "res": rng.randint(1, nb_res),
                "profile": f"p{number}",
                "walltime": rng.choice([-1, delay, 2 * delay, 1, 1 + 1e-9]),
            }
        )
    return {"nb_res": nb_res, "jobs": out, "profiles": profiles}


@pytest.mark.parametrize("seed", range(6))
def test_times_at_simgrids_precision_give_the_python_simulators_files(
    engine: Any, seed: int, tmp_path: Path
) -> None:
    assert_same_replay(edge_workload(seed, 4, 300), ReplayConfig(), tmp_path)


def test_the_clock_drifts_in_the_random_workloads(engine: Any) -> None:
    """The random workloads reach start times off the integers and off round fractions, where
    SimGrid's clock (a sum of rounded steps) and the six decimals Batsim prints part ways."""
    result = run_replay(random_workload(2, 16, 600), ReplayConfig())
    assert result.engine == "compiled"
    starts = [row.split(",")[8] for row in result.rows if ",REJECTED," not in row]
    drifted = [start for start in starts if not start.endswith(("000", "001", "999", "998"))]
    assert drifted, "no start time away from a round value"


def fixed6_cases(count: int, seed: int = 6) -> list[float]:
    """Times of every kind the job table and the messages carry: ties of the sixth decimal
    (``1 / 128`` is exactly 0.0078125), the ends of the integer arithmetic's range, dyadic
    fractions (SimGrid's clock is a sum of rounded steps), whole seconds and a half-millionth
    off them, and any bit pattern at all (mostly outside the range: the printf path)."""
    rnd = random.Random(seed)
    values = [0.0078125, 2.5e-7, 1e-7, 9.9e-8, 0.5e-6, 1.0000005, 2.675, 1 / 3, 0.1]
    values += [8589934591.9999995, 8589934592.5, 4294967295.5000005, 1e-6, 123456.7890125]
    for k in range(count):
        kind = k % 4
        if kind == 0:
            value = rnd.uniform(0, 1e9)
        elif kind == 1:
            value = rnd.randrange(1, 1 << 40) / (1 << rnd.randrange(1, 60))
        elif kind == 2:
            value = struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0]
        else:
            value = rnd.randrange(0, 10**12) / 10**6 + rnd.choice([0.0, 5e-7, -5e-7])
        values.append(-value if rnd.random() < 0.2 else value)
    return [v for v in values if math.isfinite(v)]


def test_times_are_written_and_read_as_printf_s_six_decimals(engine: Any) -> None:
    """The job table's ``%.6f`` and the time the scheduler reads (``float`` of it, as Batsim
    prints the clock) come from integer arithmetic where the time allows: the same text as
    Python's ``'%.6f'`` (correctly rounded, ties to even, as glibc's printf) on each value."""
    for value in fixed6_cases(200_000):
        text, read = engine._fixed6(value)
        assert text == f"{value:.6f}", value
        assert read == (value if value == math.floor(value) else float(text)), value


def test_jobs_asking_no_machine_are_rejected_alike(engine: Any, tmp_path: Path) -> None:
    workload = random_workload(9, 8, 60)
    workload["jobs"][7]["res"] = 0
    workload["jobs"][20]["res"] = -2
    result = assert_same_replay(workload, ReplayConfig(), tmp_path)
    ids = {str(workload["jobs"][k]["id"]) for k in (7, 20)}
    assert {f"w0!{name}" for name in ids} <= set(result.scheduler.rejected)


def test_empty_workload(engine: Any, tmp_path: Path) -> None:
    workload = {"nb_res": 4, "jobs": [], "profiles": {}}
    result = assert_same_replay(workload, ReplayConfig(), tmp_path)
    assert result.rows == [] and result.messages == 3  # BEGINS, NOTIFY, ENDS


# --- what a scheduler may ask of Batsim: kills, calls, metadata -----------------------------------


class KillingScheduler:
    """A scheduler of the tests, on top of FCFS-EASY: it kills running jobs now and then (at
    the instant another ends: sometimes one ending at that very instant), asks to be called
    back at odd times and sets metadata; what Batsim answers is all compared."""

    def __init__(self, seed: int) -> None:
        self.inner = make_scheduler(ReplayConfig())
        self.rng = random.Random(seed)
        self.running: dict[str, None] = {}
        self.rejected = self.inner.rejected

    def handle(self, message: Message) -> Message:
        rng = self.rng
        now = message.now
        for event in message.events:
            if isinstance(event, JobCompleted):
                self.running.pop(event.job_id, None)
        reply = self.inner.handle(message)
        extra: list[Event] = []
        for event in message.events:
            if isinstance(event, JobSubmitted) and rng.random() < 0.2:
                extra.append(SetJobMetadata(now, event.job_id, f"tag {rng.randint(0, 9)} é"))
        if self.running and rng.random() < 0.15:
            victims = rng.sample(list(self.running), min(len(self.running), rng.randint(1, 3)))
            extra.append(KillJob(now, victims + victims[:1]))  # a job named twice
        for decision in reply.events:
            if isinstance(decision, ExecuteJob):
                self.running[decision.job_id] = None
                if rng.random() < 0.2:
                    extra.append(CallMeLater(now, now + rng.choice([1e-3, 0.5, 3, 60, 1 / 3])))
        if rng.random() < 0.05:
            extra.append(CallMeLater(now, now + rng.choice([1, 7.25, 2e-3])))
        return Message(reply.now, extra + reply.events)


def run_both(
    workload: dict[str, Any], make: Callable[[], Any]
) -> tuple[csim.Simulator, list[Message], csim.Simulator, list[Message]]:
    hosts = [f"host{i}" for i in range(workload["nb_res"])]
    out: list[Any] = []
    for module in (csim.module(), None):
        sim = csim.Simulator([workload], hosts)
        if module is None:
            sim.module = None
        scheduler = make()
        seen: list[Message] = []

        def handler(message: Message, scheduler: Any = scheduler, seen: list = seen) -> Message:
            seen.append(message)
            return scheduler.handle(message)

        sim.run(handler)
        out += [sim, seen]
    return out[0], out[1], out[2], out[3]


@pytest.mark.parametrize("seed", range(4))
def test_kills_calls_and_metadata_give_the_python_simulators_messages(
    engine: Any, seed: int
) -> None:
    workload = random_workload(20 + seed, 16, 400)
    ours, seen_c, theirs, seen_py = run_both(workload, lambda: KillingScheduler(seed))
    assert ours.engine == "compiled" and theirs.engine == "python"
    assert seen_c == seen_py  # every event of every message, times included
    assert ours.rows == theirs.rows
    kinds = {type(event).__name__ for message in seen_c for event in message.events}
    assert {"JobKilled", "RequestedCall", "JobCompleted", "JobSubmitted"} <= kinds
    states = {row.split(",")[7] for row in ours.rows}
    assert "COMPLETED_KILLED" in states
    assert any('"tag ' in row for row in ours.rows)


class Wrong:
    """FCFS-EASY, except one decision made wrong at its ``at``-th message."""

    def __init__(self, wrong: Callable[[Message, Message], Message], at: int = 3) -> None:
        self.inner = make_scheduler(ReplayConfig())
        self.rejected = self.inner.rejected
        self.count = 0
        self.wrong = wrong
        self.at = at

    def handle(self, message: Message) -> Message:
        reply = self.inner.handle(message)
        self.count += 1
        if self.count < self.at or not any(isinstance(d, ExecuteJob) for d in reply.events):
            return reply
        self.at = 1 << 60  # once
        return self.wrong(message, reply)


def _first_execute(reply: Message) -> ExecuteJob:
    return next(d for d in reply.events if isinstance(d, ExecuteJob))


WRONG: dict[str, Callable[[Message, Message], Message]] = {
    "now in the past": lambda m, r: Message(m.now - 1, r.events),
    "now not finite": lambda m, r: Message(float("nan"), r.events),
    "decision after now": lambda m, r: Message(m.now, [RejectJob(m.now + 5, "w0!1")]),
    "unknown job": lambda m, r: Message(m.now, [RejectJob(m.now, "w0!nope")]),
    "not submitted yet": lambda m, r: Message(m.now, [RejectJob(m.now, "w0!399")]),
    "executed twice": lambda m, r: Message(
        m.now, [*r.events, *[d for d in r.events if isinstance(d, ExecuteJob)][:1]]
    ),
    "wrong size": lambda m, r: Message(
        m.now, [ExecuteJob(m.now, _first_execute(r).job_id, ProcSet((0, 15)))]
    ),
    "outside the machine": lambda m, r: Message(
        m.now,
        [
            ExecuteJob(
                m.now, _first_execute(r).job_id, ProcSet((100, 99 + len(_first_execute(r).alloc)))
            )
        ],
    ),
    "extra fields": lambda m, r: Message(
        m.now,
        [ExecuteJob(m.now, _first_execute(r).job_id, _first_execute(r).alloc, {"mapping": {}})],
    ),
    "dynamic job": lambda m, r: Message(m.now, [RegisterJob(m.now, "w0!x", {"id": "w0!x"})]),
    "notify": lambda m, r: Message(m.now, [Notify(m.now, "registration_finished")]),
    "metadata quote": lambda m, r: Message(m.now, [SetJobMetadata(m.now, "w0!1", 'a"b')]),
    "call not later": lambda m, r: Message(m.now, [CallMeLater(m.now, m.now)]),
    "kill a waiting job": lambda m, r: Message(m.now, [KillJob(m.now, ["w0!398"])]),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_wrong_decisions_get_the_python_simulators_error(engine: Any, case: str) -> None:
    workload = random_workload(30, 16, 400)
    for job in workload["jobs"]:
        job["id"] = int(job["id"])  # "w0!1", "w0!399" exist
    workload["jobs"].sort(key=lambda job: job["id"])
    for k, job in enumerate(workload["jobs"]):
        job["subtime"] = float(k * 10)  # job 398 and 399 come last, long after message 3
        job["res"] = min(job["res"], 8) or 1
    errors = []
    for module in (csim.module(), None):
        sim = csim.Simulator([workload], [f"host{i}" for i in range(16)])
        if module is None:
            sim.module = None
        scheduler = Wrong(WRONG[case])
        with pytest.raises((InvalidDecision, SimulationError, ValueError)) as caught:
            sim.run(scheduler.handle)
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]


def test_a_scheduler_that_never_decides_gets_the_python_simulators_error(engine: Any) -> None:
    workload = random_workload(31, 8, 30)

    def idle(message: Message) -> Message:
        return Message(message.now, [])

    errors = []
    for module in (csim.module(), None):
        sim = csim.Simulator([workload], [f"host{i}" for i in range(8)])
        if module is None:
            sim.module = None
        with pytest.raises(SimulationError) as caught:
            sim.run(idle)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "never executed nor rejected" in errors[0]


@pytest.mark.parametrize(
    "options",
    [
        {"variant": "class-clairvoyant"},
        {"variant": "class-clairvoyant", "policy": "spf"},
        {"variant": "classification-idempotent"},
        {"variant": "classification"},
        {"variant": "classification-idempotent", "predictor": "easy++"},
    ],
    ids=lambda options: "-".join(str(v) for v in options.values()),
)
def test_classified_runs_give_the_python_simulators_files(
    engine: Any, kth_workload: dict[str, Any], options: dict[str, Any], tmp_path: Path
) -> None:
    """Dynamic jobs (registered profiles and jobs, acknowledgements, NOTIFY registration): the
    kill-and-resubmit of the classified variants."""
    result = assert_same_replay(
        workload_head(kth_workload, 3000), ReplayConfig(**options), tmp_path
    )
    if options["variant"] == "classification-idempotent":  # false smalls killed, resubmitted
        assert any(",COMPLETED_KILLED," in row for row in result.rows)
        assert any(row.split(",")[1] != "w0" for row in result.rows)  # resubmissions' workload


def test_forwarded_profiles_run_on_the_python_simulator(
    engine: Any, kth_workload: dict[str, Any]
) -> None:
    sim = csim.Simulator([workload_head(kth_workload, 10)], ["h0"], forward_profiles=True)
    assert not sim.supported()


# --- real Batsim 4.2.1 --------------------------------------------------------------------------

# the recorded static cases whose scheduler is ours: FCFS (list scheduling) or EASY
RECORDED = [
    ("fcfs_small", False),
    ("easy_backfill", True),
    ("walltime_kill", False),
    ("reject", False),
    ("clock_drift", False),
]


@pytest.mark.parametrize(("case", "backfilling"), RECORDED)
def test_the_compiled_simulator_writes_real_batsims_job_table(
    engine: Any, case: str, backfilling: bool
) -> None:
    folder = REFERENCE / case
    workload = json.loads((folder / "workload.json").read_text())
    records = [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()]
    result = run_replay(workload, ReplayConfig(backfilling=backfilling))
    assert result.engine == "compiled"
    assert (
        jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in result.rows)
        == (folder / "out_jobs.csv").read_text()
    )
    assert result.messages == sum(record["dir"] == "batsim->sched" for record in records)
    assert result.scheduler.rejected == (["w0!4"] if case == "reject" else [])


def test_links_with_latencies_are_left_to_the_reference(engine: Any) -> None:
    """The compiled simulator's messages take 1e-12 s: given a platform's routes (links with
    latencies) it does not run, the reference does, and gives real Batsim's job table of
    ``fcfs_small_latency``; the same run without routes is the compiled one's, on time."""
    from batsched_ml.scheduler.core import EasyScheduler
    from batsched_ml.workload.platform import compute_host_names, message_routes

    folder = REFERENCE / "fcfs_small_latency"
    workload = json.loads((folder / "workload.json").read_text())
    hosts = compute_host_names(folder / "platform.xml")
    routes = message_routes(folder / "platform.xml")
    assert routes is not None
    tables = {}
    for given in (routes, None):
        sim = csim.Simulator([workload], hosts, routes=given, compiled_module=engine)
        assert sim.supported() == (given is None)
        sim.run(EasyScheduler("fcfs", starvation_threshold=None, backfilling=False).handle)
        assert sim.engine == ("python" if given is not None else "compiled")
        tables[sim.engine] = jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in sim.rows)
    assert tables["python"] == (folder / "out_jobs.csv").read_text()
    assert tables["compiled"] == (REFERENCE / "fcfs_small" / "out_jobs.csv").read_text()


def test_the_compiled_simulator_writes_real_batsims_whole_ctc_sp2_table(engine: Any) -> None:
    """77,205 jobs of FCFS-EASY served to real Batsim 4.2.1 (``batsim-reference-long``): the
    same 152,547 messages and the same job table, byte for byte, SimGrid's split and reordered
    same-instant events included."""
    folder = SHARED / "batsim-reference-long" / "ctc_sp2_full"
    if not folder.is_dir():
        pytest.skip(f"needs {folder} (the long recordings of ../shared)")
    with gzip.open(folder / "workload.json.gz", "rt") as handle:
        workload = json.load(handle)
    with gzip.open(folder / "out_jobs.csv.gz", "rt") as handle:
        expected = handle.read()
    result = run_replay(workload, ReplayConfig())
    assert result.engine == "compiled"
    assert result.messages == 152_547
    assert jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in result.rows) == expected


TRACES = sorted((SHARED / "traces").glob("*.swf.gz")) if (SHARED / "traces").is_dir() else []


@pytest.mark.long
@pytest.mark.parametrize("trace", TRACES, ids=[t.name.removesuffix(".swf.gz") for t in TRACES])
@pytest.mark.parametrize("policy", ["fcfs", "spf"])
def test_every_trace_gives_the_python_simulators_files(
    engine: Any, trace: Path, policy: str, tmp_path: Path
) -> None:
    from batsched_ml.workload.io import load_workload

    assert_same_replay(load_workload(trace), ReplayConfig(policy=policy), tmp_path)


# --- what the compiled simulator leaves to the reference ------------------------------------------


def test_a_workload_it_does_not_take_goes_to_the_reference(engine: Any) -> None:
    workload = random_workload(7, 8, 50)
    workload["jobs"][3]["walltime"] = 0  # odd: the reference says what it means
    hosts = [f"host{i}" for i in range(8)]
    assert (
        engine.simulate(
            workload["jobs"], workload["profiles"], 8, lambda m: m, csim.TYPES, None, None
        )
        is None
    )
    assert run_replay(workload, ReplayConfig()).engine == "python"
    assert csim.Simulator([workload], hosts).supported()


@pytest.mark.parametrize(
    "breakage",
    ["duplicate id", "unknown profile", "profile not a delay", "zero delay"],
)
def test_bad_workloads_get_the_reference_simulators_error(engine: Any, breakage: str) -> None:
    workload = random_workload(8, 8, 50)
    jobs, profiles = workload["jobs"], workload["profiles"]
    if breakage == "duplicate id":
        jobs[5]["id"] = jobs[4]["id"]
    elif breakage == "unknown profile":
        jobs[5]["profile"] = "nowhere"
    elif breakage == "profile not a delay":
        profiles[jobs[5]["profile"]] = {"type": "parallel_homogeneous", "cpu": 1, "com": 0}
    else:
        profiles[jobs[5]["profile"]]["delay"] = 0
    with pytest.raises(SimulationError):
        run_replay(workload, ReplayConfig())


def test_the_audit_and_the_reply_hook_run_with_the_compiled_simulator(
    engine: Any, kth_workload: dict[str, Any]
) -> None:
    workload = workload_head(kth_workload, 200)
    assert run_replay(workload, ReplayConfig(), audit=True).engine == "compiled"
    assert run_replay(workload, ReplayConfig(), on_reply=lambda reply: None).engine == "compiled"


# --- progress, interruption, memory ---------------------------------------------------------------


def test_progress_counts_finished_jobs(engine: Any, kth_workload: dict[str, Any]) -> None:
    workload = workload_head(kth_workload, 5000)
    seen: list[int] = []
    result = run_replay(workload, ReplayConfig(), progress=seen.append)
    assert result.engine == "compiled"
    assert len(seen) >= 2 and seen == sorted(seen)
    assert seen[-1] == len(result.rows) == 5000


def test_an_error_in_the_progress_callback_stops_the_replay(
    engine: Any, kth_workload: dict[str, Any]
) -> None:
    workload = workload_head(kth_workload, 5000)

    def fail(done: int) -> None:
        raise KeyboardInterrupt  # what Ctrl-C raises from the loop's signal check

    with pytest.raises(KeyboardInterrupt):
        run_replay(workload, ReplayConfig(), progress=fail)


def test_a_simulation_leaves_no_memory_behind(engine: Any) -> None:
    """The compiled simulator's C allocations (PyMem, traced) are all freed, kills and calls
    included: a second and a third run hold no more than the first once dropped."""
    workload = random_workload(21, 16, 400)

    def once() -> None:
        sim = csim.Simulator([workload], [f"host{i}" for i in range(16)])
        sim.run(KillingScheduler(1).handle)
        assert sim.engine == "compiled"
        del sim

    once()  # warm caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            once()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024


def test_a_changed_shared_header_makes_both_kernels_builds_stale(tmp_path: Path) -> None:
    """Both compiled parts include ``_simgrid_clock.h``: their digests (what a build is stamped
    with and checked against) cover it, so an edited header is never run by an old build."""
    folder = ROOT / "batsched_ml" / "sim"
    for name in ("_ckernel.c", "_csim.c", "_simgrid_clock.h"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    before = [compiled.source_digest(tmp_path / name) for name in ("_ckernel.c", "_csim.c")]
    assert before == [compiled.source_digest(folder / n) for n in ("_ckernel.c", "_csim.c")]
    header = tmp_path / "_simgrid_clock.h"
    header.write_text(header.read_text() + "\n/* changed */\n")
    after = [compiled.source_digest(tmp_path / name) for name in ("_ckernel.c", "_csim.c")]
    assert after[0] != before[0] and after[1] != before[1]
