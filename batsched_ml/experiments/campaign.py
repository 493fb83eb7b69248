"""Campaigns: traces x policies x variants (x seeds) expanded into replays, run as Dask tasks.

A campaign file (TOML) names what to run and where results go::

    [campaign]
    output = "runs/paper"                 # run folders: OUTPUT/TRACE/POLICY-VARIANT[-seedN]
    trace_dir = "../shared/traces"        # TRACE.swf.gz files (relative to the campaign file)
    traces = ["KTH-SP2-1996-2.1-cln"]     # names in trace_dir, or paths to .swf / .swf.gz
                                          # files (relative: from trace_dir): trace_entry
    policies = ["fcfs", "spf"]
    variants = ["base", "classification-idempotent"]
    seeds = [0]                           # the forest's random_state; optional, default [0]
    copies = 1                            # optional: shaken copies of each trace (input
    shake_seconds = 60                    # shaking, workload/shake.py); copy 0 is the trace
    predictors = ["requested", "su"]      # optional: --predictor values (default: requested)
    corrections = ["none", "power"]       # optional: --correction values (default: none)
    dispatchers = ["easy", "cph"]         # optional: --dispatcher values (default: easy)
    predictor_options = [{}, {alpha = 1.5}]   # optional: --predictor-option settings, one
    dispatcher_options = [{}, {window = 64}]  # per run ({} = defaults); see options_text
    classifier_options = [{}, {threshold = 0.6}]  # optional: --classifier-option settings

    [[campaign.grid]]                     # optional, repeatable: a product of its own, with
    dispatchers = ["sjf", "prb"]          # the keys it sets replacing those above; the
                                          # campaign is the union of its grids

    [dask]
    scheduler = ""                        # an existing cluster's address; "" = a local one
    workers = 0                           # local workers; 0 = one per core

Seeds only apply to variants that train a forest (``classification``,
``classification-idempotent``); the others are deterministic and run once. Seed 0 keeps the
plain folder name, so the runs of ``paper-results`` count as done. ``copies = N`` replays every
run on N copies of its trace: copy 0 the trace itself, copy k > 0 the trace shaken with seed k
(Tsafrir et al.'s input shaking: each submission moved by up to ``shake_seconds``), in folders
ending ``-copyK``; the closing-the-gap table (:mod:`batsched_ml.results.gap`) pairs the runs of
one copy. Every combination of the grid that the run configuration accepts runs (one
``ReplayConfig`` validation decides, none written here); dispatchers that order the queue
themselves (sjf, ljf, prb, cph), for example, run with ``fcfs`` only. The names of predictors,
corrections and dispatchers other than the defaults extend the folder name
(``fcfs-base-su-power-cph``).
Options go with the predictors and dispatchers that take them, each ``key=value`` after its
owner's name (``fcfs-base-su-alpha=1.5-cph-window=64``); runs without options keep their
folders. Classifier options go with the classified variants (``class-clairvoyant``: only
``divider_quantile``), after the variant (``fcfs-classification-idempotent-threshold=0.6``).

Before the first run, every trace is checked (:func:`check_inputs`): one missing or unreadable
stops the campaign with one line naming them (exit 66), nothing run and nothing written. Each
replay is one Dask task (:func:`run_one`): it loads and converts its trace, replays it
with the in-process trainer and writes the run folder; a run whose ``summary.json`` exists is
skipped (a campaign resumes after an interruption); a failing run is recorded with its error
and the others go on. The results table, one row per run (status, seconds, the main figures),
is written to ``OUTPUT/results.parquet`` and ``OUTPUT/results.csv``; ``batsched-ml report
OUTPUT`` reads it. The same file runs on a laptop or, with ``[dask] scheduler``, on a cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import tomllib
import traceback
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pandas as pd

from batsched_ml.errors import ConfigError, InputMissing, UserError
from batsched_ml.plugins import Choices
from batsched_ml.predict.params import ForestParams
from batsched_ml.registry import (
    CORRECTIONS,
    DISPATCHERS,
    FEATURE_MODES,
    STARVATION_THRESHOLD_HOURS,
    VARIANTS,
)
from batsched_ml.results.gap import write_gap
from batsched_ml.results.runfolder import (
    RUN_FILE,
    RunIdentity,
    empty_run_folder,
    mark_interrupted,
    same_run,
)
from batsched_ml.results.table import RESULT_COLUMNS, SUMMARY_COLUMNS, read_results
from batsched_ml.runs.pipeline import WorkloadCache, identity_of, replay_into
from batsched_ml.runs.replaying import BATSIM_VERSIONS, ReplayConfig, not_applied, planner_kwargs
from batsched_ml.scheduler.policies import POLICIES
from batsched_ml.scheduler.predictors import PREDICTORS, predictor_kwargs
from batsched_ml.workload import archive, shipped
from batsched_ml.workload.shake import DEFAULT_SECONDS as DEFAULT_SHAKE_SECONDS

#: the forest's defaults (the command line's)
FOREST_DEFAULTS = ForestParams()
#: the variants that train a forest, the costly ones (:data:`COST_FACTORS`; which runs a seed
#: multiplies is decided by what their scheduler reads, :func:`expand`)
SEEDED_VARIANTS = ("classification", "classification-idempotent", "classification-guarded")


class CampaignError(UserError, ValueError):
    """A campaign file that cannot be run; the message names the file and the field."""


@dataclass(frozen=True)
class RunSpec:
    trace: str
    policy: str
    variant: str
    seed: int = 0
    predictor: str = "requested"
    correction: str = "none"
    dispatcher: str = "easy"
    predictor_options: str = ""  # ``key=value,...`` sorted by key (:func:`options_text`)
    dispatcher_options: str = ""
    copy: int = 0  # the shaken copy of the trace (0: the trace itself)
    shake_seconds: int = DEFAULT_SHAKE_SECONDS
    classifier_options: str = ""  # the classifier's, as predictor_options
    #: the trace's file when the campaign names it by path (``/data/slice.swf``); ``""``: the
    #: trace named ``trace`` in the campaign's trace_dir (:func:`trace_path`)
    trace_file: str = ""
    backfilling: bool = True  # False: list scheduling (``--no-backfilling``)
    #: hours a job waits before it goes to the head of the queue; None: never
    starvation_hours: float | None = STARVATION_THRESHOLD_HOURS
    #: the classifier's features and the weekly forest (``--feature-mode``, ``--trees``,
    #: ``--window``, ``--max-samples``), where a variant reads them (the defaults elsewhere)
    feature_mode: str = "online"
    trees: int = FOREST_DEFAULTS.n_estimators
    window: int | None = FOREST_DEFAULTS.window  # None: every finished job
    max_samples: float | None = FOREST_DEFAULTS.max_samples  # None: all (the paper's)
    #: the Batsim the embedded simulator plays (``--batsim``): 4 (4.2.1) or 5 (5.0.0-rc2)
    batsim: int = 4

    def folder(self, output: Path) -> Path:
        """``TRACE/POLICY-VARIANT``, then the predictor, correction and dispatcher when they
        are not the defaults (their names do not overlap), each followed by its options
        (``su-alpha=1.5``, ``cph-window=64``), then ``-seedN`` for seed N > 0; the classifier's
        options right after the variant. Runs without options keep the folders they had before
        options existed; ``-copyK`` for a shaken copy K > 0 (``-copyKsS`` when it is shaken
        by S seconds rather than the default)."""
        parts = [self.policy, self.variant]
        if self.classifier_options:
            parts.extend(self.classifier_options.split(","))
        for key, value, default in self._learning():
            if value != default:
                parts.append(f"{key}={'all' if value is None else value}")
        for value, default, options in (
            (self.predictor, "requested", self.predictor_options),
            (self.correction, "none", ""),
            (self.dispatcher, "easy", self.dispatcher_options),
        ):
            if value != default:
                parts.append(value)
            if options:
                parts.extend(options.split(","))
        if not self.backfilling:
            parts.append("nobackfill")
        if self.starvation_hours != STARVATION_THRESHOLD_HOURS:
            hours = self.starvation_hours
            parts.append("starve" + ("none" if hours is None else f"{hours:g}h"))
        if self.seed:
            parts.append(f"seed{self.seed}")
        if self.batsim != 4:
            parts.append(f"batsim{self.batsim}")
        if self.copy:
            seconds = self.shake_seconds
            parts.append(
                f"copy{self.copy}" + (f"s{seconds}" if seconds != DEFAULT_SHAKE_SECONDS else "")
            )
        return output / self.trace / "-".join(parts)

    @property
    def shaking(self) -> dict[str, int] | None:
        """The seed and amount of the shaken copy (``None``: the trace itself)."""
        return {"seed": self.copy, "seconds": self.shake_seconds} if self.copy else None

    def _learning(self) -> list[tuple[str, Any, Any]]:
        """The feature mode and forest settings as folder parts: key, value, default."""
        return [
            ("features", self.feature_mode, "online"),
            ("trees", self.trees, FOREST_DEFAULTS.n_estimators),
            ("window", self.window, FOREST_DEFAULTS.window),
            ("max_samples", self.max_samples, FOREST_DEFAULTS.max_samples),
        ]

    def config(self) -> Any:
        config = ReplayConfig(
            policy=self.policy,
            variant=self.variant,
            predictor=self.predictor,
            correction=self.correction,
            dispatcher=self.dispatcher,
            predictor_params=_parse_options(self.predictor_options),
            dispatcher_params=_parse_options(self.dispatcher_options),
            classifier_params=_parse_options(self.classifier_options),
            backfilling=self.backfilling,
            starvation_threshold=(
                None if self.starvation_hours is None else self.starvation_hours * 3600.0
            ),
            feature_mode=self.feature_mode,
        )
        forest = dataclasses.replace(
            config.forest,
            random_state=self.seed,
            n_estimators=self.trees,
            window=self.window,
            max_samples=self.max_samples,
        )
        return dataclasses.replace(config, forest=forest)


#: The fields that name a run, columns of the results table: all but the trace's file (a
#: campaign's trace names are unique, :func:`_one_file_per_name`; the file is where it was read).
SPEC_FIELDS = tuple(f.name for f in fields(RunSpec) if f.name != "trace_file")


def options_text(options: dict[str, Any], where: str) -> str:
    """A TOML table of constructor parameters as the canonical text a :class:`RunSpec` holds
    (``alpha=1.5,regressor=rf``, keys sorted): hashable, one column of the results table, and
    part of a folder name, so keys and values must be plain and free of ``, = /``."""
    items = []
    for key, value in sorted(options.items()):
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str | int | float):
            raise CampaignError(f"{where}: {key} must be a string or a number")
        text = str(value)
        if any(c in f"{key}{text}" for c in ",=/\\") or not key or not text:
            raise CampaignError(f"{where}: {key}={text!r}: a key or value holds , = / or \\")
        items.append(f"{key}={text}")
    return ",".join(items)


def _parse_options(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",")) if text else {}


@dataclass
class Campaign:
    output: Path
    trace_dir: Path
    runs: list[RunSpec]
    scheduler: str = ""
    workers: int = 0
    source: Path | None = None
    #: other campaigns' output folders whose runs of the same settings, complete and made by
    #: this code, are linked into this one instead of being replayed again
    reuse: list[Path] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


#: Every key of a campaign file's ``[campaign]`` table (and of its ``[[campaign.grid]]`` tables,
#: but ``output``, ``trace_dir`` and ``grid``), what it sets: a key not listed here is refused,
#: so a misspelt or unsupported setting never runs as its default. docs/campaigns.md's
#: reference is tested against it.
CAMPAIGN_KEYS: dict[str, str] = {
    "output": "the campaign's folder (default runs/campaign), relative to the file",
    "trace_dir": "where traces named without a path are (default traces), relative to the file",
    "reuse": "other campaigns' output folders, relative to the file: a run one of them holds "
    "(the same settings and trace, complete, made by this code) is linked, not replayed",
    "traces": "trace names (NAME.swf.gz or NAME.swf in trace_dir) or paths to .swf / .swf.gz",
    "policies": "queue orders (required): "
    + ", ".join(sorted(POLICIES))
    + ", or a plug-in (an import path package.module:Class or an entry point)",
    "variants": "variants (required): " + ", ".join(VARIANTS),
    "seeds": "forest seeds, for the variants that train one (default [0])",
    "copies": "shaken copies of each trace, the trace itself included (default 1)",
    "shake_seconds": f"how far a shaken copy moves submissions, with copies > 1 (default "
    f"{DEFAULT_SHAKE_SECONDS})",
    "predictors": "runtime predictors (default [requested]): "
    + ", ".join(PREDICTORS)
    + ", or a plug-in (an import path or an entry point)",
    "corrections": "walltime corrections (default [none]): " + ", ".join(CORRECTIONS),
    "dispatchers": "dispatchers (default [easy]): " + ", ".join(DISPATCHERS),
    "predictor_options": "a list of tables of predictor parameters, as --predictor-option",
    "dispatcher_options": "a list of tables of dispatcher parameters, as --dispatcher-option",
    "classifier_options": "a list of tables of classifier options, as --classifier-option",
    "backfilling": "true (backfilling, the default), false (list scheduling), or a list of both",
    "starvation_threshold": "hours before a waiting job goes first (default 72), 'none' to "
    "disable, or a list of them",
    "feature_modes": "the classifier's features (default [online]): online, weekly, as "
    "--feature-mode",
    "trees": f"the weekly forest's trees (default {FOREST_DEFAULTS.n_estimators}), or a list",
    "window": "the most recent finished jobs the forest trains on (default "
    f"{FOREST_DEFAULTS.window}), 'all', or a list",
    "max_samples": "each tree's share of the training set, in (0, 1] (default "
    f"{FOREST_DEFAULTS.max_samples}), 'all', or a list",
    "batsim": "the Batsim the embedded simulator plays: 4 (4.2.1, the default), 5 "
    "(5.0.0-rc2), or a list",
    "grid": "[[campaign.grid]] tables: the campaign is the union of their products",
}
DASK_KEYS: dict[str, str] = {
    "scheduler": "the address of an existing Dask cluster (default: a local one)",
    "workers": "local workers (default: one per core)",
}


def _check_keys(table: dict[str, Any], known: dict[str, str], where: str, path: Path) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise CampaignError(
            f"{path}: {where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(known)})"
        )


def _axis(table: dict[str, Any], key: str, path: Path, default: Any, check: Any) -> list:
    """A setting given once or as a list of values (each run takes one)."""
    value = table.get(key, default)
    values = value if isinstance(value, list) else [value]
    if not values:
        raise CampaignError(f"{path}: [campaign] {key} must not be an empty list")
    return [check(v) for v in values]


def _backfilling(path: Path) -> Any:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise CampaignError(f"{path}: [campaign] backfilling must be true or false")
        return value

    return check


def _starvation(path: Path) -> Any:
    def check(value: Any) -> float | None:
        if value == "none":
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value > 0)
        ):
            raise CampaignError(
                f"{path}: [campaign] starvation_threshold must be hours > 0 or 'none'"
            )
        return float(value)

    return check


def _learning_value(path: Path, key: str) -> Any:
    """The check of a forest setting of a campaign file: the value the command line's option
    takes ('all' for None), checked by the forest's own rules (:class:`ForestParams`)."""
    field_name = {"trees": "n_estimators"}.get(key, key)

    def check(value: Any) -> Any:
        value = None if value == "all" and key != "trees" else value
        if isinstance(value, int) and not isinstance(value, bool) and key == "max_samples":
            value = float(value)
        try:
            ForestParams(**{field_name: value})
        except (ConfigError, ValueError, TypeError) as exc:
            raise CampaignError(f"{path}: [campaign] {key} {value!r}: {exc}") from None
        return value

    return check


