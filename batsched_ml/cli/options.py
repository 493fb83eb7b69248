"""The options several commands share, and the run configuration they make.

The scheduler's options (``replay``, ``serve``, ``collect``) and the forest's (those and
``trainer``) are declared once here, their method lists and help written from
:mod:`batsched_ml.registry`, and turned into one
:class:`~batsched_ml.runs.replaying.ReplayConfig` by :func:`config`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batsched_ml.errors import ConfigError
from batsched_ml.plugins import Choices
from batsched_ml.predict.params import ForestParams
from batsched_ml.registry import (
    CORRECTIONS,
    DISPATCHERS,
    FEATURE_MODES,
    POLICIES,
    PREDICTORS,
    STARVATION_THRESHOLD_HOURS,
    VARIANTS,
    described,
)
from batsched_ml.trainer import DEADLINE, needs_nothing, unused_trainer_options

if TYPE_CHECKING:  # the command line imports the run's modules only when a command runs
    from batsched_ml.runs.replaying import ReplayConfig


def hours(text: str) -> float | None:
    """``--starvation-threshold``: hours as seconds, or ``None`` for none."""
    if text.lower() in ("none", "off", "inf"):
        return None
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("the starvation threshold must be positive (or 'none')")
    return value * 3600.0


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``--trainer-deadline``, ``--idle-timeout``)."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def seconds_or_zero(text: str) -> float:
    """A finite number of seconds, 0 or more (a timeout whose 0 means forever, a wait)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds >= 0")
    return value


def count(text: str) -> int:
    """A whole number, 1 or more (workers, processors)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number >= 1")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def share(text: str) -> float:
    """A share in (0, 1]."""
    value = _number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1]")
    return value


def share_or_all(text: str) -> float | None:
    return None if text == "all" else share(text)


def add_forest_options(parser: argparse.ArgumentParser) -> None:
    """The forest set-up, shared by the scheduler's commands and the trainer (they must agree)."""
    parser.add_argument(
        "--trees", type=int, default=ForestParams.n_estimators, help="Random Forest size"
    )
    parser.add_argument(
        "--window",
        type=lambda text: None if text == "all" else int(text),
        default=ForestParams.window,
        metavar="N|all",
        help="train on the N most recent finished jobs (default %(default)s), or 'all'",
    )
    parser.add_argument(
        "--max-samples",
        type=share_or_all,
        default=ForestParams.max_samples,
        metavar="SHARE|all",
        help="each tree learns from this share of the training set, in (0, 1] (default "
        "%(default)s: within 0.5 point of accuracy on the five paper traces and 2 to 5 times "
        "faster, docs/speed.md), or 'all' (scikit-learn's bootstrap of the whole set, the "
        "paper's)",
    )


def add_force_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace whole an output folder that holds another run",
    )


