"""The optional compiled parts, and the one rule that decides whether one is used.

Five C extensions are built from source at ``pip install`` (``setup.py``), each giving exactly
what a reference that stays in the package gives:

* ``batsched_ml.sim._ckernel``: the SimGrid kernel (:class:`batsched_ml.sim.simgrid.Kernel`);
* ``batsched_ml.sim._csim``: the simulator of static workloads, Batsim's actors on that kernel
  (:mod:`batsched_ml.sim.csim`; the reference is :mod:`batsched_ml.sim.simulator`);
* ``batsched_ml.predict._cforest``: the forest's walk (:meth:`batsched_ml.predict.forest.
  FastForest.proba`);
* ``batsched_ml.predict._cgrow``: the forest's grower (:mod:`batsched_ml.predict.grow`; the
  reference is scikit-learn's own ``RandomForestClassifier.fit``);
* ``batsched_ml.workload._cswf``: the SWF reader's lines and numbers (the references are the
  reader's own steps, :func:`batsched_ml.workload.swf._read_lines`, and pandas' C parser,
  :func:`batsched_ml.workload.swf._parse_numbers`).

All are optional (without a C compiler the install goes on and the references run, with the
same results, more slowly). A compiled part is used when it was built from the very source
file beside it: each module knows the SHA-256 of the source it was built from, and an editable
install whose ``.c`` changed since is not used (a warning says so). ``BATSCHED_ML_KERNEL=python``
turns every compiled part off. ``run.json`` names what ran (:func:`batsched_ml.results.runfolder.
code_identity`), and the code digest counts each compiled part's source digest, so a campaign
never takes a run of one for a run of the other.

The scheduler is compiled too, from its one Python source, by mypyc (:data:`SCHEDULER_GROUP`: the
EASY pass, the scheduler core, the dispatchers, the queue orders, the machine sets, the job, the
predictor's measuring wrapper, the classifier with its safeguard, and the classifier's features).
The classes a researcher extends (a component, the scheduler, the classifier, the safeguard, the
feature tracker) accept subclasses written in Python. Its modules call each other natively, so they
are one part, used whole or not at all, and a part whose source is the reference itself: the build
records each module's ``.py`` SHA-256 in a module compiled with them (:data:`SCHEDULER_STAMP`), and
``import batsched_ml`` checks them all (:func:`guard_scheduler`). When one differs (a ``.py``
edited since the build: the edit must count), when the build is incomplete, or under
``BATSCHED_ML_KERNEL=python``, every module of the group is imported from its ``.py`` (a warning
says so, except for the variable), although Python would otherwise prefer the ``.so`` beside it.

A sixth build is not a compiled part of this kind: Batsim 5's decision-component library
(``batsched_ml._edc``, :mod:`batsched_ml.serving.edc`), which Batsim loads and which embeds Python;
it has no reference (serving over a socket is the alternative), is built only where libpython is a
shared library, and is stamped with its source digest the same way (:func:`source_digest`, checked
by ``batsched-ml edc-library``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

#: ``BATSCHED_ML_KERNEL=python``: every compiled part off (the name is the first part's).
VARIABLE = "BATSCHED_ML_KERNEL"


_WARNED: set[str] = set()  # the values of the variable already warned about


def forced_python() -> bool:
    """Whether ``BATSCHED_ML_KERNEL`` says ``python``. Any other value but none is a mistake
    (a typo would otherwise run the compiled parts without a word): a warning names it."""
    value = os.environ.get(VARIABLE, "").strip().lower()
    if value not in ("", "python") and value not in _WARNED:
        _WARNED.add(value)
        warnings.warn(
            f"{VARIABLE}={os.environ[VARIABLE]!r} is not understood (only 'python', every "
            "compiled part off): the compiled parts run",
            RuntimeWarning,
            stacklevel=2,
        )
    return value == "python"


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


# --- the scheduler, compiled by mypyc ---------------------------------------------------------

#: The modules mypyc compiles together (setup.py), in one shared library: they call each other
#: natively, so a module of them imported from its ``.py`` would not be called by the others.
SCHEDULER_GROUP: tuple[str, ...] = (
    "batsched_ml.alloc",
    "batsched_ml.job",
    "batsched_ml.scheduler.parts",
    "batsched_ml.scheduler.policies",
    "batsched_ml.scheduler.easy",
    "batsched_ml.scheduler.dispatchers",
    "batsched_ml.scheduler.kinetic",
    "batsched_ml.scheduler.core",
    "batsched_ml.results.measured",
    "batsched_ml.predict.features",
    "batsched_ml.scheduler.classified",
)

#: The module the build writes and compiles with the group: ``SOURCES``, each module's name and
#: the SHA-256 of the ``.py`` it was compiled from (a module of the same shared library, so the
#: digests are those of the build that is there, not of a later build that failed).
SCHEDULER_STAMP = "batsched_ml._scheduler_sources"

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent

#: What :func:`guard_scheduler` decided: ``"compiled"`` or ``"python"``, and why.
_scheduler_state: tuple[str, str] | None = None


def module_source(name: str) -> Path:
    """The ``.py`` file of a module of the package."""
    return _PACKAGE_ROOT.joinpath(*name.split(".")).with_suffix(".py")


def _built_beside(source: Path) -> bool:
    return any(
        source.with_name(source.stem + suffix).is_file()
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def scheduler_stamp(sources: Sequence[Path]) -> str:
    """The stamp module's text for the group's ``sources`` (setup.py writes it, then compiles
    it with them)."""
    lines = [
        '"""Written by the build (setup.py): the SHA-256 of each scheduler module compiled with',
        'this one (batsched_ml.compiled.guard_scheduler checks them)."""',
        "",
        "SOURCES: dict[str, str] = {",
    ]
    for name, source in zip(SCHEDULER_GROUP, sources, strict=True):
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        lines.append(f'    "{name}": "{digest}",')
    return "\n".join([*lines, "}", ""])


