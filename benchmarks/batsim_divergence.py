"""Where the embedded simulator parts from a recording of real Batsim 4.2.1 (issue 17).

Feeds a recording's scheduler replies to :class:`~batsched_ml.sim.simulator.BatsimSimulator`
and compares, message by message, what it emits with what Batsim sent; then compares the job
tables. Prints the first differing message (both versions, shortened), how many messages and
events matched before it, and how many rows of the job table differ::

    python benchmarks/batsim_divergence.py ../shared/batsim-reference-long/ctc_sp2_full
    python benchmarks/batsim_divergence.py ../shared/batsim-reference/clock_drift

A recording's folder holds ``messages.jsonl`` (or ``.gz``), ``workload.json`` (or ``.gz``),
``platform.xml``, ``command.txt`` and ``out_jobs.csv`` (or ``.gz``). After the first difference
the replies no longer answer what the simulator sent, so only the first one is meaningful.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

from batsched_ml.protocol.codec import message_from_dict, message_to_dict
from batsched_ml.sim import jobs_csv
from batsched_ml.sim.simulator import BatsimSimulator, SimulationError
from batsched_ml.workload.platform import compute_host_names


def _read(folder: Path, name: str) -> str:
    plain, packed = folder / name, folder / f"{name}.gz"
    if plain.exists():
        return plain.read_text()
    with gzip.open(packed, "rt") as handle:
        return handle.read()


def _short(message: dict[str, Any], limit: int = 600) -> str:
    text = json.dumps(message)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def compare(folder: Path) -> int:
    records = [json.loads(line) for line in _read(folder, "messages.jsonl").splitlines()]
    command = (folder / "command.txt").read_text()
    sim = BatsimSimulator(
        [json.loads(_read(folder, "workload.json"))],
        compute_host_names(folder / "platform.xml"),
        dynamic_jobs="--enable-dynamic-jobs" in command,
        acknowledge_dynamic_jobs="--acknowledge-dynamic-jobs" in command,
        workload_paths=["/data/workload.json"],
    )
    recorded = [r["msg"] for r in records if r["dir"] == "batsim->sched"]
    replies = [r["msg"] for r in records if r["dir"] == "sched->batsim"]
    started = time.perf_counter()
    emitted = [message_to_dict(sim.start())]
    try:
        for reply in replies:
            out = sim.step(message_from_dict(reply))
            if out is None:
                break
            emitted.append(message_to_dict(out))
    except SimulationError as exc:
        print(f"the simulator stopped after {len(emitted)} messages: {exc}")
    seconds = time.perf_counter() - started
    events = 0
    first = None
    for index, (ours, theirs) in enumerate(zip(emitted, recorded, strict=False)):
        if ours != theirs:
            first = index
            break
        events += len(theirs["events"])
    total_events = sum(len(m["events"]) for m in recorded)
    print(f"{folder.name}: {len(recorded):,} Batsim messages, {total_events:,} events")
    if first is None and len(emitted) == len(recorded):
        print(f"all {len(recorded):,} messages identical ({seconds:.1f} s)")
    else:
        first = len(emitted) if first is None else first
        print(f"first difference at message {first:,} (after {events:,} identical events):")
        if first < len(recorded):
            print(f"  batsim: {_short(recorded[first])}")
        if first < len(emitted):
            print(f"  ours:   {_short(emitted[first])}")
    ours_rows = (
        jobs_csv.HEADER
        + "\n"
        + "".join(row if row.endswith("\n") else row + "\n" for row in sim.rows)
    )
    theirs_rows = _read(folder, "out_jobs.csv")
    a, b = ours_rows.splitlines(), theirs_rows.splitlines()
    mine = {line.split(",", 1)[0]: line for line in a[1:]}
    differ = sum(1 for line in b[1:] if mine.get(line.split(",", 1)[0]) != line)
    print(f"job table: {len(b) - 1:,} rows in Batsim's, {differ:,} differ from ours")
    return 0 if first is None and not differ and len(emitted) == len(recorded) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", nargs="+", type=Path)
    args = parser.parse_args(argv)
    return max(compare(folder) for folder in args.recording)


if __name__ == "__main__":
    sys.exit(main())
