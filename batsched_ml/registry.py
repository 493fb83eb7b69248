"""Every method the scheduler offers, by name, with its defaults: the one list that the command
line, the run configuration, campaigns and the pages read.

Light on purpose (no numpy, pandas or scikit-learn): the command line builds its options and its
``--help`` from here before any heavy module is imported. The modules that implement the methods
(:mod:`batsched_ml.scheduler.policies`, :mod:`~batsched_ml.scheduler.predictors`,
:mod:`~batsched_ml.scheduler.correction`, :mod:`batsched_ml.replaying`) take their names from
here and check at import that they implement exactly these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``--policy``: the queue orders of Zrigui et al. (JPDC 2022), with what each sorts by.
POLICIES: dict[str, str] = {
    "fcfs": "first come, first served (submission time)",
    "wfp": "(wait / requested time)^3 * processors, highest first",
    "spf": "shortest requested processing time first",
    "saf": "smallest requested area (time * processors) first",
}

#: The variants that classify jobs small or large (:mod:`batsched_ml.scheduler.classified`):
#: the paper's three, and ``classification-guarded``, the paper's method switched on only in
#: the weeks where it pays on the machine (:mod:`batsched_ml.scheduler.guard`).
CLASSIFIED_VARIANTS: tuple[str, ...] = (
    "classification",
    "classification-idempotent",
    "class-clairvoyant",
    "classification-guarded",
)

#: The five variants of Zrigui et al. (JPDC 2022, Figure 9): ``base``, EASY on requested times;
#: ``runtime-clairvoyant``, EASY on actual runtimes (ordering and backfilling); the paper's
#: classified ones. What the paper's reproduction (``paper-results``) and campaigns without a
#: ``variants`` list run.
PAPER_VARIANTS: tuple[str, ...] = (
    "base",
    "classification",
    "classification-idempotent",
    "class-clairvoyant",
    "runtime-clairvoyant",
)

#: ``--variant``: the paper's five and ``classification-guarded``.
VARIANTS: tuple[str, ...] = (*PAPER_VARIANTS, "classification-guarded")

#: ``--predictor``: the runtime predictors (:mod:`batsched_ml.scheduler.predictors`).
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


def run_title(config: Mapping[str, Any]) -> str:
    """``fcfs (base)``, then the predictor, correction and dispatcher a run used when they are
    not the defaults, so two runs of one trace never share a title:
    ``fcfs (base; predictor easy++, correction power, dispatcher prb)``, and the classifier's
    options first (``fcfs (classification-idempotent; classifier [threshold=0.6])``). The one
    title of a run:
    the command line, ``collect``'s report and the pages print it
    (:meth:`batsched_ml.replaying.ReplayConfig.title`)."""
    if "estimator" in config:  # runs before the predictor had its name in the configuration
        config = {("predictor" if k == "estimator" else k): v for k, v in config.items()}
    title = f"{config.get('policy')} ({config.get('variant')}"
    methods = [
        f"{label} {config[key]}{_options(config.get(params or ''))}"
        for key, label, default, params in (
            ("predictor", "predictor", "requested", "predictor_params"),
            ("correction", "correction", "none", None),
            ("dispatcher", "dispatcher", "easy", "dispatcher_params"),
        )
        if config.get(key, default) != default or config.get(params or "")
    ]
    if config.get("classifier_params"):  # --classifier-option: the classifier's own settings
        methods.insert(0, f"classifier{_options(config['classifier_params'])}")
    return title + ("; " + ", ".join(methods) if methods else "") + ")"


def _options(params: Mapping[str, Any] | None) -> str:
    return f" [{', '.join(f'{k}={v}' for k, v in params.items())}]" if params else ""
