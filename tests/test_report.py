"""`batsched-ml report`: the values behind each figure (checked against the summaries and tables
the runs wrote), the figures' plotted data, the HTML page, and evalys reading our job tables."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from batsched_ml.cli import main
from batsched_ml.report import data, figures
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from tests.conftest import workload_head

VARIANTS = ("base", "classification-idempotent", "class-clairvoyant")

#: Every figure but the guard's weeks, which only a classification-guarded run has
#: (tests/test_guard.py draws it).
UNGUARDED = [figure for figure in figures.FIGURES if figure[0] != "guard"]


@pytest.fixture(scope="module")
def runs_dir(kth_workload, tmp_path_factory) -> Path:
    """A small campaign: two policies x three variants on 3,000 KTH-SP2 jobs (about six weeks)."""
    root = tmp_path_factory.mktemp("runs")
    workload = workload_head(kth_workload, 3000)
    for policy in ("fcfs", "spf"):
        for variant in VARIANTS:
            result = run_replay(workload, ReplayConfig(policy=policy, variant=variant))
            write_replay(result, root / workload["trace"] / f"{policy}-{variant}")
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
    settings = data.settings(runs)
    small_large = figures.class_bsld(settings, "t").table.set_index("label")
    totals = figures.total_bsld(settings, "t").table.set_index("label")
    for run in runs:  # one copy each: the mean is the run's value, the interval none
        assert small_large.loc[run.label, "bsld_small"] == run.summary["bsld_small"]
        assert small_large.loc[run.label, "bsld_large"] == run.summary["bsld_large"]
        assert totals.loc[run.label, "cumulative_bsld"] == run.summary["cumulative_bsld"]
        assert totals.loc[run.label, "cumulative_bsld_low"] == run.summary["cumulative_bsld"]
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
    settings = data.settings(runs)
    trace = runs[0].trace
    drawn = figures.cumulative_bsld(settings, trace)
    fcfs = drawn.figure.axes[0]
    assert fcfs.get_title() == "FCFS" and fcfs.get_xlabel() == "day of submission"
    assert fcfs.get_yscale() == "linear"  # the methods' differences show, under SPF too
    base = next(r for r in runs if (r.policy, r.variant) == ("fcfs", "base"))
    assert np.array_equal(fcfs.lines[0].get_ydata(), data.cumulative_bsld(base)["cumulative_bsld"])
    assert [line.get_label() for line in fcfs.lines] == list(VARIANTS)
    plotted = drawn.table[drawn.table["label"] == "fcfs (base)"]  # the CSV: what is drawn
    assert plotted["cumulative_bsld"].tolist() == fcfs.lines[0].get_ydata().tolist()
    monthly = figures.monthly_bsld(settings, trace).figure.axes[0]
    assert monthly.get_yscale() == "log"
    ticks = [t.get_text() for t in monthly.get_yticklabels() if t.get_text()]
    assert {"1", "2", "5", "10"} <= set(ticks)  # readable ticks, not 10^0 and 10^1 alone
    fig = figures.total_bsld(settings, trace).figure
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    # bars go method by method, policy by policy within a method
    ordered = [
        next(r for r in runs if (r.policy, r.variant) == (p, v)).summary["cumulative_bsld"]
        for v in VARIANTS
        for p in ("fcfs", "spf")
    ]
    assert heights == pytest.approx(ordered)
    fig = figures.runtimes(settings, trace).figure
    divider = next(line for line in fig.axes[0].lines if line.get_linestyle() == "--")
    assert divider.get_xdata()[0] == pytest.approx(runs[0].summary["divider"])
    assert fig.axes[0].get_xlabel() == "seconds" and fig.axes[0].get_ylabel() == "jobs"


@pytest.fixture(scope="module")
def report_dir(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``batsched-ml report`` of :func:`runs_dir` (by its absolute path), made once for the
    tests that only read it (7 s a report)."""
    out = tmp_path_factory.mktemp("report") / "report"
    assert main(["report", str(runs_dir.resolve()), "-o", str(out)]) == 0
    return out


