"""``docs/related-work.md``: the related work's predictors and dispatchers on our scheduler.

The page is written from the run folders of a campaign (``campaigns/related-work.toml``): for
each trace, the prediction quality of every predictor (the SU paper's APA, MAE, UR, and the
time a prediction takes), the mean bounded slowdown and mean wait of every predictor x
dispatcher, the walltime corrections of Rubio et al. under EASY, and the classification (Zrigui
et al.) beside them; then the comparison with the figures the papers publish. A run not made
yet shows as ``n/r`` and the page lists what is missing, so a partial campaign still gives a
truthful page.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from batsched_ml.experiments.campaign import Campaign, result_row, spec_of_row
from batsched_ml.registry import CORRECTIONS, RELATED_DISPATCHERS
from batsched_ml.results.runfolder import COMPLETE, code_identity, read_run, same_code
from batsched_ml.results.table import RESULT_COLUMNS
from batsched_ml.scheduler.predictors import PREDICTORS as BUILTIN

PREDICTORS = tuple(BUILTIN)  # the page's rows, in the command line's order
MISSING = "n/r"
#: A cell whose setting the campaign does not hold (it would not be made by running it).
NOT_IN_CAMPAIGN = "–"

#: Rubio et al., Tables 4 and 5, HPC2N Seth column (their cleaning: a one-user flurry, 55 % of the
#: log, and jobs over 7 days removed; first 1 % of jobs left out of the means; Slurm simulator).
SEED_002_HPC2N = {
    # policy: (mean wait in minutes, mean bounded slowdown)
    ("requested", "none"): (93.38, 637.0),
    ("easy++", "power"): (111.13, 655.0),
    ("easy++", "simple"): (108.66, 655.0),
    ("adaboost", "power"): (53.09, 2.0),
    ("adaboost", "simple"): (52.61, 2.0),
    ("fixed", "power"): (70.00, 16.0),
    ("fixed", "simple"): (59.63, 16.0),
}
#: The SU paper, Table 5 (CARDC, 26,208 jobs): SU with each regressor, and the same without SU.
SEED_003 = {
    "SU + SVR": (0.8046, 0.2485, 2762.7),
    "SU + RFR": (0.7469, 0.3022, 3181.9),
    "SU + linear": (0.7482, 0.3134, 3140.5),
    "SVR alone": (0.5400, 0.489, 9488.0),
}


def collect(campaign: Campaign) -> pd.DataFrame:
    """One row per run of the campaign, from its folder (``status`` is ``missing`` when the
    run has not been made)."""
    rows = []
    for spec in campaign.runs:
        folder = spec.folder(campaign.output)
        run = read_run(folder)
        if (folder / "summary.json").exists() and (run is None or run.get("status") == COMPLETE):
            # made by other code than this checkout's (or before runs had an identity): shown,
            # and counted on the page, so a page never mixes code versions unannounced
            stale = run is None or not same_code(run.get("code"), code_identity())
            row = result_row(
                spec, folder, "existing", 0.0, rerun_reason="made by other code" if stale else ""
            )
        else:
            row = {**spec.__dict__, "status": "missing"}
        rows.append(row)
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def _matching(table: pd.DataFrame, where: dict[str, Any]) -> pd.Series:
    """The rows of the campaign's runs of ``where`` (with the default options unless ``where``
    names some), made or not."""
    where = {"predictor_options": "", "dispatcher_options": "", **where}
    mask = pd.Series(True, index=table.index)
    for key, value in where.items():
        mask &= table[key] == value
    return mask


def _made(table: pd.DataFrame, mask: pd.Series, column: str) -> float | None:
    """``column`` of the first made run among ``mask``'s; ``None`` if none is made or it does
    not report it."""
    found = table[mask & (table["status"] != "missing")]
    if found.empty or column not in found or pd.isna(found.iloc[0][column]):
        return None
    return float(found.iloc[0][column])


def _value(table: pd.DataFrame, column: str, **where: Any) -> float | None:
    """``column`` of the run matching ``where``; ``None`` if not made or not reported."""
    return _made(table, _matching(table, where), column)


def _cell(table: pd.DataFrame, column: str, fmt: str, **where: Any) -> str:
    """``column`` of the run of ``where`` formatted; :data:`MISSING` for a run of the
    campaign not made yet, :data:`NOT_IN_CAMPAIGN` for a setting the campaign does not hold."""
    mask = _matching(table, where)
    value = _made(table, mask, column)
    if value is not None:
        return format(value, fmt)
    return MISSING if bool(mask.any()) else NOT_IN_CAMPAIGN


def _markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _base(**extra: Any) -> dict[str, Any]:
    return {"policy": "fcfs", "variant": "base", **extra}


def trace_section(table: pd.DataFrame, trace: str) -> list[str]:
    runs = table[table["trace"] == trace]
    jobs = runs["jobs"].dropna()
    count = f"{int(jobs.iloc[0]):,} jobs" if not jobs.empty else "no run yet"
    out = [f"## {trace} ({count})", ""]

    out += ["**Prediction quality** (EASY, FCFS, no correction; the SU paper, equations 6-8)", ""]
    rows = []
    for predictor in PREDICTORS:
        where = _base(predictor=predictor, correction="none", dispatcher="easy")
        rows.append(
            [
                predictor,
                _cell(runs, "APA", ".3f", **where),
                _cell(runs, "MAE", ",.0f", **where),
                _cell(runs, "UR", ".3f", **where),
                _cell(runs, "predict_us_per_job", ",.0f", **where),
            ]
        )
    header = ["predictor", "APA", "MAE (s)", "UR", "µs per prediction (training included)"]
    out += [*_markdown(header, rows), ""]

    for column, label, fmt in (
        ("mean_bsld", "Mean bounded slowdown", ",.2f"),
        ("mean_wait", "Mean wait (s)", ",.0f"),
    ):
        out += [f"**{label}**, predictor x dispatcher (FCFS arrival order for EASY)", ""]
        rows = []
        for predictor in PREDICTORS:
            if predictor == "fixed":  # a correction-only start: meaningless without one
                continue
            rows.append(
                [predictor]
                + [
                    _cell(
                        runs,
                        column,
                        fmt,
                        **_base(predictor=predictor, correction="none", dispatcher=d),
                    )
                    for d in RELATED_DISPATCHERS
                ]
            )
        out += [*_markdown(["predictor", *RELATED_DISPATCHERS], rows), ""]
        if any(NOT_IN_CAMPAIGN in row for row in rows):
            out += [
                f"{NOT_IN_CAMPAIGN}: not in the campaign (its file says why, and which "
                "campaign makes it).",
                "",
            ]

    out += [
        "**Walltime correction** under EASY (Rubio et al.): mean bounded slowdown / mean wait (s)"
    ]
    out += [""]
    rows = []
    for predictor in PREDICTORS:
        if predictor == "actual":
            continue
        cells = [predictor]
        for correction in CORRECTIONS:
            where = _base(predictor=predictor, correction=correction, dispatcher="easy")
            cells.append(
                f"{_cell(runs, 'mean_bsld', ',.2f', **where)} / "
                f"{_cell(runs, 'mean_wait', ',.0f', **where)}"
            )
        rows.append(cells)
    out += [*_markdown(["predictor", *CORRECTIONS], rows), ""]

    where = {"policy": "fcfs", "variant": "classification-idempotent"}
    out += [
        "**Classification** (Zrigui et al., FCFS, classification-idempotent): mean bounded "
        "slowdown "
        f"{_cell(runs, 'mean_bsld', ',.2f', **where)}, mean wait "
        f"{_cell(runs, 'mean_wait', ',.0f', **where)} s, classification accuracy "
        f"{_cell(runs, 'accuracy', '.3f', **where)}.",
        "",
    ]
    return out


def _percent_change(new: float | None, old: float | None) -> str:
    if new is None or old is None or old == 0 or math.isnan(new) or math.isnan(old):
        return MISSING
    return f"{100.0 * (new - old) / old:+.0f} %"


def comparison_section(table: pd.DataFrame) -> list[str]:
    out = ["## Compared with the published figures", ""]
    hpc2n = table[table["trace"].str.startswith("HPC2N")]
    out += [
        "**Rubio et al., HPC2N** (Tables 4 and 5): change of the mean wait and mean bounded "
        "slowdown against the user estimate, published and ours (EASY, FCFS).",
        "",
    ]
    published_base = SEED_002_HPC2N[("requested", "none")]
    ours_wait = _value(hpc2n, "mean_wait", **_base(predictor="requested", correction="none"))
    ours_bsld = _value(hpc2n, "mean_bsld", **_base(predictor="requested", correction="none"))
    rows = []
    for (predictor, correction), (wait, bsld) in SEED_002_HPC2N.items():
        if (predictor, correction) == ("requested", "none"):
            continue
        where = _base(predictor=predictor, correction=correction, dispatcher="easy")
        label = {"adaboost": "regression (AdaBoost)", "fixed": "correction only"}.get(
            predictor, predictor
        )
        rows.append(
            [
                f"{label}, {correction}",
                _percent_change(wait, published_base[0]),
                _percent_change(_value(hpc2n, "mean_wait", **where), ours_wait),
                _percent_change(bsld, published_base[1]),
                _percent_change(_value(hpc2n, "mean_bsld", **where), ours_bsld),
            ]
        )
    out += _markdown(
        ["policy", "wait, Rubio et al.", "wait, ours", "bsld, Rubio et al.", "bsld, ours"], rows
    )
    out += [""]
    out += [
        "**The SU paper, SU** (Table 5, CARDC): APA / UR / MAE published, and SU (SVR, alpha 1) "
        "on our traces.",
        "",
    ]
    rows = [[name, f"{a:.3f}", f"{u:.3f}", f"{m:,.0f}"] for name, (a, u, m) in SEED_003.items()]
    for trace in sorted(table["trace"].unique()):
        where = _base(predictor="su", correction="none", dispatcher="easy", trace=trace)
        rows.append(
            [
                f"SU + SVR on {trace}",
                _cell(table, "APA", ".3f", **where),
                _cell(table, "UR", ".3f", **where),
                _cell(table, "MAE", ",.0f", **where),
            ]
        )
    out += [*_markdown(["", "APA", "UR", "MAE (s)"], rows), ""]
    return out


def missing_section(table: pd.DataFrame, campaign: Campaign) -> list[str]:
    missing = table[table["status"] == "missing"]
    stale = int((table["rerun_reason"].map(lambda v: v if isinstance(v, str) else "") != "").sum())
    out = []
    if stale:
        out += [
            f"**{stale} of {len(table)} runs on this page were made by other code** than the "
            "checkout that wrote it (or before run folders recorded their code): "
            "`batsched-ml related-work` reruns them.",
            "",
        ]
    if missing.empty:
        return [*out, "Every run of the campaign is on this page.", ""]
    out += [
        f"## Not run yet ({len(missing)} of {len(table)} runs)",
        "",
        "Cells marked n/r. `batsched-ml related-work` runs them (it skips the runs already made):",
        "",
    ]
    for _, row in missing.iterrows():
        spec = spec_of_row(row)
        out.append(f"- `{spec.folder(Path('.')).as_posix()}`")
    out.append("")
    return out


def runs_on_page(page: str, total: int) -> int | None:
    """How many runs a page written by :func:`render` shows (``total``: the campaign's size,
    for pages of before the count was written in them); ``None`` if it does not say."""
    match = re.search(r"<!-- runs on this page: (\d+) of \d+ -->", page)
    if match:
        return int(match.group(1))
    if "Every run of the campaign is on this page." in page:
        return total
    match = re.search(r"## Not run yet \((\d+) of (\d+) runs\)", page)
    if match:
        return int(match.group(2)) - int(match.group(1))
    return None


def render(table: pd.DataFrame, campaign: Campaign, notes: str = "") -> str:
    """The page, as Markdown."""
    source = campaign.source.name if campaign.source is not None else "the campaign"
    made = int((table["status"] != "missing").sum())
    out = [
        "# The related work on the batsched-ml scheduler",
        "",
        "<!-- written by `batsched-ml related-work`; edit the generator "
        "(batsched_ml/report/related_work.py), not this file -->",
        f"<!-- runs on this page: {made} of {len(table)} -->",
        "",
        f"Generated from the runs of `campaigns/{source}` by `batsched-ml related-work "
        f"campaigns/{source} -o docs/related-work.md`. Every run is a full replay of the trace "
        "in the embedded simulator (FCFS arrival order unless the dispatcher orders the queue "
        "itself), predictors capped by the requested time. Predictors: `requested` (user "
        "estimate), `actual` (clairvoyant), `easy++`, `fixed` (10 min, correction only), "
        "`adaboost`, `profile` (Galleguillos et al.'s heuristic), `su` (the SU paper). "
        "Dispatchers: `easy` (EASY backfilling), `sjf`, `ljf`, `prb`, `cph` (Galleguillos et "
        "al.). The prediction time per job is measured on the machine that made the run (2 "
        "cores here); everything else is reproducible byte for byte. The abbreviations "
        "([APA](glossary.md#apa), [MAE](glossary.md#mae), [UR](glossary.md#ur), "
        "[EASY](glossary.md#easy), [EASY++](glossary.md#easy-plus-plus), [SU](glossary.md#su), "
        "[SJF](glossary.md#sjf), [LJF](glossary.md#ljf), [PRB](glossary.md#prb), "
        "[CPH](glossary.md#cph), [FCFS](glossary.md#fcfs), [bsld](glossary.md#bsld)) are "
        "defined in the [glossary](glossary.md).",
        "",
    ]
    for trace in dict.fromkeys(table["trace"]):
        out += trace_section(table, trace)
    out += comparison_section(table)
    if notes:
        out += [notes.strip(), ""]
    out += missing_section(table, campaign)
    return "\n".join(out)
