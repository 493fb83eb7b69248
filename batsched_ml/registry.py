"""Every method the scheduler offers, by name, with its defaults: the one list that the command
line, the run configuration, campaigns and the pages read.

Light on purpose (no numpy, pandas or scikit-learn): the command line builds its options and its
``--help`` from here before any heavy module is imported. The modules that implement the methods
(:mod:`batsched_ml.scheduler.policies`, :mod:`~batsched_ml.scheduler.estimators`,
:mod:`~batsched_ml.scheduler.correction`, :mod:`batsched_ml.replaying`) take their names from
here and check at import that they implement exactly these.
"""

from __future__ import annotations

#: ``--policy``: the queue orders of Zrigui et al. (JPDC 2022), with what each sorts by.
POLICIES: dict[str, str] = {
    "fcfs": "first come, first served (submission time)",
    "wfp": "(wait / requested time)^3 * processors, highest first",
    "spf": "shortest requested processing time first",
    "saf": "smallest requested area (time * processors) first",
}

#: The variants that classify jobs small or large (:mod:`batsched_ml.scheduler.classified`).
CLASSIFIED_VARIANTS: tuple[str, ...] = (
    "classification",
    "classification-idempotent",
    "class-clairvoyant",
)

#: ``--variant``. ``base``: EASY on requested times; ``runtime-clairvoyant``: EASY on actual
#: runtimes (ordering and backfilling); the classified ones above.
VARIANTS: tuple[str, ...] = ("base", *CLASSIFIED_VARIANTS, "runtime-clairvoyant")

#: ``--predictor``: the runtime predictors (:mod:`batsched_ml.scheduler.estimators`).
PREDICTORS: tuple[str, ...] = (
    "requested",
    "actual",
    "easy++",
    "fixed",
    "adaboost",
    "profile",
    "su",
)

#: ``--correction``: what to do when a job outlives its prediction.
CORRECTIONS: tuple[str, ...] = ("none", "simple", "power")

#: ``--dispatcher``: EASY backfilling with the ``--policy`` order, or the dispatchers of
#: Galleguillos et al.: shortest / longest predicted runtime first (no backfilling), PRB (urgency
#: order, every job that fits starts) and CPH (a CP-SAT plan of the urgent jobs).
DISPATCHERS: tuple[str, ...] = ("easy", "sjf", "ljf", "prb", "cph")

#: How each dispatcher other than EASY orders the queue (for the messages that say so).
DISPATCHER_ORDERS: dict[str, str] = {
    "sjf": "shortest predicted runtime first",
    "ljf": "longest predicted runtime first",
    "prb": "by urgency: the wait over the expected wait of its queue",
    "cph": "a CP-SAT plan of the most urgent jobs",
}

#: EASY's starvation threshold: a job waiting this long is served in submission order.
STARVATION_THRESHOLD_HOURS = 72.0
