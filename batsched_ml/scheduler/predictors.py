"""Runtime predictors, pluggable (scikit-learn-like: plain constructor parameters).

A predictor answers, at submission, how long a job is expected to run; the scheduler uses the
answer to order the queue (SPF, SAF, WFP, the dispatchers' orders), to compute a reservation from
the running jobs' expected ends, and to decide whether a job can be backfilled. ``observe`` is
told every finished job (not the attempts the scheduler killed itself) so that learning
predictors can update themselves.

A job without walltime (traces with no requested times at all) is estimated at
``no_walltime_estimate`` seconds, a day by default: an infinite estimate would let every job
backfill ahead of the reservation and starve the queue head.

A new predictor is a class with ``estimate(job, profile) -> float`` and ``observe(job,
runtime)`` (a ``name`` too, for the reports; a ``backfill_shortest_first = True`` attribute asks
EASY for shortest-job backfilling, as EASY++). Outside this package it needs no registration:
``--predictor mypkg.module:MyPredictor`` (an import path) or an entry point of group
``batsched_ml.predictors`` (see :mod:`batsched_ml.plugins`); its constructor's parameters with
defaults are its ``--predictor-option`` keys. A built-in one is added to :data:`PREDICTORS` and
to :data:`batsched_ml.registry.PREDICTORS`.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

import numpy as np

from batsched_ml import registry
from batsched_ml.errors import check_integer, check_positive
from batsched_ml.job import Job
from batsched_ml.plugins import load_plugin
from batsched_ml.scheduler.parameters import constructor_kwargs
from batsched_ml.scheduler.su import SUPrediction

DAY = 86_400.0


class Predictor(Protocol):
    name: str

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float: ...

    def observe(self, job: Job, runtime: float) -> None: ...


class RequestedTime:
    """The user's requested time (the job's walltime): EASY's classic estimate."""

    name = "requested"

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.no_walltime_estimate = no_walltime_estimate

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        return job.walltime if job.walltime is not None else self.no_walltime_estimate

    def observe(self, job: Job, runtime: float) -> None:
        return None


class ActualRuntime:
    """The clairvoyant estimate: the job's real duration, read from its ``delay`` profile (the
    scheduler gets the profiles in SIMULATION_BEGINS). A reference, never a real scheduler."""

    name = "actual"

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.no_walltime_estimate = no_walltime_estimate

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        if profile is None or "delay" not in profile:
            raise ValueError(f"job {job.id}: the clairvoyant estimate needs its delay profile")
        delay = float(profile["delay"])
        if job.walltime is not None:
            return min(delay, job.walltime)
        return delay

    def observe(self, job: Job, runtime: float) -> None:
        return None


class EasyPlusPlus:
    """EASY++'s prediction (Tsafrir et al., 2007; seed 002, Table 2): the mean of the user's
    last two finished runtimes (one if only one is known), capped by the requested time; the
    requested time for a user with no finished job yet. The user is the SWF user number
    (``user`` in the job's fields). Paired with shortest-job backfilling (SJBF) by the
    scheduler, as in EASY++."""

    name = "easy++"
    backfill_shortest_first = True

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.no_walltime_estimate = no_walltime_estimate
        self.history: dict[Any, list[float]] = {}

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        requested = job.walltime if job.walltime is not None else self.no_walltime_estimate
        last = self.history.get(job.field("user"))
        if not last:
            return requested
        return max(1.0, min(sum(last) / len(last), requested))

    def observe(self, job: Job, runtime: float) -> None:
        last = self.history.setdefault(job.field("user"), [])
        last.append(float(runtime))
        del last[:-2]


class FixedPrediction:
    """A fixed prediction (10 minutes by default, capped by the requested time): the start of
    the correction-only policies of seed 002 (section 4.4), where the walltime correction does
    all the work."""

    name = "fixed"

    def __init__(self, seconds: float = 600.0) -> None:
        check_positive("seconds", seconds)
        self.seconds = seconds

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        if job.walltime is None:
            return self.seconds
        return min(self.seconds, job.walltime)

    def observe(self, job: Job, runtime: float) -> None:
        return None


