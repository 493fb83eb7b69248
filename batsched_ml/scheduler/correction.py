"""Walltime correction (seed 002, Algorithm 2 and section 4.4): when a running job reaches its
expected end (within a minute), the scheduler extends its estimate instead of expecting it to
end at once.

- ``simple``: +1 hour at each correction, while the job has run at most 7 days;
- ``power``: the i-th correction adds 15 x 2^(i-2) minutes, i = 2, 3, ... (15, 30, 60 min, ...),
  as in EASY++.

Corrected estimates never exceed the requested time (Batsim kills the job there). The scheduler
applies corrections at the start of each pass, to every running job whose estimate ends within
:data:`MARGIN` seconds of ``now``, as many times as needed: decisions are only taken at passes,
so this gives the same reservations as correcting at the exact instants, deterministically.
"""

from __future__ import annotations

from dataclasses import dataclass

from batsched_ml import registry
from batsched_ml.errors import ConfigError

MARGIN = 60.0
WEEK = 7 * 86_400.0


@dataclass(frozen=True)
class Correction:
    name: str

    def step(self, count: int) -> float:
        """Seconds added by correction number ``count`` (1 for the first)."""
        if self.name == "simple":
            return 3600.0
        if self.name == "power":
            return 15 * 60.0 * 2.0 ** (count - 1)  # i = count + 1: 15 x 2^(i-2) minutes
        raise ValueError(f"unknown correction {self.name!r} (choose from simple, power)")

    def correct(
        self, est: float, elapsed: float, count: int, limit: float | None
    ) -> tuple[float, int]:
        """The estimate after the corrections due when the job has run ``elapsed`` seconds,
        and the new correction count. ``limit``: the requested time (``None``: no limit)."""
        while est - elapsed < MARGIN:
            if self.name == "simple" and elapsed > WEEK:
                break
            if limit is not None and est >= limit:
                break
            count += 1
            est += self.step(count)
            if limit is not None:
                est = min(est, limit)
        return est, count


def get_correction(name: str) -> Correction | None:
    if name == "none":
        return None
    if name not in registry.CORRECTIONS:
        known = ", ".join(registry.CORRECTIONS)
        raise ConfigError(f"unknown correction {name!r} (choose from {known})")
    return Correction(name)
