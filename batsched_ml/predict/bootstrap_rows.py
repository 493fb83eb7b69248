"""The weekly forest's trees grown on their bootstrap rows only: the same trees, less work.

``RandomForestClassifier`` draws each tree's bootstrap sample and passes it to the tree as
a count per row of the whole training set (``sample_weight``), most of them zero with
``max_samples=0.25``. The tree then checks and encodes the targets of every row and its splitter
scans every row to keep those of nonzero weight: work on all 50,000 rows of the window for a
tree grown on about 11,000, done 40 times a week, much of it holding the GIL, so that the two
training threads wait for each other.

:class:`BootstrapRowsTree` is the forest's tree with one change: given the forest's counts, it
keeps the rows with a nonzero count, in their order, and grows the tree on them with those
counts. The splitter sees the same rows, in the same order, with the same values, weights and
random draws, so the tree is the same, node for node (``tests/test_forest_fit.py`` compares
every array of every tree with scikit-learn's own ``RandomForestClassifier.fit``). Only where
the kept rows lack a class of the whole set (a tree's class list would shrink) does it grow the
tree on all rows, as scikit-learn does.

Everything else (input checks, seeds, bootstrap draws, threads, the fitted attributes) is
scikit-learn's ``RandomForestClassifier.fit`` itself: :func:`forest_classifier` only swaps the
tree. Importing this module imports scikit-learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from batsched_ml.predict.params import ForestParams


class BootstrapRowsTree(DecisionTreeClassifier):
    """A decision tree that, inside a forest, grows on its bootstrap rows only (see above)."""

    def _fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        check_input: bool = True,
        **kwargs: Any,
    ) -> Any:
        # the forest's call: checked input, ``y`` its encoded classes (0 .. K-1 per output,
        # every one present), ``sample_weight`` the bootstrap counts
        if sample_weight is not None and not check_input:
            rows = np.flatnonzero(sample_weight)
            if len(rows) < X.shape[0]:
                kept = y[rows]
                if _every_class_kept(y, kept):
                    return super()._fit(
                        X[rows], kept, sample_weight[rows], check_input=False, **kwargs
                    )
        return super()._fit(X, y, sample_weight, check_input, **kwargs)


def _every_class_kept(y: np.ndarray, kept: np.ndarray) -> bool:
    """Whether the kept rows hold every class of every output of ``y`` (encoded 0 .. K-1)."""
    if y.ndim == 1:
        y, kept = y.reshape(-1, 1), kept.reshape(-1, 1)
    for k in range(y.shape[1]):
        n_classes = int(y[:, k].max()) + 1
        if not np.bincount(kept[:, k].astype(np.intp), minlength=n_classes).all():
            return False
    return True


def scikit_learn_forest(params: ForestParams) -> RandomForestClassifier:
    """scikit-learn's own Random Forest with ``params`` (the reference the faster one equals)."""
    return RandomForestClassifier(
        n_estimators=params.n_estimators,
        max_depth=params.max_depth,
        min_samples_leaf=params.min_samples_leaf,
        max_features=params.max_features,
        n_jobs=params.n_jobs,
        random_state=params.random_state,
        max_samples=params.max_samples,
    )


def forest_classifier(params: ForestParams) -> RandomForestClassifier:
    """:func:`scikit_learn_forest` with its trees :class:`BootstrapRowsTree`."""
    forest = scikit_learn_forest(params)
    forest.estimator = BootstrapRowsTree()
    return forest
