"""Campaigns: the expansion of a campaign file, a run on a local Dask cluster with a failing
run recorded, resuming, and `report` reading the results table."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from batsched_ml.cli import main
from batsched_ml.experiments import campaign as campaign_module
from batsched_ml.experiments.campaign import (
    CampaignError,
    RunSpec,
    expand,
    load_campaign,
    run_campaign,
    run_identity,
    run_one,
    write_results,
)
from batsched_ml.report.data import find_runs
from batsched_ml.runs import pipeline
from batsched_ml.workload.io import load_workload
from tests.conftest import KTH, ROOT


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_expansion_multiplies_seeds_only_where_a_forest_is_trained() -> None:
    runs = expand(["A", "B"], ["fcfs", "spf"], ["base", "classification-idempotent"], seeds=[0, 7])
    assert len(runs) == 2 * 2 * (1 + 2)
    assert runs[:3] == [
        RunSpec("A", "fcfs", "base", 0),
        RunSpec("A", "fcfs", "classification-idempotent", 0),
        RunSpec("A", "fcfs", "classification-idempotent", 7),
    ]
    assert RunSpec("A", "fcfs", "base", 7) not in runs
    assert RunSpec("A", "spf", "base", 0).folder(Path("o")) == Path("o/A/spf-base")
    assert RunSpec("A", "spf", "classification", 7).folder(Path("o")) == Path(
        "o/A/spf-classification-seed7"
    )


def test_expansion_keeps_only_the_combinations_a_replay_accepts() -> None:
    runs = expand(
        ["A"],
        ["fcfs", "spf"],
        ["base", "classification"],
        [0],
        predictors=["requested", "su"],
        corrections=["none", "power"],
        dispatchers=["easy", "cph"],
    )
    names = [spec.folder(Path("o")).name for spec in runs]
    assert names == [
        "fcfs-base",
        "fcfs-base-cph",
        "fcfs-base-power",
        "fcfs-base-power-cph",
        "fcfs-base-su",
        "fcfs-base-su-cph",
        "fcfs-base-su-power",
        "fcfs-base-su-power-cph",
        # classification combines with every predictor, correction and dispatcher
        "fcfs-classification",
        "fcfs-classification-cph",
        "fcfs-classification-power",
        "fcfs-classification-power-cph",
        "fcfs-classification-su",
        "fcfs-classification-su-cph",
        "fcfs-classification-su-power",
        "fcfs-classification-su-power-cph",
        # cph orders the queue itself: never with spf
        "spf-base",
        "spf-base-power",
        "spf-base-su",
        "spf-base-su-power",
        "spf-classification",
        "spf-classification-power",
        "spf-classification-su",
        "spf-classification-su-power",
    ]
    for spec in runs:
        spec.config()  # every one is a valid replay


def test_options_go_with_what_takes_them_and_extend_the_folder_name() -> None:
    runs = expand(
        ["A"],
        ["fcfs"],
        ["base", "classification"],
        [0],
        predictors=["requested", "su"],
        dispatchers=["easy", "cph"],
        predictor_options=["", "alpha=1.5"],
        dispatcher_options=["", "window=8"],
    )
    assert [spec.folder(Path("o")).name for spec in runs] == [
        "fcfs-base",
        "fcfs-base-cph",
        "fcfs-base-cph-window=8",
        "fcfs-base-su",
        "fcfs-base-su-cph",
        "fcfs-base-su-cph-window=8",
        "fcfs-base-su-alpha=1.5",
        "fcfs-base-su-alpha=1.5-cph",
        "fcfs-base-su-alpha=1.5-cph-window=8",
        "fcfs-classification",
        "fcfs-classification-cph",
        "fcfs-classification-cph-window=8",
        "fcfs-classification-su",
        "fcfs-classification-su-cph",
        "fcfs-classification-su-cph-window=8",
        "fcfs-classification-su-alpha=1.5",
        "fcfs-classification-su-alpha=1.5-cph",
        "fcfs-classification-su-alpha=1.5-cph-window=8",
    ]
    config = runs[8].config()
    assert (config.predictor, config.predictor_params, config.dispatcher) == (
        "su",
        {"alpha": 1.5},
        "cph",
    )
    assert config.dispatcher_params == {"window": 8}
    assert runs[7].config().dispatcher_params == {}


def test_option_tables_in_a_campaign_file_are_canonical_and_checked(tmp_path: Path) -> None:
    head = "[campaign]\ntraces=['A']\npolicies=['fcfs']\nvariants=['base']\n"
    path = write(
        tmp_path / "c.toml",
        head + "predictors=['su']\npredictor_options=[{}, {regressor='rf', alpha=2}, {}]\n"
        "dispatchers=['cph']\ndispatcher_options=[{window=64, budget=0.01}]\n",
    )
    runs = load_campaign(path).runs
    assert [(r.predictor_options, r.dispatcher_options) for r in runs] == [
        ("", "budget=0.01,window=64"),
        ("alpha=2,regressor=rf", "budget=0.01,window=64"),
    ]
    assert (
        runs[1].folder(Path("o")).name
        == "fcfs-base-su-alpha=2-regressor=rf-cph-budget=0.01-window=64"
    )
    cases = [
        (
            "predictors=['su']\npredictor_options=[{alpah=1.5}]\n",
            "predictor su has no parameter 'alpah'",
        ),
        ("dispatcher_options=[{window=8}]\n", "the easy dispatcher has no parameters"),
        (
            "dispatchers=['cph']\ndispatcher_options=[{window=0}]\n",
            "fits no run: dispatcher cph: CPH window must be at least 1 job, not 0",
        ),
        ("predictor_options=[1]\n", "predictor_options must be a non-empty list of tables"),
        ("predictors=['su']\npredictor_options=[{regressor='a/b'}]\n", "holds , = /"),
        ("predictors=['su']\npredictor_options=[{alpha=[1, 2]}]\n", "alpha must be a string"),
    ]
    for extra, message in cases:
        path = write(tmp_path / "c.toml", head + extra)
        with pytest.raises(CampaignError, match=message) as caught:
            load_campaign(path)
        assert str(caught.value).startswith(str(path))


def test_the_shipped_paper_campaign_is_the_paper_s_evaluation() -> None:
    campaign = load_campaign(ROOT / "campaigns" / "paper.toml")
    assert len(campaign.runs) == 5 * 4 * 5
    assert campaign.output.resolve() == (ROOT / "runs" / "paper").resolve()
    assert {r.trace for r in campaign.runs} >= {"KTH-SP2-1996-2.1-cln", "HPC2N-2002-2.2-cln"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[campaign]\ntraces=['A']\npolicies=['fifo']\nvariants=['base']\n", "policies: unknown"),
        ("[campaign]\ntraces=['A']\npolicies=['fcfs']\nvariants=['nope']\n", "variants: unknown"),
        ("[campaign]\ntraces=[]\npolicies=['fcfs']\nvariants=['base']\n", "traces must be"),
        ("[campaign]\ntraces=['A']\npolicies=['fcfs']\nvariants=['base']\nseeds=[-1]\n", "seeds"),
        (
            "[campaign]\ntraces=['A']\npolicies=['fcfs', 'tests.plugin_parts:Missing']\n"
            "variants=['base']\n",
            "policies: tests.plugin_parts:Missing is in no run: policy "
            "'tests.plugin_parts:Missing': module 'tests.plugin_parts' has no attribute 'Missing'",
        ),
        (
            "[campaign]\ntraces=['A']\npolicies=['fcfs']\nvariants=['base']\n"
            "predictors=['requested', 'easy++']\ndispatchers=['probabilistic']\n",
            r"predictors: easy\+\+ is in no run: --predictor easy\+\+ does not go with the "
            "probabilistic dispatcher",
        ),
        ("[other]\n", r"no \[campaign\] table"),
        ("[campaign\n", "not valid TOML"),
    ],
)
def test_a_bad_campaign_file_is_named_with_its_field(tmp_path: Path, text, message) -> None:
    path = write(tmp_path / "c.toml", text)
    with pytest.raises(CampaignError, match=message) as caught:
        load_campaign(path)
    assert str(caught.value).startswith(str(path))


def small_trace(folder: Path, jobs: int = 1500) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(KTH, "rt") as source:
        lines = source.readlines()
    header = [line for line in lines if line.startswith(";")]
    body = [line for line in lines if not line.startswith(";")][:jobs]
    with gzip.open(folder / "kth-small.swf.gz", "wt") as out:
        out.writelines(header + body)
    return "kth-small"


def test_a_run_with_options_replays_with_them(tmp_path: Path) -> None:
    trace = small_trace(tmp_path / "traces", 200)
    rows = {}
    for options in ("", "seconds=900"):
        spec = RunSpec(trace, "fcfs", "base", predictor="fixed", predictor_options=options)
        rows[options] = run_one(spec, str(tmp_path / "traces"), str(tmp_path / "out"))
        assert rows[options]["status"] == "done"
        assert rows[options]["predictor_options"] == options
    folder = tmp_path / "out" / trace / "fcfs-base-fixed-seconds=900"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["config"]["predictor_params"] == {"seconds": 900.0}
    workload = load_workload(tmp_path / "traces" / f"{trace}.swf.gz")
    requested = {f"w0!{job['id']}": job["walltime"] for job in workload["jobs"]}
    for options, seconds in (("", 600.0), ("seconds=900", 900.0)):
        name = "fcfs-base-fixed" + (f"-{options}" if options else "")
        table = pd.read_csv(tmp_path / "out" / trace / name / "predictions.csv")
        assert len(table) == 200
        # a fixed prediction, capped by the request
        expected = [min(seconds, requested[job]) for job in table["job_id"]]
        assert table["predicted"].tolist() == expected


def test_a_worker_reads_each_trace_once_and_every_run_gets_its_own_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "traces"
    trace = small_trace(folder, 300)
    path = folder / f"{trace}.swf.gz"
    reads: list[Path] = []

    def counted(where, **kwargs):
        reads.append(Path(where))
        return load_workload(where, **kwargs)

    monkeypatch.setattr(pipeline, "load_workload", counted)
    cache = pipeline.WorkloadCache(size=1)
    record = run_identity(RunSpec(trace, "fcfs", "base"), folder).workload
    first = cache.load(path, record)
    first["jobs"][0]["walltime"] = -5  # what a replay (or a plug-in) might do to its copy
    second = cache.load(path, record)
    assert reads == [path]
    assert second == load_workload(path) and second is not first
    assert second["jobs"][0]["walltime"] != -5
    shaken = cache.load(
        path, {**record, "shaking": {"seed": 1, "seconds": 60}}, shaking={"seed": 1, "seconds": 60}
    )
    assert len(reads) == 2 and shaken != second  # another record: read (and shaken)
    cache.load(path, record)  # dropped for the shaken one (size 1): read again
    assert len(reads) == 3
    # a campaign's runs go through the worker's cache: twice the same trace, one read
    monkeypatch.setattr(campaign_module, "WORKLOADS", pipeline.WorkloadCache())
    for policy in ("fcfs", "spf"):
        row = run_one(RunSpec(trace, policy, "base"), str(folder), str(tmp_path / "out"))
        assert row["status"] == "done"
    assert len(reads) == 4
    main(["replay", str(path), "--policy", "spf", "-o", str(tmp_path / "cli"), "-q"])
    for name in ("jobs.csv", "summary.json"):  # the same files as a replay of its own
        cli_file = (tmp_path / "cli" / name).read_bytes()
        assert (tmp_path / "out" / trace / "spf-base" / name).read_bytes() == cli_file


def keys_of(table: pd.DataFrame) -> list[tuple]:
    return list(zip(table["variant"], table["seed"], table["trace"], strict=True))


def test_a_campaign_runs_on_dask_records_failures_resumes_and_feeds_report(tmp_path) -> None:
    trace = small_trace(tmp_path / "traces")
    (tmp_path / "traces" / "broken.swf.gz").write_bytes(b"not gzip")  # there, not a trace
    config = write(
        tmp_path / "c.toml",
        f"""
