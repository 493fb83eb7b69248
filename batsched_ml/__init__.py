"""batsched-ml: a Batsim 4 and 5 scheduler with online job-size classification.

The package is organised by concern: :mod:`batsched_ml.workload` turns SWF traces into Batsim
inputs; :mod:`batsched_ml.protocol` holds one codec per Batsim protocol (4's JSON, 5's
batprotocol JSON) onto the same typed events; :mod:`batsched_ml.scheduler` is the pure
scheduler (events in, decisions out); :mod:`batsched_ml.sim` is an embedded, Batsim-compatible
discrete-event simulator; :mod:`batsched_ml.runs` makes a run from its settings,
:mod:`batsched_ml.results` its figures and files; :mod:`batsched_ml.serving` serves a real
Batsim; :mod:`batsched_ml.experiments` runs campaigns and :mod:`batsched_ml.report` draws them;
:mod:`batsched_ml.cli` is the command line. :func:`batsched_ml.replay`
(:mod:`batsched_ml.api`) runs a replay from Python and returns its results as tables.
"""

from typing import Any

# first, before numpy loads OpenBLAS: its kernel, the same on every processor that has it
from batsched_ml import blas_kernel as blas_kernel
from batsched_ml.compiled import guard_scheduler

# before any module of the scheduler is imported: the compiled scheduler only if it was built
# from the very sources beside it (batsched_ml.compiled)
guard_scheduler()

__version__ = "0.1.0"
__all__ = ["Result", "__version__", "replay"]


def __getattr__(name: str) -> Any:
    """``batsched_ml.replay`` and ``batsched_ml.Result`` (:mod:`batsched_ml.api`), imported on
    first use: ``import batsched_ml`` (and the command line's start) stays light."""
    if name in ("replay", "Result"):
        from batsched_ml import api

        return getattr(api, name)
    raise AttributeError(f"module 'batsched_ml' has no attribute {name!r}")
