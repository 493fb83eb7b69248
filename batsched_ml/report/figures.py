"""The report's figures, drawn with matplotlib from :mod:`batsched_ml.report.data`.

Each function draws one figure for one trace from its settings (:class:`~.data.Setting`: the
runs of one label, one per shaken copy) and returns it with the table of the values it plots;
:func:`draw_trace` saves each as ``TRACE-NAME.png`` with that table beside it as
``TRACE-NAME.csv``. Figures of one run over time (a cumulative sum, a timeline, a Gantt chart)
draw each setting's first copy (the trace itself when it is there); figures of one value per
setting draw the mean over its copies with the 95 % interval as an error bar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from batsched_ml.errors import UserError

try:
    import matplotlib
except ModuleNotFoundError as exc:  # a lean install (the docker image): one line, no traceback
    raise UserError(
        "batsched-ml report needs matplotlib, not installed here: pip install matplotlib"
    ) from exc

matplotlib.use("Agg")  # files only: no screen

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from batsched_ml.report import data
from batsched_ml.report.data import Setting

COLOURS = {
    "base": "#4c72b0",
    "classification": "#dd8452",
    "classification-idempotent": "#55a868",
    "class-clairvoyant": "#c44e52",
    "runtime-clairvoyant": "#8172b3",
    "classification-guarded": "#937860",
}
#: Colours of the methods that are not a plain variant (another predictor, options...).
OTHER_COLOURS = (
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
    "#1b9e77",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
)
KILLED = "#d62728"


@dataclass
class Drawing:
    """A figure and the values it plots (written beside it as CSV)."""

    figure: Figure
    table: pd.DataFrame


def colours(methods: list[str]) -> dict[str, str]:
    """A colour per method, the same in every figure: a plain variant's own, else the next
    unused one."""
    out = {m: COLOURS[m] for m in methods if m in COLOURS}
    spare = iter(c for c in OTHER_COLOURS if c not in out.values())
    for method in methods:
        if method not in out:
            out[method] = next(spare, "#444444")
    return out


def _colour_map(settings: list[Setting]) -> dict[str, str]:
    return colours(list(dict.fromkeys(s.method for s in settings)))


def _policies(settings: list[Setting]) -> list[str]:
    return list(dict.fromkeys(s.policy for s in settings))


#: Line styles of the variants where their curves may lie on top of each other: the one drawn
#: last is dashed, and the one under it shows through.
LINESTYLES = {
    "base": "-",
    "classification": (0, (6, 2)),
    "classification-idempotent": (0, (3, 2)),
    "class-clairvoyant": (0, (6, 2, 1, 2)),
    "runtime-clairvoyant": (0, (1, 1.5)),
    "classification-guarded": (0, (2, 1, 1, 1)),
}


def _linestyle(method: str) -> object:
    return LINESTYLES.get(method, (0, (4, 1, 1, 1)))


def _legend_columns(fig: Figure, labels: list[str]) -> int:
    """As many legend columns as fit across the figure (about 14 characters of the legend's
    8-point text an inch, with room for the key), so that long labels are never cut."""
    longest = max(map(len, labels), default=1) + 6
    fits = int(fig.get_size_inches()[0] * 14 // longest)
    return max(1, min(len(labels), fits))


def _legend_below(fig: Figure, ax, handles: dict[str, Artist] | None = None) -> None:
    """One legend for the figure, under the panels, where it covers no bar (``handles``: the
    entries, when those of ``ax`` are not all of them)."""
    if handles is None:
        artists, labels = ax.get_legend_handles_labels()
        handles = dict(zip(labels, artists, strict=True))
    labels = list(handles)
    columns = _legend_columns(fig, labels)
    fig.legend(
        list(handles.values()), labels, loc="lower center", ncol=columns, fontsize=8, frameon=False
    )
    rows = -(-len(labels) // columns)
    height = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, min((0.2 + 0.17 * rows) / height, 0.5), 1, 0.95))


def _legend_rows(settings: list[Setting], width: float) -> float:
    """Inches for a legend of the settings' methods under a figure ``width`` inches wide."""
    methods = list(dict.fromkeys(s.method for s in settings))
    longest = max(map(len, methods), default=1) + 6
    columns = max(1, min(len(methods), int(width * 14 // longest)))
    return 0.2 + 0.17 * -(-len(methods) // columns)


def cumulative_bsld(settings: list[Setting], trace: str) -> Drawing | None:
    """The bounded slowdown summed over jobs in order of submission, one panel per policy, one
    line per method; a linear axis of each panel's own scale, where the methods' differences
    show (under SPF too)."""
    policies = _policies(settings)
    if not policies:
        return None
    palette = _colour_map(settings)
    width = max(10.0, 5.0 * len(policies))
    fig, axes = plt.subplots(
        1, len(policies), figsize=(width, 3.4 + _legend_rows(settings, width)), squeeze=False
    )
    tables = []
    for ax, policy in zip(axes[0], policies, strict=True):
        for setting in (s for s in settings if s.policy == policy):
            series = data.cumulative_bsld(setting.first)
            ax.plot(
                series["day"],
                series["cumulative_bsld"],
                label=setting.method,
                color=palette[setting.method],
                linestyle=_linestyle(setting.method),
            )
            tables.append(series.assign(policy=policy, label=setting.label))
        ax.set_title(policy.upper())
        ax.set_xlabel("day of submission")
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("cumulative bounded slowdown")
    fig.suptitle(f"{trace}: cumulative bounded slowdown over time")
    _legend_below(fig, axes[0][0])
    table = pd.concat(tables)[["policy", "label", "day", "cumulative_bsld"]]
    return Drawing(fig, table)


def _log_ticks(ax) -> None:
    """A log axis labelled at 1, 2 and 5 of each decade, as plain numbers."""
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def monthly_bsld(settings: list[Setting], trace: str) -> Drawing | None:
    """Mean bounded slowdown per calendar month, one panel per policy, one bar per method."""
    policies = _policies(settings)
    tables = [
        data.monthly_bsld(s.first).assign(policy=s.policy, label=s.label, method=s.method)
        for s in settings
    ]
    tables = [t for t in tables if not t.empty]
    if not tables:
        return None
    table = pd.concat(tables)
    palette = _colour_map(settings)
    months = sorted(set(table["month"]))
    fig, axes = plt.subplots(
        len(policies), 1, figsize=(10, 1.2 + 2.4 * len(policies)), squeeze=False, sharex=True
    )
    x = np.arange(len(months))
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        methods = list(dict.fromkeys(table[table["policy"] == policy]["method"]))
        width = 0.8 / max(len(methods), 1)
        for i, method in enumerate(methods):
            rows = table[(table["policy"] == policy) & (table["method"] == method)]
            values = rows.set_index("month").reindex(months)["mean_bsld"]
            offset = (i - (len(methods) - 1) / 2) * width
            ax.bar(x + offset, values, width, label=method, color=palette[method])
        ax.set_title(policy.upper(), loc="left", fontsize=9)
        ax.set_ylabel("mean bounded\nslowdown")
        ax.set_yscale("log")
        _log_ticks(ax)
        ax.grid(alpha=0.3, axis="y")
        ax.set_xticks(x, months, rotation=90, fontsize=7)
    fig.suptitle(f"{trace}: monthly mean bounded slowdown (log scale)")
    _legend_below(fig, axes[0][0])
    return Drawing(fig, table[["policy", "label", "month", "mean_bsld", "jobs"]])


def _mean_table(settings: list[Setting], keys: tuple[str, ...]) -> pd.DataFrame:
    """Per setting: the mean of each metric over its copies, with its interval's bounds."""
    rows = []
    for setting in settings:
        estimates = data.means(setting)
        row: dict[str, object] = {
            "policy": setting.policy,
            "label": setting.label,
            "method": setting.method,
            "copies": len(setting.runs),
        }
        for key in keys:
            value = estimates[key]
            row[key] = None if value is None else value.mean
            row[f"{key}_low"] = None if value is None else value.low
            row[f"{key}_high"] = None if value is None else value.high
        rows.append(row)
    return pd.DataFrame(rows)


def _grouped_bars(ax, table: pd.DataFrame, column: str, ylabel: str, palette) -> None:
    """Bars of ``column`` per policy (groups) and method (bars), with the 95 % interval over
    the copies as an error bar where there are copies."""
    policies = list(dict.fromkeys(table["policy"]))
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / len(methods)
    x = np.arange(len(policies))
    for i, method in enumerate(methods):
        values = table[table["method"] == method].set_index("policy").reindex(policies)
        offset = (i - (len(methods) - 1) / 2) * width
        mean = values[column].astype(float)
        error = None
        if (values["copies"].fillna(1) > 1).any():
            error = np.vstack(
                [
                    mean - values[f"{column}_low"].astype(float),
                    values[f"{column}_high"].astype(float) - mean,
                ]
            )
        ax.bar(
            x + offset,
            mean,
            width,
            yerr=error,
            capsize=2,
            label=method,
            color=palette[method],
        )
    ax.set_xticks(x, [p.upper() for p in policies])
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")


def class_bsld(settings: list[Setting], trace: str) -> Drawing | None:
    """Mean bounded slowdown of the actually small and the actually large jobs per policy and
    method."""
    table = _mean_table(settings, ("bsld_small", "bsld_large"))
    table = table[table["bsld_small"].notna()]
    if table.empty:
        return None
    palette = _colour_map(settings)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, column, title in zip(
        axes, ("bsld_small", "bsld_large"), ("small jobs", "large jobs"), strict=True
    ):
        _grouped_bars(ax, table, column, "mean bounded slowdown", palette)
        ax.set_title(title)
    fig.suptitle(f"{trace}: bounded slowdown of small and large jobs")
    _legend_below(fig, axes[1])
    return Drawing(fig, table)


def total_bsld(settings: list[Setting], trace: str) -> Drawing | None:
    """Total bounded slowdown per policy and method."""
    table = _mean_table(settings, ("cumulative_bsld",))
    if table.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.8))
    _grouped_bars(ax, table, "cumulative_bsld", "total bounded slowdown", _colour_map(settings))
    ax.set_title(f"{trace}: total bounded slowdown per method")
    _legend_below(fig, ax)
    return Drawing(fig, table)


def _classified(settings: list[Setting]) -> Setting | None:
    return next(
        (
            s
            for s in settings
            if s.variant in data.CLASSIFIED_VARIANTS
            and (s.first.path / "weekly_quality.csv").exists()
        ),
        None,
    )


def weekly_quality(settings: list[Setting], trace: str) -> Drawing | None:
    """Accuracy, precision and recall of each week's model (the first classified setting)."""
    setting = _classified(settings)
    table = None if setting is None else data.weekly_quality(setting.first)
    if setting is None or table is None or table.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for column in ("accuracy", "precision", "recall"):
        ax.plot(table["week"], table[column], label=column, marker=".", linewidth=1)
    ax.set_xlabel("week")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # weeks, never 1.2
    ax.set_ylabel("share")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(f"{trace}: weekly classification quality, {setting.label}")
    _legend_below(fig, ax)
    return Drawing(fig, table.assign(label=setting.label))


def guard(settings: list[Setting], trace: str) -> Drawing | None:
    """The guard's weeks (the first ``classification-guarded`` setting): the quantity it judged
    by, its threshold, and the weeks it switched classification on."""
    setting = next((s for s in settings if s.variant == "classification-guarded"), None)
    found = None if setting is None else data.guard_weeks(setting.first)
    if setting is None or found is None or found[0].empty:
        return None
    table, threshold = found
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for week in table.loc[table["guard_on"].astype(bool), "week"]:
        ax.axvspan(week - 0.5, week + 0.5, color="tab:green", alpha=0.15, linewidth=0)
    judged = table.dropna(subset=["guard_slowdown"])
    ax.plot(judged["week"], judged["guard_slowdown"], marker=".", linewidth=1, label="judged by")
    ax.axhline(threshold, color="black", linestyle="--", linewidth=1, label="threshold")
    ax.set_yscale("log")
    ax.set_xlabel("week")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("mean bounded slowdown of\nrecently finished jobs")
    ax.grid(alpha=0.3)
    ax.set_title(f"{trace}: the guard's weeks (shaded: classification on), {setting.label}")
    _legend_below(fig, ax)
    return Drawing(fig, table.assign(label=setting.label, threshold=threshold))


def importances(settings: list[Setting], trace: str) -> Drawing | None:
    """The weekly Gini importance of each feature, as box plots."""
    setting = _classified(settings)
    table = None if setting is None else data.importances(setting.first)
    if setting is None or table is None or table.empty:
        return None
    features = [c for c in table.columns if c != "week"]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.boxplot([table[f].to_numpy() for f in features], showfliers=False)
    ax.set_xticks(range(1, len(features) + 1), features, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("Gini importance")
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(f"{trace}: feature importance over {len(table)} weeks, {setting.label}")
    fig.tight_layout()
    return Drawing(fig, table)


def runtimes(settings: list[Setting], trace: str) -> Drawing | None:
    """Distribution of requested and actual runtimes, with the divider."""
    setting = next((s for s in settings if s.variant == data.BASE_VARIANT), settings[0])
    values = data.runtime_distribution(setting.first)
    if not len(values["actual"]):
        return None
    fig, ax = plt.subplots(figsize=(8, 3.6))
    top = max(values["actual"].max(), values["requested"].max() if len(values["requested"]) else 1)
    bins = np.logspace(0, np.log10(top) + 0.1, 60)
    ax.hist(values["requested"], bins=bins.tolist(), alpha=0.6, label="requested time")
    ax.hist(values["actual"], bins=bins.tolist(), alpha=0.6, label="actual runtime")
    ax.axvline(
        values["divider"],
        color="black",
        linestyle="--",
        label=f"divider (median runtime) {values['divider']:.0f} s",
    )
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("jobs")
    ax.set_title(f"{trace}: requested and actual runtimes")
    _legend_below(fig, ax)
    table = pd.DataFrame(
        {
            "bin_low": bins[:-1],
            "bin_high": bins[1:],
            "requested_jobs": np.histogram(values["requested"], bins)[0],
            "actual_jobs": np.histogram(values["actual"], bins)[0],
            "divider": values["divider"],
        }
    )
    return Drawing(fig, table)


def timelines(settings: list[Setting], trace: str) -> Drawing | None:
    """Utilisation and queue length over time, one row of two panels per setting (its first
    copy; shared axes, so rows compare at a glance)."""
    palette = _colour_map(settings)
    series = [(s, *data.timeline(s.first)) for s in settings]
    series = [(s, table, name) for s, table, name in series if not table.empty]
    if not series:
        return None
    rows = len(series)
    # constrained layout keeps the suptitle off the first row however many rows there are
    fig, axes = plt.subplots(
        rows,
        2,
        figsize=(11, 1.0 + 1.55 * rows),
        squeeze=False,
        sharex=True,
        sharey="col",
        layout="constrained",
    )
    for (setting, table, _name), (left, right) in zip(series, axes, strict=True):
        edges = np.append(table["start"].to_numpy(), table["end"].iloc[-1])
        weights = table["end"] - table["start"]
        utilisation = 100 * np.average(table["utilisation"], weights=weights)
        queued = np.average(table["queued"], weights=weights)
        colour = palette[setting.method]
        left.stairs(100 * table["utilisation"], edges, fill=True, color=colour, alpha=0.8)
        right.stairs(table["queued"], edges, fill=True, color=colour, alpha=0.8)
        label = setting.label
        left.set_title(f"{label}: mean {utilisation:.1f} %", loc="left", fontsize=9)
        right.set_title(
            f"{label}: mean {queued:,.1f}, most {table['queued'].max():,.0f} jobs",
            loc="left",
            fontsize=9,
        )
        left.set_ylim(0, 100)
        left.set_ylabel("machines\nbusy (%)")
        right.set_ylabel("jobs waiting")
        right.set_ylim(bottom=0)
        for ax in (left, right):
            ax.grid(alpha=0.3)
            ax.set_xlim(edges[0], edges[-1])
    for ax in axes[-1]:
        ax.set_xlabel("day of the trace")
    name = series[0][2]
    fig.suptitle(f"{trace}: utilisation and queue length over time ({name} means)")
    table = pd.concat([t.assign(label=s.label) for s, t, _n in series])
    return Drawing(fig, table[["label", "start", "end", "utilisation", "queued"]])


#: Waits below this (a minute) are drawn at it: the log axis cannot show 0.
WAIT_FLOOR_HOURS = 1 / 60


def _hours_label(value: float, _position: object = None) -> str:
    return "≤ 1 min" if np.isclose(value, WAIT_FLOOR_HOURS) else f"{value:g}"


def wait_distribution(settings: list[Setting], trace: str) -> Drawing | None:
    """The distribution of waiting times (CDF, log hours), one panel per policy, one line per
    method, one legend under the panels."""
    palette = _colour_map(settings)
    curves = [(s, data.wait_cdf(data.waits(s.first))) for s in settings]
    curves = [(s, cdf) for s, cdf in curves if not cdf.empty]
    if not curves:
        return None
    policies = list(dict.fromkeys(s.policy for s, _cdf in curves))
    columns = min(len(policies), 2)
    rows = -(-len(policies) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(11, 1.3 + 3.0 * rows),
        squeeze=False,
        sharex=True,
        sharey=True,
        layout="constrained",
    )
    top = max(WAIT_FLOOR_HOURS * 10, *(cdf["wait_hours"].iloc[-1] for _s, cdf in curves))
    # the y axis starts at the 10 % step below the lowest share of jobs that waited under a
    # minute: below it every curve is flat, and the differences are above
    lowest = min(
        float(np.interp(WAIT_FLOOR_HOURS, cdf["wait_hours"], cdf["share"], left=0))
        for _s, cdf in curves
    )
    bottom = 10 * np.floor(10 * lowest - 1e-9) if lowest < 1 else 0.0
    bottom = max(0.0, min(bottom, 90.0))
    handles: dict[str, Artist] = {}
    for ax, policy in zip(axes.flat, policies, strict=False):
        for setting, cdf in curves:
            if setting.policy != policy:
                continue
            hours, share = cdf["wait_hours"].to_numpy(), cdf["share"].to_numpy()
            below = hours < WAIT_FLOOR_HOURS
            start = share[below][-1] if below.any() else 0.0
            (line,) = ax.step(  # from the share that waited under a minute to 100 %
                np.concatenate([[WAIT_FLOOR_HOURS], hours[~below], [top * 1.5]]),
                100 * np.concatenate([[start], share[~below], [1.0]]),
                where="post",
                label=setting.method,
                color=palette[setting.method],
                linestyle=_linestyle(setting.method),
                linewidth=1.4,
            )
            handles.setdefault(setting.method, line)
        ax.set_title(policy.upper(), loc="left", fontsize=10)
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(policies) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("jobs that waited\nat most this long (%)")
    decades = range(-1, int(np.floor(np.log10(top * 1.5))) + 1)
    ticks = [WAIT_FLOOR_HOURS, *(10.0**k for k in decades)]
    for ax in axes.flat:
        ax.set_xlim(WAIT_FLOOR_HOURS, top * 1.5)
        ax.set_ylim(bottom, 100.5)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(FuncFormatter(_hours_label))
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel("waiting time (hours, log scale)")
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=min(len(handles), 3 if max(map(len, handles)) > 30 else 5),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(f"{trace}: distribution of waiting times")
    table = pd.concat([cdf.assign(policy=s.policy, label=s.label) for s, cdf in curves])
    return Drawing(fig, table[["policy", "label", "wait_hours", "share"]])


#: The comparison's panels: a gain on the left, its cost on the right.
COMPARED = (
    ("mean_bsld", "mean bounded slowdown", "bounded slowdown: lower is better", 1.0),
    ("mean_wait_hours", "mean wait (hours)", "wait: lower is better", 1.0),
    ("useful_utilisation", "useful utilisation (%)", "useful utilisation: higher is better", 100),
    ("wasted_core_hours", "wasted core-hours", "killed work: lower is better", 1.0),
)


def comparison(settings: list[Setting], trace: str) -> Drawing | None:
    """Mean bounded slowdown, mean wait, useful utilisation and wasted core-hours per policy
    and method: each gain beside its cost."""
    keys = tuple(key for key, *_rest in COMPARED)
    table = _mean_table(settings, keys)
    if table.empty:
        return None
    shown = table.copy()
    for key, _label, _title, scale in COMPARED:
        for column in (key, f"{key}_low", f"{key}_high"):
            shown[column] = shown[column].astype(float) * scale
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
    palette = _colour_map(settings)
    for ax, (column, ylabel, title, _scale) in zip(axes, COMPARED, strict=True):
        _grouped_bars(ax, shown, column, ylabel, palette)
        ax.set_title(title, fontsize=10)
        crowded = len(table) > 8  # upright labels would run into each other
        for container in ax.containers:
            if hasattr(container, "patches"):
                ax.bar_label(
                    container, fmt="%.3g", fontsize=7, padding=2, rotation=90 if crowded else 0
                )
        ax.margins(y=0.25 if crowded else 0.15)
        # counts, times and shares: no axis below zero, even when every value is zero (as
        # the killed work of methods that kill nothing, which drew an axis from -0.06)
        if (shown[column].astype(float) > 0).any():
            ax.set_ylim(bottom=0)
        else:
            ax.set_ylim(0, 1)
    axes[2].set_ylim(0, 115 if len(table) > 8 else 105)
    axes[2].set_yticks(range(0, 101, 20))
    fig.suptitle(f"{trace}: methods at a glance, gains and their cost")
    _legend_below(fig, axes[0])
    return Drawing(fig, table)


def trade_off(settings: list[Setting], trace: str) -> Drawing | None:
    """Share of the class-clairvoyant ceiling's gain against share of jobs killed, one panel
    per policy, one point per method (with its 95 % intervals over copies); the base and the
    ceiling are the lines at 0 and 100 %."""
    table, _missing = data.trade_off(settings)
    if table.empty or not any(table["variant"].isin(data.CLASSIFIED_VARIANTS)):
        return None
    policies = list(dict.fromkeys(table["policy"]))
    palette = _colour_map(settings)
    methods = {s.label: s.method for s in settings}
    counts = {s.label: len(s.runs) for s in settings}
    width = max(11.0, 5.0 * len(policies))
    drawn = [s for s in settings if s.variant not in (data.BASE_VARIANT, data.CEILING_VARIANT)]
    fig, axes = plt.subplots(
        1,
        len(policies),
        figsize=(width, 3.8 + _legend_rows(drawn, width)),
        squeeze=False,
        sharey=True,
    )
    handles: dict[str, Artist] = {}
    for ax, policy in zip(axes[0], policies, strict=True):
        rows = table[table["policy"] == policy]
        # the yardsticks are the lines at 0 and 100 % (their points, in the CSV, lie on them)
        rows = rows[~rows["variant"].isin((data.BASE_VARIANT, data.CEILING_VARIANT))]
        for row in rows.to_dict("records"):
            method = methods[row["label"]]
            x, y = 100 * row["share_killed"], 100 * row["share_of_ceiling"]
            handles[method] = ax.errorbar(
                x,
                y,
                xerr=[[x - 100 * row["share_killed_low"]], [100 * row["share_killed_high"] - x]],
                yerr=[
                    [y - 100 * row["share_of_ceiling_low"]],
                    [100 * row["share_of_ceiling_high"] - y],
                ],
                fmt="o",
                capsize=3,
                color=palette[method],
                label=method,
            )
            available = counts[row["label"]]
            if row["copies"] < available:  # copies whose ceiling gains nothing are left out
                ax.annotate(
                    f"{row['copies']} of {available} copies",
                    (x, y),
                    textcoords="offset points",
                    xytext=(5, 5),
                    fontsize=7,
                    color=palette[method],
                )
        ax.axhline(0, color="#888", linewidth=0.8)
        ax.axhline(100, color="#888", linewidth=0.8, linestyle="--")
        for level, text in ((0, "base"), (100, "ceiling (class-clairvoyant)")):
            ax.text(
                0.99,
                level,
                text,
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="bottom",
                fontsize=8,
                color="#555",
            )
        ax.set_title(policy.upper())
        ax.set_xlabel("jobs killed (%)")
        ax.set_xlim(left=-1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of the ceiling's gain (%)")
    fig.suptitle(f"{trace}: what each method's gain costs in killed jobs")
    _legend_below(fig, axes[0][0], handles)
    return Drawing(fig, table)


def gantt(
    settings: list[Setting], trace: str, window: tuple[float, float] | None = None
) -> Drawing | None:
    """Jobs on the machines during ``window`` (seconds of the trace; default
    :func:`~.data.gantt_window`), one panel per setting (its first copy), killed attempts in
    red."""
    window = window or data.gantt_window(settings)
    palette = _colour_map(settings)
    begin, end = window
    fig, axes = plt.subplots(
        len(settings),
        1,
        figsize=(11, 1.0 + 2.2 * len(settings)),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    tables = []
    for ax, setting in zip(axes[:, 0], settings, strict=True):
        table = data.gantt(setting.first, window)
        tables.append(table.assign(label=setting.label))
        for killed, colour in ((False, palette[setting.method]), (True, KILLED)):
            part = table[table["killed"] == killed]
            if part.empty:
                continue
            left = np.maximum(part["start"], begin) / data.HOUR
            width = np.minimum(part["finish"], end) / data.HOUR - left
            ax.barh(
                part["first_machine"],
                width,
                left=left,
                height=part["machines"],
                align="edge",
                color=colour,
                alpha=0.9 if killed else 0.55,
                edgecolor="black",
                linewidth=0.2,
            )
            if killed:  # a killed attempt may last seconds in a window of hours: marked too
                ax.plot(
                    np.minimum(part["finish"], end) / data.HOUR,
                    part["first_machine"] + part["machines"] / 2,
                    "v",
                    color=KILLED,
                    markersize=6,
                    markeredgecolor="black",
                    markeredgewidth=0.4,
                    linestyle="none",
                )
        kills = int(table.drop_duplicates("job_id")["killed"].sum())
        ax.set_title(f"{setting.label}: {kills} killed attempts", loc="left", fontsize=9)
        ax.set_ylim(0, data.machines(setting.first))
        ax.set_ylabel("machine")
        ax.set_xlim(begin / data.HOUR, end / data.HOUR)
        ax.grid(alpha=0.3, axis="x")
    axes[-1][0].set_xlabel("hour of the trace")
    fig.legend(
        handles=[
            Patch(color="#999999", label="attempt that ran"),
            Patch(color=KILLED, label="killed attempt (▼ where it ended)"),
        ],
        loc="outside lower center",
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        f"{trace}: jobs on the machines, hours {begin / data.HOUR:,.1f} to "
        f"{end / data.HOUR:,.1f} of the trace"
    )
    return Drawing(fig, pd.concat(tables)[["label", *data.GANTT_COLUMNS]])


Draw = Callable[[list[Setting], str], Drawing | None]
FIGURES: tuple[tuple[str, Draw, str], ...] = (
    (
        "comparison",
        comparison,
        "Methods at a glance, each gain beside its cost: mean bounded slowdown and mean wait "
        "in hours (lower is better), useful utilisation, the share of the machines' time used "
        "by work that was kept (higher is better), and the core-hours of killed attempts "
        "(lower is better); means over the shaken copies, with their 95 % intervals.",
    ),
    (
        "trade-off",
        trade_off,
        "The trade-off: each method's share of the gain of perfect classes in total bounded "
        "slowdown (100 %: the class-clairvoyant ceiling, 0 %: the base, both of the same policy "
        "and other settings, on the same copies) against the share of jobs it killed; means "
        "over the shaken copies, with their 95 % intervals. A point up and to the left gains "
        "more for fewer kills.",
    ),
    ("runtimes", runtimes, "Requested and actual runtimes, with the divider."),
    (
        "weekly-quality",
        weekly_quality,
        "Weekly accuracy, precision and recall of the classifier.",
    ),
    (
        "guard",
        guard,
        "The guard's decision week by week (classification-guarded): the mean bounded slowdown "
        "of the jobs finished in its window (line), its threshold (dashed), the weeks it "
        "switched classification on (shaded); each week's reason is in the CSV.",
    ),
    ("importances", importances, "Weekly Gini importance of each feature."),
    (
        "cumulative-bsld",
        cumulative_bsld,
        "Cumulative bounded slowdown over the days of the trace (first copy of each method).",
    ),
    (
        "monthly-bsld",
        monthly_bsld,
        "Monthly mean bounded slowdown (first copy of each method, log scale).",
    ),
    (
        "class-bsld",
        class_bsld,
        "Bounded slowdown of small and large jobs (means over copies, 95 % intervals).",
    ),
    (
        "total-bsld",
        total_bsld,
        "Total bounded slowdown per method (means over copies, 95 % intervals).",
    ),
    (
        "utilisation-queue",
        timelines,
        "Utilisation (share of machines busy, killed attempts included, left) and queue length "
        "(jobs submitted but not started, right) over the days of the trace, one row per "
        "method (its first copy), averaged over each bin (the bin width is in the title); a "
        "long queue while machines sit idle means jobs too large or too long to fit.",
    ),
    (
        "gantt",
        gantt,
        "Gantt chart of a window of the trace: each attempt as a bar over the machines it "
        "held, killed attempts in red (first copy of each method).",
    ),
    (
        "wait-distribution",
        wait_distribution,
        "Distribution of waiting times (submission to start), one panel per policy, one line "
        "per method (its first copy): the share of jobs that waited at most the time on the x "
        "axis (hours, log scale). A curve higher and further left is better; its height at "
        "the left edge is the share of jobs that waited a minute or less (the y axis starts "
        "just below the lowest such share).",
    ),
)


def draw_trace(
    settings: list[Setting],
    trace: str,
    name: str,
    out: Path,
    *,
    gantt_window: tuple[float, float] | None = None,
) -> list[tuple[str, str]]:
    """Save every figure the settings of ``trace`` allow as ``out/TRACE-NAME.png`` and its
    values as ``out/TRACE-NAME.csv``; return the PNG names and captions. ``name`` is the
    trace's name in titles (its short name)."""
    saved = []
    for stem, draw, caption in FIGURES:
        drawn = gantt(settings, name, gantt_window) if draw is gantt else draw(settings, name)
        if drawn is None:
            continue
        file_name = f"{trace}-{stem}.png"
        drawn.figure.savefig(out / file_name, dpi=110)
        plt.close(drawn.figure)
        drawn.table.to_csv(out / f"{trace}-{stem}.csv", index=False)
        saved.append((file_name, caption))
    return saved
