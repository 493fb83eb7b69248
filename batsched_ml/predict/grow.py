"""The weekly forest grown by the compiled grower (``_cgrow.c``): scikit-learn's trees, faster.

scikit-learn's ``RandomForestClassifier.fit`` sorts each node's samples on every drawn feature,
at every node of every tree: the 40 trees of an HPC2N week (50,000 jobs, a quarter drawn per
tree) take 0.2 to 0.4 s, and a replay trains about 180 such weeks. :func:`grow_forest` grows the
same forest from ranks instead: each feature of the week's training set is ranked once
(``_cgrow.rank``: ``numpy.unique``'s arrays, from a hash table of the column's distinct values,
of which a week holds 3 to a few thousand among 50,000 rows, or by sorting the rows where
there are more), and ``_cgrow.grow`` grows each
tree from the ranks, adding each node's class weights into one bin per rank and reading the
split positions off the bins in order (the file's comment says why that finds scikit-learn's
split, node for node).

Everything random is drawn as scikit-learn draws it, with the same numpy calls in the same order
(:func:`tree_seeds`, :func:`bootstrap_indices`, :func:`splitter_seed`: ``RandomForestClassifier.
fit``, ``_generate_sample_indices`` and the splitter's seed, transcribed). The feature
importances are computed with scikit-learn's expressions and numpy calls
(``compute_feature_importances``, then the forest's mean). ``tests/test_grow.py`` compares
every array of every tree, the importances and the compiled forest with scikit-learn's own fit
on constructed data (ties, constant features, values within 1e-7, -0.0, a bootstrap missing a
class), and ``benchmarks/bench_forest_fit.py`` on the weekly training sets of real traces.

:func:`grow_forest` returns None when the compiled part is not there (or is turned off) or
when the set-up is not one it grows (non-finite features, one class); the caller then uses
scikit-learn (:mod:`batsched_ml.predict.bootstrap_rows`), which gives the same forest.
This module does not import scikit-learn (1.5 s with SciPy): a side trainer that grows its
forests here answers its first request that much sooner.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from batsched_ml.compiled import compiled_module
from batsched_ml.predict.params import ForestParams

NAME = "batsched_ml.predict._cgrow"
SOURCE = Path(__file__).with_name("_cgrow.c")
#: scikit-learn's bounds: a tree's seed is below MAX_INT, its splitter's below RAND_R_MAX
MAX_INT = int(np.iinfo(np.int32).max)
RAND_R_MAX = 2_147_483_647


@dataclass
class Tree:
    """One grown tree: scikit-learn's ``Tree`` arrays (``children_left`` ... ``value``)."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    impurity: np.ndarray
    n_node_samples: np.ndarray
    weighted_n_node_samples: np.ndarray
    value: np.ndarray  # (nodes, 2): each node's class weights over its weight
    missing_go_to_left: np.ndarray

    @property
    def node_count(self) -> int:
        return len(self.left)

    def feature_importances(self, n_features: int) -> np.ndarray:
        """scikit-learn's ``Tree.compute_feature_importances()`` (normalised), same operations:
        the nodes' weighted impurity decreases summed per feature in node order, over the
        root's weight, over their sum."""
        importances = np.zeros(n_features)
        inner = np.flatnonzero(self.left != -1)
        left, right = self.left[inner], self.right[inner]
        wn, impurity = self.weighted_n_node_samples, self.impurity
        decrease = (
            wn[inner] * impurity[inner] - wn[left] * impurity[left] - wn[right] * impurity[right]
        )
        np.add.at(importances, self.feature[inner], decrease)
        importances /= wn[0]
        normalizer = np.sum(importances)
        if normalizer > 0.0:
            importances /= normalizer
        return importances


@dataclass
class GrownForest:
    classes: np.ndarray  # the two labels, as scikit-learn orders them
    n_features: int
    trees: list[Tree]

    def feature_importances(self) -> np.ndarray:
        """``RandomForestClassifier.feature_importances_``: the mean over the trees with more
        than a root, over its sum."""
        grown = [t for t in self.trees if t.node_count > 1]
        if not grown:
            return np.zeros(self.n_features, dtype=np.float64)
        every = _importances_of(grown, self.n_features)
        mean = np.mean(every, axis=0, dtype=np.float64)
        return np.asarray(mean / np.sum(mean))


