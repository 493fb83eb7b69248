"""The weekly Random Forest: training set-up, and fast prediction for one job at a time.

A scheduler classifies each job when it is submitted, one job per call. scikit-learn's
``predict_proba`` costs about 2 ms per call for 50 trees (input validation and parallel dispatch
per call), which is 400 s over the 200,000 jobs of HPC2N. :class:`FastForest` walks the fitted
trees itself and averages their class probabilities exactly as
``RandomForestClassifier.predict_proba`` does, in tens of microseconds. A test checks both agree.

Hyper-parameters (:class:`ForestParams`), chosen with ``benchmarks/training_setup.py`` on HPC2N:
see the README's classification section for the figures.

scikit-learn is imported only by :func:`train_forest` (through :mod:`batsched_ml.predict.grow`
and :mod:`batsched_ml.predict.bootstrap_rows`, which grow the same trees as scikit-learn's
``RandomForestClassifier.fit``, faster): importing it (and SciPy with it) takes
about 1.5 s, which a replay that trains nothing (the base variant, or a scheduler that gets its
models from the side trainer) need not wait for.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from batsched_ml.compiled import compiled_module
from batsched_ml.predict.grow import grow_forest
from batsched_ml.predict.params import ForestParams

if TYPE_CHECKING:
    from sklearn.ensemble import RandomForestClassifier

__all__ = ["ForestParams"]


#: The arrays of a compiled forest (:func:`compile_forest`), with their dtypes.
COMPILED_ARRAYS: dict[str, str] = {
    "classes": "b",  # the two class labels, as scikit-learn orders them (False, True)
    "n_features": "i",  # a 0-d array
    "offsets": "i",  # tree t's nodes are offsets[t]:offsets[t + 1]
    "left": "i",  # per node: left child, local to its tree, -1 for a leaf
    "right": "i",
    "feature": "i",
    "threshold": "f",
    "p0": "f",  # per node: the normalised class probabilities of its leaf counts
    "p1": "f",
}


def compile_forest(forest: RandomForestClassifier) -> dict[str, np.ndarray]:
    """The fitted scikit-learn forest as flat numeric arrays: exactly what :class:`FastForest`
    executes (:func:`compile_trees` of its trees).

    This, not the scikit-learn object, is what the model store saves: a skops file of plain
    arrays that needs no type beyond skops's defaults to load, reads in about a millisecond
    instead of 40 ms for the 41 objects of a 40-tree forest, and whose sha256 certifies the
    very model the scheduler runs."""
    trees = [
        (t.children_left, t.children_right, t.feature, t.threshold, t.value[:, 0, :])
        for t in (estimator.tree_ for estimator in forest.estimators_)
    ]
    return compile_trees(forest.classes_, forest.n_features_in_, trees)


def compile_trees(
    classes: Any, n_features: int, trees: Sequence[tuple[np.ndarray, ...]]
) -> dict[str, np.ndarray]:
    """The arrays of :data:`COMPILED_ARRAYS` from scikit-learn's per-tree arrays ``(children_left,
    children_right, feature, threshold, value)``, ``value`` of shape ``(nodes, 2)``."""
    if len(classes) != 2:
        raise ValueError("FastForest handles binary classifiers only")
    sizes = [len(tree[0]) for tree in trees]
    value = np.concatenate([tree[4] for tree in trees])
    proba = value / value.sum(axis=1, keepdims=True)
    return {
        "classes": np.asarray(classes, dtype=bool),
        "n_features": np.array(n_features, dtype=np.int64),
        "offsets": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        "left": np.concatenate([tree[0] for tree in trees]).astype(np.int64),
        "right": np.concatenate([tree[1] for tree in trees]).astype(np.int64),
        "feature": np.concatenate([tree[2] for tree in trees]).astype(np.int64),
        "threshold": np.concatenate([tree[3] for tree in trees]).astype(np.float64),
        "p0": np.ascontiguousarray(proba[:, 0]),
        "p1": np.ascontiguousarray(proba[:, 1]),
    }


def check_compiled(arrays: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless ``arrays`` is a forest :class:`FastForest` can walk safely:
    the right arrays and dtypes, and every tree a proper binary tree (both children or none,
    children after their parent, so every walk ends at a leaf of its own tree)."""
    if not isinstance(arrays, dict) or set(arrays) != set(COMPILED_ARRAYS):
        names = sorted(arrays) if isinstance(arrays, dict) else type(arrays).__name__
        raise ValueError(f"expected the arrays {sorted(COMPILED_ARRAYS)}, got {names}")
    for name, kind in COMPILED_ARRAYS.items():
        value = arrays[name]
        if not isinstance(value, np.ndarray) or value.dtype.kind != kind:
            raise ValueError(f"array {name!r} must be a numpy array of kind {kind!r}")
        if value.ndim != (0 if name == "n_features" else 1):
            raise ValueError(f"array {name!r} has {value.ndim} dimensions")
    if arrays["classes"].shape != (2,):
        raise ValueError("a binary forest has two classes")
    n_features = int(arrays["n_features"])
    offsets = arrays["offsets"]
    n = len(arrays["left"])
    if any(len(arrays[k]) != n for k in ("right", "feature", "threshold", "p0", "p1")):
        raise ValueError("the per-node arrays differ in length")
    if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) < 1).any():
        raise ValueError("the tree offsets do not cover the nodes")
    sizes = np.diff(offsets)
    local = np.arange(n) - np.repeat(offsets[:-1], sizes)
    size = np.repeat(sizes, sizes)
    left, right = arrays["left"], arrays["right"]
    leaf = left == -1
    if (leaf != (right == -1)).any():
        raise ValueError("a node has exactly one child")
    inner = ~leaf
    for child in (left, right):
        if ((child[inner] <= local[inner]) | (child[inner] >= size[inner])).any():
            raise ValueError("a child is outside its tree or not after its parent")
    feature = arrays["feature"][inner]
    if ((feature < 0) | (feature >= n_features)).any():
        raise ValueError("a split uses a feature out of range")
    if not np.isfinite(arrays["threshold"][inner]).all():
        raise ValueError("a split threshold is not finite")
    p0, p1 = arrays["p0"][leaf], arrays["p1"][leaf]
    if not (np.isfinite(p0).all() and np.isfinite(p1).all()):
        raise ValueError("a leaf probability is not finite")


