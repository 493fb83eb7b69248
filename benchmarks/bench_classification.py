"""Full HPC2N replay with FCFS and classification-idempotent, training included (issue 5 target:
under 5 minutes and 2 GiB on this 2-core machine). Prints wall time, its parts and peak memory."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from _common import HPC2N, need, peak_rss_mib

from batsched_ml.results.outputs import write_replay
from batsched_ml.runs.replaying import ReplayConfig, run_replay
from batsched_ml.workload.io import load_workload


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else HPC2N
    variant = sys.argv[2] if len(sys.argv) > 2 else "classification-idempotent"
    started = time.perf_counter()
    workload = load_workload(need(path))
    result = run_replay(workload, ReplayConfig(policy="fcfs", variant=variant))
    with tempfile.TemporaryDirectory() as out:
        summary = write_replay(result, out)
        timing = json.loads((Path(out) / "timing.json").read_text())
    elapsed = time.perf_counter() - started
    quality = summary.get("classification", {})
    print(
        f"{workload['trace']} fcfs {variant}: {elapsed:.0f} s in all, of which training "
        f"{timing.get('train_seconds', 0):.0f} s over {quality.get('weeks_with_model', 0)} weeks; "
        f"peak RSS {peak_rss_mib():.0f} MiB; mean bsld {summary['mean_bsld']:.2f}, "
        f"kills {summary['kills']:,}, accuracy {quality.get('accuracy', 0):.1%}"
    )


if __name__ == "__main__":
    main()
