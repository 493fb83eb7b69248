"""The paper's figures, drawn with matplotlib from :mod:`batsched_ml.report.data`.

Each function draws one figure for one trace and returns it; :func:`draw_trace` saves them all
as PNG files and returns their names and captions. Figure numbers are the paper's (Zrigui et
al., JPDC 2022).
"""

from __future__ import annotations

from pathlib import Path

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
from matplotlib.ticker import FuncFormatter, MaxNLocator

from batsched_ml.report import data
from batsched_ml.report.data import Run

BASE, CLASSIFIED = "base", "classification-idempotent"
COLOURS = {
    "base": "#4c72b0",
    "classification": "#dd8452",
    "classification-idempotent": "#55a868",
    "class-clairvoyant": "#c44e52",
    "runtime-clairvoyant": "#8172b3",
    "classification-guarded": "#937860",
}


def _pick(runs: list[Run], policy: str, variant: str) -> Run | None:
    return next((r for r in runs if r.policy == policy and r.variant == variant), None)


def _get(runs: list[Run], policy: str, variant: str) -> Run:
    """The run of ``policy`` and ``variant``, which the caller checked is there."""
    run = _pick(runs, policy, variant)
    assert run is not None, (policy, variant)
    return run


def _policies(runs: list[Run]) -> list[str]:
    return list(dict.fromkeys(r.policy for r in runs))


def cumulative_bsld(runs: list[Run], trace: str) -> Figure | None:
    """Figure 6: base against classification-idempotent, one panel per policy."""
    policies = [p for p in _policies(runs) if _pick(runs, p, BASE) and _pick(runs, p, CLASSIFIED)]
    if not policies:
        return None
    # at least 8 inches wide: one panel alone still shows the whole title
    width = max(8.0, 4.0 * len(policies))
    fig, axes = plt.subplots(1, len(policies), figsize=(width, 3.4), squeeze=False)
    for ax, policy in zip(axes[0], policies, strict=True):
        for variant in (BASE, CLASSIFIED):
            series = data.cumulative_bsld(_get(runs, policy, variant))
            ax.plot(series["day"], series["cumulative_bsld"], label=variant, color=COLOURS[variant])
        ax.set_title(policy.upper())
        ax.set_xlabel("day of submission")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("cumulative bounded slowdown")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{trace}: cumulative bounded slowdown over time (Figure 6)")
    fig.tight_layout()
    return fig


def monthly_bsld(runs: list[Run], trace: str) -> Figure | None:
    """Figure 7: monthly mean bounded slowdown, base against classification-idempotent."""
    policies = [p for p in _policies(runs) if _pick(runs, p, BASE) and _pick(runs, p, CLASSIFIED)]
    if not policies:
        return None
    fig, axes = plt.subplots(
        len(policies), 1, figsize=(10, 2.4 * len(policies)), squeeze=False, sharex=True
    )
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        base = data.monthly_bsld(_get(runs, policy, BASE))
        classified = data.monthly_bsld(_get(runs, policy, CLASSIFIED))
        months = base["month"].tolist()
        x = np.arange(len(months))
        width = 0.4
        ax.bar(x - width / 2, base["mean_bsld"], width, label=BASE, color=COLOURS[BASE])
        merged = classified.set_index("month").reindex(months)["mean_bsld"]
        ax.bar(x + width / 2, merged, width, label=CLASSIFIED, color=COLOURS[CLASSIFIED])
        ax.set_title(policy.upper(), loc="left", fontsize=9)
        ax.set_ylabel("mean bounded\nslowdown")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y")
        ax.set_xticks(x, months, rotation=90, fontsize=7)
    _legend_below(fig, axes[0][0])
    fig.suptitle(f"{trace}: monthly mean bounded slowdown (Figure 7)")
    return fig


def _legend_below(fig: Figure, ax) -> None:
    """One legend for the figure, under the panels, where it covers no bar."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))


def _grouped_bars(ax, table, column: str, ylabel: str) -> None:
    """Bars of ``column`` per policy (groups) and variant (bars, the paper's order)."""
    policies = list(dict.fromkeys(table["policy"]))
    variants = [v for v in data.VARIANT_ORDER if v in set(table["variant"])]
    width = 0.8 / len(variants)
    x = np.arange(len(policies))
    for i, variant in enumerate(variants):
        values = table[table["variant"] == variant].set_index("policy").reindex(policies)
        offset = (i - (len(variants) - 1) / 2) * width
        ax.bar(x + offset, values[column], width, label=variant, color=COLOURS.get(variant))
    ax.set_xticks(x, [p.upper() for p in policies])
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, axis="y")


def class_bsld(runs: list[Run], trace: str) -> Figure | None:
    """Figure 8: mean bounded slowdown of small and of large jobs per policy and variant."""
    table = data.class_bsld(runs)
    if table.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, column, title in zip(
        axes, ("bsld_small", "bsld_large"), ("small jobs", "large jobs"), strict=True
    ):
        _grouped_bars(ax, table, column, "mean bounded slowdown")
        ax.set_title(title)
    _legend_below(fig, axes[1])
    fig.suptitle(f"{trace}: bounded slowdown of small and large jobs (Figure 8)")
    return fig