def test_report_command_writes_figures_and_a_self_contained_page(runs_dir, report_dir) -> None:
    out = report_dir
    pngs = sorted(p.name for p in out.glob("*.png"))
    trace = "KTH-SP2-1996-2.1-cln"
    assert pngs == sorted(f"{trace}-{name}.png" for name, _draw, _caption in UNGUARDED)
    for name in pngs:  # each figure's values beside it
        assert (out / name.replace(".png", ".csv")).stat().st_size > 0
    page = (out / "index.html").read_text()
    for name in pngs:
        encoded = base64.b64encode((out / name).read_bytes()).decode()
        assert encoded in page  # inlined: the page stands alone
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.count("<tr>") == 1 + 6  # the header and one row per setting (one copy each)
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
    from batsched_ml.runs.replaying import ReplayConfig
    from batsched_ml.serving.collect import run_title

    def title(**config) -> str:
        return run_title(ReplayConfig(**config).as_dict())

    assert title() == "fcfs (base)"
    assert title(policy="saf", variant="classification-idempotent") == (
        "saf (classification-idempotent)"
    )
    assert title(predictor="easy++", correction="power", dispatcher="prb") == (
        "fcfs (base; predictor easy++, correction power, dispatcher prb)"
    )
    assert title(
        predictor="su",
        predictor_params={"alpha": "1.5"},
        dispatcher="cph",
        dispatcher_params={"window": "8"},
    ) == ("fcfs (base; predictor su [alpha=1.5], dispatcher cph [window=8])")
    assert title(predictor_params={"no_walltime_estimate": "60"}) == (
        "fcfs (base; predictor requested [no_walltime_estimate=60.0])"
    )
    assert title(
        variant="classification-idempotent",
        classifier_params={"threshold": "0.6"},
        predictor="easy++",
    ) == ("fcfs (classification-idempotent; classifier [threshold=0.6], predictor easy++)")


def test_the_page_explains_itself_and_embeds_no_absolute_path(
    runs_dir: Path, report_dir: Path
) -> None:
    out = report_dir
    page = (out / "index.html").read_text()
    assert (
        "<b>Lower is better</b>" in page and "Improving the Performance of Batch Schedulers" in page
    )
    assert "<th>mean wait (h)</th>" in page and "<th>mean bounded slowdown</th>" in page
    assert str(report_dir.parent) not in page and str(runs_dir.resolve()) not in page
    table = pd.read_csv(out / "summary.csv")
    summary = json.loads(next(runs_dir.rglob("summary.json")).read_text())
    row = table[
        (table["policy"] == summary["config"]["policy"])
        & (table["variant"] == summary["config"]["variant"])
    ]
    assert row["mean_wait_hours"].iloc[0] == pytest.approx(summary["mean_wait"] / 3600)


def test_a_report_of_runs_shorter_than_a_training_week(kth_workload, tmp_path: Path) -> None:
    """No week had a model: feature_importance.csv is a header alone (it crashed the page)."""
    workload = workload_head(kth_workload, 300)
    for variant in ("base", "classification-idempotent"):
        result = run_replay(workload, ReplayConfig(variant=variant))
        write_replay(result, tmp_path / "runs" / variant)
    assert (
        tmp_path / "runs" / "classification-idempotent" / "feature_importance.csv"
    ).read_text().count("\n") == 1
    assert main(["report", str(tmp_path / "runs"), "-o", str(tmp_path / "rep")]) == 0
    run = data.find_runs([tmp_path / "runs" / "classification-idempotent"])[0]
    assert data.importances(run) is None
    one_policy = figures.cumulative_bsld(data.settings(data.find_runs([tmp_path / "runs"])), "t")
    assert one_policy is not None
    assert one_policy.figure.get_size_inches()[0] >= 8.0  # title not cut


# --- utilisation, queue length, waits and the policies side by side --------------------------

