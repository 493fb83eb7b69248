"""The speed table's CI-sized version (``benchmarks/speed_table.py --ci``) as a smoke test: it
runs whole commands on the shipped trace's first jobs and prints the table; nothing about the
times is asserted (CI machines vary), only that every command ran and the table is whole."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import speed_table  # noqa: E402


def test_the_ci_table_runs_the_commands_and_prints_every_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = ["help", "version", "kth", "kth-class"]
    assert speed_table.main(["--ci", "--rows", *rows, "-q", "--keep", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == 1 + len(rows)  # the header and one line per row
    for name, line in zip(rows, table[1:], strict=True):
        assert line.startswith(
            f"| {speed_table.ROWS[name].label} | {speed_table.ROWS[name].target}"
        )
        assert " MiB |" in line
    assert any("median of 1" in line for line in lines)
    # the replays really ran, on the trace's head
    assert (tmp_path / "kth-class-0-0" / "classification.csv").exists()
    assert (tmp_path / "kth-head.swf").read_text().count("\n") > speed_table.CI_JOBS


def test_compare_pairs_two_trees_and_compares_their_results(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--ci", "--rows", "version", "kth", "-q", "--compare", str(ROOT)]
    assert speed_table.main([*args, "--keep", str(tmp_path)]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert "other tree" in table[0] and "ratio" in table[0]
    assert table[-1].endswith("| identical |")  # the same code wrote the same files


def test_the_long_rows_build_their_commands(tmp_path: Path) -> None:
    ctx = speed_table.Context(tmp_path, ci=True)
    config = tmp_path / "campaign-out.toml"
    command = speed_table.ROWS["campaign"].args(ctx, tmp_path / "campaign-out")
    assert command[:3] == ["-m", "batsched_ml", "campaign"] and command[3] == str(config)
    campaign = tomllib.loads(config.read_text())["campaign"]
    assert (Path(campaign["trace_dir"]) / f"{campaign['traces'][0]}.swf.gz").exists()
    assert speed_table.ROWS["tests"].in_tree and speed_table.ROWS["tests"].long
    long = {name for name, row in speed_table.ROWS.items() if row.long}
    big = {f"{trace}-{policy}" for trace in ("ricc", "curie") for policy in speed_table.POLICIES}
    assert long == {"campaign", "tests"} | big
    for name in big:  # the largest traces, under each queue order
        args = speed_table.ROWS[name].args(ctx, tmp_path / name)
        assert "--policy" in args and args[args.index("--policy") + 1] == name.split("-")[1]


def test_the_python_side_runs_without_compiled_parts() -> None:
    side = speed_table.Side(ROOT, python=True)
    assert side.env()["BATSCHED_ML_KERNEL"] == "python"
    assert "BATSCHED_ML_KERNEL" not in speed_table.Side(ROOT).env()