def _batsim(path: Path) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool) or value not in BATSIM_VERSIONS:
            raise CampaignError(f"{path}: [campaign] batsim must be 4 or 5, not {value!r}")
        return int(value)

    return check


def _list(table: dict[str, Any], key: str, path: Path, allowed=None, default=None) -> list:
    value = table.get(key, default)
    if not isinstance(value, list) or not value:
        raise CampaignError(f"{path}: [campaign] {key} must be a non-empty list")
    if allowed is not None:
        unknown = [v for v in value if v not in allowed]
        if unknown:
            raise CampaignError(
                f"{path}: [campaign] {key}: unknown {unknown} (choose from {', '.join(allowed)})"
            )
    return value


def load_campaign(path: str | Path) -> Campaign:
    """Read and expand a campaign file; relative paths are taken from the file's folder."""
    path = Path(path)
    try:
        config = tomllib.loads(path.read_text())
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(f"{path}: not valid TOML: {exc}") from None
    table = config.get("campaign")
    if not isinstance(table, dict):
        raise CampaignError(f"{path}: no [campaign] table")
    _check_keys(config, {"campaign": "", "dask": ""}, "top level", path)
    _check_keys(table, CAMPAIGN_KEYS, "[campaign]", path)
    base = path.parent
    trace_dir = (base / table.get("trace_dir", "traces")).resolve()
    grids = table.get("grid", [{}])
    if not isinstance(grids, list) or not all(isinstance(g, dict) for g in grids):
        raise CampaignError(
            f"{path}: [campaign] grid must be an array of tables ([[campaign.grid]])"
        )
    grid_keys = {
        k: v for k, v in CAMPAIGN_KEYS.items() if k not in ("output", "trace_dir", "reuse", "grid")
    }
    reuse = table.get("reuse", [])
    if not isinstance(reuse, list) or not all(isinstance(r, str) for r in reuse):
        raise CampaignError(f"{path}: [campaign] reuse must be a list of folders")
    for grid in grids:
        _check_keys(grid, grid_keys, "[[campaign.grid]]", path)
    runs: list[RunSpec] = []
    for grid in grids:
        merged = {**{k: v for k, v in table.items() if k not in ("grid", "reuse")}, **grid}
        for spec in _expand_table(merged, path, trace_dir):
            if spec not in runs:
                runs.append(spec)
    if not runs:
        raise CampaignError(f"{path}: no run: the run configuration refuses every combination")
    shaking = [t["shake_seconds"] for t in (table, *grids) if "shake_seconds" in t]
    if shaking and not any(spec.copy > 0 for spec in runs):  # else set and never applied
        raise CampaignError(
            f"{path}: [campaign] shake_seconds = {shaking[0]} moves the submissions of the "
            "shaken copies, and there is none: copies = 1 replays the trace itself only"
        )
    _one_file_per_name(runs, trace_dir, path)
    dask = config.get("dask", {})
    if not isinstance(dask, dict):
        raise CampaignError(f"{path}: [dask] must be a table")
    _check_keys(dask, DASK_KEYS, "[dask]", path)
    workers = dask.get("workers", 0)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise CampaignError(f"{path}: [dask] workers must be a whole number (0: one per core)")
    return Campaign(
        output=(base / table.get("output", "runs/campaign")).resolve(),
        trace_dir=trace_dir,
        runs=runs,
        scheduler=str(dask.get("scheduler", "")),
        workers=workers,
        source=path,
        reuse=[(base / r).resolve() for r in reuse],
    )


