"""``batsched-ml report``: figures and one self-contained HTML page (images inlined as base64,
so the page can be mailed or archived alone) with the summary table of every run."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from batsched_ml.report.data import Run, by_trace, find_runs, one_per_figure
from batsched_ml.report.figures import draw_trace

COLUMNS = (
    ("policy", "policy"),
    ("variant", "variant"),
    ("jobs", "jobs"),
    ("mean_bsld", "mean bsld"),
    ("cumulative_bsld", "total bsld"),
    ("mean_wait", "mean wait (s)"),
    ("max_wait", "max wait (s)"),
    ("bsld_small", "bsld small"),
    ("bsld_large", "bsld large"),
    ("kills", "kills"),
    ("accuracy", "accuracy"),
    ("utilisation", "utilisation"),
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
                "mean_wait": s.get("mean_wait"),
                "max_wait": s.get("max_wait"),
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
        sections.append(
            f"<h2>{html.escape(trace)}</h2><p>{len(trace_runs)} runs.</p>"
            f"{_table_html(table)}{images}"
        )
    pd.concat(tables).to_csv(out / "summary.csv", index=False)
    page = out / "index.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>batsched-ml report</title>"
        f"<style>{STYLE}</style></head><body><h1>batsched-ml report</h1>"
        f"<p>{len(runs)} runs from {html.escape(', '.join(map(str, paths)))}.</p>"
        + "".join(sections)
        + "</body></html>\n"
    )
    return page
