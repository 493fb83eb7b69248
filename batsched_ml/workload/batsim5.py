"""Workloads for Batsim 5: the same JSON as Batsim 4's but for the names of the profile types.

Batsim 5 names a profile type after its batprotocol table (``"type": "DelayProfile"`` for
Batsim 4's ``"delay"``) and reads of a job only ``id``, ``subtime``, ``res``, ``profile``,
``walltime`` and ``extra_data`` (a string, or an object it forwards as compact JSON text).
:func:`to_batsim5` writes a workload so (the job's other fields, such as a converted trace's
``user`` or ``swf_requested_time``, go into ``extra_data``, which the Batsim 5 codec gives the
scheduler back as fields of the job); :func:`from_batsim5` reads one into the simulators'
form, and refuses a Batsim 4 workload with one line.
"""

from __future__ import annotations

from typing import Any

from batsched_ml.workload.io import WorkloadError

#: Batsim 4's profile types and Batsim 5's names of them (the types the simulators run)
PROFILE_TYPES = {"delay": "DelayProfile"}
#: the fields of a job Batsim 5 reads
JOB_FIELDS = ("id", "subtime", "res", "profile", "walltime", "extra_data")


def to_batsim5(workload: dict[str, Any]) -> dict[str, Any]:
    """A Batsim 4 workload as Batsim 5 reads it (a new object; ``workload`` is unchanged)."""
    profiles = {}
    for name, profile in workload.get("profiles", {}).items():
        kind = profile.get("type")
        profiles[name] = {**profile, "type": PROFILE_TYPES.get(kind, kind)}
    jobs = []
    for job in workload["jobs"]:
        extra = {k: v for k, v in job.items() if k not in JOB_FIELDS}
        out = {k: v for k, v in job.items() if k in JOB_FIELDS}
        if extra:
            if "extra_data" in job:
                raise ValueError(f"job {job.get('id')}: has extra_data and other fields")
            out["extra_data"] = extra
        jobs.append(out)
    return {**workload, "jobs": jobs, "profiles": profiles}


def from_batsim5(workload: dict[str, Any], path: str) -> dict[str, Any]:
    """A Batsim 5 workload (read from ``path``) in the simulators' form: its profile types
    under Batsim 4's names. A profile typed with a Batsim 4 name is refused, as Batsim 5
    refuses it."""
    profiles = {}
    v4_names = {v5: v4 for v4, v5 in PROFILE_TYPES.items()}
    for name, profile in workload.get("profiles", {}).items():
        kind = profile.get("type") if isinstance(profile, dict) else None
        if kind in PROFILE_TYPES:
            raise WorkloadError(
                f"{path}: profile {name!r}: type {kind!r} is Batsim 4's name; Batsim 5 reads "
                f"{PROFILE_TYPES[kind]!r} (convert the workload with `batsched-ml workload "
                "convert --batsim 5`, or run the stand-in with --protocol 4)"
            )
        profiles[name] = {**profile, "type": v4_names.get(kind, kind)} if kind else profile
    return {**workload, "profiles": profiles}
