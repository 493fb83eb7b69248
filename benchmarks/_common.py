"""Helpers shared by the benchmark scripts: where the traces are, and how to measure."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
HPC2N = TRACES / "HPC2N-2002-2.2-cln.swf.gz"
KTH = ROOT / "batsched_ml" / "data" / "KTH-SP2-1996-2.1-cln.swf.gz"


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def need(path: Path) -> Path:
    if not path.exists():
        raise SystemExit(f"missing {path}: the benchmarks read ../shared/traces")
    return path