[campaign]
output = "out"
trace_dir = "traces"
traces = ["{trace}", "broken"]
policies = ["fcfs"]
variants = ["base", "classification-idempotent"]
seeds = [0, 3]

[dask]
workers = 2
""",
    )
    campaign = load_campaign(config)
    table = run_campaign(campaign)
    assert len(table) == 2 * 3
    ok = table[table["trace"] == trace]
    assert ok["status"].tolist() == ["done"] * 3
    assert ok["seed"].tolist() == [0, 0, 3]
    assert (ok["jobs"] > 1400).all() and ok["mean_bsld"].notna().all()
    failed = table[table["trace"] == "broken"]
    assert failed["status"].tolist() == ["failed"] * 3
    assert failed["error"].str.contains("broken.swf.gz").all()
    written = pd.read_parquet(tmp_path / "out" / "results.parquet")
    csv = pd.read_csv(tmp_path / "out" / "results.csv", keep_default_na=False, na_values=[""])
    assert written["status"].tolist() == csv["status"].tolist() == table["status"].tolist()
    assert written["mean_bsld"].tolist()[:3] == csv["mean_bsld"].tolist()[:3]
    # the two seeds train different forests: the same jobs, another schedule
    seeded = tmp_path / "out" / trace / "fcfs-classification-idempotent"
    first = (seeded / "jobs.csv").read_bytes()
    assert (
        first != (seeded.parent / "fcfs-classification-idempotent-seed3" / "jobs.csv").read_bytes()
    )

    # resuming: done runs are kept, one removed run is redone identically
    (seeded / "summary.json").unlink()
    again = run_campaign(campaign)
    keys = zip(again["variant"], again["seed"], again["trace"], strict=True)
    statuses = dict(zip(keys, again["status"], strict=True))
    assert statuses[("classification-idempotent", 0, trace)] == "done"
    assert statuses[("base", 0, trace)] == "existing"
    assert statuses[("classification-idempotent", 3, trace)] == "existing"
    assert (seeded / "jobs.csv").read_bytes() == first
    reasons = dict(
        zip(
            keys_of(again),
            again["rerun_reason"].map(lambda v: v if isinstance(v, str) else ""),
            strict=True,
        )
    )
    assert reasons[("classification-idempotent", 0, trace)] == "files missing or changed"
    assert reasons[("base", 0, trace)] == ""

    # report reads the results table: the three runs that exist
    runs = find_runs([tmp_path / "out"])
    assert sorted((r.variant, r.path.name) for r in runs) == [
        ("base", "fcfs-base"),
        ("classification-idempotent", "fcfs-classification-idempotent"),
        ("classification-idempotent", "fcfs-classification-idempotent-seed3"),
    ]


def one_trace_campaign(path: Path, trace: str, variants: list[str], head: str) -> Path:
    """A campaign file over ``trace`` (in ``traces/`` beside it) under FCFS, one local worker;
    ``head``: the other lines of its ``[campaign]`` table (``output = ...``)."""
    quoted = ", ".join(f'"{v}"' for v in variants)
    return write(
        path,
        f'[campaign]\n{head}\ntrace_dir = "traces"\ntraces = ["{trace}"]\n'
        f'policies = ["fcfs"]\nvariants = [{quoted}]\n\n[dask]\nworkers = 1\n',
    )


def test_campaigns_sharing_an_output_folder_each_leave_every_run_in_its_table(tmp_path) -> None:
    """The folder's results.csv, which report reads as its runs, names the runs of every
    campaign that wrote into it (it used to name the last campaign's alone), as long as their
    folders hold them."""
    trace = small_trace(tmp_path / "traces", jobs=300)
    files = [
        one_trace_campaign(tmp_path / f"{name}.toml", trace, [variant], 'output = "out"')
        for name, variant in (("a", "base"), ("b", "class-clairvoyant"))
    ]
    run_campaign(load_campaign(files[0]))
    table = run_campaign(load_campaign(files[1]))
    assert table["variant"].tolist() == ["class-clairvoyant"]  # what this campaign ran
    out = tmp_path / "out"
    written = pd.read_csv(out / "results.csv")
    assert written["path"].tolist() == [f"{trace}/fcfs-class-clairvoyant", f"{trace}/fcfs-base"]
    assert pd.read_parquet(out / "results.parquet")["path"].tolist() == written["path"].tolist()
    assert sorted(run.variant for run in find_runs([out])) == ["base", "class-clairvoyant"]
    # a run whose folder is gone is not listed again
    shutil.rmtree(out / trace / "fcfs-base")
    run_campaign(load_campaign(files[1]))
    assert pd.read_csv(out / "results.csv")["path"].tolist() == [f"{trace}/fcfs-class-clairvoyant"]


def test_an_earlier_table_whose_run_id_reads_as_a_number_is_written_back_as_text(
    tmp_path,
) -> None:
    """A hexadecimal run id made only of digits and one ``e`` (``1234e567``) is a number to
    pandas: the earlier table's text columns are read as text, so the folder's table is written
    back (Parquet refused the mixed column) with the id unchanged."""
    trace = small_trace(tmp_path / "traces", jobs=300)
    first = one_trace_campaign(tmp_path / "a.toml", trace, ["base"], 'output = "out"')
    second = one_trace_campaign(tmp_path / "b.toml", trace, ["class-clairvoyant"], 'output = "out"')
    run_campaign(load_campaign(first))
    out = tmp_path / "out"
    earlier = pd.read_csv(out / "results.csv", dtype={"run_id": str})
    earlier["run_id"] = "1234e567"
    earlier.to_csv(out / "results.csv", index=False)
    table = run_campaign(load_campaign(second))
    written = pd.read_csv(out / "results.csv", dtype=str)
    assert written["run_id"].tolist() == [table["run_id"].iloc[0], "1234e567"]
    parquet = pd.read_parquet(out / "results.parquet")
    assert parquet["run_id"].tolist() == written["run_id"].tolist()
    write_results(table, out)  # again: the id stays text
    assert pd.read_csv(out / "results.csv", dtype=str)["run_id"].iloc[1] == "1234e567"


def test_a_campaign_links_the_runs_another_campaign_made_instead_of_replaying_them(
    tmp_path,
) -> None:
    """``reuse``: a run the other folder holds with the same settings, complete and made by this
    code, is linked (its files the same inodes), not replayed; one it does not hold, or holds
    incomplete, is replayed."""
    trace = small_trace(tmp_path / "traces", jobs=300)
    first = one_trace_campaign(
        tmp_path / "a.toml", trace, ["base", "class-clairvoyant"], 'output = "a"'
    )
    run_campaign(load_campaign(first))
    gone = tmp_path / "a" / trace / "fcfs-class-clairvoyant"
    (gone / "summary.json").unlink()  # incomplete there: replayed here
    second = one_trace_campaign(
        tmp_path / "b.toml",
        trace,
        ["base", "class-clairvoyant", "runtime-clairvoyant"],
        'output = "b"\nreuse = ["a"]',
    )
    campaign = load_campaign(second)
    assert campaign.reuse == [(tmp_path / "a").resolve()]
    table = run_campaign(campaign)
    assert dict(zip(table["variant"], table["status"], strict=True)) == {
        "base": "linked",
        "class-clairvoyant": "done",
        "runtime-clairvoyant": "done",
    }
    linked, source = tmp_path / "b" / trace / "fcfs-base", tmp_path / "a" / trace / "fcfs-base"
    assert sorted(p.name for p in linked.iterdir()) == sorted(p.name for p in source.iterdir())
    for path in linked.iterdir():
        assert path.stat().st_ino == (source / path.name).stat().st_ino
    # linked, it is this campaign's run: the next time it is there
    again = run_campaign(campaign)
    assert again["status"].tolist() == ["existing"] * 3
    with pytest.raises(CampaignError, match="reuse must be a list of folders"):
        load_campaign(one_trace_campaign(tmp_path / "c.toml", trace, ["base"], 'reuse = "a"'))


def _worker_log_level() -> int:
    import logging

    return logging.getLogger("distributed.worker").getEffectiveLevel()


def test_local_workers_keep_dask_s_shutdown_noise_off_the_terminal(tmp_path, monkeypatch) -> None:
    """A campaign's local workers start with distributed's loggers at CRITICAL (a heartbeat
    meeting the closed scheduler at the end printed an ERROR and tracebacks after a
    successful campaign); the environment is left as it was."""
    import logging

    from batsched_ml.experiments.campaign import _client

    monkeypatch.delenv("DASK_LOGGING__DISTRIBUTED", raising=False)
    small_trace(tmp_path / "traces")
    config = write(
        tmp_path / "c.toml",
        '[campaign]\noutput = "out"\ntrace_dir = "traces"\ntraces = ["t"]\n'
        'policies = ["fcfs"]\nvariants = ["base"]\n\n[dask]\nworkers = 1\n',
    )
    (tmp_path / "scratch").mkdir()
    client, cluster = _client(load_campaign(config), str(tmp_path / "scratch"))
    try:
        assert client.submit(_worker_log_level, pure=False).result() == logging.CRITICAL
    finally:
        client.close()
        cluster.close()
    assert "DASK_LOGGING__DISTRIBUTED" not in os.environ


def test_the_campaign_command_exits_non_zero_when_a_run_failed(tmp_path, capsys) -> None:
    small_trace(tmp_path / "traces", 300)
    (tmp_path / "traces" / "nope.swf.gz").write_bytes(b"not gzip")  # there, not a trace
    config = write(
        tmp_path / "c.toml",
        """
[campaign]
output = "out"
trace_dir = "traces"
traces = ["kth-small", "nope"]
policies = ["fcfs"]
variants = ["base"]

[dask]
workers = 1
""",
    )
    assert main(["campaign", str(config), "-q"]) == 1
    out = capsys.readouterr().out
    assert "2 runs: 1 done, 0 already there, 1 failed" in out
    assert "failed: nope fcfs base:" in out


def test_a_run_that_kills_its_worker_fails_alone_in_one_line(tmp_path, capsys) -> None:
    """A run whose worker process dies under it is a failed run of the results table (its
    folder marked interrupted, so that the next campaign makes it again); the others are
    done and the campaign ends with exit 1, not with an internal error."""
    import dask

    small_trace(tmp_path / "traces", 300)
    config = write(
        tmp_path / "c.toml",
        """
[campaign]
output = "out"
trace_dir = "traces"
traces = ["kth-small"]
policies = ["fcfs", "tests.plugin_parts:DiesInItsWorker"]
variants = ["base"]

[dask]
workers = 1
""",
    )
    # distributed registers its defaults in dask's configuration when imported: imported
    # first, so that leaving the block restores them (imported inside it, the block's exit
    # removed the whole "distributed" section, and the next campaign of this test process
    # failed with KeyError: 'distributed')
    import distributed  # noqa: F401

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        assert main(["campaign", str(config), "-q"]) == 1
    out = capsys.readouterr().out
    # the other run is done, or found done when Dask runs it again because the dying worker
    # held its result
    assert re.search(r"2 runs: (1 done, 0 already there|0 done, 1 already there), 1 failed", out)
    assert re.search(
        r"failed: kth-small tests\.plugin_parts:DiesInItsWorker base: its Dask worker died "
        r"while running it, .*: KilledWorker",
        out,
    )
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert sorted(table["status"]) in (["done", "failed"], ["existing", "failed"])
    died = table[table["status"] == "failed"].iloc[0]
    run = json.loads((tmp_path / "out" / died["path"] / "run.json").read_text())
    assert (run["status"], run["reason"]) == ("interrupted", "its Dask worker died")


def test_runs_are_submitted_longest_first(tmp_path: Path) -> None:
    from batsched_ml.experiments.campaign import longest_first

    # the cost of a run: its trace's size, times 8 for a variant that trains a forest
    (tmp_path / "small.swf.gz").write_bytes(b"x" * 100)
    (tmp_path / "large.swf.gz").write_bytes(b"x" * 1000)
    runs = expand(["small", "large"], ["fcfs"], ["base", "classification-idempotent"], [0])
    ordered = longest_first(runs, tmp_path)
    assert [(r.trace, r.variant) for r in ordered] == [
        ("large", "classification-idempotent"),  # 1000 bytes x 8
        ("large", "base"),  # 1000
        ("small", "classification-idempotent"),  # 100 x 8
        ("small", "base"),
    ]
    assert sorted(ordered, key=runs.index) == runs  # the same runs, only reordered


def test_copies_replay_every_run_on_shaken_copies_of_its_trace(tmp_path: Path) -> None:
    head = "[campaign]\ntraces=['A']\npolicies=['fcfs']\nvariants=['base', 'class-clairvoyant']\n"
    runs = load_campaign(write(tmp_path / "c.toml", head + "copies = 3\n")).runs
    assert [(r.variant, r.copy) for r in runs] == [
        ("base", 0),
        ("base", 1),
        ("base", 2),
        ("class-clairvoyant", 0),
        ("class-clairvoyant", 1),
        ("class-clairvoyant", 2),
    ]
    assert [r.folder(Path("o")).name for r in runs[:3]] == [
        "fcfs-base",  # copy 0 is the trace itself: the folder it always had
        "fcfs-base-copy1",
        "fcfs-base-copy2",
    ]
    assert runs[0].shaking is None and runs[2].shaking == {"seed": 2, "seconds": 60}
    other = load_campaign(write(tmp_path / "d.toml", head + "copies=2\nshake_seconds=300\n"))
    assert other.runs[1].folder(Path("o")).name == "fcfs-base-copy1s300"
    trace = tmp_path / "A.swf.gz"
    trace.write_bytes(b"")
    identities = [run_identity(r, tmp_path) for r in runs[:3]]
    assert "shaking" not in identities[0].workload
    assert identities[2].workload["shaking"] == {"seed": 2, "seconds": 60}
    assert len({i.run_id for i in identities}) == 3
    for text in ("copies = 0\n", "copies = 1.5\n", "shake_seconds = -1\n"):
        with pytest.raises(CampaignError, match=r"copies|shake_seconds"):
            load_campaign(write(tmp_path / "e.toml", head + text))


@pytest.mark.parametrize("path", sorted((ROOT / "campaigns").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_campaign_file_loads_and_names_each_run_once(path: Path) -> None:
    campaign = load_campaign(path)
    folders = [spec.folder(campaign.output) for spec in campaign.runs]
    assert campaign.runs and len(set(folders)) == len(folders)
    for spec in campaign.runs[:: max(1, len(campaign.runs) // 20)]:
        spec.config()  # a valid run configuration
    # read in a terminal and in a diff: every line, comments included, under 100 columns
    wide = [n for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) >= 100]
    assert not wide, f"{path.name}: lines {wide} have 100 columns or more"


def test_paper_results_says_which_replays_failed_and_writes_no_page(tmp_path, capsys) -> None:
    """A replay that fails for the user's reasons (here a trace that cannot be read) is named
    on its own line and the command exits 1 without writing the page, as ``campaign`` does; it
    used to end in "internal error: RuntimeError"."""
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "KTH-SP2-1996-2.1-cln.swf.gz").write_bytes(b"not gzip")
    page = tmp_path / "results.md"
    argv = [
        "paper-results",
        *("-o", str(page), "--runs", str(tmp_path / "runs"), "--trace-dir", str(traces)),
        *("--traces", "KTH-SP2-1996-2.1-cln", "--policies", "fcfs", "--variants", "base"),
        *("--workers", "1"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "failed: [1/1] KTH-SP2-1996-2.1-cln fcfs base:" in err
    assert "batsched-ml: 1 of 1 replay(s) failed;" in err
    assert "internal error" not in err
    assert not page.exists()


def test_paper_results_no_run_writes_the_same_page_from_the_runs_there(tmp_path, capsys) -> None:
    """``--no-run`` writes the page from the complete runs already made, byte for byte the page
    the full command wrote; with a run missing it writes nothing and names the run's folder."""
    from tests.conftest import KTH

    page, again = tmp_path / "results.md", tmp_path / "again.md"
    runs = tmp_path / "runs"
    argv = [
        *("--runs", str(runs), "--trace-dir", str(KTH.parent)),
        *("--traces", "KTH-SP2-1996-2.1-cln", "--policies", "fcfs"),
        *("--variants", "base", "class-clairvoyant", "--workers", "1"),
    ]
    assert main(["paper-results", "-o", str(page), *argv]) == 0
    assert main(["paper-results", "-o", str(again), "--no-run", *argv]) == 0
    assert again.read_bytes() == page.read_bytes()
    assert "KTH-SP2" in page.read_text()
    again.unlink()
    gone = runs / "KTH-SP2-1996-2.1-cln" / "fcfs-class-clairvoyant"
    (gone / "summary.json").unlink()
    capsys.readouterr()
    assert main(["paper-results", "-o", str(again), "--no-run", *argv]) == 2
    assert not again.exists()
    assert f"1 of 2 run(s) missing or not complete in {runs} (first: {gone})" in (
        capsys.readouterr().err
    )
    # run again, it remakes the missing run only; the folder's results.csv, which `report`
    # reads as the list of its runs, still names both (it used to name the remade one alone)
    assert main(["paper-results", "-o", str(again), *argv]) == 0
    assert "1 of 2 runs already done, 1 to go" in capsys.readouterr().out
    assert again.read_bytes() == page.read_bytes()
    table = pd.read_csv(runs / "results.csv")
    assert sorted(table["path"]) == [
        "KTH-SP2-1996-2.1-cln/fcfs-base",
        "KTH-SP2-1996-2.1-cln/fcfs-class-clairvoyant",
    ]
    assert sorted(run.variant for run in find_runs([runs])) == ["base", "class-clairvoyant"]


def test_missing_traces_stop_a_campaign_before_it_runs_or_writes_anything(
    tmp_path: Path, capsys
) -> None:
    """Every trace is checked first: one line naming those missing, exit 66, no output folder
    (each run used to fail on its own with "cannot read", and the folder was written)."""
    small_trace(tmp_path / "traces", 300)
    gone = tmp_path / "elsewhere" / "gone.swf"
    config = write(
        tmp_path / "c.toml",
        f"""
[campaign]
output = "out"
trace_dir = "traces"
traces = ["kth-small", "nope", "{gone}"]
policies = ["fcfs", "spf"]
variants = ["base"]

[dask]
workers = 1
""",
    )
    assert main(["campaign", str(config), "-q"]) == 66
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"batsched-ml: error: {config}: 2 of 3 trace(s) missing or unreadable: "
        f"{tmp_path / 'traces' / 'nope.swf.gz'}, {gone}; nothing run, nothing written"
    ]
    assert "failed:" not in captured.out
    assert not (tmp_path / "out").exists()