class AdaBoostPrediction:
    """AdaBoost regression of the runtime (seed 002, Algorithm 1) on what is known at submission:
    user, group, executable, queue and partition numbers (the SWF fields the converter keeps),
    requested processors and requested time. Retrained every ``retrain_every`` seconds of
    submission time (a week by default, as the classifier) on the last ``window`` finished
    jobs, once ``min_train`` are known; the requested time until then. Predictions are capped
    by the requested time and at least one second. ``random_state`` makes it deterministic."""

    name = "adaboost"
    FIELDS = ("user", "group", "executable", "queue", "partition")

    def __init__(
        self,
        n_estimators: int = 50,
        retrain_every: float = 7 * DAY,
        window: int = 20_000,
        min_train: int = 100,
        random_state: int = 0,
        no_walltime_estimate: float = DAY,
    ) -> None:
        check_integer("n_estimators", n_estimators, 1)
        check_positive("retrain_every", retrain_every)
        check_integer("window", window, 1)
        check_integer("min_train", min_train, 1)
        check_integer("random_state", random_state, 0)
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.n_estimators = n_estimators
        self.retrain_every = retrain_every
        self.window = window
        self.min_train = min_train
        self.random_state = random_state
        self.no_walltime_estimate = no_walltime_estimate
        self.rows: list[list[float]] = []
        self.runtimes: list[float] = []
        self.model: Any = None
        self.trained_until = 0.0  # submission time up to which the schedule has retrained
        self.fits = 0

    def features(self, job: Job) -> list[float]:
        requested = job.walltime if job.walltime is not None else self.no_walltime_estimate
        values = (job.field(k) for k in self.FIELDS)
        return [-1.0 if v is None else float(v) for v in values] + [
            float(job.res),
            float(requested),
        ]

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        requested = job.walltime if job.walltime is not None else self.no_walltime_estimate
        if job.subtime >= self.trained_until + self.retrain_every:
            self.retrain(job.subtime)
        if self.model is None:
            return requested
        predicted = float(self.model.predict(self.features(job)))
        return max(1.0, min(predicted, requested))

    def retrain(self, now: float) -> None:
        """Fit on the jobs finished so far (the last ``window``); the schedule's next
        retraining comes ``retrain_every`` after the boundary ``now`` falls in."""
        periods = (now - self.trained_until) // self.retrain_every
        self.trained_until += periods * self.retrain_every
        if len(self.runtimes) < self.min_train:
            return
        from sklearn.ensemble import AdaBoostRegressor

        model = AdaBoostRegressor(n_estimators=self.n_estimators, random_state=self.random_state)
        model.fit(self.rows[-self.window :], self.runtimes[-self.window :])
        self.model = BoostedTrees(model)
        self.fits += 1

    def observe(self, job: Job, runtime: float) -> None:
        self.rows.append(self.features(job))
        self.runtimes.append(float(runtime))


