"""docs/related-work.md's generator: values come from the run folders, missing runs say so."""

from __future__ import annotations

import json
from pathlib import Path

from batsched_ml.cli import main
from batsched_ml.experiments.campaign import load_campaign
from batsched_ml.report.related_work import collect, render

CAMPAIGN = """
[campaign]
output = "runs"
trace_dir = "traces"
traces = ["HPC2N-2002-2.2-cln"]
policies = ["fcfs"]
variants = ["base"]

[[campaign.grid]]
predictors = ["requested", "su"]
dispatchers = ["easy", "cph"]

[[campaign.grid]]
predictors = ["requested", "adaboost"]
corrections = ["none", "simple"]
"""


def fake_run(folder: Path, bsld: float, wait: float, apa: float | None = None) -> None:
    folder.mkdir(parents=True)
    summary = {"jobs": 1000, "mean_bsld": bsld, "mean_wait": wait}
    if apa is not None:
        summary["prediction"] = {"APA": apa, "MAE": 120.0, "UR": 0.25}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "timing.json").write_text(json.dumps({"predict_us_per_job": 1500.0}))


def test_the_page_shows_each_run_s_figures_and_names_the_missing_ones(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    campaign = load_campaign(tmp_path / "c.toml")
    assert len(campaign.runs) == 7  # 2 x 2, then 2 x 2 of which requested-none-easy again
    runs = tmp_path / "runs" / "HPC2N-2002-2.2-cln"
    fake_run(runs / "fcfs-base", 637.0, 5602.8)  # 93.38 min: seed 002's user estimate
    fake_run(runs / "fcfs-base-su", 12.5, 300.0, apa=0.61)
    fake_run(runs / "fcfs-base-su-cph", 10.25, 250.0)
    fake_run(runs / "fcfs-base-adaboost-simple", 2.0, 3156.6)  # 52.61 min
    table = collect(campaign)
    assert list(table["status"]) == [
        "existing",  # requested
        "missing",  # requested, cph
        "existing",  # su
        "existing",  # su, cph
        "missing",  # requested, simple
        "missing",  # adaboost
        "existing",  # adaboost, simple
    ]
    page = render(table, campaign, notes="## Why\n\nBecause.")
    assert "## HPC2N-2002-2.2-cln (1,000 jobs)" in page
    assert "| su | 0.610 | 120 | 0.250 | 1,500 |" in page  # prediction quality
    # bsld per dispatcher: n/r where the campaign has the run but it is not made, – where the
    # campaign does not have it (running the campaign would not fill it)
    assert "| su | 12.50 | – | – | – | 10.25 |" in page
    assert "| requested | 637.00 | – | – | – | n/r |" in page
    assert "–: not in the campaign" in page
    assert "| adaboost | n/r / n/r | 2.00 / 3,157 | – / – |" in page  # corrections
    # seed 002's HPC2N change for regression (simple): -44 % wait, -100 % bsld; ours the same
    assert "| regression (AdaBoost), simple | -44 % | -44 % | -100 % | -100 % |" in page
    assert "## Why\n\nBecause." in page
    assert "## Not run yet (3 of 7 runs)" in page
    assert "- `HPC2N-2002-2.2-cln/fcfs-base-cph`" in page
    assert "- `HPC2N-2002-2.2-cln/fcfs-base-adaboost`" in page


def test_the_command_writes_the_page_without_running(tmp_path: Path, capsys) -> None:
    (tmp_path / "c.toml").write_text(CAMPAIGN)
    out = tmp_path / "page.md"
    code = main(["related-work", str(tmp_path / "c.toml"), "--no-run", "-o", str(out)])
    assert code == 0
    assert "wrote" in capsys.readouterr().out
    assert "## Not run yet (7 of 7 runs)" in out.read_text()