def test_traces_are_named_or_given_by_path(tmp_path: Path) -> None:
    from batsched_ml.experiments.campaign import trace_entry

    folder = tmp_path / "t"
    assert trace_entry("KTH-SP2-1996-2.1-cln", folder) == ("KTH-SP2-1996-2.1-cln", "")
    assert trace_entry("KTH-SP2-1996-2.1-cln.swf.gz", folder) == ("KTH-SP2-1996-2.1-cln", "")
    assert trace_entry("a.swf", folder) == ("a", str(folder / "a.swf"))
    assert trace_entry("/data/slice.swf", folder) == ("slice", "/data/slice.swf")
    assert trace_entry("/data/slice.swf.gz", folder) == ("slice", "/data/slice.swf.gz")
    assert trace_entry("sub/x.swf.gz", folder) == ("x", str(folder / "sub" / "x.swf.gz"))
    with pytest.raises(CampaignError, match="same name 'slice'"):
        load_campaign(
            write(
                tmp_path / "d.toml",
                '[campaign]\ntraces = ["/a/slice.swf", "/b/slice.swf.gz"]\n'
                'policies = ["fcfs"]\nvariants = ["base"]\n',
            )
        )


def test_a_campaign_runs_a_trace_given_as_a_plain_swf_path(tmp_path: Path, capsys) -> None:
    """``traces = ["/path/slice.swf"]`` replays that file, in folder OUTPUT/slice (it used to
    look for ``slice.swf.swf.gz`` in trace_dir)."""
    name = small_trace(tmp_path / "gz", 300)
    plain = tmp_path / "data" / "slice.swf"
    plain.parent.mkdir()
    with gzip.open(tmp_path / "gz" / f"{name}.swf.gz", "rt") as source:
        plain.write_text(source.read())
    config = write(
        tmp_path / "c.toml",
        f"""
[campaign]
output = "out"
traces = ["{plain}"]
policies = ["fcfs"]
variants = ["base"]

[dask]
workers = 1
""",
    )
    assert main(["campaign", str(config), "-q"]) == 0, capsys.readouterr()
    run = tmp_path / "out" / "slice" / "fcfs-base"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["jobs"] == 300
    assert json.loads((run / "run.json").read_text())["workload"]["name"] == "slice.swf"
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert table["trace"].tolist() == ["slice"] and table["status"].tolist() == ["done"]
    for key in ("kills", "killed_jobs", "wasted_core_hours", "wasted_share", "useful_utilisation"):
        assert table[key].iloc[0] == summary[key], key  # the cost side, as the run wrote it
    # the same file through `replay` is the same run: the campaign's folder counts as done
    assert main(["replay", str(plain), "-q", "-o", str(run)]) == 0


