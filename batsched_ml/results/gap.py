"""Closing the gap: how much of the perfect classes' gain a method reaches, with 95 % intervals.

The yardstick of Zrigui et al. (JPDC 2022): a policy's *base* (EASY on requested times), the
method (online classification), and the *ceiling*, the same scheduler told each job's true class
(``class-clairvoyant``). The gain of a variant is the reduction of the cumulative bounded slowdown
over the same policy's base; the *share of the ceiling* is the method's gain over the ceiling's,

    share = (base - method) / (base - ceiling),

1 when the method does as well as perfect classes, 0 when it does no better than the base, below
0 when it does worse.

One replay of one trace can mislead (a few jobs that happen to fit); the figures are therefore
computed on each shaken copy of the trace (:mod:`batsched_ml.workload.shake`) and given as the
mean over copies with a 95 % Student-t interval. The shares are paired per copy (the base, the
method and the ceiling of one copy together), so what varies from copy to copy cancels out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from batsched_ml.predict.params import ForestParams
from batsched_ml.registry import STARVATION_THRESHOLD_HOURS
from batsched_ml.results.table import FINISHED_STATUSES

BASE, CEILING = "base", "class-clairvoyant"


def gain(base: float, value: float) -> float:
    """The reduction of ``value`` from ``base``, as a fraction of ``base``."""
    return (base - value) / base


#: The least gain of the ceiling (a share of the base's cumulative bounded slowdown) for which a
#: share of it means something: below, a method's small difference divided by the ceiling's
#: tinier one gives shares of thousands of percent (seen: -3,755 % on NASA-iPSC, whose
#: ceiling gains 0.1 %).
MIN_CEILING_GAIN = 0.01


def share_of_ceiling(base: float, method: float, ceiling: float) -> float | None:
    """``(base - method) / (base - ceiling)``; ``None`` when the ceiling gains less than
    :data:`MIN_CEILING_GAIN` of the base (there is no gap to close, and a share would divide by
    almost nothing, by zero, or flip sign)."""
    if not base - ceiling >= MIN_CEILING_GAIN * base:
        return None
    return (base - method) / (base - ceiling)


def t_quantile(df: int, confidence: float = 0.95) -> float:
    """The two-sided Student-t quantile for ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


@dataclass(frozen=True)
class Estimate:
    """A mean over copies with its interval (``low == high == mean`` for a single copy: no
    interval can be given, and the table says so by the count)."""

    mean: float
    low: float
    high: float
    n: int

    def text(self, scale: float = 100.0, digits: int = 0) -> str:
        mean = f"{self.mean * scale:.{digits}f}"
        if mean.lstrip("-").strip("0.") == "":  # -0.4 shows as 0, not -0
            mean = mean.lstrip("-")
        if self.n < 2:
            return mean
        half = (self.high - self.low) / 2 * scale
        return f"{mean} ± {half:.{digits}f}"