#: Four jobs and a rejected one on 4 machines, times in seconds:
#:   1: submitted 0, runs 0-10 on 2 machines (no wait)
#:   2: submitted 0, runs 10-30 on 4 machines (waits 10 s for job 1's machines)
#:   3: submitted 5, runs 30-35 on 1 machine (waits 25 s)
#:   4: submitted 20, runs 30-40 on 2 machines (waits 10 s)
#:   5: submitted 25, rejected (asks for 8 machines)
TINY_JOBS = """\
job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata
1,w0,p,0,2,100,1,COMPLETED_SUCCESSFULLY,0,10,10,0,10,1,0-1,-1,""
2,w0,p,0,4,100,1,COMPLETED_SUCCESSFULLY,10,20,30,10,30,1.5,0-3,-1,""
3,w0,p,5,1,100,1,COMPLETED_SUCCESSFULLY,30,5,35,25,30,6,0,-1,""
4,w0,p,20,2,100,1,COMPLETED_SUCCESSFULLY,30,10,40,10,20,2,1-2,-1,""
5,w0,p,25,8,100,0,REJECTED,,,,,,,,-1,""
"""
TINY_SUMMARY = {
    "trace": "tiny",
    "config": {"policy": "fcfs", "variant": "base"},
    "mean_bsld": 1.0,
    "mean_wait": 11.25,
    "makespan": 40.0,
    "utilisation": 0.78125,  # (2*10 + 4*20 + 1*5 + 2*10) / (4 machines * 40 s)
}


@pytest.fixture
def tiny_run(tmp_path: Path) -> data.Run:
    (tmp_path / "jobs.csv").write_text(TINY_JOBS)
    return data.Run(tmp_path, dict(TINY_SUMMARY))


def test_machines_busy_and_jobs_waiting_are_exact_step_functions(tiny_run: data.Run) -> None:
    busy = data.busy_machines(tiny_run.attempts())
    # job 2 starts as job 1 ends, jobs 3 and 4 as job 2 ends: no instant counted twice
    assert busy["time"].tolist() == [0, 10, 30, 35, 40]
    assert busy["busy"].tolist() == [2, 4, 3, 2, 0]
    queued = data.queue_length(tiny_run.attempts())
    # job 1 is submitted and started at 0: it never counts; the rejected job 5 never waits
    assert queued["time"].tolist() == [0, 5, 10, 20, 30]
    assert queued["queued"].tolist() == [1, 2, 1, 2, 0]
    assert data.step_function(np.array([]), np.array([])) == (
        pytest.approx(np.empty(0)),
        pytest.approx(np.empty(0)),
    )


def test_step_means_are_the_time_weighted_means_of_each_bin(tiny_run: data.Run) -> None:
    busy = data.busy_machines(tiny_run.attempts())
    queued = data.queue_length(tiny_run.attempts())
    edges = np.array([0.0, 20.0, 40.0])
    # 0-20: 2 machines for 10 s, 4 for 10 s; 20-40: 4 for 10 s, 3 for 5 s, 2 for 5 s
    assert data.step_means(busy["time"], busy["busy"], edges).tolist() == [3.0, 3.25]
    # 0-20: 1 job for 5 s, 2 for 5 s, 1 for 10 s; 20-40: 2 jobs for 10 s, none after
    assert data.step_means(queued["time"], queued["queued"], edges).tolist() == [1.25, 1.0]
    # 0 before the first change, the last value after the last one
    assert data.step_means([10.0], [1.0], [0.0, 10.0, 20.0]).tolist() == [0.0, 1.0]
    assert data.step_means([], [], [0.0, 1.0]).tolist() == [0.0]