def _importances_of(trees: list[Tree], n_features: int) -> np.ndarray:
    """:meth:`Tree.feature_importances` of each tree, one row a tree, with the trees' nodes
    taken together: the same operations in the same order (each tree's decreases added per
    feature in node order, ``np.bincount`` adding its weights in order as ``np.add.at`` does,
    then over the root's weight, then over the row's sum), without forty rounds of small numpy
    calls a week on the side trainer's answer (``tests/test_grow.py`` compares them)."""
    sizes = np.array([t.node_count for t in trees])
    starts = np.concatenate([[0], np.cumsum(sizes[:-1])])
    left = np.concatenate([t.left for t in trees])
    right = np.concatenate([t.right for t in trees])
    wn = np.concatenate([t.weighted_n_node_samples for t in trees])
    impurity = np.concatenate([t.impurity for t in trees])
    feature = np.concatenate([t.feature for t in trees])
    inner = np.flatnonzero(left != -1)
    tree_of = np.repeat(np.arange(len(trees)), sizes)[inner]
    left, right = left[inner] + starts[tree_of], right[inner] + starts[tree_of]
    decrease = wn[inner] * impurity[inner] - wn[left] * impurity[left] - wn[right] * impurity[right]
    sums = np.bincount(
        tree_of * n_features + feature[inner], weights=decrease, minlength=len(trees) * n_features
    )
    rows = np.asarray(sums, dtype=np.float64).reshape(len(trees), n_features)  # (no copy)
    rows /= wn[starts][:, np.newaxis]
    for row in rows:  # (each row's own sum, as one tree's)
        normalizer = np.sum(row)
        if normalizer > 0.0:
            row /= normalizer
    return rows


def grower() -> Any:
    """The compiled grower, or None (not built, built from another source, or turned off)."""
    return compiled_module(NAME, SOURCE)


def max_features_of(value: str | float | None, n_features: int) -> int:
    """``DecisionTreeClassifier``'s ``max_features_`` for ``max_features=value``."""
    if value == "sqrt":
        return max(1, int(np.sqrt(n_features)))
    if value == "log2":
        return max(1, int(np.log2(n_features)))
    if value is None:
        return n_features
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str):
        raise ValueError(f"max_features {value!r}")
    return max(1, int(value * n_features)) if value > 0.0 else 0


def ranked(
    x: np.ndarray, module: Any = None, pool: ThreadPoolExecutor | None = None, parts: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each column's distinct values, ascending (one float32 array, ``offsets`` apart), and each
    row's rank among them, as a ``(n_features, n_rows)`` int32 array (``x``: finite float32
    rows). The compiled grower's ``rank`` when given (its columns split in ``parts`` run by
    ``pool``'s threads, if any: it lets go of the GIL), else ``numpy.unique``: the same
    arrays."""
    n_rows, n_features = x.shape
    if module is not None:
        x = np.ascontiguousarray(x, dtype=np.float32)
        parts = max(1, min(parts if pool is not None else 1, n_features))
        ranks = np.empty((n_features, n_rows), dtype=np.int32)

        def rank_columns(columns: range) -> tuple[np.ndarray, np.ndarray]:
            # each part's threads read x where it is and write their rows of ranks: no copy
            # (a copy of a part's columns held the GIL: two threads took 0.9 times one's time)
            values = np.empty(len(columns) * n_rows, dtype=np.float32)
            offsets = np.empty(len(columns) + 1, dtype=np.int64)
            module.rank(x, ranks[columns.start : columns.stop], values, offsets, columns.start)
            return values[: offsets[-1]], offsets

        bounds = np.linspace(0, n_features, parts + 1).round().astype(int).tolist()
        groups = [range(a, b) for a, b in itertools.pairwise(bounds)]
        done = (
            list(pool.map(rank_columns, groups))
            if pool and parts > 1
            else [rank_columns(group) for group in groups]
        )
        starts = np.cumsum([0] + [offsets[-1] for _, offsets in done])
        return (
            ranks,
            np.concatenate([v for v, _ in done]),
            np.concatenate(
                [[0]] + [o[1:] + start for (_, o), start in zip(done, starts, strict=False)]
            ).astype(np.int64),
        )
    ranks = np.empty((n_features, n_rows), dtype=np.int32)
    columns: list[np.ndarray] = []
    for j in range(n_features):
        distinct, inverse = np.unique(x[:, j] + np.float32(0.0), return_inverse=True)
        ranks[j] = inverse
        columns.append(distinct)
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in columns])]).astype(np.int64)
    return ranks, np.concatenate(columns).astype(np.float32), offsets


def tree_seeds(random_state: int, n_estimators: int) -> list[int]:
    """Each tree's ``random_state``, as ``RandomForestClassifier.fit`` sets them: one
    ``randint(MAX_INT)`` per tree from ``RandomState(random_state)``."""
    state = np.random.RandomState(random_state)
    return [int(state.randint(MAX_INT)) for _ in range(n_estimators)]


def bootstrap_size(n_rows: int, max_samples: float | int | None) -> int:
    """scikit-learn's ``_get_n_samples_bootstrap`` without sample weights."""
    if max_samples is None:
        return n_rows
    if isinstance(max_samples, int | np.integer):
        return int(max_samples)
    return max(int(max_samples * n_rows), 1)


