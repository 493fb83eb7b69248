"""``batsched-ml report``: figures and one self-contained HTML page (images inlined as base64,
so the page can be mailed or archived alone) comparing any set of runs.

Runs are grouped by trace and setting (:mod:`batsched_ml.report.data`); the shaken copies of a
setting are summarised as means with 95 % intervals, and, given a baseline, every setting's
differences from it are paired copy by copy. Every gain stands beside its cost: kills, the
core-hours they wasted and the utilisation left for useful work.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from batsched_ml.report import data
from batsched_ml.report.data import Run, Setting, find_runs, machines
from batsched_ml.report.figures import draw_trace
from batsched_ml.results.gap import Estimate
from batsched_ml.workload.archive import find

#: The columns of a trace's table of means: metric key, header, scale for display; the gains,
#: then their cost. means.csv has every metric (the total bounded slowdown, the longest wait,
#: the small and large jobs' bounded slowdown too: their figure shows them).
COLUMNS = (
    ("mean_bsld", "mean bounded slowdown", 1.0),
    ("mean_wait_hours", "mean wait (h)", 1.0),
    ("accuracy", "accuracy (%)", 100.0),
    ("utilisation", "utilisation (%)", 100.0),
    ("useful_utilisation", "useful utilisation (%)", 100.0),
    ("kills", "kills", 1.0),
    ("share_killed", "jobs killed (%)", 100.0),
    ("wasted_core_hours", "wasted core-hours", 1.0),
    ("wasted_share", "wasted (% of machine)", 100.0),
)

#: The columns of the differences from the baseline: metric key, header, scale.
DIFFERENCE_COLUMNS = (
    ("mean_wait_hours", "Δ mean wait (h)", 1.0),
    ("useful_utilisation", "Δ useful utilisation (points)", 100.0),
    ("kills", "Δ kills", 1.0),
    ("share_killed", "Δ jobs killed (points)", 100.0),
    ("wasted_core_hours", "Δ wasted core-hours", 1.0),
)


#: What the page's columns and figures mean; a reader should not need the paper open.
EXPLANATION = (
    "<p>Every run is a replay of the trace in batsched-ml's embedded Batsim 4.2.1 (or a run "
    "served to a real Batsim). The classified variants are the method of Zrigui, de Camargo, "
    "Legrand and Trystram, <i>Improving the Performance of Batch Schedulers Using Online Job "
    "Runtime Classification</i> (JPDC 2022). A run is named by its label: the policy, then "
    "in parentheses the variant and what else it changed (predictor, dispatcher, options); "
    "the runs of one label on shaken copies of the trace are summarised by their mean ± the "
    "half width of the 95 % Student-t interval, with the number of copies.</p>"
    "<ul><li><b>Bounded slowdown</b> of a job: (wait + runtime) / max(runtime, 60 s), at least "
    "1. <b>Lower is better</b>; 1 means the job did not wait.</li>"
    "<li><b>Total bounded slowdown</b>: its sum over all jobs; lower is better.</li>"
    "<li><b>Small / large jobs</b>: jobs whose actual runtime is below / above the divider, the "
    "median runtime of the trace's jobs; their mean bounded slowdown shows whom a policy "
    "helps.</li>"
    "<li><b>Waits</b> in hours, from submission to start. <b>Accuracy</b>: share of jobs "
    "classified right. <b>Queue length</b>: jobs submitted but not started yet (a job killed "
    "at the divider waits again from its resubmission); lower is better.</li>"
    "<li>The cost side. <b>Kills</b>: killed attempts (jobs classified small that reached the "
    "divider, killed and resubmitted as large, and jobs killed at their walltime); <b>jobs "
    "killed</b>: the share of jobs with a killed attempt. <b>Wasted core-hours</b>: the "
    "processor time of the killed attempts, also as a share of the machine (machines x "
    "makespan). <b>Utilisation</b>: processor time used over machines x makespan, killed "
    "attempts included; <b>useful utilisation</b> leaves them out, so that work thrown away "
    "does not count as a gain. Higher is better.</li>"
    "</ul>"
)


@dataclass
class Report:
    """The runs of a report, checked and grouped, before anything is written."""

    runs: list[Run]
    settings: list[Setting]
    sources: list[str]  # the folders given, by name (the page embeds no absolute path)
    baseline: str | None = None
    #: per trace with the baseline, the settings' differences from it
    differences: dict[str, list[data.Difference]] = field(default_factory=dict)


def load_report(paths: list[str | Path], baseline: str | None = None) -> Report:
    """Find and check the runs under ``paths`` (refusing identical ones and an unknown
    baseline): all the report's refusals happen here, before its folder exists."""
    runs = find_runs(list(paths))
    settings = data.settings(runs)
    report = Report(runs, settings, [Path(p).name or str(p) for p in paths])
    if baseline is not None:
        report.baseline = data.find_baseline(settings, baseline)
        report.differences = data.differences(settings, report.baseline)
    return report