class FastForest:
    """Prediction of a fitted binary ``RandomForestClassifier``, one row at a time.

    Built from :func:`compile_forest`'s arrays. Each tree is turned into a Python list of node
    tuples on the first prediction, ``(feature, threshold, left, right)`` for a split and
    ``(-1, p0, -1, p1)`` for a leaf (its two class probabilities), and walked in plain Python:
    for one row that beats any numpy call, and one tuple per node beats four lists. The
    arithmetic is scikit-learn's: the row is rounded to float32 as ``predict`` does, each tree's
    leaf counts are normalised, the per-class sums are taken in tree order and the larger class
    wins, ties to the first.
    """

    def __init__(self, arrays: dict[str, np.ndarray], *, compiled: bool = True) -> None:
        self.arrays = arrays
        self.classes = arrays["classes"].tolist()
        self.n_features = int(arrays["n_features"])
        self._trees: list[list[tuple[Any, Any, Any, Any]]] | None = None
        #: the compiled walk (``_cforest.c``, the same arithmetic) when it is built and not
        #: turned off (:mod:`batsched_ml.compiled`); ``compiled=False``: this module's walk
        self.compiled = compiled_walk(arrays, tuple(self.classes)) if compiled else None
        if self.compiled is not None:  # the compiled walk in the methods' place: no frame
            self.proba = self.compiled.proba  # type: ignore[method-assign]
            self.predict_one = self.compiled.predict_one  # type: ignore[method-assign]

    @classmethod
    def from_forest(cls, forest: RandomForestClassifier) -> FastForest:
        return cls(compile_forest(forest))

    @property
    def trees(self) -> list[list[tuple[Any, Any, Any, Any]]]:
        if self._trees is None:
            a = self.arrays
            leaf = a["left"] == -1
            feature = np.where(leaf, -1, a["feature"]).tolist()
            threshold = np.where(leaf, a["p0"], a["threshold"]).tolist()
            right = a["right"].astype(object)  # Python ints, and a leaf's p1 as a Python float
            right[leaf] = a["p1"][leaf].astype(object)
            nodes = list(zip(feature, threshold, a["left"].tolist(), right.tolist(), strict=True))
            bounds = a["offsets"].tolist()
            self._trees = [nodes[start:end] for start, end in itertools.pairwise(bounds)]
        return self._trees

    def proba(self, row: list[float] | np.ndarray) -> tuple[float, float]:
        """Class probabilities of one sample, in the order of ``classes``. (The reference: an
        instance with the compiled walk has it in this method's place.)"""
        x = np.asarray(row, dtype=np.float32).tolist()
        first = second = 0.0
        trees = self.trees
        for nodes in trees:
            feature, threshold, left, right = nodes[0]
            while feature != -1:
                feature, threshold, left, right = (
                    nodes[left] if x[feature] <= threshold else nodes[right]
                )
            first += threshold  # a leaf's p0
            second += right  # and p1
        count = len(trees)
        return first / count, second / count

    def predict_one(self, row: list[float] | np.ndarray) -> Any:
        """The predicted class (ties go to the first class, as ``predict`` does). (The
        reference: an instance with the compiled walk has its ``predict_one`` here.)"""
        first, second = self.proba(row)
        return self.classes[1] if second > first else self.classes[0]

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`predict_one` of each row: ``RandomForestClassifier.predict``. The compiled
        walk takes the rows at once, rounded to float32 first (as :meth:`proba` rounds each)."""
        if self.compiled is None:
            return np.array([self.predict_one(row) for row in rows], dtype=bool)
        x = np.ascontiguousarray(rows, dtype=np.float32).reshape(len(rows), self.n_features)
        won = np.empty(len(x), dtype=np.uint8)
        self.compiled.winners(x, won)
        return np.asarray(self.classes, dtype=bool)[won]


def compiled_walk(arrays: dict[str, np.ndarray], classes: tuple[Any, Any] | None = None) -> Any:
    """``_cforest.Forest`` over ``arrays`` (copied, as int64 and float64, and checked again in
    C), answering ``predict_one`` with ``classes``, or None when the compiled part is not there
    or turned off."""
    module = compiled_module(_CFOREST, Path(__file__).with_name("_cforest.c"))
    if module is None:
        return None
    as_int = {k: np.ascontiguousarray(arrays[k], dtype=np.int64) for k in _INT_ARRAYS}
    as_float = {k: np.ascontiguousarray(arrays[k], dtype=np.float64) for k in _FLOAT_ARRAYS}
    return module.Forest(
        **as_int, **as_float, n_features=int(arrays["n_features"]), classes=classes
    )


_CFOREST = "batsched_ml.predict._cforest"
_INT_ARRAYS = ("offsets", "left", "right", "feature")
_FLOAT_ARRAYS = ("threshold", "p0", "p1")


@dataclass
class TrainedForest:
    predictor: FastForest | None
    importances: np.ndarray | None
    train_seconds: float
    n_train: int


def train_forest(x: np.ndarray, y: np.ndarray, params: ForestParams) -> TrainedForest:
    """Fit on ``x`` (float32 rows) and boolean labels ``y`` (True = small). Too few samples, or
    a single class, give no predictor (every job then counts as large).

    The forest is scikit-learn's ``RandomForestClassifier`` with ``params``, grown by the
    compiled grower (:mod:`batsched_ml.predict.grow`) when it is built, else by scikit-learn
    itself (:mod:`batsched_ml.predict.bootstrap_rows`): the same trees either way."""
    if params.n_estimators == 0 or len(y) < params.min_train or y.all() or not y.any():
        return TrainedForest(None, None, 0.0, len(y))

    started = time.perf_counter()
    grown = grow_forest(x, y, params)
    if grown is not None:
        trees = [(t.left, t.right, t.feature, t.threshold, t.value) for t in grown.trees]
        arrays = compile_trees(grown.classes, grown.n_features, trees)
        importances = grown.feature_importances()
    else:
        from batsched_ml.predict.bootstrap_rows import forest_classifier

        forest = forest_classifier(params).fit(x, y)  # trees grown on their rows only
        arrays = compile_forest(forest)
        importances = forest.feature_importances_.copy()
    return TrainedForest(FastForest(arrays), importances, time.perf_counter() - started, len(y))
