"""The benchmark scripts that write results pages' tables: the option tables' labels and rows,
and the writer that puts a table between a page's markers (and refuses a page without them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import options_tables  # noqa: E402
from _common import print_or_write, write_between_markers  # noqa: E402

from batsched_ml.results.gap import GapRow, estimate  # noqa: E402


def test_the_methods_are_named_as_on_the_page() -> None:
    label = options_tables.label
    assert label("base", True) == "base ([EASY](glossary.md#easy))"
    assert label("base", False) == "base (EASY)"
    assert label("classification-idempotent", False).endswith("(the paper's method, default)")
    assert label("classification-idempotent + [threshold=0.05]", False) == (
        "+ threshold=0.05 (control)"
    )
    assert label("classification-idempotent + [leaky_features=all]", False) == (
        "+ leaky_features=all (LEAKY)"
    )
    assert label("classification-idempotent + [threshold_rule=cost]", False) == (
        "+ threshold_rule=cost"
    )
    assert label("class-clairvoyant + [divider_quantile=0.4]", False) == (
        "class-clairvoyant + divider_quantile=0.4"
    )


def _row(policy: str, method: str, gains: list[float], shares: list[float] | None) -> GapRow:
    share = estimate(shares) if shares is not None else None
    return GapRow(
        "T", policy, method, estimate(gains), share, len(gains), 10.0, 120.0, 1000.0, 0.0123
    )


def test_a_trace_table_groups_each_policy_base_method_options_ceiling() -> None:
    rows = [
        _row("fcfs", "class-clairvoyant", [0.5, 0.5, 0.5], [1.0, 1.0, 1.0]),
        _row("fcfs", "classification-idempotent + [threshold=0.0]", [0.3] * 3, [0.6] * 3),
        _row("fcfs", "base", [0.0] * 3, [0.0] * 3),
        _row("fcfs", "classification-idempotent", [0.2, 0.25], [0.4, 0.5]),
    ]
    lines = options_tables.trace_table(rows).splitlines()
    assert [line.split(" | ")[1] for line in lines[2:]] == [
        "base ([EASY](glossary.md#easy))",
        "classification-idempotent (the paper's method, default)",
        "+ threshold=0.0 (control)",
        "class-clairvoyant (the ceiling)",
    ]
    # the row with fewer copies says so; 1.23 % of the machine wasted; 120 kills
    assert lines[3].endswith("| 45 ± 64 (2 copies) | 120 | 1.23 |")
    assert lines[2].endswith("| 10.00 | 0 | 120 | 1.23 |")


def test_tables_go_between_their_markers_and_a_page_without_them_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- a:begin -->\nold\n<!-- a:end -->\nend\n")
    assert print_or_write(page, {"a": "| new |"}) == 0
    assert page.read_text() == "intro\n<!-- a:begin -->\n| new |\n<!-- a:end -->\nend\n"
    with pytest.raises(SystemExit, match="no single <!-- b:begin -->"):
        write_between_markers(page, {"a": "| newer |", "b": "| b |"})
    assert "| new |" in page.read_text()  # nothing written
    assert print_or_write(None, {"a": "| x |", "b": ""}) == 0
    assert capsys.readouterr().out.endswith("a:\n| x |\n")
