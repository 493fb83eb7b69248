"""The jobs of a trace that the cleaning rules drop are said where the run is: one line per rule
on stderr, and ``input_cleaning`` (rule -> count) in summary.json and run.json, for every entry
point that loads a trace (``replay``, a campaign's runs, ``serve``, the stand-in, ``collect``).
A trace read whole keeps its files as they were: no key at all."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

from batsched_ml.cli import main
from batsched_ml.experiments.campaign import RunSpec, run_one
from tests.test_cli import CMD, serve_against_standin

HEADER = """; Version: 2.2
; UnixStartTime: 820454400
; TimeZoneString: Europe/Stockholm
; MaxProcs: 8
"""


def row(number: int, submit: int, run: int, procs: int, requested: int = 500) -> str:
    return f"{number} {submit} 0 {run} {procs} -1 -1 {procs} {requested} -1 1 1 1 1 1 1 -1 -1\n"


KEPT = [row(1, 0, 100, 2), row(7, 70, 300, 4), row(8, 80, 30, 1)]
DROPPED = [
    row(2, 10, -1, 2),  # run time unknown
    row(3, 20, -5, 2),  # negative run time
    row(4, 30, 0, 2),  # zero run time
    row(5, 40, 50, 0),  # no processors
    row(6, 50, 50, 16),  # more than the machine's 8
    row(2, 60, 50, 1),  # job number 2 again
]
EXPECTED = {
    "duplicate_job_number": 1,
    "nonpositive_run_time": 3,
    "nonpositive_processors": 1,
    "too_many_processors": 1,
}


def write_trace(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = HEADER + "".join(rows)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def dirty(path: Path) -> Path:
    return write_trace(path, KEPT[:1] + DROPPED[:3] + KEPT[1:2] + DROPPED[3:] + KEPT[2:])


def notices(err: str) -> dict[str, int]:
    """rule -> count of the cleaning lines in ``err``."""
    found = {}
    for line in err.splitlines():
        if "dropped by the cleaning rule" in line:
            assert line.startswith("batsched-ml: "), line
            count = int(line.split(": ")[2].split()[0])
            rule = line.split("cleaning rule ")[1].split()[0]
            found[rule] = count
    return found


def test_replay_says_and_records_the_jobs_the_cleaning_dropped(tmp_path: Path, capsys) -> None:
    trace = dirty(tmp_path / "dirty.swf")
    assert main(["replay", str(trace), "-o", str(tmp_path / "out"), "-q"]) == 0
    err = capsys.readouterr().err
    assert notices(err) == EXPECTED
    assert len(err.strip().splitlines()) == 4, err  # one line per rule that dropped jobs
    assert "batsched-ml: dirty.swf: 3 of 9 job(s) dropped by the cleaning rule " in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert summary["input_cleaning"] == run["input_cleaning"] == EXPECTED
    assert summary["jobs"] == 3


def test_a_trace_read_whole_gets_no_notice_and_no_key(tmp_path: Path, capsys) -> None:
    trace = write_trace(tmp_path / "clean.swf", KEPT)
    assert main(["replay", str(trace), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert "cleaning" not in capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert "input_cleaning" not in summary and "input_cleaning" not in run
    # the same keys, in the same order, as the summary of the same run on the dirty trace
    # less the notice: nothing else moved
    dirty(tmp_path / "dirty.swf")
    assert main(["replay", str(tmp_path / "dirty.swf"), "-o", str(tmp_path / "d"), "-q"]) == 0
    other = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert [k for k in other if k != "input_cleaning"] == list(summary)


def test_a_campaign_run_records_them_and_the_campaign_says_them(tmp_path: Path, capsys) -> None:
    dirty(tmp_path / "traces" / "dirty.swf.gz")
    row_ = run_one(RunSpec("dirty", "fcfs", "base"), str(tmp_path / "traces"), str(tmp_path / "o"))
    assert row_["status"] == "done", row_
    folder = tmp_path / "o" / "dirty" / "fcfs-base"
    summary = json.loads((folder / "summary.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    assert summary["input_cleaning"] == run["input_cleaning"] == EXPECTED
    import pandas as pd

    from batsched_ml.experiments.campaign import dropped_by_trace

    table = pd.DataFrame([row_])
    assert dropped_by_trace(table, tmp_path / "o") == {"dirty": EXPECTED}
    config = tmp_path / "c.toml"
    config.write_text(
        f"""
[campaign]
output = "{tmp_path / "c"}"
trace_dir = "{tmp_path / "traces"}"
traces = ["dirty"]
policies = ["fcfs", "spf"]
variants = ["base"]

[dask]
workers = 1
"""
    )
    assert main(["campaign", str(config), "-q"]) == 0
    err = capsys.readouterr().err
    assert notices(err) == EXPECTED  # once for the trace, not once per run
    assert sum("cleaning rule" in line for line in err.splitlines()) == 4


def test_serve_the_stand_in_and_collect_say_and_record_them(tmp_path: Path) -> None:
    """The docker compose chain: the trace converted, served with its workload as calendar,
    played by the stand-in, collected."""
    trace = dirty(tmp_path / "dirty.swf")
    done = subprocess.run(
        [*CMD, "workload", "convert", str(trace), "-o", str(tmp_path / "in"), "--name", "w"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    workload, platform = tmp_path / "in" / "w.json", tmp_path / "in" / "w_platform.xml"
    peer, code, _, serve_err = serve_against_standin(
        ["--timeout", "30", "--calendar", str(workload), "-o", str(tmp_path / "served")],
        ["-p", str(platform), "-w", str(workload), "-e", str(tmp_path / "b" / "run")],
        timeout=60,
    )
    assert peer.returncode == 0 and code == 0, (peer.stderr, serve_err)
    assert notices(peer.stderr) == EXPECTED
    assert notices(serve_err) == EXPECTED
    served = json.loads((tmp_path / "served" / "serve.json").read_text())
    served_run = json.loads((tmp_path / "served" / "run.json").read_text())
    assert served["input_cleaning"] == served_run["input_cleaning"] == EXPECTED
    collected = subprocess.run(
        [
            *CMD,
            *("collect", "--batsim-jobs", str(tmp_path / "b" / "run_jobs.csv")),
            *("--workload", str(workload), "--scheduler", str(tmp_path / "served")),
            *("-o", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert collected.returncode == 0, collected.stderr
    assert notices(collected.stderr) == EXPECTED
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert summary["input_cleaning"] == run["input_cleaning"] == EXPECTED
