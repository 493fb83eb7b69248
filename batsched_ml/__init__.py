"""batsched-ml: a Batsim 4 scheduler with online job-size classification.

The package is organised by concern: :mod:`batsched_ml.workload` turns SWF traces into Batsim
inputs, :mod:`batsched_ml.protocol` is the one codec of the Batsim 4 JSON protocol and
:mod:`batsched_ml.sim` is an embedded, Batsim-compatible discrete-event simulator;
:func:`batsched_ml.replay` (:mod:`batsched_ml.api`) runs a replay from Python and returns its
results as tables.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Result", "__version__", "replay"]


def __getattr__(name: str) -> Any:
    """``batsched_ml.replay`` and ``batsched_ml.Result`` (:mod:`batsched_ml.api`), imported on
    first use: ``import batsched_ml`` (and the command line's start) stays light."""
    if name in ("replay", "Result"):
        from batsched_ml import api

        return getattr(api, name)
    raise AttributeError(f"module 'batsched_ml' has no attribute {name!r}")
