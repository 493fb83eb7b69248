"""Print the image's runtime requirements: pyproject.toml's dependencies, with their version
bounds, minus the distributions named on the command line (the Dockerfile's LEAVE_OUT).

    python3 docker/requirements.py dask ortools pyarrow matplotlib > requirements.txt

A name that is not one of the dependencies is an error, so that a typo does not silently
leave a heavy package in the image. Used by docker/Dockerfile's builder stage."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def name_of(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement (``dask[distributed]>=1``
    gives ``dask``)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if found is None:
        raise SystemExit(f"requirements.py: cannot read the requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


def main(leave_out: list[str]) -> int:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    names = {name_of(requirement) for requirement in dependencies}
    unknown = sorted({name_of(n) for n in leave_out} - names)
    if unknown:
        raise SystemExit(
            f"requirements.py: not dependencies of batsched-ml: {', '.join(unknown)} "
            f"(they are: {', '.join(sorted(names))})"
        )
    dropped = {name_of(n) for n in leave_out}
    for requirement in dependencies:
        if name_of(requirement) not in dropped:
            print(requirement)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
