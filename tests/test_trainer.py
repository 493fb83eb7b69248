"""The side trainer: schema, model store, restart from its database, determinism against the
in-process trainer, and the faults the scheduler must survive."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import skops.io as sio
import zmq
from sklearn.ensemble import RandomForestClassifier

from batsched_ml.errors import ConfigError
from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import ForestParams
from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.trainer.client import RemoteTrainer, stop_trainer
from batsched_ml.trainer.process import free_tcp_endpoint, trainer_command
from batsched_ml.trainer.schema import encode
from batsched_ml.trainer.schema import finished_field as finished
from batsched_ml.trainer.server import (
    FAULTS_VARIABLE,
    History,
    TrainerService,
    faults_from_environment,
)
from batsched_ml.trainer.store import ModelRejected, ModelStore
from tests.conftest import workload_head

PARAMS = ForestParams(n_estimators=8, min_train=50, n_jobs=1)
N = len(FEATURE_NAMES)


def rows(count: int, seed: int = 0, first_week: int = 0) -> list[list]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        features = rng.integers(0, 9, size=N).astype(float).tolist()
        out.append(
            [first_week + i // 100, float(features[0] * 100 + rng.integers(1, 50)), features]
        )
    return out


def service(tmp_path: Path, **faults) -> TrainerService:
    return TrainerService(
        ModelStore(tmp_path / "models"), History(tmp_path / "h.sqlite"), PARAMS, **faults
    )


def ask(svc: TrainerService, kind: str, **fields) -> dict:
    reply, _stop = svc.handle(encode(kind, **fields))
    svc.after_reply()  # as the server loop does once the reply is sent
    return json.loads(reply)


# --- schema ------------------------------------------------------------------------------


def test_unknown_schema_version_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    svc = service(tmp_path)
    reply, stop = svc.handle(json.dumps({"schema": 1, "type": "hello"}).encode())
    assert json.loads(reply) == {
        "schema": 2,
        "type": "error",
        "error": "unsupported schema version 1 (this side speaks 2)",
    }
    assert not stop
    # schema 1's list of rows is not schema 2's columns
    assert ask(svc, "train", week=1, history=1, first_seq=0, finished=[[0, 1.0, [1.0]]]) == {
        "schema": 2,
        "type": "error",
        "error": "train: field 'finished' must be an object of weeks, runtimes, features",
    }
    assert json.loads(svc.handle(b"not json")[0])["type"] == "error"


def _spoiled(field: dict, name: str, row: int, value: float) -> dict:
    """``field`` with ``value`` at position ``row`` of its column ``name`` (row's first
    feature, for the features)."""
    dtype, width = ("<f8", 1) if name == "runtimes" else ("<f4", len(FEATURE_NAMES))
    column = np.frombuffer(base64.b64decode(field[name]), dtype=dtype).copy()
    column[row * width] = value
    return {**field, name: base64.b64encode(column.tobytes()).decode()}


N_BYTES = 4 * len(FEATURE_NAMES)


@pytest.mark.parametrize(
    ("spoil", "error"),
    [
        (lambda f: _spoiled(f, "runtimes", 3, float("inf")), "finished job 3 has a runtime"),
        (lambda f: _spoiled(f, "features", 3, float("nan")), "finished job 3 has a runtime"),
        (
            lambda f: {**f, "features": base64.b64encode(b"\0" * (6 * N_BYTES - 4)).decode()},
            f"finished features must hold {6 * len(FEATURE_NAMES)} values of 4 bytes, not "
            f"{6 * N_BYTES - 4} bytes",
        ),
        (lambda f: {**f, "runtimes": f["runtimes"][:-4]}, "finished runtimes must hold 6"),
        (lambda f: {**f, "runtimes": "@@@@"}, "finished runtimes is not valid base64"),
        (lambda f: {**f, "features": 1.5}, "finished features must be a base64 string"),
        (lambda f: {**f, "weeks": [0, 0, 0, 0.5, 0, 0]}, "finished weeks must be a list of"),
        (lambda f: {**f, "weeks": [0, 0, 0, True, 0, 0]}, "finished weeks must be a list of"),
        (lambda f: {k: v for k, v in f.items() if k != "weeks"}, "field 'finished' must be an"),
    ],
)
def test_a_bad_finished_job_is_named_and_nothing_is_stored(tmp_path: Path, spoil, error) -> None:
    svc = service(tmp_path)
    reply = ask(svc, "train", week=1, history=6, first_seq=0, finished=spoil(finished(rows(6))))
    assert reply["type"] == "error" and reply["error"].startswith(f"train: {error}"), reply
    assert svc.history.size == 0


def test_the_columns_carry_the_float32_values_a_json_list_would_have_given(
    tmp_path: Path,
) -> None:
    """The features go as float32 (what the trainer keeps): the same values as schema 1's
    decimal text rounded to float32 on arrival, for values that are not float32 already."""
    data = rows(50)
    rng = np.random.default_rng(3)
    for row in data:
        row[2] = [float(v) for v in rng.normal(size=len(FEATURE_NAMES)) * 1e3]
    svc = service(tmp_path)
    ask(svc, "train", week=1, history=50, first_seq=0, finished=finished(data))
    expected = np.array([json.loads(json.dumps(row[2])) for row in data]).astype(np.float32)
    assert np.array_equal(svc.history.x[:50], expected)
    assert np.array_equal(svc.history.runtime[:50], [row[1] for row in data])


def test_stored_history_holds_exactly_the_jobs_sent(tmp_path: Path) -> None:
    svc = service(tmp_path)
    data = rows(40)
    ask(svc, "train", week=1, history=30, first_seq=0, finished=finished(data[:30]))
    ask(
        svc, "train", week=2, history=40, first_seq=25, finished=finished(data[25:])
    )  # overlap kept once
    h = svc.history
    assert h.size == 40
    assert h.week[:40].tolist() == [r[0] for r in data]
    assert h.runtime[:40].tolist() == [r[1] for r in data]
    assert np.array_equal(h.x[:40], np.array([r[2] for r in data], dtype=np.float32))
    svc.history.close()
    again = History(tmp_path / "h.sqlite")
    assert again.size == 40 and np.array_equal(again.x[:40], h.x[:40])
    assert again.runtime[:40].tolist() == h.runtime[:40].tolist()


def test_an_expired_request_stores_the_jobs_but_trains_nothing(tmp_path: Path) -> None:
    svc = service(tmp_path)
    reply = ask(
        svc, "train", week=1, history=200, first_seq=0, finished=finished(rows(200)), expires=1.0
    )
    assert reply == {"schema": 2, "type": "expired", "history": 200}
    assert not (tmp_path / "models" / "manifest.json").exists()


def test_train_stores_history_and_publishes_a_model(tmp_path: Path) -> None:
    svc = service(tmp_path)
    data = rows(300)
    assert ask(svc, "hello", params=PARAMS.as_dict())["history"] == 0
    # a gap (first_seq beyond what is stored) is answered with what is missing
    assert ask(svc, "train", week=3, history=300, first_seq=100, finished=finished(data[100:])) == {
        "schema": 2,
        "type": "missing",
        "history": 0,
    }
    reply = ask(svc, "train", week=3, history=300, first_seq=0, finished=finished(data))
    entry = reply["entry"]
    assert reply["type"] == "model" and reply["history"] == 300
    assert entry["week"] == 3 and entry["n_train"] == 300 and entry["file"] == "week-0003.skops"
    assert entry["divider"] == pytest.approx(float(np.median([r[1] for r in data])))
    manifest = json.loads((tmp_path / "models" / "manifest.json").read_text())
    assert [e["week"] for e in manifest["entries"]] == [3]
    assert set(manifest["entries"][0]) >= {
        "week",
        "divider",
        "n_train",
        "train_seconds",
        "previous_week_quality",
        "features",
        "sha256",
    }
    loaded = ModelStore(tmp_path / "models").load(entry)
    # the file holds the compiled forest: it predicts what the trainer's scikit-learn forest does
    trained = svc._published[1]
    probe = np.random.default_rng(5).normal(size=(300, len(FEATURE_NAMES))).astype(np.float32)
    assert [loaded.predict_one(row) for row in probe] == list(trained.predict(probe))
    # the next week's entry rates the previous model on the jobs of its week (week 3 = rows 300-399)
    more = rows(100, seed=1, first_week=3)
    entry4 = ask(svc, "train", week=4, history=400, first_seq=300, finished=finished(more))["entry"]
    assert entry4["previous_week_quality"] is None  # computed after the reply, into the manifest
    assert svc.store.entry(4)["previous_week_quality"]["jobs"] == 100


def test_a_restarted_trainer_resumes_from_its_database(tmp_path: Path) -> None:
    svc = service(tmp_path)
    ask(svc, "train", week=1, history=200, first_seq=0, finished=finished(rows(200)))
    svc.history.close()
    again = service(tmp_path)
    assert again.history.size == 200
    assert ask(again, "hello", params=PARAMS.as_dict())["history"] == 200
    # only the tail is needed now
    reply = ask(
        again, "train", week=2, history=250, first_seq=200, finished=finished(rows(250)[200:])
    )
    assert reply["type"] == "model" and reply["entry"]["n_train"] == 250


# --- the store ---------------------------------------------------------------------------


def trained_entry(tmp_path: Path) -> tuple[ModelStore, dict]:
    svc = service(tmp_path)
    entry = ask(svc, "train", week=1, history=300, first_seq=0, finished=finished(rows(300)))[
        "entry"
    ]
    return svc.store, entry


def test_a_model_file_is_skops_and_the_same_model_gives_the_same_bytes(tmp_path: Path) -> None:
    """The store writes skops's format itself: skops reads it back (array for array, dtype
    for dtype, trusting nothing beyond its defaults), and two trainers of the same history
    publish byte-identical files (skops's own writer named members after memory addresses and
    dated them: the same model had another sha256 at each run)."""
    from batsched_ml.trainer.store import _plain_arrays, model_file_bytes

    store, entry = trained_entry(tmp_path / "one")
    again, entry_again = trained_entry(tmp_path / "two")
    data = (store.root / entry["file"]).read_bytes()
    assert data == (again.root / entry_again["file"]).read_bytes()
    assert entry["sha256"] == entry_again["sha256"]
    arrays = sio.loads(data, trusted=[])
    plain = _plain_arrays(data)
    assert plain is not None and set(arrays) == set(plain) >= {"offsets", "threshold", "p1"}
    for key, value in arrays.items():
        assert value.dtype == plain[key].dtype and np.array_equal(value, plain[key]), key
    assert model_file_bytes(arrays) == data  # what it reads is what it wrote
    # and an empty forest's arrays too (no member but the schema)
    assert sio.loads(model_file_bytes({}), trusted=[]) == {}


def test_a_model_member_is_read_as_numpy_load_reads_it() -> None:
    """The store reads the arrays of a model file without ``numpy.load`` when their header is
    the one ``numpy.save`` writes for a plain C-ordered array; the same arrays, dtype for
    dtype; any other member is ``numpy.load``'s, which refuses what it refuses."""
    import io

    from batsched_ml.trainer.store import _npy_array

    def saved(value: np.ndarray) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=True)
        return buffer.getvalue()

    values = [
        np.arange(18_180, dtype=np.int64),
        np.linspace(0.0, 1.0, 7),
        np.array([False, True]),
        np.array(20),
        np.zeros((0,), dtype=np.float64),
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.arange(6, dtype=np.int32).reshape(2, 3).T,  # Fortran order: numpy.load's
        np.array([1.5, -2.0], dtype=">f8"),  # big-endian: numpy.load's
        np.array(["a", "bc"]),
    ]
    for value in values:
        data = saved(value)
        got, expected = _npy_array(data), np.load(io.BytesIO(data), allow_pickle=False)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected) and got.flags.writeable
    with pytest.raises(ValueError, match="pickle"):
        _npy_array(saved(np.array([{"a": 1}], dtype=object)))
    with pytest.raises(ValueError):
        _npy_array(saved(np.arange(10))[:-8])  # a truncated member


