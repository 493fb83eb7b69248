"""docs/speed.md and the README's speed table are what ``benchmarks/speed_page.py`` writes from
the figures ``benchmarks/speed_table.py`` saved (``benchmarks/results/speed*.json``): a number
on those pages is one the script measured, never typed."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import speed_page  # noqa: E402
import speed_table  # noqa: E402

FIGURES = speed_page.figures()


def test_the_speed_page_is_the_scripts_rendering_of_the_saved_figures() -> None:
    assert FIGURES, "no saved figures: run speed_table.py --json, then speed_page.py"
    runs = speed_page.load(FIGURES)
    assert (ROOT / "docs" / "speed.md").read_text() == speed_page.render_page(runs)
    readme = (ROOT / "README.md").read_text()
    assert speed_page.with_readme_block(readme, runs) == readme
    assert len((ROOT / "docs" / "speed.md").read_text().splitlines()) <= 150


def test_the_saved_figures_are_rows_of_the_table() -> None:
    for run in speed_page.load(FIGURES):
        for row in run["rows"]:
            assert row["label"] == speed_table.ROWS[row["row"]].label
            assert row["target"] == speed_table.ROWS[row["row"]].target


def test_the_within_column_judges_the_median_against_the_target() -> None:
    row = {"targets": [4.0, 400.0], "seconds": [3.0, 5.0, 3.5], "peaks": [390, 390, 390]}
    assert speed_page._within(row) == "yes"
    row["peaks"] = [401, 401, 401]
    assert speed_page._within(row) == "**no**"


def test_a_row_measured_again_replaces_the_first_in_place(tmp_path: Path) -> None:
    import json

    first = {
        "date": "d",
        "cores": 2,
        "repeat": 3,
        "other": None,
        "rows": [{"row": "kth", "seconds": [1.0]}, {"row": "hpc2n", "seconds": [9.0]}],
    }
    again = {
        "date": "d",
        "cores": 2,
        "repeat": 3,
        "other": None,
        "rows": [{"row": "hpc2n", "seconds": [6.0]}],
    }
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(again))
    runs = speed_page.load([tmp_path / "a.json", tmp_path / "b.json"])
    rows = [row for run in runs for row in run["rows"]]
    assert [(row["row"], row["seconds"]) for row in rows] == [("kth", [1.0]), ("hpc2n", [6.0])]


def test_a_row_measured_again_on_another_day_says_so(tmp_path: Path) -> None:
    """A row replaced by a later file keeps its place and names the day it was measured on:
    another day may be another machine, whose times are not the others'."""
    first = {"date": "2026-01-01", "cores": 2, "repeat": 1, "other": None}
    first["rows"] = [_row("help", [0.1]), _row("kth", [1.5])]
    again = {**first, "date": "2026-01-02", "rows": [_row("kth", [0.9])]}
    lines = _rendered(tmp_path, first, again)
    assert lines[2].startswith("| HELP | <= 1 s | 0.10 s")
    assert lines[3].startswith("| KTH (measured on 2026-01-02) | <= 1 s | 0.90 s, 160 MiB | yes |")
    assert len(lines) == 4


def test_a_row_run_fewer_times_than_the_page_says_so(tmp_path: Path) -> None:
    """The page's text gives the first file's count of runs; a row run fewer times (the paper
    campaign, once) names its own count, since its time is no median of that many."""
    first = {"date": "2026-01-01", "cores": 2, "repeat": 3, "other": None}
    first["rows"] = [_row("kth", [0.9, 0.8, 1.0])]
    once = {**first, "repeat": 1, "rows": [_row("campaign", [400.0])]}
    lines = _rendered(tmp_path, first, once)
    assert lines[2].startswith("| KTH | <= 1 s | 0.90 (0.80-1.00) s, 160 MiB | yes |")
    assert lines[3].startswith("| CAMPAIGN (1 run) | <= 1 s | 400.0 s, 160 MiB | **no** |")


def _row(name: str, seconds: list[float]) -> dict:
    """A saved row of the table, as ``speed_table.py --json`` writes it (a 1 s target)."""
    return {
        "row": name,
        "label": name.upper(),
        "target": "<= 1 s",
        "targets": [1.0, None],
        "seconds": seconds,
        "peaks": [160.0] * len(seconds),
    }


def _rendered(folder: Path, *saved: dict) -> list[str]:
    """The table's lines from the ``saved`` runs, written as files named in their order."""
    import json

    paths = [folder / f"speed-{i}.json" for i in range(1, len(saved) + 1)]
    for path, data in zip(paths, saved, strict=True):
        path.write_text(json.dumps(data))
    return speed_page.render_table(speed_page.load(paths)).splitlines()
