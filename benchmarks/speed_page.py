"""Write docs/speed.md and the README's speed table from the figures ``speed_table.py`` saved.

Usage::

    python benchmarks/speed_table.py --python --json benchmarks/results/speed-1-table.json
    python benchmarks/speed_table.py --repeat 1 --rows ricc-fcfs ... \
        --json benchmarks/results/speed-2-largest-traces.json
    python benchmarks/time_split.py --python --json benchmarks/results/split-3.json
    python benchmarks/time_split.py --python --traces HPC2N-2002-2.2-cln \
        --variant classification-idempotent --json benchmarks/results/split-4.json
    python benchmarks/compiled_parts.py --json benchmarks/results/parts-1.json
    python benchmarks/speed_page.py          # every benchmarks/results/speed*.json, in name order

A row measured again (``--rows hpc2n --json .../speed-again.json``) replaces the first
measure of that row when its file is named later.

The page is this script's text with the measured tables in it, nothing else:
``tests/test_speed_page.py`` renders the saved figures again and compares, so a number on the
page is always one the script measured, and the page changes only when the figures do.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from compiled_parts import render as render_parts
from time_split import render as render_split

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "speed.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- speed table: benchmarks/speed_page.py -->", "<!-- end of speed table -->"

TEMPLATE = """\
# Speed

What users wait for is the whole command, so `benchmarks/speed_table.py` runs each one as a
user would (`python -m batsched_ml ...` from an empty folder), {repeat} times, and reports the
median wall time (min-max) and the command's peak resident memory, next to its target, with the
package's byte code written first, as `pip install` does. With `--python` each row runs a second
time, interleaved, with `BATSCHED_ML_KERNEL=python`: what an install without a C compiler runs.
The machine's speed drifts from hour to hour: compare the ratios of one run, not absolute times
of two.

## The table

Measured on {date}, {cores} cores:

{table}

"result files" says whether both sides wrote the same `jobs.csv`, `predictions.csv`,
`classification.csv` and `summary.json`, byte for byte. A row with no second side (the largest
traces) was run with the compiled parts only.

## Where a command's time goes

