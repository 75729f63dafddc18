"""The agent's telemetry loop: read the cluster's device exporters, tell the cluster's scheduler
which devices are in fatal error and how busy they are, report the readings to the hub.

Every `interval_s` (default 10 s) the loop reads the backend's devices (`backend.telemetry()`).

- Marks: per node, each device's load band and the devices in fatal error, written to the
  backend (`mark_devices`: the node annotation the extender reads, and from which the agent's
  own inventory reports the devices unhealthy to the hub) whenever they changed; a fault so
  takes its device out of service at the next read. A node no exporter has read since the
  agent started is not written to (a cluster without exporters gets no node writes).
- Report: the hub gets a device's reading only when it is new, its fault changed, or it moved
  beyond `Thresholds` since it was last sent, and each reading at least every `refresh_s`;
  the first report after the agent (re)connects is full. A fault carries the jobs whose pods
  hold the device (their failure policy acts on the hub's event). Reports are at most
  `MAX_DEVICES_PER_REPORT` devices each, so the rate is bounded by the interval.

Failures never stop the loop: a hub that cannot be reached gets a full report once it can.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from cluster_agents.agent.backend import ClusterBackend, PodStatus
from cluster_agents.agent.hub_client import HubApi, HubRejected, HubUnavailable
from federation.aio import sleep_unless_stopped
from federation.wire.telemetry import (
    MAX_DEVICES_PER_REPORT,
    DeviceTelemetry,
    Marks,
    NodeMarks,
    TelemetryReport,
    load_band,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Thresholds:
    """How far a reading must move before the hub hears of it again."""

    utilization: float = 5.0  # percent points
    memory_fraction: float = 0.05  # of the device's memory
    temperature_c: float = 3.0
    refresh_s: float = 300.0  # every reading at least this often


def moved(old: DeviceTelemetry, new: DeviceTelemetry, limits: Thresholds) -> bool:
    """Whether `new` differs from `old` enough to be sent."""
    if old.fault != new.fault:
        return True
    for a, b, limit in (
        (old.utilization, new.utilization, limits.utilization),
        (old.temperature_c, new.temperature_c, limits.temperature_c),
        (
            old.memory_used_mib,
            new.memory_used_mib,
            limits.memory_fraction * (new.memory_total_mib or 0) or 1024,
        ),
    ):
        if (a is None) != (b is None) or (a is not None and b is not None and abs(a - b) >= limit):
            return True
    return False


def node_marks(readings: list[DeviceTelemetry], sizes: dict[tuple[str, str], int]) -> Marks:
    """Per node and flavor: each device's load band (None: no reading) and those in fault."""
    found: dict[str, dict[str, tuple[list[int | None], set[int]]]] = defaultdict(dict)
    for (node, flavor), size in sizes.items():
        found[node][flavor] = ([None] * size, set())
    for r in readings:
        entry = found.get(r.node, {}).get(r.flavor)
        if entry is None or r.index >= len(entry[0]):
            continue
        if r.utilization is not None:
            entry[0][r.index] = load_band(r.utilization)
        if r.fault:
            entry[1].add(r.index)
    return {
        node: {f: (tuple(load), frozenset(down)) for f, (load, down) in flavors.items()}
        for node, flavors in found.items()
    }


def _telling(marks: NodeMarks) -> bool:
    """Whether a node's marks say anything (a load or a fault): a node no exporter reads is
    not written to until one does."""
    return any(down or any(band is not None for band in load) for load, down in marks.values())


def holders(reading: DeviceTelemetry, pods: list[PodStatus]) -> list[uuid.UUID]:
    """Jobs whose running or pending pods hold the device (on its node, by index)."""
    return sorted(
        {
            uuid.UUID(p.job)
            for p in pods
            if p.node == reading.node
            and reading.index in p.devices
            and p.phase in ("Pending", "Running")
        }
    )


class TelemetryLoop:
    """Reads, marks and reports device telemetry for one agent (see the module doc)."""

    def __init__(
        self,
        backend: ClusterBackend,
        hub: HubApi,
        *,
        interval_s: float = 10.0,
        thresholds: Thresholds = Thresholds(),
    ) -> None:
        self.backend = backend
        self.hub = hub
        self.interval_s = interval_s
        self.thresholds = thresholds
        self._sent: dict[tuple[str, str, int], tuple[DeviceTelemetry, float]] = {}
        self._marks: Marks = {}
        self.full = True  # the next report replaces what the hub holds
        # the last reading of every device, by (node, flavor, index): services that scale by
        # their devices' utilization read it; `on_reading` is called after each read
        self.latest: dict[tuple[str, str, int], DeviceTelemetry] = {}
        self.on_reading: Callable[[], None] = lambda: None

    def resync(self) -> None:
        """Send a full report next (the hub may have lost what it had)."""
        self.full = True

    async def run(self, stop: asyncio.Event) -> None:
        """Read, mark and report every `interval_s` until `stop`."""
        while not stop.is_set():
            try:
                await self.step()
            except (HubUnavailable, HubRejected) as exc:
                log.info("telemetry not reported: %s", exc)
                self.full = True
            except Exception as exc:  # the cluster's API or an exporter failed: next time
                log.warning("telemetry failed (%s); retrying", exc)
            await sleep_unless_stopped(stop, self.interval_s)

    async def step(self) -> None:
        """One read: mark what changed, report what moved."""
        readings = await self.backend.telemetry()
        self.latest = {r.key: r for r in readings}
        self.on_reading()
        await self._mark(readings)
        await self._report(readings)

    async def _mark(self, readings: list[DeviceTelemetry]) -> None:
        sizes: dict[tuple[str, str], int] = defaultdict(int)
        for info in self.backend.nodes():
            for device in info.devices:
                key = (info.name, device.flavor)
                sizes[key] = max(sizes[key], device.index + 1)
        marks = node_marks(readings, sizes)
        for node, flavors in marks.items():
            known = self._marks.get(node)
            if known != flavors and (known is not None or _telling(flavors)):
                await self.backend.mark_devices(node, flavors)
                self._marks[node] = flavors
        self._marks = {n: m for n, m in self._marks.items() if n in marks}

    async def _report(self, readings: list[DeviceTelemetry]) -> None:
        now = time.monotonic()
        full = self.full
        due = [
            r
            for r in readings
            if full
            or r.key not in self._sent
            or moved(self._sent[r.key][0], r, self.thresholds)
            or now - self._sent[r.key][1] >= self.thresholds.refresh_s
        ]
        if not due and not full:
            return
        pods = self.backend.pods() if any(r.fault for r in due) else []
        due = [r.model_copy(update={"jobs": holders(r, pods)}) if r.fault else r for r in due]
        for start in range(0, max(len(due), 1), MAX_DEVICES_PER_REPORT):
            chunk = due[start : start + MAX_DEVICES_PER_REPORT]
            await self.hub.telemetry(TelemetryReport(full=full and start == 0, devices=chunk))
        self.full = False
        if full:
            self._sent = {}
        self._sent.update((r.key, (r, now)) for r in due)
