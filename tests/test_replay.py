"""Replays of a real trace: the checks that must hold on every replay, determinism, and the
ZeroMQ path giving the same bytes as the in-process one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batsched_ml.predict.forest import ForestParams
from batsched_ml.results.frames import read_jobs_csv
from batsched_ml.results.metrics import max_machines_in_use
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from tests.conftest import workload_head

SLICE = 3000  # the first 3,000 KTH-SP2 jobs: about a month, queues of up to ~100 jobs


def check_replay(workload: dict, out: Path) -> None:
    table = read_jobs_csv(out / "jobs.csv")
    ids = sorted(table["job_id"].astype(int))
    assert ids == sorted(job["id"] for job in workload["jobs"]), "every job exactly once"
    assert (table["final_state"] == "COMPLETED_SUCCESSFULLY").all()
    assert (table["starting_time"] >= table["submission_time"]).all()
    assert max_machines_in_use(table) <= workload["nb_res"]


@pytest.mark.parametrize("policy", ["fcfs", "wfp", "spf", "saf"])
def test_replay_invariants_and_summary(policy: str, kth_workload, tmp_path: Path) -> None:
    workload = workload_head(kth_workload, SLICE)
    result = run_replay(workload, ReplayConfig(policy=policy))
    summary = write_replay(result, tmp_path)
    check_replay(workload, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    for key in ("jobs", "mean_bsld", "mean_wait", "max_wait", "makespan", "utilisation"):
        assert key in summary
    assert summary["jobs"] == SLICE and summary["mean_bsld"] >= 1.0
    assert 0 < summary["utilisation"] <= 1


def test_a_result_does_not_keep_the_jobs(kth_workload, tmp_path: Path) -> None:
    """A replay's result describes its workload without its job objects (freed before the
    files are written) and counts them: summary.json says how many the workload had."""
    workload = workload_head(kth_workload, 300)
    result = run_replay(workload, ReplayConfig(policy="fcfs"))
    assert "jobs" not in result.workload and "profiles" not in result.workload
    assert result.workload == {
        key: value for key, value in workload.items() if key not in ("jobs", "profiles")
    }
    assert result.workload_jobs == 300
    assert write_replay(result, tmp_path)["workload_jobs"] == 300


def test_policies_give_different_schedules(kth_workload) -> None:
    workload = workload_head(kth_workload, SLICE)
    bsld = {}
    for policy in ("fcfs", "spf"):
        result = run_replay(workload, ReplayConfig(policy=policy))
        bsld[policy] = result.rows
    assert bsld["fcfs"] != bsld["spf"]


@pytest.mark.parametrize(
    "config",
    [
        ReplayConfig(policy="wfp"),
        ReplayConfig(
            policy="fcfs",
            variant="classification-idempotent",
            forest=ForestParams(n_estimators=4),
        ),
    ],
    ids=["wfp", "fcfs-classification-idempotent"],
)
def test_same_inputs_same_bytes(kth_workload, tmp_path: Path, config: ReplayConfig) -> None:
    """Every file of a run folder but timing.json (the wall-clock figures: replay, prediction
    and training seconds) is byte-identical across reruns of the same inputs."""
    workload = workload_head(kth_workload, 3000 if config.classified else SLICE)
    for run in ("a", "b"):
        write_replay(run_replay(workload, config), tmp_path / run)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert "timing.json" in names and "summary.json" in names
    if config.classified:
        assert {"classification.csv", "weekly_quality.csv"} <= set(names)
        timing = json.loads((tmp_path / "a" / "timing.json").read_text())
        assert timing["train_seconds"] >= 0 and timing["weekly_train_seconds"]
        summary = json.loads((tmp_path / "a" / "summary.json").read_text())
        assert "train_seconds" not in summary["classification"]
    for name in names:
        if name != "timing.json":
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize("policy", ["fcfs", "saf"])
def test_zeromq_path_gives_the_same_job_table(policy: str, kth_workload, tmp_path: Path) -> None:
    workload = workload_head(kth_workload, 1500)
    config = ReplayConfig(policy=policy)
    write_replay(run_replay(workload, config), tmp_path / "inproc")
    served = run_replay(workload, config, zmq_endpoint="tcp://127.0.0.1:*")
    write_replay(served, tmp_path / "zmq")
    assert (tmp_path / "zmq" / "jobs.csv").read_bytes() == (
        tmp_path / "inproc" / "jobs.csv"
    ).read_bytes()
    assert served.messages > 2000


@pytest.mark.long
@pytest.mark.parametrize("policy", ["fcfs", "wfp", "spf", "saf"])
def test_full_kth_replay(policy: str, kth_workload, tmp_path: Path) -> None:
    result = run_replay(kth_workload, ReplayConfig(policy=policy))
    write_replay(result, tmp_path)
    check_replay(kth_workload, tmp_path)


def test_the_progress_of_a_classified_replay_counts_workload_jobs(kth_workload) -> None:
    """Kills at the divider and their resubmissions used to push the bar past its total."""
    from batsched_ml.predict.forest import ForestParams

    workload = workload_head(kth_workload, 6000)
    seen: list[int] = []
    config = ReplayConfig(
        variant="classification-idempotent", forest=ForestParams(n_estimators=4, n_jobs=1)
    )
    result = run_replay(workload, config, progress=seen.append)
    kills = sum(",COMPLETED_KILLED," in row for row in result.rows)
    assert kills > 0 and len(result.rows) == 6000 + kills
    assert seen == sorted(seen) and seen[-1] == 6000 and max(seen) <= 6000


def test_tables_are_written_as_pandas_writes_them(tmp_path: Path) -> None:
    """``predictions.csv`` is formatted by outputs itself (pandas' ``to_csv`` took 5 % of a
    large replay): the same text as ``to_csv`` for integer, float and text columns, the
    shortest repr of every float included, and pandas itself for anything it would quote; and
    the same file when it is written a part at a time, whatever the parts' size."""
    import random

    import numpy as np
    import pandas as pd

    from batsched_ml.results.classified_files import _table_csv, table_csv_parts
    from batsched_ml.results.outputs import Folder

    def written(table: pd.DataFrame, rows_per_part: int) -> str:
        Folder(tmp_path).put("t.csv", table_csv_parts(table, rows_per_part=rows_per_part))
        assert not (tmp_path / "t.csv.tmp").exists()
        return (tmp_path / "t.csv").read_bytes().decode()

    rng = random.Random(5)
    floats = [553.0, 1e16, 1e-05, 0.1, 1 / 3, 2.0**53, 1e22, 2.5e-300, 0.0, 43200.5]
    for size in (0, 1, 7, 300):
        table = pd.DataFrame(
            {
                "job_id": pd.Series([f"w{rng.randint(0, 3)}!{i}" for i in range(size)], dtype=str),
                "predicted": np.array([rng.randint(1, 10**6) for _ in range(size)], dtype=np.int64),
                "actual": [rng.choice(floats) * rng.choice((1, 3, 1e-3)) for _ in range(size)],
            }
        )
        assert _table_csv(table) == table.to_csv(index=False)
        floated = table.assign(predicted=table["predicted"] / 7)
        assert _table_csv(floated) == floated.to_csv(index=False)
        for rows_per_part in (1, 3, 100, 10_000):
            assert written(floated, rows_per_part) == floated.to_csv(index=False)
        # classification.csv's: a boolean column, and missing floats (a week with no divider)
        flagged = floated.assign(
            small=np.array([rng.random() < 0.5 for _ in range(size)], dtype=bool),
            divider=[rng.choice((float("nan"), 3600.0, 1e-05)) for _ in range(size)],
        )
        assert _table_csv(flagged) == flagged.to_csv(index=False)
        holed = floated.assign(divider=flagged["divider"])  # missing floats alone
        assert _table_csv(holed) == holed.to_csv(index=False)
        text = _table_csv(flagged)
        assert (",True," in text) == bool(flagged["small"].any())
        assert (",\n" in text) == bool(flagged["divider"].isna().any())  # nothing, not "nan"
        assert "nan" not in text
    quoted = pd.DataFrame({"job_id": ["a,b", 'c"d', "e"], "actual": [1.0, 2.0, 3.0]})
    assert _table_csv(quoted) == quoted.to_csv(index=False)
    assert '"a,b"' in _table_csv(quoted)
    # the first parts need pandas' quoting, the last one not
    assert written(quoted, 1) == written(quoted, 2) == quoted.to_csv(index=False)


