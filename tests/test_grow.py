"""The compiled grower (``batsched_ml/predict/_cgrow.c``, :mod:`batsched_ml.predict.grow`) grows
scikit-learn's own forest: every array of every tree, the importances and the compiled forest
equal those of ``RandomForestClassifier.fit`` with the same parameters, on data made to reach
the corners of scikit-learn's split search (ties, values closer than its 1e-7, constant
features, -0.0, a bootstrap sample without a class, the sort path and the bin path)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from batsched_ml import compiled
from batsched_ml.predict import grow
from batsched_ml.predict.bootstrap_rows import scikit_learn_forest
from batsched_ml.predict.forest import ForestParams, compile_forest, train_forest
from tests.test_forest_fit import job_like

SOURCE = Path(__file__).resolve().parents[1] / "batsched_ml" / "predict" / "_cgrow.c"


def _cgrow():
    """The compiled grower built from this source, or a skip (no compiler at install)."""
    module = grow.grower()
    if module is None:
        pytest.skip("the compiled grower is not built in this install (or is turned off)")
    assert compiled.source_digest(SOURCE) == module.SOURCE_SHA256
    return module


def assert_grown_as_scikit_learn(x: np.ndarray, y: np.ndarray, params: ForestParams) -> None:
    grown = grow.grow_forest(x, y, params)
    assert grown is not None
    theirs = scikit_learn_forest(params).fit(x, y)
    assert len(grown.trees) == len(theirs.estimators_) == params.n_estimators
    for mine, estimator in zip(grown.trees, theirs.estimators_, strict=True):
        reference = estimator.tree_
        assert mine.node_count == reference.node_count
        pairs = {
            "left": reference.children_left,
            "right": reference.children_right,
            "feature": reference.feature,
            "threshold": reference.threshold,
            "impurity": reference.impurity,
            "n_node_samples": reference.n_node_samples,
            "weighted_n_node_samples": reference.weighted_n_node_samples,
            "value": reference.value[:, 0, :],
        }
        for name, expected in pairs.items():
            assert np.array_equal(getattr(mine, name), expected), name
        inner = mine.left != -1  # (a leaf's is whatever scikit-learn's memory held)
        assert np.array_equal(
            mine.missing_go_to_left[inner], reference.missing_go_to_left[inner].astype(np.uint8)
        )
    assert np.array_equal(grown.feature_importances(), theirs.feature_importances_)
    # the trees' nodes taken together give each tree's own importances, bit for bit
    every = [t for t in grown.trees if t.node_count > 1]
    rows = grow._importances_of(every, grown.n_features)
    for row, tree in zip(rows, every, strict=True):
        assert row.tobytes() == tree.feature_importances(grown.n_features).tobytes()
    trained = train_forest(x, y, params)
    assert trained.predictor is not None and trained.importances is not None
    expected_arrays = compile_forest(theirs)
    for key, value in trained.predictor.arrays.items():
        assert value.dtype == expected_arrays[key].dtype, key
        assert np.array_equal(value, expected_arrays[key]), key
    assert np.array_equal(trained.importances, theirs.feature_importances_)


@pytest.mark.parametrize(
    "params",
    [
        ForestParams(n_estimators=10),  # the default set-up
        ForestParams(n_estimators=6, max_samples=None, n_jobs=1),
        ForestParams(n_estimators=6, max_samples=0.1, min_samples_leaf=1, max_depth=None),
        ForestParams(n_estimators=6, max_features=0.5, min_samples_leaf=3, max_depth=6),
        ForestParams(n_estimators=5, max_features="log2", random_state=7, min_samples_leaf=2),
    ],
)
def test_the_same_forest_as_scikit_learn(params: ForestParams) -> None:
    _cgrow()
    x, y = job_like(4000, params.n_estimators + params.min_samples_leaf)
    assert_grown_as_scikit_learn(x, y, params)


def test_ties_closer_than_scikit_learns_threshold() -> None:
    """Around 0.5 float32 values are 6e-8 apart: scikit-learn never splits between values
    closer than 1e-7 (in float32 arithmetic), so chains of them are one value to it; around 1
    they are 1.2e-7 apart and split. -0.0 and 0.0 are equal."""
    _cgrow()
    rng = np.random.default_rng(11)
    n = 3000
    steps = rng.integers(0, 6, n)
    half = np.float32(0.5) + steps.astype(np.float32) * np.float32(2**-24)  # 6e-8 apart
    one = np.float32(1.0) + steps.astype(np.float32) * np.float32(2**-23)  # 1.2e-7 apart
    signed_zero = np.where(rng.random(n) < 0.5, np.float32(-0.0), np.float32(0.0))
    signed_zero[rng.random(n) < 0.3] = 1.0
    x = np.column_stack([half, one, signed_zero, rng.normal(size=n)]).astype(np.float32)
    y = (steps % 2 == 0) ^ (rng.random(n) < 0.1)
    assert_grown_as_scikit_learn(x, y, ForestParams(n_estimators=8, min_samples_leaf=1))
    grown = grow.grow_forest(x, y, ForestParams(n_estimators=8, min_samples_leaf=1))
    assert grown is not None
    used = np.concatenate([t.feature[t.left != -1] for t in grown.trees])
    assert {0, 1, 3} <= set(used.tolist())  # the tied columns do split


def test_constant_features_and_a_rare_class() -> None:
    """Columns constant overall or within many nodes (scikit-learn's bookkeeping of known
    constants), and a class so rare that some bootstrap samples miss it."""
    _cgrow()
    rng = np.random.default_rng(12)
    n = 2000
    x = np.column_stack(
        [
            np.full(n, 3.0),
            rng.integers(0, 2, n),
            np.where(rng.random(n) < 0.02, 1.0, 0.0),
            rng.integers(0, 4, n),
            np.full(n, -1.0),
            rng.normal(size=n),
        ]
    ).astype(np.float32)
    y = np.zeros(n, dtype=bool)
    y[rng.choice(n, 8, replace=False)] = True
    params = ForestParams(n_estimators=20, max_samples=0.05, min_samples_leaf=1, n_jobs=1)
    assert_grown_as_scikit_learn(x, y, params)


def test_many_distinct_values_take_the_sort_path() -> None:
    """A column with far more distinct values than a node has samples is sorted (radix) rather
    than binned: both paths reached, same trees."""
    _cgrow()
    rng = np.random.default_rng(13)
    n = 6000
    pair = rng.integers(0, 4000, n)  # 8,000 values 6e-8 apart: ties within pairs only
    near = np.float32(0.5) + (2 * pair + rng.integers(0, 2, n)).astype(np.float32) * 2**-24
    x = np.column_stack(
        [rng.normal(size=n) * 1e6, rng.integers(0, 3, n), rng.exponential(1.0, n) - 1e-30, near]
    ).astype(np.float32)
    y = x[:, 0] + 2e5 * x[:, 1] + rng.normal(scale=5e5, size=n) > 0
    y ^= pair % 2 == 0
    assert_grown_as_scikit_learn(x, y, ForestParams(n_estimators=6, min_samples_leaf=1))


def test_rank_is_numpys_unique() -> None:
    module = _cgrow()
    rng = np.random.default_rng(14)
    x = rng.normal(size=(5000, 4)).astype(np.float32)
    x[:, 1] = np.round(x[:, 1])
    x[::7, 1] = -0.0
    x[:, 2] = np.float32(3.0)
    x[:, 3] = np.float32(3e38) * np.sign(x[:, 3])
    compiled_ranks = grow.ranked(x, module)
    for mine, reference in zip(compiled_ranks, grow.ranked(x), strict=True):
        assert mine.dtype == reference.dtype and np.array_equal(mine, reference)
    with ThreadPoolExecutor(3) as pool:  # columns split among threads: the same arrays
        for parts in (2, 3, 4):
            split = grow.ranked(x, module, pool, parts)
            for mine, reference in zip(split, compiled_ranks, strict=True):
                assert mine.dtype == reference.dtype and np.array_equal(mine, reference)
    sizes = np.diff(compiled_ranks[2])
    assert sizes[2] == 1 and sizes[3] == 2  # a constant column; two signed magnitudes
    assert 0.0 in compiled_ranks[1][compiled_ranks[2][1] : compiled_ranks[2][2]]


def test_rank_finds_the_distinct_values_by_hashing_or_by_sorting_the_rows() -> None:
    """Columns with a few, some thousands, and too many distinct values for the compiled rank's
    table (more than a quarter of the rows, or than 2**15): the hashed and the sorted paths,
    and the table's growth, give numpy.unique's arrays."""
    module = _cgrow()
    rng = np.random.default_rng(15)
    n = 160_000
    x = np.empty((n, 5), dtype=np.float32)
    x[:, 0] = rng.integers(0, 3, n)  # 3 values
    x[:, 1] = rng.integers(-3000, 3000, n) / np.float32(7.0)  # 6,000: the table grows
    x[:, 2] = rng.permutation(np.arange(n) % 36_000)  # 36,000 values: beyond the table
    x[:, 3] = rng.normal(size=n)  # every row its own value: the rows sorted
    x[:, 4] = np.where(rng.random(n) < 0.5, -0.0, 0.0)  # one value, two signs
    reference = grow.ranked(x)
    for mine, expected in zip(grow.ranked(x, module), reference, strict=True):
        assert mine.dtype == expected.dtype and np.array_equal(mine, expected)
    assert np.diff(reference[2]).tolist()[:3] == [3, 6000, 36_000]
    assert reference[1][-1] == 0.0 and not np.signbit(reference[1][-1])
    one = np.empty((1, n), dtype=np.int32)
    values = np.empty(n, dtype=np.float32)
    offsets = np.empty(2, dtype=np.int64)
    module.rank(x, one, values, offsets, 1)  # one column, read in place
    assert np.array_equal(one[0], reference[0][1])
    with pytest.raises(ValueError, match="inconsistent shapes"):
        module.rank(x, one, values, offsets, 5)


def test_what_it_does_not_grow_is_left_to_scikit_learn(monkeypatch: pytest.MonkeyPatch) -> None:
    _cgrow()
    x, y = job_like(500, 15)
    bad = x.copy()
    bad[3, 2] = np.nan
    assert grow.grow_forest(bad, y, ForestParams(n_estimators=3)) is None
    assert grow.grow_forest(x, np.ones(len(y), dtype=bool), ForestParams(n_estimators=3)) is None
    for unusual in (
        {"max_samples": 1.5},  # scikit-learn grows or refuses these, as it always did
        {"max_depth": 0},
        {"max_features": 0.0},
        {"min_samples_leaf": 0},
        {"random_state": None},
    ):
        # ForestParams refuses them when made (tests/test_fail_closed.py): set past its check,
        # the grower still leaves them alone
        params = ForestParams(n_estimators=3)
        for name, value in unusual.items():
            object.__setattr__(params, name, value)
        assert not grow.grows(params, len(y)) and grow.grow_forest(x, y, params) is None
    assert not grow.grows(ForestParams(max_samples=None), 2**21)  # the packed sums' bound
    assert grow.grows(ForestParams(max_samples=None), 2**21 - 2)
    params = ForestParams(n_estimators=3)
    object.__setattr__(params, "max_samples", 1.5)
    assert train_forest(x, y, params).predictor is not None
    monkeypatch.setenv(compiled.VARIABLE, "python")
    assert grow.grow_forest(x, y, ForestParams(n_estimators=3)) is None


def test_the_grower_checks_its_arrays() -> None:
    module = _cgrow()
    x, y = job_like(300, 16)
    ranks, values, offsets = grow.ranked(x, module)
    tree = grow._empty_tree(64)
    arguments = {
        "ranks": ranks,
        "values": values,
        "offsets": offsets,
        "y": y.astype(np.uint8),
        "indices": np.arange(len(y)),
        **grow._outputs(tree),
        "max_features": 4,
        "min_samples_leaf": 5,
        "min_samples_split": 10,
        "max_depth": 3,
        "seed": 1,
    }
    assert module.grow(**arguments) > 1
    with pytest.raises(ValueError, match="ranks"):
        module.grow(**{**arguments, "ranks": ranks.astype(np.int64)})
    with pytest.raises(ValueError, match="inconsistent"):
        module.grow(**{**arguments, "y": np.ones(len(y) - 1, dtype=np.uint8)})
    with pytest.raises(ValueError, match="indices"):
        module.grow(**{**arguments, "indices": np.array([0, len(y)])})  # a row beyond the last
    broken = ranks.copy()
    broken[0, 0] = 10**6  # a rank beyond its feature's values
    with pytest.raises(ValueError, match="inconsistent"):
        module.grow(**{**arguments, "ranks": broken})
    with pytest.raises(MemoryError, match="capacity"):
        module.grow(**{**arguments, **grow._outputs(grow._empty_tree(2)), "max_depth": 10})
    with pytest.raises(ValueError, match="inconsistent"):
        module.grow(**{**arguments, "indices": np.zeros(0, dtype=np.int64)})


def test_train_forest_grows_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled grower is what train_forest uses when it is built: scikit-learn's fit is
    not called."""
    _cgrow()

    def refuse(*args, **kwargs):
        raise AssertionError("scikit-learn's fit was called")

    monkeypatch.setattr(RandomForestClassifier, "fit", refuse)
    x, y = job_like(1200, 17)
    trained = train_forest(x, y, ForestParams(n_estimators=4))
    assert trained.predictor is not None and len(trained.predictor.arrays["offsets"]) == 5


