"""A replay: a workload through the embedded simulator and the scheduler, then its outputs.

This module wires the pure parts together; it is what ``batsched-ml replay`` runs. The scheduler
answers either in process (no serialisation) or over ZeroMQ through the same codec as with real
Batsim; both give the same job table byte for byte.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from batsched_ml import registry
from batsched_ml.errors import ConfigError, check_positive
from batsched_ml.gc_control import alive_frozen, collector_paused
from batsched_ml.predict.params import ForestParams
from batsched_ml.predict.training import InProcessTrainer, Trainer
from batsched_ml.protocol.codec_v5 import features_for, through_batsim5_json
from batsched_ml.protocol.events import Message
from batsched_ml.results.measured import MeasuredPredictor as MeasuredPredictor
from batsched_ml.scheduler.classified import NOT_OPTIONS as CLASSIFIER_NOT_OPTIONS
from batsched_ml.scheduler.classified import Classifier, ClassifyingScheduler
from batsched_ml.scheduler.core import BatchScheduler
from batsched_ml.scheduler.correction import get_correction
from batsched_ml.scheduler.dispatchers import PLANNERS as PLANNERS  # benchmarks patch it
from batsched_ml.scheduler.dispatchers import make_dispatcher, order_for, planner_kwargs
from batsched_ml.scheduler.guard import GuardOptions, split_options
from batsched_ml.scheduler.parameters import constructor_kwargs
from batsched_ml.scheduler.policies import get_policy
from batsched_ml.scheduler.predictors import (
    PREDICTORS,
    make_predictor,
    predictor_class,
    predictor_kwargs,
)
from batsched_ml.sim.csim import Simulator
from batsched_ml.sim.simulator import Batsim5, BatsimSimulator
from batsched_ml.workload.batsim5 import from_batsim5, to_batsim5


@dataclass(frozen=True)
class ReplayConfig:
    """The one run specification: what a replay (or ``serve``) schedules with, as plain values,
    so that it is written next to the results (``as_dict``: ``run.json``, ``summary.json``) and
    names the run (:meth:`title`).

    Frozen and checked once, when made (:meth:`validate`): the command line, the Python API,
    campaigns (every combination of their grid is accepted or refused here) and ``serve`` build
    it, and nothing changes it afterwards (``dataclasses.replace`` makes a new, checked one).
    """

    policy: str = "fcfs"
    variant: str = "base"
    predictor: str = "requested"  # the runtime predictor (``--predictor``)
    correction: str = "none"
    dispatcher: str = "easy"
    predictor_params: dict[str, Any] = field(default_factory=dict)  # ``--predictor-option``
    dispatcher_params: dict[str, Any] = field(default_factory=dict)  # ``--dispatcher-option``
    starvation_threshold: float | None = registry.STARVATION_THRESHOLD_HOURS * 3600.0
    backfilling: bool = True
    feature_mode: str = "online"
    forest: ForestParams = field(default_factory=ForestParams)
    classifier_params: dict[str, Any] = field(default_factory=dict)  # ``--classifier-option``

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check the names (plug-ins resolved: :mod:`batsched_ml.plugins`) and the combination.

        Every predictor x correction x dispatcher x variant runs (see
        :mod:`batsched_ml.scheduler.classified` for classes with a predictor), except what
        contradicts itself: a predictor (or its options) with ``runtime-clairvoyant``, whose
        predictor is the actual runtime, a ``--policy`` other than fcfs with a dispatcher
        that orders the queue itself, and the probabilistic dispatcher with anything but the
        requested time planned with and backfilling on (:meth:`_check_probabilistic`)."""
        if self.starvation_threshold is not None:
            check_positive("the starvation threshold (seconds, or none)", self.starvation_threshold)
        if self.variant not in registry.VARIANTS:
            raise ConfigError(
                f"unknown variant {self.variant!r} (choose from {', '.join(registry.VARIANTS)})"
            )
        if self.variant == "runtime-clairvoyant" and (
            self.predictor != "requested" or self.predictor_params
        ):
            option = "--predictor-option" if self.predictor == "requested" else "--predictor"
            raise ConfigError(
                f"{option} does not go with the runtime-clairvoyant variant, whose predictor is "
                "the actual runtime (--predictor actual with another variant)"
            )
        if self.predictor_params:
            typed = predictor_kwargs(self.predictor, self.predictor_params)
            object.__setattr__(self, "predictor_params", typed)  # frozen: typed once, here
        else:
            predictor_class(self.predictor)  # a clear error for an unknown name or plug-in
        get_policy(self.policy)  # a clear error for an unknown name or a bad plug-in
        get_correction(self.correction)
        if self.dispatcher not in registry.DISPATCHERS:
            known = ", ".join(registry.DISPATCHERS)
            raise ConfigError(f"unknown dispatcher {self.dispatcher!r} (choose from {known})")
        if self.dispatcher_params:
            typed = planner_kwargs(self.dispatcher, self.dispatcher_params)
            object.__setattr__(self, "dispatcher_params", typed)
        if self.classifier_params:
            self._check_classifier_params()
        if self.variant == "class-clairvoyant":
            self._check_no_forest()
        if self.dispatcher == "probabilistic":
            self._check_probabilistic()
        if self.dispatcher in registry.DISPATCHER_ORDERS and self.policy != "fcfs":
            raise ConfigError(
                f"the {self.dispatcher} dispatcher orders the queue itself "
                f"({registry.DISPATCHER_ORDERS[self.dispatcher]}); --policy {self.policy} goes "
                "with the easy dispatcher"
            )

    def _check_probabilistic(self) -> None:
        """The probabilistic dispatcher plans with requested times and its own runtime
        distribution (:mod:`batsched_ml.scheduler.probabilistic`): what would replace either,
        or turn its backfilling off, is refused rather than silently mixed in."""
        if self.variant == "runtime-clairvoyant":
            raise ConfigError(
                "the probabilistic dispatcher does not go with the runtime-clairvoyant variant "
                "(it backfills on a runtime distribution; the variant knows the runtimes)"
            )
        if self.predictor != "requested":  # its options (a job without walltime) apply
            raise ConfigError(
                f"--predictor {self.predictor} does not go with the probabilistic dispatcher, "
                "which plans with requested times and its own runtime distribution"
            )
        if not self.backfilling:
            raise ConfigError(
                "--no-backfilling does not go with the probabilistic dispatcher (a way of "
                "backfilling)"
            )

    def _check_no_forest(self) -> None:
        """The class-clairvoyant variant trains no forest (the true classes need none): a forest
        setting other than the divider's quantile would be recorded and never applied. A
        ``max_samples`` of None passes: the former default, which the records of runs made
        before it changed hold (:func:`config_of_record` reads them back)."""
        default = dataclasses.replace(
            ForestParams(),
            divider_quantile=self.forest.divider_quantile,
            max_samples=None if self.forest.max_samples is None else ForestParams.max_samples,
        )
        changed = [
            f"{f.name}={getattr(self.forest, f.name)!r}"
            for f in dataclasses.fields(ForestParams)
            if getattr(self.forest, f.name) != getattr(default, f.name)
        ]
        if changed:
            raise ConfigError(
                f"forest {', '.join(changed)}: the class-clairvoyant variant trains no forest "
                "(leave the forest's settings at their defaults)"
            )

    def _check_classifier_params(self) -> None:
        """The classifier's options (:class:`~batsched_ml.scheduler.classified.Classifier`),
        typed; ``divider_quantile`` goes to the forest's parameters too (the trainer computes
        the divider)."""
        if not self.classified:
            raise ConfigError(
                f"--classifier-option goes with the classified variants, not {self.variant}"
            )
        options, guard_options = split_options(self.classifier_params)
        guarded = self.variant == "classification-guarded"
        if guard_options and not guarded:
            raise ConfigError(
                f"{', '.join(guard_options)}: the guard's options go with the "
                f"classification-guarded variant, not {self.variant}"
            )
        typed = constructor_kwargs(
            Classifier, "the classifier", options, exclude=CLASSIFIER_NOT_OPTIONS
        )
        if guarded and typed.get("threshold_rule", "fixed") != "fixed":
            # the cost rule reads each finished job's applied class from the classifier's
            # records, which the guard overrides in its weeks off: refused, not misread
            raise ConfigError(
                "threshold_rule=cost does not go with the classification-guarded variant"
            )
        typed.update(constructor_kwargs(GuardOptions, "the guard", guard_options))
        if self.variant == "class-clairvoyant" and set(typed) - {"divider_quantile"}:
            raise ConfigError(
                "the class-clairvoyant variant takes no classifier option but divider_quantile "
                "(the true classes have no probability)"
            )
        object.__setattr__(self, "classifier_params", typed)
        quantile = typed.get("divider_quantile", self.forest.divider_quantile)
        if quantile != self.forest.divider_quantile:
            forest = dataclasses.replace(self.forest, divider_quantile=quantile)
            object.__setattr__(self, "forest", forest)

    def title(self) -> str:
        """``fcfs (base; predictor easy++, ...)``: :func:`batsched_ml.registry.run_title`."""
        return registry.run_title(self.as_dict())

    @property
    def classified(self) -> bool:
        return self.variant in registry.CLASSIFIED_VARIANTS

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.policy,
            "variant": self.variant,
            "predictor": self.predictor,
            "starvation_threshold": self.starvation_threshold,
            "backfilling": self.backfilling,
        }
        if self.correction != "none":
            out["correction"] = self.correction
        if self.dispatcher != "easy":
            out["dispatcher"] = self.dispatcher
        if self.predictor_params:
            out["predictor_params"] = dict(sorted(self.predictor_params.items()))
        if self.dispatcher_params:
            out["dispatcher_params"] = dict(sorted(self.dispatcher_params.items()))
        if self.classifier_params:  # only then: runs without options keep their identities
            out["classifier_params"] = dict(sorted(self.classifier_params.items()))
        if self.classified:
            out["feature_mode"] = self.feature_mode
            out["forest"] = self.forest.as_dict()
        return out


