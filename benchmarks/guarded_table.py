"""The table of docs/guarded.md: the guarded variant against the base, the paper's method
(classification-idempotent) and the class-clairvoyant ceiling, from campaign results.

Usage::

    python benchmarks/guarded_table.py runs/guarded/results.csv [MORE.csv ...]
    python benchmarks/guarded_table.py runs/study/results.csv --page docs/guarded.md

Reads the campaigns' ``results.csv`` (one row per run; several files are joined, a run listed
by two of them counted once) and, for each trace and policy, prints one markdown row: the base's mean
bounded slowdown; the gain over the base (reduction of the cumulative bounded slowdown, in %)
of the paper's method, the guarded variant and the ceiling; the share of the ceiling's gain
each method reaches; how much of the paper's method's gain the guarded variant keeps (its gain
over the method's, per copy); the jobs killed at the divider by each; the weeks the guard was
on (from each guarded run's ``summary.json``); and the verdicts of the targets: worse than the
base beyond the 95 % interval (with one copy there is no interval: the sign is shown), at least
90 % of the method's gain kept (FCFS), no more kills than the method. Figures are means over the
copies with a 95 % Student-t interval (:mod:`batsched_ml.results.gap`), paired per copy. A
second table gives the cost of each schedule to the machine beside the kills of the first: the
core-hours of the killed attempts and the useful utilisation (killed attempts left out). When
the campaigns hold other dispatchers of the base variant (``campaigns/study.toml``'s
probabilistic backfilling), a third table compares each with EASY the same way; when they hold
guarded runs with guard options (the study's ``guard_off_after=1``), a fourth shows them copy
by copy beside the method's and the default guard's runs.

With ``--page``, the three tables replace the text between the page's markers
(``<!-- study:begin -->`` and ``<!-- study:end -->``, ``study-cost``, ``study-dispatchers``,
``study-alone``, and ``study-size``: the number of replays and their wall time)
instead of being printed: the page's tables are this script's, made again with its runs.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
from _common import print_or_write

from batsched_ml.experiments.paper import short
from batsched_ml.results.gap import BASE, CEILING, Estimate, estimate, gain, share_of_ceiling
from batsched_ml.results.table import FINISHED_STATUSES, read_results

METHOD, GUARDED = "classification-idempotent", "classification-guarded"
VARIANTS = (BASE, METHOD, GUARDED, CEILING)


def weeks_on(path: str) -> tuple[int, int] | None:
    """The guard's weeks on and the weeks with a model, from a guarded run's summary."""
    file = Path(path) / "summary.json"
    if not file.exists():
        return None
    quality = json.loads(file.read_text()).get("classification", {})
    if "guard_weeks_on" not in quality:
        return None
    return int(quality["guard_weeks_on"]), int(quality["weeks_with_model"])


def of(copy: dict[str, pd.Series], variant: str) -> float:
    """A copy's cumulative bounded slowdown under ``variant`` (what the gains compare)."""
    return float(copy[variant]["cumulative_bsld"])


def text(value: Estimate | None, digits: int = 1) -> str:
    return "n/a" if value is None else value.text(100.0, digits)


def finished_defaults(results: pd.DataFrame) -> pd.DataFrame:
    """The finished runs without a classifier option, with the requested time."""
    results = results[results["status"].isin(FINISHED_STATUSES)]
    results = results[results["classifier_options"].fillna("") == ""]
    return results[results["predictor"].fillna("requested") == "requested"]


def yardsticks(results: pd.DataFrame) -> pd.DataFrame:
    """The finished runs of the default set-up, EASY (a campaign's other dispatchers, such as
    probabilistic backfilling, are compared by :func:`dispatcher_table`)."""
    results = finished_defaults(results)
    return results[results["dispatcher"].fillna("easy") == "easy"]