def _expand_table(table: dict[str, Any], path: Path, trace_dir: Path) -> list[RunSpec]:
    traces = _list(table, "traces", path)
    if not all(isinstance(t, str) and t.strip() for t in traces):
        raise CampaignError(f"{path}: [campaign] traces must be names or paths (strings)")
    # plug-ins as on the command line: an import path or an entry point, checked with the run
    policies = _list(table, "policies", path, Choices(sorted(POLICIES), "policy"))
    variants = _list(table, "variants", path, list(VARIANTS))
    seeds = _list(table, "seeds", path, default=[0])
    if not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise CampaignError(f"{path}: [campaign] seeds must be non-negative integers")
    copies = table.get("copies", 1)
    shake_seconds = table.get("shake_seconds", DEFAULT_SHAKE_SECONDS)
    for key, value, least in (("copies", copies, 1), ("shake_seconds", shake_seconds, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise CampaignError(f"{path}: [campaign] {key} must be an integer >= {least}")
    predictors = _list(
        table, "predictors", path, Choices(list(PREDICTORS), "predictor"), default=["requested"]
    )
    corrections = _list(table, "corrections", path, list(CORRECTIONS), default=["none"])
    dispatchers = _list(table, "dispatchers", path, list(DISPATCHERS), default=["easy"])
    predictor_options = _option_list(table, "predictor_options", path)
    dispatcher_options = _option_list(table, "dispatcher_options", path)
    classifier_options = _option_list(table, "classifier_options", path)
    backfillings = _axis(table, "backfilling", path, True, _backfilling(path))
    starvations = _axis(
        table, "starvation_threshold", path, STARVATION_THRESHOLD_HOURS, _starvation(path)
    )
    runs = expand(
        traces,
        policies,
        variants,
        seeds,
        predictors,
        corrections,
        dispatchers,
        predictor_options,
        dispatcher_options,
        copies=copies,
        shake_seconds=shake_seconds,
        classifier_options=classifier_options,
        trace_dir=trace_dir,
    )
    runs = [
        dataclasses.replace(spec, backfilling=backfilling, starvation_hours=hours)
        for spec in runs
        for backfilling in backfillings
        for hours in starvations
    ]
    learning = {
        "feature_mode": _list(table, "feature_modes", path, list(FEATURE_MODES), ["online"]),
        **{
            key: _axis(table, key, path, getattr(RunSpec, key), _learning_value(path, key))
            for key in ("trees", "window", "max_samples")
        },
    }
    runs = _with_learning(runs, learning, path)
    batsims = _axis(table, "batsim", path, 4, _batsim(path))
    runs = [dataclasses.replace(spec, batsim=batsim) for spec in runs for batsim in batsims]
    # an option table that fits no run is a mistake (a typo, a parameter of another
    # predictor): say so rather than run nothing for it
    for key, texts, names, check in (
        ("predictor_options", predictor_options, predictors, predictor_kwargs),
        ("dispatcher_options", dispatcher_options, dispatchers, planner_kwargs),
        ("classifier_options", classifier_options, variants, _classifier_check),
    ):
        used = {getattr(spec, key) for spec in runs}
        for text in texts:
            if text and text not in used:
                reasons = filter(None, (_refusal(name, text, check) for name in names))
                why = "; ".join(reasons) or "no run of this grid takes options"
                raise CampaignError(f"{path}: [campaign] {key} {{{text}}} fits no run: {why}")
    # a queue order, variant, predictor or dispatcher that is in no run is a mistake (a
    # plug-in that does not load, a name no other axis combines with): said with the run
    # configuration's reason rather than left out of the campaign without a word
    axes = {
        "policy": policies,
        "variant": variants,
        "predictor": predictors,
        "correction": corrections,
        "dispatcher": dispatchers,
    }
    for key, attribute in (
        ("policies", "policy"),
        ("variants", "variant"),
        ("predictors", "predictor"),
        ("dispatchers", "dispatcher"),
    ):
        used = {getattr(spec, attribute) for spec in runs}
        for name in axes[attribute]:
            if name not in used:
                why = _why_none({**axes, attribute: [name]})
                raise CampaignError(f"{path}: [campaign] {key}: {name} is in no run: {why}")
    # a seed no run takes (only variants that train no forest, which run with seed 0) would
    # be set and never applied
    seeded = {spec.seed for spec in runs}
    for seed in seeds:
        if seed != 0 and seed not in seeded:
            raise CampaignError(
                f"{path}: [campaign] seeds {seed} fits no run: a seed is the forest's, and no "
                f"variant of this grid trains one ({', '.join(variants)} run once, with seed 0)"
            )
    return runs


def _with_learning(runs: list[RunSpec], axes: dict[str, list[Any]], path: Path) -> list[RunSpec]:
    """``runs`` times the feature modes and forest settings of ``axes``, as seeds multiply:
    only the runs whose scheduler reads them (the variants that train a forest, or classify
    with features), the others once, with the defaults. A value that fits no run is refused,
    with the run configuration's reason."""
    out: dict[RunSpec, None] = {}
    refusals: dict[tuple[str, Any], str] = {}
    defaults = {key: getattr(RunSpec, key) for key in axes}
    for spec in runs:
        for combination in itertools.product(*axes.values()):
            setting = dict(zip(axes, combination, strict=True))
            candidate = dataclasses.replace(spec, **setting)
            why = refusal(candidate)
            if why is None:
                out.setdefault(candidate)
                continue
            for key, value in setting.items():
                if value != defaults[key]:
                    refusals.setdefault((key, value), why)
            if refusal(spec) is None:  # the run itself, with the defaults
                out.setdefault(spec)
    kept = list(out)
    for key, values in axes.items():
        used = {getattr(spec, key) for spec in kept}
        for value in values:
            if value not in used and value != defaults[key]:  # (the defaults: every run's)
                shown = "all" if value is None else value
                why = refusals.get((key, value), "no run of this grid reads it")
                name = "feature_modes" if key == "feature_mode" else key
                raise CampaignError(f"{path}: [campaign] {name} {shown} fits no run: {why}")
    return kept


def _why_none(axes: dict[str, list[str]]) -> str:
    """The run configuration's refusal of the first combination of ``axes`` (policy, variant,
    predictor, correction, dispatcher: the grid's, one of them narrowed to the name in no run)."""
    for policy, variant, predictor, correction, dispatcher in itertools.product(*axes.values()):
        try:
            RunSpec("", policy, variant, 0, predictor, correction, dispatcher).config()
        except ConfigError as exc:
            return str(exc)
    return "no combination of this grid takes it"


def _option_list(table: dict[str, Any], key: str, path: Path) -> list[str]:
    """``key``: a list of tables of constructor parameters (``[{}, {alpha = 1.5}]``; ``{}``
    is the defaults), as canonical texts."""
    value = table.get(key, [{}])
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise CampaignError(
            f"{path}: [campaign] {key} must be a non-empty list of tables, e.g. [{{}}, {{k = 1}}]"
        )
    return list(dict.fromkeys(options_text(v, f"{path}: [campaign] {key}") for v in value))


def expand(
    traces: list[str],
    policies: list[str],
    variants: list[str],
    seeds: list[int],
    predictors: list[str] = ["requested"],  # noqa: B006 (never mutated)
    corrections: list[str] = ["none"],  # noqa: B006
    dispatchers: list[str] = ["easy"],  # noqa: B006
    predictor_options: list[str] = [""],  # noqa: B006
    dispatcher_options: list[str] = [""],  # noqa: B006
    *,
    copies: int = 1,
    shake_seconds: int = DEFAULT_SHAKE_SECONDS,
    classifier_options: list[str] = [""],  # noqa: B006
    trace_dir: str | Path | None = None,
) -> list[RunSpec]:
    """Every run of the campaign, once, for each of the ``copies`` of each trace (a name, or a
    path: :func:`trace_entry`, relative paths from ``trace_dir``): seeds
    multiply only the runs whose scheduler reads the forest's seed (:func:`valid`: the others
    run once, with seed 0); of the product of the rest, the
    combinations that the run configuration accepts (:func:`valid`: one validation, the
    replay's own). Option texts (see :func:`options_text`) go with the predictors and
    dispatchers whose constructors take them."""
    runs: list[RunSpec] = []
    seen: set[RunSpec] = set()
    for entry in traces:
        trace, trace_file = trace_entry(entry, trace_dir)
        for policy in policies:
            for variant in variants:
                for seed in seeds:
                    for (
                        c_opts,
                        predictor,
                        p_opts,
                        correction,
                        dispatcher,
                        d_opts,
                    ) in itertools.product(
                        classifier_options,
                        predictors,
                        predictor_options,
                        corrections,
                        dispatchers,
                        dispatcher_options,
                    ):
                        spec = RunSpec(
                            trace,
                            policy,
                            variant,
                            seed,
                            predictor,
                            correction,
                            dispatcher,
                            p_opts,
                            d_opts,
                            classifier_options=c_opts,
                            trace_file=trace_file,
                        )
                        if seed and not valid(spec):  # a run that reads no seed (it trains
                            spec = dataclasses.replace(spec, seed=0)  # no forest): once, seed 0
                        if spec in seen or not valid(spec):
                            continue
                        seen.add(spec)
                        runs.extend(
                            dataclasses.replace(spec, copy=copy, shake_seconds=shake_seconds)
                            for copy in range(copies)
                        )
    return runs


#: The endings of an SWF trace's file, gzipped first: the default for a trace named without one.
TRACE_SUFFIXES = (".swf.gz", ".swf")


def trace_entry(entry: str, trace_dir: str | Path | None) -> tuple[str, str]:
    """A trace of a campaign file as the run's trace name and file (:attr:`RunSpec.trace`,
    :attr:`RunSpec.trace_file`). A name (``KTH-SP2-1996-2.1-cln``) is the trace ``NAME.swf.gz``
    (else ``NAME.swf``) of ``trace_dir``: no file of its own. A path (it ends in ``.swf`` or
    ``.swf.gz``, or holds a ``/``; relative: from ``trace_dir``) is that file, and the name is
    its file name without the ending (``/data/slice.swf``: ``slice``, in folder
    ``OUTPUT/slice/...``)."""
    text = entry.strip()
    base = Path(text).name
    for suffix in TRACE_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            name = base[: -len(suffix)]
            break
    else:
        if "/" not in text:
            return text, ""
        name = base
    file = Path(text) if trace_dir is None else Path(trace_dir) / text
    if trace_dir is not None and file.parent == Path(trace_dir) and file.name == f"{name}.swf.gz":
        return name, ""  # the file a name stands for: the same run as the plain name
    return name, str(file)


def trace_path(spec: RunSpec, trace_dir: str | Path, *, fetched: bool = True) -> Path:
    """The trace file of ``spec``: its :attr:`~RunSpec.trace_file`, else ``TRACE.swf.gz`` in
    ``trace_dir`` (``TRACE.swf`` when only that exists), else the shipped or downloaded trace
    of that name (:func:`batsched_ml.workload.shipped.resolve`): a known log not downloaded
    raises :class:`~batsched_ml.workload.archive.TraceNotFetched` (one line saying how to fetch
    it), or with ``fetched=False`` gives the path it would be read from in ``trace_dir``."""
    if spec.trace_file:
        return Path(spec.trace_file)
    gzipped = Path(trace_dir) / f"{spec.trace}.swf.gz"
    plain = Path(trace_dir) / f"{spec.trace}.swf"
    if gzipped.exists() or plain.exists():
        return plain if not gzipped.exists() else gzipped
    # not in trace_dir: a shipped trace, or a log of the archive downloaded to the cache (one
    # not downloaded is the missing file, which the campaign's check names with its fetch)
    try:
        return shipped.resolve(spec.trace, trace_dir)
    except archive.TraceNotFetched:
        if fetched:
            raise
        return gzipped


def _one_file_per_name(runs: list[RunSpec], trace_dir: Path, path: Path) -> None:
    """Two traces of one name would share their run folders: refused."""
    files: dict[str, Path] = {}
    for spec in runs:
        file = trace_path(spec, trace_dir, fetched=False)
        if files.setdefault(spec.trace, file) != file:
            raise CampaignError(
                f"{path}: [campaign] traces {files[spec.trace]} and {file} have the same name "
                f"{spec.trace!r} (their runs would share OUTPUT/{spec.trace}): rename one"
            )


def check_inputs(campaign: Campaign) -> None:
    """Every trace of ``campaign`` is a readable file, or :class:`~.errors.InputMissing` (exit
    66) names those that are not: checked before anything runs or is written, rather than
    each run failing on its own with ``cannot read``."""
    seen: dict[Path, None] = {}
    for spec in campaign.runs:
        seen.setdefault(trace_path(spec, campaign.trace_dir, fetched=False), None)
    missing = [str(f) for f in seen if not (f.is_file() and os.access(f, os.R_OK))]
    if missing:
        where = f"{campaign.source}: " if campaign.source is not None else ""
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        shown = ", ".join(missing[:5]) + more
        raise InputMissing(
            f"{where}{len(missing)} of {len(seen)} trace(s) missing or unreadable: {shown}; "
            "nothing run, nothing written"
        )


def valid(spec: RunSpec) -> bool:
    """Whether a replay accepts ``spec``'s combination (:func:`refusal`)."""
    return refusal(spec) is None


def refusal(spec: RunSpec) -> str | None:
    """Why a replay would refuse ``spec``'s combination, or ``None``: ``ReplayConfig``'s
    validation (the names, the options, what contradicts itself), then a setting its scheduler
    would not read (:func:`~batsched_ml.runs.replaying.not_applied`, the rule the replay
    applies when it starts)."""
    try:
        return not_applied(spec.config())
    except ConfigError as exc:
        return str(exc)


def _classifier_check(variant: str, params: dict) -> dict:
    """``params`` as classifier options of ``variant`` (raises :class:`ConfigError`)."""
    return ReplayConfig(variant=variant, classifier_params=params).classifier_params


def _refusal(name: str, options: str, check: Callable[[str, dict], dict]) -> str | None:
    """Why the predictor or dispatcher ``name`` does not take the option text (``check``
    raises it), or ``None`` if it does."""
    if not options:
        return None
    try:
        check(name, _parse_options(options))
    except ValueError as exc:
        return str(exc)
    return None


def result_row(
    spec: RunSpec,
    folder: Path,
    status: str,
    seconds: float,
    error: str = "",
    rerun_reason: str = "",
) -> dict:
    row: dict[str, Any] = {
        **asdict(spec),
        "status": status,
        "seconds": round(seconds, 1),
        "path": spec.folder(Path(".")).as_posix(),  # relative to the results table's folder
        "rerun_reason": rerun_reason,
        "error": error,
    }
    summary_path = folder / "summary.json"
    if status != "failed" and summary_path.exists():
        summary = json.loads(summary_path.read_text())
        row["run_id"] = summary.get("run_id")
        for key in SUMMARY_COLUMNS:
            row[key] = summary.get(key)
        row["accuracy"] = (summary.get("classification") or {}).get("accuracy")
        prediction = summary.get("prediction") or {}
        for key in ("APA", "MAE", "UR"):
            row[key] = prediction.get(key)
        timing_path = folder / "timing.json"
        if timing_path.exists():
            row["predict_us_per_job"] = json.loads(timing_path.read_text()).get(
                "predict_us_per_job"
            )
    return row


def run_identity(spec: RunSpec, trace_dir: str | Path) -> RunIdentity:
    """The identity of ``spec``'s replay: the same as ``batsched-ml replay`` with the same
    settings on the same trace file gives, so either can resume the other's folder."""
    return identity_of(
        trace_path(spec, trace_dir), spec.config(), shaking=spec.shaking, batsim=spec.batsim
    )


def run_one(
    spec: RunSpec, trace_dir: str, output: str, reuse: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One replay as a task: skipped if its folder holds this very run, complete and made by
    this code (:func:`batsched_ml.results.runfolder.same_run`); else linked from the first of
    the ``reuse`` folders that holds it so (status ``linked``); else (re)made, with the reason;
    its error recorded (not raised) if it fails."""
    folder = spec.folder(Path(output))
    started = time.perf_counter()
    reason = ""
    try:
        identity = run_identity(spec, trace_dir)
        done, reason = same_run(folder, identity)
        if done:
            return result_row(spec, folder, "existing", 0.0)
        for other in reuse:
            source = spec.folder(Path(other))
            if same_run(source, identity)[0]:
                link_run(source, folder)
                return result_row(spec, folder, "linked", time.perf_counter() - started)
        if reason == "not run yet":
            reason = ""

        # the campaign owns its run folders (force); it says the input cleaning once per trace
        replay_into(
            folder,
            trace_path(spec, trace_dir),
            spec.config(),
            shaking=spec.shaking,
            force=True,
            identity=identity,
            say_dropped=False,
            workloads=WORKLOADS,
            batsim=spec.batsim,
        )
    except Exception as exc:  # recorded in the results table; the campaign goes on
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return result_row(spec, folder, "failed", time.perf_counter() - started, last, reason)
    return result_row(spec, folder, "done", time.perf_counter() - started, rerun_reason=reason)


#: The workloads this process loaded for its last runs (a worker replays each trace many times)
WORKLOADS = WorkloadCache()


def link_run(source: Path, folder: Path) -> None:
    """``source``'s run into ``folder``, whose run files are replaced (a folder holding other
    files is refused): each file hard-linked (a copy across file systems), run.json last, so
    that an interruption leaves no folder that looks complete. A run's files are written once
    and never changed in place (a rerun empties its folder first), so two folders can share
    them."""
    empty_run_folder(folder)
    names = sorted(p.name for p in source.iterdir() if p.is_file())
    for name in sorted(names, key=lambda n: n == RUN_FILE):
        try:
            os.link(source / name, folder / name)
        except OSError:
            shutil.copy2(source / name, folder / name)


#: Rough cost of a run relative to a base replay of the same trace (measured whole commands:
#: a classified replay spends most of its time training the weekly forest; CPH plans with
#: CP-SAT). Only the order of the runs depends on it, never a result.
COST_FACTORS = {"variant": {v: 8.0 for v in SEEDED_VARIANTS}, "dispatcher": {"cph": 30.0}}


def estimated_cost(spec: RunSpec, trace_dir: str | Path) -> float:
    """A run's expected duration in arbitrary units: its trace's size times the factors of its
    variant and dispatcher (:data:`COST_FACTORS`)."""
    try:
        size = float(trace_path(spec, trace_dir, fetched=False).stat().st_size)
    except OSError:  # the run will fail fast
        size = 0.0
    return (
        size
        * COST_FACTORS["variant"].get(spec.variant, 1.0)
        * COST_FACTORS["dispatcher"].get(spec.dispatcher, 1.0)
    )


def longest_first(runs: list[RunSpec], trace_dir: str | Path) -> list[RunSpec]:
    """The runs by decreasing :func:`estimated_cost` (ties in campaign order): on a few
    workers, the classic longest-processing-time-first packing."""
    costs = {spec: estimated_cost(spec, trace_dir) for spec in runs}
    return sorted(runs, key=lambda spec: -costs[spec])


def _client(campaign: Campaign, scratch: str):
    from dask.distributed import Client, LocalCluster

    if campaign.scheduler:
        return Client(campaign.scheduler), None
    workers = campaign.workers or os.cpu_count() or 1
    # the worker processes read Dask's logging levels from the environment they start with:
    # without this, a worker whose heartbeat meets the scheduler already closed at the end of
    # a campaign printed an ERROR and two tracebacks after every run had succeeded (a known
    # race of distributed's shutdown); a run's own failure is in its row of the results
    key = "DASK_LOGGING__DISTRIBUTED"
    before = os.environ.get(key)
    os.environ[key] = "critical"
    try:
        with warnings.catch_warnings():
            # the scheduler's HTTP server (no dashboard) takes another port when another
            # campaign's holds Dask's default one: not news either
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=scratch,  # Dask's lock files go with the campaign, not /tmp
            )
    finally:
        if before is None:
            del os.environ[key]
        else:
            os.environ[key] = before
    return Client(cluster), cluster


def _died(exc: BaseException) -> str:
    """The error of a run whose Dask worker died under it, as its results row says it."""
    return (
        "its Dask worker died while running it, as many times as Dask retries a task (out of "
        f"memory, or killed from outside): {type(exc).__name__}"
    )


def _stop_local_workers(client: Any) -> None:
    """Kill the local cluster's worker processes at once: a replay does not stop when its task
    is cancelled, and the nanny would wait 4 s per worker before killing it itself."""
    try:
        pids = client.run(os.getpid, wait=True)
    except Exception:  # the cluster is going away already
        return
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_campaign(
    campaign: Campaign, *, progress: Callable[[dict[str, Any], int, int], None] | None = None
) -> pd.DataFrame:
    """Run every replay of ``campaign`` on Dask and write the results table; return it.

    Interrupted (Ctrl-C, SIGTERM), it stops the local workers at once, marks the runs that
    were under way ``interrupted`` in their run.json, leaves no lock file, and lets the
    interruption through (one ``batsched-ml: interrupted`` line, exit 130/143)."""
    missing = [name for name in ("dask", "distributed", "pyarrow") if find_spec(name) is None]
    if missing:  # pyarrow writes results.parquet, at the end: said before anything runs
        raise UserError(
            f"campaigns need Dask and pyarrow, not installed here ({', '.join(missing)}): "
            "pip install 'dask[distributed]' pyarrow"
        )
    shipped.check_fetched((spec.trace for spec in campaign.runs), campaign.trace_dir)
    from dask.distributed import as_completed
    from distributed import KilledWorker

    check_inputs(campaign)  # before the output folder exists
    campaign.output.mkdir(parents=True, exist_ok=True)
    # a worker killed on purpose is not news: Dask's warnings about it, and multiprocessing's
    # about its semaphores (its tracker process inherits this), stay off the terminal
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::UserWarning:multiprocessing.resource_tracker")
    scratch = tempfile.mkdtemp(prefix="dask-", dir=campaign.output)
    client, cluster = _client(campaign, scratch)
    rows: list[dict[str, Any]] = []
    try:
        # longest first (and with Dask priorities in that order), so that the short runs fill
        # the workers at the end instead of one long run starting last and running alone
        ordered = longest_first(campaign.runs, campaign.trace_dir)
        futures = [
            client.submit(
                run_one,
                spec,
                str(campaign.trace_dir),
                str(campaign.output),
                tuple(str(r) for r in campaign.reuse),
                pure=False,
                priority=len(ordered) - rank,
            )
            for rank, spec in enumerate(ordered)
        ]
        spec_of = {future.key: spec for future, spec in zip(futures, ordered, strict=True)}
        for done, future in enumerate(as_completed(futures), start=1):
            try:
                row = future.result()
            except KilledWorker as exc:  # the run took its worker down (memory, a signal)
                spec = spec_of[future.key]
                folder = spec.folder(campaign.output)
                mark_interrupted(folder, "its Dask worker died")
                row = result_row(spec, folder, "failed", 0.0, _died(exc))
            rows.append(row)
            if progress is not None:
                progress(row, done, len(futures))
    except KeyboardInterrupt:
        if cluster is not None:
            _stop_local_workers(client)
        else:
            client.cancel(futures, force=True)
        for spec in campaign.runs:
            mark_interrupted(spec.folder(campaign.output))
        raise
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=5)
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=5)
        shutil.rmtree(scratch, ignore_errors=True)
        quiet.setLevel(level)
    table = results_table(rows, campaign.runs)
    write_results(table, campaign.output)
    return table


def dropped_by_trace(table: pd.DataFrame, output: Path) -> dict[str, dict[str, int]]:
    """Each trace's jobs dropped by the cleaning rules (``input_cleaning`` of the summary of one
    of its runs: every run of a trace reads the same file), for the traces that lost any."""
    found: dict[str, dict[str, int]] = {}
    for row in table.to_dict("records"):
        trace = str(row["trace"])
        if trace in found or row["status"] == "failed":
            continue
        try:
            summary = json.loads((output / str(row["path"]) / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        found[trace] = dict(summary.get("input_cleaning") or {})
    return {trace: dropped for trace, dropped in found.items() if dropped}


def spec_of_row(row: Any) -> RunSpec:
    """The run a row of a results table names (a dict or a pandas row); the columns a table
    made before a field existed take the field's default, and pandas' missing values (NaN)
    the field's ``None``."""
    values: dict[str, Any] = {}
    for name in SPEC_FIELDS:
        if name not in row:
            continue
        value = row[name]
        if isinstance(value, float) and value != value:  # NaN: a None written to CSV
            value = None if name in _NULLABLE_SPEC_FIELDS else ""
        values[name] = value
    for name in ("seed", "trees", "window", "batsim"):  # whole numbers (pandas: floats)
        if values.get(name) is not None:
            values[name] = int(values[name])
    if "backfilling" in values:
        values["backfilling"] = bool(values["backfilling"])
    for name in ("predictor_options", "dispatcher_options", "classifier_options"):
        if values.get(name) is None:
            values[name] = ""
    return RunSpec(**values)


#: the fields of a run whose value may be None (a missing value in the results table)
_NULLABLE_SPEC_FIELDS = ("starvation_hours", "window", "max_samples")


def results_table(rows: list[dict[str, Any]], order: list[RunSpec]) -> pd.DataFrame:
    rank = {
        {k: v for k, v in asdict(spec).items() if k in SPEC_FIELDS}.__repr__(): i
        for i, spec in enumerate(order)
    }
    rows = sorted(
        rows,
        key=lambda r: rank.get({k: r[k] for k in SPEC_FIELDS}.__repr__(), 0),
    )
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def with_earlier_runs(table: pd.DataFrame, output: Path) -> pd.DataFrame:
    """``table`` and, after it, the rows of the folder's earlier ``results.csv`` for the runs
    this table does not list whose folders still hold a run: the table of a folder names every
    run in it, which ``report`` reads as the folder's runs. Two campaign files (or a campaign and
    ``paper-results``) sharing a folder used to leave the table of the last one alone, and a
    report of the folder silently without the other's runs."""
    path = output / "results.csv"
    if not path.exists():
        return table
    try:
        earlier = read_results(path)
    except (OSError, ValueError) as exc:  # unreadable: said, and replaced by this table
        print(f"batsched-ml: {path}: unreadable ({exc}); written anew", file=sys.stderr)
        return table
    if "path" not in earlier or earlier.empty:
        return table
    listed = set(table["path"].dropna().astype(str))
    kept = earlier[
        earlier["path"].map(
            lambda p: (
                isinstance(p, str) and p not in listed and (output / p / "summary.json").exists()
            )
        )
    ]
    if kept.empty:
        return table
    print(
        f"batsched-ml: {path} also lists {len(kept)} run(s) of this folder made by another "
        "campaign (their folders are there)",
        file=sys.stderr,
    )
    # a table made before a field existed: its runs had the field's default
    for name in SPEC_FIELDS:
        if name in table.columns and name not in kept.columns:
            kept = kept.assign(**{name: getattr(RunSpec, name)})
    return pd.concat([table, kept.reindex(columns=table.columns)], ignore_index=True)


def write_results(table: pd.DataFrame, output: Path) -> None:
    """``results.csv`` and ``results.parquet``, and ``gap.md`` when the runs hold the yardsticks
    of the closing-the-gap table (:func:`batsched_ml.results.gap.write_gap`)."""
    table = with_earlier_runs(table, output)
    table.to_csv(output / "results.csv", index=False)
    table.to_parquet(output / "results.parquet", index=False)
    write_gap([{str(k): v for k, v in row.items()} for row in table.to_dict("records")], output)