def config_of_record(record: Mapping[str, Any]) -> ReplayConfig:
    """The :class:`~batsched_ml.runs.replaying.ReplayConfig` whose ``as_dict()`` is ``record`` (a
    run.json's ``config``)."""
    forest = record.get("forest")
    # as_dict leaves out max_samples None (the former default) and divider_quantile 0.5
    params = ForestParams(**{"max_samples": None, **forest}) if forest else ForestParams()
    return ReplayConfig(
        policy=record["policy"],
        variant=record["variant"],
        predictor=record.get("predictor", "requested"),
        correction=record.get("correction", "none"),
        dispatcher=record.get("dispatcher", "easy"),
        predictor_params=dict(record.get("predictor_params") or {}),
        dispatcher_params=dict(record.get("dispatcher_params") or {}),
        classifier_params=dict(record.get("classifier_params") or {}),
        starvation_threshold=record.get("starvation_threshold"),
        backfilling=record.get("backfilling", True),
        feature_mode=record.get("feature_mode", "online"),
        forest=params,
    )


@dataclass
class ReplayResult:
    rows: list[str]
    messages: int
    scheduler: BatchScheduler
    #: the workload's description, every key but its ``jobs`` and ``profiles``: a result does
    #: not keep the job objects alive (on HPC2N a fifth of the peak memory of a replay, whose
    #: files are written after it; the caller may still hold them)
    workload: dict[str, Any]
    config: ReplayConfig
    workload_jobs: int = 0  # the workload's jobs (``len(workload["jobs"])``)
    summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0  # wall time of the replay (a measurement: timing.json, not summary)
    #: what simulated Batsim: ``"compiled"`` (``_csim.c``) or ``"python"`` (the reference);
    #: the scheduler is the Python one either way (:mod:`batsched_ml.sim.csim`)
    engine: str = "python"
    #: the Batsim simulated: 4 (4.2.1) or 5 (5.0.0-rc2, its protocol's JSON in between)
    batsim: int = 4


