"""Probabilistic backfilling against EASY: the measurements behind its defaults and its page.

    python benchmarks/probabilistic_study.py tune    # KTH-SP2, FCFS and SPF: epsilon,
                                                     # min_history and window (the defaults)
    python benchmarks/probabilistic_study.py study   # KTH-SP2, SDSC-SP2, HPC2N, CTC-SP2 x FCFS,
                                                     # SPF x EASY and two epsilons x 3 copies
    python benchmarks/probabilistic_study.py page    # the tables of docs/probabilistic-backfilling.md

``tune`` and ``study`` write ``benchmarks/results/probabilistic-{tune,study}.json``; ``page``
reads them and ``option-cost.json`` (``benchmarks/option_cost.py``) and writes the tables
between the page's markers, so that every figure of the page
is one these runs measured. Replays run one after the other (the machine is shared).

Besides the mean bounded slowdown and the waits, each run counts the *delayed heads*: jobs that
started after the shadow time of their first reservation (the scheduler's audit). Under EASY
with FCFS none is (the reservation is a guarantee); under SPF a shorter job arriving can take
the head's place, so EASY delays some too; the probabilistic dispatcher adds the heads its risky
starts delay. The copies are Tsafrir et al.'s shaken traces (copy 0: the trace itself).
"""

from __future__ import annotations

import io
import json
import sys
import time
from typing import Any

import pandas as pd
from _common import ROOT, trace_named, write_between_markers

from batsched_ml.experiments import probe
from batsched_ml.results.gap import estimate
from batsched_ml.results.metrics import summarize
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.sim.jobs_csv import HEADER
from batsched_ml.workload.io import load_workload
from batsched_ml.workload.shake import shake

RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "probabilistic-backfilling.md"
TRACES = [
    "KTH-SP2-1996-2.1-cln",
    "SDSC-SP2-1998-4.2-cln",
    "HPC2N-2002-2.2-cln",
    "CTC-SP2-1996-3.1-cln",
]
POLICIES = ["fcfs", "spf"]
#: the study's probabilistic settings: the default and a bolder epsilon
STUDY = [{}, {"epsilon": 0.3}]
COPIES = 3
#: the probabilistic dispatcher's parameters, recorded with each run
SETTINGS = ("epsilon", "min_history", "window")


def one_run(workload: dict[str, Any], policy: str, dispatcher: str, params: dict) -> dict:
    """One replay's figures, with its delayed heads (from the reservations audit)."""
    config = ReplayConfig(policy=policy, dispatcher=dispatcher, dispatcher_params=params)
    started = time.perf_counter()
    result = run_replay(workload, config, audit=True)
    seconds = time.perf_counter() - started
    table = pd.read_csv(
        io.StringIO(HEADER + "\n" + "\n".join(result.rows) + "\n"), dtype={"job_id": str}
    )
    summary = summarize(table, nb_machines=int(workload["nb_res"]))
    first_shadow: dict[str, float] = {}
    for _now, job_id, shadow in result.scheduler.reservations:
        first_shadow.setdefault(job_id.partition("!")[2], shadow)
    starts = dict(zip(table["job_id"], table["starting_time"], strict=True))
    late = [starts[job] - shadow for job, shadow in first_shadow.items() if job in starts]
    delays = [d for d in late if d > 1e-6]
    dispatcher_made = result.scheduler.dispatcher
    settings = {k: getattr(dispatcher_made, k) for k in SETTINGS if hasattr(dispatcher_made, k)}
    return {
        "settings": settings,  # every parameter in force, defaults included
        "mean_bsld": summary["mean_bsld"],
        "mean_wait": summary["mean_wait"],
        "max_wait": summary["max_wait"],
        "jobs": summary["jobs"],
        "risky_starts": getattr(result.scheduler.dispatcher, "risky_starts", 0),
        "heads": len(late),
        "heads_delayed": len(delays),
        "max_head_delay": max(delays, default=0.0),
        "seconds": round(seconds, 1),
    }


def save(name: str, rows: list[dict]) -> None:
    """The rows, with the code that made them (its results pages' probes need it)."""
    RESULTS.mkdir(exist_ok=True)
    data = {"made_by": probe.current_code(), "rows": rows}
    (RESULTS / f"probabilistic-{name}.json").write_text(json.dumps(data, indent=1) + "\n")


def _config(row: dict) -> ReplayConfig:
    return ReplayConfig(
        policy=row["policy"], dispatcher=row["dispatcher"], dispatcher_params=row["params"]
    )


def tune() -> None:
    """KTH-SP2: epsilon at the other defaults, then min_history x window at epsilon 0.1."""
    workload = load_workload(trace_named(TRACES[0]))
    grid: list[tuple[str, dict]] = [("easy", {})]
    grid += [("probabilistic", {"epsilon": e}) for e in (0.05, 0.1, 0.2, 0.3, 0.5)]
    grid += [
        ("probabilistic", {"epsilon": 0.1, "min_history": m, "window": w})
        for m in (2, 5, 10)
        for w in (10, 20, 100)
        if w >= m and (m, w) != (5, 100)  # (5, 100): the defaults, above
    ]
    rows = []
    for policy in POLICIES:
        for dispatcher, params in grid:
            row = {"policy": policy, "dispatcher": dispatcher, "params": params}
            row.update(one_run(workload, policy, dispatcher, params))
            print(json.dumps(row), flush=True)
            rows.append(row)
    save("tune", rows)