# --- every key a campaign file may hold: known, or refused ----------------------------------


def _campaign_file(tmp_path: Path, body: str, variants: str = '["base"]') -> Path:
    path = tmp_path / "c.toml"
    trace_dir = Path(__file__).resolve().parents[1] / "batsched_ml" / "data"
    path.write_text(
        f'[campaign]\ntrace_dir = "{trace_dir}"\ntraces = ["KTH-SP2-1996-2.1-cln"]\n'
        f'policies = ["fcfs"]\nvariants = {variants}\n{body}'
    )
    return path


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("backfiling = false\n", "[campaign]: unknown key(s) backfiling"),
        ("[[campaign.grid]]\npolicy = ['spf']\n", "[[campaign.grid]]: unknown key(s) policy"),
        ("[dask]\nworker = 2\n", "[dask]: unknown key(s) worker"),
        ("[campain]\n", "top level: unknown key(s) campain"),
    ],
)
def test_an_unknown_key_is_refused_never_run_as_a_default(
    tmp_path: Path, body: str, where: str
) -> None:
    with pytest.raises(CampaignError, match=re.escape(where)):
        load_campaign(_campaign_file(tmp_path, body))


def test_a_campaign_sets_backfilling_and_the_starvation_threshold(tmp_path: Path) -> None:
    """What the command line sets, a campaign sets: list scheduling and the starvation
    threshold, once or as an axis, each reaching the run's configuration and folder."""
    campaign = load_campaign(
        _campaign_file(
            tmp_path, "backfilling = [true, false]\nstarvation_threshold = [72, 'none', 6]\n"
        )
    )
    configs = {(s.backfilling, s.starvation_hours): s.config() for s in campaign.runs}
    assert len(configs) == 6
    assert configs[(False, None)].backfilling is False
    assert configs[(False, None)].starvation_threshold is None
    assert configs[(True, 6.0)].starvation_threshold == 6 * 3600.0
    folders = sorted(spec.folder(Path("o")).name for spec in campaign.runs)
    assert folders == [
        "fcfs-base",
        "fcfs-base-nobackfill",
        "fcfs-base-nobackfill-starve6h",
        "fcfs-base-nobackfill-starvenone",
        "fcfs-base-starve6h",
        "fcfs-base-starvenone",
    ]
    # the defaults keep the folders (and runs) campaigns made before these keys existed
    default = load_campaign(_campaign_file(tmp_path, ""))
    assert [s.folder(Path("o")).name for s in default.runs] == ["fcfs-base"]