def dispatcher_table(results: pd.DataFrame) -> str:
    """Each other dispatcher of the base variant (e.g. ``probabilistic``) against EASY, per
    trace and policy, paired per copy: its gain over EASY with a 95 % interval, and both mean
    bounded slowdowns; empty when the campaign has none."""
    done = finished_defaults(results)
    done = done[done["variant"] == BASE]
    easy = {
        (str(r["trace"]), str(r["policy"]), int(r["copy"])): r
        for _, r in done[done["dispatcher"].fillna("easy") == "easy"].iterrows()
    }
    others = done[done["dispatcher"].fillna("easy") != "easy"]
    lines = [
        "| trace | policy | dispatcher | copies | EASY: mean bounded slowdown | "
        "dispatcher: mean bounded slowdown | gain over EASY | worse than EASY beyond interval? |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for (trace, policy, dispatcher), group in others.groupby(
        ["trace", "policy", "dispatcher"], sort=False
    ):
        pairs = [
            (easy[(str(trace), str(policy), int(r["copy"]))], r)
            for _, r in group.iterrows()
            if (str(trace), str(policy), int(r["copy"])) in easy
        ]
        if not pairs:
            continue
        g = estimate(
            [gain(float(e["cumulative_bsld"]), float(d["cumulative_bsld"])) for e, d in pairs]
        )
        if g.n < 2:
            verdict = "no interval (1 copy): " + ("worse" if g.mean < 0 else "not worse")
        else:
            verdict = "**yes**" if g.high < 0 else "no"
        base_bsld = sum(float(e["mean_bsld"]) for e, _ in pairs) / len(pairs)
        other_bsld = sum(float(d["mean_bsld"]) for _, d in pairs) / len(pairs)
        lines.append(
            f"| {short(str(trace))} | {policy} | {dispatcher} | {len(pairs)} | {base_bsld:.2f} | "
            f"{other_bsld:.2f} | {text(g)} | {verdict} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def full_copies(results: pd.DataFrame) -> dict[tuple[str, str], list[dict[str, pd.Series]]]:
    """The default set-up's finished runs by trace and policy: the copies that hold a run of
    each of the four variants, each as its runs by variant (both tables are made of these)."""
    cells: dict[tuple[str, str], dict[int, dict[str, pd.Series]]] = defaultdict(dict)
    for _, run in yardsticks(results).iterrows():
        copy = int(run["copy"])
        runs = cells[(str(run["trace"]), str(run["policy"]))].setdefault(copy, {})
        if str(run["variant"]) in runs:
            raise SystemExit(f"two runs of {run['variant']} for {run['trace']} {run['policy']}")
        runs[str(run["variant"])] = run
    out = {}
    for cell, copies in cells.items():
        full = [c for c in copies.values() if all(v in c for v in VARIANTS)]
        if full:
            out[cell] = full
    return out


def table(results: pd.DataFrame) -> str:
    lines = [
        "| trace | policy | copies | base: mean bounded slowdown | gain: method | gain: guarded | "
        "gain: ceiling | share: method | share: guarded | guarded keeps of the method's gain | "
        "kills: method | kills: guarded | guard on (weeks) | worse than base beyond interval? |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (trace, policy), full in full_copies(results).items():
        gains = {
            v: estimate([gain(of(c, BASE), of(c, v)) for c in full])
            for v in (METHOD, GUARDED, CEILING)
        }
        shares = {}
        for v in (METHOD, GUARDED):
            values = [share_of_ceiling(of(c, BASE), of(c, v), of(c, CEILING)) for c in full]
            known = [s for s in values if s is not None]
            shares[v] = estimate(known) if known else None
        kept_values = [
            (of(c, BASE) - of(c, GUARDED)) / (of(c, BASE) - of(c, METHOD))
            for c in full
            if of(c, BASE) != of(c, METHOD)
        ]
        kept = estimate(kept_values) if kept_values else None
        kills = {v: sum(float(c[v]["kills"]) for c in full) / len(full) for v in (METHOD, GUARDED)}
        jobs = sum(float(c[BASE]["jobs"]) for c in full) / len(full)
        on = [o for c in full if (o := weeks_on(str(c[GUARDED]["path"]))) is not None]
        on_text = (
            f"{sum(o[0] for o in on) / len(on):.0f} of {sum(o[1] for o in on) / len(on):.0f}"
            if len(on) == len(full)
            else "n/a"
        )
        g = gains[GUARDED]
        if g.n < 2:
            verdict = "no interval (1 copy): " + ("worse" if g.mean < 0 else "not worse")
        else:
            verdict = "**yes**" if g.high < 0 else "no"
        base_bsld = sum(float(c[BASE]["mean_bsld"]) for c in full) / len(full)
        lines.append(
            f"| {short(trace)} | {policy} | {len(full)} | {base_bsld:.2f} | "
            f"{text(gains[METHOD])} | {text(gains[GUARDED])} | {text(gains[CEILING])} | "
            f"{text(shares[METHOD], 0)} | {text(shares[GUARDED], 0)} | {text(kept, 0)} | "
            f"{kills[METHOD]:,.0f} ({100 * kills[METHOD] / jobs:.1f} %) | "
            f"{kills[GUARDED]:,.0f} ({100 * kills[GUARDED] / jobs:.1f} %) | {on_text} | "
            f"{verdict} |"
        )
    return "\n".join(lines)


def cost_table(results: pd.DataFrame) -> str:
    """What each variant's schedule costs the machine beyond the kills of :func:`table`, per
    trace and policy, means over the copies: the core-hours the killed attempts used (share of
    the core-hours of the whole run) and the useful utilisation (the killed attempts left out),
    beside the base's; empty without guarded runs."""
    lines = [
        "| trace | policy | copies | wasted core-hours: method | wasted core-hours: guarded | "
        "useful utilisation: base | method | guarded | ceiling |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (trace, policy), full in full_copies(results).items():

        def mean(variant: str, column: str, runs: list[dict[str, pd.Series]] = full) -> float:
            return sum(float(c[variant][column]) for c in runs) / len(runs)

        def wasted(variant: str) -> str:
            share = 100 * mean(variant, "wasted_share")
            return f"{mean(variant, 'wasted_core_hours'):,.0f} ({share:.2f} %)"

        useful = " | ".join(f"{100 * mean(v, 'useful_utilisation'):.2f} %" for v in VARIANTS)
        lines.append(
            f"| {short(trace)} | {policy} | {len(full)} | {wasted(METHOD)} | {wasted(GUARDED)} "
            f"| {useful} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def _weeks_text(run: pd.Series) -> str:
    """A guarded run's weeks on, as "on of weeks with a model" ("n/a" without a summary)."""
    on = weeks_on(str(run["path"]))
    return "n/a" if on is None else f"{on[0]} of {on[1]}"


def options_table(results: pd.DataFrame) -> str:
    """The guarded runs with guard options (``classifier_options``, such as the study's
    ``guard_off_after=1``), copy by copy beside the method's and the default guard's runs of
    the same copy: kills, mean bounded slowdown and the weeks on. Empty without such runs."""
    finished = results[results["status"].isin(FINISHED_STATUSES)]
    finished = finished[finished["dispatcher"].fillna("easy") == "easy"]
    optioned = finished[
        (finished["variant"] == GUARDED) & (finished["classifier_options"].fillna("") != "")
    ]
    defaults = finished_defaults(finished)
    lines = [
        "| trace | policy | guard options | copy | kills: method | kills: with the options | "
        "kills: default guard | mean bounded slowdown: method | with the options | default "
        "guard | weeks on: with the options | default guard |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for _, run in optioned.sort_values(["trace", "policy", "copy"], kind="stable").iterrows():
        same = defaults[
            (defaults["trace"] == run["trace"])
            & (defaults["policy"] == run["policy"])
            & (defaults["copy"] == run["copy"])
        ]
        by = {str(r["variant"]): r for _, r in same.iterrows()}
        if METHOD not in by or GUARDED not in by:
            continue
        method, default = by[METHOD], by[GUARDED]
        lines.append(
            f"| {short(str(run['trace']))} | {run['policy']} | `{run['classifier_options']}` | "
            f"{int(run['copy'])} | {int(method['kills']):,} | {int(run['kills']):,} | "
            f"{int(default['kills']):,} | {float(method['mean_bsld']):.2f} | "
            f"{float(run['mean_bsld']):.2f} | {float(default['mean_bsld']):.2f} | "
            f"{_weeks_text(run)} | {_weeks_text(default)} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def size(results: pd.DataFrame) -> str:
    """The campaign's size and cost: its replays and their wall time, summed from each run's
    ``timing.json`` (what this machine took, two runs at a time; results.csv gives no time for
    the runs a later campaign found done), and the share of it the slowest cell took."""
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    for _, run in results.iterrows():
        file = Path(run["path"]) / "timing.json"
        if file.exists():
            replay = json.loads(file.read_text()).get("replay_seconds", 0.0)
            seconds[(run["trace"], run["policy"])] += float(replay)
    total = sum(seconds.values())
    if not total:
        return ""
    (trace, policy), slowest = max(seconds.items(), key=lambda item: item[1])
    return (
        f"{len(results)} replays, {total / 3600:.1f} hours of replay in all (about"
        f" {total / 7200:.1f} hours of two cores), {100 * slowest / total:.0f} % of them on"
        f" {trace} under {policy.upper()}."
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path, help="campaigns' results.csv files")
    parser.add_argument("--page", type=Path, help="write the tables into this page's markers")
    args = parser.parse_args()
    frames = []
    for path in args.results:
        frame = read_results(path)
        frame["path"] = [str(path.parent / folder) for folder in frame["path"]]  # the output's
        frames.append(frame)
    combined = pd.concat(frames, ignore_index=True)  # a run listed by two campaigns: once
    combined = combined.drop_duplicates(subset=["trace", "policy", "variant", "copy", "path"])
    tables = {
        "study": table(combined),
        "study-cost": cost_table(combined),
        "study-dispatchers": dispatcher_table(combined),
        "study-alone": options_table(combined),
        "study-size": size(combined),
    }
    return print_or_write(args.page, tables)


if __name__ == "__main__":
    raise SystemExit(main())
