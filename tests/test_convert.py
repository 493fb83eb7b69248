"""SWF -> Batsim workload: cleaning rules with exact counts, and job fields."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from batsched_ml.cli import main
from batsched_ml.sim.loop import SerialFcfs, drive
from batsched_ml.sim.simulator import BatsimSimulator
from batsched_ml.workload.convert import _number, _numbers, convert_trace
from batsched_ml.workload.platform import compute_host_names, platform_xml
from batsched_ml.workload.swf import read_swf, read_swf_header
from tests.conftest import ROOT, TRACES

HEADER = "; UnixStartTime: 1000\n; TimeZone: 7200\n; TimeZoneString: Europe/Paris\n; MaxProcs: 8\n"
# job submit wait run alloc cpu mem reqp reqt reqmem status user group exe queue part prec think
JOBS = """\
1 100 0 50 2 -1 -1 2 100 -1 1 5 1 9 2 1 -1 -1
2 110 0 0 2 -1 -1 2 100 -1 0 5 1 9 2 1 -1 -1
3 120 0 30 -1 -1 -1 -1 100 -1 1 5 1 9 2 1 -1 -1
4 130 0 30 16 -1 -1 16 100 -1 1 5 1 9 2 1 -1 -1
5 140 0 60 1 -1 -1 1 60 -1 1 6 1 9 2 1 -1 -1
6 150 0 90 3 -1 -1 -1 60 -1 1 6 1 9 2 1 -1 -1
7 105 0 10 1 -1 -1 1 -1 -1 1 6 1 9 2 1 -1 -1
1 160 0 10 1 -1 -1 1 100 -1 1 6 1 9 2 1 -1 -1
"""


def convert(tmp_path: Path):
    path = tmp_path / "t.swf"
    path.write_text(HEADER + JOBS)
    return convert_trace(read_swf(path))


def test_each_rule_counts_what_it_dropped_or_changed(tmp_path: Path) -> None:
    workload = convert(tmp_path)
    report = workload.report
    assert report.dropped == {
        "duplicate_job_number": 1,  # second job 1
        "nonpositive_run_time": 1,  # job 2
        "nonpositive_processors": 1,  # job 3
        "too_many_processors": 1,  # job 4 asks 16 of 8
    }
    assert report.changed == {
        "missing_requested_time": 1,  # job 7 -> largest requested time (100)
        "walltime_raised": 2,  # job 5 (run == requested) and job 6 (run > requested)
        "unsorted_submit_time": 1,  # job 7 (t=105) moves before jobs 5 and 6
    }
    assert report.kept_jobs == 4


def test_jobs_carry_batsim_fields_and_the_swf_ones(tmp_path: Path) -> None:
    data = convert(tmp_path).data
    assert data["nb_res"] == 8
    assert data["unix_start_time"] == 1100  # header start + first kept submission
    assert (data["time_zone_string"], data["time_zone"]) == ("Europe/Paris", 7200)
    jobs = {job["id"]: job for job in data["jobs"]}
    assert [job["id"] for job in data["jobs"]] == [1, 7, 5, 6]
    assert jobs[1] == {
        "id": 1,
        "subtime": 0,
        "res": 2,
        "profile": "delay_50",
        "walltime": 100,
        "user": 5,
        "group": 1,
        "executable": 9,
        "queue": 2,
        "partition": 1,
        "status": 1,
        "swf_requested_time": 100,
    }
    assert jobs[7]["walltime"] == 100 and jobs[7]["swf_requested_time"] == -1
    assert jobs[5]["walltime"] == 61 and jobs[5]["subtime"] == 40
    assert jobs[6]["walltime"] == 91 and jobs[6]["res"] == 3  # allocated, none requested
    assert data["profiles"]["delay_90"] == {"type": "delay", "delay": 90}


@pytest.mark.parametrize(
    "values",
    [
        [0.0, -0.0, 5.0, -3.0, 1e15, 2.0**62],  # whole only: the column's fast conversion
        [0.5, 5.0, -0.0, 1e-7],
        [2.0**63, 1.0],  # beyond int64: still ints, through int()
        [-(2.0**63), 7.0],
        [float("nan"), 2.0, float("inf")],
    ],
)
def test_a_columns_numbers_are_each_elements_number(values: list[float]) -> None:
    """:func:`_numbers` gives what :func:`_number` (and JSON) gives of each element: the same
    values and the same types (an int for a whole number, else the float)."""
    column = _numbers(np.array(values, dtype=np.float64))
    expected = [_number(v) for v in values]
    assert [type(v) for v in column] == [type(v) for v in expected]
    assert repr(column) == repr(expected)


def test_jobs_of_one_delay_share_its_profile_name(tmp_path: Path) -> None:
    """The jobs of one delay name its profile with one string object (one per job was 11 MiB
    of HPC2N's workload), whole delays as ints, the others as floats."""
    path = tmp_path / "t.swf"
    lines = [
        f"{i} {10 * i} 0 {1000 + i % 2}{'.5' if i < 9 else ''} 1 -1 -1 1 7200 -1 1 5 1 9 2 1 -1 -1"
        for i in range(1, 13)
    ]
    path.write_text(HEADER + "\n".join(lines) + "\n")
    data = convert_trace(read_swf(path)).data
    jobs = data["jobs"]
    assert jobs[0]["profile"] is jobs[2]["profile"] == "delay_1001.5"
    assert jobs[1]["profile"] is jobs[3]["profile"] == "delay_1000.5"
    assert jobs[9]["profile"] is jobs[11]["profile"] == "delay_1000"
    assert data["profiles"]["delay_1000"] == {"type": "delay", "delay": 1000}
    assert type(data["profiles"]["delay_1000.5"]["delay"]) is float
    assert list(data["profiles"]) == ["delay_1001.5", "delay_1000.5", "delay_1001", "delay_1000"]


def test_every_kept_job_completes_successfully_in_the_simulator(tmp_path: Path) -> None:
    """The walltime rule exists for this: Batsim kills delay >= walltime."""
    workload = convert(tmp_path).data
    sim = BatsimSimulator([workload], [f"host{i}" for i in range(8)])
    drive(sim, SerialFcfs(8))
    states = [row.split(",")[7] for row in sim.rows]
    assert states == ["COMPLETED_SUCCESSFULLY"] * 4


def test_cli_convert_writes_workload_and_platform(tmp_path: Path, capsys) -> None:
    path = tmp_path / "t.swf"
    path.write_text(HEADER + JOBS)
    assert main(["workload", "convert", str(path), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "dropped too_many_processors: 1" in out
    assert (tmp_path / "out" / "t.json").exists()
    assert compute_host_names(tmp_path / "out" / "t_platform.xml") == sorted(
        f"host{i}" for i in range(8)
    )


def test_cli_reports_a_bad_line_without_traceback(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.swf"
    path.write_text(HEADER + "1 2 3\n")
    assert main(["workload", "convert", str(path), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"batsched-ml: error: {path}:5: expected 18 fields, found 3"


def test_shipped_platforms_match_the_generator() -> None:
    for platform in sorted((ROOT / "platforms").glob("*.xml")):
        trace = TRACES / (platform.stem + ".swf.gz")
        if not trace.exists():
            continue
        size = read_swf_header(trace).machine_size
        assert platform.read_text() == platform_xml(size), platform.name


@pytest.mark.parametrize(
    ("trace", "kept", "raised"),
    [("KTH-SP2-1996-2.1-cln", 28_467, 513), ("SDSC-SP2-1998-4.2-cln", 54_034, 4_135)],
)
def test_real_trace_cleaning_counts(trace: str, kept: int, raised: int) -> None:
    path = TRACES / f"{trace}.swf.gz"
    if not path.exists():
        pytest.skip("shared traces not available")
    workload = convert_trace(read_swf(path))
    assert workload.report.kept_jobs == kept
    assert workload.report.changed["walltime_raised"] == raised
    for job in workload.data["jobs"]:
        delay = workload.data["profiles"][job["profile"]]["delay"]
        assert delay < job["walltime"]


@pytest.mark.parametrize("marker", ["run.json", "jobs.csv"])
def test_cli_convert_refuses_a_folder_holding_a_run(tmp_path: Path, capsys, marker: str) -> None:
    """A workload written into a run's folder would mix with the run's files: one line, exit 73
    (an output that must not be written), nothing written."""
    path = tmp_path / "t.swf"
    path.write_text(HEADER + JOBS)
    run = tmp_path / "run"
    run.mkdir()
    (run / marker).write_text("{}\n")
    assert main(["workload", "convert", str(path), "-o", str(run)]) == 73
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"batsched-ml: error: {run} holds a run ({marker}): not writing a workload there; "
        "choose another folder for -o"
    ]
    assert sorted(p.name for p in run.iterdir()) == [marker]