def test_the_reference_of_campaign_keys_lists_every_key() -> None:
    from batsched_ml.experiments.campaign import CAMPAIGN_KEYS, DASK_KEYS

    page = (Path(__file__).resolve().parents[1] / "docs" / "campaigns.md").read_text()
    reference = page[page.index("## Campaign file reference") :]
    for key in [*CAMPAIGN_KEYS, *DASK_KEYS]:
        assert f"| `{key}` |" in reference, key


def test_every_campaign_file_of_the_repository_loads() -> None:
    folder = Path(__file__).resolve().parents[1] / "campaigns"
    for path in sorted(folder.glob("*.toml")):
        assert load_campaign(path).runs, path


def test_a_results_row_names_its_run_whatever_table_it_comes_from() -> None:
    """Rows of a results table written before backfilling and the starvation threshold were
    campaign keys, and rows read back by pandas (NaN for None and empty texts), name the same
    runs as the specs that made them."""
    from batsched_ml.experiments.campaign import spec_of_row

    old = {
        "trace": "t",
        "policy": "fcfs",
        "variant": "base",
        "seed": 0.0,
        "predictor": "requested",
        "correction": "none",
        "dispatcher": "easy",
        "predictor_options": float("nan"),
        "dispatcher_options": float("nan"),
        "copy": 0,
        "shake_seconds": 60,
        "classifier_options": float("nan"),
    }
    assert spec_of_row(old) == load_spec_default()
    new = {**old, "backfilling": False, "starvation_hours": float("nan")}
    spec = spec_of_row(new)
    assert spec.backfilling is False and spec.starvation_hours is None
    assert spec.folder(Path("o")).name == "fcfs-base-nobackfill-starvenone"


