"""The benchmarks whose figures the docs quote still run, on small inputs: a script can import
and still fail when it measures (``option_cost.py`` wrapped a method that mypyc had made
read-only), and its figure then stays in the docs unmeasured. Each runs as a user runs it, in
its own process, from a temporary folder, writing nothing into the repository; all of them
take about ten seconds."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KTH

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def kth_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 2,000 jobs of KTH-SP2, as an SWF file (a few weeks: a few forests)."""
    path = tmp_path_factory.mktemp("trace") / "kth2000.swf"
    with gzip.open(KTH, "rt") as trace:
        lines = [line for line in trace if not line.startswith(";")][:2000]
    path.write_text("".join(lines))
    return path


def run(script: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_trainer_runs_and_finds_the_same_job_tables(kth_slice: Path, tmp_path: Path) -> None:
    out = run("bench_trainer.py", str(kth_slice), "--repeat=1", cwd=tmp_path)
    assert "job tables identical: True" in out


def test_option_cost_runs_and_writes_where_it_is_told(tmp_path: Path) -> None:
    target = tmp_path / "cost.json"
    run("option_cost.py", "--repeats", "1", "--out", str(target), cwd=tmp_path)
    rows = json.loads(target.read_text())["rows"]
    assert [row["option"] for row in rows][:2] == ["easy", "probabilistic"]
    assert rows[0]["replay_ratio"] == 1.0 and all(row["replay_us"] > 0 for row in rows)


def test_the_guard_s_cost_rows_run(tmp_path: Path) -> None:
    out = run(
        "bench_classifier_options.py",
        *("--jobs", "1500", "--repeat", "1", "--only", "variant=classification-guarded"),
        cwd=tmp_path,
    )
    assert "| variant=classification-guarded |" in out
    assert "| variant=classification-guarded,guard_slowdown=1e9 |" in out


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        ("bench_predictors.py", ("requested", "easy++", "--trace", "{slice}"), "APA"),
        ("bench_forest_walk.py", ("{slice}", "--train", "1000", "--rows", "200"), "True"),
        ("bench_forest_fit.py", ("{slice}", "--repeat", "1"), "identical: True"),
        ("bench_classification.py", ("{slice}",), "classification-idempotent: "),
        ("feature_modes.py", ("{slice}",), "online"),
        ("training_setup.py", ("{slice}", "--only", "window 50k"), "max_samples 0.25"),
    ],
)
def test_a_benchmark_runs_on_a_slice(
    script: str, args: tuple[str, ...], expected: str, kth_slice: Path, tmp_path: Path
) -> None:
    out = run(script, *(a.replace("{slice}", str(kth_slice)) for a in args), cwd=tmp_path)
    assert expected in out


def test_the_time_split_adds_up_and_leaves_the_command_s_files_as_they_are(
    kth_slice: Path, tmp_path: Path
) -> None:
    """docs/speed.md quotes its table: each part of a whole replay command timed, the parts
    within the whole, and the files those of a plain run (``--check``, else it fails)."""
    saved = tmp_path / "split.json"
    out = run(
        "time_split.py",
        *("--traces", str(kth_slice), "--repeat", "1", "--check", "--json", str(saved)),
        cwd=tmp_path,
    )
    (row,) = json.loads(saved.read_text())["rows"]
    assert row["same_files"] is True
    parts = ("numpy", "pandas", "package", "load", "replay", "files")
    assert all(row[part] > 0 for part in parts if part != "pandas"), row
    assert row["imports_pandas"] is False  # a replay computes its figures without pandas
    assert row["pandas"] > 0, row
    assert sum(row[part] for part in parts) + row["rest"] == pytest.approx(row["whole"])
    assert row["rest"] > 0, row  # the interpreter's start and exit at least
    assert f"| {kth_slice.name.removesuffix('.swf.gz')}, FCFS | {row['whole']:.2f} s |" in out


def test_the_time_split_of_a_classified_replay_without_compiled_parts(
    kth_slice: Path, tmp_path: Path
) -> None:
    """With ``--python`` each trace is split twice, with the compiled parts and without (the
    run's record says which ran, else the script refuses), the same files both ways; with
    ``--variant`` a classified replay, its trainer's weeks given apart."""
    saved = tmp_path / "split.json"
    out = run(
        "time_split.py",
        *("--traces", str(kth_slice), "--repeat", "1", "--check", "--json", str(saved)),
        *("--python", "--variant", "classification-idempotent"),
        cwd=tmp_path,
    )
    compiled, python = json.loads(saved.read_text())["rows"]
    assert (compiled["python"], python["python"]) == (False, True)
    for row in (compiled, python):
        assert row["same_files"] is True, row
        assert row["variant"] == "classification-idempotent"
        assert 0 < row["train"] < row["replay"], row
    name = kth_slice.name.removesuffix(".swf.gz")
    assert f"| {name}, FCFS classification-idempotent | {compiled['whole']:.2f} s |" in out
    assert f"| {name}, FCFS classification-idempotent, no compiled part | " in out
    assert f"of which the trainer's weeks {python['train']:.2f} |" in out


