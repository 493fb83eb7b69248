"""The starvation threshold's trade-off on KTH-SP2 (and SDSC-SP2 if present): mean bounded
slowdown and maximum wait of SPF and SAF for several thresholds. Backs the default (72 h)."""

from __future__ import annotations

from _common import KTH, TRACES

from batsched_ml.results.metrics import summarize
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload

HOURS = [None, 12, 24, 48, 72, 168]


def table_of(rows: list[str]):
    import io

    import pandas as pd

    from batsched_ml.sim.jobs_csv import HEADER

    return pd.read_csv(io.StringIO(HEADER + "\n" + "\n".join(rows) + "\n"), dtype={"job_id": str})


def main() -> None:
    for path in (KTH, TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz"):
        if not path.exists():
            continue
        workload = load_workload(path)
        print(f"{workload['trace']}: mean bsld / max wait (h) by threshold")
        print("policy " + " ".join(f"{('none' if h is None else f'{h} h'):>16}" for h in HOURS))
        for policy in ("fcfs", "spf", "saf"):
            cells = []
            for hours in HOURS:
                threshold = None if hours is None else hours * 3600.0
                result = run_replay(
                    workload, ReplayConfig(policy=policy, starvation_threshold=threshold)
                )
                summary = summarize(table_of(result.rows), nb_machines=workload["nb_res"])
                cells.append(f"{summary['mean_bsld']:7.2f} / {summary['max_wait'] / 3600:5.0f}")
            print(f"{policy:6} " + " ".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
