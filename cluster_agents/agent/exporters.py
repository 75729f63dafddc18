"""Reading the vendors' device exporters: scrape, parse the Prometheus text format, map series
to (node, flavor, device index) through the catalog's `telemetry` profiles.

An exporter's series name a device by the profile's `device_label` (its index on the node) and
a node by `node_label` where the exporter has one; otherwise the series belong to the node the
scraped endpoint was configured for. A vendor is recognized by its metric names, so one
endpoint may serve any vendor (and several endpoints one node). Negative values (exporters'
"unsupported") count as not given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from federation.catalog import TelemetryMetric, TelemetryProfile, Vendor
from federation.wire.agent import NodeInfo
from federation.wire.telemetry import DeviceTelemetry

log = logging.getLogger(__name__)

MAX_BODY = 8 << 20  # bytes read from one exporter


@dataclass(frozen=True)
class ExporterTarget:
    """An endpoint to scrape, and the node its series belong to when they do not say ("")."""

    url: str
    node: str = ""


@dataclass(frozen=True)
class ExporterPods:
    """Exporter pods found by label (a DaemonSet's): `selector` (a Kubernetes label
    selector), the `port` and `path` of their metrics; each pod serves its own node."""

    selector: str
    port: int
    path: str = "/metrics"

    def targets(self, pods: Iterable[Mapping[str, Any]]) -> list[ExporterTarget]:
        """The running pods' endpoints (pod IP, or the node's for a host-network pod)."""
        found = []
        for pod in pods:
            status, spec = pod.get("status") or {}, pod.get("spec") or {}
            ip, node = status.get("podIP"), spec.get("nodeName")
            if status.get("phase") == "Running" and ip and node:
                host = f"[{ip}]" if ":" in ip else ip
                found.append(ExporterTarget(f"http://{host}:{self.port}{self.path}", node))
        return found


@dataclass
class Reading:
    """One device as one exporter reports it (values in Suanpan's units)."""

    vendor: Vendor
    node: str
    index: int
    utilization: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    memory_free_mib: float | None = None
    temperature_c: float | None = None
    fault: str = ""


# a profile's series -> the reading's field it fills
SERIES = {
    "utilization": "utilization",
    "memory_used": "memory_used_mib",
    "memory_total": "memory_total_mib",
    "memory_free": "memory_free_mib",
    "temperature": "temperature_c",
}


def parse(text: str, profiles: Mapping[Vendor, TelemetryProfile], node: str = "") -> list[Reading]:
    """Every device reading in an exposition; raises ValueError when the text is not one."""
    # metric name -> vendor, profile, the reading's field ("": health), the series
    wanted: dict[str, tuple[Vendor, TelemetryProfile, str, TelemetryMetric]] = {}
    for vendor, profile in profiles.items():
        for series, target in SERIES.items():
            metric = getattr(profile, series)
            if metric is not None:
                wanted[metric.metric] = (vendor, profile, target, metric)
        if profile.health is not None:
            wanted[profile.health.metric] = (vendor, profile, "", profile.health)
    found: dict[tuple[Vendor, str, int], Reading] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            entry = wanted.get(sample.name)
            if entry is None:
                continue
            vendor, profile, target, metric = entry
            try:
                index = int(sample.labels.get(profile.device_label, ""))
            except ValueError:
                continue
            where = sample.labels.get(profile.node_label, "") if profile.node_label else ""
            reading = found.setdefault(
                (vendor, where or node, index), Reading(vendor, where or node, index)
            )
            value = sample.value
            if not target:
                if value in profile.fatal:
                    reading.fault = f"{metric.metric}={value:g}"
            elif value >= 0:  # negative: unsupported (NaN fails this too)
                scaled = value * metric.scale
                setattr(reading, target, min(scaled, 100.0) if target == "utilization" else scaled)
    return [r for r in found.values() if r.node and r.index >= 0]


def device_readings(
    readings: Iterable[Reading], nodes: Iterable[NodeInfo]
) -> list[DeviceTelemetry]:
    """Readings of devices the inventory has, as the hub takes them: each vendor's device on a
    node is the node's device of that vendor's flavor with that index; others are dropped."""
    flavors: dict[tuple[str, str], dict[int, str]] = {}
    for node in nodes:
        for device in node.devices:
            vendor = device.flavor.split("/", 1)[0]
            flavors.setdefault((node.name, vendor), {})[device.index] = device.flavor
    out: dict[tuple[str, str, int], DeviceTelemetry] = {}
    for r in readings:
        flavor = flavors.get((r.node, r.vendor.value), {}).get(r.index)
        if flavor is None:
            continue
        total = r.memory_total_mib
        if total is None and r.memory_free_mib is not None and r.memory_used_mib is not None:
            total = r.memory_used_mib + r.memory_free_mib
        out[(r.node, flavor, r.index)] = DeviceTelemetry(
            node=r.node,
            flavor=flavor,
            index=r.index,
            utilization=None if r.utilization is None else round(r.utilization, 1),
            memory_used_mib=None if r.memory_used_mib is None else round(r.memory_used_mib),
            memory_total_mib=None if total is None else round(total),
            temperature_c=None if r.temperature_c is None else round(r.temperature_c, 1),
            fault=r.fault,
        )
    return list(out.values())


async def scrape(
    session: aiohttp.ClientSession,
    targets: Iterable[ExporterTarget],
    profiles: Mapping[Vendor, TelemetryProfile],
    timeout_s: float = 5.0,
) -> list[Reading]:
    """Read every target concurrently; one that fails is logged and contributes nothing."""

    async def one(target: ExporterTarget) -> list[Reading]:
        try:
            async with session.get(
                target.url, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                response.raise_for_status()
                body = await response.content.read(MAX_BODY)
            return parse(body.decode("utf-8", "replace"), profiles, target.node)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("cannot read exporter %s: %s", target.url, exc)
            return []

    results = await asyncio.gather(*(one(t) for t in targets))
    return [r for found in results for r in found]