def test_the_manifest_is_the_indented_json_of_its_entries_by_week(tmp_path: Path) -> None:
    """The store encodes each entry once and joins the file from the kept texts: the file is
    still ``json.dumps(manifest, indent=1)`` of the entries by week, an entry recorded again
    replaced, and a second store over the same folder (a restarted trainer) goes on from the
    file."""
    expected: dict = {"schema": 1, "entries": []}

    def record(store: ModelStore, entry: dict) -> None:
        store.record(entry)
        entries = [e for e in expected["entries"] if e["week"] != entry["week"]] + [entry]
        expected["entries"] = sorted(entries, key=lambda e: e["week"])
        assert store.manifest_path.read_text() == json.dumps(expected, indent=1) + "\n"
        assert store.manifest() == expected

    store = ModelStore(tmp_path)
    for week in (2, 0, 1, 2, 5):
        record(store, {"week": week, "file": None, "importances": [0.5, week], "q": {"n": None}})
    record(ModelStore(tmp_path), {"week": 3, "file": "week-0003.skops", "divider": 1.5})
    assert store.entry(3) == {"week": 3, "file": "week-0003.skops", "divider": 1.5}


def test_a_model_file_failing_its_sha256_is_rejected(tmp_path: Path) -> None:
    store, entry = trained_entry(tmp_path)
    path = store.root / entry["file"]
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(ModelRejected, match="sha256"):
        store.load(entry)