def estimate(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """Mean of ``values`` and its Student-t interval at ``confidence``."""
    n = len(values)
    if n == 0:
        raise ValueError("no values to estimate from")
    mean = math.fsum(values) / n
    if n == 1:
        return Estimate(mean, mean, mean, 1)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(n - 1, confidence) * math.sqrt(variance / n)
    return Estimate(mean, mean - half, mean + half, n)


@dataclass(frozen=True)
class GapRow:
    """One trace, policy and method: its gain over the base and its share of the ceiling's."""

    trace: str
    policy: str
    method: str
    gain: Estimate
    share: Estimate | None  # None when no copy has a gap to close
    copies: int
    #: means over the same copies, when the records have them: the mean bounded slowdown, and
    #: the jobs killed at the divider and resubmitted per run with the trace's job count
    mean_bsld: float | None = None
    kills: float | None = None
    jobs: float | None = None
    #: the core-hours of the killed attempts, as a share of the machine (machines x makespan)
    wasted_share: float | None = None


def gap_rows(
    runs: Iterable[Mapping[str, object]], *, value: str = "cumulative_bsld"
) -> list[GapRow]:
    """The rows of the table from run records, each with ``trace``, ``policy``, ``variant``
    (``base``, ``class-clairvoyant`` or a method), ``copy`` (the shaking seed) and ``value``.

    A method is compared with the base and the ceiling of the same trace, policy and copy; a copy
    lacking either is left out (never compared with another copy's). Rows come in the order
    of first appearance."""
    cells: dict[tuple[str, str, object], dict[str, float]] = defaultdict(dict)
    extras: dict[tuple[str, str, object, str], dict[str, float]] = {}
    order: list[tuple[str, str, str]] = []
    for run in runs:
        key = (str(run["trace"]), str(run["policy"]), run.get("copy", 0))
        variant = str(run["variant"])
        if variant in cells[key]:
            raise ValueError(f"two runs of {variant} for {key}")
        cells[key][variant] = float(run[value])  # type: ignore[arg-type]
        extras[(*key, variant)] = {
            name: float(run[name])  # type: ignore[arg-type]
            for name in _EXTRAS
            if isinstance(run.get(name), int | float) and not math.isnan(float(run[name]))  # type: ignore[arg-type]
        }
        if (key[0], key[1], variant) not in order:
            order.append((key[0], key[1], variant))
    rows = []
    for trace, policy, method in order:
        gains: list[float] = []
        shares: list[float] = []
        seen: list[dict[str, float]] = []
        for (t, p, copy), values in cells.items():
            if (t, p) != (trace, policy) or method not in values or BASE not in values:
                continue
            base = values[BASE]
            gains.append(gain(base, values[method]))
            seen.append(extras[(t, p, copy, method)])
            if method == BASE:
                shares.append(0.0)
            elif CEILING in values:
                share = share_of_ceiling(base, values[method], values[CEILING])
                if share is not None:
                    shares.append(share)
        if not gains:
            continue
        means = {
            name: sum(e[name] for e in seen) / len(seen)
            for name in _EXTRAS
            if all(name in e for e in seen)
        }
        rows.append(
            GapRow(
                trace,
                policy,
                method,
                estimate(gains),
                estimate(shares) if shares else None,
                len(gains),
                means.get("mean_bsld"),
                means.get("kills"),
                means.get("jobs"),
                means.get("wasted_share"),
            )
        )
    return rows


#: what a row also gives, as the mean over its copies, when the run records have it
_EXTRAS = ("mean_bsld", "kills", "jobs", "wasted_share")


def gap_table(rows: Sequence[GapRow]) -> str:
    """The rows as a markdown table: gain over the base and share of the ceiling, in %, as the
    mean over the shaken copies ± the half width of the 95 % interval."""
    lines = [
        "| trace | policy | method | mean bounded slowdown | gain over base (%) "
        "| share of the ceiling (%) | killed and resubmitted per run | copies |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        share = row.share.text() if row.share is not None else "n/a"
        if row.method == CEILING:
            share = "100"
        elif row.method == BASE:
            share = "0"
        bsld = "n/a" if row.mean_bsld is None else f"{row.mean_bsld:.2f}"
        if row.kills is None:
            kills = "n/a"
        elif not row.kills:
            kills = "0"
        else:
            of_jobs = f" ({100 * row.kills / row.jobs:.0f} % of jobs)" if row.jobs else ""
            kills = f"{row.kills:,.0f}{of_jobs}"
        gain_text = "0" if row.method == BASE else row.gain.text()
        lines.append(
            f"| {row.trace} | {row.policy} | {row.method} | {bsld} | {gain_text} | {share} | "
            f"{kills} | {row.copies} |"
        )
    return "\n".join(lines) + "\n"


def method_label(run: Mapping[str, object]) -> str:
    """A campaign row's method: its variant (with its classifier options), then what it
    changes from the defaults (the predictor, correction, dispatcher and their options, the
    forest's seed), so that
    ``classification-idempotent + easy++`` is a method of its own. The plain ``base`` and
    ``class-clairvoyant`` rows are the yardsticks."""
    parts = [str(run["variant"])]
    classifier = run.get("classifier_options")
    if isinstance(classifier, str) and classifier:
        parts.append(f"[{classifier}]")
    for key, default in (
        ("predictor", "requested"),
        ("correction", "none"),
        ("dispatcher", "easy"),
    ):
        value = run.get(key, default)
        if isinstance(value, str) and value and value != default:
            parts.append(value)
    for key in ("predictor_options", "dispatcher_options"):
        value = run.get(key)
        if isinstance(value, str) and value:
            parts.append(f"[{value}]")
    seed = run.get("seed", 0)
    if isinstance(seed, int | float) and seed and not math.isnan(seed):
        parts.append(f"seed {int(seed)}")
    parts.extend(_changed(run, _LEARNING))
    return " + ".join(parts)


#: the settings of a method that a campaign may vary (the classifier's features, the forest),
#: their defaults, and how a row shows them when they are not the defaults
_LEARNING = (
    ("feature_mode", "online", "{} features"),
    ("trees", ForestParams.n_estimators, "{} trees"),
    ("window", ForestParams.window, "window {}"),
    ("max_samples", ForestParams.max_samples, "max_samples {}"),
)
#: the settings that change the yardsticks too (a base and a ceiling of their own)
_CONTEXT = (
    ("backfilling", True, "no backfilling"),
    ("starvation_hours", STARVATION_THRESHOLD_HOURS, "starvation {} h"),
    ("batsim", 4, "Batsim {}"),
)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _changed(run: Mapping[str, object], settings: tuple[tuple[str, object, str], ...]) -> list:
    """How ``run`` differs from the defaults of ``settings`` (a column a table lacks is its
    default; an empty cell of ``window``, ``max_samples`` or ``starvation_hours`` is none/all)."""
    out = []
    for key, default, text in settings:
        if key not in run:
            continue
        value = run[key]
        if _missing(value):
            value = None
        elif isinstance(default, bool):
            value = bool(value)
        elif isinstance(default, int | float) and isinstance(value, int | float):
            value = type(default)(value) if float(value).is_integer() else value
        if value != default:
            if value is None:
                shown = "none" if key == "starvation_hours" else "all"
            else:
                shown = f"{value:g}" if isinstance(value, float) else str(value)
            out.append(text.format(shown))
    return out


def policy_label(run: Mapping[str, object]) -> str:
    """A campaign row's policy, with the settings that change its yardsticks when they are not
    the defaults (``fcfs (Batsim 5)``): a method is compared with the base and the ceiling of
    the same ones."""
    changed = _changed(run, _CONTEXT)
    return str(run["policy"]) + (f" ({', '.join(changed)})" if changed else "")


def rows_from_results(records: Iterable[Mapping[str, object]]) -> list[GapRow]:
    """The gap rows of a campaign's results table (its records), the finished runs only."""
    runs = []
    for record in records:
        if record.get("status") not in FINISHED_STATUSES:
            continue
        copy = record.get("copy", 0)
        runs.append(
            {
                "trace": record["trace"],
                "policy": policy_label(record),
                "variant": method_label(record),
                "copy": 0
                if copy is None or (isinstance(copy, float) and math.isnan(copy))
                else copy,
                "cumulative_bsld": record["cumulative_bsld"],
                **{name: record[name] for name in _EXTRAS if name in record},
            }
        )
    return gap_rows(runs)


def write_gap(records: Iterable[Mapping[str, object]], output: Path) -> Path | None:
    """``OUTPUT/gap.md``: the closing-the-gap table of a campaign whose runs include a base and
    the class-clairvoyant ceiling; ``None`` (and no file) otherwise."""
    rows = rows_from_results(records)
    if not any(row.method == CEILING for row in rows):
        return None
    path = output / "gap.md"
    text = (
        "# Closing the gap\n\n"
        "Gain of each method over the same policy's base (reduction of the cumulative bounded "
        "slowdown) and its share of the class-clairvoyant ceiling's gain, in %: the mean over "
        "the shaken copies of each trace ± the half width of the 95 % Student-t interval "
        "(`batsched_ml/results/gap.py`); the mean bounded slowdown and the jobs killed at the "
        "divider and resubmitted per run, means over the same copies.\n\n" + gap_table(rows)
    )
    path.write_text(text)
    return path
