"""The weekly forest's trees grown on their bootstrap rows only
(:mod:`batsched_ml.predict.bootstrap_rows`) are scikit-learn's own, node for node: every array
of every tree, the probabilities, the importances and the compiled forest equal those of
``RandomForestClassifier.fit`` with the same parameters."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from batsched_ml import compiled
from batsched_ml.predict.bootstrap_rows import (
    BootstrapRowsTree,
    forest_classifier,
    scikit_learn_forest,
)
from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import ForestParams, compile_forest, train_forest


def job_like(n: int, seed: int, small_share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Rows shaped like the scheduler's features: integers with many ties, a few continuous
    columns, and a label that depends on them with noise."""
    rng = np.random.default_rng(seed)
    columns = []
    for i in range(len(FEATURE_NAMES)):
        if i % 3 == 0:
            columns.append(rng.integers(0, 8, n).astype(float))  # heavy ties
        elif i % 3 == 1:
            columns.append(np.round(rng.lognormal(6, 2, n)))
        else:
            columns.append(rng.normal(size=n))
    x = np.ascontiguousarray(np.column_stack(columns), dtype=np.float32)
    score = x[:, 0] + np.log1p(x[:, 1]) / 3 + rng.normal(scale=1.0, size=n)
    y = score < np.quantile(score, small_share)
    return x, y


def assert_same_forest(ours: RandomForestClassifier, theirs: RandomForestClassifier) -> None:
    assert len(ours.estimators_) == len(theirs.estimators_)
    for mine, reference in zip(ours.estimators_, theirs.estimators_, strict=True):
        assert isinstance(mine, BootstrapRowsTree)
        assert type(reference) is DecisionTreeClassifier  # the reference is scikit-learn's own
        a, b = mine.tree_.__getstate__(), reference.tree_.__getstate__()
        assert a.keys() == b.keys()
        for key in a:
            assert np.array_equal(a[key], b[key]), key
        assert np.array_equal(mine.classes_, reference.classes_)
        assert (mine.n_classes_, mine.max_features_) == (
            reference.n_classes_,
            reference.max_features_,
        )
    assert np.array_equal(ours.classes_, theirs.classes_)
    assert np.array_equal(ours.feature_importances_, theirs.feature_importances_)
    ca, cb = compile_forest(ours), compile_forest(theirs)
    assert ca.keys() == cb.keys()
    for key in ca:
        assert np.array_equal(ca[key], cb[key]), key


@pytest.mark.parametrize(
    ("n", "seed", "max_samples", "n_jobs"),
    [(3000, 1, 0.25, 2), (3000, 2, None, 1), (5000, 3, 0.1, 2), (800, 4, 0.5, 1)],
)
def test_the_same_trees_as_scikit_learn(
    n: int, seed: int, max_samples: float | None, n_jobs: int
) -> None:
    x, y = job_like(n, seed)
    params = ForestParams(n_estimators=12, max_samples=max_samples, n_jobs=n_jobs)
    ours = forest_classifier(params).fit(x, y)
    theirs = scikit_learn_forest(params).fit(x, y)
    assert_same_forest(ours, theirs)
    probe, _ = job_like(500, seed + 100)
    # one thread: with two, scikit-learn adds the trees' probabilities in the order the threads
    # finish, and the last bits of its own results vary from call to call
    ours.n_jobs = theirs.n_jobs = 1
    assert np.array_equal(ours.predict_proba(probe), theirs.predict_proba(probe))


def test_the_trees_grow_on_their_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The faster path is the one taken: each tree sees only its bootstrap rows."""
    grown_on: list[int] = []
    fit = DecisionTreeClassifier._fit

    def recording(self, X, *args, **kwargs):
        grown_on.append(X.shape[0])
        return fit(self, X, *args, **kwargs)

    monkeypatch.setattr(DecisionTreeClassifier, "_fit", recording)
    x, y = job_like(4000, 5)
    forest_classifier(ForestParams(n_estimators=10, max_samples=0.25, n_jobs=1)).fit(x, y)
    assert len(grown_on) == 10
    # 1,000 draws among 4,000 rows: about 880 distinct rows, never all
    assert all(700 < rows < 1000 for rows in grown_on), grown_on


def test_a_bootstrap_without_a_class_grows_on_all_rows() -> None:
    """A rare class that some bootstrap samples miss: those trees keep both classes (and so
    the same node values) by growing on all rows, as scikit-learn's do."""
    x, y = job_like(2000, 6, small_share=0.004)  # 8 small jobs among 2,000
    params = ForestParams(n_estimators=20, max_samples=0.05, min_samples_leaf=1, n_jobs=1)
    ours = forest_classifier(params).fit(x, y)
    theirs = scikit_learn_forest(params).fit(x, y)
    missed = sum(
        not y[np.flatnonzero(np.random.RandomState(t.random_state).randint(0, 2000, 100))].any()
        for t in theirs.estimators_
    )
    assert missed >= 3  # the case is exercised
    assert_same_forest(ours, theirs)


def test_train_forest_uses_it_without_the_compiled_grower(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled grower (tests/test_grow.py), train_forest fits this forest."""
    monkeypatch.setenv(compiled.VARIABLE, "python")
    x, y = job_like(1500, 7)
    params = ForestParams(n_estimators=6)
    fitted: list[RandomForestClassifier] = []
    fit = RandomForestClassifier.fit

    def recording(self, *args, **kwargs):
        fitted.append(self)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(RandomForestClassifier, "fit", recording)
    trained = train_forest(x, y, params)
    assert trained.predictor is not None and trained.predictor.compiled is None
    assert len(fitted) == 1 and isinstance(fitted[0].estimator, BootstrapRowsTree)
    theirs = scikit_learn_forest(params).fit(x, y)
    assert_same_forest(fitted[0], theirs)
    reference = compile_forest(theirs)
    for key, value in trained.predictor.arrays.items():
        assert np.array_equal(value, reference[key]), key
    assert trained.importances is not None
    assert np.array_equal(trained.importances, theirs.feature_importances_)
