"""The optional compiled parts, and the one rule that decides whether one is used.

Four C extensions are built from source at ``pip install`` (``setup.py``), each giving exactly
what a reference that stays in the package gives:

* ``batsched_ml.sim._ckernel``: the SimGrid kernel (:class:`batsched_ml.sim.simgrid.Kernel`);
* ``batsched_ml.sim._csim``: the simulator of static workloads, Batsim's actors on that kernel
  (:mod:`batsched_ml.sim.csim`; the reference is :mod:`batsched_ml.sim.simulator`);
* ``batsched_ml.predict._cforest``: the forest's walk (:meth:`batsched_ml.predict.forest.
  FastForest.proba`);
* ``batsched_ml.predict._cgrow``: the forest's grower (:mod:`batsched_ml.predict.grow`; the
  reference is scikit-learn's own ``RandomForestClassifier.fit``).

All are optional (without a C compiler the install goes on and the references run, with the
same results, more slowly). A compiled part is used when it was built from the very source
file beside it: each module knows the SHA-256 of the source it was built from, and an editable
install whose ``.c`` changed since is not used (a warning says so). ``BATSCHED_ML_KERNEL=python``
turns every compiled part off. ``run.json`` names what ran (:func:`batsched_ml.results.runfolder.
code_identity`), and the code digest counts each compiled part's source digest, so a campaign
never takes a run of one for a run of the other.

A fifth build is not a compiled part of this kind: Batsim 5's decision-component library
(``batsched_ml._edc``, :mod:`batsched_ml.serving.edc`), which Batsim loads and which embeds Python;
it has no reference (serving over a socket is the alternative), is built only where libpython is a
shared library, and is stamped with its source digest the same way (:func:`source_digest`, checked
by ``batsched-ml edc-library``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import warnings
from pathlib import Path
from types import ModuleType

#: ``BATSCHED_ML_KERNEL=python``: every compiled part off (the name is the first part's).
VARIABLE = "BATSCHED_ML_KERNEL"


def forced_python() -> bool:
    return os.environ.get(VARIABLE, "").strip().lower() == "python"


_LOCAL_INCLUDE = re.compile(rb'^#include "([^"]+)"', re.MULTILINE)


def source_digest(source: Path) -> str:
    """The SHA-256 a compiled part is built with and checked against: its ``.c`` file's bytes,
    then those of each header it includes from beside it (``#include "x.h"``, in that order),
    so that a changed shared header (``sim/_simgrid_clock.h``) makes every build that uses it
    stale. setup.py loads this module by its path (stdlib only) to stamp each build."""
    text = source.read_bytes()
    digest = hashlib.sha256(text)
    for header in _LOCAL_INCLUDE.findall(text):
        digest.update((source.parent / header.decode()).read_bytes())
    return digest.hexdigest()


def compiled_module(name: str, source: Path) -> ModuleType | None:
    """The extension module ``name`` if it is importable, built from ``source`` (when that file
    is there: an installed wheel has no ``.c``) and not turned off; else None."""
    if forced_python():
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    digest = source_digest(source) if source.is_file() else None
    if digest is not None and digest != getattr(module, "SOURCE_SHA256", None):
        warnings.warn(
            f"{name} was built from another {source.name}: rebuild it (pip install -e .); "
            "running its pure-Python reference meanwhile",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return module