def test_the_timeline_and_the_machine_count(tiny_run: data.Run) -> None:
    assert data.machines(tiny_run) == 4  # what gives the summary's utilisation
    tiny_run.summary["nb_machines"] = 6  # a summary that says it is believed
    assert data.machines(tiny_run) == 6
    del tiny_run.summary["nb_machines"]
    tiny_run.summary["utilisation"] = None  # else: the most machines in use at once
    assert data.machines(tiny_run) == 4
    table, name = data.timeline(tiny_run, 4)
    assert name == "hourly"  # one bin, cut at the last finish
    assert table.to_dict("list") == {
        "start": [0.0],
        "end": [40 / 86_400],
        "utilisation": [0.78125],
        "queued": [1.125],  # (1*5 + 2*5 + 1*10 + 2*10) / 40
    }
    assert data.bin_width(400 * 3600) == (3600, "hourly")
    assert data.bin_width(400 * 3600 + 1) == (6 * 3600, "6-hour")
    assert data.bin_width(365 * 86_400) == (86_400, "daily")
    assert data.bin_width(10 * 365 * 86_400) == (7 * 86_400, "weekly")


def test_the_distribution_of_waits(tiny_run: data.Run) -> None:
    waits = data.waits(tiny_run)
    assert sorted(waits.tolist()) == [0.0, 10.0, 10.0, 25.0]  # the rejected job has none
    cdf = data.wait_cdf(waits)
    assert cdf["wait_hours"].tolist() == [0.0, 10 / 3600, 25 / 3600]
    assert cdf["share"].tolist() == [0.25, 0.75, 1.0]
    assert data.wait_cdf(np.array([])).empty


def test_the_comparison_table(tiny_run: data.Run) -> None:
    drawn = figures.comparison(data.settings([tiny_run]), "tiny")
    row = drawn.table.to_dict("records")[0]
    assert (row["label"], row["copies"], row["mean_bsld"]) == ("fcfs (base)", 1, 1.0)
    assert row["mean_wait_hours"] == 11.25 / 3600
    # a summary without the cost keys (made before they existed) has none: no bar, no guess
    assert row["useful_utilisation"] is None and row["wasted_core_hours"] is None


def test_the_system_view_agrees_with_the_summaries(runs_dir: Path) -> None:
    """On real runs (kills included): the step function's mean over the run is the summary's
    utilisation, the waits' mean its mean wait, and the machine count KTH-SP2's 100."""
    runs = data.find_runs([runs_dir])
    assert any(run.summary["kills"] for run in runs)
    for run in runs:
        assert data.machines(run) == 100
        busy = data.busy_machines(run.attempts())
        span = [run.attempts()["submission_time"].min(), busy["time"].iloc[-1]]
        overall = data.step_means(busy["time"], busy["busy"], span)[0] / 100
        assert overall == pytest.approx(run.summary["utilisation"], abs=1e-6)
        assert busy["busy"].min() >= 0 and busy["busy"].max() <= 100
        assert busy["busy"].iloc[-1] == 0
        queued = data.queue_length(run.attempts())
        assert queued["queued"].min() >= 0 and queued["queued"].iloc[-1] == 0
        table, name = data.timeline(run)
        assert name == "6-hour"  # 3,000 jobs: about six weeks
        weights = table["end"] - table["start"]
        assert np.average(table["utilisation"], weights=weights) == pytest.approx(
            run.summary["utilisation"], abs=1e-6
        )
        assert data.waits(run).mean() == pytest.approx(run.summary["mean_wait"])


