"""The compiled replay engine (``batsched_ml/sim/_creplay.c``, :mod:`batsched_ml.compiled_replay`)
against its reference, the simulator with the scheduler, and against real Batsim's recordings.

Every comparison is of whole files, byte for byte: ``jobs.csv``, ``predictions.csv`` and
``summary.json`` written by :func:`batsched_ml.outputs.write_replay` from a replay by the engine
and from one by the Python path (the engine turned off), on the shipped trace, on random
workloads built to reach what is hard to get right (SimGrid's clock drifting off the integers,
bursts of equal submission times, ids whose string order is not their numeric order, walltime
kills, jobs wider than the machine, machines in several 64-bit words), and on every trace of
``../shared/traces`` (``long``). Against real Batsim 4.2.1: the job tables and message counts
of the recorded cases whose scheduler is FCFS or EASY, and the whole CTC-SP2 trace (77,205
jobs).
"""

from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from batsched_ml import compiled, compiled_replay
from batsched_ml.outputs import write_replay
from batsched_ml.replaying import ReplayConfig, ReplayResult, run_replay
from batsched_ml.sim import jobs_csv
from batsched_ml.sim.simulator import SimulationError
from tests.conftest import REFERENCE, SHARED, workload_head

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "batsched_ml" / "sim" / "_creplay.c"
FILES = ("jobs.csv", "predictions.csv", "summary.json")


@pytest.fixture(scope="module")
def engine() -> Any:
    """The compiled engine built from this source, or a skip (no compiler at install)."""
    module = compiled_replay.engine()
    if module is None:
        pytest.skip("the compiled replay engine is not built in this install (or is turned off)")
    assert compiled.source_digest(SOURCE) == module.SOURCE_SHA256
    return module


def python_replay(workload: dict[str, Any], config: ReplayConfig) -> ReplayResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled_replay, "engine", lambda: None)
        result = run_replay(workload, config)
    assert result.engine == "python"
    return result


def files_of(result: ReplayResult, folder: Path) -> dict[str, bytes]:
    write_replay(result, folder)
    return {name: (folder / name).read_bytes() for name in FILES}


def assert_same_replay(
    workload: dict[str, Any], config: ReplayConfig, tmp_path: Path, tag: str = ""
) -> ReplayResult:
    """Replay with the engine and with the Python path; the same files, messages, rejections."""
    compiled = run_replay(workload, config)
    assert compiled.engine == "compiled"
    reference = python_replay(workload, config)
    assert compiled.messages == reference.messages
    assert compiled.scheduler.rejected == reference.scheduler.rejected
    assert compiled.rows == reference.rows
    ours = files_of(compiled, tmp_path / f"compiled{tag}")
    theirs = files_of(reference, tmp_path / f"python{tag}")
    for name in FILES:
        assert ours[name] == theirs[name], name
    timing = json.loads((tmp_path / f"compiled{tag}" / "timing.json").read_text())
    assert timing["engine"] == "compiled"
    assert timing["predict_us_per_job"] in (0.0, None)  # a field read in the loop (None: no job)
    return compiled


# --- which runs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, True),
        ({"backfilling": False}, True),
        ({"starvation_threshold": None}, True),
        ({"starvation_threshold": 3600.0}, True),
        ({"policy": "spf"}, False),
        ({"policy": "wfp"}, False),
        ({"variant": "classification"}, False),
        ({"variant": "runtime-clairvoyant"}, False),
        ({"predictor": "actual"}, False),
        ({"predictor_params": {"no_walltime_estimate": 3600.0}}, False),
        ({"correction": "simple"}, False),
        ({"dispatcher": "sjf"}, False),
        ({"dispatcher": "prb"}, False),
    ],
)
def test_only_fcfs_easy_base_runs_go_to_the_engine(options: dict[str, Any], expected: bool) -> None:
    assert compiled_replay.eligible(ReplayConfig(**options)) is expected


