"""The compiled forest walk (``batsched_ml/predict/_cforest.c``) against its reference,
:meth:`FastForest.proba` in Python: the same class probabilities bit for bit, and the same
predicted classes one row or many rows at a time, on trained forests
(including rows on and next to every split threshold, where the float32 rounding decides), the
same refusals of malformed arrays, and the switch that turns it off."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from batsched_ml import compiled
from batsched_ml.predict.forest import FastForest, compile_forest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "batsched_ml" / "predict" / "_cforest.c"


def _cforest():
    """The compiled module built from this source, or a skip (no compiler at install)."""
    if importlib.util.find_spec("batsched_ml.predict._cforest") is None:
        pytest.skip("the compiled forest walk is not built in this install")
    from batsched_ml.predict import _cforest  # type: ignore[attr-defined]

    if compiled.source_digest(SOURCE) != _cforest.SOURCE_SHA256:
        pytest.skip("the compiled forest walk was built from another source")
    return _cforest


def _forest(seed: int, **params) -> tuple[RandomForestClassifier, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4000, 20)).astype(np.float32)
    x[:, 3] = rng.integers(0, 5, size=4000)  # ties: thresholds halfway between integers
    x[:, 7] = np.round(rng.exponential(3600.0, size=4000))  # large magnitudes, as runtimes
    y = x[:, 0] + 0.3 * x[:, 3] - x[:, 7] / 7200.0 + rng.normal(size=4000) > 0.0
    forest = RandomForestClassifier(random_state=seed, n_jobs=1, **params).fit(x, y)
    return forest, x


def _probe_rows(forest: RandomForestClassifier, x: np.ndarray, seed: int) -> list[list[float]]:
    """Random rows, and rows whose every column is a split threshold of that column or the
    nearest float32 on either side of it (each with a random other threshold elsewhere)."""
    rng = np.random.default_rng(seed)
    rows = [list(map(float, row)) for row in rng.normal(size=(300, 20))]
    rows += [list(map(float, row)) for row in x[:300].astype(np.float64) * 1.0000001]
    arrays = compile_forest(forest)
    inner = arrays["left"] != -1
    features, thresholds = arrays["feature"][inner], arrays["threshold"][inner]
    for feature, threshold in zip(features[:400], thresholds[:400], strict=True):
        t32 = np.float32(threshold)
        for value in (
            float(threshold),
            float(t32),
            float(np.nextafter(t32, np.float32(np.inf))),
            float(np.nextafter(t32, np.float32(-np.inf))),
        ):
            row = [float(x[rng.integers(len(x)), j]) for j in range(20)]
            row[int(feature)] = value
            rows.append(row)
    return rows


@pytest.mark.parametrize(
    "params",
    [
        {"n_estimators": 40, "max_depth": 20, "min_samples_leaf": 20, "max_samples": 0.25},
        {"n_estimators": 7, "max_depth": None, "min_samples_leaf": 1},
        {"n_estimators": 1, "max_depth": 1},
    ],
    ids=["default-set-up", "deep", "stump"],
)
def test_the_compiled_walk_gives_the_python_walks_probabilities_bit_for_bit(
    params, monkeypatch
) -> None:
    # both walks compared, whichever the runs of this environment use
    monkeypatch.delenv(compiled.VARIABLE, raising=False)
    _cforest()
    forest, x = _forest(3, **params)
    arrays = compile_forest(forest)
    fast, reference = FastForest(arrays), FastForest(arrays, compiled=False)
    assert fast.compiled is not None and reference.compiled is None
    rows = _probe_rows(forest, x, 4)
    got = [fast.proba(row) for row in rows]
    expected = [reference.proba(row) for row in rows]
    assert [(a.hex(), b.hex()) for a, b in got] == [(a.hex(), b.hex()) for a, b in expected]
    assert [fast.predict_one(row) for row in rows] == [reference.predict_one(r) for r in rows]
    # the rows at once (the trainer's rating of last week's model): the same classes, from
    # float64 rows (rounded to float32 first, as each row is) and from float32 ones
    expected_classes = np.array([reference.predict_one(row) for row in rows], dtype=bool)
    if params.get("max_depth") != 1:  # (the stump says one class for all of them)
        assert expected_classes.any() and not expected_classes.all()
    for matrix in (np.array(rows), np.array(rows, dtype=np.float32)):
        assert np.array_equal(fast.predict(matrix), expected_classes)
        assert np.array_equal(reference.predict(matrix), expected_classes)
    assert fast.predict(np.empty((0, 20))).shape == (0,)
    # and both are scikit-learn's own (the float32 rounding of the row included)
    assert np.array_equal(
        np.array(got[:500]), forest.predict_proba(np.array(rows[:500], dtype=np.float32))
    ) or np.allclose(np.array(got[:500]), forest.predict_proba(np.array(rows[:500])))
    # a numpy row, and integers, read as the Python walk reads them
    row = np.array(rows[0])
    assert fast.proba(row) == reference.proba(row)
    assert fast.proba([1] * 20) == reference.proba([1] * 20)


def _arrays() -> dict[str, np.ndarray]:
    """A two-tree forest: a split on feature 1 at 0.5, then a leaf-only tree."""
    return {
        "offsets": np.array([0, 3, 4]),
        "left": np.array([1, -1, -1, -1]),
        "right": np.array([2, -1, -1, -1]),
        "feature": np.array([1, -2, -2, -2]),
        "threshold": np.array([0.5, -2.0, -2.0, -2.0]),
        "p0": np.array([0.0, 1.0, 0.25, 0.5]),
        "p1": np.array([0.0, 0.0, 0.75, 0.5]),
    }


def test_the_compiled_walk_on_a_hand_made_forest() -> None:
    forest = _cforest().Forest(**_arrays(), n_features=2)
    assert forest.n_trees == 2
    assert forest.proba([9.0, 0.5]) == (0.75, 0.25)  # 0.5 <= 0.5: left
    assert forest.proba([9.0, 0.6]) == (0.375, 0.625)
    with pytest.raises(ValueError, match="a row of 3 features, not 2"):
        forest.proba([1.0, 2.0, 3.0])
    with pytest.raises(TypeError):
        forest.proba([1.0, "x"])


def test_the_compiled_predictions_answer_with_the_classes_given() -> None:
    forest = _cforest().Forest(**_arrays(), n_features=2, classes=("large", "small"))
    assert forest.predict_one([9.0, 0.5]) == "large"  # 0.75 against 0.25
    assert forest.predict_one([9.0, 0.6]) == "small"  # 0.375 against 0.625
    rows = np.array([[9.0, 0.5], [9.0, 0.6], [0.0, np.float32(0.5000001)]], dtype=np.float32)
    won = np.full(3, 7, dtype=np.uint8)
    forest.winners(rows, won)
    assert won.tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="2-d float32 array of 2 columns"):
        forest.winners(rows.astype(np.float64), won)
    with pytest.raises(ValueError, match="one item a row"):
        forest.winners(rows, np.zeros(2, dtype=np.uint8))
    with pytest.raises(RuntimeError, match="without its classes"):
        _cforest().Forest(**_arrays(), n_features=2).predict_one([9.0, 0.5])
    with pytest.raises(ValueError, match="tuple of two labels"):
        _cforest().Forest(**_arrays(), n_features=2, classes=[False, True])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"left": np.array([0, -1, -1, -1])}, "not after its parent"),
        ({"right": np.array([3, -1, -1, -1])}, "outside its tree"),
        ({"left": np.array([1, 2, -1, -1])}, "exactly one child"),
        ({"feature": np.array([2, -2, -2, -2])}, "feature out of range"),
        ({"offsets": np.array([0, 3, 5])}, "do not cover"),
        ({"offsets": np.array([0, 3, 3, 4])}, "do not cover"),
        ({"p1": np.array([0.0, 0.0, 0.75])}, "differ in length"),
        ({"left": np.array([1, -1, -1, -1], dtype=np.int32)}, "left must be a 1-d array of int64"),
        ({"p0": np.array([0, 1, 0, 0])}, "p0 must be a 1-d array of float64"),
    ],
)
def test_the_compiled_walk_refuses_a_malformed_forest(change, message) -> None:
    with pytest.raises(ValueError, match=message):
        _cforest().Forest(**{**_arrays(), **change}, n_features=2)


def test_the_environment_variable_turns_the_compiled_walk_off(monkeypatch) -> None:
    _cforest()
    forest, _ = _forest(5, n_estimators=3, max_depth=4)
    monkeypatch.setenv(compiled.VARIABLE, "python")
    assert FastForest(compile_forest(forest)).compiled is None
    monkeypatch.delenv(compiled.VARIABLE)
    assert FastForest(compile_forest(forest)).compiled is not None


def test_classified_replays_are_identical_with_and_without_the_compiled_parts(
    kth_workload, tmp_path, monkeypatch
) -> None:
    """The whole replay, trained forests included: every result file byte for byte, and
    run.json names what ran."""
    _cforest()
    from batsched_ml.cli import main
    from tests.conftest import workload_head

    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_head(kth_workload, 3000)))
    from batsched_ml.results.runfolder import code_identity

    for name, value in (("compiled", ""), ("python", "python")):
        monkeypatch.setenv(compiled.VARIABLE, value)
        code_identity.cache_clear()  # (cached per process: the variable is read at start)
        command = ["replay", str(path), "-q", "--variant", "classification-idempotent"]
        assert main([*command, "--trees", "8", "-o", str(tmp_path / name)]) == 0
    for file in ("jobs.csv", "classification.csv", "weekly_quality.csv"):
        assert (tmp_path / "compiled" / file).read_bytes() == (
            tmp_path / "python" / file
        ).read_bytes()
    codes = [
        json.loads((tmp_path / n / "run.json").read_text())["code"] for n in ("compiled", "python")
    ]
    assert [c["forest"] for c in codes] == ["compiled", "python"]
    assert [c["grow"] for c in codes] == ["compiled", "python"]  # scikit-learn grew the trees
    assert codes[0]["source_sha256"] != codes[1]["source_sha256"]
    code_identity.cache_clear()


def test_an_install_of_this_checkout_builds_the_compiled_walk() -> None:
    """``pip install -e .`` (CI's install) compiles the walk into this tree, as the kernel."""
    from tests.test_sim_kernel import test_an_install_of_this_checkout_builds_the_compiled_kernel

    test_an_install_of_this_checkout_builds_the_compiled_kernel()  # skips unless it applies
    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        pytest.skip("no C compiler")
    assert _cforest() is not None