def _stale_scheduler() -> str | None:
    """Why the compiled group cannot be used (None: it can)."""
    if not all(_built_beside(module_source(name)) for name in (*SCHEDULER_GROUP, SCHEDULER_STAMP)):
        return "its build is incomplete"
    try:
        stamp = importlib.import_module(SCHEDULER_STAMP)
    except ImportError as error:
        return f"its build does not load ({error})"
    if not _is_compiled(stamp):
        return "its build is incomplete"
    recorded = getattr(stamp, "SOURCES", {})
    for name in SCHEDULER_GROUP:
        source = module_source(name)
        if not source.is_file():  # an installation without sources: only the build is there
            continue
        if recorded.get(name) != hashlib.sha256(source.read_bytes()).hexdigest():
            return f"{source.name} ({name}) changed since it was compiled"
    return None


class _SourceFinder:
    """Imports the group's modules from their ``.py`` files, ahead of the ``.so`` beside them.

    A meta path finder is any object with ``find_spec``: not derived from
    ``importlib.abc.MetaPathFinder``, whose import (``importlib.resources``, ``tempfile``, ...)
    took 20 to 30 ms of every command's start."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in SCHEDULER_GROUP:
            return None
        return importlib.util.spec_from_file_location(fullname, module_source(fullname))


def use_scheduler_source(why: str = "asked") -> None:
    """Import every module of the group from its ``.py`` from now on (before any is imported:
    one already imported compiled would call the others natively); ``why`` is what
    :func:`guard_scheduler` says from now on."""
    global _scheduler_state
    loaded = [name for name in SCHEDULER_GROUP if name in sys.modules]
    if any(_is_compiled(sys.modules[name]) for name in loaded):
        raise RuntimeError(f"the compiled scheduler is already imported ({', '.join(loaded)})")
    if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())
    _scheduler_state = ("python", why)


def _is_compiled(module: ModuleType) -> bool:
    spec = module.__spec__
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


def guard_scheduler() -> tuple[str, str]:
    """Decide once, at ``import batsched_ml``, whether the compiled scheduler runs: only when
    it was built from the very ``.py`` files beside it and ``BATSCHED_ML_KERNEL`` is not
    ``python``; otherwise every module of the group is imported from its source (with a
    warning when a build is there but stale). Returns ``(state, why)``."""
    global _scheduler_state
    if _scheduler_state is not None:
        return _scheduler_state
    if not any(_built_beside(module_source(name)) for name in SCHEDULER_GROUP):
        _scheduler_state = ("python", "not built")
        return _scheduler_state
    if forced_python():
        use_scheduler_source(f"{VARIABLE}=python")
        return guard_scheduler()
    stale = _stale_scheduler()
    if stale is not None:
        use_scheduler_source(stale)
        warnings.warn(
            f"the compiled scheduler is not used: {stale}; rebuild it (pip install -e .); "
            "running its Python source meanwhile",
            RuntimeWarning,
            stacklevel=2,
        )
        return guard_scheduler()
    _scheduler_state = ("compiled", "built from the sources beside it")
    return _scheduler_state


def scheduler_sources() -> dict[str, str] | None:
    """The group's source digests when it runs compiled (the stamp's), else None."""
    if guard_scheduler()[0] != "compiled":
        return None
    return dict(importlib.import_module(SCHEDULER_STAMP).SOURCES)