def test_growing_imports_no_scikit_learn() -> None:
    """A process that trains with the compiled grower never imports scikit-learn (1.5 s with
    SciPy, which the side trainer would spend before its first answer)."""
    _cgrow()
    code = (
        "import sys, numpy as np\n"
        "from batsched_ml.predict.forest import ForestParams, train_forest\n"
        "x = np.random.default_rng(0).normal(size=(500, 20)).astype(np.float32)\n"
        "trained = train_forest(x, x[:, 0] > 0, ForestParams(n_estimators=3))\n"
        "assert trained.predictor is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_install_of_this_checkout_builds_the_compiled_grower() -> None:
    """``pip install -e .`` (CI's install) compiles the grower into this tree, as the kernel:
    the tests above must not all have skipped."""
    from tests.test_sim_kernel import test_an_install_of_this_checkout_builds_the_compiled_kernel

    test_an_install_of_this_checkout_builds_the_compiled_kernel()  # skips unless it applies
    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        pytest.skip("no C compiler")
    assert importlib.util.find_spec(grow.NAME) is not None, "pip install -e . did not build it"
    assert grow.grower() is not None


def test_the_grower_s_threads_are_kept_and_a_forked_child_gets_its_own() -> None:
    import os

    pool = grow.thread_pool(2)
    assert grow.thread_pool(2) is pool and pool.submit(sum, [1, 2]).result() == 3
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child: the parent's pool (whose threads it has not) is forgotten
        try:
            fresh = grow.thread_pool(2)
            ok = fresh is not pool and fresh.submit(sum, [3, 4]).result(timeout=10) == 7
            os.write(writer, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(writer)
    answer = os.read(reader, 1)
    os.waitpid(child, 0)
    os.close(reader)
    assert answer == b"1"
    assert grow.thread_pool(2) is pool  # the parent's own is kept


def test_a_bootstrap_sample_is_drawn_once_and_is_the_draw() -> None:
    """Kept samples are scikit-learn's draw, read-only, and the same object for the next
    forest of the same size; another size draws again."""
    grow._DRAWN.clear()
    first = grow.bootstrap_indices(1234, 500, 125)
    expected = np.random.RandomState(1234).randint(0, 500, 125)
    assert first.dtype == np.int64 and np.array_equal(first, expected)
    assert not first.flags.writeable
    assert grow.bootstrap_indices(1234, 500, 125) is first
    other = grow.bootstrap_indices(1234, 400, 100)
    assert np.array_equal(other, np.random.RandomState(1234).randint(0, 400, 100))
    assert grow.bootstrap_indices(1234, 500, 125) is not first  # only the last size kept
    x, y = job_like(600, 16)
    params = ForestParams(n_estimators=5, n_jobs=2)
    cold = grow.grow_forest(x, y, params)
    warm = grow.grow_forest(x, y, params)
    assert cold is not None and warm is not None
    for a, b in zip(cold.trees, warm.trees, strict=True):
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)


def test_boolean_labels_are_encoded_as_numpy_unique_encodes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The labels of a week (booleans of both kinds) are encoded without np.unique's sort: the
    same classes and codes it gives, which the grower then receives."""
    module = _cgrow()
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def grown(_module, _x, encoded, classes, *_rest):
        seen.append((encoded, classes))
        return None

    monkeypatch.setattr(grow, "_grown", grown)
    x, y = job_like(500, 3)
    assert y.dtype == np.bool_ and y.any() and not y.all()
    grow.grow_forest(x, y, ForestParams(n_estimators=2))
    classes, encoded = np.unique(y, return_inverse=True)
    assert seen[0][1].tobytes() == classes.tobytes() and seen[0][1].dtype == classes.dtype
    assert seen[0][0].tobytes() == encoded.tobytes() and seen[0][0].dtype == encoded.dtype
    assert module is grow.grower()