def seeded(seed: int) -> np.random.RandomState:
    """This thread's ``RandomState``, reseeded: the state of ``RandomState(seed)``, without the
    constructor's draw of fresh entropy from the system (a quarter of a millisecond, twice per
    tree, 40 trees a week)."""
    state: np.random.RandomState | None = getattr(_THREAD, "state", None)
    if state is None:
        state = _THREAD.state = np.random.RandomState(0)
    state.seed(seed)
    return state


_THREAD = threading.local()


def bootstrap_indices(seed: int, n_rows: int, size: int) -> np.ndarray:
    """A tree's bootstrap sample: ``_generate_sample_indices``,
    ``RandomState(seed).randint(0, n_rows, size)``. (The forest passes the tree each row's
    count as its weight; the grower counts them itself.)

    A function of its three arguments alone, so it is drawn once and kept (read-only) for the
    next forests of the same ``n_rows`` and ``size``: once the training window is full, every
    week's forest has the same seeds and sizes, and drawing its 40 samples again was about a
    tenth of a week's fit on full HPC2N (holding the GIL while the other thread grows)."""
    drawn = _DRAWN.get((n_rows, size))
    if drawn is None:
        drawn = {}
        _DRAWN.clear()  # only the last forest's size is kept
        _DRAWN[(n_rows, size)] = drawn
    indices = drawn.get(seed)
    if indices is None:
        indices = np.ascontiguousarray(seeded(seed).randint(0, n_rows, size), dtype=np.int64)
        indices.flags.writeable = False
        drawn[seed] = indices
    return indices


#: :func:`bootstrap_indices`' samples of the last ``(n_rows, size)``, by seed
_DRAWN: dict[tuple[int, int], dict[int, np.ndarray]] = {}


def splitter_seed(seed: int) -> int:
    """The seed of a tree's splitter (``rand_r_state``): the first draw of
    ``RandomState(seed)``, ``randint(0, RAND_R_MAX)``."""
    return int(seeded(seed).randint(0, RAND_R_MAX))


def grows(params: ForestParams, n_rows: int) -> bool:
    """Whether the grower grows this set-up: the values scikit-learn accepts and the grower
    implements (anything else is left to scikit-learn, which grows it or refuses it as it
    always did), and fewer than 2**21 bootstrap draws (the grower's packed sums)."""

    def integer(value: Any, low: int) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            return False
        return bool(value >= low)

    def share(value: Any) -> bool:
        return isinstance(value, float) and 0.0 < value <= 1.0

    return bool(
        integer(params.n_estimators, 1)
        and integer(params.random_state, 0)
        and integer(params.min_samples_leaf, 1)
        and (params.max_depth is None or integer(params.max_depth, 1))
        and (params.max_samples is None or share(params.max_samples))
        and (
            params.max_features in ("sqrt", "log2", None)
            or share(params.max_features)
            or integer(params.max_features, 1)
        )
        and 0 < bootstrap_size(n_rows, params.max_samples) < 2**21 - 1
    )