def test_a_truncated_model_file_is_rejected_even_with_a_matching_hash(tmp_path: Path) -> None:
    import hashlib

    store, entry = trained_entry(tmp_path)
    path = store.root / entry["file"]
    data = path.read_bytes()[:5000]
    path.write_bytes(data)
    entry = {**entry, "sha256": hashlib.sha256(data).hexdigest()}
    with pytest.raises(ModelRejected, match=r"not a readable skops file"):
        store.load(entry)


def test_a_model_file_with_untrusted_types_is_rejected_never_executed(tmp_path: Path) -> None:
    import hashlib

    store = ModelStore(tmp_path)
    payload = {"model": subprocess.Popen}  # a type no model may contain
    data = sio.dumps(payload)
    assert "subprocess.Popen" in sio.get_untrusted_types(data=data)
    (tmp_path / "week-0001.skops").write_bytes(data)
    entry = {"week": 1, "file": "week-0001.skops", "sha256": hashlib.sha256(data).hexdigest()}
    with pytest.raises(ModelRejected, match=r"untrusted types.*subprocess\.Popen"):
        store.load(entry)
    assert zipfile.is_zipfile(tmp_path / "week-0001.skops")


def _write_model(root: Path, payload: object) -> dict:
    import hashlib

    data = sio.dumps(payload)
    (root / "week-0001.skops").write_bytes(data)
    return {"week": 1, "file": "week-0001.skops", "sha256": hashlib.sha256(data).hexdigest()}


def test_a_pickled_style_scikit_learn_object_is_not_trusted(tmp_path: Path) -> None:
    # a model file is plain arrays; a scikit-learn estimator (types beyond skops's defaults)
    # is refused before anything in it is built
    x = np.random.default_rng(0).normal(size=(200, len(FEATURE_NAMES)))
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(x, x[:, 0] > 0)
    entry = _write_model(tmp_path, forest)
    with pytest.raises(ModelRejected, match=r"untrusted types.*sklearn"):
        ModelStore(tmp_path).load(entry)