def total_bsld(runs: list[Run], trace: str) -> Figure | None:
    """Figure 9: total bounded slowdown of the five variants, per policy."""
    table = data.total_bsld(runs)
    if table.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    _grouped_bars(ax, table, "total_bsld", "total bounded slowdown")
    ax.set_title(f"{trace}: total bounded slowdown per variant (Figure 9)")
    _legend_below(fig, ax)
    return fig


def _classified_run(runs: list[Run]) -> Run | None:
    for run in runs:
        if run.variant == CLASSIFIED and (run.path / "weekly_quality.csv").exists():
            return run
    return None


def weekly_quality(runs: list[Run], trace: str) -> Figure | None:
    """Figure 4: accuracy, precision and recall of each week's model."""
    run = _classified_run(runs)
    table = None if run is None else data.weekly_quality(run)
    if run is None or table is None or table.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.4))
    for column in ("accuracy", "precision", "recall"):
        ax.plot(table["week"], table[column], label=column, marker=".", linewidth=1)
    ax.set_xlabel("week")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # weeks, never 1.2
    ax.set_ylabel("share")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.set_title(f"{trace}: weekly classification quality, {run.policy.upper()} (Figure 4)")
    _legend_below(fig, ax)
    return fig


def importances(runs: list[Run], trace: str) -> Figure | None:
    """Figure 5: the weekly Gini importance of each feature, as box plots."""
    run = _classified_run(runs)
    table = None if run is None else data.importances(run)
    if table is None or table.empty:
        return None
    features = [c for c in table.columns if c != "week"]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.boxplot([table[f].to_numpy() for f in features], showfliers=False)
    ax.set_xticks(range(1, len(features) + 1), features, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("Gini importance")
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(f"{trace}: feature importance over {len(table)} weeks (Figure 5)")
    fig.tight_layout()
    return fig


def runtimes(runs: list[Run], trace: str) -> Figure | None:
    """Figure 1: distribution of requested and actual runtimes, with the divider."""
    run = _pick(runs, runs[0].policy, BASE) or runs[0]
    values = data.runtime_distribution(run)
    if not len(values["actual"]):
        return None
    fig, ax = plt.subplots(figsize=(8, 3.4))
    top = max(values["actual"].max(), values["requested"].max() if len(values["requested"]) else 1)
    bins = np.logspace(0, np.log10(top) + 0.1, 60).tolist()
    ax.hist(values["requested"], bins=bins, alpha=0.6, label="requested time")
    ax.hist(values["actual"], bins=bins, alpha=0.6, label="actual runtime")
    ax.axvline(
        values["divider"],
        color="black",
        linestyle="--",
        label=f"divider (median runtime) {values['divider']:.0f} s",
    )
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("jobs")
    ax.set_title(f"{trace}: requested and actual runtimes (Figure 1)")
    _legend_below(fig, ax)
    return fig


def _colour(variant: str) -> str | None:
    return COLOURS.get(variant)


def timelines(runs: list[Run], trace: str) -> Figure | None:
    """Utilisation and queue length over time, one row of two panels per run (shared axes,
    so rows compare at a glance)."""
    series = [(run, *data.timeline(run)) for run in runs]
    series = [(run, table, name) for run, table, name in series if not table.empty]
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
    for (run, table, _name), (left, right) in zip(series, axes, strict=True):
        edges = np.append(table["start"].to_numpy(), table["end"].iloc[-1])
        weights = table["end"] - table["start"]
        utilisation = 100 * np.average(table["utilisation"], weights=weights)
        queued = np.average(table["queued"], weights=weights)
        colour = _colour(run.variant) or "C0"
        left.stairs(100 * table["utilisation"], edges, fill=True, color=colour, alpha=0.8)
        right.stairs(table["queued"], edges, fill=True, color=colour, alpha=0.8)
        label = f"{run.policy.upper()} ({run.variant})"
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
    return fig


#: Line styles of the variants where their curves may lie on top of each other: the one drawn
#: last is dashed, and the one under it shows through.
LINESTYLES = {
    "base": "-",
    "classification": (0, (6, 2)),
    "classification-idempotent": (0, (3, 2)),
    "class-clairvoyant": (0, (6, 2, 1, 2)),
    "runtime-clairvoyant": (0, (1, 1.5)),
    "classification-guarded": (0, (4, 1, 1, 1)),
}

#: Waits below this (a minute) are drawn at it: the log axis cannot show 0.
WAIT_FLOOR_HOURS = 1 / 60


def _hours_label(value: float, _position: object = None) -> str:
    return "≤ 1 min" if np.isclose(value, WAIT_FLOOR_HOURS) else f"{value:g}"


def wait_distribution(runs: list[Run], trace: str) -> Figure | None:
    """The distribution of waiting times (CDF, log hours), one panel per policy, one line per
    variant, one legend under the panels."""
    curves = [(run, data.wait_cdf(data.waits(run))) for run in runs]
    curves = [(run, cdf) for run, cdf in curves if not cdf.empty]
    if not curves:
        return None
    policies = list(dict.fromkeys(run.policy for run, _cdf in curves))
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
    top = max(WAIT_FLOOR_HOURS * 10, *(cdf["wait_hours"].iloc[-1] for _run, cdf in curves))
    # the y axis starts at the 10 % step below the lowest share of jobs that waited under a
    # minute: below it every curve is flat, and the differences are above
    lowest = min(
        float(np.interp(WAIT_FLOOR_HOURS, cdf["wait_hours"], cdf["share"], left=0))
        for _run, cdf in curves
    )
    bottom = 10 * np.floor(10 * lowest - 1e-9) if lowest < 1 else 0.0
    bottom = max(0.0, min(bottom, 90.0))
    handles: dict[str, Artist] = {}
    for ax, policy in zip(axes.flat, policies, strict=False):
        for run, cdf in curves:
            if run.policy != policy:
                continue
            hours, share = cdf["wait_hours"].to_numpy(), cdf["share"].to_numpy()
            below = hours < WAIT_FLOOR_HOURS
            start = share[below][-1] if below.any() else 0.0
            (line,) = ax.step(  # from the share that waited under a minute to 100 %
                np.concatenate([[WAIT_FLOOR_HOURS], hours[~below], [top * 1.5]]),
                100 * np.concatenate([[start], share[~below], [1.0]]),
                where="post",
                label=run.variant,
                color=_colour(run.variant),
                linestyle=LINESTYLES.get(run.variant, "-"),
                linewidth=1.4,
            )
            handles.setdefault(run.variant, line)
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
        ncol=min(len(handles), 5),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(f"{trace}: distribution of waiting times")
    return fig


def comparison(runs: list[Run], trace: str) -> Figure | None:
    """Mean bounded slowdown, mean wait and utilisation per policy and variant."""
    table = data.comparison(runs)
    if table.empty:
        return None
    table = table.assign(utilisation_percent=100 * table["utilisation"].astype(float))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, column, ylabel, title in zip(
        axes,
        ("mean_bsld", "mean_wait_hours", "utilisation_percent"),
        ("mean bounded slowdown", "mean wait (hours)", "utilisation (%)"),
        (
            "bounded slowdown: lower is better",
            "wait: lower is better",
            "utilisation: higher is better",
        ),
        strict=True,
    ):
        _grouped_bars(ax, table, column, ylabel)
        ax.set_title(title, fontsize=10)
        crowded = len(table) > 8  # upright labels would run into each other
        for container in ax.containers:
            ax.bar_label(
                container, fmt="%.3g", fontsize=7, padding=2, rotation=90 if crowded else 0
            )
        ax.margins(y=0.25 if crowded else 0.15)
    axes[2].set_ylim(0, 115 if len(table) > 8 else 105)
    axes[2].set_yticks(range(0, 101, 20))
    _legend_below(fig, axes[0])
    fig.suptitle(f"{trace}: policies and variants at a glance")
    return fig


FIGURES = (
    ("runtimes", runtimes, "Requested and actual runtimes, with the divider (Figure 1)"),
    ("weekly-quality", weekly_quality, "Weekly accuracy, precision and recall (Figure 4)"),
    ("importances", importances, "Weekly Gini importance of each feature (Figure 5)"),
    ("cumulative-bsld", cumulative_bsld, "Cumulative bounded slowdown over time (Figure 6)"),
    ("monthly-bsld", monthly_bsld, "Monthly mean bounded slowdown (Figure 7)"),
    ("class-bsld", class_bsld, "Bounded slowdown of small and large jobs (Figure 8)"),
    ("total-bsld", total_bsld, "Total bounded slowdown per variant (Figure 9)"),
    (
        "comparison",
        comparison,
        "Policies and variants at a glance: mean bounded slowdown and mean wait in hours "
        "(lower is better) and utilisation, the share of the machines' time used by jobs "
        "(higher is better; the runs of one trace do the same work, so it differs only through "
        "the makespan and the values are close), from each run's summary.",
    ),
    (
        "utilisation-queue",
        timelines,
        "Utilisation (share of machines busy, left) and queue length (jobs submitted but not "
        "started, right) over the days of the trace, one row per run, averaged over each bin "
        "(the bin width is in the title); higher utilisation and shorter queues are better, "
        "and a long queue while machines sit idle means jobs too large or too long to fit.",
    ),
    (
        "wait-distribution",
        wait_distribution,
        "Distribution of waiting times (submission to start), one panel per policy, one line "
        "per variant: the share of jobs that waited at most the time on the x axis (hours, "
        "log scale). A curve higher and further left is better; its height at the left edge "
        "is the share of jobs that waited a minute or less (the y axis starts just below the "
        "lowest such share).",
    ),
)


def draw_trace(runs: list[Run], trace: str, out: Path) -> list[tuple[str, str]]:
    """Save every figure the runs of ``trace`` allow as ``out/TRACE-NAME.png``; return the file
    names and captions."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, draw, caption in FIGURES:
        fig = draw(runs, trace)
        if fig is None:
            continue
        file_name = f"{trace}-{name}.png"
        fig.savefig(out / file_name, dpi=110)
        plt.close(fig)
        saved.append((file_name, caption))
    return saved