def study() -> None:
    rows = []
    for trace in TRACES:
        original = load_workload(trace_named(trace))
        for copy in range(COPIES):
            workload = shake(original, copy) if copy else original
            for policy in POLICIES:
                for dispatcher, params in [("easy", {})] + [("probabilistic", p) for p in STUDY]:
                    row = {"trace": trace, "copy": copy, "policy": policy}
                    row |= {"dispatcher": dispatcher, "params": params}
                    row.update(one_run(workload, policy, dispatcher, params))
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    save("study", rows)


def _label(dispatcher: str, settings: dict, shown: tuple[str, ...] = SETTINGS) -> str:
    if dispatcher == "easy":
        return "EASY"
    return "probabilistic, " + ", ".join(f"{k}={settings[k]}" for k in shown)


def _short(trace: str) -> str:
    """``HPC2N-2002-2.2-cln``: ``HPC2N``; ``KTH-SP2-1996-2.1-cln``: ``KTH-SP2``."""
    parts = trace.split("-")
    return "-".join(parts[: next(i for i, p in enumerate(parts) if p[:1].isdigit())])


def tune_table(rows: list[dict]) -> list[str]:
    lines = [
        "| policy | dispatcher | mean bounded slowdown | max wait (h) | risky starts "
        "| delayed heads | longest head delay (h) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['policy'].upper()} | {_label(row['dispatcher'], row['settings'])} "
            f"| {row['mean_bsld']:.2f} | {row['max_wait'] / 3600:.1f} | {row['risky_starts']} "
            f"| {row['heads_delayed']} | {row['max_head_delay'] / 3600:.1f} |"
        )
    return lines


def study_table(rows: list[dict]) -> list[str]:
    """Per trace, policy and dispatcher: means over the copies with 95 % intervals, and the
    gain over EASY paired per copy."""
    lines = [
        "| trace | policy | dispatcher | mean bounded slowdown | gain over EASY (%) "
        "| max wait (h) | risky starts (% of jobs) | delayed heads | longest head delay (h) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    frame = pd.DataFrame(rows)
    frame["label"] = [
        _label(d, p, ("epsilon",))
        for d, p in zip(frame["dispatcher"], frame["settings"], strict=True)
    ]
    for trace in TRACES:
        for policy in POLICIES:
            cell = frame[(frame["trace"] == trace) & (frame["policy"] == policy)]
            if cell.empty:
                continue
            easy = cell[cell["dispatcher"] == "easy"].set_index("copy")
            for label in dict.fromkeys(cell["label"]):
                runs = cell[cell["label"] == label].set_index("copy")
                bsld = estimate(list(runs["mean_bsld"]))
                gains = [
                    (easy.loc[c, "mean_bsld"] - runs.loc[c, "mean_bsld"]) / easy.loc[c, "mean_bsld"]
                    for c in runs.index
                ]
                wait = estimate(list(runs["max_wait"] / 3600))
                risky = estimate(list(runs["risky_starts"] / runs["jobs"]))
                heads = estimate(list(runs["heads_delayed"].astype(float)))
                delay = runs["max_head_delay"].max() / 3600
                gain = "-" if label == "EASY" else estimate(gains).text(100, 1)
                lines.append(
                    f"| {_short(trace)} | {policy.upper()} | {label} | {bsld.text(1, 2)} "
                    f"| {gain} | {wait.text(1, 0)} | {risky.text(100, 1)} | {heads.text(1, 0)} "
                    f"| {delay:.1f} |"
                )
    others = {
        (row["settings"]["min_history"], row["settings"]["window"])
        for row in rows
        if row["dispatcher"] != "easy"
    }
    (min_history, window), *more = sorted(others)
    if more:
        raise SystemExit(f"the study mixes min_history and window settings: {sorted(others)}")
    copies = frame.groupby(["trace", "policy", "label"])["copy"].nunique()
    lines += [
        "",
        f"The probabilistic runs: min_history={min_history}, window={window}; "
        f"{copies.min()} copies of each trace.",
    ]
    return lines


def cost_table(result: dict) -> list[str]:
    lines = [
        f"{_short(result['trace'])}, FCFS, median of {result['repeats']}:",
        "",
        "| option | whole replay (µs per job) | ratio to EASY |",
        "|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(f"| {row['option']} | {row['replay_us']:.1f} | {row['replay_ratio']:.2f} |")
    return lines


def page() -> None:
    sources = {
        "tune": (RESULTS / "probabilistic-tune.json", tune_table),
        "study": (RESULTS / "probabilistic-study.json", study_table),
        "cost": (RESULTS / "option-cost.json", cost_table),
    }
    made: dict[str, dict] = {}
    tables: dict[str, str] = {}
    for name, (path, render) in sources.items():
        rows = json.loads(path.read_text())
        if isinstance(rows, dict) and "made_by" in rows:  # the rows, with the code that made them
            made[name] = rows
            rows = rows["rows"]
        tables[name] = "\n".join(render(rows))
    write_between_markers(PAGE, tables)
    codes = {json.dumps(data["made_by"], sort_keys=True) for data in made.values()}
    if set(made) != {"tune", "study"} or len(codes) != 1:
        raise SystemExit(f"{PAGE}: tune and study were not both made by one code: no probes")
    configs = [_config(row) for data in made.values() for row in data["rows"]]
    source = "benchmarks/probabilistic_study.py"
    data = next(iter(made.values()))
    path = probe.write_probes(PAGE, configs, shaken=True, source=source, made_by=data["made_by"])
    print(f"wrote {PAGE} and {path}")


if __name__ == "__main__":
    commands = {"tune": tune, "study": study, "page": page}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        raise SystemExit(f"usage: {sys.argv[0]} {{{'|'.join(commands)}}}")
    commands[sys.argv[1]]()