def _compiled(tmp_path: Path) -> dict:
    from batsched_ml.predict.forest import compile_forest

    x = np.random.default_rng(0).normal(size=(400, len(FEATURE_NAMES)))
    forest = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0)
    return compile_forest(forest.fit(x, x[:, 0] > 0))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda a: a["left"].__setitem__(1, 0), "not after its parent"),  # a loop back to the root
        (lambda a: a["right"].__setitem__(0, 10_000), "outside its tree"),
        (lambda a: a["feature"].__setitem__(0, 99), "feature out of range"),
        (lambda a: a["right"].__setitem__(0, -1), "exactly one child"),
        (lambda a: a["threshold"].__setitem__(0, np.nan), "threshold is not finite"),
        (lambda a: a.__setitem__("offsets", a["offsets"][:-1]), "offsets"),
        (lambda a: a.__setitem__("left", a["left"].astype(np.float64)), "'left' must be"),
        (lambda a: a.pop("p1"), "expected the arrays"),
    ],
)
def test_a_model_file_that_is_not_a_well_formed_forest_is_rejected(
    tmp_path: Path, damage, reason: str
) -> None:
    arrays = _compiled(tmp_path)
    ModelStore(tmp_path).load(_write_model(tmp_path, arrays))  # whole, it loads
    damage(arrays)
    with pytest.raises(ModelRejected, match=reason):
        ModelStore(tmp_path).load(_write_model(tmp_path, arrays))


# --- a replay through the trainer process ------------------------------------------------


@pytest.fixture
def trainer_process(tmp_path: Path):
    processes = []

    def start(faults: str | None = None) -> str:
        """A ``batsched-ml trainer`` process; ``faults``: its ``BATSCHED_ML_TRAINER_FAULTS``."""
        endpoint = free_tcp_endpoint()
        command = trainer_command(
            endpoint, tmp_path / "models", tmp_path / "t.sqlite", ForestParams()
        )
        env = {**os.environ, FAULTS_VARIABLE: faults} if faults is not None else None
        processes.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        )
        return endpoint

    yield start
    for process in processes:
        process.kill()
        process.wait()


def classified(kth_workload, trainer, policy: str = "fcfs"):
    wl = workload_head(kth_workload, 2500)  # about five weeks: four weekly models
    return run_replay(
        wl, ReplayConfig(policy=policy, variant="classification-idempotent"), trainer=trainer
    )


def test_trainer_process_gives_the_same_job_table_as_in_process(
    kth_workload, trainer_process, tmp_path
) -> None:
    endpoint = trainer_process()
    remote = RemoteTrainer(endpoint, tmp_path / "models", ForestParams(), deadline=60, run=RUN_A)
    served = classified(kth_workload, remote)
    assert remote.close(stop=True)  # the run that greeted the trainer stops it
    local = classified(kth_workload, None)
    assert served.rows == local.rows
    assert remote.events == []
    manifest = json.loads((tmp_path / "models" / "manifest.json").read_text())
    assert [e["week"] for e in manifest["entries"] if e["file"]] == [1, 2, 3, 4]
    summary = write_replay(served, tmp_path / "out")
    assert summary["trainer_events"] == []


def test_no_trainer_means_every_job_large_and_the_run_completes(kth_workload, tmp_path) -> None:
    remote = RemoteTrainer(free_tcp_endpoint(), tmp_path / "models", ForestParams(), deadline=0.5)
    result = classified(kth_workload, remote)
    assert len(result.rows) == 2500
    assert result.scheduler.kill_decisions == 0  # nothing was ever classified small
    assert {e["event"] for e in remote.events} == {"trainer_unavailable"}
    assert all(e["using"] == "every job large" for e in remote.events)
    summary = write_replay(result, tmp_path / "out")
    assert summary["trainer_events"] == remote.events and summary["jobs"] == 2500


def test_a_trainer_crashing_mid_training_leaves_the_last_good_model(
    kth_workload, trainer_process, tmp_path
) -> None:
    endpoint = trainer_process(faults="crash=3")
    remote = RemoteTrainer(endpoint, tmp_path / "models", ForestParams(), deadline=5)
    remote.wait_ready(60)
    result = classified(kth_workload, remote)
    assert [e["week"] for e in remote.events] == [3, 4]
    assert all(e["using"] == "last good model" for e in remote.events)
    assert (
        result.scheduler.weeks[3].week == 3 and result.scheduler.model.week == 2
    )  # week 2's model
    assert len({r.split(",")[0] for r in result.rows}) >= 2500


def test_a_slow_trainer_is_skipped_for_that_week_and_used_again_after(
    kth_workload, trainer_process, tmp_path
) -> None:
    endpoint = trainer_process(faults="delay=2:8")
    remote = RemoteTrainer(endpoint, tmp_path / "models", ForestParams(), deadline=4)
    remote.wait_ready(60)
    result = classified(kth_workload, remote)
    # week 2 takes 8 s > the 4 s deadline; week 3 may come while the trainer is still busy,
    # but its request has expired when the trainer reads it, so week 4 gets a model in time
    assert remote.events[0]["week"] == 2
    assert {(e["week"], e["event"]) for e in remote.events} <= {
        (2, "trainer_unavailable"),
        (3, "trainer_unavailable"),
    }
    assert all(e["using"] == "last good model" for e in remote.events)
    weeks = {w.week: w for w in result.scheduler.weeks}
    assert weeks[2].has_model and weeks[2].divider == weeks[1].divider  # week 1's model kept
    assert weeks[4].has_model and weeks[4].n_train > weeks[1].n_train  # newer models picked up
    remote.close(stop=True)