class _Reads:
    """A config that records which of its fields are read (:func:`make_scheduler`)."""

    def __init__(self, config: ReplayConfig) -> None:
        self.config = config
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self.config, name)


def unread_settings(config: ReplayConfig, read: set[str]) -> list[str]:
    """The fields of ``config`` set away from their defaults that nothing read: settings the
    run would not apply."""
    out = []
    for spec in dataclasses.fields(config):
        if spec.name in read:
            continue
        if spec.default is not dataclasses.MISSING:
            default = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            default = spec.default_factory()
        else:
            default = dataclasses.MISSING
        if getattr(config, spec.name) != default:
            out.append(spec.name)
    return out


def make_scheduler(
    config: ReplayConfig,
    *,
    calendar: dict[str, Any] | None = None,
    trainer: Trainer | None = None,
    audit: bool = False,
) -> BatchScheduler:
    """The scheduler a config asks for, from its parts: the predictor, the dispatcher with
    its queue order (``--policy``'s under EASY), the correction and, for the classified
    variants, the classifier and the safeguard. ``calendar`` holds the workload's
    ``unix_start_time``, ``time_zone_string`` and ``time_zone`` (Batsim does not forward them).

    The predictor is measured (:class:`MeasuredPredictor`: ``predictions.csv``) except under a
    classified variant with the requested time, which has never written predictions.

    Fails closed: a setting that no part of the scheduler read (a field added to
    :class:`ReplayConfig` and not wired, or one that does not apply to this run, such as a
    forest parameter of a base run) raises :class:`ConfigError` naming it, instead of a run
    that would record it as applied."""
    scheduler, refusal = _built(config, calendar=calendar, trainer=trainer, audit=audit)
    if refusal is not None:
        raise ConfigError(refusal)
    return scheduler