def load_spec_default():
    from batsched_ml.experiments.campaign import RunSpec

    return RunSpec("t", "fcfs", "base")


def test_a_campaign_sets_the_features_the_forest_and_the_batsim_as_the_command_line(
    tmp_path: Path,
) -> None:
    """Every setting of a replay a campaign can set: the feature mode and the forest's trees,
    window and share multiply the runs that read them (a base run runs once, with the
    defaults), each reaching the run's configuration and folder; the Batsim played
    multiplies every run and is part of its identity."""
    from batsched_ml.experiments.campaign import refusal

    campaign = load_campaign(
        _campaign_file(
            tmp_path,
            'feature_modes = ["online", "weekly"]\n'
            "trees = [40, 8]\nwindow = ['all']\nmax_samples = 0.5\nbatsim = [4, 5]\n",
            '["base", "classification"]',
        )
    )
    names = [spec.folder(Path("o")).name for spec in campaign.runs]
    assert names == [
        "fcfs-base",
        "fcfs-base-batsim5",
        "fcfs-classification-window=all-max_samples=0.5",
        "fcfs-classification-window=all-max_samples=0.5-batsim5",
        "fcfs-classification-trees=8-window=all-max_samples=0.5",
        "fcfs-classification-trees=8-window=all-max_samples=0.5-batsim5",
        "fcfs-classification-features=weekly-window=all-max_samples=0.5",
        "fcfs-classification-features=weekly-window=all-max_samples=0.5-batsim5",
        "fcfs-classification-features=weekly-trees=8-window=all-max_samples=0.5",
        "fcfs-classification-features=weekly-trees=8-window=all-max_samples=0.5-batsim5",
    ]
    for spec in campaign.runs:
        assert refusal(spec) is None  # every one is a run a replay applies whole
    config = campaign.runs[-1].config()
    assert config.feature_mode == "weekly"
    assert (config.forest.n_estimators, config.forest.window) == (8, None)
    assert config.forest.max_samples == 0.5
    assert campaign.runs[0].config().forest == campaign_module.FOREST_DEFAULTS
    four, five = (run_identity(spec, str(tmp_path)) for spec in campaign.runs[:2])
    assert four != five  # Batsim 5's replay is another run


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("trees = [8]\n", "trees 8 fits no run: forest=ForestParams"),
        ("feature_modes = ['weekly']\n", "feature_modes weekly fits no run: feature_mode="),
        ("trees = -1\n", "trees -1: forest n_estimators must"),
        ("window = 0\n", "window 0: forest window must be"),
        ("max_samples = 2\n", "max_samples 2.0: forest max"),
        ("feature_modes = ['daily']\n", "feature_modes: unknown ['daily']"),
        ("batsim = 6\n", "batsim must be 4 or 5, not 6"),
        ("starvation_threshold = nan\n", "starvation_threshold must be hours > 0 or 'none'"),
        ("[dask]\nworkers = -2\n", "[dask] workers must be a whole number (0: one per core)"),
        ("shake_seconds = 30\n", "shake_seconds = 30 moves the submissions of the shaken copies"),
        ("seeds = [0, 7]\n", "seeds 7 fits no run: a seed is the forest's, and no variant"),
    ],
)
def test_a_setting_no_run_applies_is_refused_with_the_reason(
    tmp_path: Path, body: str, message: str
) -> None:
    with pytest.raises(CampaignError, match=re.escape(message)):
        load_campaign(_campaign_file(tmp_path, body))
    if "fits no run" not in message:  # refused whatever the variants
        with pytest.raises(CampaignError, match=re.escape(message)):
            load_campaign(_campaign_file(tmp_path, body, '["classification"]'))