def test_float_texts_and_lookups_are_pandas_own() -> None:
    """``predictions.csv``'s floats through ``repr`` are numpy's ``astype(str)`` (random bit
    patterns, whole numbers, six-decimal values, powers of ten and their neighbours), and the
    predictions looked up by id are typed as ``Series.map`` types them (NaN for a missing id;
    Python and numpy numbers); what is not a number of seconds is refused."""
    import numpy as np
    import pandas as pd

    from batsched_ml.results.outputs import _float_texts, _mapped

    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**64 - 1, 200_000, dtype=np.uint64, endpoint=True)
    tens = 10.0 ** np.arange(-30, 30)
    values = np.concatenate(
        [
            bits.view(np.float64),
            rng.integers(0, 2**53, 50_000).astype(np.float64),
            np.round(rng.exponential(1e5, 50_000), 6),
            tens,
            np.nextafter(tens, 0),
            np.nextafter(tens, np.inf),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324],
        ]
    )
    assert _float_texts(values) == values.astype(str).tolist()
    keys = [f"w0!{i}" for i in range(1000)]
    ids = pd.Series(keys, dtype=str, name="x")
    for predictions in (
        {f"w0!{i}": float(i) * 1.5 for i in range(0, 1000, 3)},
        {f"w0!{i}": float(i) for i in range(1000)},
        {f"w0!{i}": i for i in range(1000)},  # ints: an int column
        {f"w0!{i}": 3600 * i for i in range(0, 1000, 3)},  # ints, some ids missing: floats
        {f"w0!{i}": 2**60 + i for i in range(0, 1000, 3)},  # beyond a float's integers
        {f"w0!{i}": (i if i % 2 else i / 2) for i in range(0, 1000, 7)},
        {f"w0!{i}": (i if i % 2 else i / 2) for i in range(1000)},
        {"w0!1": float("nan"), "w0!2": 3, "w0!3": 5},
        {f"w0!{i}": np.float64(i) for i in range(1000)},  # numpy numbers
        {f"w0!{i}": np.int64(7 * i) for i in range(1000)},
        {**{f"w0!{i}": i for i in range(1000)}, "w9!1": 0.5},  # a float on no id: floats
        {**{f"w0!{i}": i for i in range(1000)}, "w9!1": float("nan")},
        {"w0!3": 7},
        {},
    ):
        mapped = _mapped(keys, predictions)
        expected = ids.map(predictions).to_numpy()
        assert mapped.dtype == expected.dtype, predictions
        assert mapped.tobytes() == expected.tobytes()
    big = _mapped(keys[:2], {"w0!0": 2**63, "w0!1": 5})  # beyond int64: floats
    assert big.dtype == np.float64 and big.tolist() == [2.0**63, 5.0]
    for odd in (True, "3600", np.bool_(False)):
        with pytest.raises(TypeError, match="not a number of seconds"):
            _mapped(keys[:1], {"w0!0": odd})
