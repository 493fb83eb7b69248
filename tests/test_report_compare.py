"""`batsched-ml report` over any set of runs: labels, shaken copies aggregated into means with
95 % intervals, differences paired against a named baseline, the cost columns, the trade-off
figure's values, the Gantt chart's window, and the refusals (which leave no folder behind)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from batsched_ml.cli import main
from batsched_ml.report import data, figures
from batsched_ml.results.frames import logical_jobs, read_jobs_csv
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.shake import shake
from tests.conftest import workload_head

#: Student's t quantile for a two-sided 95 % interval with 2 degrees of freedom (3 copies), in
#: its closed form for 2 degrees of freedom, (2p - 1) / sqrt(2 p (1 - p)) at p = 0.975 (4.3027),
#: so that the intervals are checked against a hand computation, not scipy's.
T_2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)
COPIES = (0, 1, 2)
JOBS = 1200
TRACE = "KTH-SP2-1996-2.1-cln"


@pytest.fixture(scope="module")
def copies_dir(kth_workload, tmp_path_factory) -> Path:
    """FCFS base, classification-idempotent and class-clairvoyant on 3 copies of 1,200
    KTH-SP2 jobs (copy 0: the slice itself; 1 and 2: shaken by 60 s), as a campaign names
    them."""
    root = tmp_path_factory.mktemp("copies")
    head = workload_head(kth_workload, JOBS)
    for copy in COPIES:
        workload = shake(head, copy) if copy else head
        for variant in ("base", "classification-idempotent", "class-clairvoyant"):
            result = run_replay(workload, ReplayConfig(variant=variant))
            suffix = f"-copy{copy}" if copy else ""
            write_replay(result, root / TRACE / f"fcfs-{variant}{suffix}")
    return root


def _summaries(root: Path, variant: str) -> list[dict]:
    return [
        json.loads(
            (
                root / TRACE / f"fcfs-{variant}{f'-copy{c}' if c else ''}" / "summary.json"
            ).read_text()
        )
        for c in COPIES
    ]


def _interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval, by hand."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, mean - T_2 * sd / math.sqrt(n), mean + T_2 * sd / math.sqrt(n)


@pytest.fixture(scope="module")
def copies_report(copies_dir: Path, tmp_path_factory) -> Path:
    """The report of those runs, against FCFS base."""
    out = tmp_path_factory.mktemp("report") / "rep"
    assert main(["report", str(copies_dir), "-o", str(out), "--baseline", "fcfs-base"]) == 0
    return out


def test_copies_are_aggregated_into_means_with_intervals(copies_dir, copies_report) -> None:
    out = copies_report
    means = pd.read_csv(out / "means.csv").set_index("label")
    assert means.index.tolist() == [
        "fcfs (base)",
        "fcfs (classification-idempotent)",
        "fcfs (class-clairvoyant)",
    ]
    assert (means["copies"] == 3).all()
    for variant in ("base", "classification-idempotent"):
        row = means.loc[f"fcfs ({variant})"]
        summaries = _summaries(copies_dir, variant)
        for key, get in (
            ("mean_bsld", lambda s: s["mean_bsld"]),
            ("mean_wait_hours", lambda s: s["mean_wait"] / 3600),
            ("useful_utilisation", lambda s: s["useful_utilisation"]),
            ("wasted_core_hours", lambda s: s["wasted_core_hours"]),
            ("kills", lambda s: s["kills"]),
        ):
            mean, low, high = _interval([get(s) for s in summaries])
            assert row[key] == pytest.approx(mean, rel=1e-12), key
            assert row[f"{key}_low"] == pytest.approx(low, rel=1e-9, abs=1e-12), key
            assert row[f"{key}_high"] == pytest.approx(high, rel=1e-9, abs=1e-12), key
    classified = _summaries(copies_dir, "classification-idempotent")
    assert all(s["kills"] > 0 and s["wasted_core_hours"] > 0 for s in classified)
    for s in classified:  # the cost columns hang together
        assert s["useful_utilisation"] == pytest.approx(
            s["utilisation"] - s["wasted_share"], abs=2e-6
        )
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(zip(summary["label"], summary["copy"], strict=True)) == sorted(
        (label, c) for label in means.index for c in COPIES
    )
    page = (out / "index.html").read_text()
    base = means.loc["fcfs (base)"]
    half = (base["mean_bsld_high"] - base["mean_bsld_low"]) / 2
    assert f"<td>{base['mean_bsld']:,.2f} ± {half:,.2f}</td>" in page
    assert "<th>useful utilisation (%)</th>" in page and "<th>wasted core-hours</th>" in page


def test_differences_are_paired_by_copy_against_the_baseline(copies_dir, copies_report) -> None:
    out = copies_report
    table = pd.read_csv(out / "differences.csv").set_index("label")
    assert table.index.tolist() == ["fcfs (classification-idempotent)", "fcfs (class-clairvoyant)"]
    assert (table["baseline"] == "fcfs (base)").all() and (table["copies"] == 3).all()
    base = _summaries(copies_dir, "base")
    for variant in ("classification-idempotent", "class-clairvoyant"):
        row = table.loc[f"fcfs ({variant})"]
        other = _summaries(copies_dir, variant)
        paired = [o["mean_bsld"] - b["mean_bsld"] for o, b in zip(other, base, strict=True)]
        mean, low, high = _interval(paired)
        assert (row["mean_bsld"], row["mean_bsld_low"]) == pytest.approx((mean, low), rel=1e-9)
        assert row["mean_bsld_high"] == pytest.approx(high, rel=1e-9)
        relative = [
            (o["mean_bsld"] - b["mean_bsld"]) / b["mean_bsld"]
            for o, b in zip(other, base, strict=True)
        ]
        assert row["mean_bsld_relative"] == pytest.approx(sum(relative) / 3, rel=1e-12)
        kills = [o["kills"] - b["kills"] for o, b in zip(other, base, strict=True)]
        assert row["kills"] == pytest.approx(sum(kills) / 3, rel=1e-12)
    # the label as the page shows it names the same baseline
    from batsched_ml.report.page import load_report

    assert load_report([copies_dir], "fcfs (base)").baseline == "fcfs (base)"
    page = (out / "index.html").read_text()
    assert "<h3>Against fcfs (base)</h3>" in page and "<th>Δ wasted core-hours</th>" in page


def test_the_trade_off_values_are_exact(copies_dir: Path, copies_report: Path) -> None:
    out = copies_report
    table = pd.read_csv(out / f"{TRACE}-trade-off.csv").set_index("label")
    base, method, ceiling = (
        _summaries(copies_dir, v)
        for v in ("base", "classification-idempotent", "class-clairvoyant")
    )
    shares = [
        (b["cumulative_bsld"] - m["cumulative_bsld"])
        / (b["cumulative_bsld"] - c["cumulative_bsld"])
        for b, m, c in zip(base, method, ceiling, strict=True)
    ]
    killed = []
    for c in COPIES:
        folder = copies_dir / TRACE / f"fcfs-classification-idempotent{f'-copy{c}' if c else ''}"
        jobs = read_jobs_csv(folder / "jobs.csv")
        resubmitted = jobs["job_id"].str.contains("_r")
        original = set(jobs.loc[resubmitted, "job_id"].str.replace(r"_r\d+$", "", regex=True))
        killed_for_good = jobs.loc[
            ~resubmitted & (jobs["final_state"] == "COMPLETED_KILLED"), "job_id"
        ]
        killed.append(len(original | set(killed_for_good)) / JOBS)
        assert len(logical_jobs(jobs)) == JOBS
    row = table.loc["fcfs (classification-idempotent)"]
    mean, low, high = _interval(shares)
    assert row["copies"] == 3
    assert (row["share_of_ceiling"], row["share_of_ceiling_low"]) == pytest.approx(
        (mean, low), rel=1e-9
    )
    assert row["share_of_ceiling_high"] == pytest.approx(high, rel=1e-9)
    assert row["share_killed"] == pytest.approx(sum(killed) / 3, rel=1e-12)
    assert 0 < row["share_killed"] < 0.5
    # a summary written before killed_jobs existed: counted from the job table, the same
    for run in data.find_runs([copies_dir / TRACE]):
        older = data.Run(run.path, {k: v for k, v in run.summary.items() if k != "killed_jobs"})
        assert data.share_killed(older) == data.share_killed(run)
    assert table.loc["fcfs (base)", "share_of_ceiling"] == 0.0
    assert table.loc["fcfs (class-clairvoyant)", "share_of_ceiling"] == 1.0
    fig = figures.trade_off(data.settings(data.find_runs([copies_dir])), "KTH-SP2").figure
    assert fig.axes[0].get_xlabel() == "jobs killed (%)"
    assert fig.get_suptitle() == "KTH-SP2: what each method's gain costs in killed jobs"


def test_without_a_ceiling_the_page_says_why_there_is_no_trade_off(copies_dir, tmp_path) -> None:
    runs = [copies_dir / TRACE / name for name in ("fcfs-base", "fcfs-classification-idempotent")]
    out = tmp_path / "rep"
    assert main(["report", *map(str, runs), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "No trade-off point for fcfs (classification-idempotent)" in page
    assert not (out / f"{TRACE}-trade-off.png").exists()


def test_the_gantt_chart_shows_the_window_asked_for(copies_dir, tmp_path) -> None:
    out = tmp_path / "rep"
    folder = copies_dir / TRACE / "fcfs-classification-idempotent"
    assert main(["report", str(folder), "-o", str(out), "--gantt-window", "100000:150000"]) == 0
    table = pd.read_csv(out / f"{TRACE}-gantt.csv", dtype={"job_id": str})
    jobs = read_jobs_csv(folder / "jobs.csv")
    inside = jobs[(jobs["starting_time"] < 150000) & (jobs["finish_time"] > 100000)]
    assert set(table["job_id"]) == set(inside["job_id"]) and len(inside) > 0
    killed = set(inside.loc[inside["final_state"] == "COMPLETED_KILLED", "job_id"])
    assert set(table.loc[table["killed"], "job_id"]) == killed
    # every machine interval of a job, the job's processors in all
    held = table.groupby("job_id")["machines"].sum()
    asked = inside.set_index("job_id")["requested_number_of_resources"]
    assert held.sort_index().tolist() == asked.sort_index().tolist()
    for bad in ("150000:100000", "x:1", "5"):
        assert (
            main(["report", str(folder), "-o", str(tmp_path / "bad"), "--gantt-window", bad]) == 2
        )
    assert not (tmp_path / "bad").exists()


def test_default_gantt_window_starts_before_the_first_kill(copies_dir: Path) -> None:
    settings = data.settings(
        data.find_runs([copies_dir / TRACE / "fcfs-classification-idempotent"])
    )
    attempts = settings[0].first.attempts()
    first_kill = attempts.loc[attempts["final_state"] == "COMPLETED_KILLED", "starting_time"].min()
    assert data.gantt_window(settings) == (first_kill - 7200, first_kill - 7200 + 12 * 3600)


@pytest.fixture(scope="module")
def methods_dir(kth_workload, tmp_path_factory) -> Path:
    """FCFS base on 1,000 KTH-SP2 jobs, and the same with one thing changed each: the
    predictor, the dispatcher, an option the title does not show (the starvation threshold)."""
    root = tmp_path_factory.mktemp("methods")
    workload = workload_head(kth_workload, 1000)
    for name, config in (
        ("base", ReplayConfig()),
        ("easy", ReplayConfig(predictor="easy++")),
        ("sjf", ReplayConfig(dispatcher="sjf")),
        ("starve", ReplayConfig(starvation_threshold=None)),
    ):
        write_replay(run_replay(workload, config), root / name)
    return root


def test_runs_differing_by_one_setting_get_a_labelled_row_each(methods_dir, tmp_path) -> None:
    out = tmp_path / "rep"
    baseline = "fcfs-base-predictor-easy++"  # the short form of fcfs (base; predictor easy++)
    assert main(["report", str(methods_dir), "-o", str(out), "--baseline", baseline]) == 0
    means = pd.read_csv(out / "means.csv")
    assert sorted(means["label"]) == sorted(
        [
            "fcfs (base) {starvation_threshold=259200}",
            "fcfs (base) {starvation_threshold=none}",
            "fcfs (base; predictor easy++)",
            "fcfs (base; dispatcher sjf)",
        ]
    )
    assert (means["copies"] == 1).all()
    for run in data.find_runs([methods_dir]):
        summary = json.loads((run.path / "summary.json").read_text())
        row = means[means["label"] == run.label]
        assert row["mean_bsld"].iloc[0] == summary["mean_bsld"]
    page = (out / "index.html").read_text()
    assert page.count("<tr>") == 1 + 4 + 1 + 3  # means: header + 4; differences: header + 3
    differences = pd.read_csv(out / "differences.csv")
    assert len(differences) == 3 and (differences["copies"] == 1).all()
    # fcfs-base names no run once the threshold tells two bases apart: refused, not guessed
    from batsched_ml.report.page import load_report

    with pytest.raises(data.ReportError, match="no run has that label"):
        load_report([methods_dir], "fcfs-base")


def test_identical_runs_and_unknown_baselines_are_refused_leaving_no_folder(
    methods_dir: Path, tmp_path: Path, capsys
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(methods_dir / "easy", twin)
    out = tmp_path / "rep"
    assert main(["report", str(methods_dir), str(twin), "-o", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "are the same run (fcfs (base; predictor easy++)" in error[0]
    assert not out.exists()
    assert main(["report", str(methods_dir / "easy"), "-o", str(out), "--baseline", "spf"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--baseline spf: no run has that label" in error[0]
    assert not out.exists()


def test_two_files_under_one_trace_name_are_refused(copies_dir: Path, tmp_path: Path) -> None:
    """Runs of one trace name must replay one file (run.json's workload checksum): a slice and
    another slice named alike are not copies of one trace."""
    runs = tmp_path / "runs"
    for name, jobs in (("a", 300), ("b", 400)):
        trace = tmp_path / name / "slice.swf"
        trace.parent.mkdir()
        source = Path(__file__).resolve().parents[1] / "batsched_ml" / "data"
        with gzip.open(source / f"{TRACE}.swf.gz", "rt") as stream:
            text = stream.read().splitlines()
        header = [line for line in text if line.startswith(";")]
        body = [line for line in text if not line.startswith(";")][:jobs]
        trace.write_text("\n".join(header + body) + "\n")
        assert main(["replay", str(trace), "-q", "-o", str(runs / name)]) == 0
    out = tmp_path / "rep"
    assert main(["report", str(runs), "-o", str(out)]) == 2
    assert not out.exists()
    with pytest.raises(data.ReportError, match="two different files under the one trace name"):
        data.find_runs([runs])