def not_applied(config: ReplayConfig) -> str | None:
    """Why a run of ``config`` would be refused for settings its scheduler does not read (the
    line :func:`make_scheduler` raises), or ``None``: the same rule, asked before a run (a
    campaign keeps the combinations of its grid that a replay would apply)."""
    return _built(config, calendar=None, trainer=None, audit=False)[1]


def _built(
    config: ReplayConfig,
    *,
    calendar: dict[str, Any] | None,
    trainer: Trainer | None,
    audit: bool,
) -> tuple[BatchScheduler, str | None]:
    reads = _Reads(config)
    scheduler = _build_scheduler(
        cast(ReplayConfig, reads), calendar=calendar, trainer=trainer, audit=audit
    )
    unread = unread_settings(config, reads.read)
    if not unread:
        return scheduler, None
    values = ", ".join(f"{name}={getattr(config, name)!r}" for name in unread)
    return scheduler, (
        f"{values}: not applied by a {config.title()} run (no part of its scheduler "
        "reads it); leave it at its default"
    )


def _build_scheduler(
    config: ReplayConfig,
    *,
    calendar: dict[str, Any] | None,
    trainer: Trainer | None,
    audit: bool,
) -> BatchScheduler:
    if config.variant == "runtime-clairvoyant":
        predictor: Any = make_predictor("actual")
    else:
        predictor = make_predictor(config.predictor, config.predictor_params, calendar)
    if not config.classified or config.predictor != "requested":
        name = None if config.predictor in PREDICTORS else config.predictor  # a plug-in's
        predictor = MeasuredPredictor(predictor, name)
    dispatcher = make_dispatcher(
        config.dispatcher,
        config.dispatcher_params,
        backfilling=config.backfilling,
        shortest_first=getattr(predictor, "backfill_shortest_first", False),
    )
    policy = order_for(config.dispatcher) or config.policy
    correction = get_correction(config.correction)
    if config.classified:
        if trainer is None:
            params = config.forest
            if config.variant == "class-clairvoyant":  # the true class needs no model
                params = dataclasses.replace(params, n_estimators=0)
            trainer = InProcessTrainer(params)
        options = dict(config.classifier_params)
        if config.forest.divider_quantile != 0.5:
            options.setdefault("divider_quantile", config.forest.divider_quantile)
        return ClassifyingScheduler(
            policy,
            variant=config.variant,
            trainer=trainer,
            calendar=calendar,
            # the true classes use no feature: the mode is not read, so a mode other than
            # the default is refused (recorded, it would never apply)
            feature_mode=(
                registry.FEATURE_MODES[0]
                if config.variant == "class-clairvoyant"
                else config.feature_mode
            ),
            starvation_threshold=config.starvation_threshold,
            audit=audit,
            predictor=predictor,
            dispatcher=dispatcher,
            correction=correction,
            classifier_options=options,
        )
    return BatchScheduler(
        policy,
        predictor,
        dispatcher,
        starvation_threshold=config.starvation_threshold,
        correction=correction,
        audit=audit,
    )