# --- the same files as the Python path --------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{}, {"backfilling": False}, {"starvation_threshold": 600.0}],
    ids=["easy", "list", "starving"],
)
def test_shipped_trace_gives_the_python_paths_files(
    engine: Any, kth_workload: dict[str, Any], options: dict[str, Any], tmp_path: Path
) -> None:
    workload = workload_head(kth_workload, 3000)
    assert_same_replay(workload, ReplayConfig(**options), tmp_path)


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
def test_random_workloads_give_the_python_paths_files(
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
def test_times_at_simgrids_precision_give_the_python_paths_files(
    engine: Any, seed: int, tmp_path: Path
) -> None:
    assert_same_replay(edge_workload(seed, 4, 300), ReplayConfig(), tmp_path)


def test_the_clock_drifts_in_the_random_workloads(engine: Any) -> None:
    """The random workloads reach start times off the integers and off round fractions, where
    SimGrid's clock (a sum of rounded steps) and the six decimals Batsim prints part ways."""
    out = compiled_replay.replay(random_workload(2, 16, 600), engine, backfilling=True)
    assert out is not None
    starts = [row.split(",")[8] for row in out[0] if ",REJECTED," not in row]
    drifted = [start for start in starts if not start.endswith(("000", "001", "999", "998"))]
    assert drifted, "no start time away from a round value"


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


# --- real Batsim 4.2.1 --------------------------------------------------------------------------

# the recorded cases whose scheduler is ours: FCFS (list scheduling) or EASY
RECORDED = [
    ("fcfs_small", False),
    ("easy_backfill", True),
    ("walltime_kill", False),
    ("reject", False),
    ("clock_drift", False),
]


@pytest.mark.parametrize(("case", "backfilling"), RECORDED)
def test_the_engine_writes_real_batsims_job_table(
    engine: Any, case: str, backfilling: bool
) -> None:
    folder = REFERENCE / case
    workload = json.loads((folder / "workload.json").read_text())
    records = [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()]
    out = compiled_replay.replay(workload, engine, backfilling=backfilling)
    assert out is not None
    rows, messages, rejected, _predictions = out
    assert (
        jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in rows)
        == (folder / "out_jobs.csv").read_text()
    )
    assert messages == sum(record["dir"] == "batsim->sched" for record in records)
    assert rejected == (["w0!4"] if case == "reject" else [])


def test_the_engine_writes_real_batsims_whole_ctc_sp2_table(engine: Any) -> None:
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
    out = compiled_replay.replay(workload, engine, backfilling=True)
    assert out is not None
    rows, messages, _rejected, _predictions = out
    assert messages == 152_547
    assert jobs_csv.HEADER + "\n" + "".join(row + "\n" for row in rows) == expected


TRACES = sorted((SHARED / "traces").glob("*.swf.gz")) if (SHARED / "traces").is_dir() else []


@pytest.mark.long
@pytest.mark.parametrize("trace", TRACES, ids=[t.name.removesuffix(".swf.gz") for t in TRACES])
def test_every_trace_gives_the_python_paths_files(engine: Any, trace: Path, tmp_path: Path) -> None:
    from batsched_ml.workload.io import load_workload

    assert_same_replay(load_workload(trace), ReplayConfig(), tmp_path)


# --- what the engine leaves to the Python path ---------------------------------------------------


def test_a_workload_it_does_not_replay_goes_the_python_way(engine: Any) -> None:
    workload = random_workload(7, 8, 50)
    workload["jobs"][3]["walltime"] = 0  # the simulator and the scheduler read it differently
    assert compiled_replay.replay(workload, engine, backfilling=True) is None
    assert run_replay(workload, ReplayConfig()).engine == "python"


@pytest.mark.parametrize(
    "breakage",
    ["duplicate id", "unknown profile", "profile not a delay", "zero delay"],
)
def test_bad_workloads_get_the_python_paths_error(engine: Any, breakage: str) -> None:
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
    assert compiled_replay.replay(workload, engine, backfilling=True) is None
    with pytest.raises(SimulationError):
        run_replay(workload, ReplayConfig())


def test_the_transports_and_the_audit_keep_the_python_scheduler(
    engine: Any, kth_workload: dict[str, Any]
) -> None:
    workload = workload_head(kth_workload, 200)
    assert run_replay(workload, ReplayConfig(), audit=True).engine == "python"
    assert run_replay(workload, ReplayConfig(), on_reply=lambda reply: None).engine == "python"


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


def test_a_replay_leaves_no_memory_behind(engine: Any, kth_workload: dict[str, Any]) -> None:
    """The engine's C allocations (PyMem, traced) are all freed: a second and a third replay
    hold no more than the first once their results are dropped."""
    workload = workload_head(kth_workload, 3000)
    compiled_replay.replay(workload, engine, backfilling=True)  # warm caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            out = compiled_replay.replay(workload, engine, backfilling=True)
            assert out is not None
            del out
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024


def test_a_changed_shared_header_makes_both_kernels_builds_stale(tmp_path: Path) -> None:
    """Both compiled kernels include ``_simgrid_clock.h``: their digests (what a build is stamped
    with and checked against) cover it, so an edited header is never run by an old build."""
    folder = ROOT / "batsched_ml" / "sim"
    for name in ("_ckernel.c", "_creplay.c", "_simgrid_clock.h"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    before = [compiled.source_digest(tmp_path / name) for name in ("_ckernel.c", "_creplay.c")]
    assert before == [compiled.source_digest(folder / n) for n in ("_ckernel.c", "_creplay.c")]
    header = tmp_path / "_simgrid_clock.h"
    header.write_text(header.read_text() + "\n/* changed */\n")
    after = [compiled.source_digest(tmp_path / name) for name in ("_ckernel.c", "_creplay.c")]
    assert after[0] != before[0] and after[1] != before[1]