def test_the_features_mode_multiplies_only_the_runs_that_compute_features(tmp_path: Path) -> None:
    """The class-clairvoyant variant reads no feature (the true classes): one run, whatever
    ``feature_modes`` holds (it made one identical run per mode), as the base's."""
    campaign = load_campaign(
        _campaign_file(
            tmp_path,
            "feature_modes = ['online', 'weekly']\n",
            '["base", "class-clairvoyant", "classification"]',
        )
    )
    assert [s.folder(Path("o")).name for s in campaign.runs] == [
        "fcfs-base",
        "fcfs-class-clairvoyant",
        "fcfs-classification",
        "fcfs-classification-features=weekly",
    ]
    shaken = load_campaign(_campaign_file(tmp_path, "copies = 2\nshake_seconds = 30\n"))
    assert [s.folder(Path("o")).name for s in shaken.runs] == ["fcfs-base", "fcfs-base-copy1s30"]


def test_the_variants_that_train_no_forest_run_with_the_default_seed(tmp_path: Path) -> None:
    """``seeds = [7]``: the classification runs are seed 7, the base and class-clairvoyant
    runs (no forest to seed) seed 0, in their usual folders; a base run given seed 7 was
    refused when it started (a forest setting it does not read)."""
    from batsched_ml.runs.replaying import make_scheduler

    campaign = load_campaign(
        _campaign_file(tmp_path, "seeds = [7]\n", '["base", "class-clairvoyant", "classification"]')
    )
    assert [(s.variant, s.seed) for s in campaign.runs] == [
        ("base", 0),
        ("class-clairvoyant", 0),
        ("classification", 7),
    ]
    assert [s.folder(Path("o")).name for s in campaign.runs] == [
        "fcfs-base",
        "fcfs-class-clairvoyant",
        "fcfs-classification-seed7",
    ]
    for spec in campaign.runs:
        make_scheduler(spec.config())  # none refused


