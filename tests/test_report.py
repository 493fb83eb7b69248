"""`batsched-ml report`: the values behind each figure (checked against the summaries and tables
the runs wrote), the figures' plotted data, the HTML page, and evalys reading our job tables."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from batsched_ml.cli import main
from batsched_ml.replay import ReplayConfig, run_replay, write_outputs
from batsched_ml.report import data, figures
from tests.conftest import workload_head

VARIANTS = ("base", "classification-idempotent", "class-clairvoyant")


@pytest.fixture(scope="module")
def runs_dir(kth_workload, tmp_path_factory) -> Path:
    """A small campaign: two policies x three variants on 3,000 KTH-SP2 jobs (about six weeks)."""
    root = tmp_path_factory.mktemp("runs")
    workload = workload_head(kth_workload, 3000)
    for policy in ("fcfs", "spf"):
        for variant in VARIANTS:
            result = run_replay(workload, ReplayConfig(policy=policy, variant=variant))
            write_outputs(result, root / workload["trace"] / f"{policy}-{variant}")
    return root


def test_runs_are_found_and_ordered_as_the_paper_shows_them(runs_dir: Path) -> None:
    runs = data.find_runs([runs_dir])
    assert [(r.policy, r.variant) for r in runs] == [
        (p, v) for p in ("fcfs", "spf") for v in VARIANTS
    ]
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        data.find_runs([runs_dir / "nothing-here"])


def test_each_figure_s_values_match_what_the_runs_wrote(runs_dir: Path) -> None:
    runs = data.find_runs([runs_dir])
    for run in runs:
        summary = run.summary
        series = data.cumulative_bsld(run)
        assert len(series) == summary["jobs"]
        assert series["cumulative_bsld"].iloc[-1] == pytest.approx(summary["cumulative_bsld"])
        assert (np.diff(series["day"]) >= 0).all() and series["day"].iloc[0] == 0
        monthly = data.monthly_bsld(run)
        assert monthly.set_index("month")["mean_bsld"].to_dict() == {
            m: v["mean_bsld"] for m, v in summary["monthly"].items()
        }
        distribution = data.runtime_distribution(run)
        assert distribution["divider"] == pytest.approx(summary["divider"])
        assert len(distribution["actual"]) == summary["jobs"]
    small_large = data.class_bsld(runs).set_index(["policy", "variant"])
    totals = data.total_bsld(runs).set_index(["policy", "variant"])
    for run in runs:
        key = (run.policy, run.variant)
        assert small_large.loc[key, "bsld_small"] == run.summary["bsld_small"]
        assert small_large.loc[key, "bsld_large"] == run.summary["bsld_large"]
        assert totals.loc[key, "total_bsld"] == run.summary["cumulative_bsld"]
    classified = next(r for r in runs if r.variant == "classification-idempotent")
    weekly = data.weekly_quality(classified)
    written = pd.read_csv(classified.path / "weekly_quality.csv")
    written = written[written["model"] & written["accuracy"].notna()]
    assert weekly["week"].tolist() == written["week"].tolist() and len(weekly) >= 3
    assert weekly["accuracy"].tolist() == written["accuracy"].tolist()
    importances = data.importances(classified)
    assert importances.columns[0] == "week" and "week_of_year" in importances.columns
    assert len(importances.columns) == 21
    assert np.allclose(importances.drop(columns="week").sum(axis=1), 1.0, atol=1e-4)


def test_figures_plot_those_values(runs_dir: Path) -> None:
    runs = data.find_runs([runs_dir])
    trace = runs[0].trace
    fig = figures.cumulative_bsld(runs, trace)
    fcfs = fig.axes[0]
    assert fcfs.get_title() == "FCFS" and fcfs.get_xlabel() == "day of submission"
    base = next(r for r in runs if (r.policy, r.variant) == ("fcfs", "base"))
    assert np.array_equal(fcfs.lines[0].get_ydata(), data.cumulative_bsld(base)["cumulative_bsld"])
    assert [line.get_label() for line in fcfs.lines] == ["base", "classification-idempotent"]
    fig = figures.total_bsld(runs, trace)
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    expected = data.total_bsld(runs)
    # bars go variant by variant, policy by policy within a variant
    ordered = [
        expected.set_index(["policy", "variant"]).loc[(p, v), "total_bsld"]
        for v in VARIANTS
        for p in ("fcfs", "spf")
    ]
    assert heights == pytest.approx(ordered)
    fig = figures.runtimes(runs, trace)
    divider = next(line for line in fig.axes[0].lines if line.get_linestyle() == "--")
    assert divider.get_xdata()[0] == pytest.approx(runs[0].summary["divider"])
    assert fig.axes[0].get_xlabel() == "seconds" and fig.axes[0].get_ylabel() == "jobs"


def test_report_command_writes_figures_and_a_self_contained_page(runs_dir, tmp_path) -> None:
    assert main(["report", str(runs_dir), "-o", str(tmp_path / "rep")]) == 0
    out = tmp_path / "rep"
    pngs = sorted(p.name for p in out.glob("*.png"))
    trace = "KTH-SP2-1996-2.1-cln"
    assert pngs == sorted(f"{trace}-{name}.png" for name, _draw, _caption in figures.FIGURES)
    page = (out / "index.html").read_text()
    for name in pngs:
        encoded = base64.b64encode((out / name).read_bytes()).decode()
        assert encoded in page  # inlined: the page stands alone
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.count("<tr>") == 1 + 6  # the header and one row per run
    table = pd.read_csv(out / "summary.csv")
    fcfs_base = table[(table["policy"] == "fcfs") & (table["variant"] == "base")].iloc[0]
    summary = json.loads((runs_dir / trace / "fcfs-base" / "summary.json").read_text())
    assert fcfs_base["mean_bsld"] == summary["mean_bsld"]


def test_evalys_reads_our_job_table_and_draws_its_gantt_chart(runs_dir, tmp_path) -> None:
    evalys_jobset = pytest.importorskip("evalys.jobset")
    import matplotlib.pyplot as plt

    jobs = runs_dir / "KTH-SP2-1996-2.1-cln" / "fcfs-base" / "jobs.csv"
    head = tmp_path / "head.csv"
    head.write_text("".join(jobs.open().readlines()[:201]))  # a readable chart: 200 jobs
    jobset = evalys_jobset.JobSet.from_csv(str(head))
    assert len(jobset.df) == 200
    assert jobset.df["execution_time"].sum() == pytest.approx(
        pd.read_csv(head)["execution_time"].sum()
    )
    plt.close("all")
    jobset.gantt(title="KTH-SP2, first 200 jobs")
    fig = plt.gcf()
    fig.savefig(tmp_path / "gantt.png")
    drawn = sum(len(ax.patches) for ax in fig.axes)
    assert drawn >= 200  # a rectangle per job and machine interval, at least one per job
    plt.close("all")


def test_a_run_s_title_names_the_methods_it_used() -> None:
    from batsched_ml.collect import run_title
    from batsched_ml.replay import ReplayConfig

    def title(**config) -> str:
        return run_title(ReplayConfig(**config).as_dict())

    assert title() == "fcfs (base)"
    assert title(policy="saf", variant="classification-idempotent") == (
        "saf (classification-idempotent)"
    )
    assert title(estimator="easy++", correction="power", dispatcher="prb") == (
        "fcfs (base; predictor easy++, correction power, dispatcher prb)"
    )
    assert title(
        estimator="su",
        predictor_params={"alpha": "1.5"},
        dispatcher="cph",
        dispatcher_params={"window": "8"},
    ) == ("fcfs (base; predictor su [alpha=1.5], dispatcher cph [window=8])")
    assert title(predictor_params={"no_walltime_estimate": "60"}) == (
        "fcfs (base; predictor requested [no_walltime_estimate=60.0])"
    )


def test_the_page_explains_itself_and_embeds_no_absolute_path(
    runs_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert main(["report", str(runs_dir.resolve()), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert (
        "<b>Lower is better</b>" in page and "Improving the Performance of Batch Schedulers" in page
    )
    assert "<th>mean wait (h)</th>" in page and "<th>mean bounded slowdown</th>" in page
    assert str(tmp_path) not in page and str(runs_dir.resolve()) not in page
    table = pd.read_csv(out / "summary.csv")
    summary = json.loads(next(runs_dir.rglob("summary.json")).read_text())
    row = table[
        (table["policy"] == summary["config"]["policy"])
        & (table["variant"] == summary["config"]["variant"])
    ]
    assert row["mean_wait"].iloc[0] == pytest.approx(summary["mean_wait"] / 3600)


def test_a_report_of_runs_shorter_than_a_training_week(kth_workload, tmp_path: Path) -> None:
    """No week had a model: feature_importance.csv is a header alone (it crashed the page)."""
    workload = workload_head(kth_workload, 300)
    for variant in ("base", "classification-idempotent"):
        result = run_replay(workload, ReplayConfig(variant=variant))
        write_outputs(result, tmp_path / "runs" / variant)
    assert (
        tmp_path / "runs" / "classification-idempotent" / "feature_importance.csv"
    ).read_text().count("\n") == 1
    assert main(["report", str(tmp_path / "runs"), "-o", str(tmp_path / "rep")]) == 0
    run = data.find_runs([tmp_path / "runs" / "classification-idempotent"])[0]
    assert data.importances(run) is None
    one_policy = figures.cumulative_bsld(data.find_runs([tmp_path / "runs"]), "t")
    assert one_policy is not None and one_policy.get_size_inches()[0] >= 8.0  # title not cut
