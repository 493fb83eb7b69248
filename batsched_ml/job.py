"""The one job model of batsched-ml.

A :class:`Job` is what Batsim tells a scheduler about a job at submission: its id, submission
time, processors, walltime and profile name, plus every other key of the workload's job object
(``fields``; our converted traces carry the SWF user, executable, queue, partition, status and
requested time there). The simulator, the scheduler and the reports all use this one type;
their own per-run state (start time, allocation, class, ...) lives beside it, not in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Job:
    id: str
    subtime: float
    res: int
    walltime: float | None
    profile: str
    fields: dict[str, Any]

    # written out, not generated: compiled (mypyc), a generated __init__ stays interpreted
    # Python (see scheduler.parts.WaitingJob); object.__setattr__ as the generated one of a
    # frozen dataclass does
    def __init__(
        self,
        id: str,
        subtime: float,
        res: int,
        walltime: float | None,
        profile: str,
        fields: dict[str, Any],
    ) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "subtime", subtime)
        object.__setattr__(self, "res", res)
        object.__setattr__(self, "walltime", walltime)
        object.__setattr__(self, "profile", profile)
        object.__setattr__(self, "fields", fields)

    @classmethod
    def from_batsim(cls, job_id: str, obj: dict[str, Any]) -> Job:
        """Build from a Batsim job object (as in ``JOB_SUBMITTED.job``). A walltime of -1, or
        none, means "no walltime"."""
        walltime = obj.get("walltime")
        if walltime is not None and walltime <= 0:
            walltime = None
        # Job, not cls: a direct call when compiled (a compiled class has no interpreted
        # subclasses)
        return Job(
            id=job_id,
            subtime=obj.get("subtime", 0.0),
            res=obj["res"],
            walltime=walltime,
            profile=obj["profile"],
            fields=obj,
        )

    @property
    def workload(self) -> str:
        return self.id.partition("!")[0]

    @property
    def name(self) -> str:
        """The job's name inside its workload (the ``job_id`` column of Batsim's jobs.csv)."""
        return self.id.partition("!")[2]

    def field(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)