def test_fault_injection_is_read_from_the_environment_only() -> None:
    """The faults are no command-line option of ``batsched-ml trainer``; the variable is parsed
    strictly, so a test cannot run without the fault it asked for."""
    from batsched_ml.cli import UsageError, build_parser

    assert faults_from_environment({}) == {}
    assert faults_from_environment({FAULTS_VARIABLE: ""}) == {}
    assert faults_from_environment({FAULTS_VARIABLE: "delay=2:8; delay=5:0.5;crash=3"}) == {
        "fault_delay": {2: 8.0, 5: 0.5},
        "fault_crash_week": 3,
    }
    for bad in ("delay=2", "crash=x", "slow=2:8", "delay=2:8:1"):
        with pytest.raises(ConfigError, match=FAULTS_VARIABLE):
            faults_from_environment({FAULTS_VARIABLE: bad})
    for option in (["--fault-delay", "2:8"], ["--fault-crash-week", "3"]):
        with pytest.raises(UsageError) as refused:
            build_parser().parse_args(["trainer", *option])
        assert "unrecognized arguments" in refused.value.line


def test_a_rejected_model_file_is_never_used(kth_workload, tmp_path) -> None:
    """A stand-in trainer publishes a tampered file for week 2: the scheduler keeps week 1's."""
    endpoint = free_tcp_endpoint()
    store = ModelStore(tmp_path / "models")
    stop = threading.Event()

    def serve() -> None:
        svc = TrainerService(store, History(tmp_path / "h.sqlite"), ForestParams())  # its thread
        sock = zmq.Context.instance().socket(zmq.REP)
        sock.bind(endpoint)
        while not stop.is_set():
            if not sock.poll(100):
                continue
            reply, _ = svc.handle(sock.recv())
            message = json.loads(reply)
            payload = svc.payload
            if message.get("type") == "model" and message["entry"]["week"] == 2:
                payload = payload[:-100]  # truncated on its way
            sock.send_multipart([reply, payload] if payload is not None else [reply])
            svc.after_reply()
        sock.close(linger=0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        remote = RemoteTrainer(endpoint, store.root, ForestParams(), deadline=30)
        result = classified(kth_workload, remote)
    finally:
        stop.set()
        thread.join(5)
    assert [(e["week"], e["event"]) for e in remote.events] == [(2, "model_rejected")]
    assert "sha256" in remote.events[0]["detail"]
    weeks = {w.week: w for w in result.scheduler.weeks}
    assert weeks[2].divider == weeks[1].divider and weeks[3].divider != weeks[1].divider


def test_trainer_cli_refuses_a_wrong_schema_over_the_socket(tmp_path, trainer_process) -> None:
    endpoint = trainer_process()
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    sock.send(json.dumps({"schema": 99, "type": "train"}).encode())
    assert sock.poll(20_000)
    assert json.loads(sock.recv())["error"] == "unsupported schema version 99 (this side speaks 2)"
    sock.send(encode("stop", run=RUN_A))  # no run owns it yet: the first to speak does
    assert sock.poll(20_000) and json.loads(sock.recv())["type"] == "bye"
    sock.close()
    assert sys.executable


@pytest.mark.long  # the whole KTH-SP2 trace; the other trainer faults run in CI
def test_a_trainer_killed_during_a_full_replay_is_restarted_and_the_run_completes(
    kth_workload, tmp_path
) -> None:
    """The whole KTH-SP2 trace with a trainer process this run owns; the process is killed
    (SIGKILL) while it trains week 20. Week 20 keeps week 19's model, week 21 finds the process
    gone, restarts it on the same endpoint with its database, and every later week has a model
    again; every job finishes exactly once."""
    import signal

    from batsched_ml.results.frames import logical_jobs, read_jobs_csv
    from batsched_ml.trainer.process import TrainerProcess

    params = ForestParams()
    owned = TrainerProcess(
        tmp_path / "models", tmp_path / "t.sqlite", params, {FAULTS_VARIABLE: "delay=20:30"}
    )
    owned.start()
    remote = RemoteTrainer(
        owned.endpoint, tmp_path / "models", params, deadline=5, process=owned, run=RUN_A
    )
    remote.wait_ready(60)
    asked = remote.model_for
    used: dict[int, object] = {}

    def model_for(week: int):
        if week == 20:  # the trainer sleeps 30 s in this week's training: kill it meanwhile
            threading.Timer(1.0, lambda: owned.process.send_signal(signal.SIGKILL)).start()
        model = asked(week)
        used[week] = model
        return model

    remote.model_for = model_for
    result = run_replay(
        kth_workload, ReplayConfig(variant="classification-idempotent"), trainer=remote
    )
    remote.close(stop=True)
    owned.stop()
    assert [(e["week"], e["event"]) for e in remote.events] == [
        (20, "trainer_unavailable"),
        (21, "trainer_restarted"),
    ]
    assert owned.restarts == 1
    assert used[20] is used[19]  # the last good model
    assert used[21].week == 21 and used[21].predictor is not None
    weeks = [e["week"] for e in ModelStore(tmp_path / "models").manifest()["entries"]]
    assert 21 in weeks and max(weeks) == max(used) and 20 not in weeks
    summary = write_replay(result, tmp_path / "out")
    assert summary["trainer_events"] == remote.events
    jobs = logical_jobs(read_jobs_csv(tmp_path / "out" / "jobs.csv"))
    assert len(jobs) == len(kth_workload["jobs"])
    assert sorted(jobs["job_id"].astype(str)) == sorted(str(j["id"]) for j in kth_workload["jobs"])
    assert (jobs["final_state"] == "COMPLETED_SUCCESSFULLY").all()


# --- the run a history belongs to --------------------------------------------------------

RUN_A = {
    "run_id": "aaaaaaaaaaaaaaaa",
    "workload": {"name": "a.swf", "sha256": "1"},
    "config": {"policy": "fcfs", "variant": "classification-idempotent"},
}
RUN_B = {
    "run_id": "bbbbbbbbbbbbbbbb",
    "workload": {"name": "b.swf", "sha256": "2"},
    "config": {"policy": "spf", "variant": "classification"},
}


def test_a_history_belongs_to_the_run_that_first_greeted_it(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert ask(svc, "hello", params=PARAMS.as_dict(), run=RUN_A)["type"] == "hello"
    ask(svc, "train", week=1, history=200, first_seq=0, finished=finished(rows(200)))
    refused = ask(svc, "hello", params=PARAMS.as_dict(), run=RUN_B)
    assert refused["type"] == "refused"
    assert refused["error"] == (
        "the trainer's history (200 jobs) belongs to run aaaaaaaaaaaaaaaa (workload a.swf, "
        "fcfs classification-idempotent), not to run bbbbbbbbbbbbbbbb"
    )
    svc.history.close()
    # the owner is kept in the database: a restarted trainer still refuses B, takes A back
    again = service(tmp_path)
    assert again.history.run == RUN_A
    assert ask(again, "hello", params=PARAMS.as_dict(), run=RUN_B)["type"] == "refused"
    assert ask(again, "hello", params=PARAMS.as_dict(), run=RUN_A)["history"] == 200


def test_a_history_of_an_unidentified_run_is_refused(tmp_path: Path) -> None:
    svc = service(tmp_path)
    ask(svc, "train", week=1, history=150, first_seq=0, finished=finished(rows(150)))
    reply = ask(svc, "hello", params=PARAMS.as_dict(), run=RUN_A)
    assert reply["type"] == "refused" and "150 jobs of an unidentified run" in reply["error"]


def test_the_scheduler_stops_on_a_refusal_instead_of_going_on_without_models(
    tmp_path: Path,
) -> None:
    from batsched_ml.trainer.client import TrainerRefused
    from batsched_ml.trainer.server import run_trainer

    endpoint = free_tcp_endpoint()
    History(tmp_path / "h.sqlite").adopt(RUN_A)
    thread = threading.Thread(
        target=run_trainer,
        args=(endpoint, tmp_path / "models", tmp_path / "h.sqlite", PARAMS),
        kwargs={"idle_timeout": 20},
        daemon=True,
    )
    thread.start()
    client = RemoteTrainer(endpoint, tmp_path / "models", PARAMS, deadline=10, run=RUN_B)
    try:
        with pytest.raises(TrainerRefused, match="belongs to run aaaaaaaaaaaaaaaa"):
            client.model_for(1)
        assert client.events == []  # not weathered as a trainer fault
        assert client.close(stop=True) is False  # nor does it obey this run's stop
    finally:
        client.close()
        # the run that owns the trainer stops it (the join used to wait out its 10 s)
        assert stop_trainer(endpoint, RUN_A)
        thread.join(10)
    assert not thread.is_alive()


def test_an_interrupt_while_the_side_trainer_starts_stops_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C (or SIGTERM) landing after the trainer process started but before the run got
    its client used to leave the process running, an orphan: it is killed like any other
    interrupted run's trainer."""
    from batsched_ml.runs.replaying import ReplayConfig
    from batsched_ml.trainer import lifecycle

    made: list = []

    class FakeProcess:
        def __init__(self, *args, **kwargs) -> None:
            self.endpoint = "tcp://127.0.0.1:1"
            self.calls: list[str] = []
            made.append(self)

        def start(self) -> None:
            self.calls.append("start")

        def kill(self) -> None:
            self.calls.append("kill")

        def stop(self) -> None:
            self.calls.append("stop")

    class InterruptedClient:
        def __init__(self, *args, **kwargs) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "TrainerProcess", FakeProcess)  # where it is looked up
    monkeypatch.setattr(lifecycle, "RemoteTrainer", InterruptedClient)
    config = ReplayConfig(variant="classification-idempotent")
    with (
        pytest.raises(KeyboardInterrupt),
        lifecycle.trainer(config, tmp_path, choice="process"),
    ):
        pass
    assert [p.calls for p in made] == [["start", "kill"]]


def test_a_signal_inside_the_trainer_process_spawn_orphans_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A Ctrl-C that lands inside ``subprocess.Popen``, after the fork, while it waits for the
    child's exec, used to raise out of ``Popen`` and lose the child: an orphaned trainer (the
    flaky SIGINT case of tests/test_stops.py). Here the signal is sent from inside a real
    ``Popen``; the run must still end with KeyboardInterrupt and the child must be gone."""
    import signal

    from batsched_ml.runs.replaying import ReplayConfig
    from batsched_ml.trainer import lifecycle, process

    spawned: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen_then_ctrl_c(*args, **kwargs) -> subprocess.Popen:
        child = real_popen(*args, **kwargs)
        spawned.append(child)
        signal.raise_signal(signal.SIGINT)  # lands before Popen returns its handle
        return child

    monkeypatch.setattr(process.subprocess, "Popen", popen_then_ctrl_c)
    # a suite started in the background inherits SIGINT ignored: Ctrl-C's handler here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        config = ReplayConfig(variant="classification-idempotent")
        with (
            pytest.raises(KeyboardInterrupt),
            lifecycle.trainer(config, tmp_path, choice="process"),
        ):
            pass
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(spawned) == 1
    left_running = spawned[0].poll() is None
    if left_running:  # the defect: clean up before failing
        spawned[0].kill()
        spawned[0].wait()
    assert not left_running  # killed and reaped by the run's clean-up


# --- who may stop a trainer, and what a stop leaves ------------------------------------------


def test_only_the_run_that_owns_the_trainer_can_stop_it(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert ask(svc, "hello", params=PARAMS.as_dict(), run=RUN_A)["type"] == "hello"
    for stranger in ({}, {"run": RUN_B}, {"run": {"run_id": 7}}):
        reply, stop = svc.handle(encode("stop", **stranger))
        assert not stop and json.loads(reply)["type"] == "refused", stranger
    reply, stop = svc.handle(encode("stop", run=RUN_B))
    assert json.loads(reply)["error"] == (
        "stop refused: the trainer's history (0 jobs) belongs to run aaaaaaaaaaaaaaaa (workload "
        "a.swf, fcfs classification-idempotent), not to run bbbbbbbbbbbbbbbb"
    )
    reply, stop = svc.handle(encode("stop", run=RUN_A))
    assert stop and json.loads(reply)["type"] == "bye"
    svc.history.close()
    # a trainer no run has spoken to yet belongs to the first: its stop is obeyed, and the
    # history is that run's from then on
    fresh = TrainerService(ModelStore(tmp_path / "m2"), History(tmp_path / "h2.sqlite"), PARAMS)
    reply, stop = fresh.handle(encode("stop", run=RUN_B))
    assert stop and json.loads(reply)["type"] == "bye" and fresh.history.run == RUN_B
    fresh.history.close()


def start_trainer(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """A ``batsched-ml trainer`` process with its history in ``tmp_path/t.sqlite``."""
    endpoint = free_tcp_endpoint()
    command = trainer_command(endpoint, tmp_path / "models", tmp_path / "t.sqlite", ForestParams())
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # SIGINT at its default, as at a terminal (a suite started in the background inherits
        # it ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return process, endpoint


def test_a_stranger_cannot_stop_a_trainer_process_and_its_owner_can(tmp_path: Path) -> None:
    """Over the socket, against ``batsched-ml trainer``: a stop from another run, or from no
    run, is refused and the trainer goes on serving its run; the owner's stop ends it, exit 0,
    its SQLite history closed (no -wal, no -shm)."""
    process, endpoint = start_trainer(tmp_path)
    try:
        owner = RemoteTrainer(endpoint, tmp_path / "models", ForestParams(), deadline=60, run=RUN_A)
        owner.wait_ready(60)
        assert (tmp_path / "t.sqlite-wal").exists()  # open, in WAL mode
        assert stop_trainer(endpoint, RUN_B, timeout=20) is False
        assert stop_trainer(endpoint, None, timeout=20) is False
        assert process.poll() is None
        owner.add_finished([1.0] * N, 100.0, 0)
        assert owner.model_for(1).week == 1 and owner.events == []  # still serving its run
        assert owner.close(stop=True) is True
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()
    assert sorted(p.name for p in tmp_path.glob("t.sqlite*")) == ["t.sqlite"]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_trainer_stopped_by_a_signal_leaves_no_sqlite_journal(tmp_path: Path, sig: str) -> None:
    process, endpoint = start_trainer(tmp_path)
    try:
        owner = RemoteTrainer(endpoint, tmp_path / "models", ForestParams(), deadline=60, run=RUN_A)
        owner.wait_ready(60)
        owner.close()
        assert (tmp_path / "t.sqlite-wal").exists()
        process.send_signal(getattr(signal, sig))
        assert process.wait(timeout=60) == {"SIGINT": 130, "SIGTERM": 143}[sig]
    finally:
        process.kill()
        process.wait()
    assert sorted(p.name for p in tmp_path.glob("t.sqlite*")) == ["t.sqlite"]


def test_a_killed_trainer_process_leaves_no_sqlite_journal(tmp_path: Path) -> None:
    """An interrupted run kills its trainer process (it may be training: no polite request);
    the run then closes the history as the trainer would have."""
    from batsched_ml.trainer.process import TrainerProcess

    owned = TrainerProcess(tmp_path / "models", tmp_path / "t.sqlite", ForestParams())
    owned.start()
    remote = RemoteTrainer(
        owned.endpoint, tmp_path / "models", ForestParams(), process=owned, run=RUN_A
    )
    remote.wait_ready(60)
    remote.close()
    assert (tmp_path / "t.sqlite-wal").exists()
    owned.kill()
    assert sorted(p.name for p in tmp_path.glob("t.sqlite*")) == ["t.sqlite"]
    history = History(tmp_path / "t.sqlite")  # a database SQLite opens as before
    assert history.run == RUN_A
    history.close()


def test_the_trainer_process_is_in_the_run_s_session_and_its_own_process_group(
    tmp_path: Path,
) -> None:
    """Its own process group: a Ctrl-C at the terminal (sent to the foreground group) reaches
    the run, which stops its trainer. The run's session: Linux shares CPU time between sessions
    (autogroup), and a trainer in a session of its own got one share against every busy process
    of the run's, so its forests grew on one core of two on a busy machine (+46 % on HPC2N)."""
    from batsched_ml.trainer.process import TrainerProcess

    owned = TrainerProcess(tmp_path / "models", tmp_path / "t.sqlite", ForestParams(n_estimators=0))
    owned.start()
    try:
        assert owned.process is not None
        child = owned.process.pid
        assert os.getsid(child) == os.getsid(0)
        assert os.getpgid(child) == child != os.getpgid(0)
    finally:
        owned.kill()


