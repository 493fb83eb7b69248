"""``batsched-ml report``: figures and one self-contained HTML page (images inlined as base64,
so the page can be mailed or archived alone) with the summary table of every run."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from batsched_ml.report.data import Run, by_trace, find_runs, machines, one_per_figure
from batsched_ml.report.figures import draw_trace

COLUMNS = (
    ("policy", "policy"),
    ("variant", "variant"),
    ("jobs", "jobs"),
    ("mean_bsld", "mean bounded slowdown"),
    ("cumulative_bsld", "total bounded slowdown"),
    ("mean_wait", "mean wait (h)"),
    ("max_wait", "max wait (h)"),
    ("bsld_small", "bounded slowdown, small jobs"),
    ("bsld_large", "bounded slowdown, large jobs"),
    ("kills", "kills"),
    ("accuracy", "accuracy"),
    ("utilisation", "utilisation"),
)


def _hours(seconds: object) -> float | None:
    return seconds / 3600.0 if isinstance(seconds, int | float) else None


#: What the page's columns and figures mean; a reader should not need the paper open.
EXPLANATION = (
    "<p>Every run is a replay of the trace in batsched-ml's embedded Batsim 4.2.1 (or a run "
    "served to a real Batsim). The classified variants are the method of Zrigui, de Camargo, "
    "Legrand and Trystram, <i>Improving the Performance of Batch Schedulers Using Online Job "
    "Runtime Classification</i> (JPDC 2022); figure numbers refer to that paper.</p>"
    "<ul><li><b>Bounded slowdown</b> of a job: (wait + runtime) / max(runtime, 60 s), at least "
    "1. <b>Lower is better</b>; 1 means the job did not wait.</li>"
    "<li><b>Total bounded slowdown</b>: its sum over all jobs (the paper's cumulative "
    "figure); lower is better.</li>"
    "<li><b>Small / large jobs</b>: jobs whose actual runtime is below / above the divider, the "
    "median runtime of the trace's jobs; their mean bounded slowdown shows whom a policy "
    "helps.</li>"
    "<li><b>Waits</b> in hours, from submission to start. <b>Kills</b>: jobs classified small "
    "that reached the divider, killed and resubmitted as large. <b>Accuracy</b>: share of jobs "
    "classified right. <b>Utilisation</b>: processor time used over machines x makespan "
    "(the figures' share of machines busy, averaged over time); higher is better. <b>Queue "
    "length</b>: jobs submitted but not started yet (a job killed at the divider waits again "
    "from its resubmission); lower is better.</li>"
    "</ul>"
)


def summary_table(runs: list[Run]) -> pd.DataFrame:
    rows = []
    for run in runs:
        s = run.summary
        rows.append(
            {
                "policy": run.policy,
                "variant": run.variant,
                "jobs": s.get("jobs"),
                "mean_bsld": s.get("mean_bsld"),
                "cumulative_bsld": s.get("cumulative_bsld"),
                "mean_wait": _hours(s.get("mean_wait")),
                "max_wait": _hours(s.get("max_wait")),
                "bsld_small": s.get("bsld_small"),
                "bsld_large": s.get("bsld_large"),
                "kills": s.get("kills"),
                "accuracy": (s.get("classification") or {}).get("accuracy"),
                "utilisation": s.get("utilisation"),
            }
        )
    return pd.DataFrame(rows, columns=[key for key, _ in COLUMNS])


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) >= 1 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _table_html(table: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row[key])}</td>" for key, _ in COLUMNS) + "</tr>"
        for row in table.to_dict("records")
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td:nth-child(-n+2) { text-align: left; }
figure { margin: 1.5em 0; } img { max-width: 100%; } figcaption { color: #555; }
"""


def write_report(paths: list[str | Path], out_dir: str | Path) -> Path:
    """Figures (PNG) and ``index.html`` for every trace of the runs under ``paths``; the
    summary tables also as ``summary.csv``. Returns the page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = find_runs(list(paths))
    one_per_figure(runs)
    sections = []
    tables = []
    for trace, trace_runs in by_trace(runs).items():
        table = summary_table(trace_runs)
        tables.append(table.assign(trace=trace))
        figures = draw_trace(trace_runs, trace, out)
        images = "".join(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,'
            f'{base64.b64encode((out / name).read_bytes()).decode()}">'
            f"<figcaption>{html.escape(caption)} ({html.escape(name)})</figcaption></figure>"
            for name, caption in figures
        )
        sizes = sorted({machines(run) for run in trace_runs})
        platform = " or ".join(f"{n:,}" for n in sizes)
        sections.append(
            f"<h2>{html.escape(trace)}</h2><p>{_count(len(trace_runs), 'run')} on {platform} "
            "machines.</p>"
            f"{_table_html(table)}{images}"
        )
    pd.concat(tables).to_csv(out / "summary.csv", index=False)
    page = out / "index.html"
    sources = ", ".join(Path(p).name for p in paths)
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>batsched-ml report</title>"
        f"<style>{STYLE}</style></head><body><h1>batsched-ml report</h1>"
        f"<p>{_count(len(runs), 'run')} from {html.escape(sources)}.</p>"
        f"{EXPLANATION}" + "".join(sections) + "</body></html>\n"
    )
    return page