def add_scheduler_options(parser: argparse.ArgumentParser) -> None:
    """Every setting of the scheduler: its methods (named in :mod:`batsched_ml.registry`), their
    options, and EASY's."""
    parser.add_argument(
        "--policy",
        default="fcfs",
        choices=Choices(sorted(POLICIES), "policy"),
        help="queue order: "
        + described(POLICIES)
        + "; or a plug-in: an import path package.module:Class or an entry point of group "
        "batsched_ml.policies",
    )
    parser.add_argument(
        "--variant", default="base", choices=list(VARIANTS), help=described(VARIANTS)
    )
    parser.add_argument(
        "--predictor",
        default="requested",
        choices=Choices(list(PREDICTORS), "predictor"),
        help="runtime prediction the scheduler plans with: "
        + described(PREDICTORS)
        + ". All but actual are capped by the requested time. Or a plug-in: an import path "
        "package.module:Class or an entry point of group batsched_ml.predictors",
    )
    parser.add_argument(
        "--predictor-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a constructor parameter of the predictor, e.g. alpha=1.5 or regressor=rf for su, "
        "seconds=900 for fixed, n_estimators=100 for adaboost (repeatable)",
    )
    parser.add_argument(
        "--classifier-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the classified variants' classifier (repeatable): threshold=0.6 "
        "(small iff the forest's probability of small exceeds it; 0.5: the forest's vote), "
        "small_order=probability (small jobs by decreasing probability of being small, "
        "rather than by the policy), divider_quantile=0.4 (the divider is this quantile of "
        "the finished runtimes rather than the median; with --trainer inprocess), "
        "threshold_rule=cost (the threshold chosen each week by the expected cost of false "
        "small and false large jobs; cost_weeks=4; kill_budget=0.15 to call at most that share "
        "of the recent jobs small wrongly), drift_retrain=true (retrain within the "
        "week when the last day's error jumps by drift_jump=0.1; with --trainer inprocess), "
        "leaky_features=all|weekly (LEAKY, for explaining the paper's figures only: features "
        "from earlier jobs' true classes, finished or not). See docs/classification.md and "
        "docs/closing-the-gap.md",
    )
    parser.add_argument(
        "--correction",
        default="none",
        choices=list(CORRECTIONS),
        help="walltime correction of a running job that reaches its predicted end: "
        + described(CORRECTIONS),
    )
    parser.add_argument(
        "--dispatcher",
        default="easy",
        choices=list(DISPATCHERS),
        help=described(DISPATCHERS) + " (Galleguillos et al.)",
    )
    parser.add_argument(
        "--dispatcher-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the probabilistic dispatcher: epsilon (the chance a pass may take "
        "of delaying the queue head, default 0.1), min_history (a user's finished jobs before "
        "its own distribution is used, default 5), window (finished jobs kept, default 100); "
        "or of the cph dispatcher's planner: window (jobs the CP model "
        "schedules, default 32), budget (CP-SAT deterministic time per decision, default "
        "0.001), wall_limit (a wall-clock cap in seconds per decision, default none: a capped "
        "decision depends on the machine's load, so the run warns), random_state (repeatable)",
    )
    parser.add_argument(
        "--feature-mode",
        default="online",
        choices=FEATURE_MODES,
        help="classifier features from every job finished before the submission (online), or "
        "from jobs of previous weeks only (the paper's simplification)",
    )
    add_forest_options(parser)
    parser.add_argument(
        "--starvation-threshold",
        type=hours,
        default=STARVATION_THRESHOLD_HOURS * 3600.0,
        metavar="HOURS",
        help=f"jobs waiting longer go to the head of the queue, oldest first (default "
        f"{STARVATION_THRESHOLD_HOURS:g}; 'none' disables)",
    )
    parser.add_argument(
        "--no-backfilling",
        action="store_true",
        help="stop each pass at the first job that does not fit (plain list scheduling)",
    )


def add_trainer_options(parser: argparse.ArgumentParser) -> None:
    """Who trains a classified run's weekly models."""
    parser.add_argument(
        "--trainer",
        default="process",
        metavar="process|inprocess|ENDPOINT",
        help="who trains the weekly models of a classified variant: a side trainer process "
        "started and stopped by this command (default; models in OUT/models), this process, or "
        "a trainer already running at ENDPOINT (batsched-ml trainer). Same results either way.",
    )
    parser.add_argument(
        "--trainer-store",
        metavar="DIR",
        help="where the trainer at --trainer ENDPOINT publishes its models (its --store; "
        "default: OUT/models)",
    )
    parser.add_argument(
        "--trainer-deadline",
        type=seconds,
        metavar="SECONDS",
        help="how long to wait for a weekly model before going on with the last good one "
        f"(default {DEADLINE:g})",
    )