def calendar_of(workload: dict[str, Any]) -> dict[str, Any]:
    return {key: workload.get(key) for key in ("unix_start_time", "time_zone_string", "time_zone")}


BATSIM_VERSIONS = (4, 5)


def _simulator_arguments(
    workload: dict[str, Any], config: ReplayConfig, batsim: int = 4
) -> dict[str, Any]:
    """The embedded Batsim's command line for a run: dynamic jobs (acknowledged) on for the
    classified variants, as real Batsim must be started for them; for Batsim 5, what the
    scheduler's hello requests instead (:func:`~batsched_ml.protocol.codec_v5.features_for`), and
    the workload as Batsim 5 reads it (:mod:`batsched_ml.workload.batsim5`)."""
    hosts = [f"host{i}" for i in range(int(workload["nb_res"]))]
    if batsim == 5:
        read = from_batsim5(to_batsim5(workload), "the workload")
        return {"workloads": [read], "hosts": hosts, "batsim5": Batsim5(features_for(config))}
    if batsim != 4:
        raise ConfigError(f"Batsim {batsim}: the embedded simulator plays Batsim 4 or 5")
    dynamic = config.classified
    return {
        "workloads": [workload],
        "hosts": hosts,
        "dynamic_jobs": dynamic,
        "acknowledge_dynamic_jobs": dynamic,
    }


def make_simulator(workload: dict[str, Any], config: ReplayConfig, batsim: int = 4) -> Simulator:
    """The embedded Batsim for an in-process replay: the compiled simulator where it supports
    the run, else the Python one (:mod:`batsched_ml.sim.csim`)."""
    return Simulator(**_simulator_arguments(workload, config, batsim))


def make_peer_simulator(
    workload: dict[str, Any], config: ReplayConfig, batsim: int = 4
) -> BatsimSimulator:
    """The embedded Batsim as a request/reply state machine (``start``, ``step``), for a
    scheduler on the other side of a transport."""
    with collector_paused():
        return BatsimSimulator(**_simulator_arguments(workload, config, batsim))