def test_the_new_figures_plot_those_values_with_units(runs_dir: Path) -> None:
    import matplotlib.pyplot as plt

    runs = data.find_runs([runs_dir])
    settings = data.settings(runs)
    trace = runs[0].trace
    fig = figures.timelines(settings, trace).figure
    axes = fig.axes
    assert len(axes) == 2 * len(runs)  # a row of two panels per run
    assert axes[0].get_ylabel() == "machines\nbusy (%)" and axes[1].get_ylabel() == "jobs waiting"
    assert axes[-1].get_xlabel() == "day of the trace"
    table, _name = data.timeline(runs[0])
    heights = axes[0].patches[0].get_path().vertices[:, 1]
    assert heights.max() == pytest.approx(100 * table["utilisation"].max())
    assert axes[0].get_title(loc="left").startswith("fcfs (base): mean ")
    plt.close(fig)

    fig = figures.wait_distribution(settings, trace).figure
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["FCFS", "SPF"]
    assert fig.axes[0].get_xlabel() == "waiting time (hours, log scale)"
    line = fig.axes[0].lines[0]
    assert line.get_label() == "base" and line.get_ydata()[-1] == 100
    cdf = data.wait_cdf(data.waits(runs[0]))
    assert line.get_ydata()[-2] == pytest.approx(100 * cdf["share"].iloc[-1])
    assert line.get_xdata()[-2] == pytest.approx(cdf["wait_hours"].iloc[-1])
    plt.close(fig)

    fig = figures.comparison(settings, trace).figure
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "mean bounded slowdown",
        "mean wait (hours)",
        "useful utilisation (%)",
        "wasted core-hours",
    ]
    assert "lower is better" in fig.axes[0].get_title()
    waits = [bar.get_height() for bar in fig.axes[1].patches]
    expected = [
        next(r for r in runs if (r.policy, r.variant) == (p, v)).summary["mean_wait"] / 3600
        for v in VARIANTS
        for p in ("fcfs", "spf")
    ]
    assert waits == pytest.approx(expected)
    plt.close(fig)


def test_one_run_alone_draws_every_system_figure(tiny_run: data.Run) -> None:
    for draw in (figures.timelines, figures.wait_distribution, figures.comparison, figures.gantt):
        drawn = draw(data.settings([tiny_run]), "tiny")
        assert drawn is not None and drawn.figure.get_size_inches()[0] >= 8.0
        drawn.figure.savefig(tiny_run.path / "figure.png")


def test_the_page_shows_the_new_figures_with_captions_and_is_reproducible(
    runs_dir: Path, report_dir: Path, tmp_path: Path
) -> None:
    first, second = report_dir, tmp_path / "two"
    assert main(["report", str(runs_dir), "-o", str(second)]) == 0  # the path as given
    page = (first / "index.html").read_text()
    trace = "KTH-SP2-1996-2.1-cln"
    for name in ("comparison", "utilisation-queue", "wait-distribution", "trade-off", "gantt"):
        caption = next(c for n, _draw, c in figures.FIGURES if n == name)
        csv = f"{trace}-{name}.csv"
        assert f'<figcaption>{html.escape(caption)} Data: <a href="{csv}">' in page
    assert "higher is better" in page and "Queue length" in page
    assert "6 runs of 6 settings on 100 machines (trace KTH-SP2-1996-2.1-cln, 3,000 jobs)." in page
    assert "<h2>KTH-SP2</h2>" in page  # the trace's short name in headings and titles
    assert "Figure" not in page
    assert page.count("<img ") == len(UNGUARDED)
    # the same runs give the same bytes: page and every figure
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name


def test_the_system_view_of_a_large_table_ends_empty_and_complete() -> None:
    """The step functions and the waits' distribution of a 200,000-job table (their speed is
    measured by benchmarks/bench_report.py, not here): every job leaves the queue and the
    machines, the distribution reaches 1."""
    attempts = _large_table(200_000)
    busy = data.busy_machines(attempts)
    queued = data.queue_length(attempts)
    cdf = data.wait_cdf(attempts["starting_time"] - attempts["submission_time"])
    assert queued["queued"].iloc[-1] == 0 and busy["busy"].iloc[-1] == 0
    assert queued["queued"].min() == 0 and busy["busy"].max() > 0
    assert cdf["share"].iloc[-1] == 1.0


def _large_table(count: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    submission = np.sort(rng.uniform(0, 3e7, count)).round()
    start = submission + rng.exponential(3000, count).round()
    finish = start + rng.exponential(5000, count).round() + 1
    return pd.DataFrame(
        {
            "submission_time": submission,
            "starting_time": start,
            "finish_time": finish,
            "requested_number_of_resources": rng.integers(1, 64, count),
            "final_state": "COMPLETED_SUCCESSFULLY",
        }
    )