def trace_name(trace: str) -> str:
    """A trace's name for titles: the archive's short name (``KTH-SP2``) of a log it knows,
    else the name the runs give."""
    known = find(trace)
    return known.name if known is not None else trace


def _digits(value: float) -> int:
    return 2 if abs(value) >= 1 or value == 0 else 3


def _estimate_text(value: Estimate | None, scale: float = 1.0) -> str:
    """``mean ± half width`` (the mean alone for one copy), both with the mean's decimals."""
    if value is None:
        return "n/a"
    mean = value.mean * scale
    digits = _digits(mean)
    if value.n < 2:
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} ± {(value.high - value.low) / 2 * scale:,.{digits}f}"


def _signed(value: Estimate | None, scale: float = 1.0) -> str:
    if value is None:
        return "n/a"
    text = _estimate_text(value, scale)
    return text if text.startswith("-") else f"+{text}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def means_rows(settings: list[Setting]) -> list[list[str]]:
    rows = []
    for setting in settings:
        estimates = data.means(setting)
        rows.append(
            [
                setting.label,
                f"{len(setting.runs)}",
                *(_estimate_text(estimates[key], scale) for key, _h, scale in COLUMNS),
            ]
        )
    return rows


def difference_rows(differences: list[data.Difference]) -> list[list[str]]:
    rows = []
    for difference in differences:
        rows.append(
            [
                difference.setting.label,
                f"{len(difference.copies)}",
                _signed(difference.relative_bsld, 100.0),
                *(_signed(difference.values[key], scale) for key, _h, scale in DIFFERENCE_COLUMNS),
            ]
        )
    return rows


def _means_csv(settings: list[Setting]) -> pd.DataFrame:
    rows = []
    for setting in settings:
        row: dict[str, object] = {
            "trace": setting.trace,
            "label": setting.label,
            "policy": setting.policy,
            "variant": setting.variant,
            "copies": len(setting.runs),
        }
        for key, value in data.means(setting).items():
            row[key] = None if value is None else value.mean
            row[f"{key}_low"] = None if value is None else value.low
            row[f"{key}_high"] = None if value is None else value.high
        rows.append(row)
    return pd.DataFrame(rows)


def _differences_csv(report: Report) -> pd.DataFrame:
    rows = []
    for trace, differences in report.differences.items():
        for difference in differences:
            row: dict[str, object] = {
                "trace": trace,
                "label": difference.setting.label,
                "baseline": report.baseline,
                "copies": len(difference.copies),
            }
            values = {"mean_bsld_relative": difference.relative_bsld, **difference.values}
            for key, value in values.items():
                row[key] = None if value is None else value.mean
                row[f"{key}_low"] = None if value is None else value.low
                row[f"{key}_high"] = None if value is None else value.high
            rows.append(row)
    return pd.DataFrame(rows)


def summary_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: its trace, label, copy and every metric of the page."""
    rows = []
    for run in runs:
        seed, seconds = run.copy
        rows.append(
            {
                "trace": run.trace,
                "label": run.label,
                "policy": run.policy,
                "variant": run.variant,
                "copy": seed,
                "shake_seconds": seconds,
                "jobs": run.summary.get("jobs"),
                **{key: data.metric(run, key) for key, _h, _g in data.METRICS},
            }
        )
    return pd.DataFrame(rows)


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.8em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td { white-space: nowrap; }
td:first-child { text-align: left; white-space: normal; min-width: 14em; }
figure { margin: 1.5em 0; } img { max-width: 100%; } figcaption { color: #555; }
p.note { color: #8a4b00; }
"""