def test_the_results_table_names_every_setting_and_reads_back_the_same_runs(
    tmp_path: Path,
) -> None:
    """The results table's row of a run holds every field of its spec (list scheduling, the
    starvation threshold, the forest, the Batsim), and the row read back from results.csv
    names the same run; a table written before a field existed takes its default."""
    from batsched_ml.experiments.campaign import results_table, spec_of_row, with_earlier_runs
    from batsched_ml.results.table import read_results

    specs = [
        RunSpec("t", "fcfs", "base", backfilling=False, starvation_hours=None, batsim=5),
        RunSpec("t", "fcfs", "classification", 3, trees=8, window=None, max_samples=None),
        RunSpec("t", "spf", "classification", feature_mode="weekly"),
    ]
    rows = [
        {**dataclasses_asdict(s), "status": "done", "path": str(i)} for i, s in enumerate(specs)
    ]
    table = results_table(rows, specs)
    table.to_csv(tmp_path / "results.csv", index=False)
    back = read_results(tmp_path / "results.csv")
    assert [spec_of_row(row) for row in back.to_dict("records")] == specs
    # an older table (none of the new columns) beside this one: its runs had the defaults
    old = back.drop(columns=["backfilling", "starvation_hours", "trees", "window", "batsim"])
    old = old.iloc[[0]].assign(path="older", variant="base")
    old.to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "summary.json").write_text("{}")
    merged = with_earlier_runs(table, tmp_path)
    assert spec_of_row(merged.to_dict("records")[-1]) == RunSpec("t", "fcfs", "base")


def dataclasses_asdict(spec: RunSpec) -> dict:
    import dataclasses

    return dataclasses.asdict(spec)


def test_a_run_with_a_forest_and_batsim_5_replays_with_them(tmp_path: Path) -> None:
    """The campaign's settings reach the replay: the forest in summary.json, Batsim 5 in
    run.json, and the run is the one `replay --trees 4 --window all --batsim 5` makes."""
    trace = small_trace(tmp_path / "traces", 300)
    spec = RunSpec(trace, "fcfs", "classification", trees=4, window=None, batsim=5)
    row = run_one(spec, str(tmp_path / "traces"), str(tmp_path / "out"))
    assert row["status"] == "done", row["error"]
    assert (row["trees"], row["window"], row["batsim"]) == (4, None, 5)
    folder = spec.folder(tmp_path / "out")
    assert folder.name == "fcfs-classification-trees=4-window=all-batsim5"
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["config"]["forest"]["n_estimators"], summary["config"]["forest"]["window"]) == (
        4,
        None,
    )
    assert json.loads((folder / "run.json").read_text())["config"]["batsim"] == 5
    cli = tmp_path / "cli"
    options = ["--variant", "classification", "--trees", "4", "--window", "all", "--batsim", "5"]
    traces = tmp_path / "traces" / f"{trace}.swf.gz"
    assert main(["replay", str(traces), "-o", str(cli), *options, "-q"]) == 0
    assert (cli / "jobs.csv").read_bytes() == (folder / "jobs.csv").read_bytes()
    again = run_one(spec, str(tmp_path / "traces"), str(tmp_path / "out"))
    assert again["status"] == "existing"  # the same run: not made again


def test_the_campaign_files_of_the_campaigns_page_load_with_the_runs_they_say(
    tmp_path: Path,
) -> None:
    """Every ``toml`` block of docs/campaigns.md is a campaign file that loads, with the number
    of replays its first line says."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "campaigns.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    assert blocks
    for number, block in enumerate(blocks):
        path = tmp_path / f"c{number}.toml"
        path.write_text(block)
        said = int(re.search(r"(\d+) replays", block.splitlines()[0]).group(1))
        assert len(load_campaign(path).runs) == said, block
