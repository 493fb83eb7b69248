"""SimGrid platforms for Batsim: writing the homogeneous clusters we replay traces on, reading
the compute hosts of any cluster-style platform, and the routes of Batsim's messages on a
platform with link latencies (:func:`message_routes`).

The written platform follows the exact-timing conventions of the platforms recorded with real
Batsim 4.2.1 (``shared/batsim-reference``): links of 1 TBps with zero latency, so a ``delay`` job
finishes exactly ``delay`` seconds after it starts and every protocol timestamp is exact. Hosts are
one-core ``host0..hostN-1`` plus ``master_host0``, which carries Batsim's master role and is not a
resource.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
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
    """What keeps a platform from the exact timing (links of 1 TBps and latency 0, as the
    written platforms have), or None: a message between Batsim's actors then takes ``1e-12``
    s whatever its route; with a latency it takes its route's time, which
    :func:`message_routes` reads where it can. ``speed``: the hosts must compute at 1 Gflops
    too (Batsim 5 reports each host's speed, which the simulator does not read)."""
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
                only = "1Gf hosts only" if name == "speed" else "not 1TBps and latency 0"
                return f"{element.tag} {what}: {name}={value!r} ({only})"
    return None


# --- the routes of Batsim's messages on a platform with link latencies ---------------------------

# SimGrid's unit tables (xbt_parse_units.cpp), as its code builds them: each prefix multiplies
# the previous scale, in double
_TIME_UNITS = {"w": 7 * 24 * 60 * 60.0, "d": 24 * 60 * 60.0, "h": 60 * 60.0, "m": 60.0, "s": 1.0}
_TIME_UNITS |= {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}


def _bandwidth_units() -> dict[str, float]:
    units: dict[str, float] = {}
    for unit, value in (("bps", 0.125), ("Bps", 1.0)):
        for mult, prefixes in ((1024.0, "Ki Mi Gi Ti Pi Ei Zi Yi"), (1000.0, "k M G T P E Z Y")):
            units.setdefault(unit, value)
            scale = value
            for prefix in prefixes.split():
                scale *= mult
                units.setdefault(prefix + unit, scale)
    return units


_BANDWIDTH_UNITS = _bandwidth_units()
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
# TCP-gamma (SimGrid's default; Batsim does not set it): L07 bounds a transfer's rate by
# gamma / (2 x latency), which the recorded platforms never reach
_TCP_GAMMA = 4194304.0

# what the model reads of each element: the attributes of the recorded platforms
_CLUSTER = {"id", "prefix", "suffix", "radical", "speed", "bw", "lat", "bb_bw", "bb_lat"}
_LINK = {"id", "bandwidth", "latency"}
_ZONE_ROUTE = {"src", "dst", "gw_src", "gw_dst"}


def _value(text: str, units: dict[str, float], default: str) -> float | None:
    """A value as SimGrid reads it (``strtod``, then the unit's scale), or None."""
    match = _NUMBER.match(text)
    if match is None:
        return None
    unit = text[match.end() :] or default
    scale = units.get(unit)
    return None if scale is None else float(match.group()) * scale


@dataclass(frozen=True, slots=True)
class MessageRoutes:
    """The two routes Batsim's messages take on a platform with link latencies: from the master
    host to itself (every actor but a job's runs there, the server receives every message) and
    from a compute host to the master (a job's actor reports its end). Each is a transfer's
    ``(latency, rate)``, see :mod:`batsched_ml.sim.simgrid`'s design note."""

    master: tuple[float, float]
    from_compute: tuple[float, float]
    compute_hosts: frozenset[str]

    def route(self, src: str | None, dst: str | None) -> tuple[float, float]:
        """A transfer's latency and rate from ``src`` to ``dst`` (host names; None: master)."""
        if dst is None:
            if src is None:
                return self.master
            if src in self.compute_hosts:
                return self.from_compute
        raise ValueError(f"no route of Batsim's messages from {src or 'master'} to {dst}")


class _Refused(Exception):
    """What the latency model does not reproduce, named in one line."""


def message_routes(path: str | Path, *, speed: bool = False) -> MessageRoutes | None:
    """The routes of Batsim's messages on the platform at ``path``: None on an exact platform
    (:func:`inexact_links` finds nothing: every message takes 1e-12 s), else the routes, which
    the simulator reproduces exactly on the platforms shaped as the recorded one
    (``fcfs_small_latency``): one ``<zone routing="Full">`` holding a flat compute
    ``<cluster>``, a master ``<cluster>`` of one host (role ``master``), ``<link>`` elements and
    ``<zoneRoute>`` elements from the compute cluster to the master's, each element with the
    recorded attributes only (cluster links split-duplex, no loopback, no limiter). Anything
    else raises :class:`PlatformError` naming the element.

    The routes follow SimGrid's routing of such a platform (``StarZone`` clusters, the
    ``FullZone`` root, ``NetZoneImpl::get_global_route``), latencies summed in its order:

    * master to itself: the host's up link, the cluster's backbone (once: a star zone does not
      add a link twice), the host's down link;
    * compute host to master: the zoneRoute's links, then the host's up link and its cluster's
      backbone (to the cluster's router, which has no link), then the master cluster's backbone
      and the master's down link.

    The rate is the narrowest link's bandwidth (fair bottleneck of one 1-byte transfer). A route
    whose TCP-gamma bound (``4194304 / (2 x latency)``) is below that is refused.
    ``speed``: hosts must compute at 1 Gflops (Batsim 5 reports it)."""
    if inexact_links(path) is None:
        problem = inexact_links(path, speed=True) if speed else None
        if problem is not None:
            raise PlatformError(f"{path}: {problem}")
        return None
    try:
        return _routes(ET.parse(path).getroot(), speed)
    except (OSError, ET.ParseError) as exc:
        raise PlatformError(f"{path}: cannot read platform: {exc}") from exc
    except _Refused as exc:
        raise PlatformError(
            f"{path}: {exc} (link latencies are simulated on one flat compute cluster and a "
            "one-host master cluster joined by one zoneRoute only)"
        ) from None


def _routes(root: ET.Element, speed: bool) -> MessageRoutes:
    zones = list(root)
    if root.tag != "platform" or len(zones) != 1 or zones[0].tag != "zone":
        raise _Refused("platform: one <zone> only")
    zone = zones[0]
    if zone.get("routing") != "Full" or set(zone.attrib) - {"id", "routing"}:
        raise _Refused(f"zone {zone.get('id')}: routing='Full' only")
    clusters: dict[str, ET.Element] = {}
    links: dict[str, tuple[float, float]] = {}
    zone_routes: list[ET.Element] = []
    for element in zone:
        what = f"{element.tag} {element.get('id', element.get('src', ''))}".strip()
        allowed = {"cluster": _CLUSTER, "link": _LINK, "zoneRoute": _ZONE_ROUTE}.get(element.tag)
        if allowed is None:
            raise _Refused(f"{what}: not modelled")
        extra = sorted(set(element.attrib) - allowed)
        if extra:
            raise _Refused(f"{what}: attribute {extra[0]}={element.get(extra[0])!r} not modelled")
        missing = sorted(allowed - set(element.attrib) - {"suffix", "prefix"})
        if missing:
            raise _Refused(f"{what}: no {missing[0]}")
        if element.tag == "cluster":
            for child in element:
                if child.tag != "prop":
                    raise _Refused(f"{what}: <{child.tag}> not modelled")
            if speed and element.get("speed") != "1Gf":
                raise _Refused(f"{what}: speed={element.get('speed')!r} (1Gf hosts only)")
            clusters[element.get("id", "")] = element
        elif element.tag == "link":
            if len(element):
                raise _Refused(f"{what}: <{element[0].tag}> not modelled")
            links[element.get("id", "")] = (
                _time(element, "latency", what),
                _bandwidth(element, "bandwidth", what),
            )
        else:
            zone_routes.append(element)
    master = [c for c in clusters.values() if _role(c) == "master"]
    compute = [c for c in clusters.values() if _role(c) != "master"]
    if len(master) != 1 or len(compute) != 1:
        raise _Refused("platform: one compute cluster and one master cluster only")
    (master_cluster,) = master
    (compute_cluster,) = compute
    if len(_expand_radical(master_cluster.get("radical", ""))) != 1:
        raise _Refused(f"cluster {master_cluster.get('id')}: one master host only")
    compute_id, master_id = compute_cluster.get("id"), master_cluster.get("id")
    if len(zone_routes) != 1:
        raise _Refused("platform: one zoneRoute, from the compute cluster to the master's")
    (zone_route,) = zone_routes
    expected = {
        "src": compute_id,
        "dst": master_id,
        "gw_src": _router(compute_cluster),
        "gw_dst": _router(master_cluster),
    }
    for name, value in expected.items():
        if zone_route.get(name) != value:
            raise _Refused(f"zoneRoute: {name}={zone_route.get(name)!r}, not {value!r}")
    path: list[tuple[float, float]] = []
    seen: set[str] = set()
    for child in zone_route:
        if child.tag != "link_ctn" or set(child.attrib) != {"id"}:
            raise _Refused(f"zoneRoute: <{child.tag} {dict(child.attrib)}> not modelled")
        link = child.get("id", "")
        if link not in links:
            raise _Refused(f"zoneRoute: link_ctn {link!r} is not a <link> of the zone")
        if link in seen:
            raise _Refused(f"zoneRoute: link {link!r} twice")
        seen.add(link)
        path.append(links[link])
    host = _cluster_links(compute_cluster)
    home = _cluster_links(master_cluster)
    # master to itself: up, backbone, down
    master_route = [home[0], home[1], home[0]]
    # compute to master: zoneRoute, up and backbone to the router, backbone and down from it
    compute_route = [*path, host[0], host[1], home[1], home[0]]
    names = frozenset(
        f"{compute_cluster.get('prefix', '')}{i}{compute_cluster.get('suffix', '')}"
        for i in _expand_radical(compute_cluster.get("radical", ""))
    )
    return MessageRoutes(_cost(master_route), _cost(compute_route), names)


def _cost(route: list[tuple[float, float]]) -> tuple[float, float]:
    latency = 0.0
    for link_latency, _ in route:  # *latency += link->get_latency(), in route order
        latency += link_latency
    rate = min(bandwidth for _, bandwidth in route)
    if latency > 0 and _TCP_GAMMA / (2.0 * latency) < rate:
        raise _Refused(f"a route of latency {latency} s: its TCP-gamma bound is not modelled")
    if not rate > 0:
        raise _Refused("a route without bandwidth")
    return latency, rate


def _role(cluster: ET.Element) -> str:
    for prop in cluster.findall("prop"):
        if prop.get("id") == "role":
            return prop.get("value", "")
    return ""


def _router(cluster: ET.Element) -> str:
    """A flat cluster's router: prefix + id + ``_router`` + suffix."""
    return f"{cluster.get('prefix', '')}{cluster.get('id', '')}_router{cluster.get('suffix', '')}"


def _cluster_links(cluster: ET.Element) -> tuple[tuple[float, float], tuple[float, float]]:
    """A cluster's host link (each direction of its split-duplex pair) and backbone."""
    what = f"cluster {cluster.get('id')}"
    host = (_time(cluster, "lat", what), _bandwidth(cluster, "bw", what))
    backbone = (_time(cluster, "bb_lat", what), _bandwidth(cluster, "bb_bw", what))
    if not (backbone[0] > 0 or backbone[1] > 0):
        raise _Refused(f"{what}: no backbone")
    return host, backbone


def _time(element: ET.Element, name: str, what: str) -> float:
    value = _value(element.get(name, ""), _TIME_UNITS, "s")
    if value is None or not value >= 0:
        raise _Refused(f"{what}: {name}={element.get(name)!r} not read")
    return value


def _bandwidth(element: ET.Element, name: str, what: str) -> float:
    value = _value(element.get(name, ""), _BANDWIDTH_UNITS, "Bps")
    if value is None or not value > 0:
        raise _Refused(f"{what}: {name}={element.get(name)!r} not read")
    return value
