"""The compiled parts, built from source at install: the SimGrid kernel
(``batsched_ml.sim._ckernel``), the replay engine of FCFS-EASY base runs
(``batsched_ml.sim._creplay``), the forest's walk (``batsched_ml.predict._cforest``) and the
forest's grower (``batsched_ml.predict._cgrow``).

Everything else about the package is in pyproject.toml. The extensions are optional: without a
C compiler the install goes on and their references run (``batsched_ml.sim.simgrid.Kernel``,
``batsched_ml.predict.forest.FastForest.proba``, scikit-learn's ``RandomForestClassifier.fit``),
which give the same results, more slowly (batsched_ml/compiled.py).
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup


def extension(name: str, source: str) -> Extension:
    # the module knows the source it was built from: batsched_ml.compiled does not use a build
    # older than the .c beside it (an editable install that was not rebuilt)
    digest = hashlib.sha256((Path(__file__).parent / source).read_bytes()).hexdigest()
    return Extension(
        name,
        sources=[source],
        define_macros=[("SOURCE_SHA256", f'"{digest}"')],
        # no fused multiply-add: SimGrid rounds the product and the difference apart
        extra_compile_args=["-O2", "-ffp-contract=off"],
        optional=True,
    )


setup(
    ext_modules=[
        extension("batsched_ml.sim._ckernel", "batsched_ml/sim/_ckernel.c"),
        extension("batsched_ml.sim._creplay", "batsched_ml/sim/_creplay.c"),
        extension("batsched_ml.predict._cforest", "batsched_ml/predict/_cforest.c"),
        extension("batsched_ml.predict._cgrow", "batsched_ml/predict/_cgrow.c"),
    ]
)