def test_a_replay_whose_trainer_never_answers_says_so_and_exits_75(tmp_path: Path) -> None:
    """The scheduler weathers a missing trainer (every job large) and completes, but the run is
    not the method's: one warning line and exit 75, not a quiet 0."""
    from tests.conftest import KTH

    slice_path = tmp_path / "kth.swf"
    with gzip.open(KTH, "rt") as trace:
        lines = [line for line in trace if not line.startswith(";")][:2500]
    slice_path.write_text("".join(lines))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "batsched_ml", "replay", str(slice_path), "-q"),
            *("--variant", "classification-idempotent", "-o", str(tmp_path / "out")),
            *("--trainer", free_tcp_endpoint(), "--trainer-deadline", "0.3"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 75, done.stderr
    warning = [line for line in done.stderr.splitlines() if "side trainer failed" in line]
    assert len(warning) == 1 and "trainer_unavailable" in warning[0], done.stderr
    assert "every job large" in warning[0]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(summary["trainer_events"]) == int(warning[0].split("failed in ")[1].split()[0])


def test_a_run_that_needs_no_trainer_starts_or_stops_none_and_imports_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The one rule (``trainer.needs_nothing``) of the runs that need no trainer: trained in
    process, or a base run with the default trainer process. The command line asks it before
    importing the trainer's modules (a base replay does not import ZeroMQ); a base run given
    a trainer's endpoint with ``--stop-trainer`` still stops it at the end."""
    from batsched_ml.runs.replaying import ReplayConfig
    from batsched_ml.trainer import lifecycle, needs_nothing

    assert needs_nothing(True, "inprocess") and needs_nothing(False, "inprocess")
    assert needs_nothing(False, "process") and not needs_nothing(True, "process")
    assert not needs_nothing(False, "tcp://127.0.0.1:1")
    assert not needs_nothing(True, "tcp://127.0.0.1:1")

    stopped: list[str] = []
    monkeypatch.setattr(lifecycle, "stop_trainer", lambda endpoint, run: stopped.append(endpoint))
    monkeypatch.setattr(lifecycle, "replaced", lambda: False)
    base = ReplayConfig()
    for choice, stop in (("process", True), ("inprocess", True), ("tcp://127.0.0.1:1", False)):
        with lifecycle.trainer(base, tmp_path, choice=choice, stop=stop) as chosen:
            assert chosen is None
    assert stopped == []
    with lifecycle.trainer(base, tmp_path, choice="tcp://127.0.0.1:1", stop=True) as chosen:
        assert chosen is None
    assert stopped == ["tcp://127.0.0.1:1"]

    code = (
        "import argparse, sys\n"
        "from pathlib import Path\n"
        "from batsched_ml.cli import options\n"
        "from batsched_ml.runs.replaying import ReplayConfig\n"
        "args = argparse.Namespace(trainer='process')\n"
        "with options.trainer_for(args, ReplayConfig(), Path('.')) as chosen:\n"
        "    assert chosen is None\n"
        "print(sorted(m for m in ('zmq', 'batsched_ml.trainer.lifecycle') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"


def test_the_client_tries_a_starting_trainer_again_soon(tmp_path) -> None:
    """A trainer process binds a moment after the run's client connects: at ZeroMQ's default
    retry interval (100 ms) every classified run waited that much more for its first model
    (start to first answer, 5 runs: 0.25-0.27 s against 0.16 s)."""
    import zmq

    from batsched_ml.predict.params import ForestParams
    from batsched_ml.trainer.client import RemoteTrainer

    remote = RemoteTrainer("tcp://127.0.0.1:9", tmp_path / "models", ForestParams())
    socket = remote._connect()
    try:
        assert socket.getsockopt(zmq.RECONNECT_IVL) == 10
        assert socket.getsockopt(zmq.RECONNECT_IVL_MAX) == 1000
    finally:
        remote.close()