def test_the_python_walks_are_counted_on_the_python_parts(kth_slice: Path, tmp_path: Path) -> None:
    """The counts the speed notes quote for a replay without compiled parts: clock steps and
    the sleeps each updates, EASY's walks behind the head and the jobs each tests."""
    out = run("python_walks.py", "--traces", str(kth_slice), cwd=tmp_path)
    row = next(line for line in out.splitlines() if line.startswith("| kth2000"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    jobs, steps = (int(cells[k].replace(",", "")) for k in (1, 2))
    per_step, largest = cells[3].split()
    walks, by_blocks = (int(cells[k].replace(",", "")) for k in (4, 5))
    per_walk = int(cells[6])
    assert jobs == 2000 and steps > jobs, row  # at least a step for each job's end
    assert 1 <= int(per_step) <= int(largest.strip("()").replace(",", "")), row
    assert walks > 0 and per_walk >= 1, row
    assert 0 <= by_blocks <= walks, row


def test_the_compiled_scheduler_s_benchmark_runs_and_finds_the_same_job_table(
    tmp_path: Path,
) -> None:
    """docs/speed.md quotes its ratio: the compiled scheduler against its source, one replay
    of each on KTH-SP2 here, the same job table."""
    out = run(
        "bench_compiled_scheduler.py",
        *("--trace", "KTH-SP2-1996-2.1-cln", "--policies", "fcfs", "--repeat", "1"),
        cwd=tmp_path,
    )
    row = next(line for line in out.splitlines() if line.startswith("| KTH-SP2"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "fcfs" and cells[-1] == "yes", row
    assert float(cells[2]) > 0 and float(cells[3]) > 0, row


def test_the_library_against_the_socket_runs_with_every_reply_checked(tmp_path: Path) -> None:
    """docs/batsim5.md quotes its table: Batsim 5's library mode, the socket and no transport
    answer the recorded messages (each reply checked against the recording, or it fails)."""
    out = run("edc_vs_socket.py", "--repeat", "1", cwd=tmp_path)
    modes = {line.split()[0] for line in out.splitlines()[2:5]}
    assert modes == {"library", "socket", "in-process"}, out
    assert "socket / library:" in out


@pytest.mark.long  # 9 s: the stops themselves are tests/test_stops.py's, in the default run
def test_the_stops_benchmark_runs_and_every_command_stops_by_its_signal(tmp_path: Path) -> None:
    """docs/reliability.md quotes its figures: each case's command stopped by its signal,
    with the signal's exit status, in well under the suite's generous bound."""
    out = run("bench_stops.py", "--repeat", "1", cwd=tmp_path)
    cases = re.findall(r"(SIGINT|SIGTERM) +exit \[(\d+)\] stopped in ([\d.]+) s", out)
    assert len(cases) == 3, out
    for signal, status, seconds in cases:
        assert int(status) == {"SIGINT": 130, "SIGTERM": 143}[signal], out
        assert float(seconds) < 30, out


def test_what_each_compiled_part_buys_is_measured_on_the_same_job_table(
    kth_slice: Path, tmp_path: Path
) -> None:
    """``compiled_parts.py`` replaces one compiled part after the other by its reference (each
    side checked to have run what it says) and finds the same job table on every side."""
    saved = tmp_path / "parts.json"
    out = run(
        "compiled_parts.py",
        *("--traces", str(kth_slice), "--repeat", "1", "--json", str(saved)),
        cwd=tmp_path,
    )
    (row,) = json.loads(saved.read_text())["rows"]
    sides = ["compiled", "scheduler source", "Python actors", "Python actors and kernel"]
    sides.append("nothing compiled")
    assert list(row["seconds"]) == sides and row["same"] is True, row
    assert all(seconds > 0 for seconds in row["seconds"].values()), row
    name = kth_slice.name
    assert f"| {name}, FCFS | {row['seconds']['compiled']:.2f} s |" in out