def key_values(items: list[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` items of a repeatable option, as a mapping."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


#: The repeatable ``KEY=VALUE`` options and the configuration fields they fill.
_PARAMS = (
    ("predictor_option", "predictor_params", "--predictor-option"),
    ("dispatcher_option", "dispatcher_params", "--dispatcher-option"),
    ("classifier_option", "classifier_params", "--classifier-option"),
)

#: The options whose value is a configuration field of the same name.
_PLAIN = (
    "policy",
    "variant",
    "predictor",
    "correction",
    "dispatcher",
    "feature_mode",
    "starvation_threshold",
)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The scheduler settings given on the command line, as
    :class:`~batsched_ml.runs.replaying.ReplayConfig` fields (an option absent from ``args``, as
    ``collect``'s are when not given, is absent here too)."""
    given = vars(args)
    out: dict[str, Any] = {name: given[name] for name in _PLAIN if name in given}
    for dest, name, option in _PARAMS:
        if dest in given:
            out[name] = key_values(given[dest], option)
    if "no_backfilling" in given:
        out["backfilling"] = not given["no_backfilling"]
    forest = {
        name: given[dest]
        for dest, name in (("trees", "n_estimators"), ("window", "window"))
        if dest in given
    }
    if "max_samples" in given:
        forest["max_samples"] = given["max_samples"]
    if forest:
        out["forest"] = forest
    return out


def config(args: argparse.Namespace) -> ReplayConfig:
    """The run configuration of a command with every scheduler option; refused, before
    anything is written, with the trainer's options it would not use
    (:func:`~batsched_ml.trainer.unused_trainer_options`) and with a setting its scheduler
    would not read (:func:`~batsched_ml.runs.replaying.not_applied`, the rule the scheduler is
    made by: asked here, a refusal leaves no run folder behind)."""
    from batsched_ml.runs.replaying import ReplayConfig, not_applied

    fields = settings(args)
    fields["forest"] = ForestParams(**fields["forest"])
    built = ReplayConfig(**fields)
    unused = unused_trainer_options(
        built.classified,
        getattr(args, "trainer", "inprocess"),
        getattr(args, "trainer_store", None),
        getattr(args, "trainer_deadline", None),
        getattr(args, "stop_trainer", False),
    )
    if unused is not None:
        raise ConfigError(unused)
    refusal = not_applied(built)
    if refusal is not None:
        raise ConfigError(refusal)
    return built


@contextlib.contextmanager
def progress_bar(quiet: bool, total: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """A bar counting finished jobs, and the callback that moves it; with ``--quiet``, neither
    (``None``: tqdm is not even imported, a few hundredths of a second of a short replay)."""
    if quiet:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="job", desc=label) as bar:

        def progress(done: int) -> None:
            bar.update(done - bar.n)

        yield progress


@contextlib.contextmanager
def trainer_for(args: argparse.Namespace, config, out_dir: Path, run: dict | None = None):
    """The trainer a classified run uses, from its options (:func:`.trainer.lifecycle.trainer`).

    A run trained in process, or one that classifies nothing with no trainer of its own to
    stop, gets ``None`` here as there, without the trainer's modules (ZeroMQ's among them:
    0.03 s of a short replay's start) being imported."""
    choice = getattr(args, "trainer", "inprocess")
    store, deadline = getattr(args, "trainer_store", None), getattr(args, "trainer_deadline", None)
    if needs_nothing(config.classified, choice):
        yield None
        return
    from batsched_ml.trainer.lifecycle import trainer

    with trainer(
        config,
        out_dir,
        run,
        choice=choice,
        store=store,
        deadline=DEADLINE if deadline is None else deadline,
        stop=getattr(args, "stop_trainer", False),
    ) as chosen:
        yield chosen


def trainer_faults(events: list[dict] | None) -> int:
    """Say, in one line, the weeks a classified run went without the side trainer's model (it
    weathered the fault with the last good model, or every job large, and went on): the run is
    then not the method's, which its exit status says too (:data:`.exits.DEGRADED`); 0 when
    every week had its model."""
    from batsched_ml.cli.exits import DEGRADED

    faults = [e for e in events or [] if e.get("using") != "new model"]
    if not faults:
        return 0
    first = faults[0]
    print(
        f"batsched-ml: warning: the side trainer failed in {len(faults)} week(s) (first: week "
        f"{first['week']}, {first['event']}: {first.get('detail', '')}); they ran with the "
        f"{first.get('using', 'last good model')} instead of their own model, so this is not "
        "the method's run (summary.json: trainer_events)",
        file=sys.stderr,
    )
    return DEGRADED
