"""The compiled SimGrid kernel (``batsched_ml.sim._ckernel``), built from source at install.

Everything else about the package is in pyproject.toml. The extension is optional: without a C
compiler the install goes on and the simulator runs its pure-Python kernel
(``batsched_ml.sim.simgrid.Kernel``), which gives the same results, more slowly.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "batsched_ml/sim/_ckernel.c"
# the module knows the source it was built from: simgrid.kernel_class() does not use a build
# older than the _ckernel.c beside it (an editable install that was not rebuilt)
DIGEST = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()

setup(
    ext_modules=[
        Extension(
            "batsched_ml.sim._ckernel",
            sources=[SOURCE],
            define_macros=[("SOURCE_SHA256", f'"{DIGEST}"')],
            # no fused multiply-add: SimGrid rounds the product and the difference apart
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