def run_replay(
    workload: dict[str, Any],
    config: ReplayConfig,
    *,
    progress: Callable[[int], None] | None = None,
    audit: bool = False,
    zmq_endpoint: str | None = None,
    trainer: Trainer | None = None,
    on_reply: Callable[[Message], None] | None = None,
    batsim: int = 4,
) -> ReplayResult:
    """Replay ``workload`` under ``config``, as Batsim ``batsim`` (4 or 5) would run it.
    ``progress`` is called now and then with the number of jobs finished so far. With
    ``zmq_endpoint`` (e.g. ``tcp://127.0.0.1:*`` or an ``ipc://`` path) the scheduler is
    served over ZeroMQ in a thread and the simulator talks to it as Batsim would; otherwise
    they talk in process (for Batsim 5, through its JSON both ways). Every run is decided by
    the one Python scheduler (:func:`make_scheduler`), whichever simulator plays Batsim."""
    scheduler = make_scheduler(config, calendar=calendar_of(workload), trainer=trainer, audit=audit)
    handler: Callable[[Message], Message] = scheduler.handle
    if on_reply is not None:

        def handler(message: Message) -> Message:
            reply = scheduler.handle(message)
            on_reply(reply)
            return reply

    started = time.perf_counter()
    if zmq_endpoint is not None:
        reference = make_peer_simulator(workload, config, batsim)
        messages = _run_over_zmq(reference, handler, zmq_endpoint)
        out = _result(reference.rows, messages, scheduler, workload, config, "python", started)
        out.batsim = batsim
        return out
    if batsim == 5:  # the scheduler reads and writes Batsim 5's JSON, as when served
        handler = through_batsim5_json(handler, features_for(config))
    # one stack from the freeze to the end of the run: whatever is raised in between (a
    # signal's KeyboardInterrupt included), the collector gets its objects back
    with contextlib.ExitStack() as frozen:
        with collector_paused():
            sim = make_simulator(workload, config, batsim)
            sim.prepare()
            # the workload and the loaded jobs, frozen before the collector runs again: not
            # traversed by its passes during the replay (see alive_frozen)
            frozen.enter_context(alive_frozen(sim.module))
        messages = sim.run(handler, progress)
    result = _result(sim.rows, messages, scheduler, workload, config, sim.engine, started)
    result.batsim = batsim
    return result


def _result(
    rows: list[str],
    messages: int,
    scheduler: BatchScheduler,
    workload: dict[str, Any],
    config: ReplayConfig,
    engine: str,
    started: float,
) -> ReplayResult:
    """A replay's result: the workload's description without its jobs (not kept alive)."""
    described = {key: value for key, value in workload.items() if key not in ("jobs", "profiles")}
    jobs = len(workload.get("jobs", []))
    result = ReplayResult(rows, messages, scheduler, described, config, jobs, engine=engine)
    result.seconds = time.perf_counter() - started
    return result


def _run_over_zmq(
    sim: BatsimSimulator, handler: Callable[[Message], Message], endpoint: str
) -> int:
    """Serve ``handler`` in a thread and run ``sim`` against it, over ZeroMQ, in the protocol
    of the Batsim ``sim`` plays (Batsim 5: the features of the scheduler's hello must be
    those the simulator was set up with)."""
    from batsched_ml.transport.v4 import run_batsim_peer
    from batsched_ml.transport.v5 import run_batsim5_peer, serve

    v5 = sim.batsim5

    bound: list[str] = []
    ready = threading.Event()
    failure: list[BaseException] = []

    def on_bound(actual: str) -> None:
        bound.append(actual)
        ready.set()

    def server() -> None:
        try:
            if v5 is None:
                serve(endpoint, handler, protocol="4", timeout=60.0, on_bound=on_bound)
            else:
                serve(endpoint, handler, protocol="5", features=v5.features, on_bound=on_bound)
        except BaseException as exc:  # reported in the caller's thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=server, name="batsched-ml-serve", daemon=True)
    thread.start()
    ready.wait(30)
    if failure:
        raise failure[0]
    if v5 is None:
        count = run_batsim_peer(sim, bound[0], timeout=60.0)
    else:

        def same_features(features: dict[str, bool]) -> BatsimSimulator:
            if features != v5.features:
                raise RuntimeError(f"the hello requests {features}, not {v5.features}")
            return sim

        count = run_batsim5_peer(same_features, bound[0], timeout=60.0)[1]
    thread.join(30)
    if failure:
        raise failure[0]
    return count
