"""The scheduler: events in, decisions out, and nothing else (no sockets, files or clocks).

:mod:`~batsched_ml.scheduler.core` keeps the queue and the machine and decides once per
message; the queue orders (:mod:`~batsched_ml.scheduler.policies`), EASY backfilling
(:mod:`~batsched_ml.scheduler.easy`) and the other dispatchers
(:mod:`~batsched_ml.scheduler.dispatchers`), the runtime predictors
(:mod:`~batsched_ml.scheduler.predictors`) and the job-size classification
(:mod:`~batsched_ml.scheduler.classified`) are written once, here, and every run goes through
them: the embedded simulators, ``serve`` and the API.
"""