class BoostedTrees:
    """A fitted scikit-learn ``AdaBoostRegressor`` that predicts one row at a time fast.

    scikit-learn's ``predict`` costs about 3 ms per call whatever the batch (50 trees, each
    validating its input); a scheduler predicts one job at a time. This walks each tree's arrays
    in Python (features as float32, as the trees compare them) and takes the same weighted
    median, for the same value (tested against ``predict``) in about 1 % of the time."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.weights = [float(w) for w in model.estimator_weights_[: len(model.estimators_)]]
        self.trees = [
            (
                tree.tree_.children_left.tolist(),
                tree.tree_.children_right.tolist(),
                tree.tree_.feature.tolist(),
                tree.tree_.threshold.tolist(),
                tree.tree_.value[:, 0, 0].tolist(),
            )
            for tree in model.estimators_
        ]

    def predict(self, row: list[float]) -> float:
        x = np.asarray(row, dtype=np.float32).tolist()  # the trees' own rounding
        predictions = []
        for left, right, feature, threshold, value in self.trees:
            node = 0
            while left[node] != -1:
                node = left[node] if x[feature[node]] <= threshold[node] else right[node]
            predictions.append(value[node])
        # the weighted median of AdaBoost.R2: the smallest prediction whose cumulative weight
        # (predictions sorted, ties in numpy's argsort order) reaches half the total
        order = np.argsort(np.asarray(predictions)).tolist()
        cumulative = np.cumsum([self.weights[i] for i in order])
        index = int(np.argmax(cumulative >= 0.5 * cumulative[-1]))
        return float(predictions[order[index]])


class ProfileHeuristic:
    """The per-user job-profile heuristic of seed 001 (section 3): predict the runtime of the
    user's last finished job with a similar profile, the first rule that matches winning:

    1. the full profile: name, queue, requested time and processors;
    2. the same with the name's prefix (the name without its trailing digits: "run12" -> "run");
    3. name, queue and requested time (processors may differ);
    4. the same with the prefix;
    5. the same name;
    6. the same prefix;

    else the requested time; always capped by the requested time (at least one second).

    SWF has no job names: the name is the job's ``name`` field when the workload has one, else
    its executable number (the application), whose "prefix" is itself, so on SWF traces rules 2,
    4 and 6 repeat rules 1, 3 and 5. The queue is the SWF queue number, the processors the
    requested processors. :attr:`last_rule` says which rule gave the last prediction (0: none).
    """

    name = "profile"
    RULES = 6

    def __init__(self, no_walltime_estimate: float = DAY) -> None:
        check_positive("no_walltime_estimate", no_walltime_estimate)
        self.no_walltime_estimate = no_walltime_estimate
        self.last: dict[Any, list[dict[tuple[Any, ...], float]]] = {}
        self.last_rule = 0

    def keys(self, job: Job) -> list[tuple[Any, ...]]:
        name = job.field("name")
        if name is None:
            name = job.field("executable")
        name = str(name)
        prefix = name.rstrip("0123456789") or name
        queue, walltime = job.field("queue"), job.walltime
        return [
            (name, queue, walltime, job.res),
            (prefix, queue, walltime, job.res),
            (name, queue, walltime),
            (prefix, queue, walltime),
            (name,),
            (prefix,),
        ]

    def estimate(self, job: Job, profile: dict[str, Any] | None) -> float:
        requested = job.walltime if job.walltime is not None else self.no_walltime_estimate
        history = self.last.get(job.field("user"))
        if history is not None:
            for rule, key in enumerate(self.keys(job), start=1):
                runtime = history[rule - 1].get(key)
                if runtime is not None:
                    self.last_rule = rule
                    return max(1.0, min(runtime, requested))
        self.last_rule = 0
        return requested

    def observe(self, job: Job, runtime: float) -> None:
        history = self.last.setdefault(job.field("user"), [{} for _ in range(self.RULES)])
        for table, key in zip(history, self.keys(job), strict=True):
            table[key] = float(runtime)


#: The built-in predictors, by ``--predictor`` name.
PREDICTORS: dict[str, type] = {
    "requested": RequestedTime,
    "actual": ActualRuntime,
    "easy++": EasyPlusPlus,
    "fixed": FixedPrediction,
    "adaboost": AdaBoostPrediction,
    "profile": ProfileHeuristic,
    "su": SUPrediction,
}
assert tuple(PREDICTORS) == tuple(registry.PREDICTORS), "the predictors are registry.PREDICTORS"


def predictor_class(name: str) -> type:
    """The class of predictor ``name``: a built-in one, else a plug-in (an import path
    ``module:Class`` or an entry point, :mod:`batsched_ml.plugins`); a
    :class:`~batsched_ml.errors.ConfigError` naming what failed."""
    kind = PREDICTORS.get(name)
    if kind is None:
        kind = load_plugin(name, "predictor", ("estimate", "observe"), tuple(PREDICTORS))
    return kind


def predictor_kwargs(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against the constructor of predictor ``name`` and converted to the
    type of each parameter's default (so that command-line strings work). An unknown name or
    parameter, or a value of the wrong type, raises :class:`~batsched_ml.errors.ConfigError`
    naming it."""
    return constructor_kwargs(
        predictor_class(name), f"predictor {name}", params, exclude=("calendar",)
    )


def make_predictor(
    name: str, params: dict[str, Any] | None = None, calendar: dict[str, Any] | None = None
) -> Predictor:
    """The predictor called ``name`` (built-in or plug-in) built with ``params`` (see
    :func:`predictor_kwargs`); a predictor whose constructor takes a ``calendar`` (it reads the
    time of day) is given the trace's."""
    kind = predictor_class(name)
    kwargs = predictor_kwargs(name, params or {})
    if "calendar" in inspect.signature(kind).parameters:
        kwargs["calendar"] = calendar
    predictor: Predictor = kind(**kwargs)
    return predictor
