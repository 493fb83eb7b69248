"""batsched-ml: a Batsim 4 scheduler with online job-size classification.

The package is organised by concern: :mod:`batsched_ml.workload` turns SWF traces into Batsim
inputs, :mod:`batsched_ml.protocol` is the one codec of the Batsim 4 JSON protocol and
:mod:`batsched_ml.sim` is an embedded, Batsim-compatible discrete-event simulator.
"""

__version__ = "0.1.0"