def grow_forest(x: np.ndarray, y: np.ndarray, params: ForestParams) -> GrownForest | None:
    """The forest scikit-learn's ``RandomForestClassifier`` (the set-up of
    :func:`batsched_ml.predict.bootstrap_rows.scikit_learn_forest`) fits on ``x`` (float32
    rows) and boolean labels ``y``, or None where it does not grow it (see the module)."""
    module = grower()
    if module is None or not grows(params, len(y)):
        return None
    x = np.ascontiguousarray(x, dtype=np.float32)
    if y.dtype == np.bool_ and y.any() and not y.all():
        # np.unique's answer for labels of both kinds, without sorting them (a week's 50,000)
        classes, encoded = np.array([False, True]), y.astype(np.intp)
    else:
        classes, encoded = np.unique(y, return_inverse=True)
    if len(classes) != 2 or not np.isfinite(x).all():
        return None
    seeds = tree_seeds(params.random_state, params.n_estimators)
    workers = max(1, min(params.n_jobs if params.n_jobs > 0 else os.cpu_count() or 1, len(seeds)))
    if workers == 1:
        return _grown(module, x, encoded, classes, params, seeds, None, 1)
    return _grown(module, x, encoded, classes, params, seeds, thread_pool(workers), workers)


def thread_pool(workers: int) -> ThreadPoolExecutor:
    """This process's pool of ``workers`` threads (the grower lets go of the GIL), kept from one
    fit to the next: a new pool a week started its threads again, 180 times a replay (about
    3 ms a week on full HPC2N, which the replay waits for). A child forked after the pool was
    made gets its own (a pool's threads do not survive a fork)."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="forest-grower")
    return pool


#: :func:`thread_pool`'s pools by number of threads (forgotten in a forked child)
_POOLS: dict[int, ThreadPoolExecutor] = {}
os.register_at_fork(after_in_child=_POOLS.clear)


def _grown(
    module: Any,
    x: np.ndarray,
    encoded: np.ndarray,
    classes: np.ndarray,
    params: ForestParams,
    seeds: list[int],
    pool: ThreadPoolExecutor | None,
    workers: int,
) -> GrownForest:
    n_rows, n_features = x.shape
    ranks, values, offsets = ranked(x, module, pool, workers)
    labels = encoded.astype(np.uint8)
    leaf = params.min_samples_leaf
    settings = {
        "max_features": max_features_of(params.max_features, n_features),
        "min_samples_leaf": leaf,
        "min_samples_split": max(2, 2 * leaf),
        "max_depth": MAX_INT if params.max_depth is None else params.max_depth,
    }
    size = bootstrap_size(n_rows, params.max_samples)

    def one(seed: int) -> Tree:
        indices = bootstrap_indices(seed, n_rows, size)
        tree = _empty_tree(2 * (size // leaf) + 1)  # (each leaf holds min_samples_leaf rows)
        count = module.grow(
            ranks,
            values,
            offsets,
            labels,
            indices,
            **_outputs(tree),
            **settings,
            seed=splitter_seed(seed),
        )
        return _first(tree, count)

    trees = list(pool.map(one, seeds)) if pool is not None else [one(seed) for seed in seeds]
    return GrownForest(classes, n_features, trees)


def _empty_tree(capacity: int) -> Tree:
    ints = [np.empty(capacity, dtype=np.int64) for _ in range(4)]
    floats = [np.empty(capacity, dtype=np.float64) for _ in range(3)]
    return Tree(
        left=ints[0],
        right=ints[1],
        feature=ints[2],
        threshold=floats[0],
        impurity=floats[1],
        n_node_samples=ints[3],
        weighted_n_node_samples=floats[2],
        value=np.empty((capacity, 2), dtype=np.float64),
        missing_go_to_left=np.empty(capacity, dtype=np.uint8),
    )


def _outputs(tree: Tree) -> dict[str, np.ndarray]:
    return {
        "left": tree.left,
        "right": tree.right,
        "feature": tree.feature,
        "threshold": tree.threshold,
        "impurity": tree.impurity,
        "n_node_samples": tree.n_node_samples,
        "weighted_n_node_samples": tree.weighted_n_node_samples,
        "value": tree.value.reshape(-1),
        "missing_go_to_left": tree.missing_go_to_left,
    }


def _first(tree: Tree, count: int) -> Tree:
    fields: Sequence[str] = list(tree.__dataclass_fields__)
    return Tree(**{name: getattr(tree, name)[:count].copy() for name in fields})
