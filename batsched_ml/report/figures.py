"""The paper's figures, drawn with matplotlib from :mod:`batsched_ml.report.data`.

Each function draws one figure for one trace and returns it; :func:`draw_trace` saves them all
as PNG files and returns their names and captions. Figure numbers are the paper's (Zrigui et
al., JPDC 2022).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no screen

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from batsched_ml.report import data
from batsched_ml.report.data import Run

BASE, CLASSIFIED = "base", "classification-idempotent"
COLOURS = {
    "base": "#4c72b0",
    "classification": "#dd8452",
    "classification-idempotent": "#55a868",
    "class-clairvoyant": "#c44e52",
    "runtime-clairvoyant": "#8172b3",
}


def _pick(runs: list[Run], policy: str, variant: str) -> Run | None:
    return next((r for r in runs if r.policy == policy and r.variant == variant), None)


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
            series = data.cumulative_bsld(_pick(runs, policy, variant))
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
        base = data.monthly_bsld(_pick(runs, policy, BASE))
        classified = data.monthly_bsld(_pick(runs, policy, CLASSIFIED))
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
    ax.legend(fontsize=7)
    ax.set_title(f"{trace}: total bounded slowdown per variant (Figure 9)")
    fig.tight_layout()
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
    if table is None or table.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.4))
    for column in ("accuracy", "precision", "recall"):
        ax.plot(table["week"], table[column], label=column, marker=".", linewidth=1)
    ax.set_xlabel("week")
    ax.set_ylabel("share")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{trace}: weekly classification quality, {run.policy.upper()} (Figure 4)")
    fig.tight_layout()
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
    bins = np.logspace(0, np.log10(top) + 0.1, 60)
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
    ax.legend(fontsize=8)
    ax.set_title(f"{trace}: requested and actual runtimes (Figure 1)")
    fig.tight_layout()
    return fig


FIGURES = (
    ("runtimes", runtimes, "Requested and actual runtimes, with the divider (Figure 1)"),
    ("weekly-quality", weekly_quality, "Weekly accuracy, precision and recall (Figure 4)"),
    ("importances", importances, "Weekly Gini importance of each feature (Figure 5)"),
    ("cumulative-bsld", cumulative_bsld, "Cumulative bounded slowdown over time (Figure 6)"),
    ("monthly-bsld", monthly_bsld, "Monthly mean bounded slowdown (Figure 7)"),
    ("class-bsld", class_bsld, "Bounded slowdown of small and large jobs (Figure 8)"),
    ("total-bsld", total_bsld, "Total bounded slowdown per variant (Figure 9)"),
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
