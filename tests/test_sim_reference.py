"""The embedded simulator against real Batsim 4.2.1: fed the decisions recorded in each
transcript, it must emit exactly the recorded events and write Batsim's jobs.csv byte for byte;
``fcfs_small_latency`` too, its messages taking their routes' latencies (on the Python kernel,
the only one that takes routes)."""

from __future__ import annotations

import json

import pytest

from batsched_ml.protocol.codec import message_from_dict, message_to_dict
from batsched_ml.results.textfile import write_jobs_csv
from batsched_ml.sim import jobs_csv, simulator
from batsched_ml.sim.simulator import BatsimSimulator, InvalidDecision
from batsched_ml.workload.platform import compute_host_names, message_routes
from tests.conftest import load_case
from tests.test_sim_kernel import KERNELS, kernel_named

EXACT_CASES = [
    "fcfs_small",
    "easy_backfill",
    "kill_resubmit",
    "walltime_kill",
    "reject",
    "clock_drift",
]
# links with latencies: the routes of Batsim's messages read from the platform
LATENCY_CASES = ["fcfs_small_latency"]


@pytest.fixture(params=KERNELS)
def kernel(request, monkeypatch) -> str:
    """Each recording through both kernels: the Python reference and the compiled one."""
    monkeypatch.setattr(simulator, "Kernel", kernel_named(request.param))
    return request.param


def _simulator(case) -> BatsimSimulator:
    return BatsimSimulator(
        [case.workload],
        compute_host_names(case.path / "platform.xml"),
        dynamic_jobs=case.dynamic_jobs,
        acknowledge_dynamic_jobs=case.acknowledge,
        workload_paths=["/data/workload.json"],
        routes=message_routes(case.path / "platform.xml"),  # None on the exact platforms
    )


def _skip_other_kernels(name: str, kernel: str) -> None:
    if name in LATENCY_CASES and kernel != KERNELS[0]:
        pytest.skip("routes run on the Python kernel whichever is chosen")


def _replay(case) -> tuple[BatsimSimulator, list[dict]]:
    """Drive the simulator with the recorded scheduler replies; return what it emitted."""
    sim = _simulator(case)
    emitted = [message_to_dict(sim.start())]
    replies = [r["msg"] for r in case.records if r["dir"] == "sched->batsim"]
    for reply in replies:
        out = sim.step(message_from_dict(reply))
        if out is None:
            break
        emitted.append(message_to_dict(out))
    return sim, emitted


@pytest.mark.parametrize("name", EXACT_CASES + LATENCY_CASES)
def test_simulator_emits_the_recorded_events(name: str, kernel: str) -> None:
    _skip_other_kernels(name, kernel)
    case = load_case(name)
    sim, emitted = _replay(case)
    recorded = [r["msg"] for r in case.records if r["dir"] == "batsim->sched"]
    # Same number of messages, each equal as JSON (object key order aside: Batsim lists the
    # profiles of SIMULATION_BEGINS in its hash-map order).
    assert len(emitted) == len(recorded)
    for i, (ours, theirs) in enumerate(zip(emitted, recorded, strict=True)):
        assert ours == theirs, f"message {i} differs"
    # Event types in the same order, exactly (dict equality above ignores only key order).
    assert [[e["type"] for e in m["events"]] for m in emitted] == [
        [e["type"] for e in m["events"]] for m in recorded
    ]
    assert sim.finished


@pytest.mark.parametrize("name", EXACT_CASES + LATENCY_CASES)
def test_simulator_writes_batsims_jobs_csv(name: str, kernel: str, tmp_path) -> None:
    _skip_other_kernels(name, kernel)
    case = load_case(name)
    sim, _ = _replay(case)
    out = tmp_path / "jobs.csv"
    write_jobs_csv(out, sim.rows)
    assert out.read_text() == case.jobs_csv()


