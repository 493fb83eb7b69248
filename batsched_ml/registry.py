"""Every method the scheduler offers, by name, with its defaults: the one list that the command
line, the run configuration, campaigns and the pages read.

Light on purpose (no numpy, pandas or scikit-learn): the command line builds its options and its
``--help`` from here before any heavy module is imported. The modules that implement the methods
(:mod:`batsched_ml.scheduler.policies`, :mod:`~batsched_ml.scheduler.predictors`,
:mod:`~batsched_ml.scheduler.correction`, :mod:`batsched_ml.runs.replaying`) take their names from
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

#: The variants that classify jobs small or large (:mod:`batsched_ml.scheduler.classified`),
#: with what each does: the paper's three, and ``classification-guarded``, the paper's method
#: switched on only in the weeks where it pays on the machine (:mod:`batsched_ml.scheduler.guard`).
CLASSIFIED_VARIANTS: dict[str, str] = {
    "classification": "small/large queues from weekly Random Forests, the small queue first",
    "classification-idempotent": "classification, plus killing small jobs that outrun the "
    "divider and resubmitting them as large",
    "class-clairvoyant": "the small/large queues with the true class (the method's ceiling)",
    "classification-guarded": "classification-idempotent, switched on only in the weeks where "
    "the recently finished jobs waited (their mean bounded slowdown at least 2)",
}

#: The five variants of Zrigui et al. (JPDC 2022, Figure 9): what the paper's reproduction
#: (``paper-results``) runs.
PAPER_VARIANTS: tuple[str, ...] = (
    "base",
    "classification",
    "classification-idempotent",
    "class-clairvoyant",
    "runtime-clairvoyant",
)

#: ``--variant``: how the scheduler plans with runtimes and classes.
VARIANTS: dict[str, str] = {
    "base": "EASY on the predicted (by default the requested) times",
    **{
        name: text for name, text in CLASSIFIED_VARIANTS.items() if name != "classification-guarded"
    },
    "runtime-clairvoyant": "EASY on the actual runtimes (ordering and backfilling)",
    "classification-guarded": CLASSIFIED_VARIANTS["classification-guarded"],
}

#: ``--predictor``: the runtime predictors (:mod:`batsched_ml.scheduler.predictors`). All but
#: ``actual`` are capped by the requested time.
PREDICTORS: dict[str, str] = {
    "requested": "the user's requested time",
    "actual": "the actual runtime (clairvoyant reference)",
    "easy++": "mean of the user's last two runtimes (Tsafrir et al.), with shortest-job "
    "backfilling",
    "fixed": "a fixed time (10 minutes: the start of a correction-only policy)",
    "adaboost": "AdaBoost regression on the SWF fields, retrained weekly",
    "profile": "the user's last job of a matching profile (Galleguillos et al.)",
    "su": "the SU framework: Levenshtein clusters of user and job name, nearest neighbours, SVR",
}

#: ``--correction``: what to do when a running job reaches its predicted end (never past the
#: requested time).
CORRECTIONS: dict[str, str] = {
    "none": "the prediction stands (the job runs on to its requested time)",
    "simple": "+1 h, up to 7 days of running",
    "power": "+15 x 2^(i-2) min at the i-th correction",
}

#: ``--dispatcher``: EASY backfilling with the ``--policy`` order, or the dispatchers of
#: Galleguillos et al., or EASY with probabilistic backfilling (Nissimov and Feitelson), in the
#: ``--policy`` order too.
DISPATCHERS: dict[str, str] = {
    "easy": "EASY backfilling in the --policy order",
    "sjf": "shortest predicted runtime first, no backfilling",
    "ljf": "longest predicted runtime first, no backfilling",
    "prb": "urgency (wait / expected wait of the job's queue) first, ties by demand, every "
    "job that fits starts",
    "cph": "a CP-SAT plan of the 32 most urgent jobs minimising their total wait, then PRB's "
    "allocation",
    "probabilistic": "EASY that also backfills a job whose runtime, by its user's history, "
    "probably ends before the reservation (Nissimov and Feitelson)",
}

#: The dispatchers of Galleguillos et al.'s predictor x dispatcher study (the related-work page).
RELATED_DISPATCHERS: tuple[str, ...] = ("easy", "sjf", "ljf", "prb", "cph")

#: How each dispatcher that orders the queue itself does it (for the messages that say so); the
#: others (easy, probabilistic) take ``--policy``'s order.
DISPATCHER_ORDERS: dict[str, str] = {
    "sjf": "shortest predicted runtime first",
    "ljf": "longest predicted runtime first",
    "prb": "by urgency: the wait over the expected wait of its queue",
    "cph": "a CP-SAT plan of the most urgent jobs",
}

#: EASY's starvation threshold: a job waiting this long is served in submission order.
STARVATION_THRESHOLD_HOURS = 72.0

#: the classifier's features (``--feature-mode``): from every job finished before the
#: submission, or from the jobs of previous weeks only (the paper's simplification)
FEATURE_MODES: tuple[str, ...] = ("online", "weekly")

#: how far a shaken copy of a trace moves each submission at most, either way, by default
#: (:mod:`batsched_ml.workload.shake`; ``--shake-seconds``, a campaign's ``shake_seconds``)
SHAKE_SECONDS = 60


def described(methods: Mapping[str, str]) -> str:
    """``name: what it does; ...``: a ``--help`` text made from a registry table, so the help
    never lists a method the scheduler lacks or misses one it has."""
    return "; ".join(f"{name}: {text}" for name, text in methods.items())


def run_title(config: Mapping[str, Any]) -> str:
    """``fcfs (base)``, then the predictor, correction and dispatcher a run used when they are
    not the defaults, so two runs of one trace never share a title:
    ``fcfs (base; predictor easy++, correction power, dispatcher prb)``, and the classifier's
    options first (``fcfs (classification-idempotent; classifier [threshold=0.6])``). The one
    title of a run:
    the command line, ``collect``'s report and the pages print it
    (:meth:`batsched_ml.runs.replaying.ReplayConfig.title`)."""
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
