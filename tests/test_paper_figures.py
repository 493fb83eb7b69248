"""The figures the hand-written analysis quotes are filled from the page's own runs
(``batsched_ml.experiments.paper.fill_figures``), so that the prose cannot keep an older run's numbers."""

from __future__ import annotations

import pytest

from batsched_ml.experiments.paper import FigureError, fill_figures, report

TRACES = ["KTH-SP2-1996-2.1-cln", "CTC-SP2-1996-3.1-cln"]


def summaries() -> dict[tuple[str, str, str], dict]:
    quality = {"accuracy": 0.8491, "precision": 0.85, "recall": 0.8, "FS": 62, "FL": 88}
    return {
        (TRACES[0], "fcfs", "base"): {"cumulative_bsld": 1000.0},
        (TRACES[0], "fcfs", "classification-idempotent"): {
            "cumulative_bsld": 650.0,
            "classification": {**quality, "jobs_scored": 1000},
        },
        (TRACES[0], "fcfs", "class-clairvoyant"): {"cumulative_bsld": 430.0},
        (TRACES[0], "spf", "base"): {"cumulative_bsld": 500.0},
        (TRACES[0], "spf", "classification-idempotent"): {"cumulative_bsld": 520.0},
        (TRACES[1], "fcfs", "base"): {"cumulative_bsld": 2000.0},
        (TRACES[1], "fcfs", "classification-idempotent"): {
            "cumulative_bsld": 1060.0,
            "classification": {**quality, "accuracy": 0.8, "FS": 51, "jobs_scored": 500},
        },
    }


def test_each_kind_of_figure_is_read_from_the_runs() -> None:
    text = (
        "FCFS {{ gain KTH-SP2 fcfs classification-idempotent }} of "
        "{{gain KTH-SP2 fcfs class-clairvoyant}} %; SPF {{ gain KTH-SP2 spf "
        "classification-idempotent }}, over FCFS {{ gain-fcfs KTH-SP2 spf "
        "classification-idempotent }}; range {{ range gain fcfs classification-idempotent }}; "
        "accuracy {{ quality KTH-SP2 accuracy }}, FS {{ quality CTC-SP2 FS }}, "
        "{{ range quality FS }} and {{ range quality recall }}; none: "
        "{{ gain CTC-SP2 spf classification-idempotent }}, {{ quality HPC2N accuracy }}; "
        "paper: {{ range quality-gap accuracy }}, {{ range quality-gap recall }}; "
        "over lines: {{ gain KTH-SP2\n  fcfs classification-idempotent }}."
    )
    assert fill_figures(text, summaries(), TRACES) == (
        "FCFS 35 of 57 %; SPF -4, over FCFS 48; range 35 to 47; accuracy 85, FS 10.2, "
        "6.2 to 10.2 and 80; none: n/a, n/a; paper: 1 to 5, 1 to 2; over lines: 35."
    )


@pytest.mark.parametrize(
    "figure",
    ["{{ gain LANL-CM5 fcfs base }}", "{{ gains KTH-SP2 }}", "{{ quality KTH-SP2 speed }}", "{{}}"],
)
def test_an_unknown_figure_names_its_line(figure: str) -> None:
    with pytest.raises(FigureError, match=r"analysis\.md:2: unknown figure"):
        fill_figures(f"first line\nsee {figure}", summaries(), TRACES, "analysis.md")


def test_the_page_fills_the_shipped_analysis() -> None:
    """docs/results-analysis.md names only figures the page knows (a run missing gives n/a)."""
    page = report({}, TRACES)
    assert "{{" not in page and "}}" not in page