def _trace_section(
    report: Report,
    trace: str,
    settings: list[Setting],
    out: Path,
    gantt_window: tuple[float, float] | None,
) -> str:
    name = trace_name(trace)
    runs = [run for s in settings for run in s.runs]
    sizes = sorted({machines(run) for run in runs})
    platform = " or ".join(f"{n:,}" for n in sizes)
    jobs = " or ".join(
        f"{n:,}" for n in sorted({int(run.summary.get("jobs") or 0) for run in runs})
    )
    parts = [
        f"<h2>{html.escape(name)}</h2>",
        f"<p>{_count(len(runs), 'run')} of {_count(len(settings), 'setting')} on {platform} "
        f"machines (trace {html.escape(trace)}, {jobs} jobs).</p>",
        "<h3>Means over the copies</h3>",
        _table(["label", "copies", *(h for _k, h, _s in COLUMNS)], means_rows(settings)),
    ]
    if report.baseline is not None:
        parts.append(f"<h3>Against {html.escape(report.baseline)}</h3>")
        if trace in report.differences:
            parts.append(
                "<p>Each setting minus the baseline on the same copy of the trace, the mean "
                "of those differences ± the half width of its 95 % interval; the change of "
                "the mean bounded slowdown relative to the baseline's (negative: better), "
                "then what it cost.</p>"
            )
            parts.append(
                _table(
                    [
                        "label",
                        "paired copies",
                        "Δ mean bounded slowdown (%)",
                        *(h for _k, h, _s in DIFFERENCE_COLUMNS),
                    ],
                    difference_rows(report.differences[trace]),
                )
            )
        else:
            parts.append(
                f'<p class="note">No run of {html.escape(report.baseline)} on this trace: '
                "no differences.</p>"
            )
    _table_of_trade_off, missing = data.trade_off(settings)
    if missing:
        parts.append(
            '<p class="note">No trade-off point for '
            + ", ".join(html.escape(label) for label in missing)
            + ": its share of the ceiling needs the base and class-clairvoyant runs of the same "
            "policy and settings, on the same copies.</p>"
        )
    figures = draw_trace(settings, trace, name, out, gantt_window=gantt_window)
    for file_name, caption in figures:
        csv = file_name.removesuffix(".png") + ".csv"
        encoded = base64.b64encode((out / file_name).read_bytes()).decode()
        parts.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{encoded}">'
            f'<figcaption>{html.escape(caption)} Data: <a href="{html.escape(csv)}">'
            f"{html.escape(csv)}</a></figcaption></figure>"
        )
    return "".join(parts)


def write_report(
    report: Report | list[str | Path],
    out_dir: str | Path,
    *,
    gantt_window: tuple[float, float] | None = None,
) -> Path:
    """Figures (PNG, each with its values as CSV) and ``index.html`` for every trace of the
    report (or of the runs under the paths given); ``summary.csv`` (one row per run),
    ``means.csv`` (per trace and label) and, with a baseline, ``differences.csv``. Returns the
    page's path."""
    if not isinstance(report, Report):
        report = load_report(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    by_trace: dict[str, list[Setting]] = {}
    for setting in report.settings:
        by_trace.setdefault(setting.trace, []).append(setting)
    for trace, settings in by_trace.items():
        sections.append(_trace_section(report, trace, settings, out, gantt_window))
    summary_table(report.runs).to_csv(out / "summary.csv", index=False)
    _means_csv(report.settings).to_csv(out / "means.csv", index=False)
    if report.baseline is not None:
        _differences_csv(report).to_csv(out / "differences.csv", index=False)
    page = out / "index.html"
    sources = ", ".join(report.sources)
    baseline = (
        f" Differences against {html.escape(report.baseline)}."
        if report.baseline is not None
        else ""
    )
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>batsched-ml report</title>"
        f"<style>{STYLE}</style></head><body><h1>batsched-ml report</h1>"
        f"<p>{_count(len(report.runs), 'run')} of {_count(len(report.settings), 'setting')} "
        f"from {html.escape(sources)}.{baseline}</p>"
        f"{EXPLANATION}" + "".join(sections) + "</body></html>\n"
    )
    return page
