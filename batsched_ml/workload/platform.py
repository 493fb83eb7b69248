"""SimGrid platforms for Batsim: writing the homogeneous clusters we replay traces on, and reading
the compute hosts of any cluster-style platform.

The written platform follows the exact-timing conventions of the platforms recorded with real
Batsim 4.2.1 (``shared/batsim-reference``): links of 1 TBps with zero latency, so a ``delay`` job
finishes exactly ``delay`` seconds after it starts and every protocol timestamp is exact. Hosts are
one-core ``host0..hostN-1`` plus ``master_host0``, which carries Batsim's master role and is not a
resource.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from batsched_ml.errors import UserError

_TEMPLATE = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
<zone id="AS0" routing="Full">
    <cluster id="compute" prefix="host" suffix="" radical="0-{last}"
        speed="1Gf" bw="1TBps" lat="0" bb_bw="1TBps" bb_lat="0"/>

    <cluster id="master" prefix="master_host" suffix="" radical="0-0"
        speed="1Gf" bw="1TBps" lat="0" bb_bw="1TBps" bb_lat="0">
        <prop id="role" value="master"/>
    </cluster>

    <link id="backbone" bandwidth="1TBps" latency="0"/>

    <zoneRoute src="compute" dst="master" gw_src="hostcompute_router" \
gw_dst="master_hostmaster_router">
        <link_ctn id="backbone"/>
    </zoneRoute>
</zone>
</platform>
"""


class PlatformError(UserError, ValueError):
    """A platform file we cannot read."""


def platform_xml(nb_hosts: int) -> str:
    """The platform XML of a cluster of ``nb_hosts`` one-core compute hosts plus the master."""
    if nb_hosts < 1:
        raise ValueError(f"a platform needs at least one compute host, got {nb_hosts}")
    return _TEMPLATE.format(last=nb_hosts - 1)


def write_platform(path: str | Path, nb_hosts: int) -> None:
    Path(path).write_text(platform_xml(nb_hosts))


def _expand_radical(radical: str) -> list[int]:
    numbers: list[int] = []
    for part in radical.split(","):
        part = part.strip()
        if "-" in part:
            low, high = part.split("-", 1)
            numbers.extend(range(int(low), int(high) + 1))
        elif part:
            numbers.append(int(part))
    return numbers


def compute_host_names(path: str | Path) -> list[str]:
    """Names of the compute hosts of a platform, in resource-id order.

    Reads ``<cluster>`` (prefix + radical + suffix) and ``<host>`` elements and leaves out hosts
    with the ``master`` role, as Batsim does with its default options. Batsim numbers resources
    in SimGrid's host order, which is the *string* order of the names: ``host10`` gets id 2 on a
    16-host cluster (recorded in ``shared/batsim-reference/easy_backfill``). Interval sets in the
    protocol are over these ids, so the mapping matters only to someone reading host names.
    """
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise PlatformError(f"{path}: cannot read platform: {exc}") from exc
    names: list[str] = []
    for element in root.iter():
        role = ""
        for prop in element.findall("prop"):
            if prop.get("id") == "role":
                role = prop.get("value", "")
        if element.tag == "cluster":
            if role == "master":
                continue
            prefix, suffix = element.get("prefix", ""), element.get("suffix", "")
            names += [f"{prefix}{i}{suffix}" for i in _expand_radical(element.get("radical", ""))]
        elif element.tag == "host":
            if role == "master" or element.get("id") == "master_host":
                continue
            names.append(element.get("id", ""))
    if not names:
        raise PlatformError(f"{path}: no compute host")
    return sorted(names)


def batsim5_host_order(names: list[str]) -> list[str]:
    """The compute hosts in Batsim 5's resource-id order: sorted by name with runs of digits
    compared as numbers (``host2`` before ``host10``; Batsim 5's
    ``sort_machines_by_ascending_name``), where Batsim 4 keeps SimGrid's string order."""

    def key(name: str) -> tuple[list[str | int], str]:
        parts = re.split(r"(\d+)", name)
        return [int(p) if i % 2 else p for i, p in enumerate(parts)], name

    return sorted(names, key=key)


_ZERO_LATENCY = re.compile(r"0*\.?0*\s*[a-z]*")


def inexact_links(path: str | Path, *, speed: bool = False) -> str | None:
    """What keeps a platform from the exact timing the embedded simulator reproduces (links
    of 1 TBps and latency 0, as the written platforms have), or None: a message between
    Batsim's actors then takes ``1e-12`` s; with a latency it takes longer, which the
    simulator does not model. ``speed``: the hosts must compute at 1 Gflops too (Batsim 5
    reports each host's speed, which the simulator does not read)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise PlatformError(f"{path}: cannot read platform: {exc}") from exc
    attributes = {"cluster": ("bw", "lat", "bb_bw", "bb_lat"), "link": ("bandwidth", "latency")}
    if speed:
        attributes = {"cluster": (*attributes["cluster"], "speed"), "host": ("speed",)} | {
            "link": attributes["link"]
        }
    for element in root.iter():
        for name in attributes.get(element.tag, ()):
            value = element.get(name)
            if value is None:
                continue
            if "lat" in name:
                exact = _ZERO_LATENCY.fullmatch(value) is not None
            else:
                exact = value == ("1Gf" if name == "speed" else "1TBps")
            if not exact:
                what = element.get("id", element.tag)
                return (
                    f"{element.tag} {what}: {name}={value!r} (1TBps, latency 0"
                    f"{' and 1Gf hosts' if speed else ''} only)"
                )
    return None
