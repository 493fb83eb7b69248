"""The compiled parts, built from source at install: the SimGrid kernel
(``batsched_ml.sim._ckernel``), the compiled simulator of static workloads
(``batsched_ml.sim._csim``), the forest's walk (``batsched_ml.predict._cforest``), the
forest's grower (``batsched_ml.predict._cgrow``), the SWF reader's number parser
(``batsched_ml.workload._cswf``), Batsim 5's decision-component library
(``batsched_ml._edc``, which embeds Python: built only where libpython is a shared library) and
the scheduler's own Python modules compiled by mypyc (``batsched_ml.compiled.SCHEDULER_GROUP``).

Everything else about the package is in pyproject.toml. The extensions are optional: without a
C compiler the install goes on and their references run (``batsched_ml.sim.simgrid.Kernel``, the
Python simulator ``batsched_ml.sim.simulator``, ``batsched_ml.predict.forest.FastForest.proba``,
scikit-learn's ``RandomForestClassifier.fit``),
which give the same results, more slowly (batsched_ml/compiled.py).
"""

import importlib.util
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent


def _compiled_helpers():
    # batsched_ml/compiled.py by its path (it needs only the standard library): the digest rule
    # the package checks its builds with, without importing the package and its dependencies
    spec = importlib.util.spec_from_file_location(
        "_batsched_ml_compiled", ROOT / "batsched_ml" / "compiled.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _compiled_helpers()
SOURCE_DIGEST = COMPILED.source_digest


def extension(name: str, source: str) -> Extension:
    # the module knows the source it was built from (the .c and the headers it includes from
    # beside it): batsched_ml.compiled does not use a build older than them (an editable
    # install that was not rebuilt)
    digest = SOURCE_DIGEST(ROOT / source)
    headers = [str(path.relative_to(ROOT)) for path in (ROOT / source).parent.glob("*.h")]
    return Extension(
        name,
        sources=[source],
        depends=headers,
        define_macros=[("SOURCE_SHA256", f'"{digest}"')],
        # no fused multiply-add: SimGrid rounds the product and the difference apart
        extra_compile_args=["-O2", "-ffp-contract=off"],
        optional=True,
    )


def edc_library() -> list[Extension]:
    # a shared library that Batsim 5 loads (dlopen) and that starts Python itself: linked
    # with libpython (rpath to it), so only where Python was built with --enable-shared; the
    # interpreter building it is the one whose packages it uses in an editable install
    # (batsched_ml/_edc.c says how it finds them once installed)
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return []
    libdir = sysconfig.get_config_var("LIBDIR")
    python = sys.executable.replace("\\", "\\\\").replace('"', '\\"')
    library = extension("batsched_ml._edc", "batsched_ml/_edc.c")
    library.define_macros.append(("BATSCHED_ML_PYTHON", f'"{python}"'))
    library.libraries += [f"python{sysconfig.get_config_var('LDVERSION')}", "dl"]
    library.library_dirs.append(libdir)
    library.runtime_library_dirs.append(libdir)
    return [library]


def scheduler_group() -> list[Extension]:
    # the scheduler's own Python source compiled by mypyc (a build requirement), with a module
    # recording each source's digest (batsched_ml.compiled.guard_scheduler): optional like the
    # C parts, so that without mypyc, or if it fails, the install goes on with the Python source
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("warning: mypyc is not installed: the scheduler is not compiled", file=sys.stderr)
        return []
    sources = [COMPILED.module_source(name) for name in COMPILED.SCHEDULER_GROUP]
    stamp = COMPILED.module_source(COMPILED.SCHEDULER_STAMP)
    stamp.write_text(COMPILED.scheduler_stamp(sources))
    paths = [str(path.relative_to(ROOT)) for path in (*sources, stamp)]
    try:
        # libraries without type information are Any (they are not installed where the
        # package is built); the group's group_name keeps its shared library in the package
        extensions = mypycify(
            ["--ignore-missing-imports", *paths], opt_level="3", group_name="batsched_ml._scheduler"
        )
    except (Exception, SystemExit) as error:  # mypyc exits on a type error
        print(f"warning: the scheduler is not compiled: {error}", file=sys.stderr)
        return []
    for compiled in extensions:
        compiled.optional = True
    return extensions


setup(
    ext_modules=[
        extension("batsched_ml.sim._ckernel", "batsched_ml/sim/_ckernel.c"),
        extension("batsched_ml.sim._csim", "batsched_ml/sim/_csim.c"),
        extension("batsched_ml.predict._cforest", "batsched_ml/predict/_cforest.c"),
        extension("batsched_ml.predict._cgrow", "batsched_ml/predict/_cgrow.c"),
        extension("batsched_ml.workload._cswf", "batsched_ml/workload/_cswf.c"),
        *edc_library(),
        *scheduler_group(),
    ]
)
