"""Input shaking: perturbed copies of a workload, to tell a real difference from a trace's accident.

Tsafrir, Ouaknine and Feitelson ("Reducing Performance Evaluation Sensitivity and Variability by
Input Shaking", MASCOTS 2007) observed that one replay of one trace can show an effect that
vanishes under tiny changes of the input, because a few jobs happen to fit or not. They replay
several copies of the trace, each with small random changes, and report the average.

Here a copy moves each job's submission time by a whole number of seconds drawn uniformly from
``[-seconds, +seconds]`` (clamped at 0, so no job moves before the trace starts), with a
:class:`numpy.random.Generator` seeded by ``seed``: the same seed gives the same copy, byte for
byte. Job ids, sizes, runtimes and requested times are unchanged; the jobs are put back in
submission order (stable, so jobs that land on the same second keep their trace order), as
Batsim submits them. Seed 0 is the trace itself, unshaken, so that a study's copies are
``0, 1, ..., n-1`` and copy 0 is the unshaken baseline every other table reports.

The amount: one minute by default, small against the waits being compared (hours on the
paper's traces) and against the classifier's weekly windows, so a copy is the same workload
with the accidents of who-arrives-first redrawn. A study states its own (``--shake-seconds``).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from batsched_ml.registry import SHAKE_SECONDS as DEFAULT_SECONDS


def shake(workload: dict[str, Any], seed: int, seconds: int = DEFAULT_SECONDS) -> dict[str, Any]:
    """A copy of the Batsim ``workload`` with every job's ``subtime`` moved by a random whole
    number of seconds in ``[-seconds, seconds]`` (see the module docstring); ``seed`` 0 returns
    an unchanged copy. The copy records ``shaking: {"seed", "seconds"}``."""
    if seed < 0:
        raise ValueError(f"a shaking seed is 0 (no shaking) or positive, not {seed}")
    if seconds < 0:
        raise ValueError(f"a shaking amount is at least 0 seconds, not {seconds}")
    out = copy.deepcopy(workload)
    if seed == 0 or seconds == 0:
        return out
    jobs = out["jobs"]
    shifts = np.random.default_rng(seed).integers(-seconds, seconds, size=len(jobs), endpoint=True)
    for job, shift in zip(jobs, shifts.tolist(), strict=True):
        subtime = job["subtime"]
        moved = max(0, subtime + shift)
        job["subtime"] = moved if isinstance(subtime, int) else float(moved)
    jobs.sort(key=lambda job: job["subtime"])  # stable: ties keep the trace's order
    out["shaking"] = {"seed": seed, "seconds": seconds}
    return out