def test_simulator_rejects_the_recorded_invalid_decision(kernel: str) -> None:
    case = load_case("invalid_decision")
    sim = _simulator(case)
    sim.start()
    replies = [r["msg"] for r in case.records if r["dir"] == "sched->batsim"]
    sim.step(message_from_dict(replies[0]))
    with pytest.raises(InvalidDecision) as info:
        sim.step(message_from_dict(replies[1]))
    assert info.value.decision == "EXECUTE_JOB"
    assert info.value.subject == "w0!2"
    assert "machines 1 are already in use" in str(info.value)
    # Batsim aborted there too, leaving an empty jobs.csv.
    assert case.jobs_csv() == ""


def test_begins_lists_every_profile_of_the_workload() -> None:
    case = load_case("fcfs_small")
    begins = message_to_dict(_simulator(case).start())["events"][0]["data"]
    assert begins["profiles"]["w0"] == case.workload["profiles"]
    assert json.dumps(begins["compute_resources"][0]) == (
        '{"id": 0, "name": "host0", "state": "idle", "properties": {"role": ""}, '
        '"zone_properties": {}}'
    )


def test_clock_drift_splits_the_burst_at_7860_like_batsim(kernel: str) -> None:
    """SimGrid's clock wakes the submitter one ulp (2**-40 s) before 7860: ``w0!14`` leaves
    alone, ``w0!15``-``w0!17`` and the NOTIFY follow in the next message, both at 7860."""
    case = load_case("clock_drift")
    _, emitted = _replay(case)
    at_7860 = [m for m in emitted if m["now"] == 7860.0]
    assert [[e["data"].get("job_id", e["type"]) for e in m["events"]] for m in at_7860] == [
        ["w0!14"],
        ["w0!15", "w0!16", "w0!17", "NOTIFY"],
    ]


def test_the_copies_are_the_recordings() -> None:
    """tests/data holds copies of ../shared's recordings, so that a plain clone runs the suite;
    beside ../shared, they must still be the very files real Batsim wrote."""
    from tests.conftest import REFERENCE, SHARED_REFERENCE, need_shared

    need_shared()
    copies = sorted(p for p in REFERENCE.rglob("*") if p.is_file() and p.name != "README.md")
    assert len(copies) >= 8 * 5
    for copy in copies:
        original = SHARED_REFERENCE / copy.relative_to(REFERENCE)
        assert copy.read_bytes() == original.read_bytes(), copy


@pytest.mark.long
def test_ctc_sp2_whole_trace_is_real_batsims(kernel: str) -> None:
    """The whole CTC-SP2 recording (real Batsim 4.2.1, 77,205 jobs, FCFS-EASY): fed its
    decisions, the simulator sends every one of its 152,547 messages and writes its job table
    byte for byte (SimGrid's clock splits and reorders same-instant events there)."""
    import gzip

    from tests.conftest import SHARED

    folder = SHARED / "batsim-reference-long" / "ctc_sp2_full"
    if not folder.is_dir():
        pytest.skip(f"needs {folder} (the long recordings of ../shared)")
    with gzip.open(folder / "messages.jsonl.gz", "rt") as handle:
        records = [json.loads(line) for line in handle]
    with gzip.open(folder / "workload.json.gz", "rt") as handle:
        workload = json.load(handle)
    with gzip.open(folder / "out_jobs.csv.gz", "rt") as handle:
        expected_jobs = handle.read()
    sim = BatsimSimulator(
        [workload],
        compute_host_names(folder / "platform.xml"),
        dynamic_jobs=True,
        acknowledge_dynamic_jobs=True,
        workload_paths=["/data/workload.json"],
    )
    recorded = [r["msg"] for r in records if r["dir"] == "batsim->sched"]
    replies = [r["msg"] for r in records if r["dir"] == "sched->batsim"]
    assert message_to_dict(sim.start()) == recorded[0]
    for index, reply in enumerate(replies[:-1], start=1):
        out = sim.step(message_from_dict(reply))
        assert out is not None and message_to_dict(out) == recorded[index], f"message {index}"
    assert sim.step(message_from_dict(replies[-1])) is None and sim.finished
    assert len(recorded) == 152_547
    assert jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in sim.rows) == expected_jobs
