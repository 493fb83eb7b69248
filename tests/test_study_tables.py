"""The study scripts that write the tables of docs/guarded.md and docs/closing-the-gap.md, run on
made-up campaign outputs whose figures are worked out here by hand: a table that drifts from
its runs (a column read from the wrong variant, a gain of the wrong sign) fails here rather than
in the docs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from batsched_ml.results.table import RESULT_COLUMNS

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
KTH = "KTH-SP2-1996-2.1-cln"
SDSC = "SDSC-SP2-1998-4.2-cln"


def _script(name: str, *arguments: str) -> list[str]:
    """The script's printed lines."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *arguments],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def _row_of(lines: list[str], start: str) -> list[str]:
    """The cells of the one table row that starts with ``start``."""
    rows = [line for line in lines if line.startswith(start)]
    assert len(rows) == 1, (start, lines)
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def _run(root: Path, trace: str, folder: str, summary: dict, status: str = "complete") -> None:
    run = root / trace / folder
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"status": status}))
    (run / "summary.json").write_text(json.dumps(summary))


def test_the_never_worse_table_gives_each_method_s_gain_over_its_own_base(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run(runs, KTH, "fcfs-base", {"cumulative_bsld": 1000.0, "mean_bsld": 10.0})
    paper = {"cumulative_bsld": 800.0, "kills": 50, "workload_jobs": 1000}
    _run(runs, KTH, "fcfs-classification-idempotent", paper)
    _run(runs, KTH, "fcfs-class-clairvoyant", {"cumulative_bsld": 600.0})
    cost = {"cumulative_bsld": 700.0, "kills": 300, "workload_jobs": 1000}
    _run(runs, KTH, "fcfs-classification-idempotent-threshold_rule=cost", cost)
    # SDSC-SP2: the method worse than its base; SPF of KTH: a method's run not complete
    _run(runs, SDSC, "fcfs-base", {"cumulative_bsld": 500.0, "mean_bsld": 5.0})
    worse = {"cumulative_bsld": 550.0, "kills": 10, "workload_jobs": 200}
    _run(runs, SDSC, "fcfs-classification-idempotent", worse)
    _run(runs, SDSC, "fcfs-class-clairvoyant", {"cumulative_bsld": 450.0})
    _run(runs, KTH, "spf-base", {"cumulative_bsld": 1.0, "mean_bsld": 1.0})
    _run(runs, KTH, "spf-classification-idempotent", paper, status="failed")
    _run(runs, KTH, "spf-class-clairvoyant", {"cumulative_bsld": 1.0})

    lines = _script("never_worse_table.py", str(runs))

    kth = _row_of(lines, "| KTH-SP2-1996-2.1 | fcfs |")
    assert kth[2:] == ["10.00", "+20.0", "+40.0", "50", "5.0 %", "+30.0, 30 %"]
    sdsc = _row_of(lines, "| SDSC-SP2-1998-4.2 | fcfs |")
    assert sdsc[2:] == ["5.00", "-10.0", "+10.0", "-100", "5.0 %", ""]
    assert f"worse than the base (1): {SDSC} fcfs: -10.0 %" in lines
    missing = next(line for line in lines if line.startswith("missing ("))
    assert f"{KTH} spf" in missing and f"{KTH} fcfs;" not in missing


def _results(folder: Path, rows: list[dict]) -> Path:
    """A campaign's results.csv of ``rows`` (the other columns empty), beside the run folders."""
    table = pd.DataFrame([{column: row.get(column) for column in RESULT_COLUMNS} for row in rows])
    path = folder / "results.csv"
    table.to_csv(path, index=False)
    return path


def test_the_guarded_table_pairs_the_copies_and_reads_the_guard_s_weeks(tmp_path: Path) -> None:
    cumulative = {  # per copy: base, the paper's method, the guarded variant, the ceiling
        "base": (1000.0, 1000.0),
        "classification-idempotent": (800.0, 900.0),
        "classification-guarded": (860.0, 940.0),
        "class-clairvoyant": (600.0, 700.0),
    }
    kills = {"classification-idempotent": (50, 70), "classification-guarded": (20, 40)}
    rows = []
    for variant, values in cumulative.items():
        for copy, value in enumerate(values):
            folder = f"{KTH}/fcfs-{variant}-copy{copy}"
            (tmp_path / folder).mkdir(parents=True)
            if variant == "classification-guarded":
                quality = {"guard_weeks_on": 3 + copy, "weeks_with_model": 10}
                summary = {"classification": quality}
                (tmp_path / folder / "summary.json").write_text(json.dumps(summary))
            row = {"trace": KTH, "policy": "fcfs", "variant": variant, "copy": copy}
            row |= {"status": "done", "path": folder, "cumulative_bsld": value, "jobs": 1000}
            row |= {"mean_bsld": 10.0 + copy, "kills": kills.get(variant, (0, 0))[copy]}
            rows.append(row)
    for variant, values in (("base", (1000.0, 1000.0)), ("classification-guarded", (1100, 1102))):
        for copy, value in enumerate(values):  # SDSC-SP2: the guard worse, a tight interval
            row = {"trace": SDSC, "policy": "fcfs", "variant": variant, "copy": copy}
            row |= {"status": "done", "path": f"{SDSC}/{variant}-{copy}", "cumulative_bsld": value}
            rows.append(row | {"jobs": 100, "mean_bsld": 1.0, "kills": 0})
    for variant in ("classification-idempotent", "class-clairvoyant"):
        for copy in (0, 1):
            row = {"trace": SDSC, "policy": "fcfs", "variant": variant, "copy": copy}
            row |= {"status": "done", "path": f"{SDSC}/{variant}-{copy}", "cumulative_bsld": 900}
            rows.append(row | {"jobs": 100, "mean_bsld": 1.0, "kills": 0})

    printed = _script("guarded_table.py", str(_results(tmp_path, rows)))
    lines = printed[: printed.index("")]  # the first table ("study:"), then the others
    assert lines[0] == "study:"

    kth = _row_of(lines, "| KTH-SP2 | fcfs |")
    # gains over the base, per copy: method 20 and 10 %, guarded 14 and 6 %, ceiling 40 and
    # 30 %; two copies: the Student-t half-width is 12.706 times half their difference
    assert kth[2:5] == ["2", "10.50", "15.0 ± 63.5"]
    assert kth[5:7] == ["10.0 ± 50.8", "35.0 ± 63.5"]
    assert kth[9] == "65 ± 64"  # of the method's gain the guarded run keeps 70 and 60 %
    assert kth[10:14] == ["60 (6.0 %)", "30 (3.0 %)", "4 of 10", "no"]
    sdsc = _row_of(lines, "| SDSC-SP2 | fcfs |")
    assert sdsc[5] == "-10.1 ± 1.3" and sdsc[-1] == "**yes**"  # -10 and -10.2 %