`benchmarks/time_split.py` splits the whole `replay` command (median of {split_repeat},
measured on {split_date}; "no compiled part": `BATSCHED_ML_KERNEL=python`, run in turn with
the compiled one) into the imports, loading the trace, the replay, writing the files (with the
figures computed from them) and the rest (the interpreter's start and exit, the command line,
the run's record):

{split}

**Without a C compiler** the simulator and the scheduler run from their Python source, the
forests are walked in Python and grown by scikit-learn, numpy and Python read the files.
`benchmarks/compiled_parts.py` replaces one compiled part at a time by its reference (the
replay alone, median of {parts_repeat}, {parts_date}): the scheduler (its source), Batsim's
actors (Python generators on the compiled SimGrid kernel), the actors and the kernel; then
nothing is compiled. A machine without a compiler runs the compiled parts from a wheel built
where there is one ([how](getting-started.md#installing-where-there-is-no-c-compiler)).

{parts}

## Where the time goes, and why it is built this way

A replay is Batsim's side (the simulator) and the scheduler's side, talking message by message.

- **The scheduler is Python, one source for every run.** Queue orders, EASY, the predictors,
  the dispatchers, the classifier and the safeguard exist once, in `batsched_ml/scheduler/`
  and `batsched_ml/predict/`, and every replay, whatever its policy, variant or plug-in, is
  decided by them: an edit there reaches every run, and a plug-in queue order identical to
  FCFS gives FCFS's job table in FCFS's time.
- **The simulator is compiled.** `batsched_ml/sim/_csim.c` is Batsim's actors on SimGrid's
  kernel, transcribed from the Python simulator (`batsched_ml/sim/simulator.py`, which stays
  the reference), calling the scheduler's `handle` with the protocol's typed events. The tests
  compare the two simulators message by message and file by file
  (`tests/test_compiled_sim.py`), and both against real Batsim 4.2.1's recordings, the whole
  CTC-SP2 trace included. A run it does not take (forwarded profiles, several workloads, a
  workload it is not sure of) runs on the reference, with the same results.
- **A pass after a pass tests only the new jobs.** When nothing but submissions came since the
  previous pass (the same free machines, the same expected ends, the same head and shadow
  time), the jobs that pass refused are refused again (EASY's refusal only grows with time and
  with fewer free machines), so only the jobs queued since are tested
  (`batsched_ml/scheduler/easy.py`; `tests/test_easy.py` compares it with the whole walk).
- **The queue is kept from pass to pass.** Under a built-in order that does not change with
  time (FCFS, SPF, SAF, the LJF dispatcher's) and a starvation threshold, the queue is kept
  sorted between passes, and a job moves to the starving head once, when it starts starving,
  instead of every waiting job being tested, sorted and filtered at every pass
  (`core.py`): two thirds of the scheduler's time on RICC under SPF. Plug-in orders re-order
  the queue at each pass. From 256 jobs the kept queue is in blocks that know their least size
  and estimate, and EASY's walk behind the head passes over a block none of whose jobs may start
  (RICC under SPF: 1,293 jobs a walk, 8 tested; `speed_table.py --compare`: 0.87 and 0.88
  times the time under FCFS and SPF). `tests/test_policies.py` compares both with the walk.
- **Orders that change with time sort less.** WFP and PRB order the queue again at each
  pass. A WFP pass under EASY is given only what it uses: the jobs that start at the head, the
  head, and the jobs EASY backfills behind it. With hundreds waiting, the jobs are kept in
  groups of one size and estimate (`batsched_ml/scheduler/kinetic.py`), in arrival order, that
  pass or fail EASY's tests whole, under a kinetic tournament of the groups' first jobs: each
  node keeps the first of its two sides and the time until which that cannot change (a
  priority is, up to the rounding, the cube of a line in time). The comparisons are the exact
  ones, ties included (`tests/test_policies.py`, message by message; `tests/test_kinetic.py`,
  against a sort). A pass where no waiting job fits is skipped; PRB's sort starts from the
  last pass's order. Sorting every priority at each pass took minutes on RICC.
- **Machine sets are sorted runs of free machines** (`batsched_ml/alloc.py`): an allocation
  costs what its runs cost, and CEA-Curie's 93,312 processors cost per job what small ones do.
- **The scheduler is compiled from its own source.** mypyc compiles its hot modules
  (`batsched_ml.compiled.SCHEDULER_GROUP`) at install from the very `.py` files of the research
  surface: no second copy. They are used whole or not at all, and only where every file is the
  one the build was made from (`import batsched_ml` checks their SHA-256): after an edit of
  `easy.py` the group runs from its source, with a warning, until the next `pip install -e .`.
  From its source, the replay takes the "scheduler source" column's time above.
- **A classified run also waits for its side trainer**: a week's forest is trained on the jobs
  finished before the week starts, and the week's first job needs it
  (`benchmarks/trainer_wait.py`; the split above gives the trainer's weeks). Around the
  forests' growth little is left: a job's vote, and the trainer's rating of the last week's
  model, are one call each into the compiled walk (`_cforest.c`; its reference: `FastForest`);
  the grower keeps its threads and bootstrap samples from week to week; a week's ranks come
  from a hash table of each column's few distinct values, and its model is read without
  `numpy.load` (these two: 0.94 times the time on full HPC2N, `speed_table.py --compare`).
- **A command ends without a last pass over its objects.** A classified replay keeps millions
  alive to its end, which the interpreter's exit traversed (about a second of full HPC2N).
  `batsched-ml` freezes them once every file is closed (`cli.program`): with the trainer's
  importances summed in one pass, 0.95 times the time on full HPC2N and 0.91 on KTH-SP2
  (classification-idempotent, same files; `benchmarks/exit_time.py`: the exit alone).
- **A campaign's worker reads each trace once**, kept as a pickle: a run's copy takes 0.25 s,
  against 0.7 s to read full HPC2N; its files are `replay`'s (`tests/test_campaign.py`).
- **A replay does not load pandas** (with pyarrow, 0.3 s and 85 MiB of every command): the
  figures are numpy's (`batsched_ml/results/metrics.py`; `tests/test_metrics.py` compares them
  with pandas' to the last bit), the job table's figure columns are read from its rows by a
  compiled reader (`_cswf.c`). `speed_table.py --compare`, same files: KTH-SP2 under FCFS 0.70
  times the time (80 against 165 MiB), full HPC2N under FCFS 0.93 and WFP 0.91.

## The other benchmarks

Each script in `benchmarks/` says in its docstring what it measures; among them `bench_alloc.py`
(machine sets against bitmasks), `golden_check.py` (the golden set of run outputs a change must
leave byte-identical), `trainer_wait.py` and `gc_passes.py`.
"""


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _cell(seconds: list[float], peaks: list[float]) -> str:
    text = _seconds(statistics.median(seconds))
    if len(seconds) > 1:
        text += f" ({_seconds(min(seconds))}-{_seconds(max(seconds))})"
    return f"{text} s, {statistics.median(peaks):.0f} MiB"


def _within(row: dict[str, Any]) -> str:
    limit_seconds, limit_mib = row["targets"]
    ok = limit_seconds is None or statistics.median(row["seconds"]) <= limit_seconds
    ok = ok and (limit_mib is None or statistics.median(row["peaks"]) <= limit_mib)
    return "yes" if ok else "**no**"


def render_table(runs: list[dict[str, Any]]) -> str:
    """The table; a row measured on another day than the first file's says so (a machine of
    another day may be faster or slower: its time is not to be compared with the others'), and
    a row run fewer times than the first file's says how many (its time is no median of as
    many)."""
    lines = [
        "| what | target | compiled parts | within | no compiled part | ratio | result files |",
        "|---|---|---|---|---|---|---|",
    ]
    first = runs[0]["date"] if runs else ""
    repeat = runs[0]["repeat"] if runs else 0
    for data in runs:
        for row in data["rows"]:
            label = row["label"]
            if row.get("date", first) != first:
                label += f" (measured on {row['date']})"
            if len(row["seconds"]) < repeat:  # the page says how many runs each row had
                count = len(row["seconds"])
                label += f" ({count} run{'s' if count > 1 else ''})"
            cells = [label, row["target"], _cell(row["seconds"], row["peaks"])]
            cells.append(_within(row))
            if "other_seconds" in row and data["other"] == "python":
                ratio = statistics.median(row["other_seconds"]) / statistics.median(row["seconds"])
                cells += [
                    _cell(row["other_seconds"], row["other_peaks"]),
                    f"{ratio:.2f}",
                    row.get("result_files", "-"),
                ]
            else:
                cells += ["-", "-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def split_figures() -> dict[str, Any]:
    """The saved splits of a command's time (``time_split.py --json``), every file in name
    order: their rows, one after the other, and their dates."""
    paths = sorted((ROOT / "benchmarks" / "results").glob("split*.json"))
    saved = [json.loads(path.read_text()) for path in paths]
    dates = sorted({record["date"] for record in saved})
    return {"date": ", ".join(dates), "rows": [row for record in saved for row in record["rows"]]}


def parts_figures() -> dict[str, Any]:
    """The saved measure of what each compiled part buys (``compiled_parts.py --json``): the
    last file of ``parts*.json`` by name."""
    paths = sorted((ROOT / "benchmarks" / "results").glob("parts*.json"))
    figures: dict[str, Any] = json.loads(paths[-1].read_text())
    return figures


def render_page(
    runs: list[dict[str, Any]],
    split: dict[str, Any] | None = None,
    parts: dict[str, Any] | None = None,
) -> str:
    """The page: ``runs`` (:func:`load`), ``split`` and ``parts`` (default: the saved ones,
    :func:`split_figures`, :func:`parts_figures`)."""
    first = runs[0]
    split = split if split is not None else split_figures()
    parts = parts if parts is not None else parts_figures()
    return TEMPLATE.format(
        repeat=first["repeat"],
        date=first["date"],
        cores=first["cores"],
        table=render_table(runs),
        split=render_split(split["rows"]),
        split_repeat=split["rows"][0]["repeat"],
        split_date=split["date"],
        parts=render_parts(parts),
        parts_repeat=parts["repeat"],
        parts_date=parts["date"],
    )


def readme_block(runs: list[dict[str, Any]]) -> str:
    return (
        f"{BEGIN}\n{render_table(runs)}\n\nMeasured on {runs[0]['date']} by "
        f"`benchmarks/speed_table.py` (whole commands, median of {runs[0]['repeat']}); "
        f"more in [Speed](docs/speed.md).\n{END}"
    )


def with_readme_block(text: str, runs: list[dict[str, Any]]) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + readme_block(runs) + text[end:]


def figures() -> list[Path]:
    """The saved figures the pages are written from: their names give their order."""
    return sorted((ROOT / "benchmarks" / "results").glob("speed*.json"))


def load(paths: list[Path]) -> list[dict[str, Any]]:
    """The saved runs, in order; a row measured again in a later file replaces the earlier
    one (where it was), so a row can be remeasured without running the whole table."""
    runs = [json.loads(path.read_text()) for path in paths]
    for run in runs:  # each row keeps the day it was measured (rows move between files)
        for row in run["rows"]:
            row.setdefault("date", run["date"])
    latest = {row["row"]: (i, row) for i, run in enumerate(runs) for row in run["rows"]}
    for i, run in enumerate(runs):
        run["rows"] = [
            latest[row["row"]][1]
            for row in run["rows"]
            if latest[row["row"]][0] == i or _first(runs, row["row"]) == i
        ]
    seen: set[str] = set()
    for run in runs:
        kept = []
        for row in run["rows"]:
            if row["row"] not in seen:
                seen.add(row["row"])
                kept.append(row)
        run["rows"] = kept
    return runs


def _first(runs: list[dict[str, Any]], name: str) -> int:
    return next(i for i, run in enumerate(runs) if any(r["row"] == name for r in run["rows"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "figures",
        nargs="*",
        type=Path,
        help="speed_table.py --json files (default: benchmarks/results/speed*.json, by name)",
    )
    args = parser.parse_args(argv)
    runs = load(args.figures or figures())
    PAGE.write_text(render_page(runs))
    README.write_text(with_readme_block(README.read_text(), runs))
    print(f"wrote {PAGE.relative_to(ROOT)} and the table of {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
